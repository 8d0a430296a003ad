//! The Salt mine's data rules (Salt's `salt/utils/mine.py` and the
//! selection of `_mine_get`), once for the minion that stores mine data,
//! the master that answers `mine.get`, and the runners that read it.
//!
//! A mine entry sent with `allow_tgt` is wrapped
//! `{"__data__": result, "__saltmine_acl__": 1, "allow_tgt": ..., "allow_tgt_type": ...}`;
//! any other entry is the function's result as is (Salt 3008).

use crate::truth::python_bool;
use crate::{Map, Value};

/// The key marking a wrapped mine entry (Salt's `MINE_ITEM_ACL_ID`).
pub const ACL_ID: &str = "__saltmine_acl__";
/// The key of a wrapped entry's data (Salt's `MINE_ITEM_ACL_DATA`).
pub const ACL_DATA: &str = "__data__";
/// The version Salt writes under [`ACL_ID`].
const ACL_VERSION: i64 = 1;

/// Salt's `wrap_acl_structure`: `data` wrapped with who may read it.
pub fn wrap_acl(data: Value, allow_tgt: &Value, allow_tgt_type: Option<&Value>) -> Value {
    let mut out = Map::new();
    out.insert(ACL_DATA.into(), data);
    out.insert(ACL_ID.into(), Value::from(ACL_VERSION));
    if python_bool(allow_tgt) {
        out.insert("allow_tgt".into(), allow_tgt.clone());
        if let Some(t) = allow_tgt_type.filter(|t| python_bool(t)) {
            out.insert("allow_tgt_type".into(), t.clone());
        }
    }
    Value::Object(out)
}

/// One `mine_functions` entry read as Salt's `parse_function_definition`
/// reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct MineFunction {
    /// `mine_function:` when given (the entry's key is then an alias).
    pub function: Option<String>,
    /// Positional arguments.
    pub args: Vec<Value>,
    /// Keyword arguments (without `mine_function`, `allow_tgt`, `allow_tgt_type`).
    pub kwargs: Map,
    /// `allow_tgt`, when set (Python-true).
    pub allow_tgt: Option<Value>,
    /// `allow_tgt_type`, when set (Python-true).
    pub allow_tgt_type: Option<Value>,
}

/// Salt's `parse_function_definition`: a list (`[eth0]`, or
/// `[{mine_function: network.ip_addrs}, eth0, {allow_tgt: web*}]`: strings
/// are positional, each map's keys are keywords) or a dict (the old form:
/// every key a keyword). Anything else is a call without arguments.
pub fn parse_function_definition(definition: &Value) -> MineFunction {
    let mut args = Vec::new();
    let mut kwargs = Map::new();
    match definition {
        Value::Object(map) => kwargs = map.clone(),
        Value::Array(items) => {
            for item in items {
                match item {
                    Value::Object(map) => kwargs.extend(map.clone()),
                    other => args.push(other.clone()),
                }
            }
        }
        _ => {}
    }
    let function = kwargs.remove("mine_function").map(|f| match f {
        Value::String(s) => s,
        other => crate::pyfmt::python_str(&other),
    });
    let keep = |v: Option<Value>| v.filter(python_bool);
    MineFunction {
        function,
        allow_tgt: keep(kwargs.remove("allow_tgt")),
        allow_tgt_type: keep(kwargs.remove("allow_tgt_type")),
        args,
        kwargs,
    }
}

/// The functions `fun` asks for and whether the answer is keyed by
/// function first (Salt's `_ret_dict`): a string is split on commas (one
/// name: `{minion: data}`), a list always answers `{fun: {minion: data}}`.
/// `None` for anything else (Salt answers `{}`).
pub fn requested_functions(fun: &Value) -> Option<(Vec<String>, bool)> {
    match fun {
        Value::String(s) => {
            let mut names: Vec<String> = Vec::new();
            for name in s.split(',') {
                if !names.iter().any(|n| n == name) {
                    names.push(name.to_string());
                }
            }
            let keyed = names.len() > 1;
            Some((names, keyed))
        }
        Value::Array(items) => Some((items.iter().map(crate::pyfmt::python_str).collect(), true)),
        _ => None,
    }
}

/// The target type `_mine_get` resolves with: `pillar` targets match
/// exactly there (Salt's `pillar_exact`).
pub fn match_type(tgt_type: &str) -> String {
    let lower = tgt_type.to_ascii_lowercase();
    if lower == "pillar" {
        "pillar_exact".into()
    } else {
        lower
    }
}

/// A target given as a list (`allow_tgt: [a, b]` with `list`) as the
/// comma separated string the resolver reads.
fn target_text(tgt: &Value) -> String {
    match tgt {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(crate::pyfmt::python_str)
            .collect::<Vec<_>>()
            .join(","),
        other => crate::pyfmt::python_str(other),
    }
}

/// Python's `re.match(pattern, text)`: the pattern anchored at the start
/// only; a pattern Rust's regex cannot read matches nothing (logged).
fn re_match(pattern: &str, text: &str) -> bool {
    match regex::Regex::new(&format!("^(?:{pattern})")) {
        Ok(re) => re.is_match(text),
        Err(e) => {
            tracing::warn!(%pattern, error = %e, "a mine_get pattern cannot be read; it matches nothing (fix the master's mine_get option)");
            false
        }
    }
}

/// The master's `mine_get` option (Salt's master-side mine ACL:
/// `{minion id regex: [function regex, ...]}`) applied to `requester`
/// asking `functions`: those it may read. Without the option, all.
pub fn allowed_functions(
    acl: Option<&Value>,
    requester: &str,
    functions: Vec<String>,
) -> Vec<String> {
    let Some(acl) = acl else {
        return functions;
    };
    let Value::Object(acl) = acl else {
        return Vec::new();
    };
    let perms: Vec<&str> = acl
        .iter()
        .filter(|(who, _)| re_match(who, requester))
        .filter_map(|(_, perms)| perms.as_array())
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    functions
        .into_iter()
        .filter(|f| perms.iter().any(|p| re_match(p, f)))
        .collect()
}

/// Salt's `_mine_get` once the target is resolved: for each of `minions`
/// (those `tgt` selected) and each requested function in its mine that
/// the master's `mine_get` option (`acl`, when set) lets `requester`
/// read, the data, unwrapped; an entry with `allow_tgt` is given only when
/// `resolve(allow_tgt, allow_tgt_type)` selects `requester` (an
/// `allow_tgt` that selects nobody hides the entry from everyone).
pub fn select<'a>(
    requester: &str,
    fun: &Value,
    acl: Option<&Value>,
    minions: &[String],
    mine_of: impl Fn(&str) -> Option<&'a Map>,
    mut resolve: impl FnMut(&str, &str) -> Vec<String>,
) -> Value {
    let mut ret = Map::new();
    let Some((functions, keyed)) = requested_functions(fun) else {
        return Value::Object(ret);
    };
    let functions = allowed_functions(acl, requester, functions);
    for minion in minions {
        let Some(mine) = mine_of(minion) else {
            continue;
        };
        for function in &functions {
            let Some(entry) = mine.get(function) else {
                continue;
            };
            let data = match entry {
                Value::Object(wrapped) if wrapped.contains_key(ACL_ID) => {
                    if let Some(allow) = wrapped.get("allow_tgt").filter(|a| python_bool(a)) {
                        let kind = wrapped
                            .get("allow_tgt_type")
                            .and_then(Value::as_str)
                            .unwrap_or("glob");
                        let allowed = resolve(&target_text(allow), &match_type(kind));
                        if !allowed.iter().any(|m| m == requester) {
                            continue;
                        }
                    }
                    wrapped.get(ACL_DATA).cloned().unwrap_or(Value::Null)
                }
                other => other.clone(),
            };
            if keyed {
                if let Value::Object(by_minion) = ret
                    .entry(function.clone())
                    .or_insert_with(|| Value::Object(Map::new()))
                {
                    by_minion.insert(minion.clone(), data);
                }
            } else {
                ret.insert(minion.clone(), data);
            }
        }
    }
    Value::Object(ret)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn definitions_parse_as_salt_parses_them() {
        let simple = parse_function_definition(&json!(["eth0"]));
        assert_eq!(simple.function, None);
        assert_eq!(simple.args, vec![json!("eth0")]);
        let alias = parse_function_definition(&json!([
            {"mine_function": "network.ip_addrs"}, "lo", {"cidr": "127.0.0.0/8"},
            {"allow_tgt": "web*", "allow_tgt_type": "glob"}
        ]));
        assert_eq!(alias.function.as_deref(), Some("network.ip_addrs"));
        assert_eq!(alias.args, vec![json!("lo")]);
        assert_eq!(
            alias.kwargs,
            json!({"cidr": "127.0.0.0/8"}).as_object().cloned().unwrap()
        );
        assert_eq!(alias.allow_tgt, Some(json!("web*")));
        let old = parse_function_definition(&json!({"mine_function": "test.arg", "a": 1}));
        assert_eq!(old.function.as_deref(), Some("test.arg"));
        assert_eq!(old.kwargs, json!({"a": 1}).as_object().cloned().unwrap());
        assert!(parse_function_definition(&json!(null)).args.is_empty());
    }

    #[test]
    fn selection_unwraps_and_honours_allow_tgt() {
        let web = json!({
            "ips": ["10.0.0.1"],
            "secret": wrap_acl(json!("s3"), &json!("db*"), Some(&json!("glob"))),
            "open": wrap_acl(json!(7), &json!(null), None),
        });
        let db = json!({"ips": ["10.0.0.2"]});
        let mines = |id: &str| match id {
            "web1" => web.as_object(),
            "db1" => db.as_object(),
            _ => None,
        };
        let all = vec!["db1".to_string(), "web1".to_string(), "new1".to_string()];
        let resolve = |tgt: &str, _: &str| {
            all.iter()
                .filter(|m| crate::fnmatch(m, tgt))
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(
            select("x", &json!("ips"), None, &all, mines, resolve),
            json!({"db1": ["10.0.0.2"], "web1": ["10.0.0.1"]})
        );
        assert_eq!(
            select("web1", &json!("secret"), None, &all, mines, resolve),
            json!({})
        );
        assert_eq!(
            select("db1", &json!("secret"), None, &all, mines, resolve),
            json!({"web1": "s3"})
        );
        assert_eq!(
            select("db1", &json!("ips,secret"), None, &all, mines, resolve),
            json!({"ips": {"db1": ["10.0.0.2"], "web1": ["10.0.0.1"]}, "secret": {"web1": "s3"}})
        );
        assert_eq!(
            select("x", &json!(["open"]), None, &all, mines, resolve),
            json!({"open": {"web1": 7}})
        );
        assert_eq!(
            select("x", &json!(3), None, &all, mines, resolve),
            json!({})
        );
        assert_eq!(match_type("Pillar"), "pillar_exact");
        // The master's mine_get option: app* may read ips only.
        let acl = json!({"app.*": ["ip.*"], "db1": ["secret"]});
        assert_eq!(
            select(
                "app1",
                &json!("ips,secret"),
                Some(&acl),
                &all,
                mines,
                resolve
            ),
            json!({"ips": {"db1": ["10.0.0.2"], "web1": ["10.0.0.1"]}})
        );
        assert_eq!(
            select("web1", &json!("ips"), Some(&acl), &all, mines, resolve),
            json!({})
        );
        assert_eq!(
            select("x", &json!("ips"), Some(&json!([])), &all, mines, resolve),
            json!({})
        );
    }
}
