//! Salt's `cache` runner functions over what the master caches: the
//! grains each minion reported (`cache.grains`); halite's master caches
//! no pillar and no mine data yet, so `cache.pillar` and `cache.mine`
//! answer `{}`, as Salt does with an empty cache.

use halite_client::jobcache::JobCache;
use halite_client::MasterConfig;
use halite_state::{Map, Value};

use crate::RunnerError;

/// The cached grains of the minions `tgt` (`tgt_type`) selects.
fn cached(
    cfg: &MasterConfig,
    tgt: &str,
    tgt_type: &str,
) -> Result<Vec<(String, Value)>, RunnerError> {
    let cache =
        JobCache::open(&cfg.job_cache_path()).map_err(|e| RunnerError::Failed(e.to_string()))?;
    let all = cache
        .all_grains()
        .map_err(|e| RunnerError::Failed(e.to_string()))?;
    let selected: Vec<String> =
        match halite_client::local::LocalClient::connect(&cfg.local_socket(), &cfg.root_key_path())
            .and_then(|mut c| {
                c.call(halite_client::local::LocalBody::Resolve {
                    tgt: tgt.to_string(),
                    tgt_type: tgt_type.to_string(),
                })
            })? {
            halite_client::local::LocalReply::Value(v) => {
                serde_json::from_value(v).unwrap_or_default()
            }
            _ => Vec::new(),
        };
    Ok(all
        .into_iter()
        .filter(|(id, _)| selected.contains(id))
        .collect())
}

/// `cache.grains [tgt=*] [tgt_type=glob]`: `{minion: grains}`.
pub fn grains(cfg: &MasterConfig, tgt: &str, tgt_type: &str) -> Result<Value, RunnerError> {
    Ok(Value::Object(
        cached(cfg, tgt, tgt_type)?.into_iter().collect(),
    ))
}

/// `cache.pillar` / `cache.mine`: `{}` (Salt lists only the minions
/// with cached data, and halite's master caches neither yet).
pub fn empty() -> Value {
    Value::Object(Map::new())
}
