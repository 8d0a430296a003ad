//! Salt's `jobs` runner functions, answered from the master's job cache:
//! `jobs.list_jobs`, `jobs.lookup_jid`, `jobs.list_job`, `jobs.print_job`
//! and `jobs.exit_success`. `halite-run`, halite-api and the reactor all
//! call these.

use halite_client::jobcache::JobCache;
use halite_client::MasterConfig;
use halite_state::{Map, Value};

use crate::RunnerError;

fn cache(cfg: &MasterConfig) -> Result<JobCache, RunnerError> {
    JobCache::open(&cfg.job_cache_path()).map_err(|e| RunnerError::Failed(e.to_string()))
}

/// `jobs.list_jobs`: every job of the cache, `{jid: {Function, Arguments,
/// Target, Target-type, User, StartTime}}`.
pub fn list_jobs(cfg: &MasterConfig) -> Result<Value, RunnerError> {
    Ok(Value::Object(
        cache(cfg)?
            .list_jobs()
            .map_err(|e| RunnerError::Failed(e.to_string()))?,
    ))
}

/// `jobs.lookup_jid <jid>`: `{minion: return}` (empty for an unknown jid).
pub fn lookup_jid(cfg: &MasterConfig, jid: &str) -> Result<Value, RunnerError> {
    let mut out = Map::new();
    for (id, record) in cache(cfg)?
        .returns(jid)
        .map_err(|e| RunnerError::Failed(e.to_string()))?
    {
        out.insert(id, record.get("return").cloned().unwrap_or(Value::Null));
    }
    Ok(Value::Object(out))
}

/// `jobs.list_job <jid>`: the job's description with `jid`, `Minions`
/// and `Result` (`{minion: {return, retcode, success}}`), as Salt's
/// runner; only `jid` and `StartTime` for a jid the cache does not hold.
pub fn list_job(cfg: &MasterConfig, jid: &str) -> Result<Value, RunnerError> {
    let mut out = Map::new();
    out.insert("jid".into(), Value::from(jid));
    match job_entry(&cache(cfg)?, jid)? {
        Some(entry) => out.extend(entry),
        None => {
            out.insert(
                "StartTime".into(),
                Value::from(halite_proto::jid::jid_start_time(jid)),
            );
        }
    }
    Ok(Value::Object(out))
}

/// `jobs.print_job <jid>`: `{jid: {Function, Arguments, Target,
/// Target-type, User, StartTime, Minions, Result: {minion: {return}}}}`;
/// `{}` for a jid the cache does not hold.
pub fn print_job(cfg: &MasterConfig, jid: &str) -> Result<Value, RunnerError> {
    let mut out = Map::new();
    if let Some(entry) = job_entry(&cache(cfg)?, jid)? {
        out.insert(jid.to_string(), Value::Object(entry));
    }
    Ok(Value::Object(out))
}

/// One job's description and results (Salt's `_format_jid_instance` plus
/// `Result`), `None` for a jid the cache does not hold.
fn job_entry(cache: &JobCache, jid: &str) -> Result<Option<Map>, RunnerError> {
    let Some(job) = cache
        .job(jid)
        .map_err(|e| RunnerError::Failed(e.to_string()))?
    else {
        return Ok(None);
    };
    let mut entry = Map::new();
    entry.insert("Function".into(), job["fun"].clone());
    entry.insert("Arguments".into(), job["arg"].clone());
    entry.insert("Target".into(), job["tgt"].clone());
    entry.insert("Target-type".into(), job["tgt_type"].clone());
    entry.insert("User".into(), job["user"].clone());
    entry.insert(
        "StartTime".into(),
        Value::from(halite_proto::jid::jid_start_time(jid)),
    );
    entry.insert("Minions".into(), job["minions"].clone());
    let mut result = Map::new();
    for (id, record) in cache
        .returns(jid)
        .map_err(|e| RunnerError::Failed(e.to_string()))?
    {
        let mut r = Map::new();
        r.insert(
            "return".into(),
            record.get("return").cloned().unwrap_or(Value::Null),
        );
        for key in ["retcode", "success", "out"] {
            if let Some(v) = record.get(key) {
                r.insert(key.into(), v.clone());
            }
        }
        result.insert(id, Value::Object(r));
    }
    entry.insert("Result".into(), Value::Object(result));
    Ok(Some(entry))
}

/// `jobs.exit_success <jid>`: for each targeted minion, whether its
/// return is truthy (Python's `if x:`); `False` for one that did not return.
pub fn exit_success(cfg: &MasterConfig, jid: &str) -> Result<Value, RunnerError> {
    let job = print_job(cfg, jid)?;
    let entry = job.get(jid).cloned().unwrap_or(Value::Null);
    let mut out = Map::new();
    let returned = |id: &str| {
        entry["Result"]
            .get(id)
            .and_then(|r| r.get("return"))
            .map(halite_salt_rules::truth::python_bool)
    };
    if let Some(Value::Array(minions)) = entry.get("Minions") {
        for m in minions.iter().filter_map(Value::as_str) {
            out.insert(m.to_string(), Value::Bool(returned(m).unwrap_or(false)));
        }
    }
    if let Some(Value::Object(result)) = entry.get("Result") {
        for id in result.keys() {
            if returned(id) == Some(true) {
                out.insert(id.clone(), Value::Bool(true));
            }
        }
    }
    Ok(Value::Object(out))
}
