//! A published job as the job cache keeps it: Salt's load holds the
//! returners a job names (`--return`, `--return_config`,
//! `--return_kwargs`) as `ret`, `ret_config` and `ret_kwargs` beside the
//! call, while halite's publication carries them to the minion as
//! reserved keyword arguments (`__ret__`...). Splitting them here keeps
//! them out of the stored `arg`, so `jobs.list_job` and `jobs.list_jobs`
//! show the call's arguments only, as Salt's do.

use halite_modules::returners::ReturnSpec;
use halite_proto::msg::Job;
use serde_json::{Map, Value};

/// `job` without the returner keys, and the load keys they become;
/// `None` when the job names no returner (store it as it is).
pub fn split(job: &Job) -> Option<(Job, Map<String, Value>)> {
    use halite_modules::returners::{RET_CONFIG_KEY, RET_KEY, RET_KWARGS_KEY};
    if ![RET_KEY, RET_CONFIG_KEY, RET_KWARGS_KEY]
        .iter()
        .any(|k| job.kwarg.contains_key(*k))
    {
        return None;
    }
    let mut kwarg = job.kwarg.clone();
    let mut load = Map::new();
    if let Some(spec) = ReturnSpec::take_from(&mut kwarg) {
        load.insert("ret".into(), Value::from(spec.names.join(",")));
        if let Some(c) = spec.ret_config {
            load.insert("ret_config".into(), Value::from(c));
        }
        if !spec.ret_kwargs.is_empty() {
            load.insert("ret_kwargs".into(), Value::Object(spec.ret_kwargs));
        }
    }
    Some((
        Job {
            kwarg,
            ..job.clone()
        },
        load,
    ))
}

/// Stores `job` in `cache` in the form [`split`] gives.
pub fn store(
    cache: &crate::jobcache::JobCache,
    job: &Job,
) -> Result<(), crate::jobcache::JobCacheError> {
    match split(job) {
        Some((stored, load)) => cache.store_job(&stored, &load),
        None => cache.store_job(job, &Map::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(kwarg: Value) -> Job {
        Job {
            jid: "20260101000000000000".into(),
            fun: "test.echo".into(),
            arg: vec![json!("hello")],
            kwarg: serde_json::from_value(kwarg).unwrap_or_default(),
            tgt: "web1".into(),
            tgt_type: "glob".into(),
            user: "root".into(),
            minions: vec!["web1".into()],
            progress_unwatched: false,
        }
    }

    #[test]
    fn the_returner_keys_become_salts_load_keys() {
        let (stored, load) = split(&job(json!({
            "__ret__": "syslog,rawfile_json",
            "__ret_config__": "alt",
            "__ret_kwargs__": {"tag": "kw"},
            "b": 1
        })))
        .unwrap_or_else(|| panic!("the job names returners"));
        assert_eq!(Value::Object(stored.kwarg), json!({"b": 1}));
        assert_eq!(
            Value::Object(load),
            json!({"ret": "syslog,rawfile_json", "ret_config": "alt", "ret_kwargs": {"tag": "kw"}})
        );
        assert!(split(&job(json!({"b": 1}))).is_none());
    }
}
