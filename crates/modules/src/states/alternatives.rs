//! The `alternatives` states: `install`, `remove`, `auto` and `set` over
//! the real `update-alternatives`, with the comments and changes of Salt's
//! `alternatives` state module (which Salt 3008 no longer ships in its core;
//! it lives on as a Salt extension with the same behaviour).

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::alternatives as alt;

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "alternatives",
    functions: &[
        StateFunction::new("install", install),
        StateFunction::new("remove", remove),
        StateFunction::new("auto", auto),
        StateFunction::new("set", set),
    ],
};

fn err(e: crate::ExecError) -> StateError {
    StateError::Other(e.to_string())
}

fn required(call: &StateCall<'_>, key: &str, fun: &str) -> Result<String, StateError> {
    match call.arg(key) {
        Some(v) if !v.is_null() => Ok(crate::exec::py_str(v)),
        _ => Err(StateError::BadArg(format!(
            "Missing parameter {key} for alternatives.{fun}"
        ))),
    }
}

fn current(name: &str) -> Option<String> {
    alt::show_current(std::path::Path::new("/etc/alternatives"), name)
        .as_str()
        .map(str::to_string)
}

fn install(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let link = required(call, "link", "install")?;
    let path = required(call, "path", "install")?;
    let priority = required(call, "priority", "install")?;
    let host = call.env.grains();
    let mut ret = StateResult::ok(&name, "");
    ret.extra.insert("link".into(), Value::from(link.clone()));
    ret.extra.insert("path".into(), Value::from(path.clone()));
    if let Some(p) = call.arg("priority") {
        ret.extra.insert("priority".into(), p.clone());
    }
    if alt::check_exists(host, &name, &path).map_err(err)? {
        ret.comment = format!("Alternative {path} for {name} is already registered");
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment =
            format!("Alternative will be set for {name} to {path} with priority {priority}");
        return Ok(ret);
    }
    let out = alt::install(host, &name, &link, &path, &priority).map_err(err)?;
    if alt::check_exists(host, &name, &path).map_err(err)? {
        ret.comment = if alt::check_installed(&name, &path) {
            format!("Alternative for {name} set to path {path} with priority {priority}")
        } else {
            format!("Alternative {path} for {name} registered with priority {priority} and not set to default")
        };
        let mut changes = Map::new();
        changes.insert("name".into(), Value::from(name.clone()));
        changes.insert("link".into(), Value::from(link));
        changes.insert("path".into(), Value::from(path));
        changes.insert(
            "priority".into(),
            call.arg("priority")
                .cloned()
                .unwrap_or(Value::from(priority)),
        );
        ret.changes = changes;
    } else {
        ret.result = Some(false);
        ret.comment = format!("Alternative for {name} not installed: {out}");
    }
    Ok(ret)
}

fn remove(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let path = required(call, "path", "remove")?;
    let host = call.env.grains();
    let mut ret = StateResult::ok(&name, "");
    ret.extra.insert("path".into(), Value::from(path.clone()));
    if alt::check_exists(host, &name, &path).map_err(err)? {
        if call.test {
            ret.result = None;
            ret.comment = format!("Alternative for {name} will be removed");
            return Ok(ret);
        }
        alt::action(host, &["--remove", &name, &path]).map_err(err)?;
        match current(&name) {
            Some(now) => {
                ret.comment = format!("Alternative for {name} removed. Falling back to path {now}");
                ret.changes.insert("path".into(), Value::from(now));
            }
            None => ret.comment = format!("Alternative for {name} removed"),
        }
        return Ok(ret);
    }
    match current(&name) {
        Some(now) => {
            ret.comment = format!("Alternative for {name} is set to it's default path {now}");
        }
        None => {
            ret.result = Some(false);
            ret.comment = format!("Alternative for {name} doesn't exist");
        }
    }
    Ok(ret)
}

fn auto(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let host = call.env.grains();
    let display = alt::display(host, &name).map_err(err)?;
    if display
        .lines()
        .next()
        .is_some_and(|l| l.ends_with(" auto mode"))
    {
        return Ok(StateResult::ok(
            &name,
            format!("{name} already in auto mode"),
        ));
    }
    if call.test {
        let mut ret = StateResult::new(&name, None);
        ret.comment = format!("{name} will be put in auto mode");
        return Ok(ret);
    }
    let out = alt::action(host, &["--auto", &name]).map_err(err)?;
    let mut ret = StateResult::ok(&name, "");
    ret.changes.insert("result".into(), Value::from(out));
    Ok(ret)
}

fn set(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let path = required(call, "path", "set")?;
    let host = call.env.grains();
    let mut ret = StateResult::ok(&name, "");
    ret.extra.insert("path".into(), Value::from(path.clone()));
    if current(&name).as_deref() == Some(path.as_str()) {
        ret.comment = format!("Alternative for {name} already set to {path}");
        return Ok(ret);
    }
    let display = alt::display(host, &name).map_err(err)?;
    if !display.lines().any(|l| l.starts_with(&path)) {
        ret.result = Some(false);
        ret.comment = format!("Alternative {path} for {name} doesn't exist");
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment = format!("Alternative for {name} will be set to path {path}");
        return Ok(ret);
    }
    alt::action(host, &["--set", &name, &path]).map_err(err)?;
    match current(&name) {
        Some(now) if now == path => {
            ret.comment = format!("Alternative for {name} set to path {now}");
            ret.changes.insert("path".into(), Value::from(now));
        }
        _ => ret.comment = format!("Alternative for {name} not updated"),
    }
    Ok(ret)
}
