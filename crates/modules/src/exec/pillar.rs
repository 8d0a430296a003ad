//! Salt's `pillar` execution module: reading this minion's pillar.
//!
//! As in Salt 3008.5, what `pillar.items`, `pillar.get` and `pillar.item`
//! return is masked (`**********` for every non-empty value,
//! `halite_salt_rules::secret::serial`) unless `unmask=True`;
//! `pillar.raw` is unmasked unless `unmask=False`; `pillar_mask_output:
//! False` makes `pillar.items` unmasked by default. Templates see plain
//! values ([`unmask_for_render`]), as Salt turns masking off while it
//! renders.

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
        ExecFunction::new("raw", raw),
        ExecFunction::new("keys", keys),
        ExecFunction::new("ls", ls),
        ExecFunction::new("data", items),
        ExecFunction::new("fetch", get),
        ExecFunction::new("obfuscate", obfuscate),
    ],
};

/// A `salt['pillar.*']` call made while rendering a template or SLS:
/// `unmask=True` added when the caller did not say, since Salt renders
/// with masking off (`mask_pillar` is false in its renderers) so SLS
/// files get real values.
pub fn unmask_for_render(fun: &str, kwargs: &mut halite_state::Map) {
    if fun.starts_with("pillar.") && !kwargs.contains_key("unmask") {
        kwargs.insert("unmask".into(), Value::Bool(true));
    }
}

/// The caller's `unmask=`, else `default`.
fn unmask(args: &Args, default: bool) -> bool {
    args.get(usize::MAX, "unmask")
        .filter(|v| !v.is_null())
        .map_or(default, halite_salt_rules::truthy)
}

/// `value` as the caller may see it: masked unless `unmask`.
fn shown(value: Value, unmask: bool) -> Value {
    if unmask {
        value
    } else {
        halite_salt_rules::secret::serial(&value)
    }
}

/// `pillar.items` and `pillar.data`: the whole pillar, masked unless
/// `unmask=True` or the option `pillar_mask_output: False`.
fn items(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let default = host
        .opt("pillar_mask_output")
        .is_some_and(|v| !halite_salt_rules::truth::python_bool(v));
    Ok(shown(host.pillar.clone(), unmask(args, default)))
}

/// `pillar.obfuscate`: `pillar.items` (masked or not as it would be)
/// with every leaf replaced by its Python type, `'<str>'`, `'<int>'`...;
/// mapping keys and the structure are kept. Salt obfuscates what `items`
/// returned, so a masked number or `True` shows as `'<str>'` unless
/// `unmask=True` (recorded from Salt 3008.5).
fn obfuscate(args: &Args, host: &Host) -> Result<Value, ExecError> {
    Ok(obfuscated(&items(args, host)?))
}

/// Salt's `_obfuscate_inner`.
fn obfuscated(value: &Value) -> Value {
    match value {
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), obfuscated(v))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(obfuscated).collect()),
        // Python's type(None).__name__.
        Value::Null => Value::from("<NoneType>"),
        leaf => Value::from(format!("<{}>", halite_state::type_name(leaf))),
    }
}

/// `pillar.raw [key]`: the pillar (or one top-level key, `{}` when
/// missing) unmasked unless `unmask=False`.
fn raw(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let value = match args.get_str(0, "key").filter(|k| !k.is_empty()) {
        Some(key) => host
            .pillar
            .get(&key)
            .cloned()
            .unwrap_or_else(|| Value::Object(halite_state::Map::new())),
        None => host.pillar.clone(),
    };
    Ok(shown(value, unmask(args, true)))
}

/// `pillar.get` and `pillar.fetch`: one key, with a default; masked
/// unless `unmask=True` (the default too, as Salt masks what it returns).
fn get(args: &Args, host: &Host) -> Result<Value, ExecError> {
    Ok(shown(
        get_with_default(&host.pillar, args),
        unmask(args, false),
    ))
}

/// `pillar.item <keys...>`: the keys given, `""` for missing ones;
/// masked unless `unmask=True`.
fn item(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let mut out = halite_state::Map::new();
    for k in &args.positional {
        let key = crate::exec::py_str(k);
        let v = traverse(&host.pillar, &key, ":")
            .cloned()
            .unwrap_or(Value::from(""));
        out.insert(key, v);
    }
    Ok(shown(Value::Object(out), unmask(args, false)))
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
