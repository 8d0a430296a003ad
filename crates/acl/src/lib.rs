//! Salt's ACL grammar (salt/utils/minions.py `fill_auth_list`,
//! `auth_check`, `spec_check`): what an `external_auth` (or
//! `publisher_acl`) entry allows.
//!
//! An auth list is a list of entries, each either
//! - a string: a regular expression (Python `re.match`, anchored at the
//!   start) on the function name, for every minion (`'.*'`, `'test.*'`);
//!   or, starting with `@`, a whole class (`@runner`, `@wheel`, `@jobs`
//!   for the runner module `jobs`);
//! - a one-key mapping: `{minion target: [function conditions]}` or
//!   `{'@runner': [...]}` / `{'@jobs': [...]}`, where each condition is a
//!   function regex or `{fun regex: {'args': [...], 'kwargs': {...}}}`.
//!
//! One crate for the rules, so the master (`publisher_acl` for local
//! users of the `halite` CLI) and halite-api (`external_auth`) cannot
//! drift apart.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// Python's `re.match(pattern, text)`: the pattern anchored at the start
/// only. An invalid pattern matches nothing (Salt logs and moves on).
pub fn re_match(pattern: &str, text: &str) -> bool {
    match regex::Regex::new(&format!(r"\A(?:{pattern})")) {
        Ok(re) => re.is_match(text),
        Err(e) => {
            tracing::error!(pattern, error = %e, "invalid regular expression in an ACL");
            false
        }
    }
}

/// Salt's `expr_match` for user names: equal, fnmatch, or a full regex match.
pub fn expr_match(expr: &str, name: &str) -> bool {
    expr == name
        || halite_salt_rules::fnmatch(name, expr)
        || regex::Regex::new(&format!(r"\A(?:{expr})\z")).is_ok_and(|re| re.is_match(name))
}

/// The auth list of `user` (in `groups`) under one eauth backend's
/// configuration (`external_auth: {pam: {...}}`'s inner mapping): the
/// entries of every user pattern that matches, of every `group%` the user
/// is in, and `*`'s only when no user pattern matched (Salt's
/// non-permissive default; `permissive` adds `*` always).
pub fn fill_auth_list(
    provider: &Map<String, Value>,
    user: &str,
    groups: &BTreeSet<String>,
    permissive: bool,
) -> Vec<Value> {
    let mut list = Vec::new();
    let mut name_matched = false;
    for (pattern, entries) in provider {
        if pattern == "*" && !permissive {
            continue;
        }
        let add = if let Some(group) = pattern.strip_suffix('%') {
            groups.contains(group)
        } else if expr_match(pattern, user) {
            name_matched = true;
            true
        } else {
            false
        };
        if add {
            extend(&mut list, entries);
        }
    }
    if !permissive && !name_matched {
        if let Some(entries) = provider.get("*") {
            extend(&mut list, entries);
        }
    }
    list
}

fn extend(list: &mut Vec<Value>, entries: &Value) {
    match entries {
        Value::Array(items) => list.extend(items.iter().cloned()),
        Value::Null => {}
        other => list.push(other.clone()),
    }
}

/// Salt's `sorted_permissions`: strings sorted, then the mappings, each
/// once (the `perms` of the login document).
pub fn sorted_permissions(perms: &[Value]) -> Vec<Value> {
    let mut strings: Vec<String> = Vec::new();
    let mut others: Vec<Value> = Vec::new();
    for p in perms {
        match p {
            Value::String(s) if !strings.contains(s) => strings.push(s.clone()),
            Value::String(_) => {}
            other if !others.contains(other) => others.push(other.clone()),
            _ => {}
        }
    }
    strings.sort();
    others.sort_by_key(halite_salt_rules::pyfmt::python_repr);
    strings
        .into_iter()
        .map(Value::String)
        .chain(others)
        .collect()
}

/// The call being authorised: a function with its arguments.
#[derive(Debug, Clone, Default)]
pub struct Call<'a> {
    /// `mod.fun`.
    pub fun: &'a str,
    /// Positional arguments.
    pub args: &'a [Value],
    /// Keyword arguments.
    pub kwargs: Option<&'a Map<String, Value>>,
}

/// `auth_check` for an execution function on minions: whether `list`
/// allows `call` on the target. `target_within(valid)` says whether every
/// minion the request targets is matched by the ACL's compound target
/// `valid` (Salt's `validate_tgt`).
pub fn auth_check(
    list: &[Value],
    call: &Call<'_>,
    mut target_within: impl FnMut(&str) -> bool,
) -> bool {
    for entry in list {
        match entry {
            Value::String(pattern) if !pattern.starts_with('@') && re_match(pattern, call.fun) => {
                return true;
            }
            Value::Object(map) if map.len() == 1 => {
                let Some((valid, conds)) = map.iter().next() else {
                    continue;
                };
                if valid.starts_with('@') {
                    continue;
                }
                if target_within(valid) && fun_check(conds, call.fun, call.args, call.kwargs) {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

/// `spec_check` for the `runner` and `wheel` clients (`form`): `@runner`,
/// `@wheel`, `@<module>` (`@jobs`), `@runners`, or their mapping forms
/// with function conditions. An execution-module entry such as `'.*'`
/// never grants a runner or wheel function (CVE-2021-25281).
pub fn spec_check(list: &[Value], form: &str, call: &Call<'_>) -> bool {
    let Some((module, name)) = call.fun.split_once('.') else {
        return false;
    };
    if name.contains('.') {
        return false;
    }
    let plural = format!("@{form}s");
    for entry in list {
        match entry {
            Value::String(s) => {
                if let Some(class) = s.strip_prefix('@') {
                    if class == module || class == form || *s == plural {
                        return true;
                    }
                }
            }
            Value::Object(map) if map.len() == 1 => {
                let Some((valid, conds)) = map.iter().next() else {
                    continue;
                };
                let Some(class) = valid.strip_prefix('@') else {
                    continue;
                };
                if class == module && fun_check(conds, name, call.args, call.kwargs) {
                    return true;
                }
                if (class == form || *valid == plural)
                    && fun_check(conds, call.fun, call.args, call.kwargs)
                {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

/// `__fun_check`: one of `conds` (a regex, or `{regex: args spec}`) allows
/// `fun` with these arguments.
fn fun_check(
    conds: &Value,
    fun: &str,
    args: &[Value],
    kwargs: Option<&Map<String, Value>>,
) -> bool {
    let conds: Vec<&Value> = match conds {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    conds.into_iter().any(|cond| match cond {
        Value::String(pattern) => re_match(pattern, fun),
        Value::Object(m) if m.len() == 1 => m.iter().next().is_some_and(|(pattern, spec)| {
            re_match(pattern, fun) && args_check(spec, args, kwargs)
        }),
        _ => false,
    })
}

/// `__args_check`: `spec` (`{'args': [...], 'kwargs': {...}}` or a list
/// of them) allows these arguments. `None`/null conditions allow anything;
/// the others are regexes on Python's `str()` of the argument.
fn args_check(spec: &Value, args: &[Value], kwargs: Option<&Map<String, Value>>) -> bool {
    let specs: Vec<&Value> = match spec {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    specs.into_iter().any(|cond| {
        let Value::Object(cond) = cond else {
            return false;
        };
        let positional_ok = match cond.get("args") {
            Some(Value::Array(wanted)) => wanted.iter().enumerate().all(|(i, w)| {
                args.get(i).is_some_and(|a| match w {
                    Value::Null => true,
                    w => re_match(
                        &halite_salt_rules::pyfmt::python_str(w),
                        &halite_salt_rules::pyfmt::python_str(a),
                    ),
                })
            }),
            _ => true,
        };
        let keywords_ok = match cond.get("kwargs") {
            Some(Value::Object(wanted)) => wanted.iter().all(|(k, w)| {
                kwargs.and_then(|m| m.get(k)).is_some_and(|a| match w {
                    Value::Null => true,
                    w => re_match(
                        &halite_salt_rules::pyfmt::python_str(w),
                        &halite_salt_rules::pyfmt::python_str(a),
                    ),
                })
            }),
            _ => true,
        };
        positional_ok && keywords_ok
    })
}

/// Functions every authorised publisher may run whatever its list says:
/// the CLI asks the minions whether a job still runs (Salt's `publish`
/// passes the same whitelist to `auth_check`).
pub const ALWAYS_ALLOWED: [&str; 1] = ["saltutil.find_job"];

/// `auth_check` with [`ALWAYS_ALLOWED`] first (Salt's `whitelist`).
pub fn publish_check(
    list: &[Value],
    call: &Call<'_>,
    target_within: impl FnMut(&str) -> bool,
) -> bool {
    ALWAYS_ALLOWED.contains(&call.fun) || auth_check(list, call, target_within)
}

/// `list` with every argument condition dropped (`{'state.apply':
/// {'args': ['app']}}` becomes `'state.apply'`): what the list grants for
/// *some* arguments. For a page deciding whether to offer a function
/// before the user has typed its arguments; the call itself is still
/// checked with them ([`auth_check`], [`spec_check`]).
pub fn ignoring_arguments(list: &[Value]) -> Vec<Value> {
    fn cond(c: &Value) -> Value {
        match c {
            Value::Object(m) if m.len() == 1 => m
                .keys()
                .next()
                .map_or_else(|| c.clone(), |pattern| Value::String(pattern.clone())),
            Value::Array(items) => Value::Array(items.iter().map(cond).collect()),
            other => other.clone(),
        }
    }
    list.iter()
        .map(|entry| match entry {
            Value::Object(map) if map.len() == 1 => Value::Object(
                map.iter()
                    .map(|(valid, conds)| (valid.clone(), cond(conds)))
                    .collect(),
            ),
            other => other.clone(),
        })
        .collect()
}

/// The compound targets an auth list's mapping entries name (`{'web*':
/// [...]}` gives `web*`), so a caller can resolve them before
/// [`auth_check`] asks.
pub fn targets_named(list: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for entry in list {
        if let Value::Object(map) = entry {
            for key in map.keys() {
                if !key.starts_with('@') && !out.contains(key) {
                    out.push(key.clone());
                }
            }
        }
    }
    out
}

/// The auth list `publisher_acl` gives local user `user`: the entries of
/// every key that names the user (equal, fnmatch or regex; Salt's
/// `get_values_of_matching_keys`). Empty: the user may run nothing.
pub fn publisher_acl_list(publisher_acl: &Map<String, Value>, user: &str) -> Vec<Value> {
    let mut list = Vec::new();
    for (expr, entries) in publisher_acl {
        if expr_match(expr, user) {
            extend(&mut list, entries);
        }
    }
    list
}

/// `publisher_acl_blacklist`: users who may publish nothing and functions
/// nobody but root may publish (Salt's `PublisherACL`), each entry an
/// exact name, a glob or a regex.
#[derive(Debug, Clone, Default)]
pub struct PublisherBlacklist {
    users: Vec<String>,
    modules: Vec<String>,
}

impl PublisherBlacklist {
    /// Reads the `publisher_acl_blacklist` mapping (`users:`, `modules:`);
    /// anything else there is ignored, as Salt ignores it.
    pub fn from_config(value: Option<&Value>) -> Self {
        let names = |key: &str| -> Vec<String> {
            match value.and_then(|v| v.get(key)) {
                Some(Value::Array(items)) => items
                    .iter()
                    .map(halite_salt_rules::pyfmt::python_str)
                    .collect(),
                Some(Value::String(s)) => vec![s.clone()],
                _ => Vec::new(),
            }
        };
        Self {
            users: names("users"),
            modules: names("modules"),
        }
    }

    /// Whether `user` is blacklisted.
    pub fn user_is_blacklisted(&self, user: &str) -> bool {
        self.users.iter().any(|expr| expr_match(expr, user))
    }

    /// Whether function `fun` is blacklisted.
    pub fn cmd_is_blacklisted(&self, fun: &str) -> bool {
        self.modules.iter().any(|expr| expr_match(expr, fun))
    }
}

/// The message a refused publisher sees (Salt's `AuthorizationError`).
pub const AUTHORIZATION_ERROR: &str = "Authorization error occurred.";

/// Salt's message for a local user `publisher_acl` does not name.
pub const USER_AUTHENTICATION_ERROR: &str = "Authentication failure of type \"user\" occurred.";

/// Whether a master's refusal is one of Salt's ACL messages (the CLI
/// prints those as Salt's `salt` does, not as a failure to connect).
pub fn is_acl_refusal(message: &str) -> bool {
    message == AUTHORIZATION_ERROR || message == USER_AUTHENTICATION_ERROR
}

/// The data of the `salt/auth/*` event fired for a refusal: who (`user`,
/// by `eauth`: a backend, or `user` for a local publisher), `what` was
/// asked, `why` it was refused and from where (`source`), stamped.
pub fn refusal_event(user: &str, eauth: &str, what: &str, why: &str, source: &str) -> Value {
    serde_json::json!({
        "act": "refused",
        "user": user,
        "eauth": eauth,
        "what": what,
        "reason": why,
        "source": source,
        "_stamp": chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.6f").to_string(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use serde_json::json;

    fn list(v: Value) -> Vec<Value> {
        v.as_array().unwrap().clone()
    }

    fn call<'a>(fun: &'a str, args: &'a [Value]) -> Call<'a> {
        Call {
            fun,
            args,
            kwargs: None,
        }
    }

    #[test]
    fn ignoring_arguments_grants_what_some_arguments_would() {
        let l = list(json!([
            {"web*": [{"state.apply": {"args": ["app"]}}, "test.ping"]},
            {"@wheel": ["key.list_all", {"key.reject": {"args": ["newbie"]}}]},
            "grains.*"
        ]));
        // Without arguments the conditions refuse...
        assert!(!auth_check(&l, &call("state.apply", &[]), |_| true));
        assert!(!spec_check(&l, "wheel", &call("key.reject", &[])));
        // ...and the loose list offers them; the rest is unchanged.
        let loose = ignoring_arguments(&l);
        assert!(auth_check(&loose, &call("state.apply", &[]), |_| true));
        assert!(!auth_check(&loose, &call("state.apply", &[]), |_| false));
        assert!(spec_check(&loose, "wheel", &call("key.reject", &[])));
        assert!(!spec_check(&loose, "wheel", &call("key.delete", &[])));
        assert_eq!(
            Value::Array(loose),
            json!([
                {"web*": ["state.apply", "test.ping"]},
                {"@wheel": ["key.list_all", "key.reject"]},
                "grains.*"
            ])
        );
    }

    #[test]
    fn string_entries_are_anchored_regexes_on_the_function() {
        let l = list(json!(["test.*", "grains.item"]));
        assert!(auth_check(&l, &call("test.ping", &[]), |_| true));
        assert!(auth_check(&l, &call("grains.items", &[]), |_| true));
        assert!(!auth_check(&l, &call("cmd.run", &[]), |_| true));
        assert!(!auth_check(&l, &call("mytest.ping", &[]), |_| true));
    }

    #[test]
    fn target_entries_need_every_targeted_minion_inside() {
        let l = list(json!([{"web*": ["state.*"]}]));
        assert!(auth_check(&l, &call("state.apply", &[]), |v| v == "web*"));
        assert!(!auth_check(&l, &call("state.apply", &[]), |_| false));
        assert!(!auth_check(&l, &call("cmd.run", &[]), |_| true));
    }

    #[test]
    fn argument_conditions() {
        let l = list(json!([{"*": [{"cmd.run": {"args": ["ls.*"], "kwargs": {"cwd": "/tmp"}}}]}]));
        let mut kw = Map::new();
        kw.insert("cwd".into(), json!("/tmp"));
        let args = [json!("ls -l")];
        let ok = Call {
            fun: "cmd.run",
            args: &args,
            kwargs: Some(&kw),
        };
        assert!(auth_check(&l, &ok, |_| true));
        let bad_args = [json!("rm -rf /")];
        let bad = Call {
            fun: "cmd.run",
            args: &bad_args,
            kwargs: Some(&kw),
        };
        assert!(!auth_check(&l, &bad, |_| true));
        let no_kw = Call {
            fun: "cmd.run",
            args: &args,
            kwargs: None,
        };
        assert!(!auth_check(&l, &no_kw, |_| true));
    }

    #[test]
    fn runner_and_wheel_need_their_own_entries() {
        let everything = list(json!([".*"]));
        assert!(!spec_check(
            &everything,
            "runner",
            &call("jobs.list_jobs", &[])
        ));
        assert!(!spec_check(
            &everything,
            "wheel",
            &call("key.list_all", &[])
        ));
        let l = list(json!(["@wheel", {"@runner": ["jobs.*"]}, "@manage"]));
        assert!(spec_check(&l, "wheel", &call("key.accept", &[])));
        assert!(spec_check(&l, "runner", &call("jobs.list_jobs", &[])));
        assert!(spec_check(&l, "runner", &call("manage.up", &[])));
        assert!(!spec_check(&l, "runner", &call("state.orchestrate", &[])));
        let jobs = list(json!([{"@jobs": ["list_.*"]}]));
        assert!(spec_check(&jobs, "runner", &call("jobs.list_jobs", &[])));
        assert!(!spec_check(&jobs, "runner", &call("jobs.lookup_jid", &[])));
        // @runner never grants an execution function, nor the reverse.
        assert!(!auth_check(&l, &call("test.ping", &[]), |_| true));
    }

    #[test]
    fn user_and_group_lists() {
        let provider = json!({
            "alice": ["test.*"],
            "ops%": ["@wheel"],
            "*": ["grains.items"],
        });
        let provider = provider.as_object().unwrap();
        let none = BTreeSet::new();
        assert_eq!(
            fill_auth_list(provider, "alice", &none, false),
            [json!("test.*")]
        );
        let ops: BTreeSet<String> = ["ops".to_string()].into();
        assert_eq!(
            fill_auth_list(provider, "bob", &ops, false),
            [json!("@wheel"), json!("grains.items")]
        );
        assert_eq!(
            fill_auth_list(provider, "carol", &none, false),
            [json!("grains.items")]
        );
    }

    #[test]
    fn perms_sorted_as_salt() {
        let p = sorted_permissions(&[
            json!("test.*"),
            json!("@wheel"),
            json!("test.*"),
            json!({"a": ["b"]}),
        ]);
        assert_eq!(p, [json!("@wheel"), json!("test.*"), json!({"a": ["b"]})]);
    }

    #[test]
    fn publisher_acl_keys_match_users_by_name_glob_or_regex() {
        let acl = json!({"fred": ["test.*"], "dev*": ["grains.items"], "ops.+": ["cmd.run"]});
        let acl = acl.as_object().unwrap();
        assert_eq!(publisher_acl_list(acl, "fred"), [json!("test.*")]);
        assert_eq!(publisher_acl_list(acl, "devon"), [json!("grains.items")]);
        assert_eq!(publisher_acl_list(acl, "opsy"), [json!("cmd.run")]);
        assert!(publisher_acl_list(acl, "mallory").is_empty());
        assert_eq!(
            targets_named(&[
                json!("test.*"),
                json!({"web*": ["a"]}),
                json!({"@runner": ["b"]})
            ]),
            ["web*"]
        );
        let list = [json!("test.ping")];
        assert!(publish_check(
            &list,
            &call("saltutil.find_job", &[]),
            |_| false
        ));
        assert!(!publish_check(&list, &call("cmd.run", &[]), |_| true));
    }

    #[test]
    fn publisher_blacklist_users_and_modules() {
        let b = PublisherBlacklist::from_config(Some(
            &json!({"users": ["root", "^mal.*"], "modules": ["cmd.*"]}),
        ));
        assert!(b.user_is_blacklisted("mallory"));
        assert!(b.user_is_blacklisted("root"));
        assert!(!b.user_is_blacklisted("fred"));
        assert!(b.cmd_is_blacklisted("cmd.run"));
        assert!(!b.cmd_is_blacklisted("test.ping"));
        assert!(!PublisherBlacklist::from_config(None).user_is_blacklisted("x"));
    }
}
