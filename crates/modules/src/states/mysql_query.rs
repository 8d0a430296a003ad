//! Salt's `mysql_query` state (from the `saltext-mysql` extension Salt
//! 3008 users install): `run` a query in a database, its result written to
//! a file (`output`) or a grain (`output: grain`, `grain`, `key`), unless
//! `overwrite: False` finds it there already.

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::mysql::session_for_state;

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "mysql_query",
    functions: &[StateFunction::new("run", run)],
};

/// Whether grain `grain` is set (`grains.ls`).
fn grain_set(call: &StateCall<'_>, grain: &str) -> bool {
    call.env
        .call_function("grains.ls", &[], &Map::new())
        .ok()
        .and_then(|v| v.as_array().cloned())
        .is_some_and(|a| a.iter().any(|g| g.as_str() == Some(grain)))
}

/// The current value of grain `grain` as a dict (`{}` when unset).
fn grain_dict(call: &StateCall<'_>, grain: &str) -> Map {
    if !grain_set(call, grain) {
        return Map::new();
    }
    call.env
        .call_function("grains.get", &[Value::from(grain)], &Map::new())
        .ok()
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default()
}

/// What a run would do, decided before the query runs (Salt's early
/// returns): `Some(result)` ends the state there.
fn plan(
    call: &StateCall<'_>,
    name: &str,
    output: Option<&str>,
    grain: Option<&str>,
    key: Option<&str>,
) -> Option<StateResult> {
    let overwrite = call.arg_bool("overwrite", true);
    let would = |what: String| {
        let mut r = StateResult::new(name, None);
        r.comment = what;
        Some(r)
    };
    match (output, grain, key) {
        (Some("grain"), Some(grain), None) => {
            if !overwrite && grain_set(call, grain) {
                Some(StateResult::ok(
                    name,
                    format!("No execution needed. Grain {grain} already set"),
                ))
            } else if call.test {
                would(format!(
                    "Query would execute, storing result in grain: {grain}"
                ))
            } else {
                None
            }
        }
        (Some("grain"), Some(grain), Some(key)) => {
            if !overwrite && grain_dict(call, grain).contains_key(key) {
                Some(StateResult::ok(
                    name,
                    format!("No execution needed. Grain {grain}:{key} already set"),
                ))
            } else if call.test {
                would(format!(
                    "Query would execute, storing result in grain: {grain}:{key}"
                ))
            } else {
                None
            }
        }
        (Some("grain"), None, _) => Some(StateResult::fail(
            name,
            "Error: output type 'grain' needs the grain parameter\n",
        )),
        (Some(file), _, _) => {
            if !overwrite && std::path::Path::new(file).is_file() {
                Some(StateResult::ok(
                    name,
                    format!("No execution needed. File {file} already set"),
                ))
            } else if call.test {
                would(format!(
                    "Query would execute, storing result in file: {file}"
                ))
            } else {
                None
            }
        }
        (None, _, _) if call.test => would("Query would execute, not storing result".into()),
        (None, _, _) => None,
    }
}

/// `str()` of a value as Python writes it into the output file.
fn py_text(v: &Value) -> String {
    halite_salt_rules::pyfmt::python_str(v)
}

/// The output file's text: `column:value` lines per row, else the
/// result's `key:value` lines.
fn file_text(result: &Map) -> String {
    let mut text = String::new();
    match result.get("results").and_then(Value::as_array) {
        Some(rows) => {
            for row in rows {
                for (col, val) in row.as_object().into_iter().flatten() {
                    text.push_str(&format!("{col}:{}\n", py_text(val)));
                }
            }
        }
        None => {
            for (col, val) in result {
                text.push_str(&format!("{col}:{}\n", py_text(val)));
            }
        }
    }
    text
}

/// `mysql_query.run`: runs `query` in `database` (which must exist unless
/// `check_db_exists: False`), storing the result where `output` says.
fn run(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let database = call.require_str("database")?;
    let query = call.require_str("query")?;
    let output = call.arg_str("output")?;
    let grain = call.arg_str("grain")?;
    let key = call.arg_str("key")?;
    if call.arg("client_flags").is_some_and(|v| !v.is_array()) {
        return Ok(StateResult::fail(
            &name,
            "Error: client_flags must be a list.",
        ));
    }
    let m = session_for_state(call);
    if call.arg_bool("check_db_exists", true) && !m.db_exists(&database) {
        if let Some(err) = m.take_error() {
            return Ok(StateResult::fail(&name, err));
        }
        let mut r = StateResult::new(&name, None);
        r.comment = format!("Database {name} is not present");
        return Ok(r);
    }
    if let Some(done) = plan(
        call,
        &name,
        output.as_deref(),
        grain.as_deref(),
        key.as_deref(),
    ) {
        return Ok(done);
    }
    let Some(mut result) = m.query(&database, &query) else {
        let err = m.take_error().unwrap_or_else(|| "the query failed".into());
        return Ok(StateResult::fail(&name, err));
    };
    // Rows become dicts keyed by column, as Salt maps them.
    if let (Some(Value::Array(rows)), Some(Value::Array(cols))) = (
        result.get("results").cloned(),
        result.get("columns").cloned(),
    ) {
        let mapped: Vec<Value> = rows
            .iter()
            .map(|row| {
                let cells = row.as_array().cloned().unwrap_or_default();
                Value::Object(
                    cols.iter()
                        .zip(cells)
                        .map(|(c, v)| (py_text(c), v))
                        .collect(),
                )
            })
            .collect();
        result.insert("results".into(), Value::Array(mapped));
    }
    let mut ret = StateResult::ok(
        &name,
        halite_salt_rules::pyfmt::python_repr(&Value::Object(result.clone())),
    );
    let executed = match (output.as_deref(), grain.as_deref(), key.as_deref()) {
        (Some("grain"), Some(grain), None) => {
            set_grain(call, grain, Value::Object(result))?;
            format!("Executed. Output into grain: {grain}")
        }
        (Some("grain"), Some(grain), Some(key)) => {
            let mut value = grain_dict(call, grain);
            value.insert(key.to_string(), Value::Object(result));
            set_grain(call, grain, Value::Object(value))?;
            format!("Executed. Output into grain: {grain}:{key}")
        }
        (Some(file), _, _) => {
            std::fs::write(file, file_text(&result)).map_err(|e| {
                StateError::Other(format!(
                    "the query ran but its output could not be written to {file}: {e}"
                ))
            })?;
            format!("Executed. Output into {file}")
        }
        (None, _, _) => "Executed".to_string(),
    };
    ret.changes.insert("query".into(), Value::from(executed));
    Ok(ret)
}

/// `grains.setval grain value`.
fn set_grain(call: &StateCall<'_>, grain: &str, value: Value) -> Result<(), StateError> {
    call.env
        .call_function("grains.setval", &[Value::from(grain), value], &Map::new())
        .map(|_| ())
        .map_err(|e| StateError::Other(format!("the query ran but grain {grain} was not set: {e}")))
}
