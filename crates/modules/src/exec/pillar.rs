//! Salt's `pillar` execution module: reading this minion's pillar.

use halite_state::Value;

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// Looks up `a:b:c` (or another delimiter) in nested data; list indexes work.
pub fn traverse<'v>(data: &'v Value, key: &str, delimiter: &str) -> Option<&'v Value> {
    let mut cur = data;
    for part in key.split(delimiter) {
        cur = match cur {
            Value::Object(m) => m.get(part)?,
            Value::Array(a) => a.get(part.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Deep-merges `over` into `base` (mappings recursively; anything else replaced).
pub fn deep_merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(existing) => deep_merge(existing, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// `pillar.get` semantics shared with `grains.get` and `config.get`.
pub fn get_with_default(data: &Value, args: &Args) -> Value {
    let key = args.get_str(0, "key").unwrap_or_default();
    let default = args.get(1, "default").cloned().unwrap_or(Value::from(""));
    let delimiter = args
        .get_str(usize::MAX, "delimiter")
        .unwrap_or_else(|| ":".into());
    let merge = args.get_bool(usize::MAX, "merge", false);
    match traverse(data, &key, &delimiter) {
        Some(v) if merge && v.is_object() && default.is_object() => {
            let mut out = default.clone();
            deep_merge(&mut out, v);
            out
        }
        Some(v) => v.clone(),
        None => default,
    }
}

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "pillar",
    functions: &[
        ExecFunction::new("items", items),
        ExecFunction::new("get", get),
        ExecFunction::new("item", item),
        ExecFunction::new("raw", items),
        ExecFunction::new("keys", keys),
        ExecFunction::new("ls", ls),
        ExecFunction::new("data", items),
        ExecFunction::new("fetch", get),
    ],
};

/// `pillar.items`, `pillar.raw` and `pillar.data`: the whole pillar.
fn items(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    Ok(host.pillar.clone())
}

/// `pillar.get` and `pillar.fetch`: one key, with a default.
fn get(args: &Args, host: &Host) -> Result<Value, ExecError> {
    Ok(get_with_default(&host.pillar, args))
}

/// `pillar.item <keys...>`: the keys given, `""` for missing ones.
fn item(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let mut out = halite_state::Map::new();
    for k in &args.positional {
        let key = crate::exec::py_str(k);
        let v = traverse(&host.pillar, &key, ":")
            .cloned()
            .unwrap_or(Value::from(""));
        out.insert(key, v);
    }
    Ok(Value::Object(out))
}

/// `pillar.keys <key>`: the keys of a mapping in the pillar.
fn keys(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let key = args.require_str(0, "key", "pillar.keys")?;
    match traverse(&host.pillar, &key, ":") {
        Some(Value::Object(m)) => Ok(Value::Array(
            m.keys().map(|k| Value::from(k.clone())).collect(),
        )),
        _ => Err(ExecError::Execution(format!(
            "Pillar key '{key}' is not a dictionary"
        ))),
    }
}

/// `pillar.ls`: the top-level keys of the pillar.
fn ls(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Array(
        host.pillar
            .as_object()
            .map(|m| m.keys().map(|k| Value::from(k.clone())).collect())
            .unwrap_or_default(),
    ))
}
