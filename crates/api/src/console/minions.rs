//! The minions page's data: each minion the caller may see with its key
//! state, its grains as the master cached them, and when it last answered
//! a job; from the key store, the job cache and the ACLs, in one request.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use halite_client::jobcache::JobCache;
use halite_client::local::{LocalBody, LocalClient, LocalReply};
use serde_json::{json, Map, Value};

use crate::acl::{self, Call};
use crate::error::ApiError;
use crate::service::Service;

/// Resolves ACL targets (compound expressions) to minion ids through the
/// master, once each.
struct Targets<'a> {
    svc: &'a Service,
    known: HashMap<String, BTreeSet<String>>,
}

impl Targets<'_> {
    fn contains(&mut self, expr: &str, id: &str) -> Result<bool, ApiError> {
        if !self.known.contains_key(expr) {
            let master = &self.svc.cfg.master;
            let mut c = LocalClient::connect(&master.local_socket(), &master.root_key_path())?;
            let ids: BTreeSet<String> = match c.call(LocalBody::Resolve {
                tgt: expr.to_string(),
                tgt_type: "compound".into(),
            })? {
                LocalReply::Value(v) => serde_json::from_value(v).unwrap_or_default(),
                _ => BTreeSet::new(),
            };
            self.known.insert(expr.to_string(), ids);
        }
        Ok(self.known.get(expr).is_some_and(|s| s.contains(id)))
    }

    /// Whether `list` grants any execution function on minion `id`.
    fn any_on(&mut self, list: &[Value], id: &str) -> Result<bool, ApiError> {
        for entry in list {
            match entry {
                Value::String(p) if !p.starts_with('@') => return Ok(true),
                Value::Object(m) => {
                    for valid in m.keys().filter(|k| !k.starts_with('@')) {
                        if self.contains(valid, id)? {
                            return Ok(true);
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(false)
    }

    /// Whether `list` grants `fun` on minion `id`.
    fn allows(&mut self, list: &[Value], fun: &str, id: &str) -> Result<bool, ApiError> {
        let call = Call {
            fun,
            args: &[],
            kwargs: None,
        };
        let mut err = None;
        let ok = acl::auth_check(list, &call, |valid| match self.contains(valid, id) {
            Ok(b) => b,
            Err(e) => {
                err = Some(e);
                false
            }
        });
        match err {
            Some(e) => Err(e),
            None => Ok(ok),
        }
    }
}

/// The key states by minion id (`accepted`, `pending`, `rejected`, `denied`).
fn key_states(svc: &Service) -> Result<BTreeMap<String, &'static str>, ApiError> {
    let all = crate::wheel::call(&svc.cfg.master, "key.list_all", &[], &Map::new())
        .map_err(|e| ApiError::Unavailable(format!("cannot read the master's keys: {e}")))?;
    let mut out = BTreeMap::new();
    for (field, state) in [
        ("minions", "accepted"),
        ("minions_pre", "pending"),
        ("minions_rejected", "rejected"),
        ("minions_denied", "denied"),
    ] {
        for id in all[field].as_array().into_iter().flatten() {
            if let Some(id) = id.as_str() {
                out.entry(id.to_string()).or_insert(state);
            }
        }
    }
    Ok(out)
}

/// `{"minions": [{id, key, last_seen, grains}]}` for the user of auth list
/// `list`: key states (and the minions that are not accepted) only with
/// `key.list_all`; an accepted minion only if some execution function is
/// granted on it; grains only with `grains.items` on it. `last_seen` is
/// the jid of its newest return (the page shows it as a time).
pub fn overview(svc: &Service, list: &[Value]) -> Result<Value, ApiError> {
    let may_keys = acl::spec_check(
        list,
        "wheel",
        &Call {
            fun: "key.list_all",
            args: &[],
            kwargs: None,
        },
    );
    let keys = key_states(svc)?;
    let cache = JobCache::open(&svc.cfg.master.job_cache_path())?;
    let grains: HashMap<String, Value> = cache.all_grains()?.into_iter().collect();
    let seen: HashMap<String, String> = cache.last_returns()?.into_iter().collect();
    let mut targets = Targets {
        svc,
        known: HashMap::new(),
    };
    let mut out = Vec::new();
    for (id, state) in keys {
        let visible = if state == "accepted" {
            may_keys || targets.any_on(list, &id)?
        } else {
            may_keys
        };
        if !visible {
            continue;
        }
        let g = if state == "accepted" && targets.allows(list, "grains.items", &id)? {
            grains.get(&id).cloned()
        } else {
            None
        };
        out.push(json!({
            "id": id,
            "key": if may_keys { json!(state) } else { Value::Null },
            "last_seen": seen.get(&id),
            "grains": g,
        }));
    }
    Ok(json!({"minions": out}))
}
