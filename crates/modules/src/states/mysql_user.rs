//! Salt's `mysql_user` state (from the `saltext-mysql` extension Salt 3008
//! users install): `present` (`host`, `password`, `password_hash`,
//! `allow_passwordless`, `unix_socket`) and `absent`, with Salt's comments
//! and changes.

use halite_state::{StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::mysql::{session_for_state, UserSpec};

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "mysql_user",
    functions: &[
        StateFunction::new("present", present),
        StateFunction::new("absent", absent),
    ],
};

/// `host`, `localhost` by default.
fn host_of(call: &StateCall<'_>) -> Result<String, StateError> {
    Ok(call.arg_str("host")?.unwrap_or_else(|| "localhost".into()))
}

/// `mysql_user.present`: creates the account, or sets its password when
/// it exists with another one.
fn present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let host = host_of(call)?;
    let password = call.arg_str("password")?;
    let password_hash = call.arg_str("password_hash")?;
    let allow_passwordless = call.arg_bool("allow_passwordless", false);
    let unix_socket = call.arg_bool("unix_socket", false);
    let password_column = call.arg_str("password_column")?;
    let auth_plugin = call
        .arg_str("auth_plugin")?
        .unwrap_or_else(|| "mysql_native_password".into());
    let m = session_for_state(call);
    let mut ret = StateResult::ok(&name, format!("User {name}@{host} is already present"));
    let nonempty = |s: &Option<String>| s.as_deref().is_some_and(|s| !s.is_empty());
    let passwordless = !nonempty(&password) && !nonempty(&password_hash);
    let base = UserSpec {
        password_column: password_column.clone(),
        ..UserSpec::new(&name, &host)
    };

    // Phase 1: is the account there with the wanted password already?
    if passwordless {
        if !allow_passwordless && !unix_socket {
            return Ok(StateResult::fail(
                &name,
                "Either password or password_hash must be specified, unless allow_passwordless is True",
            ));
        }
        let spec = UserSpec {
            passwordless: true,
            unix_socket,
            ..base.clone()
        };
        if m.user_exists(&spec) {
            if allow_passwordless {
                ret.comment.push_str(" with passwordless login");
            }
            return Ok(ret);
        }
        if let Some(err) = m.take_error() {
            return Ok(StateResult::fail(&name, err));
        }
    } else {
        let spec = UserSpec {
            password: password.clone(),
            password_hash: password_hash.clone(),
            unix_socket,
            ..base.clone()
        };
        if m.user_exists(&spec) {
            if auth_plugin == "mysql_native_password" {
                ret.comment.push_str(" with the desired password");
                if nonempty(&password_hash) && !nonempty(&password) {
                    ret.comment.push_str(" hash");
                }
            } else {
                ret.comment.push_str(". Unable to verify password.");
            }
            return Ok(ret);
        }
        if let Some(err) = m.take_error() {
            return Ok(StateResult::fail(&name, err));
        }
    }

    // Phase 2: there with another password: change it.
    let exists = UserSpec {
        unix_socket,
        ..UserSpec::new(&name, &host)
    };
    let change = UserSpec {
        password: password.clone(),
        password_hash: password_hash.clone(),
        passwordless: allow_passwordless,
        unix_socket,
        password_column: password_column.clone(),
        auth_plugin: Some(auth_plugin.clone()),
        ..UserSpec::new(&name, &host)
    };
    if m.user_exists(&exists) {
        if call.test {
            ret.result = None;
            ret.comment = format!("Password for user {name}@{host} is set to be ");
            if passwordless {
                ret.comment.push_str("cleared");
                if !allow_passwordless {
                    ret.comment.push_str(", but allow_passwordless != True");
                    ret.result = Some(false);
                }
            } else {
                ret.comment.push_str("changed");
            }
            return Ok(ret);
        }
        let how = if passwordless { "cleared" } else { "changed" };
        if m.user_chpass(&change) {
            ret.comment = format!("Password for user {name}@{host} has been {how}");
            ret.changes.insert(name.clone(), Value::from("Updated"));
        } else {
            let verb = if passwordless { "clear" } else { "change" };
            ret.comment = format!("Failed to {verb} password for user {name}@{host}");
            if let Some(err) = m.take_error() {
                ret.comment.push_str(&format!(" ({err})"));
            }
            if passwordless && !allow_passwordless {
                ret.comment.push_str(
                    ". Note: allow_passwordless must be True to permit passwordless login.",
                );
            }
            ret.result = Some(false);
        }
        return Ok(ret);
    }
    if let Some(err) = m.take_error() {
        return Ok(StateResult::fail(&name, err));
    }

    // Phase 3: not there: create it.
    if call.test {
        ret.result = None;
        ret.comment = format!("User {name}@{host} is set to be added");
        if allow_passwordless {
            ret.comment.push_str(" with passwordless login");
        }
        if unix_socket {
            ret.comment.push_str(" using unix_socket");
        }
        return Ok(ret);
    }
    if m.user_create(&change) {
        ret.comment = format!("The user {name}@{host} has been added");
        if allow_passwordless {
            ret.comment.push_str(" with passwordless login");
        }
        if unix_socket {
            ret.comment.push_str(" using unix_socket");
        }
        ret.changes.insert(name.clone(), Value::from("Present"));
    } else {
        ret.comment = format!("Failed to create user {name}@{host}");
        if let Some(err) = m.take_error() {
            ret.comment.push_str(&format!(" ({err})"));
        }
        ret.result = Some(false);
    }
    Ok(ret)
}

/// `mysql_user.absent`: drops the account.
fn absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let host = host_of(call)?;
    let m = session_for_state(call);
    let mut ret = StateResult::ok(&name, "");
    if m.user_exists(&UserSpec::new(&name, &host)) {
        if call.test {
            ret.result = None;
            ret.comment = format!("User {name}@{host} is set to be removed");
            return Ok(ret);
        }
        if m.user_remove(&name, &host) {
            ret.comment = format!("User {name}@{host} has been removed");
            ret.changes.insert(name.clone(), Value::from("Absent"));
            return Ok(ret);
        }
        if let Some(err) = m.take_error() {
            return Ok(StateResult::fail(&name, err));
        }
    } else if let Some(err) = m.take_error() {
        return Ok(StateResult::fail(&name, err));
    }
    ret.comment = format!("User {name}@{host} is not present, so it cannot be removed");
    Ok(ret)
}
