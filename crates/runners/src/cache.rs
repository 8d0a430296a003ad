//! Salt's `cache` runner functions over what the master caches: the
//! grains each minion reported (`cache.grains`) and the pillar the master
//! last compiled for it (`cache.pillar`); halite's master caches no mine
//! data yet, so `cache.mine` answers `{}`, as Salt does with an empty cache.

use halite_client::jobcache::JobCache;
use halite_client::MasterConfig;
use halite_state::{Map, Value};

use crate::RunnerError;

/// Which of the master's per-minion caches a runner reads.
#[derive(Debug, Clone, Copy)]
enum Cached {
    /// The grains each minion reported.
    Grains,
    /// The pillar the master last compiled for each minion.
    Pillar,
}

/// The cached `what` of the minions `tgt` (`tgt_type`) selects.
fn cached(
    cfg: &MasterConfig,
    what: Cached,
    tgt: &str,
    tgt_type: &str,
) -> Result<Vec<(String, Value)>, RunnerError> {
    let cache =
        JobCache::open(&cfg.job_cache_path()).map_err(|e| RunnerError::Failed(e.to_string()))?;
    let all = match what {
        Cached::Grains => cache.all_grains(),
        Cached::Pillar => cache.all_pillars(),
    }
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
        cached(cfg, Cached::Grains, tgt, tgt_type)?
            .into_iter()
            .collect(),
    ))
}

/// `cache.pillar [tgt=*] [tgt_type=glob]`: `{minion: pillar}`, the pillar
/// the master last compiled for each selected minion.
pub fn pillar(cfg: &MasterConfig, tgt: &str, tgt_type: &str) -> Result<Value, RunnerError> {
    Ok(Value::Object(
        cached(cfg, Cached::Pillar, tgt, tgt_type)?
            .into_iter()
            .collect(),
    ))
}

/// `cache.mine`: `{}` (Salt lists only the minions with cached data, and
/// halite's master caches no mine data yet).
pub fn empty() -> Value {
    Value::Object(Map::new())
}
