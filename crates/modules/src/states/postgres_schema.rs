//! Salt's `postgres_schema` state: a schema present (with its owner on
//! creation) or absent in the database `dbname`.

use halite_state::{StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::postgres as pg;
use crate::exec::postgres::state::{changed, failed, opt_str, psql};

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "postgres_schema",
    functions: &[
        StateFunction::new("present", present),
        StateFunction::new("absent", absent),
    ],
};

/// A result carrying Salt's extra `dbname` key.
fn result(name: &str, dbname: &str) -> StateResult {
    let mut r = StateResult::new(name, Some(true));
    r.extra.insert("dbname".into(), Value::from(dbname));
    r
}

/// Salt's `postgres_schema.present`.
fn present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let dbname = call.require_str("dbname")?;
    let p = psql(call, Some(dbname.clone()))?;
    let mut ret = result(&name, &dbname);
    let exists = match pg::schema_list(&p) {
        Ok(s) => s.contains_key(&name),
        Err(e) => return Ok(failed(&name, e)),
    };
    if exists {
        ret.comment = format!("Schema {name} already exists in database {dbname}");
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment = format!("Schema {name} is set to be created in database {dbname}.");
        return Ok(ret);
    }
    match pg::schema_create(&p, &name, opt_str(call, "owner").as_deref()) {
        Ok(true) => {
            ret.comment = format!("Schema {name} has been created in database {dbname}");
            changed(&mut ret, &name, "Present");
        }
        Ok(false) => {
            ret.result = Some(false);
            ret.comment = format!("Failed to create schema {name} in database {dbname}");
        }
        Err(e) => return Ok(failed(&name, e)),
    }
    Ok(ret)
}

/// Salt's `postgres_schema.absent`.
fn absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let dbname = call.require_str("dbname")?;
    let p = psql(call, Some(dbname.clone()))?;
    let mut ret = result(&name, &dbname);
    let exists = match pg::schema_list(&p) {
        Ok(s) => s.contains_key(&name),
        Err(e) => return Ok(failed(&name, e)),
    };
    if !exists {
        ret.comment =
            format!("Schema {name} is not present in database {dbname}, so it cannot be removed");
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment = format!("Schema {name} is set to be removed from database {dbname}");
        return Ok(ret);
    }
    match pg::schema_remove(&p, &name) {
        Ok(true) => {
            ret.comment = format!("Schema {name} has been removed from database {dbname}");
            changed(&mut ret, &name, "Absent");
        }
        Ok(false) => {
            ret.result = Some(false);
            ret.comment = format!("Schema {name} failed to be removed");
        }
        Err(e) => return Ok(failed(&name, e)),
    }
    Ok(ret)
}
