//! Salt's `grains` state: `grains.present`, `list_present`, `list_absent`,
//! `absent`, `exists` and `append`, writing the config dir's `grains` file
//! through [`crate::grains::custom`], with Salt's comments and changes.

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::exec::py_str;
use crate::grains::custom::{self, Src};

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "grains",
    functions: &[
        StateFunction::new("exists", exists),
        StateFunction::new("present", present),
        StateFunction::new("list_present", list_present),
        StateFunction::new("list_absent", list_absent),
        StateFunction::new("absent", absent),
        StateFunction::new("append", append),
    ],
};

/// The grain name with its delimiter turned into `:` (Salt's `re.sub`;
/// the delimiter is a literal here) and the delimiter.
fn grain_name(call: &StateCall<'_>) -> Result<String, StateError> {
    let delimiter = call
        .arg_str("delimiter")?
        .unwrap_or_else(|| custom::DELIMITER.into());
    let name = call.name();
    Ok(if delimiter.is_empty() {
        name.to_string()
    } else {
        name.replace(&delimiter, custom::DELIMITER)
    })
}

fn src<'a>(call: &'a StateCall<'_>) -> Src<'a> {
    Src {
        opts: call.env.opts(),
        grains: call.env.grains(),
    }
}

/// The required `value` argument.
fn value_arg(call: &StateCall<'_>, fun: &str) -> Result<Value, StateError> {
    call.arg("value").cloned().ok_or_else(|| {
        StateError::BadArg(format!(
            "Missing parameter value for argument 'value' of grains.{fun}"
        ))
    })
}

fn exec_err(e: crate::ExecError) -> StateError {
    StateError::Other(e.to_string())
}

fn exists(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = grain_name(call)?;
    Ok(match custom::lookup(src(call), &name, custom::DELIMITER) {
        Some(_) => StateResult::ok(&name, "Grain exists"),
        None => StateResult::fail(&name, "Grain does not exist"),
    })
}

fn present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = grain_name(call)?;
    let value = value_arg(call, "present")?;
    let existing = custom::lookup(src(call), &name, custom::DELIMITER);
    if existing.as_ref() == Some(&value) {
        return Ok(StateResult::ok(&name, "Grain is already set"));
    }
    if call.test {
        return Ok(match existing {
            None => StateResult::would_change(
                &name,
                format!("Grain {name} is set to be added"),
                json_map(json!({"new": name})),
            ),
            Some(_) => StateResult::would_change(
                &name,
                format!("Grain {name} is set to be changed"),
                json_map(json!({"changed": {name.clone(): value}})),
            ),
        });
    }
    let force = call.arg_bool("force", false);
    let set = custom::set(
        src(call),
        &name,
        value.clone(),
        force,
        false,
        custom::DELIMITER,
    )
    .map_err(exec_err)?;
    Ok(from_set(&name, set, || {
        format!("Set grain {name} to {}", py_str(&value))
    }))
}

/// A state result from `grains.set`'s return; `success` words a change.
fn from_set(name: &str, set: custom::SetResult, success: impl FnOnce() -> String) -> StateResult {
    let mut ret = StateResult::new(name, Some(set.result));
    ret.comment = set.comment;
    if let Value::Object(changes) = set.changes {
        ret.changes = changes;
    }
    if set.result && !ret.changes.is_empty() {
        ret.comment = success();
    }
    ret
}

fn json_map(v: Value) -> Map {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// Salt's `__context__["pending_grains"]`: values `list_present` said it
/// would add under `test=True`, per grains file and grain, so a later state
/// of the run answers "already pending". Only test runs add to it (a real
/// run writes the grain at once); it lives as long as the process, which
/// is one run for `halite-call`.
static PENDING: std::sync::Mutex<BTreeMap<(PathBuf, String), Vec<Value>>> =
    std::sync::Mutex::new(BTreeMap::new());

/// Whether `value` is pending for `name`; else, in test mode, records it.
fn pending(call: &StateCall<'_>, name: &str, value: &Value) -> bool {
    let key = (custom::grains_file(call.env.opts()), name.to_string());
    let Ok(mut table) = PENDING.lock() else {
        return false;
    };
    let list = table.entry(key).or_default();
    if list.contains(value) {
        return true;
    }
    if call.test {
        list.push(value.clone());
    }
    false
}

/// Python's `x in grain` for the list grain.
fn contains(list: &[Value], v: &Value) -> bool {
    list.contains(v)
}

fn list_present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = grain_name(call)?;
    let mut value = value_arg(call, "list_present")?;
    // Salt's grains.get default is "", which is falsy like a missing grain.
    let grain = custom::lookup(src(call), &name, custom::DELIMITER).unwrap_or(Value::from(""));
    let mut ret = StateResult::ok(&name, "");
    if crate::exec::py_truth(&grain) {
        let Value::Array(current) = &grain else {
            return Ok(StateResult::fail(
                &name,
                format!("Grain {name} is not a valid list"),
            ));
        };
        if let Value::Array(wanted) = &value {
            let (known, new): (Vec<Value>, Vec<Value>) = wanted
                .iter()
                .cloned()
                .partition(|v| contains(current, v) || pending(call, &name, v));
            if new.is_empty() {
                ret.comment = format!(
                    "Value {} is already in grain {name} (or pending)",
                    py_str(&value)
                );
                return Ok(ret);
            }
            value = Value::Array(new);
            if !known.is_empty() {
                ret.comment = format!(
                    "Removed value {} from update due to value found in \"{name}\" (or pending).\n",
                    py_str(&Value::Array(known))
                );
            }
        } else if contains(current, &value) || pending(call, &name, &value) {
            ret.comment = format!(
                "Value {} is already in grain {name} (or pending)",
                py_str(&value)
            );
            return Ok(ret);
        }
        if call.test {
            ret.result = None;
            ret.comment = format!(
                "Value {} is set to be appended to grain {name}",
                py_str(&value)
            );
            ret.changes = json_map(json!({"new": grain}));
            return Ok(ret);
        }
    }
    if !crate::exec::py_truth(&grain) {
        if let Value::Array(wanted) = &value {
            let (known, new): (Vec<Value>, Vec<Value>) = wanted
                .iter()
                .cloned()
                .partition(|v| pending(call, &name, v));
            if new.is_empty() {
                ret.comment = format!(
                    "Value {} is already pending in grain {name}",
                    py_str(&value)
                );
                return Ok(ret);
            }
            value = Value::Array(new);
            if !known.is_empty() {
                ret.comment = format!(
                    "Removed value {} from update due to value already pending in \"{name}\".\n",
                    py_str(&Value::Array(known))
                );
            }
        } else if pending(call, &name, &value) {
            ret.comment = format!(
                "Value {} is already pending in grain {name}",
                py_str(&value)
            );
            return Ok(ret);
        }
    }
    if call.test {
        ret.result = None;
        ret.comment = format!("Grain {name} is set to be added");
        ret.changes = json_map(json!({"new": grain}));
        return Ok(ret);
    }
    let new_grains =
        custom::append(src(call), &name, &value, false, custom::DELIMITER).map_err(exec_err)?;
    let actual = match custom::lookup(src(call), &name, custom::DELIMITER) {
        Some(Value::Array(list)) => list,
        _ => Vec::new(),
    };
    let all_in = match &value {
        Value::Array(items) => items.iter().all(|v| contains(&actual, v)),
        one => contains(&actual, one),
    };
    if !all_in {
        return Ok(StateResult::fail(
            &name,
            format!("Failed append value {} to grain {name}", py_str(&value)),
        ));
    }
    ret.comment = format!(
        "{}Append value {} to grain {name}",
        ret.comment,
        py_str(&value)
    );
    ret.changes = json_map(json!({"new": new_grains}));
    Ok(ret)
}

fn list_absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = grain_name(call)?;
    let value = value_arg(call, "list_absent")?;
    let grain = custom::lookup(src(call), &name, custom::DELIMITER);
    let mut ret = StateResult::ok(&name, "");
    let Some(grain) = grain.filter(crate::exec::py_truth) else {
        ret.comment = format!("Grain {name} does not exist");
        return Ok(ret);
    };
    let Value::Array(current) = grain else {
        return Ok(StateResult::fail(
            &name,
            format!("Grain {name} is not a valid list"),
        ));
    };
    let values = match value {
        Value::Array(items) => items,
        one => vec![one],
    };
    let mut comments = Vec::new();
    let mut deleted = Vec::new();
    for val in values {
        if !contains(&current, &val) {
            comments.push(format!(
                "Value {} is absent from grain {name}",
                py_str(&val)
            ));
        } else if call.test {
            ret.result = None;
            comments.push(format!(
                "Value {} in grain {name} is set to be deleted",
                py_str(&val)
            ));
            deleted.push(val);
        } else {
            custom::remove(src(call), &name, &val, custom::DELIMITER).map_err(exec_err)?;
            comments.push(format!(
                "Value {} was deleted from grain {name}",
                py_str(&val)
            ));
            deleted.push(val);
        }
    }
    if !deleted.is_empty() {
        ret.changes = json_map(json!({"deleted": deleted}));
    }
    ret.comment = comments.join("\n");
    Ok(ret)
}

fn absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = grain_name(call)?;
    let destructive = call.arg_bool("destructive", false);
    let force = call.arg_bool("force", false);
    let Some(grain) = custom::lookup(src(call), &name, custom::DELIMITER) else {
        return Ok(StateResult::ok(
            &name,
            format!("Grain {name} does not exist"),
        ));
    };
    if call.test {
        let mut ret = StateResult::new(&name, None);
        if destructive {
            ret.comment = format!("Grain {name} is set to be deleted");
            ret.changes = json_map(json!({"deleted": name}));
        } else if !grain.is_null() {
            ret.comment = format!("Value for grain {name} is set to be deleted (None)");
            ret.changes = json_map(json!({"grain": name, "value": null}));
        }
        return Ok(ret);
    }
    let set = custom::set(
        src(call),
        &name,
        Value::Null,
        force,
        destructive,
        custom::DELIMITER,
    )
    .map_err(exec_err)?;
    let mut ret = StateResult::new(&name, Some(set.result));
    ret.comment = set.comment;
    if let Value::Object(changes) = set.changes {
        ret.changes = changes;
    }
    if set.result {
        if destructive {
            ret.comment = format!("Grain {name} was deleted");
            ret.changes = json_map(json!({"deleted": name}));
        } else if !grain.is_null() {
            ret.comment = format!("Value for grain {name} was set to None");
            ret.changes = json_map(json!({"grain": name, "value": null}));
        }
    }
    Ok(ret)
}

fn append(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = grain_name(call)?;
    let value = value_arg(call, "append")?;
    let convert = call.arg_bool("convert", false);
    let grain = custom::lookup(src(call), &name, custom::DELIMITER);
    // Salt: `if grain or name in __grains__` (a top-level key).
    let top_level = custom::current(src(call)).get(&name).is_some();
    let Some(grain) = grain.filter(|g| crate::exec::py_truth(g) || top_level) else {
        return Ok(StateResult::fail(
            &name,
            format!("Grain {name} does not exist"),
        ));
    };
    let shown = py_str(&value);
    if let Value::Array(list) = &grain {
        if contains(list, &value) {
            return Ok(StateResult::ok(
                &name,
                format!("Value {shown} is already in the list for grain {name}"),
            ));
        }
        if call.test {
            return Ok(StateResult::would_change(
                &name,
                format!("Value {shown} in grain {name} is set to be added"),
                json_map(json!({"added": value})),
            ));
        }
        custom::append(src(call), &name, &value, false, custom::DELIMITER).map_err(exec_err)?;
    } else if convert {
        if call.test {
            return Ok(StateResult::would_change(
                &name,
                format!(
                    "Grain {name} is set to be converted to list and value {shown} will be added"
                ),
                json_map(json!({"added": value})),
            ));
        }
        let mut list = if grain.is_null() {
            Vec::new()
        } else {
            vec![grain]
        };
        list.push(value.clone());
        custom::setval(src(call), &name, Value::Array(list), false).map_err(exec_err)?;
    } else {
        return Ok(StateResult::fail(
            &name,
            format!("Grain {name} is not a valid list"),
        ));
    }
    let mut ret = StateResult::ok(&name, format!("Value {shown} was added to grain {name}"));
    ret.changes = json_map(json!({"added": value}));
    Ok(ret)
}
