//! Salt's `environ` execution module, read side: `environ.get`,
//! `environ.has_value` and `environ.items` of the minion process's
//! environment (templates read `salt['environ.get']('HOME')`).

use halite_state::{Map, Value};
use serde_json::json;

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "environ",
    functions: &[
        ExecFunction::new("get", get),
        ExecFunction::new("has_value", has_value),
        ExecFunction::new("items", items),
    ],
};

/// Salt answers False when `key` is not a string (`environ.get 1`).
fn key_is_text(args: &Args) -> bool {
    matches!(args.get(0, "key"), Some(Value::String(_)))
}

/// `environ.get <key> [default='']`: the variable, or the default.
fn get(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let key = args.require_str(0, "key", "get")?;
    if !key_is_text(args) {
        return Ok(json!(false));
    }
    Ok(match std::env::var_os(&key) {
        Some(v) => json!(v.to_string_lossy()),
        None => args.get(1, "default").cloned().unwrap_or(json!("")),
    })
}

/// `environ.has_value <key> [value]`: whether the variable is set (to
/// `value` when given).
fn has_value(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let key = args.require_str(0, "key", "has_value")?;
    if !key_is_text(args) {
        return Ok(json!(false));
    }
    let current = std::env::var_os(&key).map(|v| v.to_string_lossy().into_owned());
    Ok(json!(match (current, args.get_str(1, "value")) {
        (Some(cur), Some(want)) => cur == want,
        (Some(_), None) => true,
        (None, _) => false,
    }))
}

/// `environ.items`: the whole environment.
fn items(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Object(
        std::env::vars_os()
            .map(|(k, v)| (k.to_string_lossy().into_owned(), json!(v.to_string_lossy())))
            .collect::<Map>(),
    ))
}
