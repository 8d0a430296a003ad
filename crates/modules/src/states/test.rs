//! Salt's `test` state module: states that succeed, fail or change on
//! demand, for exercising requisites and outputs.

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};

/// The module's table: `test.*` states, with Salt 3008's comments and changes.
pub const MODULE: StateTable = StateTable {
    name: "test",
    functions: &[
        StateFunction::new("nop", nop),
        StateFunction::new("succeed_without_changes", succeed_without_changes),
        StateFunction::new("fail_without_changes", fail_without_changes),
        StateFunction::new("succeed_with_changes", |c| with_changes(c, true)),
        StateFunction::new("fail_with_changes", |c| with_changes(c, false)),
        StateFunction::new("configurable_test_state", configurable),
        StateFunction::new("show_notification", show_notification),
        StateFunction::new("check_pillar", check_pillar),
        StateFunction::new("mod_watch", mod_watch),
    ],
};

fn pretend_changes() -> Map {
    let mut inner = Map::new();
    inner.insert("old".into(), Value::from("Unchanged"));
    inner.insert("new".into(), Value::from("Something pretended to change"));
    let mut m = Map::new();
    m.insert("testing".into(), Value::Object(inner));
    m
}

fn comment_or(call: &StateCall<'_>, default: &str) -> Result<String, StateError> {
    Ok(call
        .arg_str("comment")?
        .unwrap_or_else(|| default.to_string()))
}

/// `True`/`False`/`"Random"` as Salt's configurable_test_state reads them.
enum Tri {
    Yes,
    No,
    Random,
}

fn tri(v: Option<&Value>, default: bool, what: &str) -> Result<Tri, StateError> {
    match v {
        None => Ok(if default { Tri::Yes } else { Tri::No }),
        Some(Value::Bool(true)) => Ok(Tri::Yes),
        Some(Value::Bool(false)) => Ok(Tri::No),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("random") => Ok(Tri::Random),
        Some(_) => Err(StateError::Other(format!(
            "You have specified the state option '{what}' with invalid arguments. It must be either True, False, or 'Random'"
        ))),
    }
}

fn coin() -> bool {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() % 2 == 0)
        .unwrap_or(true)
}

/// `test.configurable_test_state`: the result, changes and comment asked for.
fn configurable(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let comment = call.arg_str("comment")?.unwrap_or_default();
    let changes_arg = tri(call.chunk.get("changes"), true, "changes")?;
    let changes = match changes_arg {
        Tri::Yes => pretend_changes(),
        Tri::No => Map::new(),
        Tri::Random => {
            if coin() {
                pretend_changes()
            } else {
                Map::new()
            }
        }
    };
    let result_arg = call.chunk.get("result");
    let result = match tri(result_arg, true, "result")? {
        Tri::Yes => true,
        Tri::No => false,
        Tri::Random => coin(),
    };
    let mut ret = StateResult::new(call.name(), Some(result));
    ret.comment = comment.clone();
    ret.changes = changes;
    match call.chunk.get("warnings") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => {
            ret.extra.insert("warnings".into(), Value::Array(vec![Value::from(s.clone())]));
        }
        Some(Value::Array(a)) => {
            ret.extra.insert("warnings".into(), Value::Array(a.clone()));
        }
        Some(_) => {
            return Err(StateError::Other(
                "You have specified the state option 'warnings' with invalid arguments. It must be a string or a list of strings".into(),
            ))
        }
    }
    // Salt returns the comment argument as given: `comment: 0644` stays
    // the integer 644 in the return.
    if let Some(raw) = call
        .chunk
        .get("comment")
        .filter(|v| !v.is_string() && !v.is_null())
    {
        if !call.test || halite_state::truthy(raw) {
            ret.extra.insert("comment".into(), raw.clone());
        }
    }
    if call.test {
        let allow_fail = call.arg_bool("allow_test_mode_failure", false);
        ret.result = if allow_fail && result_arg == Some(&Value::Bool(false)) {
            Some(false)
        } else if matches!(changes_arg, Tri::No) {
            Some(true)
        } else {
            None
        };
        ret.comment = if comment.is_empty() {
            "This is a test".into()
        } else {
            comment
        };
    }
    Ok(ret)
}

/// `test.mod_watch`: reports the watched states that changed.
fn mod_watch(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let mut has_changes = Vec::new();
    if let Some(reqs) = call.reqs {
        if let Some(Value::Array(watch)) = reqs.get("watch") {
            for req in watch {
                if req.get("__changes__").is_some_and(halite_state::truthy) {
                    let state = req.get("state").and_then(Value::as_str).unwrap_or("");
                    let id = req.get("__id__").and_then(Value::as_str).unwrap_or("");
                    has_changes.push(Value::from(format!("{state}: {id}")));
                }
            }
        }
    }
    let mut ret = StateResult::new(call.name(), Some(true));
    if let Some(r) = call.chunk.get("result") {
        ret.result = match r {
            Value::Null => None,
            v => Some(halite_state::truthy(v)),
        };
    }
    ret.comment = comment_or(call, "Watch statement fired.")?;
    match call.chunk.get("changes") {
        Some(Value::Object(m)) => ret.changes = m.clone(),
        _ => {
            ret.changes
                .insert("Requisites with changes".into(), Value::Array(has_changes));
        }
    }
    Ok(ret)
}

/// `test.nop`: succeeds, changing nothing.
fn nop(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    Ok(StateResult::ok(call.name(), "Success!"))
}

/// `test.succeed_without_changes [comment]`.
fn succeed_without_changes(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    Ok(StateResult::ok(call.name(), comment_or(call, "Success!")?))
}

/// `test.fail_without_changes [comment]`.
fn fail_without_changes(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let mut r = StateResult::fail(call.name(), comment_or(call, "Failure!")?);
    if call.test {
        r.comment = "If we weren't testing, this would be a failure!".into();
    }
    Ok(r)
}

/// `test.succeed_with_changes` (`ok`) and `test.fail_with_changes`
/// `[comment]`: pretend changes, and the result asked for.
fn with_changes(call: &StateCall<'_>, ok: bool) -> Result<StateResult, StateError> {
    let mut r = StateResult::new(call.name(), Some(ok));
    r.comment = comment_or(call, if ok { "Success!" } else { "Failure!" })?;
    r.changes = pretend_changes();
    if call.test {
        r.result = None;
        r.comment = if ok {
            "If we weren't testing, this would be successful with changes".into()
        } else {
            "If we weren't testing, this would be failed with changes".into()
        };
    }
    Ok(r)
}

/// `test.show_notification <text>`: succeeds with the text as comment.
fn show_notification(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let text = call
        .arg_str("text")?
        .filter(|t| !t.is_empty())
        .ok_or_else(|| StateError::Other("Missing required argument text.".into()))?;
    Ok(StateResult::ok(call.name(), text))
}

/// `test.check_pillar`: verifies pillar keys exist and have the given types.
fn check_pillar(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let kinds: [(&str, Option<&str>); 6] = [
        ("present", None),
        ("boolean", Some("bool")),
        ("integer", Some("int")),
        ("string", Some("str")),
        ("listing", Some("list")),
        ("dictionary", Some("dict")),
    ];
    if kinds.iter().all(|(k, _)| call.arg(k).is_none()) {
        return Err(StateError::Other("Missing required argument text.".into()));
    }
    let mut ret = StateResult::ok(call.name(), "");
    let pillar = call.env.pillar();
    for (key, want) in kinds {
        for item in call.arg_list(key) {
            let path = item
                .as_str()
                .map(String::from)
                .unwrap_or_else(|| item.to_string());
            let mut cur = Some(pillar);
            for part in path.split(':') {
                cur = cur.and_then(|c| c.get(part));
            }
            let ok = match (cur, want) {
                (None, _) | (Some(Value::Null), _) => {
                    ret.comment
                        .push_str(&format!("Pillar key \"{path}\" is missing.\n"));
                    false
                }
                (Some(_), None) => true,
                (Some(v), Some(t)) => {
                    let ty = halite_state::type_name(v);
                    if ty == t || (t == "int" && ty == "bool") {
                        true
                    } else {
                        ret.comment
                            .push_str(&format!("Pillar key \"{path}\" is not <class '{t}'>.\n"));
                        false
                    }
                }
            };
            if !ok {
                ret.result = Some(false);
            }
        }
    }
    Ok(ret)
}
