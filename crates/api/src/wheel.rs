//! The `wheel` client's functions halite-api offers: Salt's `key.*`
//! (salt/wheel/key.py) over the master's key directories, telling the
//! running master at once (as `halite-key` does). Only these functions
//! exist: no wheel function takes a path or a template from the request
//! (CVE-2021-25282/25283), and a key's `match` only filters the ids that
//! are already on disk.

use std::collections::BTreeMap;

use halite_client::keys::{status_dir, KeyStore, ALL_STATUSES};
use halite_client::local::{LocalBody, LocalClient};
use halite_client::MasterConfig;
use halite_proto::msg::KeyStatus;
use serde_json::{json, Map, Value};

/// The wheel functions halite implements.
pub const FUNCTIONS: [&str; 7] = [
    "key.list_all",
    "key.list",
    "key.accept",
    "key.reject",
    "key.delete",
    "key.finger",
    "key.name_match",
];

/// Why a wheel call failed.
#[derive(Debug, thiserror::Error)]
pub enum WheelError {
    /// Not a function halite has.
    #[error("'{0}' is not available.")]
    NotAvailable(String),
    /// A required argument is missing.
    #[error("{0}")]
    Usage(String),
    /// The key store failed.
    #[error(transparent)]
    Keys(#[from] halite_client::keys::KeyError),
}

fn arg<'a>(
    args: &'a [Value],
    kwargs: &'a Map<String, Value>,
    i: usize,
    key: &str,
) -> Option<&'a Value> {
    kwargs.get(key).or_else(|| args.get(i))
}

fn flag(args: &[Value], kwargs: &Map<String, Value>, i: usize, key: &str) -> bool {
    arg(args, kwargs, i, key).is_some_and(halite_salt_rules::truthy)
}

fn glob_match(store: &KeyStore, pattern: &str) -> Result<Map<String, Value>, WheelError> {
    let mut out = Map::new();
    for status in ALL_STATUSES {
        let ids: Vec<String> = store
            .ids(status)?
            .into_iter()
            .filter(|id| halite_salt_rules::fnmatch(id, pattern))
            .collect();
        if !ids.is_empty() {
            out.insert(status_dir(status).to_string(), json!(ids));
        }
    }
    Ok(out)
}

/// Runs wheel function `fun`; its return data (Salt's shapes).
pub fn call(
    cfg: &MasterConfig,
    fun: &str,
    args: &[Value],
    kwargs: &Map<String, Value>,
) -> Result<Value, WheelError> {
    let store = KeyStore::open(&cfg.pki_dir)?;
    let pattern = || {
        arg(args, kwargs, 0, "match")
            .map(halite_salt_rules::pyfmt::python_str)
            .ok_or_else(|| WheelError::Usage(format!("{fun} needs a match: a glob of minion ids")))
    };
    match fun {
        "key.list_all" => {
            let mut out = Map::new();
            out.insert("local".into(), json!(["master.pem", "master.pub"]));
            for status in ALL_STATUSES {
                out.insert(status_dir(status).into(), json!(store.ids(status)?));
            }
            Ok(Value::Object(out))
        }
        "key.list" => {
            let which = pattern()?;
            let mut out = Map::new();
            for status in ALL_STATUSES {
                let wanted = match which.as_str() {
                    "all" => true,
                    "acc" | "accepted" => status == KeyStatus::Accepted,
                    "pre" | "un" | "unaccepted" => status == KeyStatus::Pending,
                    "rej" | "rejected" => status == KeyStatus::Rejected,
                    "den" | "denied" => status == KeyStatus::Denied,
                    _ => false,
                };
                if wanted {
                    out.insert(status_dir(status).into(), json!(store.ids(status)?));
                }
            }
            Ok(Value::Object(out))
        }
        "key.name_match" => Ok(Value::Object(glob_match(&store, &pattern()?)?)),
        "key.finger" => {
            let pattern = pattern()?;
            let mut out = Map::new();
            for (dir, ids) in glob_match(&store, &pattern)? {
                let mut fingers = Map::new();
                for id in ids
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                {
                    if let Some((_, key)) = store.status(id)? {
                        fingers.insert(id.to_string(), json!(key.fingerprint()));
                    }
                }
                out.insert(dir, Value::Object(fingers));
            }
            Ok(Value::Object(out))
        }
        "key.accept" | "key.reject" | "key.delete" => {
            let pattern = pattern()?;
            let (verb, to) = match fun {
                "key.accept" => ("accept", Some(KeyStatus::Accepted)),
                "key.reject" => ("reject", Some(KeyStatus::Rejected)),
                _ => ("delete", None),
            };
            // Salt's include_* flags: accept(match, include_rejected,
            // include_denied), reject(match, include_accepted, include_denied).
            let mut from = vec![KeyStatus::Pending];
            match verb {
                "accept" => {
                    if flag(args, kwargs, 1, "include_rejected") {
                        from.push(KeyStatus::Rejected);
                    }
                    if flag(args, kwargs, 2, "include_denied") {
                        from.push(KeyStatus::Denied);
                    }
                }
                "reject" => {
                    if flag(args, kwargs, 1, "include_accepted") {
                        from.push(KeyStatus::Accepted);
                    }
                    if flag(args, kwargs, 2, "include_denied") {
                        from.push(KeyStatus::Denied);
                    }
                }
                _ => from = ALL_STATUSES.to_vec(),
            }
            let mut events = Vec::new();
            let mut changed: BTreeMap<String, ()> = BTreeMap::new();
            for status in from {
                for id in store.ids(status)? {
                    if !halite_salt_rules::fnmatch(&id, &pattern) || changed.contains_key(&id) {
                        continue;
                    }
                    match to {
                        Some(to) => {
                            store.transition(&id, status, to)?;
                        }
                        None => {
                            store.delete(&id)?;
                        }
                    }
                    events.push((
                        halite_proto::tags::KEY.to_string(),
                        json!({"act": verb, "id": id, "result": true}),
                    ));
                    changed.insert(id, ());
                }
            }
            if !events.is_empty() {
                tell_master(cfg, events);
            }
            Ok(Value::Object(glob_match(&store, &pattern)?))
        }
        other => Err(WheelError::NotAvailable(other.to_string())),
    }
}

/// Tells a running master to reread the keys and fire the key events; a
/// master that is down rereads them when it starts.
fn tell_master(cfg: &MasterConfig, events: Vec<(String, Value)>) {
    match LocalClient::connect(&cfg.local_socket(), &cfg.root_key_path()) {
        Ok(mut client) => {
            if let Err(e) = client.call(LocalBody::KeysChanged { events }) {
                tracing::warn!(error = %e, "the master did not take the key change; it rereads the keys on its next scan");
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "the master is not reachable; it rereads the keys when it starts")
        }
    }
}
