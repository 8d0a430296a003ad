//! `git.config_set` and `git.config_unset`: one key of a checkout's (or
//! the user's global) git config, with Salt's comments and changes.

use halite_state::requisite::py_repr;
use halite_state::{StateCall, StateError, StateResult, Value};

use super::{arg_string, fail, git_for, is_none, neutral, start};
use crate::exec::git::{multivar_of, ops};

/// Salt's `config_set`/`config_unset` kwargs check: `global` (and, for
/// unset, `all`) are the only extra arguments; `repo` is needed unless global.
fn repo_of(call: &StateCall<'_>, global: bool) -> Result<Option<String>, String> {
    match arg_string(call, "repo") {
        Some(r) if !r.is_empty() => Ok(Some(r)),
        _ if global => Ok(None),
        _ => Err("Non-global config options require the 'repo' argument to be set".into()),
    }
}

fn strings(v: &[String]) -> Value {
    Value::Array(v.iter().cloned().map(Value::from).collect())
}

fn opt_strings(v: &Option<Vec<String>>) -> Value {
    v.as_deref().map(strings).unwrap_or(Value::Null)
}

/// `git.config_set <name> value=|multivar= [repo] [global]`.
pub(super) fn config_set(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let ret = start(call);
    let value = call.arg("value");
    let multivar = call.arg("multivar");
    if !is_none(value) && !is_none(multivar) {
        return Ok(fail(
            ret,
            "Only one of 'value' and 'multivar' is permitted",
            &[],
        ));
    }
    let global = call.arg_bool("global", false);
    let repo = match repo_of(call, global) {
        Ok(r) => r,
        Err(m) => return Ok(fail(ret, m, &[])),
    };
    let (desired, shown) = match (value, multivar) {
        (Some(v), _) => {
            let v = crate::exec::py_str(v);
            (vec![v.clone()], format!("'{v}'"))
        }
        (None, Some(m)) => {
            let m = multivar_of(m);
            (m.clone(), py_repr(&strings(&m)))
        }
        // Salt's own code fails here on an unbound name; say what is missing.
        (None, None) => {
            return Ok(fail(ret, "Either 'value' or 'multivar' is required", &[]));
        }
    };
    let scope = if global { "Global key " } else { "" };
    let git = git_for(call);
    let pre = match ops::config_get_all(&git, repo.as_deref(), &name, global) {
        Ok(p) => p,
        Err(e) => return Ok(fail(ret, e.full(), &[])),
    };
    if pre.as_ref() == Some(&desired) {
        let mut r = ret;
        r.comment = format!("{scope}'{name}' is already set to {shown}");
        return Ok(r);
    }
    let verb = if pre.is_none() { "added as" } else { "set to" };
    if call.test {
        let mut r = ret;
        r.changes.insert("old".into(), opt_strings(&pre));
        r.changes.insert("new".into(), strings(&desired));
        return Ok(neutral(
            r,
            format!("{scope}'{name}' would be {verb} {shown}"),
        ));
    }
    let lower = if global { "global key " } else { "" };
    let post = match ops::config_set(&git, repo.as_deref(), &name, &desired, false, global) {
        Ok(p) => p,
        Err(e) => {
            return Ok(fail(
                ret,
                format!("Failed to set {lower}'{name}' to {shown}: {}", e.stripped()),
                &[],
            ))
        }
    };
    let mut ret = ret;
    if pre != post {
        ret.changes.insert(
            name.clone(),
            serde_json::json!({"old": opt_strings(&pre), "new": opt_strings(&post)}),
        );
    }
    if post.as_ref() != Some(&desired) {
        return Ok(fail(
            ret,
            format!("Failed to set {lower}'{name}' to {shown}"),
            &[],
        ));
    }
    ret.comment = format!("{scope}'{name}' was {verb} {shown}");
    Ok(ret)
}

/// `git.config_unset <name> [value_regex] [repo] [all] [global]`: `name`
/// is a key regex anchored at both ends.
pub(super) fn config_unset(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let mut ret = start(call);
    ret.comment = "No matching keys are set".into();
    let global = call.arg_bool("global", false);
    let all = call.arg_bool("all", false);
    let repo = match repo_of(call, global) {
        Ok(r) => r,
        Err(m) => return Ok(fail(ret, m, &[])),
    };
    let value_regex = arg_string(call, "value_regex");
    let key = format!("^{}$", name.trim_start_matches('^').trim_end_matches('$'));
    let git = git_for(call);
    let get = |vr: Option<&str>| ops::config_get_regexp(&git, repo.as_deref(), &key, vr, global);
    let pre_matches = match get(value_regex.as_deref()) {
        Ok(m) => m,
        Err(e) => return Ok(fail(ret, e.full(), &[])),
    };
    if pre_matches.is_empty() {
        return Ok(ret);
    }
    if !all {
        let greedy: Vec<String> = pre_matches
            .iter()
            .filter(|(_, v)| v.len() > 1)
            .map(|(k, v)| format!("{k} ({})", v.join(", ")))
            .collect();
        if !greedy.is_empty() {
            let why = if value_regex.is_some() {
                "Multiple values are matched by value_regex for the following keys (set \
                 'all' to True to force removal): "
            } else {
                "Multivar(s) matched by the key expression (set 'all' to True to force \
                 removal): "
            };
            return Ok(fail(ret, format!("{why}{}", greedy.join("; ")), &[]));
        }
    }
    if call.test {
        for (k, v) in &pre_matches {
            ret.changes.insert(k.clone(), strings(v));
        }
        let n = pre_matches.len();
        return Ok(neutral(
            ret,
            format!("{n} key(s) would have value(s) unset"),
        ));
    }
    let pre = if value_regex.is_none() {
        pre_matches.clone()
    } else {
        get(None).unwrap_or_default()
    };
    let mut failed = Vec::new();
    for key_name in pre_matches.keys() {
        if let Err(e) = ops::config_unset(
            &git,
            repo.as_deref(),
            &name,
            value_regex.as_deref(),
            all,
            global,
        ) {
            tracing::error!("Failed to unset '{key_name}': {}", e.stripped());
            failed.push(key_name.clone());
        }
    }
    if !failed.is_empty() {
        return Ok(fail(
            ret,
            format!(
                "Error(s) occurred unsetting values for the following keys (see the minion \
                 log for details): {}",
                failed.join(", ")
            ),
            &[],
        ));
    }
    let post = get(None).unwrap_or_default();
    for (key_name, values) in &pre {
        match post.get(key_name) {
            None => {
                ret.changes.insert(key_name.clone(), strings(values));
            }
            Some(after) => {
                let unset: Vec<String> = values
                    .iter()
                    .filter(|v| !after.contains(v))
                    .cloned()
                    .collect();
                if !unset.is_empty() {
                    ret.changes.insert(key_name.clone(), strings(&unset));
                }
            }
        }
    }
    let post_matches = if value_regex.is_none() {
        post
    } else {
        get(value_regex.as_deref()).unwrap_or_default()
    };
    if !post_matches.is_empty() {
        let left: Vec<String> = post_matches
            .iter()
            .map(|(k, v)| format!("{k} ({})", v.join(", ")))
            .collect();
        return Ok(fail(
            ret,
            format!("Failed to unset value(s): {}", left.join("; ")),
            &[],
        ));
    }
    ret.comment = "Value(s) successfully unset".into();
    Ok(ret)
}
