//! Salt's `cache` runner functions over what the master caches: the
//! grains each minion reported (`cache.grains`), the pillar the master
//! last compiled for it (`cache.pillar`) and its mine as stored
//! (`cache.mine`: entries sent with `allow_tgt` still wrapped, as Salt's).

use halite_client::jobcache::JobCache;
use halite_client::MasterConfig;
use halite_state::Value;

use crate::RunnerError;

/// Which of the master's per-minion caches a runner reads.
#[derive(Debug, Clone, Copy)]
enum Cached {
    /// The grains each minion reported.
    Grains,
    /// The pillar the master last compiled for each minion.
    Pillar,
    /// Each minion's mine.
    Mine,
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
    let failed = |e: halite_client::jobcache::JobCacheError| RunnerError::Failed(e.to_string());
    let all = match what {
        Cached::Grains => cache.all_grains().map_err(failed)?,
        Cached::Pillar => cache.all_pillars().map_err(failed)?,
        Cached::Mine => cache
            .all_mine()
            .map_err(failed)?
            .into_iter()
            .map(|(id, mine)| (id, Value::Object(mine)))
            .collect(),
    };
    let selected = resolve(cfg, tgt, tgt_type)?;
    Ok(all
        .into_iter()
        .filter(|(id, _)| selected.contains(id))
        .collect())
}

/// The accepted minions `tgt` (`tgt_type`) selects, as the running master
/// resolves them.
pub(crate) fn resolve(
    cfg: &MasterConfig,
    tgt: &str,
    tgt_type: &str,
) -> Result<Vec<String>, RunnerError> {
    let reply =
        halite_client::local::LocalClient::connect(&cfg.local_socket(), &cfg.root_key_path())
            .and_then(|mut c| {
                c.call(halite_client::local::LocalBody::Resolve {
                    tgt: tgt.to_string(),
                    tgt_type: tgt_type.to_string(),
                })
            })?;
    match reply {
        halite_client::local::LocalReply::Value(v) => {
            Ok(serde_json::from_value(v).unwrap_or_default())
        }
        halite_client::local::LocalReply::Error(e) => Err(RunnerError::Failed(e)),
        _ => Ok(Vec::new()),
    }
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

/// `cache.mine [tgt=*] [tgt_type=glob]`: `{minion: mine}` of the selected
/// minions that have mine data, as stored.
pub fn mine(cfg: &MasterConfig, tgt: &str, tgt_type: &str) -> Result<Value, RunnerError> {
    Ok(Value::Object(
        cached(cfg, Cached::Mine, tgt, tgt_type)?
            .into_iter()
            .collect(),
    ))
}
