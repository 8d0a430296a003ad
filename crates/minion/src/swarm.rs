//! Swarm mode (Salt's minionswarm): many minion identities in one
//! process, each with its own Ed25519 key, its own session and its own
//! grains, sharing one link to the master. For tests and benchmarks only.
//!
//! The keys are generated once and kept in one file under the swarm's
//! directory (`<root>/identities`, [`load_or_create_keys`]), so a swarm
//! restarted, or a benchmark run again, has the same identities: one
//! file written with one sync, where a file per identity cost two
//! fsyncs each (15 s for 1,000 identities on a loaded disk).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use halite_transport::Shutdown;
use serde_json::{json, Map, Value};

use crate::config::MinionConfig;
use crate::daemon::{link_settings, wait_to_reconnect};
use crate::link::{run_link, Agent, JobOutputs, LinkEnd};
use crate::runner::{HostRunner, JobRunner};
use crate::store::ReturnStore;

/// The grains swarm identity `n` of `prefix` reports: varied, so
/// targeting by grain has something to select.
pub fn swarm_grains(prefix: &str, n: usize) -> Map<String, Value> {
    let os = ["Ubuntu", "Debian", "CentOS", "Fedora"][n % 4];
    let role = ["web", "db", "cache"][n % 3];
    let mut g = Map::new();
    g.insert("id".into(), json!(format!("{prefix}{n}")));
    g.insert("os".into(), json!(os));
    g.insert("roles".into(), json!([role]));
    g.insert("swarm_index".into(), json!(n));
    // Loopback plus an address of its own in 10.0.0.0/8 (identity n is
    // 10.<n's bytes>), so ipcidr targets (-S, S@) have something to select.
    let b = n.to_be_bytes();
    let own = format!(
        "10.{}.{}.{}",
        b[b.len() - 3],
        b[b.len() - 2],
        b[b.len() - 1]
    );
    g.insert("ipv4".into(), json!(["127.0.0.1", own]));
    g
}

/// Each swarm identity's id and the grains it reports.
pub type SwarmGrains = Vec<(String, Map<String, Value>)>;

/// The file under a swarm's directory holding every identity's key: one
/// line `<id> <PKCS#8 hex>` each.
pub const KEYS_FILE: &str = "identities";

/// The keys of identities `<prefix>0..<prefix><count-1>` under `root`:
/// read from [`KEYS_FILE`], from a key of the older one-file-per-identity
/// layout (`<root>/<id>/minion.pem`), or generated; the file is written
/// again (one write, one sync) only when a key was added. A benchmark
/// reads the same file to pre-accept the identities on its master.
pub fn load_or_create_keys(
    root: &Path,
    prefix: &str,
    count: usize,
) -> anyhow::Result<Vec<(String, halite_proto::Identity)>> {
    use anyhow::Context;
    halite_proto::keyfile::ensure_private_dir(root)?;
    let path = root.join(KEYS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut kept: HashMap<&str, &str> = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some(id), Some(key), None) => {
                kept.insert(id, key);
            }
            (None, ..) => {}
            _ => anyhow::bail!(
                "{} line {} is not `<id> <key>`; remove the file to have new keys generated",
                path.display(),
                n + 1
            ),
        }
    }
    let mut keys = Vec::with_capacity(count);
    let mut added = false;
    for n in 0..count {
        let id = format!("{prefix}{n}");
        halite_proto::validate_minion_id(&id)?;
        let legacy = root.join(&id).join("minion.pem");
        let identity = match kept.get(id.as_str()) {
            Some(hex_key) => identity_from_hex(hex_key)
                .with_context(|| format!("{}: the key of {id}", path.display()))?,
            None if legacy.is_file() => {
                added = true;
                halite_proto::keyfile::load_or_create_identity(&root.join(&id), "minion")?
            }
            None => {
                added = true;
                halite_proto::Identity::generate()?
            }
        };
        keys.push((id, identity));
    }
    if added {
        // Every key already in the file is kept, in its order, then ours.
        let mut out = String::with_capacity(text.len() + count * 110);
        let ours: std::collections::HashSet<&str> =
            keys.iter().map(|(id, _)| id.as_str()).collect();
        for line in text.lines() {
            if line
                .split_whitespace()
                .next()
                .is_some_and(|id| !ours.contains(id))
            {
                out.push_str(line);
                out.push('\n');
            }
        }
        for (id, identity) in &keys {
            out.push_str(&format!("{id} {}\n", hex::encode(identity.pkcs8())));
        }
        halite_proto::keyfile::write_private(&path, out.as_bytes())?;
    }
    Ok(keys)
}

fn identity_from_hex(text: &str) -> anyhow::Result<halite_proto::Identity> {
    let der = hex::decode(text)?;
    Ok(halite_proto::Identity::from_pkcs8(&der)?)
}

/// Builds `count` identities `<prefix>0..` under `root`.
pub fn build_agents(
    root: &Path,
    prefix: &str,
    count: usize,
) -> anyhow::Result<(Vec<Agent>, SwarmGrains)> {
    let mut agents = Vec::with_capacity(count);
    let mut grains = Vec::with_capacity(count);
    for (n, (id, identity)) in load_or_create_keys(root, prefix, count)?
        .into_iter()
        .enumerate()
    {
        let g = swarm_grains(prefix, n);
        agents.push(Agent::new(
            id.clone(),
            identity,
            Value::Object(g.clone()),
            ReturnStore::memory(),
        ));
        grains.push((id, g));
    }
    Ok((agents, grains))
}

/// Runs `count` identities against the master of `cfg` until shutdown.
pub async fn run(
    cfg: MinionConfig,
    prefix: String,
    count: usize,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let root = cfg.pki_dir.join("swarm");
    let (mut agents, grains) = build_agents(&root, &prefix, count)?;
    // Host grains are not detected per identity: each reports its own small set.
    // Each identity is a host of its own: its own state-run lock.
    let mut runner = HostRunner::new(cfg.opts()).with_state_run_locks(root.clone());
    for (id, g) in grains {
        runner = runner.with_grains(&id, g);
    }
    let runner: Arc<dyn JobRunner> = Arc::new(runner);
    let mut settings = link_settings(
        &cfg,
        cfg.master.first().map(String::as_str).unwrap_or("salt"),
    );
    settings.pinned_master_path = Some(root.join("minion_master.pub"));
    settings.replay_path = Some(root.join("publications"));
    // Thousands of identities each asking for a pillar compile at start
    // would swamp the master: a swarm runs mine.update only when its
    // config asks for the mine.
    if !cfg.extra.contains_key("mine_functions") && !cfg.extra.contains_key("mine_interval") {
        settings.mine_interval = None;
    }
    if settings.max_concurrent_jobs == 0 {
        settings.max_concurrent_jobs = 64;
    }
    let mut outputs = JobOutputs::new();
    let mut attempt = 0;
    loop {
        match run_link(
            &settings,
            &mut agents,
            runner.clone(),
            &mut outputs,
            &shutdown,
        )
        .await
        {
            LinkEnd::Shutdown => return Ok(()),
            LinkEnd::MasterLost(reason) => {
                tracing::warn!(%reason, "swarm lost its master");
                if !wait_to_reconnect(&cfg, attempt, &shutdown).await {
                    return Ok(());
                }
                attempt = attempt.saturating_add(1).min(8);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test")]
    use super::*;

    fn publics(keys: &[(String, halite_proto::Identity)]) -> Vec<(String, String)> {
        keys.iter()
            .map(|(id, k)| (id.clone(), k.public().to_hex()))
            .collect()
    }

    #[test]
    fn keys_are_generated_once_kept_in_one_file_and_grown_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("swarm");
        // An identity of the older layout keeps its key.
        let legacy =
            halite_proto::keyfile::load_or_create_identity(&root.join("s-1"), "minion").unwrap();
        let first = load_or_create_keys(&root, "s-", 3).unwrap();
        assert_eq!(first[1].1.public(), legacy.public());
        let text = std::fs::read_to_string(root.join(KEYS_FILE)).unwrap();
        assert_eq!(text.lines().count(), 3);
        // Again: the same keys, the file untouched.
        let again = load_or_create_keys(&root, "s-", 3).unwrap();
        assert_eq!(publics(&again), publics(&first));
        assert_eq!(std::fs::read_to_string(root.join(KEYS_FILE)).unwrap(), text);
        // More identities: the first ones keep theirs.
        let more = load_or_create_keys(&root, "s-", 5).unwrap();
        assert_eq!(publics(&more[..3]), publics(&first));
        assert_eq!(
            std::fs::read_to_string(root.join(KEYS_FILE))
                .unwrap()
                .lines()
                .count(),
            5
        );
        // Fewer: nothing is lost for a later, larger swarm.
        load_or_create_keys(&root, "s-", 2).unwrap();
        let all = load_or_create_keys(&root, "s-", 5).unwrap();
        assert_eq!(publics(&all), publics(&more));
        // A damaged file is an error that says what to do, never new keys.
        std::fs::write(root.join(KEYS_FILE), "s-0\n").unwrap();
        let err = load_or_create_keys(&root, "s-", 1).unwrap_err().to_string();
        assert!(err.contains("remove the file"), "{err}");
    }
}
