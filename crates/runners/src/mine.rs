//! Salt's `mine` runner: `mine.get <tgt> <fun> [tgt_type=glob]` on the
//! master host. Salt's runner asks `_mine_get` as the master's own id
//! (`<hostname>_master`), so entries sent with an `allow_tgt` that does not
//! select that id stay hidden, as in Salt.

use halite_client::jobcache::JobCache;
use halite_client::MasterConfig;
use halite_state::{Map, Value};

use crate::{arg, RunnerError};

/// The id Salt's master asks the mine as: `<hostname>_master`.
fn master_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}_master")
}

/// `mine.get` with its arguments bound as Python binds them.
pub fn get_runner(
    cfg: &MasterConfig,
    positional: &[Value],
    kwargs: &Map,
) -> Result<Value, RunnerError> {
    let usage = || {
        RunnerError::Usage(
            "mine.get needs a target and a function: halite-run mine.get '*' network.ip_addrs [tgt_type=glob]".into(),
        )
    };
    let tgt = arg(positional, kwargs, 0, "tgt")
        .map(halite_salt_rules::pyfmt::python_str)
        .ok_or_else(usage)?;
    let fun = arg(positional, kwargs, 1, "fun")
        .cloned()
        .ok_or_else(usage)?;
    let tgt_type = arg(positional, kwargs, 2, "tgt_type")
        .map(halite_salt_rules::pyfmt::python_str)
        .unwrap_or_else(|| "glob".into());
    get(cfg, &tgt, &fun, &tgt_type)
}

/// Salt's `mine.get` runner: `{minion: data}` (`{fun: {minion: data}}`
/// for several functions) of the minions `tgt` selects.
pub fn get(
    cfg: &MasterConfig,
    tgt: &str,
    fun: &Value,
    tgt_type: &str,
) -> Result<Value, RunnerError> {
    let cache =
        JobCache::open(&cfg.job_cache_path()).map_err(|e| RunnerError::Failed(e.to_string()))?;
    let mines: std::collections::HashMap<String, Map> = cache
        .all_mine()
        .map_err(|e| RunnerError::Failed(e.to_string()))?
        .into_iter()
        .collect();
    let minions = crate::cache::resolve(cfg, tgt, &halite_salt_rules::mine::match_type(tgt_type))?;
    let mut failure = None;
    let ret = halite_salt_rules::mine::select(
        &master_id(),
        fun,
        cfg.extra.get("mine_get"),
        &minions,
        |id| mines.get(id),
        |t, k| match crate::cache::resolve(cfg, t, k) {
            Ok(ids) => ids,
            Err(e) => {
                failure.get_or_insert(e);
                Vec::new()
            }
        },
    );
    match failure {
        Some(RunnerError::Local(e)) => Err(RunnerError::Local(e)),
        _ => Ok(ret),
    }
}
