//! The wheel functions a reactor calls: `key.accept`, `key.reject` and
//! `key.delete` with Salt's `match` (a glob, or a list of globs) and
//! `include_*` flags. The key files change on disk as `halite-key` changes
//! them; the master is then told (it rereads its keys and fires Salt's
//! `salt/key` events).

use serde_json::{json, Map, Value};

use crate::keys::KeyStore;
use halite_proto::msg::KeyStatus;

/// The key functions of Salt's `key` wheel halite's reactor runs.
pub const FUNCTIONS: &[&str] = &["key.accept", "key.reject", "key.delete"];

/// The globs of `match` (a string, or a list of strings).
fn globs(m: &Value) -> Result<Vec<String>, String> {
    match m {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items) => Ok(items
            .iter()
            .map(halite_salt_rules::pyfmt::python_str)
            .collect()),
        Value::Null => Err("the key functions need match: a minion id or glob".into()),
        other => Ok(vec![halite_salt_rules::pyfmt::python_str(other)]),
    }
}

/// The statuses `fun` acts on, from its `include_*` flags.
fn sources(fun: &str, kw: &Map<String, Value>) -> Vec<KeyStatus> {
    let flag = |k: &str| kw.get(k).is_some_and(halite_salt_rules::truthy);
    let mut from = vec![KeyStatus::Pending];
    match fun {
        "key.accept" => {
            if flag("include_rejected") {
                from.push(KeyStatus::Rejected);
            }
            if flag("include_denied") {
                from.push(KeyStatus::Denied);
            }
        }
        "key.reject" => {
            if flag("include_accepted") {
                from.push(KeyStatus::Accepted);
            }
            if flag("include_denied") {
                from.push(KeyStatus::Denied);
            }
        }
        _ => {
            from = vec![
                KeyStatus::Accepted,
                KeyStatus::Pending,
                KeyStatus::Rejected,
                KeyStatus::Denied,
            ];
        }
    }
    from
}

/// Runs wheel `fun` on the key store; its return (`{"minions": [ids]}`)
/// and the `salt/key` events to fire for what changed.
pub fn call(
    keys: &KeyStore,
    fun: &str,
    positional: &[Value],
    kw: &Map<String, Value>,
) -> Result<(Value, Vec<(String, Value)>), String> {
    if !FUNCTIONS.contains(&fun) {
        return Err(format!(
            "'{fun}' is not available: halite's reactor runs the wheel functions {}",
            FUNCTIONS.join(", ")
        ));
    }
    let m = kw
        .get("match")
        .or_else(|| positional.first())
        .cloned()
        .unwrap_or(Value::Null);
    let globs = globs(&m)?;
    let (act, to) = match fun {
        "key.accept" => ("accept", Some(KeyStatus::Accepted)),
        "key.reject" => ("reject", Some(KeyStatus::Rejected)),
        _ => ("delete", None),
    };
    let mut done = Vec::new();
    let mut events = Vec::new();
    for from in sources(fun, kw) {
        let ids = keys.ids(from).map_err(|e| e.to_string())?;
        for id in ids {
            if !globs.iter().any(|g| halite_salt_rules::fnmatch(&id, g)) || done.contains(&id) {
                continue;
            }
            let changed = match to {
                Some(to) => keys.transition(&id, from, to).map_err(|e| e.to_string())?,
                None => !keys.delete(&id).map_err(|e| e.to_string())?.is_empty(),
            };
            if changed {
                events.push((
                    halite_proto::tags::KEY.to_string(),
                    json!({"act": act, "id": id, "result": true}),
                ));
                done.push(id);
            }
        }
    }
    Ok((json!({ "minions": done }), events))
}

#[cfg(test)]
mod tests {
    use super::*;
    use halite_proto::Identity;

    #[test]
    fn accept_moves_matching_pending_keys_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let keys = KeyStore::open(dir.path()).expect("store");
        for id in ["web1", "web2", "db1"] {
            let key = Identity::generate().expect("key").public();
            keys.put(KeyStatus::Pending, id, &key).expect("put");
        }
        let kw = json!({"match": "web*"}).as_object().cloned().expect("map");
        let (ret, events) = call(&keys, "key.accept", &[], &kw).expect("accept");
        assert_eq!(ret, json!({"minions": ["web1", "web2"]}));
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].0, "salt/key");
        assert_eq!(keys.ids(KeyStatus::Pending).expect("ids"), ["db1"]);
        let (ret, _) = call(&keys, "key.delete", &[json!("db1")], &Map::new()).expect("delete");
        assert_eq!(ret, json!({"minions": ["db1"]}));
        assert!(call(&keys, "key.gen", &[], &kw).is_err());
        assert!(call(&keys, "key.accept", &[], &Map::new()).is_err());
    }
}
