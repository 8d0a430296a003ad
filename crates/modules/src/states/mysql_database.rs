//! Salt's `mysql_database` state (from the `saltext-mysql` extension Salt
//! 3008 users install): `present` with `character_set`/`collate`, and
//! `absent`, with Salt's comments and changes.

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::mysql::session_for_state;

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "mysql_database",
    functions: &[
        StateFunction::new("present", present),
        StateFunction::new("absent", absent),
    ],
};

/// `str()` of a db_get value as Salt compares it (`None` for a missing one).
fn shown(v: Option<&Value>) -> String {
    v.map_or_else(|| "None".to_string(), halite_salt_rules::pyfmt::python_str)
}

/// `mysql_database.present`: creates the database, or alters its
/// character set and collation when they differ.
fn present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let character_set = call.arg_str("character_set")?.filter(|s| !s.is_empty());
    let collate = call.arg_str("collate")?.filter(|s| !s.is_empty());
    let m = session_for_state(call);
    let mut ret = StateResult::ok(&name, format!("Database {name} is already present"));
    let existing = m.db_get(&name);
    if !existing.is_empty() {
        let mut alter = false;
        let existing_cs = shown(existing.get("character_set"));
        if let Some(cs) = character_set.as_deref().filter(|cs| *cs != existing_cs) {
            alter = true;
            ret.comment =
                format!("Database character set {cs} != {existing_cs} needs to be updated");
            if call.test {
                ret.result = None;
            }
        }
        let existing_collate = shown(existing.get("collate"));
        if let Some(c) = collate.as_deref().filter(|c| *c != existing_collate) {
            alter = true;
            ret.comment.push_str(&format!(
                "\nDatabase collate {c} != {existing_collate} needs to be updated"
            ));
            if call.test {
                ret.result = None;
                return Ok(ret);
            }
        }
        if alter {
            if call.test {
                ret.comment
                    .push_str(&format!("\nDatabase {name} is going to be updated"));
            } else {
                m.alter_db(&name, character_set.as_deref(), collate.as_deref());
            }
        }
        let current = m.db_get(&name);
        for key in ["collate", "character_set"] {
            let before = existing.get(key).cloned().unwrap_or(Value::Null);
            let now = current.get(key).cloned().unwrap_or(Value::Null);
            if before != now {
                let mut change = Map::new();
                change.insert("before".into(), before);
                change.insert("now".into(), now);
                ret.changes.insert(key.into(), Value::Object(change));
            }
        }
        return Ok(ret);
    }
    if let Some(err) = m.take_error() {
        return Ok(StateResult::fail(&name, err));
    }
    if call.test {
        ret.result = None;
        ret.comment = format!("Database {name} is not present and needs to be created");
        return Ok(ret);
    }
    if m.db_create(&name, character_set.as_deref(), collate.as_deref()) {
        ret.comment = format!("The database {name} has been created");
        ret.changes.insert(name.clone(), Value::from("Present"));
    } else {
        ret.comment = format!("Failed to create database {name}");
        if let Some(err) = m.take_error() {
            ret.comment.push_str(&format!(" ({err})"));
        }
        ret.result = Some(false);
    }
    Ok(ret)
}

/// `mysql_database.absent`: drops the database.
fn absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let m = session_for_state(call);
    let mut ret = StateResult::ok(&name, "");
    if m.db_exists(&name) {
        if call.test {
            ret.result = None;
            ret.comment = format!("Database {name} is present and needs to be removed");
            return Ok(ret);
        }
        if m.db_remove(&name) {
            ret.comment = format!("Database {name} has been removed");
            ret.changes.insert(name.clone(), Value::from("Absent"));
            return Ok(ret);
        }
        if let Some(err) = m.take_error() {
            return Ok(StateResult::fail(
                &name,
                format!("Unable to remove database {name} ({err})"),
            ));
        }
    } else if let Some(err) = m.take_error() {
        return Ok(StateResult::fail(&name, err));
    }
    ret.comment = format!("Database {name} is not present, so it cannot be removed");
    Ok(ret)
}
