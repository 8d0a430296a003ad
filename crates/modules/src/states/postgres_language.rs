//! Salt's `postgres_language` state: a procedural language installed in
//! (or removed from) the database `maintenance_db`.

use halite_state::{StateCall, StateError, StateFunction, StateResult, StateTable};

use crate::exec::postgres as pg;
use crate::exec::postgres::state::{changed, failed, psql};

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "postgres_language",
    functions: &[
        StateFunction::new("present", present),
        StateFunction::new("absent", absent),
    ],
};

/// Salt's `postgres_language.present`.
fn present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let db = call.require_str("maintenance_db")?;
    let p = psql(call, Some(db))?;
    let mut ret = StateResult::new(&name, Some(true));
    ret.comment = format!("Language {name} is already installed");
    let exists = match pg::language_list(&p) {
        Ok(l) => l.contains_key(&name),
        Err(e) => return Ok(failed(&name, e)),
    };
    if exists {
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment = format!("Language {name} is set to be installed");
        return Ok(ret);
    }
    match pg::language_create(&p, &name) {
        Ok(true) => {
            ret.comment = format!("Language {name} has been installed");
            changed(&mut ret, &name, "Present");
        }
        Ok(false) => {
            ret.result = Some(false);
            ret.comment = format!("Failed to install language {name}");
        }
        Err(e) => return Ok(failed(&name, e)),
    }
    Ok(ret)
}

/// Salt's `postgres_language.absent`. (Salt 3008's own removal call
/// misses the database argument and raises; this removes the language
/// from `maintenance_db`, as its documentation says.)
fn absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let db = call.require_str("maintenance_db")?;
    let p = psql(call, Some(db))?;
    let mut ret = StateResult::new(&name, Some(true));
    let exists = match pg::language_list(&p) {
        Ok(l) => l.contains_key(&name),
        Err(e) => return Ok(failed(&name, e)),
    };
    if !exists {
        ret.comment = format!("Language {name} is not present so it cannot be removed");
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment = format!("Language {name} is set to be removed");
        return Ok(ret);
    }
    match pg::language_remove(&p, &name) {
        Ok(true) => {
            ret.comment = format!("Language {name} has been removed");
            changed(&mut ret, &name, "Absent");
        }
        Ok(false) => {
            ret.result = Some(false);
            ret.comment = format!("Failed to remove language {name}");
        }
        Err(e) => return Ok(failed(&name, e)),
    }
    Ok(ret)
}
