//! Privileges on tables, sequences, schemas, functions, tablespaces,
//! languages and databases, and group membership, as Salt reads them
//! from the ACLs (`privileges_list`), compares them (`has_privileges`)
//! and changes them (`privileges_grant`/`privileges_revoke`).

use halite_state::{Map, Value};

use super::conn::{self, Conn, Psql};
use crate::exec::{Args, ExecError};
use crate::Host;

/// ACL letter -> privilege (Salt's `_PRIVILEGES_MAP`).
fn privilege(letter: char) -> Option<&'static str> {
    Some(match letter {
        'a' => "INSERT",
        'C' => "CREATE",
        'D' => "TRUNCATE",
        'c' => "CONNECT",
        't' => "TRIGGER",
        'r' => "SELECT",
        'U' => "USAGE",
        'T' => "TEMPORARY",
        'w' => "UPDATE",
        'X' => "EXECUTE",
        'x' => "REFERENCES",
        'd' => "DELETE",
        'm' => "MAINTAIN",
        '*' => "GRANT",
        _ => return None,
    })
}

/// The ACL letters an object type has (Salt's `_PRIVILEGE_TYPE_MAP`).
fn type_letters(object_type: &str) -> Option<&'static str> {
    Some(match object_type {
        "table" => "arwdDxtm",
        "tablespace" => "C",
        "language" => "U",
        "sequence" => "rwU",
        "schema" => "UC",
        "database" => "CTc",
        "function" => "X",
        _ => return None,
    })
}

/// Object types Salt knows (`_PRIVILEGES_OBJECTS`).
const OBJECTS: &[&str] = &[
    "schema",
    "tablespace",
    "language",
    "sequence",
    "table",
    "group",
    "database",
    "function",
];

fn invalid_type(object_type: &str) -> ExecError {
    ExecError::Invocation(format!(
        "Invalid object_type: {object_type} provided: use one of {}",
        OBJECTS.join(", ")
    ))
}

/// Salt's `_mod_priv_opts` and `_validate_privileges`: the lower-cased
/// type and the upper-cased privilege names, refused when the type does
/// not have them.
fn privs_of(
    object_type: &str,
    privileges: Option<&str>,
) -> Result<(String, Vec<String>), ExecError> {
    let object_type = object_type.to_lowercase();
    let text = privileges.unwrap_or("");
    let split = regex::Regex::new(r"\s?,\s?")
        .map_err(|e| ExecError::Execution(format!("privilege pattern: {e}")))?;
    let privs: Vec<String> = split
        .split(&text.to_uppercase())
        .map(str::to_string)
        .collect();
    if object_type == "group" {
        if !text.is_empty() {
            return Err(ExecError::Invocation(
                "The privileges option should not be set for object_type group".into(),
            ));
        }
        return Ok((object_type, privs));
    }
    let letters = type_letters(&object_type).ok_or_else(|| invalid_type(&object_type))?;
    let mut allowed: Vec<&str> = letters.chars().filter_map(privilege).collect();
    allowed.push("ALL");
    if !privs.iter().all(|p| allowed.contains(&p.as_str())) {
        return Err(ExecError::Invocation(format!(
            "Invalid privilege(s): {text} provided for object {object_type}"
        )));
    }
    Ok((object_type, privs))
}

/// Salt's `_make_privileges_list_query`.
fn list_query(name: &str, object_type: &str, prepend: &str) -> Option<String> {
    Some(match object_type {
        "table" => format!("SELECT relacl AS name FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE nspname = '{prepend}' AND relname = '{name}' AND relkind in ('r', 'v') ORDER BY relname"),
        "sequence" => format!("SELECT relacl AS name FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE nspname = '{prepend}' AND relname = '{name}' AND relkind = 'S' ORDER BY relname"),
        "schema" => format!("SELECT nspacl AS name FROM pg_catalog.pg_namespace WHERE nspname = '{name}' ORDER BY nspname"),
        "function" => format!("SELECT proacl AS name FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace WHERE nspname = '{prepend}' AND p.oid::regprocedure::text = '{name}' ORDER BY proname, proargtypes"),
        "tablespace" => format!("SELECT spcacl AS name FROM pg_catalog.pg_tablespace WHERE spcname = '{name}' ORDER BY spcname"),
        "language" => format!("SELECT lanacl AS name FROM pg_catalog.pg_language WHERE lanname = '{name}' ORDER BY lanname"),
        "database" => format!("SELECT datacl AS name FROM pg_catalog.pg_database WHERE datname = '{name}' ORDER BY datname"),
        "group" => format!("SELECT rolname, admin_option FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles r ON m.member=r.oid WHERE m.roleid IN (SELECT oid FROM pg_catalog.pg_roles WHERE rolname='{name}') ORDER BY rolname"),
        _ => return None,
    })
}

/// Salt's `_get_object_owner`.
fn owner_query(name: &str, object_type: &str, prepend: &str) -> Option<String> {
    Some(match object_type {
        "table" => format!("SELECT tableowner AS name FROM pg_tables WHERE schemaname = '{prepend}' AND tablename = '{name}'"),
        "sequence" => format!("SELECT rolname AS name FROM pg_catalog.pg_class c JOIN pg_roles r ON c.relowner = r.oid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE relkind='S' AND nspname='{prepend}' AND relname = '{name}'"),
        "schema" => format!("SELECT rolname AS name FROM pg_namespace n JOIN pg_roles r ON n.nspowner = r.oid WHERE nspname = '{name}'"),
        "function" => format!("SELECT rolname AS name FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace JOIN pg_catalog.pg_roles r ON p.proowner = r.oid WHERE nspname = '{prepend}' AND p.oid::regprocedure::text = '{name}' ORDER BY proname, proargtypes"),
        "tablespace" => format!("SELECT rolname AS name FROM pg_tablespace t JOIN pg_roles r ON t.spcowner = r.oid WHERE spcname = '{name}'"),
        "language" => format!("SELECT rolname AS name FROM pg_language l JOIN pg_roles r ON l.lanowner = r.oid WHERE lanname = '{name}'"),
        "database" => format!("SELECT rolname AS name FROM pg_database d JOIN pg_roles r ON d.datdba = r.oid WHERE datname = '{name}'"),
        _ => return None,
    })
}

/// Salt's `_process_priv_part`: `arw*` -> {INSERT: false, SELECT: false,
/// UPDATE: true} (a `*` marks the grant option of the one before).
fn priv_part(perms: &str) -> Map {
    let mut out = Map::new();
    let mut previous: Option<&str> = None;
    for c in perms.chars() {
        if c == '*' && previous.is_some() {
            if let Some(p) = previous {
                out.insert(p.into(), Value::Bool(true));
            }
            continue;
        }
        if let Some(p) = privilege(c) {
            out.insert(p.into(), Value::Bool(false));
            previous = Some(p);
        }
    }
    out
}

/// Salt's `privileges_list`: role -> privilege -> grant option (for
/// groups: member -> admin option).
pub fn privileges_list(
    p: &Psql<'_>,
    name: &str,
    object_type: &str,
    prepend: &str,
) -> Result<Map, ExecError> {
    let object_type = object_type.to_lowercase();
    let query =
        list_query(name, &object_type, prepend).ok_or_else(|| invalid_type(&object_type))?;
    let mut out = Map::new();
    for row in p.query(&query, false)? {
        let s = |k: &str| row.get(k).and_then(conn::text).unwrap_or_default();
        if object_type == "group" {
            out.insert(s("rolname"), Value::Bool(s("admin_option") == "t"));
            continue;
        }
        let acl = s("name");
        for part in acl.trim_matches(|c| c == '{' || c == '}').split(',') {
            if part.is_empty() {
                continue;
            }
            let perms_part = part.split_once('/').map_or(part, |(a, _)| a);
            let Some((role, perms)) = perms_part.split_once('=') else {
                tracing::debug!("Skipping malformed ACL entry: {part}");
                continue;
            };
            let role = if role.is_empty() { "public" } else { role };
            out.insert(role.to_string(), Value::Object(priv_part(perms)));
        }
    }
    Ok(out)
}

/// What a privileges call is about.
#[derive(Debug, Clone)]
pub struct PrivRequest {
    /// The role the privileges are for.
    pub name: String,
    /// The table, schema, group... they are on.
    pub object_name: String,
    /// Its type (`table`, `group`...).
    pub object_type: String,
    /// Comma-separated privileges (`SELECT,INSERT`, `ALL`).
    pub privileges: Option<String>,
    /// `WITH GRANT OPTION` / `WITH ADMIN OPTION`.
    pub grant_option: bool,
    /// The schema of tables, sequences and functions.
    pub prepend: String,
}

/// Salt's `has_privileges`: whether the role holds them (an owner holds all).
pub fn has_privileges(p: &Psql<'_>, r: &PrivRequest) -> Result<bool, ExecError> {
    let (object_type, privs) = privs_of(&r.object_type, r.privileges.as_deref())?;
    if object_type != "group" {
        if let Some(q) = owner_query(&r.object_name, &object_type, &r.prepend) {
            let owner = p
                .query(&q, false)?
                .first()
                .and_then(|row| row.get("name").and_then(conn::text));
            if owner.as_deref() == Some(r.name.as_str()) {
                return Ok(true);
            }
        }
    }
    let all = privileges_list(p, &r.object_name, &object_type, &r.prepend)?;
    let Some(held) = all.get(&r.name) else {
        return Ok(false);
    };
    if object_type == "group" {
        return Ok(!r.grant_option || held.as_bool() == Some(true));
    }
    let Some(held) = held.as_object() else {
        return Ok(false);
    };
    let letters = type_letters(&object_type).unwrap_or("");
    let full: Vec<&str> = letters.chars().filter_map(privilege).collect();
    if r.grant_option {
        let want: Map = full
            .iter()
            .map(|p| (p.to_string(), Value::Bool(true)))
            .collect();
        return Ok(&want == held);
    }
    if privs.iter().any(|p| p == "ALL") {
        let mut want: Vec<&str> = full.clone();
        let mut have: Vec<&str> = held.keys().map(String::as_str).collect();
        want.sort_unstable();
        have.sort_unstable();
        return Ok(want == have);
    }
    Ok(privs.iter().all(|p| held.contains_key(p)))
}

/// The `ON ...` part of a GRANT/REVOKE.
fn on_part(r: &PrivRequest, object_type: &str) -> String {
    if ["table", "sequence", "function"].contains(&object_type) {
        format!("{}.\"{}\"", r.prepend, r.object_name)
    } else {
        format!("\"{}\"", r.object_name)
    }
}

/// Salt's `privileges_grant`: `false` when already held or it fails.
pub fn privileges_grant(p: &Psql<'_>, r: &PrivRequest) -> Result<bool, ExecError> {
    let (object_type, privs) = privs_of(&r.object_type, r.privileges.as_deref())?;
    let plain = PrivRequest {
        grant_option: false,
        ..r.clone()
    };
    if has_privileges(p, &plain)? {
        tracing::info!(
            "The object: {} of type: {object_type} already has privileges set",
            r.object_name
        );
        return Ok(false);
    }
    let grants = privs.join(",");
    let all_in_schema = ["table", "sequence", "function"].contains(&object_type.as_str())
        && r.object_name.to_uppercase() == "ALL";
    let mut query = if object_type == "group" {
        format!("GRANT {} TO \"{}\"", r.object_name, r.name)
    } else if all_in_schema {
        format!(
            "GRANT {grants} ON ALL {}S IN SCHEMA {} TO \"{}\"",
            object_type.to_uppercase(),
            r.prepend,
            r.name
        )
    } else {
        format!(
            "GRANT {grants} ON {} {} TO \"{}\"",
            object_type.to_uppercase(),
            on_part(r, &object_type),
            r.name
        )
    };
    if r.grant_option {
        query.push_str(if object_type == "group" {
            " WITH ADMIN OPTION"
        } else {
            " WITH GRANT OPTION"
        });
    }
    p.exec(&query)
}

/// Salt's `privileges_revoke`: `false` when not held or it fails.
pub fn privileges_revoke(p: &Psql<'_>, r: &PrivRequest) -> Result<bool, ExecError> {
    let (object_type, privs) = privs_of(&r.object_type, r.privileges.as_deref())?;
    let plain = PrivRequest {
        grant_option: false,
        ..r.clone()
    };
    if !has_privileges(p, &plain)? {
        tracing::info!(
            "The object: {} of type: {object_type} does not have privileges set",
            r.object_name
        );
        return Ok(false);
    }
    let query = if object_type == "group" {
        format!("REVOKE {} FROM {}", r.object_name, r.name)
    } else {
        format!(
            "REVOKE {} ON {} {} FROM {}",
            privs.join(","),
            object_type.to_uppercase(),
            on_part(r, &object_type),
            r.name
        )
    };
    p.exec(&query)
}

/// `name, object_name, object_type, privileges, [grant_option,]
/// prepend, maintenance_db, user, host, port, password, runas`.
fn request(fun: &str, args: &Args, grant: bool) -> Result<(PrivRequest, Conn), ExecError> {
    let name = args.require_str(0, "name", fun)?;
    let object_name = args.require_str(1, "object_name", fun)?;
    let object_type = args.require_str(2, "object_type", fun)?;
    let privileges = args.get_str(3, "privileges");
    let (grant_option, next) = if grant {
        (args.get_bool(4, "grant_option", false), 5)
    } else {
        (false, 4)
    };
    let prepend = args
        .get_str(next, "prepend")
        .unwrap_or_else(|| "public".into());
    let conn = Conn::from_positions(
        args,
        [next + 2, next + 3, next + 4, next + 1, next + 5, next + 6],
    );
    Ok((
        PrivRequest {
            name,
            object_name,
            object_type,
            privileges,
            grant_option,
            prepend,
        },
        conn,
    ))
}

/// `postgres.privileges_list name object_type [prepend] ...`.
pub fn privileges_list_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "privileges_list")?;
    let object_type = args.require_str(1, "object_type", "privileges_list")?;
    let prepend = args
        .get_str(2, "prepend")
        .unwrap_or_else(|| "public".into());
    let conn = Conn::from_positions(args, [4, 5, 6, 3, 7, 8]);
    let p = Psql::new(super::config(host), conn);
    Ok(Value::Object(privileges_list(
        &p,
        &name,
        &object_type,
        &prepend,
    )?))
}

/// `postgres.has_privileges name object_name object_type ...`.
pub fn has_privileges_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let (r, conn) = request("has_privileges", args, true)?;
    Ok(Value::Bool(has_privileges(
        &Psql::new(super::config(host), conn),
        &r,
    )?))
}

/// `postgres.privileges_grant name object_name object_type ...`.
pub fn privileges_grant_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let (r, conn) = request("privileges_grant", args, true)?;
    Ok(Value::Bool(privileges_grant(
        &Psql::new(super::config(host), conn),
        &r,
    )?))
}

/// `postgres.privileges_revoke name object_name object_type ...`.
pub fn privileges_revoke_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let (r, conn) = request("privileges_revoke", args, false)?;
    Ok(Value::Bool(privileges_revoke(
        &Psql::new(super::config(host), conn),
        &r,
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acl_parts_mark_grant_options() {
        let m = priv_part("r*w");
        assert_eq!(m["SELECT"], true);
        assert_eq!(m["UPDATE"], false);
    }

    #[test]
    fn privileges_are_checked_against_the_type() {
        assert!(privs_of("table", Some("select, insert")).is_ok());
        let e = privs_of("schema", Some("SELECT")).unwrap_err().to_string();
        assert_eq!(e, "Invalid privilege(s): SELECT provided for object schema");
        assert!(privs_of("group", Some("x")).is_err());
        assert!(privs_of("view", Some("x")).is_err());
    }
}
