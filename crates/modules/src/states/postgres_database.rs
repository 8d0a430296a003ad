//! Salt's `postgres_database` state: a database present with its
//! tablespace, encoding, collation and owner, or absent.

use halite_state::{StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::postgres::state::{changed, failed, opt_str, psql};
use crate::exec::postgres::{self as pg, DbOptions};

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "postgres_database",
    functions: &[
        StateFunction::new("present", present),
        StateFunction::new("absent", absent),
    ],
};

/// Salt's `postgres_database.present`.
fn present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let p = psql(call, None)?;
    let o = DbOptions {
        tablespace: opt_str(call, "tablespace"),
        encoding: opt_str(call, "encoding"),
        lc_collate: opt_str(call, "lc_collate"),
        lc_ctype: opt_str(call, "lc_ctype"),
        owner: opt_str(call, "owner"),
        template: opt_str(call, "template"),
    };
    let mut ret = StateResult::new(&name, Some(true));
    ret.comment = format!("Database {name} is already present");
    let dbs = match pg::db_list(&p) {
        Ok(d) => d,
        Err(e) => return Ok(failed(&name, e)),
    };
    let exists = dbs.contains_key(&name);
    let have = |k: &str| {
        dbs.get(&name)
            .and_then(|d| d.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let differs = |k: &str, want: &Option<String>| want.as_ref().is_some_and(|w| have(k) != *w);
    let encoding_differs = o
        .encoding
        .as_ref()
        .is_some_and(|e| have("Encoding").to_lowercase() != e.to_lowercase());
    let fixed_differs =
        encoding_differs || differs("Collate", &o.lc_collate) || differs("Ctype", &o.lc_ctype);
    if exists
        && !fixed_differs
        && !differs("Tablespace", &o.tablespace)
        && !differs("Owner", &o.owner)
    {
        return Ok(ret);
    }
    if exists && fixed_differs {
        ret.result = Some(false);
        ret.comment =
            format!("Database {name} has wrong parameters which couldn't be changed on fly.");
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment = if exists {
            format!("Database {name} exists, but parameters need to be changed")
        } else {
            format!("Database {name} is set to be created")
        };
        return Ok(ret);
    }
    let done = if exists {
        pg::db_alter(
            &p,
            &name,
            o.tablespace.as_deref(),
            o.owner.as_deref(),
            call.arg_bool("owner_recurse", false),
        )
    } else {
        pg::db_create(&p, &name, &o)
    };
    match (exists, done) {
        (false, Ok(true)) => {
            ret.comment = format!("The database {name} has been created");
            changed(&mut ret, &name, "Present");
        }
        (true, Ok(true)) => {
            ret.comment = format!("Parameters for database {name} have been changed");
            changed(&mut ret, &name, "Parameters changed");
        }
        (true, Ok(false)) => {
            ret.result = Some(false);
            ret.comment = format!("Failed to change parameters for database {name}");
        }
        (false, Ok(false)) => {
            ret.result = Some(false);
            ret.comment = format!("Failed to create database {name}");
        }
        (_, Err(e)) => return Ok(failed(&name, e)),
    }
    Ok(ret)
}

/// Salt's `postgres_database.absent`.
fn absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let p = psql(call, None)?;
    let mut ret = StateResult::new(&name, Some(true));
    let exists = match pg::db_list(&p) {
        Ok(d) => d.contains_key(&name),
        Err(e) => return Ok(failed(&name, e)),
    };
    if !exists {
        ret.comment = format!("Database {name} is not present, so it cannot be removed");
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment = format!("Database {name} is set to be removed");
        return Ok(ret);
    }
    match pg::db_remove(&p, &name) {
        Ok(_) => {
            ret.comment = format!("Database {name} has been removed");
            changed(&mut ret, &name, "Absent");
        }
        Err(e) => {
            ret.result = Some(false);
            ret.comment = format!("Database {name} failed to be removed: {e}");
        }
    }
    Ok(ret)
}
