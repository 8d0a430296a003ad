//! Salt's wheel `key.*` (salt/wheel/key.py) over the master's key
//! directories, telling the running master at once: the functions
//! halite-api's `wheel` clients call, and the pieces `halite-key` builds
//! its prompts and listings from (one copy of the key rules for both).
//! Only these functions exist: no wheel function takes a path or a
//! template from the request (CVE-2021-25282/25283), and a key's `match`
//! only filters the ids that are already on disk.

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

/// The ids matching glob `pattern`, by key directory (`minions`,
/// `minions_pre`...), directories without a match left out (Salt's
/// `name_match`).
pub fn glob_match(
    store: &KeyStore,
    pattern: &str,
) -> Result<BTreeMap<String, Vec<String>>, halite_client::keys::KeyError> {
    let mut out = BTreeMap::new();
    for status in ALL_STATUSES {
        let ids: Vec<String> = store
            .ids(status)?
            .into_iter()
            .filter(|id| halite_salt_rules::fnmatch(id, pattern))
            .collect();
        if !ids.is_empty() {
            out.insert(status_dir(status).to_string(), ids);
        }
    }
    Ok(out)
}

fn glob_map(store: &KeyStore, pattern: &str) -> Result<Map<String, Value>, WheelError> {
    Ok(glob_match(store, pattern)?
        .into_iter()
        .map(|(dir, ids)| (dir, json!(ids)))
        .collect())
}

/// The key directories `salt-key -l <which>` / `key.list <which>` shows
/// (`all`, `acc`/`accepted`, `pre`/`un`/`unaccepted`, `rej`/`rejected`,
/// `den`/`denied`); `None` for another word.
pub fn statuses_named(which: &str) -> Option<Vec<KeyStatus>> {
    let all = ALL_STATUSES.to_vec();
    let one = |s: KeyStatus| Some(vec![s]);
    match which {
        "all" | "" => Some(all),
        "acc" | "accepted" => one(KeyStatus::Accepted),
        "pre" | "un" | "unaccepted" => one(KeyStatus::Pending),
        "rej" | "rejected" => one(KeyStatus::Rejected),
        "den" | "denied" => one(KeyStatus::Denied),
        _ => None,
    }
}

/// `{dir: {id: fingerprint}}` of the keys matching glob `pattern`.
pub fn fingers(store: &KeyStore, pattern: &str) -> Result<Map<String, Value>, WheelError> {
    let mut out = Map::new();
    for (dir, ids) in glob_match(store, pattern)? {
        let mut fingers = Map::new();
        for id in ids {
            if let Some((_, key)) = store.status(&id)? {
                fingers.insert(id, json!(key.fingerprint()));
            }
        }
        out.insert(dir, Value::Object(fingers));
    }
    Ok(out)
}

/// Accepts, rejects or deletes (`verb`) the keys of `matched` (`{dir:
/// [ids]}`), then tells a running master to reread them and fire Salt's
/// `salt/key` events; the ids changed, in order.
pub fn apply(
    cfg: &MasterConfig,
    store: &KeyStore,
    verb: &str,
    matched: &BTreeMap<String, Vec<String>>,
) -> Result<Vec<String>, WheelError> {
    let mut events = Vec::new();
    let mut changed: Vec<String> = Vec::new();
    for (dir, ids) in matched {
        let Some(from) = ALL_STATUSES.into_iter().find(|s| status_dir(*s) == dir) else {
            continue;
        };
        for id in ids {
            if changed.contains(id) {
                continue;
            }
            match verb {
                "accept" => {
                    store.transition(id, from, KeyStatus::Accepted)?;
                }
                "reject" => {
                    store.transition(id, from, KeyStatus::Rejected)?;
                }
                _ => {
                    store.delete(id)?;
                }
            }
            events.push((
                halite_proto::tags::KEY.to_string(),
                json!({"act": verb, "id": id, "result": true}),
            ));
            changed.push(id.clone());
        }
    }
    if !events.is_empty() {
        tell_master(cfg, events);
    }
    Ok(changed)
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
            // Salt's key.list answers `{}` for a word it does not know.
            for status in statuses_named(&which).unwrap_or_default() {
                out.insert(status_dir(status).into(), json!(store.ids(status)?));
            }
            Ok(Value::Object(out))
        }
        "key.name_match" => Ok(Value::Object(glob_map(&store, &pattern()?)?)),
        "key.finger" => Ok(Value::Object(fingers(&store, &pattern()?)?)),
        "key.accept" | "key.reject" | "key.delete" => {
            let pattern = pattern()?;
            let verb = match fun {
                "key.accept" => "accept",
                "key.reject" => "reject",
                _ => "delete",
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
            let mut matched = glob_match(&store, &pattern)?;
            matched.retain(|dir, _| from.iter().any(|s| status_dir(*s) == dir));
            apply(cfg, &store, verb, &matched)?;
            Ok(Value::Object(glob_map(&store, &pattern)?))
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
