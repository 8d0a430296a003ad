//! Salt's `debconf` state (debconfmod): `debconf.set` preseeds a package's
//! answers through the `debconf` execution module, with Salt's comments.

use halite_state::{StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::{debconf, py_str};

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "debconf",
    functions: &[
        StateFunction::new("set", set),
        StateFunction::new("set_file", set_file),
    ],
};

fn err(e: crate::ExecError) -> StateError {
    StateError::Other(e.to_string())
}

/// `debconf.set_file`: a selections file (`salt://` or local), rendered
/// first when `template` is given, fed to `debconf-set-selections`.
fn set_file(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let source = call.arg_str("source")?.ok_or_else(|| {
        StateError::BadArg("Missing parameter source for debconf.set_file".into())
    })?;
    let mut context = halite_state::Map::new();
    for (key, wrong) in [
        ("defaults", "Defaults must be formed as a dict"),
        ("context", "Context must be formed as a dict"),
    ] {
        match call.arg(key) {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => context.extend(m.clone()),
            Some(_) => return Ok(StateResult::fail(&name, wrong)),
        }
    }
    if call.test {
        let mut ret = StateResult::new(&name, None);
        ret.comment = "Debconf selections would have been set.".into();
        return Ok(ret);
    }
    let saltenv = call
        .chunk
        .get("__env__")
        .and_then(Value::as_str)
        .unwrap_or("base")
        .to_string();
    let local = match halite_state::strip_salt_url(&source) {
        Some((path, env)) => call
            .env
            .file_client()
            .cache_file(path, env.unwrap_or(&saltenv))
            .map_err(|e| StateError::Other(e.to_string()))?,
        None => Some(std::path::PathBuf::from(&source)).filter(|p| p.is_file()),
    };
    let done = match (local, call.arg_str("template")?) {
        (None, _) => false,
        (Some(path), None) => debconf::set_file_path(&path).map_err(err)?,
        (Some(path), Some(engine)) => {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| StateError::Other(format!("cannot read {}: {e}", path.display())))?;
            let rendered = call
                .env
                .render_template(&text, &engine, &context, &saltenv)
                .map_err(StateError::Other)?;
            debconf::set_text(&rendered).map_err(err)?
        }
    };
    Ok(if done {
        StateResult::ok(&name, "Debconf selections were set.")
    } else {
        StateResult::fail(&name, "Unable to set debconf selections from file.")
    })
}

fn set(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let Some(Value::Object(data)) = call.arg("data") else {
        return Err(StateError::BadArg(
            "debconf.set: 'data' must be a mapping of question: {type: ..., value: ...}".into(),
        ));
    };
    let current = debconf::show(&name).map_err(err)?;
    let current: Vec<Value> = current.as_array().cloned().unwrap_or_default();
    let mut ret = StateResult::ok(&name, "");
    for (key, args) in data {
        let (Some(kind), Some(raw)) = (args.get("type").and_then(Value::as_str), args.get("value"))
        else {
            return Err(StateError::BadArg(format!(
                "debconf.set: the answer {key} needs a 'type' and a 'value'"
            )));
        };
        let value = if kind == "boolean" {
            if crate::exec::py_truth(raw) {
                "true"
            } else {
                "false"
            }
            .to_string()
        } else {
            py_str(raw)
        };
        let wanted = Value::from(vec![key.clone(), kind.to_string(), value.clone()]);
        if current.contains(&wanted) {
            if ret.comment.is_empty() {
                ret.comment = "Unchanged answers: ".into();
            }
            ret.comment.push_str(&format!("{key} "));
        } else if call.test {
            ret.result = None;
            ret.changes
                .insert(key.clone(), Value::from(format!("New value: {value}")));
        } else if debconf::set(&name, key, kind, &value).map_err(err)? {
            let shown = if kind == "password" {
                "(password hidden)".to_string()
            } else {
                value
            };
            ret.changes.insert(key.clone(), Value::from(shown));
        } else {
            ret.result = Some(false);
            ret.comment = "Some settings failed to be applied.".into();
            ret.changes
                .insert(key.clone(), Value::from("Failed to set!"));
        }
    }
    if ret.changes.is_empty() {
        ret.comment = "All specified answers are already set".into();
    }
    Ok(ret)
}
