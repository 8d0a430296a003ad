//! Salt's `postgres_user` state (`present`/`absent`), and the role logic
//! `postgres_group` shares with it: a role's flags, password (md5 or
//! SCRAM verifiers compared as Salt does) and group memberships.

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::postgres::role::{self, Encryption, RoleKind, RoleOptions};
use crate::exec::postgres::state::{changed, failed, opt_bool, opt_str, psql};
use crate::exec::postgres::{self as pg, Psql};
use crate::exec::ExecError;

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "postgres_user",
    functions: &[
        StateFunction::new("present", |c| present(RoleKind::User, c)),
        StateFunction::new("absent", |c| absent(RoleKind::User, c)),
    ],
};

/// `User`/`Group` and `user`/`group` of the comments.
fn words(kind: RoleKind) -> (&'static str, &'static str) {
    match kind {
        RoleKind::Group => ("Group", "group"),
        _ => ("User", "user"),
    }
}

/// Salt's `postgres_user.present` and `postgres_group.present`.
pub fn present(kind: RoleKind, call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let p = psql(call, None)?;
    let (big, _) = words(kind);
    let mut ret = StateResult::new(&name, Some(true));
    ret.comment = format!("{big} {name} is already present");
    match plan_and_act(kind, call, &p, &name, &mut ret) {
        Ok(()) => Ok(ret),
        Err(e) => Ok(failed(&name, e)),
    }
}

/// The wanted flags of the call, in Salt's `update` key order.
fn wanted_flags(call: &StateCall<'_>) -> [(&'static str, &'static str, Option<bool>); 6] {
    [
        (
            "createdb",
            "can create databases",
            opt_bool(call, "createdb"),
        ),
        ("inherit", "inherits privileges", opt_bool(call, "inherit")),
        ("login", "can login", opt_bool(call, "login")),
        (
            "createroles",
            "can create roles",
            opt_bool(call, "createroles"),
        ),
        ("replication", "replication", opt_bool(call, "replication")),
        ("superuser", "superuser", opt_bool(call, "superuser")),
    ]
}

/// Resolve (the role as it is), check (what differs), then act or
/// predict, filling `ret` as Salt does.
fn plan_and_act(
    kind: RoleKind,
    call: &StateCall<'_>,
    p: &Psql<'_>,
    name: &str,
    ret: &mut StateResult,
) -> Result<(), ExecError> {
    let (big, small) = words(kind);
    let enc_arg = call.arg("encrypted");
    let enc = Encryption::from_value(enc_arg)?;
    let refresh = call
        .arg("refresh_password")
        .is_some_and(crate::exec::py_truth);
    let current = pg::role_get(p, name, !refresh)?;
    let mode = if current.is_some() {
        "update"
    } else {
        "create"
    };
    let mut password = opt_str(call, "password");
    if mode == "create" && password.is_none() && kind == RoleKind::User {
        password = opt_str(call, "default_password");
    }
    if let Some(pw) = password.take() {
        let verifier = current
            .as_ref()
            .and_then(|c| c.get("password"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let same = mode == "update" && !refresh && role::verify_password(name, &pw, verifier, enc);
        if !same {
            password = Some(role::maybe_encrypt(name, &pw, enc)?);
        }
    }
    let mut update = Map::new();
    if let Some(cur) = &current {
        for (key, column, want) in wanted_flags(call) {
            if let Some(want) = want {
                if cur.get(column).and_then(Value::as_bool) != Some(want) {
                    update.insert(key.into(), Value::Bool(want));
                }
            }
        }
        if password.is_some() {
            update.insert("password".into(), Value::Bool(true));
        }
        if kind == RoleKind::User {
            if let Some(until) = opt_str(call, "valid_until") {
                let rows = p.query(
                    &format!(
                        "SELECT '{}'::timestamp(0) as dt;",
                        until.replace('\'', "''")
                    ),
                    false,
                )?;
                let dt = rows
                    .first()
                    .and_then(|r| r.get("dt"))
                    .and_then(Value::as_str)
                    .filter(|s| {
                        chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").is_ok()
                    })
                    .map(str::to_string);
                let have = cur
                    .get("expiry time")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                if dt != have {
                    update.insert("valid_until".into(), Value::from(until));
                }
            }
        }
        if let Some(groups) = call.arg("groups") {
            let have: Vec<String> = cur
                .get("groups")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            let missing: Vec<String> = role::group_names(groups)
                .into_iter()
                .filter(|g| !have.contains(g))
                .collect();
            if !missing.is_empty() {
                update.insert("groups".into(), Value::from(missing));
            }
        }
    }
    if mode == "update" && update.is_empty() {
        return Ok(());
    }
    if call.test {
        if !update.is_empty() {
            changed(ret, name, Value::Object(update));
        }
        ret.result = None;
        ret.comment = format!("{big} {name} is set to be {mode}d");
        return Ok(());
    }
    let options = RoleOptions {
        inherit: opt_bool(call, "inherit"),
        createdb: opt_bool(call, "createdb"),
        createroles: opt_bool(call, "createroles"),
        superuser: opt_bool(call, "superuser"),
        replication: opt_bool(call, "replication"),
        login: opt_bool(call, "login"),
        connlimit: None,
        encrypted: Some(enc_arg.cloned().unwrap_or_else(|| Value::from("md5"))),
        password: password.map(Value::from),
        valid_until: if kind == RoleKind::User {
            opt_str(call, "valid_until")
        } else {
            None
        },
        groups: call.arg("groups").cloned(),
    };
    let done = if mode == "create" {
        pg::role_create(p, name, kind, &options)?
    } else {
        pg::role_update(p, name, &options)?
    };
    if done {
        ret.comment = format!("The {small} {name} has been {mode}d");
        if update.is_empty() {
            changed(ret, name, "Present");
        } else {
            changed(ret, name, Value::Object(update));
        }
    } else {
        ret.comment = format!("Failed to {mode} {small} {name}");
        ret.result = Some(false);
    }
    Ok(())
}

/// Salt's `postgres_user.absent` and `postgres_group.absent`.
pub fn absent(kind: RoleKind, call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let p = psql(call, None)?;
    let (big, _) = words(kind);
    let mut ret = StateResult::new(&name, Some(true));
    let exists = match pg::role_get(&p, &name, false) {
        Ok(r) => r.is_some(),
        Err(e) => return Ok(failed(&name, e)),
    };
    if !exists {
        ret.comment = format!("{big} {name} is not present, so it cannot be removed");
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment = format!("{big} {name} is set to be removed");
        return Ok(ret);
    }
    match pg::role_remove(&p, &name) {
        Ok(true) => {
            ret.comment = format!("{big} {name} has been removed");
            changed(&mut ret, &name, "Absent");
        }
        Ok(false) => {
            ret.result = Some(false);
            ret.comment = format!("{big} {name} failed to be removed");
        }
        Err(e) => return Ok(failed(&name, e)),
    }
    Ok(ret)
}
