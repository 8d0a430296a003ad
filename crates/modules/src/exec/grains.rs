//! The `grains` execution module: read-only lookups in the run's grains
//! (`grains.items`, `grains.get`, `grains.item`, `grains.ls`,
//! `grains.has_value`, `grains.filter_by`).
//!
//! Salt's writers (`grains.setval`, `grains.append`...) live in
//! [`super::custom`], which persists them to the config dir's `grains`.

use halite_state::{Map, Value};

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::grains::{custom, deep_update};
use crate::Host;
use halite_salt_rules::fnmatch;
use halite_salt_rules::pyfmt::str_json as python_str;

/// The module's table: read-only lookups in [`Host::grains`].
pub const MODULE: ExecTable = ExecTable {
    name: "grains",
    functions: &[
        ExecFunction::new("items", items),
        ExecFunction::new("item", item),
        ExecFunction::new("get", get),
        // Salt's alias of get.
        ExecFunction::new("fetch", get),
        ExecFunction::new("equals", equals),
        ExecFunction::new("ls", ls),
        ExecFunction::new("has_value", has_value),
        ExecFunction::new("filter_by", filter_by_fn),
        ExecFunction::new("setval", |a, h| writer("setval", a, h)),
        ExecFunction::new("setvals", |a, h| writer("setvals", a, h)),
        ExecFunction::new("set", |a, h| writer("set", a, h)),
        ExecFunction::new("append", |a, h| writer("append", a, h)),
        ExecFunction::new("remove", |a, h| writer("remove", a, h)),
        ExecFunction::new("delval", |a, h| writer("delval", a, h)),
        ExecFunction::new("delkey", |a, h| writer("delkey", a, h)),
    ],
};

/// The writers (`grains.setval`, `grains.append`...), which persist to the
/// config dir's `grains` file ([`custom`]).
fn writer(fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    custom::call(fun, args, host)
        .unwrap_or_else(|| Err(ExecError::NotAvailable(format!("grains.{fun}"))))
}

/// `grains.items`: every grain.
fn items(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    Ok(custom::current(custom::Src::of(host)))
}

/// `grains.ls`: the grain names, sorted.
fn ls(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    // The grains with what this process wrote to the grains file.
    let current = custom::current(custom::Src::of(host));
    let grains = &current;
    let mut keys: Vec<&String> = grains
        .as_object()
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    keys.sort();
    Ok(Value::from(keys.into_iter().cloned().collect::<Vec<_>>()))
}

/// `grains.get <key> [default] [delimiter]`: one grain, by a `a:b` path.
fn get(args: &Args, host: &Host) -> Result<Value, ExecError> {
    // The grains with what this process wrote to the grains file.
    let current = custom::current(custom::Src::of(host));
    let grains = &current;
    let key = args.require_str(0, "key", "get")?;
    let default = args
        .get(1, "default")
        .cloned()
        .unwrap_or_else(|| Value::from(""));
    let delimiter = args.get_str(2, "delimiter").unwrap_or_else(|| ":".into());
    Ok(traverse(grains, &key, &delimiter)
        .cloned()
        .unwrap_or(default))
}

/// `grains.equals <key> <value>`: whether `str(value) == str(grains.get(key))`,
/// as Salt compares them (so `equals osmajorrelease 12` holds for the
/// number 12).
fn equals(args: &Args, host: &Host) -> Result<Value, ExecError> {
    args.require_str(0, "key", "equals")?;
    let value = args.get(1, "value").cloned().ok_or_else(|| {
        ExecError::Invocation("equals() missing 1 required positional argument: 'value'".into())
    })?;
    let key_only = Args {
        positional: args.positional.iter().take(1).cloned().collect(),
        kwargs: args
            .kwargs
            .iter()
            .filter(|(k, _)| k.as_str() == "key")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    };
    let got = get(&key_only, host)?;
    Ok(Value::Bool(
        halite_salt_rules::pyfmt::python_str(&value) == halite_salt_rules::pyfmt::python_str(&got),
    ))
}

/// `grains.item <keys...>`: the grains named, `default=` for missing ones.
fn item(args: &Args, host: &Host) -> Result<Value, ExecError> {
    // The grains with what this process wrote to the grains file.
    let current = custom::current(custom::Src::of(host));
    let grains = &current;
    let default = args
        .kwargs
        .get("default")
        .cloned()
        .unwrap_or_else(|| Value::from(""));
    let delimiter = args
        .kwargs
        .get("delimiter")
        .and_then(Value::as_str)
        .unwrap_or(":");
    let mut out = Map::new();
    for arg in &args.positional {
        let key = match arg {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let value = traverse(grains, &key, delimiter)
            .cloned()
            .unwrap_or_else(|| default.clone());
        out.insert(key, value);
    }
    Ok(Value::Object(out))
}

/// `grains.has_value <key>`: whether the grain exists.
fn has_value(args: &Args, host: &Host) -> Result<Value, ExecError> {
    // The grains with what this process wrote to the grains file.
    let current = custom::current(custom::Src::of(host));
    let grains = &current;
    let key = args.require_str(0, "key", "has_value")?;
    Ok(Value::Bool(traverse(grains, &key, ":").is_some()))
}

/// `grains.filter_by <lookup_dict> [grain] [merge] [default] [base]`.
fn filter_by_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    // The grains with what this process wrote to the grains file.
    let current = custom::current(custom::Src::of(host));
    let grains = &current;
    let lookup = match args.get(0, "lookup_dict") {
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Err(ExecError::Invocation(format!(
                "filter_by: lookup_dict must be a dictionary, not {}",
                halite_state::type_name(other)
            )))
        }
        None => {
            return Err(ExecError::Invocation(
                "filter_by() missing 1 required positional argument: 'lookup_dict'".into(),
            ))
        }
    };
    let grain = args
        .get_str(1, "grain")
        .unwrap_or_else(|| "os_family".into());
    // Salt: `if merge:` — an empty mapping is no merge.
    let merge = args
        .get(2, "merge")
        .filter(|v| halite_salt_rules::truthy(v));
    let default = args
        .get_str(3, "default")
        .unwrap_or_else(|| "default".into());
    let base = args.get_str(4, "base");
    filter_by(&lookup, grains, &grain, merge, &default, base.as_deref())
        .map_err(ExecError::Execution)
}

/// Salt's `traverse_dict_and_list`: follows `key` split on `delimiter`
/// through mappings and lists (a number indexes a list; a name looks into
/// the mappings inside a list). `None` when the path does not exist.
pub fn traverse<'a>(data: &'a Value, key: &str, delimiter: &str) -> Option<&'a Value> {
    let mut ptr = data;
    for part in key.split(delimiter) {
        ptr = match ptr {
            Value::Object(map) => map.get(part)?,
            Value::Array(list) => {
                let embedded = list
                    .iter()
                    .filter_map(Value::as_object)
                    .find_map(|m| m.get(part));
                match (embedded, part.parse::<usize>()) {
                    (Some(v), _) => v,
                    (None, Ok(idx)) => list.get(idx)?,
                    (None, Err(_)) => return None,
                }
            }
            _ => return None,
        };
    }
    Some(ptr)
}

/// Salt's `filter_by`: the entry of `lookup` whose key (a glob) matches
/// the grain `grain` (each item when the grain is a list), else the
/// `default` entry; the `base` entry deep-merged under it and `merge`
/// deep-merged over it.
pub fn filter_by(
    lookup: &Map,
    grains: &Value,
    grain: &str,
    merge: Option<&Value>,
    default: &str,
    base: Option<&str>,
) -> Result<Value, String> {
    let values: Vec<String> = match traverse(grains, grain, ":") {
        Some(Value::Array(items)) => items.iter().map(python_str).collect(),
        Some(Value::Null) | None => Vec::new(),
        Some(v) => vec![python_str(v)],
    };
    // For each value, the first matching key counts; a `None` value there
    // moves on to the next grain value, then to `default`, as in Salt.
    let mut ret = values.iter().find_map(|value| {
        lookup
            .iter()
            .find(|(pattern, _)| fnmatch(value, pattern))
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_null())
    });
    if ret.is_none() {
        ret = lookup.get(default).cloned().filter(|v| !v.is_null());
    }
    if let Some(base_values) = base.and_then(|b| lookup.get(b)) {
        ret = match ret {
            None => Some(base_values.clone()),
            Some(found) if base_values.is_object() => {
                if !found.is_object() {
                    return Err(
                        "filter_by default and look-up values must both be dictionaries.".into(),
                    );
                }
                let mut merged = base_values.clone();
                deep_update(&mut merged, &found);
                Some(merged)
            }
            Some(found) => Some(found),
        };
    }
    if let Some(merge) = merge {
        if !merge.is_object() {
            return Err("filter_by merge argument must be a dictionary.".into());
        }
        ret = match ret {
            None => Some(merge.clone()),
            Some(mut found) => {
                deep_update(&mut found, merge);
                Some(found)
            }
        };
    }
    Ok(ret.unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn traverse_walks_maps_and_lists() {
        let g = json!({"a": {"b": [10, {"c": "x"}]}});
        assert_eq!(traverse(&g, "a:b:0", ":"), Some(&json!(10)));
        assert_eq!(traverse(&g, "a:b:c", ":"), Some(&json!("x")));
        assert_eq!(traverse(&g, "a.b.1.c", "."), Some(&json!("x")));
        assert_eq!(traverse(&g, "a:zz", ":"), None);
    }

    #[test]
    fn filter_by_matches_globs_then_default_base_and_merge() {
        let g = json!({"os_family": "Debian", "roles": ["db", "web"]});
        let lookup = json!({"Deb*": {"pkg": "apache2"}, "RedHat": {"pkg": "httpd"}, "default": {"pkg": "x", "port": 80}});
        let lookup = lookup.as_object().cloned().unwrap_or_default();
        assert_eq!(
            filter_by(&lookup, &g, "os_family", None, "default", None),
            Ok(json!({"pkg": "apache2"}))
        );
        assert_eq!(
            filter_by(
                &lookup,
                &g,
                "os_family",
                Some(&json!({"port": 8080})),
                "default",
                Some("default")
            ),
            Ok(json!({"pkg": "apache2", "port": 8080}))
        );
        assert_eq!(
            filter_by(&lookup, &g, "missing", None, "default", None),
            Ok(json!({"pkg": "x", "port": 80}))
        );
        let roles = json!({"web": 1, "db": 2})
            .as_object()
            .cloned()
            .unwrap_or_default();
        // The first list item with a match wins, in the grain's order.
        assert_eq!(
            filter_by(&roles, &g, "roles", None, "default", None),
            Ok(json!(2))
        );
        assert!(filter_by(&lookup, &g, "os_family", Some(&json!([1])), "default", None).is_err());
        let nulls = json!({"Deb*": null, "default": "d"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            filter_by(&nulls, &g, "os_family", None, "default", None),
            Ok(json!("d"))
        );
    }
}
