//! Salt's `manage` runner functions over the accepted keys and a ping of
//! every minion: `manage.up/down/status`, `present`/`not_present`/`joined`
//! (halite's master keeps no presence list: a minion is present when it
//! answers the ping), `versions`.

use std::collections::BTreeSet;
use std::time::Duration;

use halite_client::job::{run_job, JobRequest};
use halite_client::keys::KeyStore;
use halite_client::MasterConfig;
use halite_proto::msg::KeyStatus;
use halite_state::{Map, Value};

use crate::RunnerError;

/// Pings every accepted minion; (up, down), sorted.
pub fn ping_all(
    cfg: &MasterConfig,
    timeout: Duration,
) -> Result<(Vec<String>, Vec<String>), RunnerError> {
    let accepted = KeyStore::open(&cfg.pki_dir)
        .and_then(|k| k.ids(KeyStatus::Accepted))
        .map_err(|e| RunnerError::Failed(e.to_string()))?;
    let outcome = run_job(cfg, &request("test.ping"), timeout)?;
    let up: BTreeSet<String> = outcome.returns.keys().cloned().collect();
    let down = accepted.into_iter().filter(|id| !up.contains(id)).collect();
    Ok((up.into_iter().collect(), down))
}

fn request(fun: &str) -> JobRequest {
    JobRequest {
        tgt: "*".into(),
        tgt_type: "glob".into(),
        fun: fun.into(),
        arg: Vec::new(),
        kwarg: Map::new(),
        user: "root".into(),
    }
}

/// The version halite's minions and master report (`test.version`).
fn master_version() -> String {
    halite_modules::exec::test::SALT_COMPAT_VERSION.to_string()
}

/// Compares two dotted versions numerically where they are numbers.
fn cmp_versions(a: &str, b: &str) -> std::cmp::Ordering {
    let parts = |s: &str| -> Vec<u64> {
        s.split(|c: char| !c.is_ascii_digit())
            .filter(|p| !p.is_empty())
            .filter_map(|p| p.parse().ok())
            .collect()
    };
    parts(a).cmp(&parts(b))
}

/// `manage.versions`: every minion's `test.version` against the master's,
/// under Salt's labels ("Up to date", "Minion requires update", "Minion
/// newer than master", and "Master").
pub fn versions(cfg: &MasterConfig, timeout: Duration) -> Result<Value, RunnerError> {
    let outcome = run_job(cfg, &request("test.version"), timeout)?;
    let master = master_version();
    let mut groups: Map = Map::new();
    for (id, data) in &outcome.returns {
        let Some(v) = data.get("return").and_then(Value::as_str) else {
            continue;
        };
        let label = match cmp_versions(v, &master) {
            std::cmp::Ordering::Less => "Minion requires update",
            std::cmp::Ordering::Equal => "Up to date",
            std::cmp::Ordering::Greater => "Minion newer than master",
        };
        let group = groups
            .entry(label)
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(g) = group {
            g.insert(id.clone(), Value::from(v));
        }
    }
    groups.insert("Master".into(), Value::from(master));
    Ok(Value::Object(groups))
}
