//! Salt's `salt.returners.get_returner_options`: where a returner finds
//! its settings. For returner `syslog` and attribute `level`: the
//! `ret_kwargs` of the call first, then, with a `ret_config` profile
//! `alt`, `alt.syslog.level` or `alt.syslog: {level: ...}`, then
//! `syslog.level` or `syslog: {level: ...}`, each through `config.option`
//! (the minion's options, then its pillar, as Salt's lookup goes), then
//! the returner's default.

use halite_state::{Map, Value};

use crate::exec::Args;
use crate::Host;

/// The option lookups of one return.
pub struct Lookup<'a> {
    host: &'a Host,
    ret_config: Option<&'a str>,
    ret_kwargs: &'a Map,
}

impl<'a> Lookup<'a> {
    /// Lookups on `host` under profile `ret_config`, with `ret_kwargs`
    /// given with the call.
    pub fn new(host: &'a Host, ret_config: Option<&'a str>, ret_kwargs: &'a Map) -> Self {
        Self {
            host,
            ret_config,
            ret_kwargs,
        }
    }

    /// Salt's `config.option(key)` on the host (`None` when unset or empty).
    fn config(&self, key: &str) -> Option<Value> {
        let args = Args {
            positional: vec![Value::from(key)],
            kwargs: Map::new(),
        };
        let v = self
            .host
            .call("config.option", &args)
            .ok()
            .or_else(|| self.host.opts.get(key).cloned())?;
        (!is_empty(&v)).then_some(v)
    }

    /// `attr` of returner `name` (Salt's `_fetch_option`), or `None`.
    pub fn get(&self, name: &str, attr: &str) -> Option<Value> {
        if let Some(v) = self.ret_kwargs.get(attr).filter(|v| !is_empty(v)) {
            return Some(v.clone());
        }
        if let Some(profile) = self.ret_config {
            let nested = self
                .config(&format!("{profile}.{name}"))
                .and_then(|m| m.get(attr).cloned())
                .filter(|v| !is_empty(v));
            if let Some(v) = nested.or_else(|| self.config(&format!("{profile}.{name}.{attr}"))) {
                return Some(v);
            }
        }
        self.config(&format!("{name}.{attr}")).or_else(|| {
            self.config(name)
                .and_then(|m| m.get(attr).cloned())
                .filter(|v| !is_empty(v))
        })
    }

    /// `attr` as a string (numbers as Python's `str()`), or `default`.
    pub fn string(&self, name: &str, attr: &str, default: &str) -> String {
        self.get(name, attr)
            .map(|v| halite_salt_rules::pyfmt::python_str(&v))
            .unwrap_or_else(|| default.to_string())
    }
}

/// Salt skips `None` and `""` options (`_options_browser`).
fn is_empty(v: &Value) -> bool {
    matches!(v, Value::Null) || v.as_str() == Some("")
}
