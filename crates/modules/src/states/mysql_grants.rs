//! Salt's `mysql_grants` state (from the `saltext-mysql` extension Salt
//! 3008 users install): `present` (`grant`, `database`, `user`, `host`,
//! `grant_option`, `escape`, `revoke_first`) and `absent`, with Salt's
//! comments and changes.

use halite_state::{StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::mysql::grants::{quote_identifier, split_database, tokenize};
use crate::exec::mysql::{session_for_state, Mysql};

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "mysql_grants",
    functions: &[
        StateFunction::new("present", present),
        StateFunction::new("absent", absent),
    ],
};

/// The arguments both functions share.
struct Grant {
    grant: String,
    database: String,
    user: String,
    host: String,
    grant_option: bool,
    escape: bool,
}

/// Reads them; Salt's defaults are `None` for `grant`, `database` and
/// `user` (shown as `None` in its comments), `localhost`, False, True.
fn grant_args(call: &StateCall<'_>) -> Result<Grant, StateError> {
    let none = || "None".to_string();
    Ok(Grant {
        grant: call.arg_str("grant")?.unwrap_or_else(none),
        database: call.arg_str("database")?.unwrap_or_else(none),
        user: call.arg_str("user")?.unwrap_or_else(none),
        host: call.arg_str("host")?.unwrap_or_else(|| "localhost".into()),
        grant_option: call.arg_bool("grant_option", false),
        escape: call.arg_bool("escape", true),
    })
}

fn exists(m: &Mysql, g: &Grant) -> bool {
    m.grant_exists(
        &g.grant,
        &g.database,
        &g.user,
        &g.host,
        g.grant_option,
        g.escape,
    )
}

/// Salt's `revoke_first`: revokes every privilege the user holds on the
/// same database before granting, so a grant can be narrowed.
fn revoke_first(m: &Mysql, g: &Grant) {
    let (db, table) = split_database(&g.database);
    let my_db = quote_identifier(db, table == "*").replace('%', "%%");
    for line in m.user_grants(&g.user, &g.host).unwrap_or_default() {
        let tokens = tokenize(&line, None);
        if tokens.database == my_db {
            let privileges = tokens.grant.join(",");
            m.grant_revoke(
                privileges.trim_end_matches(','),
                &g.database,
                &g.user,
                &g.host,
                g.grant_option,
                g.escape,
            );
        }
    }
}

/// `mysql_grants.present`: grants the privileges unless held already.
fn present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let g = grant_args(call)?;
    let m = session_for_state(call);
    let mut ret = StateResult::ok(
        &name,
        format!(
            "Grant {} on {} to {}@{} is already present",
            g.grant, g.database, g.user, g.host
        ),
    );
    if exists(&m, &g) {
        return Ok(ret);
    }
    if let Some(err) = m.take_error() {
        return Ok(StateResult::fail(&name, err));
    }
    if call.arg_bool("revoke_first", false) && !call.test {
        revoke_first(&m, &g);
    }
    if call.test {
        ret.result = None;
        ret.comment = format!("MySQL grant {name} is set to be created");
        return Ok(ret);
    }
    if m.grant_add(
        &g.grant,
        &g.database,
        &g.user,
        &g.host,
        g.grant_option,
        g.escape,
    ) {
        ret.comment = format!(
            "Grant {} on {} to {}@{} has been added",
            g.grant, g.database, g.user, g.host
        );
        ret.changes.insert(name.clone(), Value::from("Present"));
    } else {
        ret.comment = format!(
            "Failed to execute: \"GRANT {} ON {} TO {}@{}\"",
            g.grant, g.database, g.user, g.host
        );
        if let Some(err) = m.take_error() {
            ret.comment.push_str(&format!(" ({err})"));
        }
        ret.result = Some(false);
    }
    Ok(ret)
}

/// `mysql_grants.absent`: revokes the privileges when held.
fn absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let g = grant_args(call)?;
    let m = session_for_state(call);
    let mut ret = StateResult::ok(&name, "");
    if exists(&m, &g) {
        if call.test {
            ret.result = None;
            ret.comment = format!("MySQL grant {name} is set to be revoked");
            return Ok(ret);
        }
        if m.grant_revoke(
            &g.grant,
            &g.database,
            &g.user,
            &g.host,
            g.grant_option,
            true,
        ) {
            ret.comment = format!(
                "Grant {} on {} for {}@{} has been revoked",
                g.grant, g.database, g.user, g.host
            );
            ret.changes.insert(name.clone(), Value::from("Absent"));
            return Ok(ret);
        }
        if let Some(err) = m.take_error() {
            return Ok(StateResult::fail(
                &name,
                format!(
                    "Unable to revoke grant {} on {} for {}@{} ({err})",
                    g.grant, g.database, g.user, g.host
                ),
            ));
        }
    } else if let Some(err) = m.take_error() {
        return Ok(StateResult::fail(
            &name,
            format!(
                "Unable to determine if grant {} on {} for {}@{} exists ({err})",
                g.grant, g.database, g.user, g.host
            ),
        ));
    }
    ret.comment = format!(
        "Grant {} on {} to {}@{} is not present, so it cannot be revoked",
        g.grant, g.database, g.user, g.host
    );
    Ok(ret)
}
