//! Swarm mode (Salt's minionswarm): many minion identities in one
//! process, each with its own Ed25519 key (kept under
//! `<root>/<id>/minion.pem`), its own session and its own grains, sharing
//! one link to the master. For tests and benchmarks only.

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

/// Builds `count` identities `<prefix>0..` under `root`.
pub fn build_agents(
    root: &Path,
    prefix: &str,
    count: usize,
) -> anyhow::Result<(Vec<Agent>, SwarmGrains)> {
    let mut agents = Vec::with_capacity(count);
    let mut grains = Vec::with_capacity(count);
    for n in 0..count {
        let id = format!("{prefix}{n}");
        halite_proto::validate_minion_id(&id)?;
        let identity = halite_proto::keyfile::load_or_create_identity(&root.join(&id), "minion")?;
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
