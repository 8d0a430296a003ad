//! Salt's `sysctl.present`: a kernel parameter set now and persisted in a
//! sysctl config file, with Salt's comments and `test=True` predictions.

use halite_state::{StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::py_str;
use crate::exec::sysctl as exec;

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "sysctl",
    functions: &[StateFunction::new("present", present)],
};

/// Salt's `re.sub(' +|\t+', ' ', s)`: runs of spaces or of tabs as one space.
fn squeeze(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut prev: Option<char> = None;
    for c in s.chars() {
        if (c == ' ' || c == '\t') && prev == Some(c) {
            continue;
        }
        prev = Some(c);
        out.push(if c == '\t' { ' ' } else { c });
    }
    out
}

fn present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(call, &["value", "config"])?;
    let name = call.name().to_string();
    let value = call
        .chunk
        .get("value")
        .map(py_str)
        .ok_or_else(|| StateError::MissingArg("value".into(), "sysctl.present".into()))?;
    let config = call
        .arg_str("config")?
        .unwrap_or_else(|| exec::default_config().to_string());
    let err = |e: crate::exec::ExecError| StateError::Other(e.to_string());
    if call.test {
        let configured = match exec::show_config(&config) {
            Ok(c) => c.unwrap_or_default(),
            Err(_) => {
                let mut ret = StateResult::new(&name, None);
                ret.comment = format!("Sysctl option {name} might be changed, we failed to check config file at {config}. The file is either unreadable, or missing.");
                return Ok(ret);
            }
        };
        let current = exec::get(&name).map_err(err)?;
        let mut ret = StateResult::new(&name, None);
        let in_config = configured.contains_key(&name);
        if !current.is_empty() {
            if in_config {
                let wanted: Vec<&str> = value.split_whitespace().collect();
                let have: Vec<&str> = current.split_whitespace().collect();
                if wanted == have {
                    ret.result = Some(true);
                    ret.comment = format!("Sysctl value {name} = {value} is already set");
                    return Ok(ret);
                }
            } else if squeeze(&current) != squeeze(&value) {
                ret.comment = format!("Sysctl option {name} set to be changed to {value}");
                return Ok(ret);
            } else {
                ret.comment = format!("Sysctl value is currently set on the running system but not in a config file. Sysctl option {name} set to be changed to {value} in config file.");
                return Ok(ret);
            }
        } else if in_config {
            ret.comment = format!("Sysctl value {name} is present in configuration file but is not present in the running config. The value {name} is set to be changed to {value}");
            return Ok(ret);
        }
        ret.comment = format!("Sysctl option {name} would be changed to {value}");
        return Ok(ret);
    }
    match exec::persist(&name, &value, Some(&config)) {
        Err(e) => Ok(StateResult::fail(
            &name,
            format!("Failed to set {name} to {value}: {e}"),
        )),
        Ok("Updated") => {
            let raw = call.chunk.get("value").cloned().unwrap_or(Value::Null);
            Ok(
                StateResult::ok(&name, format!("Updated sysctl value {name} = {value}"))
                    .with_change(name.clone(), raw),
            )
        }
        Ok(_) => Ok(StateResult::ok(
            &name,
            format!("Sysctl value {name} = {value} is already set"),
        )),
    }
}
