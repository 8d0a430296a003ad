//! The reactor's settings from the master config, as Salt 3008 reads them:
//! `reactor` (a list of one-key mappings `{tag glob: [sls, ...]}`, or the
//! path of a YAML file holding that list), `reactor_worker_threads` (10),
//! `reactor_worker_hwm` (10000) and `reactor_refresh_interval` (60 s).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::config::MasterConfig;

/// Salt's default `reactor_worker_threads`.
const DEFAULT_THREADS: usize = 10;
/// Salt's default `reactor_worker_hwm`.
const DEFAULT_HWM: usize = 10_000;
/// Salt's default `reactor_refresh_interval` in seconds.
const DEFAULT_REFRESH: u64 = 60;

/// Where the tag → SLS map comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum MapSource {
    /// Written in the master config.
    Inline(Vec<Rule>),
    /// A YAML file holding the list (Salt accepts `reactor: /path`), reread
    /// every `reactor_refresh_interval`.
    File(PathBuf),
}

/// One `{tag glob: [sls paths]}` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The tag pattern (fnmatch, as Salt's `fnmatch.fnmatch`).
    pub glob: String,
    /// The reactor SLS files it runs (paths, globs or `salt://` URLs).
    pub sls: Vec<String>,
}

/// The reactor's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ReactorSettings {
    /// The tag → SLS map.
    pub map: MapSource,
    /// Worker threads rendering and running reactions.
    pub threads: usize,
    /// Reactions that may wait for a worker; more are dropped (logged).
    pub hwm: usize,
    /// How long a worker keeps its master host (modules, grains) and a
    /// map file is kept before being read again.
    pub refresh: Duration,
}

/// A positive integer option, or its default (logged when malformed).
fn count(cfg: &MasterConfig, key: &str, default: u64) -> u64 {
    match cfg.extra.get(key) {
        None | Some(Value::Null) => default,
        Some(v) => match v.as_u64().filter(|n| *n > 0) {
            Some(n) => n,
            None => {
                tracing::warn!(key, value = %v, default, "not a positive integer; the default is used");
                default
            }
        },
    }
}

impl ReactorSettings {
    /// The settings of `cfg`; `None` when no `reactor` is configured (no
    /// reactor runs, as in Salt).
    pub fn from_config(cfg: &MasterConfig) -> Option<Self> {
        let map = match cfg.extra.get("reactor")? {
            Value::String(path) if !path.trim().is_empty() => {
                MapSource::File(PathBuf::from(path.trim()))
            }
            Value::Array(items) => MapSource::Inline(parse_rules(items)),
            Value::Null => return None,
            other => {
                tracing::error!(value = %other, "reactor: expected a list of {{tag glob: [sls files]}} mappings or the path of a file holding one; no reactor runs");
                return None;
            }
        };
        Some(Self {
            map,
            threads: count(cfg, "reactor_worker_threads", DEFAULT_THREADS as u64) as usize,
            hwm: count(cfg, "reactor_worker_hwm", DEFAULT_HWM as u64) as usize,
            refresh: Duration::from_secs(count(cfg, "reactor_refresh_interval", DEFAULT_REFRESH)),
        })
    }
}

/// The rules of a `reactor` list, skipping (with a log line) entries that
/// are not one-key mappings, as Salt skips them.
pub fn parse_rules(items: &[Value]) -> Vec<Rule> {
    let mut rules = Vec::new();
    for item in items {
        let Some(m) = item.as_object().filter(|m| m.len() == 1) else {
            tracing::warn!(entry = %item, "reactor entry skipped: each entry is one mapping of a tag glob to a list of SLS files");
            continue;
        };
        for (glob, val) in m {
            let sls = match val {
                Value::String(s) => vec![s.clone()],
                Value::Array(a) => a
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect(),
                _ => Vec::new(),
            };
            rules.push(Rule {
                glob: glob.clone(),
                sls,
            });
        }
    }
    rules
}

/// Reads the rules of a map file (`reactor: /path`); an unreadable or
/// malformed file gives no rules and Salt's log line.
pub fn read_map_file(path: &std::path::Path) -> Vec<Rule> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(path = %path.display(), error = %e, "Failed to read reactor map");
            return Vec::new();
        }
    };
    match halite_render::yaml::load(&text) {
        Ok(Value::Array(items)) => parse_rules(&items),
        Ok(Value::Null) => Vec::new(),
        Ok(_) | Err(_) => {
            tracing::error!(path = %path.display(), "Failed to parse YAML in reactor map: expected a list of {{tag glob: [sls files]}}");
            Vec::new()
        }
    }
}

/// The SLS files every rule whose glob matches `tag` names, in map order
/// (Salt's `list_reactors`).
pub fn reactors_for(rules: &[Rule], tag: &str) -> Vec<String> {
    rules
        .iter()
        .filter(|r| halite_salt_rules::fnmatch(tag, &r.glob))
        .flat_map(|r| r.sls.iter().cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_match_tags_by_fnmatch_in_map_order() {
        let rules = parse_rules(
            json!([
                {"salt/minion/*/start": ["/srv/reactor/start.sls", "/srv/reactor/log.sls"]},
                {"myco/deploy/*": "/srv/reactor/deploy.sls"},
                {"salt/*": ["/srv/reactor/log.sls"]},
                "not a mapping",
                {"a": ["x"], "b": ["y"]},
            ])
            .as_array()
            .expect("list"),
        );
        assert_eq!(rules.len(), 3);
        assert_eq!(
            reactors_for(&rules, "salt/minion/web1/start"),
            [
                "/srv/reactor/start.sls",
                "/srv/reactor/log.sls",
                "/srv/reactor/log.sls"
            ]
        );
        assert_eq!(
            reactors_for(&rules, "myco/deploy/done"),
            ["/srv/reactor/deploy.sls"]
        );
        assert!(reactors_for(&rules, "other").is_empty());
    }

    #[test]
    fn settings_default_to_salts_and_need_a_reactor_key() {
        let mut cfg = MasterConfig::default();
        assert!(ReactorSettings::from_config(&cfg).is_none());
        cfg.extra
            .insert("reactor".into(), json!([{"t": ["/x.sls"]}]));
        cfg.extra.insert("reactor_worker_hwm".into(), json!(5));
        cfg.extra.insert("reactor_worker_threads".into(), json!(-1));
        let s = ReactorSettings::from_config(&cfg).expect("settings");
        assert_eq!((s.threads, s.hwm), (10, 5));
        assert_eq!(s.refresh, Duration::from_secs(60));
        cfg.extra
            .insert("reactor".into(), json!("/etc/salt/reactor.yml"));
        let s = ReactorSettings::from_config(&cfg).expect("settings");
        assert_eq!(s.map, MapSource::File("/etc/salt/reactor.yml".into()));
    }
}
