//! Salt's `group` state: `group.present` and `group.absent`, with Salt's
//! comments and changes.

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::group as grp;
use crate::states::user::{py_str, string_list_arg};

/// The module's table: `group.present` and `group.absent`.
pub const MODULE: StateTable = StateTable {
    name: "group",
    functions: &[
        StateFunction::new("present", present),
        StateFunction::new("absent", absent),
    ],
};

/// One pending change, in Salt's key order.
type Changes = Vec<(&'static str, Value)>;

/// Salt's `_changes`: what differs from the wanted group; `None` when absent.
fn changes(
    name: &str,
    gid: Option<i64>,
    addusers: &Option<Vec<String>>,
    delusers: &Option<Vec<String>>,
    members: &Option<Vec<String>>,
) -> Option<Changes> {
    let info = grp::info(name)?;
    let current: Vec<String> = info
        .get("members")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let same_set = |wanted: &[String]| {
        let a: std::collections::BTreeSet<&String> = current.iter().collect();
        let b: std::collections::BTreeSet<&String> = wanted.iter().collect();
        a == b
    };
    let mut change = Changes::new();
    if let Some(gid) = gid.filter(|g| *g != 0) {
        if info.get("gid").and_then(Value::as_i64) != Some(gid) {
            change.push(("gid", Value::from(gid)));
        }
    }
    match members {
        Some(wanted) if wanted.is_empty() && !same_set(wanted) => {
            change.push(("delusers", Value::from(current.clone())));
        }
        Some(wanted) if !wanted.is_empty() && !same_set(wanted) => {
            change.push(("members", Value::from(wanted.clone())));
        }
        _ => {}
    }
    if let Some(add) = addusers {
        let missing: Vec<String> = add
            .iter()
            .filter(|u| !current.contains(u))
            .cloned()
            .collect();
        if !missing.is_empty() {
            change.push(("addusers", Value::from(missing)));
        }
    }
    if let Some(del) = delusers {
        let present: Vec<String> = del
            .iter()
            .filter(|u| current.contains(u))
            .cloned()
            .collect();
        if !present.is_empty() {
            change.push(("delusers", Value::from(present)));
        }
    }
    Some(change)
}

fn gid_arg(call: &StateCall<'_>) -> Result<Option<i64>, StateError> {
    match call.arg("gid") {
        None => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| StateError::BadArg("Invalid gid".into())),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| StateError::BadArg("Invalid gid".into())),
        Some(_) => Err(StateError::BadArg("Invalid gid".into())),
    }
}

fn present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    // Salt formats its name with `str()`: quoted when a yamlex string.
    let shown = call.chunk.shown_name().into_owned();
    let gid = match gid_arg(call) {
        Ok(g) => g,
        Err(e) => return Ok(StateResult::fail(&name, e.to_string())),
    };
    let system = call.arg_bool("system", false);
    let non_unique = call.arg_bool("non_unique", false);
    let addusers = call
        .arg("addusers")
        .map(|_| string_list_arg(call, "addusers"));
    let delusers = call
        .arg("delusers")
        .map(|_| string_list_arg(call, "delusers"));
    let members = call
        .arg("members")
        .map(|_| string_list_arg(call, "members"));
    let mut ret = StateResult::ok(&name, format!("Group {shown} is present and up to date"));

    if members.is_some() && (addusers.is_some() || delusers.is_some()) {
        ret.result = None;
        ret.comment =
            "Error: Conflicting options \"members\" with \"addusers\" and/or \"delusers\" can not be used together. ".into();
        return Ok(ret);
    }
    if let (Some(add), Some(del)) = (&addusers, &delusers) {
        if add.iter().any(|u| del.contains(u)) {
            ret.result = None;
            ret.comment = "Error. Same user(s) can not be added and deleted simultaneously".into();
            return Ok(ret);
        }
    }

    match changes(&name, gid, &addusers, &delusers, &members) {
        Some(pending) if !pending.is_empty() => {
            let mut comment =
                String::from("The following group attributes are set to be changed:\n");
            for (key, value) in &pending {
                comment.push_str(&format!("{key}: {}\n", py_str(value)));
            }
            ret.comment = comment;
            if call.test {
                ret.result = None;
                return Ok(ret);
            }
            for (key, value) in &pending {
                let users: Vec<String> = value
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default();
                let applied = match *key {
                    "gid" => grp::chgid(&name, value.as_i64().unwrap_or_default(), non_unique),
                    "addusers" => users
                        .iter()
                        .try_for_each(|u| grp::adduser(&name, u).map(|_| ()))
                        .map(|_| true),
                    "delusers" => users
                        .iter()
                        .try_for_each(|u| grp::deluser(&name, u).map(|_| ()))
                        .map(|_| true),
                    "members" => grp::set_members(&name, members.as_deref().unwrap_or_default()),
                    _ => Ok(true),
                };
                if let Err(e) = applied {
                    return Ok(StateResult::fail(&name, e.to_string()));
                }
            }
            match changes(&name, gid, &addusers, &delusers, &members) {
                Some(left) if !left.is_empty() => {
                    ret.result = Some(false);
                    ret.comment.push_str("Some changes could not be applied");
                    ret.changes
                        .insert("Failed".into(), Value::Object(to_map(left)));
                }
                _ => {
                    ret.changes.insert(
                        "Final".into(),
                        Value::from("All changes applied successfully"),
                    );
                }
            }
            Ok(ret)
        }
        Some(_) => Ok(ret),
        None => {
            if call.test {
                ret.result = None;
                ret.comment = format!("Group {shown} set to be added");
                return Ok(ret);
            }
            if let (Some(g), false) = (gid, non_unique) {
                let all = grp::getent().map_err(|e| StateError::Other(e.to_string()))?;
                if let Some(taken) = all
                    .iter()
                    .find(|i| i.get("gid").and_then(Value::as_i64) == Some(g))
                {
                    let other = taken.get("name").and_then(Value::as_str).unwrap_or("");
                    return Ok(StateResult::fail(
                        &name,
                        format!("Group {shown} is not present but gid {g} is already taken by group {other}"),
                    ));
                }
            }
            let created = grp::add(&name, gid, system, non_unique)
                .map_err(|e| StateError::Other(e.to_string()))?;
            if !created {
                return Ok(StateResult::fail(
                    &name,
                    format!("Failed to create new group {shown}"),
                ));
            }
            let initial = addusers
                .clone()
                .or_else(|| members.clone())
                .filter(|m| !m.is_empty());
            if let Some(list) = initial {
                grp::set_members(&name, &list).map_err(|e| StateError::Other(e.to_string()))?;
            }
            ret.comment = format!("New group {shown} created");
            ret.changes = grp::info(&name).unwrap_or_default();
            if let Some(left) =
                changes(&name, gid, &addusers, &delusers, &members).filter(|c| !c.is_empty())
            {
                ret.result = Some(false);
                ret.comment = format!(
                    "Group {shown} has been created but, some changes could not be applied"
                );
                ret.changes = Map::new();
                ret.changes
                    .insert("Failed".into(), Value::Object(to_map(left)));
            }
            Ok(ret)
        }
    }
}

fn to_map(changes: Changes) -> Map {
    changes
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

fn absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    // Salt formats its name with `str()`: quoted when a yamlex string.
    let shown = call.chunk.shown_name().into_owned();
    if grp::info(&name).is_none() {
        return Ok(StateResult::ok(&name, "Group not present"));
    }
    if call.test {
        return Ok(StateResult::would_change(
            &name,
            format!("Group {shown} is set for removal"),
            Map::new(),
        ));
    }
    if grp::delete(&name).map_err(|e| StateError::Other(e.to_string()))? {
        Ok(StateResult::ok(&name, format!("Removed group {shown}"))
            .with_change(name.clone(), Value::from("")))
    } else {
        Ok(StateResult::fail(
            &name,
            format!("Failed to remove group {shown}"),
        ))
    }
}
