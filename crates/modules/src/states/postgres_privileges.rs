//! Salt's `postgres_privileges` state: privileges of a role on an object
//! (or membership of a group) granted or revoked.

use halite_state::{StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::postgres::privileges::{self as privs, PrivRequest};
use crate::exec::postgres::state::{changed, failed, opt_str, psql};

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "postgres_privileges",
    functions: &[
        StateFunction::new("present", |c| apply(true, c)),
        StateFunction::new("absent", |c| apply(false, c)),
    ],
};

/// The request of the call: `privileges` is a list joined with commas.
fn request(call: &StateCall<'_>, grant: bool) -> Result<PrivRequest, StateError> {
    let privileges: Vec<String> = call
        .arg_list("privileges")
        .iter()
        .filter_map(crate::exec::postgres::conn::text)
        .collect();
    Ok(PrivRequest {
        name: call.name().to_string(),
        object_name: call.require_str("object_name")?,
        object_type: call.require_str("object_type")?,
        privileges: (!privileges.is_empty()).then(|| privileges.join(",")),
        grant_option: grant && call.arg("grant_option").is_some_and(crate::exec::py_truth),
        prepend: opt_str(call, "prepend").unwrap_or_else(|| "public".into()),
    })
}

/// Salt's `postgres_privileges.present` (`grant`) and `.absent`.
fn apply(grant: bool, call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let r = request(call, grant)?;
    let name = r.name.clone();
    let p = psql(call, None)?;
    let mut ret = StateResult::new(&name, Some(true));
    ret.comment = if grant {
        "The requested privilege(s) are already set".into()
    } else {
        "The requested privilege(s) are not set so cannot be revoked".into()
    };
    let has = match privs::has_privileges(&p, &r) {
        Ok(h) => h,
        Err(e) => return Ok(failed(&name, e)),
    };
    if has == grant {
        return Ok(ret);
    }
    // Salt names the group for group membership, else the privileges
    // (Python's None when none were given).
    let what = if r.object_type == "group" {
        r.object_name.clone()
    } else {
        r.privileges.clone().unwrap_or_else(|| "None".into())
    };
    let (set, done, fail, to) = if grant {
        ("granted to", "granted to", "Failed to grant", "to")
    } else {
        ("revoked from", "revoked from", "Failed to revoke", "from")
    };
    if call.test {
        ret.result = None;
        ret.comment = format!("The privilege(s): {what} are set to be {set} {name}");
        return Ok(ret);
    }
    let ok = if grant {
        privs::privileges_grant(&p, &r)
    } else {
        privs::privileges_revoke(&p, &r)
    };
    match ok {
        Ok(true) => {
            ret.comment = format!("The privilege(s): {what} have been {done} {name}");
            changed(
                &mut ret,
                &name,
                Value::from(if grant { "Present" } else { "Absent" }),
            );
        }
        Ok(false) => {
            ret.result = Some(false);
            ret.comment = format!("{fail} privilege(s): {what} {to} {name}");
        }
        Err(e) => return Ok(failed(&name, e)),
    }
    Ok(ret)
}
