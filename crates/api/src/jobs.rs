//! The `jobs.*` runners the API's `/jobs` URLs call (`jobs.list_jobs`,
//! `jobs.list_job`, `jobs.lookup_jid`), answered from the master's job
//! cache; the other runners come from halite-runners.

use halite_client::jobcache::JobCache;
use halite_client::MasterConfig;
use serde_json::{json, Map, Value};

/// Why the job cache could not answer.
pub type JobsError = halite_client::jobcache::JobCacheError;

/// `jobs.list_jobs`.
pub fn list_jobs(cfg: &MasterConfig) -> Result<Value, JobsError> {
    Ok(Value::Object(
        JobCache::open(&cfg.job_cache_path())?.list_jobs()?,
    ))
}

/// `jobs.lookup_jid`: `{minion: return}`.
pub fn lookup_jid(cfg: &MasterConfig, jid: &str) -> Result<Value, JobsError> {
    let cache = JobCache::open(&cfg.job_cache_path())?;
    let mut out = Map::new();
    for (id, record) in cache.returns(jid)? {
        out.insert(id, record.get("return").cloned().unwrap_or(Value::Null));
    }
    Ok(Value::Object(out))
}

/// `jobs.list_job`: the job's description with `Minions` and `Result`
/// (`{minion: {"return": ...}}`), as Salt's runner.
pub fn list_job(cfg: &MasterConfig, jid: &str) -> Result<Value, JobsError> {
    let cache = JobCache::open(&cfg.job_cache_path())?;
    let mut out = Map::new();
    out.insert("jid".into(), json!(jid));
    if let Some(job) = cache.job(jid)? {
        out.insert("Function".into(), job["fun"].clone());
        out.insert("Arguments".into(), job["arg"].clone());
        out.insert("Target".into(), job["tgt"].clone());
        out.insert("Target-type".into(), job["tgt_type"].clone());
        out.insert("User".into(), job["user"].clone());
        out.insert("Minions".into(), job["minions"].clone());
    }
    out.insert(
        "StartTime".into(),
        json!(halite_proto::jid::jid_start_time(jid)),
    );
    let mut result = Map::new();
    for (id, record) in cache.returns(jid)? {
        let mut one = Map::new();
        one.insert(
            "return".into(),
            record.get("return").cloned().unwrap_or(Value::Null),
        );
        one.insert(
            "retcode".into(),
            record.get("retcode").cloned().unwrap_or(Value::Null),
        );
        one.insert(
            "success".into(),
            record.get("success").cloned().unwrap_or(Value::Null),
        );
        result.insert(id, Value::Object(one));
    }
    out.insert("Result".into(), Value::Object(result));
    Ok(Value::Object(out))
}
