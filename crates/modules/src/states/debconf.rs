//! Salt's `debconf` state (debconfmod): `debconf.set` preseeds a package's
//! answers through the `debconf` execution module, with Salt's comments.

use halite_state::{StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::{debconf, py_str};

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "debconf",
    functions: &[StateFunction::new("set", set)],
};

fn err(e: crate::ExecError) -> StateError {
    StateError::Other(e.to_string())
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
        let (Some(kind), Some(raw)) = (
            args.get("type").and_then(Value::as_str),
            args.get("value"),
        ) else {
            return Err(StateError::BadArg(format!(
                "debconf.set: the answer {key} needs a 'type' and a 'value'"
            )));
        };
        let value = if kind == "boolean" {
            if crate::exec::py_truth(raw) { "true" } else { "false" }.to_string()
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
