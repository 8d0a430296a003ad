//! Salt's `module` state module: `module.run` / `module.wait` call
//! execution functions from a state (the new `- mod.fun: [args]` syntax
//! that Salt 3008 uses by default).

use halite_state::requisite::{is_internal_keyword, py_repr, py_str};
use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "module",
    functions: &[
        StateFunction::new("run", |c| run(c, &[])),
        StateFunction::new("wait", wait),
        StateFunction::new("mod_watch", mod_watch),
    ],
};

/// Splits a function's argument list the way Salt's `call_function`
/// does: mappings are keyword arguments, anything else positional.
fn split_args(v: Option<&Value>) -> (Vec<Value>, Map) {
    let mut args = Vec::new();
    let mut kwargs = Map::new();
    match v {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for item in items {
                match item {
                    Value::Object(m) => kwargs.extend(m.clone()),
                    other => args.push(other.clone()),
                }
            }
        }
        Some(other) => args.push(other.clone()),
    }
    (args, kwargs)
}

/// Salt's `_get_result`: a function "fails" when it returns False or a
/// mapping whose `result` is False.
fn succeeded(ret: &Value) -> bool {
    match ret {
        Value::Bool(b) => *b,
        Value::Object(m) => m.get("result") != Some(&Value::Bool(false)),
        _ => true,
    }
}

/// `module.run` with the new syntax. `extra_names` are the engine's
/// own keyword arguments Salt lists in the return's `name` when the
/// call comes from `mod_watch`.
fn run(call: &StateCall<'_>, extra_names: &[&str]) -> Result<StateResult, StateError> {
    let keys: Vec<&str> = call
        .chunk
        .iter()
        .map(|(k, _)| k)
        .filter(|k| !is_internal_keyword(k) && *k != "name")
        .collect();
    if is_legacy(&keys) {
        return Ok(legacy_run(call));
    }
    let mut names: Vec<Value> = keys.iter().map(|k| Value::from(*k)).collect();
    names.extend(extra_names.iter().map(|n| Value::from(*n)));
    let mut ret = StateResult::new(call.name(), None);
    ret.extra.insert("name".into(), Value::Array(names));
    let functions: Vec<&str> = keys.into_iter().filter(|k| k.contains('.')).collect();
    if functions.is_empty() {
        ret.result = Some(false);
        ret.comment = "No function provided.".into();
        return Ok(ret);
    }
    let mut missing = Vec::new();
    let mut tests = Vec::new();
    for f in &functions {
        let base = f.split(':').next().unwrap_or(f);
        if !call.env.has_function(base) {
            missing.push(base.to_string());
        } else if call.test {
            tests.push(base.to_string());
        }
    }
    if !missing.is_empty() || !tests.is_empty() {
        // Salt's own wording, plural quirk included ("FunctionTrue ...").
        let plural = |n: usize| if n > 1 { "True" } else { "" };
        let mut parts = Vec::new();
        if !missing.is_empty() {
            parts.push(format!(
                "Unavailable function{}: {}.",
                plural(missing.len()),
                missing.join(", ")
            ));
        }
        if !tests.is_empty() {
            parts.push(format!(
                "Function{} {} to be executed.",
                plural(tests.len()),
                tests.join(", ")
            ));
        }
        ret.comment = parts.join(" ").trim().to_string();
        if !missing.is_empty() {
            ret.result = Some(false);
        }
        return Ok(ret);
    }
    let mut failures = Vec::new();
    let mut success = Vec::new();
    for f in functions {
        let base = f.split(':').next().unwrap_or(f);
        let (args, kwargs) = split_args(call.chunk.get(f));
        match call.env.call_function(base, &args, &kwargs) {
            Ok(value) if succeeded(&value) => {
                let shown = match &value {
                    Value::Object(m) => m
                        .get("comment")
                        .map(py_str)
                        .unwrap_or_else(|| "Success".into()),
                    Value::String(s) => s.clone(),
                    other => py_repr(other),
                };
                success.push(format!("{f}: {shown}"));
                ret.changes.insert(f.to_string(), value);
            }
            Ok(Value::Object(m)) => failures.push(format!(
                "'{f}' failed: {}",
                m.get("comment")
                    .map(py_str)
                    .unwrap_or_else(|| "(error message N/A)".into())
            )),
            Ok(other) => failures.push(format!("'{f}': {}", py_repr(&other))),
            Err(e) => failures.push(format!("'{f}' failed: {e}")),
        }
    }
    ret.result = Some(failures.is_empty());
    failures.extend(success);
    ret.comment = failures.join(", ");
    Ok(ret)
}

/// `module.wait`: nothing by itself; runs as `mod_watch` when a watched
/// state changed.
fn wait(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    Ok(StateResult::ok(call.name(), ""))
}

/// `module.mod_watch`: runs the functions of a `module.run` or
/// `module.wait` whose watched state changed.
fn mod_watch(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    match call.sfun.unwrap_or("") {
        "run" | "wait" | "watch" => run(call, &["sfun", "__reqs__"]),
        other => Ok(StateResult::fail(
            call.name(),
            format!("module.{other} does not work with the watch requisite, please use module.wait or module.run"),
        )),
    }
}

/// Salt's test for the legacy syntax (`- name: mod.fun` plus the
/// function's arguments): an argument that is not a function name, or no
/// argument at all besides `name`.
fn is_legacy(keys: &[&str]) -> bool {
    keys.is_empty()
        || keys
            .iter()
            .any(|k| !k.contains('.') && !matches!(*k, "sfun" | "__reqs__"))
}

/// Legacy `module.run` (Salt's `_legacy_run`, still run by Salt 3008):
/// `name` is the function; `m_name`, `m_fun`, `m_names`, `m_state` and
/// `m_saltenv` stand for the function's arguments of those names (which
/// the state itself uses), `args` is a list of extra positional arguments
/// and `kwargs` a mapping of extra keyword arguments.
fn legacy_run(call: &StateCall<'_>) -> StateResult {
    let fun = call.name().to_string();
    let mut ret = StateResult::new(&fun, None);
    if !call.env.has_function(&fun) {
        ret.result = Some(false);
        ret.comment = format!("Module function {fun} is not available");
        return ret;
    }
    if call.test {
        ret.comment = format!("Module function {fun} is set to execute");
        return ret;
    }
    let mut args = Vec::new();
    let mut kwargs = Map::new();
    for (key, value) in call.chunk.iter() {
        if is_internal_keyword(key) || matches!(key, "name" | "sfun" | "__reqs__" | "returner") {
            continue;
        }
        match key {
            "args" => match value {
                Value::Array(items) => args.extend(items.iter().cloned()),
                _ => {
                    ret.result = Some(false);
                    ret.comment = "'args' must be a list.".into();
                    return ret;
                }
            },
            "kwargs" => match value {
                Value::Object(map) => kwargs.extend(map.clone()),
                _ => {
                    ret.result = Some(false);
                    ret.comment = "'kwargs' must be a dict.".into();
                    return ret;
                }
            },
            other => {
                let arg = match other {
                    "m_name" | "m_fun" | "m_names" | "m_state" | "m_saltenv" => &other[2..],
                    plain => plain,
                };
                kwargs.insert(arg.to_string(), value.clone());
            }
        }
    }
    match call.env.call_function(&fun, &args, &kwargs) {
        Ok(value) => {
            ret.result = Some(legacy_result(&value));
            ret.changes.insert("ret".into(), value);
            ret.comment = format!("Module function {fun} executed");
        }
        Err(e) => {
            ret.result = Some(false);
            ret.comment = format!("Module function {fun} threw an exception. Exception: {e}");
        }
    }
    ret
}

/// Salt's `_get_result` for the legacy syntax: False when the function
/// returned False, or a mapping (at any depth) holds `result: False` or a
/// non-zero `retcode`.
fn legacy_result(ret: &Value) -> bool {
    match ret {
        Value::Bool(b) => *b,
        Value::Object(map) => {
            for (key, value) in map {
                if (key == "result" && *value == Value::Bool(false))
                    || (key == "retcode" && value.as_i64() != Some(0))
                {
                    return false;
                }
                if value.is_object() && !legacy_result(value) {
                    return false;
                }
            }
            true
        }
        _ => true,
    }
}
