//! Salt's `debconf` execution module (debconfmod): the debconf database
//! through the real `debconf-get-selections` and `debconf-set-selections`
//! (debconf-utils), for `debconf.set` states that preseed packages.

use std::io::Write;

use halite_state::{Map, Value};
use regex::Regex;

use crate::exec::user::run;
use crate::exec::{py_str, Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "debconf",
    functions: &[
        ExecFunction::new("get_selections", get_selections_fn),
        ExecFunction::new("show", show_fn),
        ExecFunction::new("set", set_fn),
        ExecFunction::new("set_file", set_file_fn),
    ],
};

fn need_tools() -> Result<(), ExecError> {
    if crate::grains::hw::which("debconf-get-selections").is_none() {
        return Err(ExecError::Execution(
            "The debconfmod module could not be loaded: debconf-utils is not installed. Install it (apt-get install debconf-utils)".into(),
        ));
    }
    Ok(())
}

/// Salt's `get_selections`: package -> [[question, type, value], ...] in
/// the order `debconf-get-selections` prints them; empty values kept when
/// `fetchempty`.
pub fn get_selections(fetchempty: bool) -> Result<Map, ExecError> {
    need_tools()?;
    let ran = run(&["debconf-get-selections"])?;
    let line = Regex::new(r"(?m)^([^#]\S+)[\t ]+(\S+)[\t ]+(\S+)[\t ]+([^\n]*)$")
        .map_err(|e| ExecError::Execution(format!("selection pattern: {e}")))?;
    let mut out = Map::new();
    for caps in line.captures_iter(&ran.stdout) {
        let value = &caps[4];
        if !fetchempty && value.is_empty() {
            continue;
        }
        let entry = out
            .entry(caps[1].to_string())
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = entry {
            list.push(Value::from(vec![
                caps[2].to_string(),
                caps[3].to_string(),
                value.to_string(),
            ]));
        }
    }
    Ok(out)
}

/// Salt's `show`: the selections of one package, or None.
pub fn show(name: &str) -> Result<Value, ExecError> {
    Ok(get_selections(true)?
        .get(name)
        .cloned()
        .unwrap_or(Value::Null))
}

/// Feeds one file to `debconf-set-selections`.
pub fn set_file_path(path: &std::path::Path) -> Result<bool, ExecError> {
    need_tools()?;
    let ran = run(&["debconf-set-selections", &path.display().to_string()])?;
    if ran.retcode != 0 {
        tracing::warn!(stderr = %ran.stderr, "debconf-set-selections failed");
    }
    Ok(ran.retcode == 0)
}

/// Feeds selections text (a rendered template) to `debconf-set-selections`.
pub fn set_text(text: &str) -> Result<bool, ExecError> {
    let mut file = tempfile::Builder::new()
        .prefix("salt-")
        .tempfile()
        .map_err(|e| ExecError::Execution(format!("cannot make a temp file: {e}")))?;
    file.write_all(text.as_bytes())
        .map_err(|e| ExecError::Execution(format!("cannot write the temp file: {e}")))?;
    set_file_path(file.path())
}

/// Salt's `set`: one `package question type value` line through a temp
/// file and `debconf-set-selections`.
pub fn set(package: &str, question: &str, kind: &str, value: &str) -> Result<bool, ExecError> {
    for (what, text) in [("package", package), ("question", question), ("type", kind)] {
        if text.is_empty() || text.contains(char::is_whitespace) {
            return Err(ExecError::Invocation(format!(
                "debconf.set: {what} must be one word, not {text:?}"
            )));
        }
    }
    if value.contains('\n') {
        return Err(ExecError::Invocation(
            "debconf.set: the value must be one line".into(),
        ));
    }
    let mut file = tempfile::Builder::new()
        .prefix("salt-")
        .tempfile()
        .map_err(|e| ExecError::Execution(format!("cannot make a temp file: {e}")))?;
    write!(file, "{package} {question} {kind} {value}")
        .map_err(|e| ExecError::Execution(format!("cannot write the temp file: {e}")))?;
    set_file_path(file.path())
}

fn get_selections_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    get_selections(args.get_bool(0, "fetchempty", true)).map(Value::Object)
}

fn show_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    show(&args.require_str(0, "name", "show")?)
}

fn set_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let package = args.require_str(0, "package", "set")?;
    let question = args.require_str(1, "question", "set")?;
    let kind = args.require_str(2, "type", "set")?;
    let mut value = match args.get(3, "value") {
        Some(v) => py_str(v),
        None => {
            return Err(ExecError::Invocation(
                "set_() missing 1 required positional argument: 'value'".into(),
            ))
        }
    };
    for extra in args.positional.iter().skip(4) {
        value.push(' ');
        value.push_str(&py_str(extra));
    }
    set(&package, &question, &kind, &value).map(Value::Bool)
}

fn set_file_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let path = args.require_str(0, "path", "set_file")?;
    let saltenv = args.get_str(1, "saltenv").unwrap_or_else(|| "base".into());
    let local = match halite_state::strip_salt_url(&path) {
        Some((p, env)) => host
            .files
            .cache_file(p, env.unwrap_or(&saltenv))
            .map_err(|e| ExecError::Execution(e.to_string()))?,
        None => Some(std::path::PathBuf::from(&path)).filter(|p| p.is_file()),
    };
    match local {
        Some(p) => set_file_path(&p).map(Value::Bool),
        None => Ok(Value::Bool(false)),
    }
}
