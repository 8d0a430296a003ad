//! Salt's `postgres` execution module: databases, roles, schemas,
//! extensions, languages and privileges of a PostgreSQL server, through
//! the `psql` command line as Salt drives it ([`conn`]).
//!
//! Present only when `psql` is found on PATH (Salt's `__virtual__`), so
//! `'postgres.user_create' in salt` tests in formulas behave as in Salt.

pub mod conn;
pub mod privileges;
pub mod role;
pub mod state;

use halite_state::{Map, Value};

use crate::exec::{Args, ExecError, ExecFunction, ExecModule, ExecTable};
use crate::Host;

pub use conn::{Config, Conn, Psql};
use role::{RoleKind, RoleOptions};

/// The module as the registry sees it: its table when `psql` exists.
pub struct Postgres;

/// The module: [`TABLE`] behind Salt's `__virtual__`.
pub const MODULE: Postgres = Postgres;

impl ExecModule for Postgres {
    fn name(&self) -> &'static str {
        TABLE.name
    }
    fn functions(&self) -> Vec<&'static str> {
        if available() {
            TABLE.functions()
        } else {
            Vec::new()
        }
    }
    fn call(&self, fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
        TABLE.call(fun, args, host)
    }
}

/// Salt's `__virtual__`: whether `psql` is on PATH.
pub fn available() -> bool {
    crate::grains::hw::which("psql").is_some()
}

/// Every function of the module.
pub const TABLE: ExecTable = ExecTable {
    name: "postgres",
    functions: &[
        ExecFunction::new("version", version_fn),
        ExecFunction::new("psql_query", psql_query_fn),
        ExecFunction::new("db_list", db_list_fn),
        ExecFunction::new("db_exists", db_exists_fn),
        ExecFunction::new("db_create", db_create_fn),
        ExecFunction::new("db_alter", db_alter_fn),
        ExecFunction::new("db_remove", db_remove_fn),
        ExecFunction::new("user_list", user_list_fn),
        ExecFunction::new("role_get", role_get_fn),
        ExecFunction::new("user_exists", user_exists_fn),
        ExecFunction::new("user_create", |a, h| role_create_fn(RoleKind::User, a, h)),
        ExecFunction::new("user_update", |a, h| role_update_fn(RoleKind::User, a, h)),
        ExecFunction::new("user_remove", |a, h| role_remove_fn("username", a, h)),
        ExecFunction::new("group_create", |a, h| role_create_fn(RoleKind::Group, a, h)),
        ExecFunction::new("group_update", |a, h| role_update_fn(RoleKind::Group, a, h)),
        ExecFunction::new("group_remove", |a, h| role_remove_fn("groupname", a, h)),
        ExecFunction::new("owner_to", owner_to_fn),
        ExecFunction::new("schema_list", schema_list_fn),
        ExecFunction::new("schema_get", schema_get_fn),
        ExecFunction::new("schema_exists", schema_exists_fn),
        ExecFunction::new("schema_create", schema_create_fn),
        ExecFunction::new("schema_remove", schema_remove_fn),
        ExecFunction::new("available_extensions", available_extensions_fn),
        ExecFunction::new("installed_extensions", installed_extensions_fn),
        ExecFunction::new("get_available_extension", |a, h| {
            extension_fn("get_available_extension", a, h)
        }),
        ExecFunction::new("get_installed_extension", |a, h| {
            extension_fn("get_installed_extension", a, h)
        }),
        ExecFunction::new("is_available_extension", |a, h| {
            extension_fn("is_available_extension", a, h)
        }),
        ExecFunction::new("is_installed_extension", |a, h| {
            extension_fn("is_installed_extension", a, h)
        }),
        ExecFunction::new("create_metadata", create_metadata_fn),
        ExecFunction::new("create_extension", create_extension_fn),
        ExecFunction::new("drop_extension", drop_extension_fn),
        ExecFunction::new("language_list", language_list_fn),
        ExecFunction::new("language_exists", |a, h| {
            language_fn("language_exists", a, h)
        }),
        ExecFunction::new("language_create", |a, h| {
            language_fn("language_create", a, h)
        }),
        ExecFunction::new("language_remove", |a, h| {
            language_fn("language_remove", a, h)
        }),
        ExecFunction::new("privileges_list", privileges::privileges_list_fn),
        ExecFunction::new("has_privileges", privileges::has_privileges_fn),
        ExecFunction::new("privileges_grant", privileges::privileges_grant_fn),
        ExecFunction::new("privileges_revoke", privileges::privileges_revoke_fn),
    ],
};

/// The config the connection defaults come from, on `host`.
pub fn config(host: &Host) -> Config<'_> {
    Config {
        opts: &host.opts,
        grains: &host.grains,
        pillar: &host.pillar,
    }
}

/// A keyword argument given and not null, as Salt's `x is not None`.
pub fn opt_bool(args: &Args, key: &str) -> Option<bool> {
    args.kwargs
        .get(key)
        .filter(|v| !v.is_null())
        .map(crate::exec::py_truth)
}

/// A keyword argument as text.
pub fn opt_str(args: &Args, key: &str) -> Option<String> {
    args.kwargs.get(key).and_then(conn::text)
}

// ---- server -------------------------------------------------------------

/// Salt's `version`: the first line of the server's `server_version`.
pub fn version(p: &Psql<'_>) -> Result<Option<String>, ExecError> {
    let out = p.run(&[
        "-c",
        "SELECT setting FROM pg_catalog.pg_settings WHERE name = 'server_version'",
        "-t",
    ])?;
    Ok(out.stdout.lines().next().map(str::to_string))
}

/// The leading numbers of a version (`15.18 (Debian ...)` -> [15, 18]).
fn version_parts(v: &str) -> Vec<u64> {
    v.split(|c: char| !c.is_ascii_digit())
        .take_while(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect()
}

fn version_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let p = Psql::new(config(host), Conn::from_args(args, 0));
    Ok(version(&p)?.map(Value::from).unwrap_or(Value::Null))
}

fn psql_query_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let query = args.require_str(0, "query", "psql_query")?;
    let p = Psql::new(config(host), Conn::from_args(args, 1));
    let write = args.get_bool(7, "write", false);
    Ok(Value::Array(
        p.query(&query, write)?
            .into_iter()
            .map(Value::Object)
            .collect(),
    ))
}

// ---- databases ----------------------------------------------------------

/// Salt's `db_list`: database name -> owner, encoding, collation, ctype,
/// access privileges and tablespace.
pub fn db_list(p: &Psql<'_>) -> Result<Map, ExecError> {
    let rows = p.query(
        "SELECT datname as \"Name\", pga.rolname as \"Owner\", \
         pg_encoding_to_char(encoding) as \"Encoding\", \
         datcollate as \"Collate\", datctype as \"Ctype\", \
         datacl as \"Access privileges\", spcname as \"Tablespace\" \
         FROM pg_database pgd, pg_roles pga, pg_tablespace pgts \
         WHERE pga.oid = pgd.datdba AND pgts.oid = pgd.dattablespace",
        false,
    )?;
    Ok(rows
        .into_iter()
        .filter_map(|mut row| {
            let name = conn::text(&row.shift_remove("Name")?)?;
            Some((name, Value::Object(row)))
        })
        .collect())
}

fn db_list_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let p = Psql::new(config(host), Conn::from_args(args, 0));
    Ok(Value::Object(db_list(&p)?))
}

fn db_exists_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "db_exists")?;
    let p = Psql::new(config(host), Conn::from_args(args, 1));
    Ok(Value::Bool(db_list(&p)?.contains_key(&name)))
}

/// Salt's `_quote_ddl_value`: `value` in `quote`s, refusing a value that
/// holds the quote.
fn quote_ddl(value: &str, quote: char) -> Result<String, ExecError> {
    if value.contains(quote) {
        return Err(ExecError::Invocation(format!(
            "Unsupported character {quote} in value: {value}"
        )));
    }
    Ok(format!("{quote}{value}{quote}"))
}

/// The options of `CREATE DATABASE`.
#[derive(Debug, Clone, Default)]
pub struct DbOptions {
    /// `TABLESPACE`.
    pub tablespace: Option<String>,
    /// `ENCODING`.
    pub encoding: Option<String>,
    /// `LC_COLLATE`.
    pub lc_collate: Option<String>,
    /// `LC_CTYPE`.
    pub lc_ctype: Option<String>,
    /// `OWNER`.
    pub owner: Option<String>,
    /// `TEMPLATE`.
    pub template: Option<String>,
}

/// Salt's `db_create`: whether `CREATE DATABASE` succeeded.
pub fn db_create(p: &Psql<'_>, name: &str, o: &DbOptions) -> Result<bool, ExecError> {
    let mut query = format!("CREATE DATABASE \"{name}\"");
    let mut with: Vec<String> = Vec::new();
    let mut add = |key: &str, v: Option<String>| {
        if let Some(v) = v {
            with.extend([key.to_string(), "=".into(), v]);
        }
    };
    let q = |v: &Option<String>, c: char| v.as_deref().map(|v| quote_ddl(v, c)).transpose();
    add("TABLESPACE", q(&o.tablespace, '"')?);
    add("OWNER", q(&o.owner, '"')?);
    add("TEMPLATE", o.template.clone());
    add("ENCODING", q(&o.encoding, '\'')?);
    add("LC_COLLATE", q(&o.lc_collate, '\'')?);
    add("LC_CTYPE", q(&o.lc_ctype, '\'')?);
    if !with.is_empty() {
        with.insert(0, " WITH".into());
        query.push_str(&with.join(" "));
    }
    p.exec(&query)
}

fn db_create_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "db_create")?;
    let p = Psql::new(config(host), Conn::from_args(args, 1));
    let o = DbOptions {
        tablespace: opt_str(args, "tablespace"),
        encoding: opt_str(args, "encoding"),
        lc_collate: opt_str(args, "lc_collate"),
        lc_ctype: opt_str(args, "lc_ctype"),
        owner: opt_str(args, "owner"),
        template: opt_str(args, "template"),
    };
    Ok(Value::Bool(db_create(&p, &name, &o)?))
}

/// Salt's `db_alter`: a new owner (of everything in it with
/// `owner_recurse`) and/or tablespace; whether the last statement worked.
pub fn db_alter(
    p: &Psql<'_>,
    name: &str,
    tablespace: Option<&str>,
    owner: Option<&str>,
    owner_recurse: bool,
) -> Result<bool, ExecError> {
    if tablespace.is_none() && owner.is_none() {
        return Ok(true);
    }
    if let (Some(owner), true) = (owner, owner_recurse) {
        return owner_to(p, name, owner);
    }
    let mut ok = true;
    if let Some(owner) = owner {
        ok = p.exec(&format!("ALTER DATABASE \"{name}\" OWNER TO \"{owner}\""))?;
    }
    if let Some(ts) = tablespace {
        ok = p.exec(&format!(
            "ALTER DATABASE \"{name}\" SET TABLESPACE \"{ts}\""
        ))?;
    }
    Ok(ok)
}

fn db_alter_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "db_alter")?;
    let p = Psql::new(config(host), Conn::from_args(args, 1));
    Ok(Value::Bool(db_alter(
        &p,
        &name,
        opt_str(args, "tablespace").as_deref(),
        opt_str(args, "owner").as_deref(),
        args.get_bool(usize::MAX, "owner_recurse", false),
    )?))
}

/// Salt's `owner_to`: the database and every schema, table, view,
/// function and sequence in it given to `owner`, in one transaction.
pub fn owner_to(p: &Psql<'_>, dbname: &str, owner: &str) -> Result<bool, ExecError> {
    let inside = p.on_db(Some(dbname));
    let mut sql = vec![
        "begin;".to_string(),
        format!("alter database \"{dbname}\" owner to \"{owner}\";"),
    ];
    let queries = [
        ("schema", "select quote_ident(schema_name) as n from information_schema.schemata"),
        ("table", "select quote_ident(table_schema)||'.'||quote_ident(table_name) as n from information_schema.tables where table_schema not in ('pg_catalog', 'information_schema')"),
        ("function", "select p.oid::regprocedure::text as n from pg_catalog.pg_proc p join pg_catalog.pg_namespace ns on p.pronamespace=ns.oid where ns.nspname not in ('pg_catalog', 'information_schema') and p.prokind <> 'a'"),
        ("aggregate", "select p.oid::regprocedure::text as n from pg_catalog.pg_proc p join pg_catalog.pg_namespace ns on p.pronamespace=ns.oid where ns.nspname not in ('pg_catalog', 'information_schema') and p.prokind = 'a'"),
        ("sequence", "select quote_ident(sequence_schema)||'.'||quote_ident(sequence_name) as n from information_schema.sequences"),
    ];
    for (kind, query) in queries {
        for row in inside.query(query, false)? {
            if let Some(n) = row.get("n").and_then(conn::text) {
                sql.push(format!("alter {kind} {n} owner to {owner};"));
            }
        }
    }
    sql.push("commit;".into());
    inside.exec(&sql.join("\n"))
}

fn owner_to_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let dbname = args.require_str(0, "dbname", "owner_to")?;
    let owner = args.require_str(1, "ownername", "owner_to")?;
    let conn = Conn::from_positions(args, [2, 3, 4, conn::NONE, 5, 6]);
    Ok(Value::Bool(owner_to(
        &Psql::new(config(host), conn),
        &dbname,
        &owner,
    )?))
}

/// Salt's `db_remove`: connections refused and ended, then the database
/// dropped; a failing step is an error.
pub fn db_remove(p: &Psql<'_>, name: &str) -> Result<bool, ExecError> {
    for query in [
        format!("REVOKE CONNECT ON DATABASE \"{name}\" FROM public;"),
        format!(
            "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}' AND pid <> pg_backend_pid();"
        ),
        format!("DROP DATABASE \"{name}\";"),
    ] {
        let out = p.run(&["-c", &query])?;
        if out.retcode != 0 {
            return Err(ExecError::Execution(format!(
                "Failed: {query}: {}",
                out.stderr.trim()
            )));
        }
    }
    Ok(true)
}

fn db_remove_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "db_remove")?;
    let p = Psql::new(config(host), Conn::from_args(args, 1));
    Ok(Value::Bool(db_remove(&p, &name)?))
}

// ---- roles --------------------------------------------------------------

/// Salt's `user_list`: role name -> its flags, groups, expiry and
/// defaults (and password verifier with `return_password`); `None` when
/// the server does not answer.
pub fn user_list(p: &Psql<'_>, return_password: bool) -> Result<Option<Map>, ExecError> {
    let Some(ver) = version(p)? else {
        tracing::error!("Could not retrieve Postgres version. Is Postgresql server running?");
        return Ok(None);
    };
    let ver = version_parts(&ver);
    let replication = if ver >= vec![9, 1] {
        "pg_roles.rolreplication"
    } else {
        "NULL"
    };
    let catupdate = if ver >= vec![9, 5] {
        "NULL"
    } else {
        "pg_roles.rolcatupdate"
    };
    let x = |s: &'static str| if return_password { s } else { "" };
    let query = format!(
        "SELECT pg_roles.rolname as \"name\",pg_roles.rolsuper as \"superuser\", \
         pg_roles.rolinherit as \"inherits privileges\", pg_roles.rolcreaterole as \
         \"can create roles\", pg_roles.rolcreatedb as \"can create databases\", {catupdate} \
         as \"can update system catalogs\", pg_roles.rolcanlogin as \"can login\", {replication} \
         as \"replication\", pg_roles.rolconnlimit as \"connections\", (SELECT \
         array_agg(pg_roles2.rolname)    FROM pg_catalog.pg_auth_members    JOIN \
         pg_catalog.pg_roles pg_roles2 ON (pg_auth_members.roleid = pg_roles2.oid)    \
         WHERE pg_auth_members.member = pg_roles.oid) as \
         \"groups\",pg_roles.rolvaliduntil::timestamp(0) as \"expiry time\", \
         pg_roles.rolconfig  as \"defaults variables\" {}FROM pg_roles {}{}",
        x(", COALESCE(pg_shadow.passwd, pg_authid.rolpassword) as \"password\" "),
        x("LEFT JOIN pg_authid ON pg_roles.oid = pg_authid.oid "),
        x("LEFT JOIN pg_shadow ON pg_roles.oid = pg_shadow.usesysid"),
    );
    let mut out = Map::new();
    for row in p.query(&query, false)? {
        let s = |k: &str| row.get(k).and_then(conn::text).unwrap_or_default();
        let b = |k: &str| match s(k).as_str() {
            "t" => Value::Bool(true),
            "f" => Value::Bool(false),
            _ => Value::Null,
        };
        let mut r = Map::new();
        for key in [
            "superuser",
            "inherits privileges",
            "can create roles",
            "can create databases",
            "can update system catalogs",
            "can login",
            "replication",
            // Salt reads the limit as a boolean too: always None.
            "connections",
        ] {
            r.insert(key.into(), b(key));
        }
        let expiry = s("expiry time");
        let valid = chrono::NaiveDateTime::parse_from_str(&expiry, "%Y-%m-%d %H:%M:%S").is_ok();
        r.insert(
            "expiry time".into(),
            if valid {
                Value::from(expiry)
            } else {
                Value::Null
            },
        );
        r.insert(
            "defaults variables".into(),
            Value::from(s("defaults variables")),
        );
        if return_password {
            r.insert("password".into(), Value::from(s("password")));
        }
        r.insert("groups".into(), Value::from(conn::pg_array(&s("groups"))));
        out.insert(s("name"), Value::Object(r));
    }
    Ok(Some(out))
}

/// Salt's `role_get`: one role of [`user_list`], `None` when absent or
/// the server does not answer.
pub fn role_get(p: &Psql<'_>, name: &str, return_password: bool) -> Result<Option<Map>, ExecError> {
    Ok(user_list(p, return_password)?
        .and_then(|mut all| all.shift_remove(name))
        .and_then(|v| match v {
            Value::Object(m) => Some(m),
            _ => None,
        }))
}

fn user_list_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let p = Psql::new(config(host), Conn::from_args(args, 0));
    let pw = args.get_bool(6, "return_password", false);
    Ok(user_list(&p, pw)?
        .map(Value::Object)
        .unwrap_or(Value::Bool(false)))
}

fn role_get_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "role_get")?;
    let p = Psql::new(config(host), Conn::from_args(args, 1));
    let pw = args.get_bool(7, "return_password", false);
    Ok(role_get(&p, &name, pw)?
        .map(Value::Object)
        .unwrap_or(Value::Null))
}

fn user_exists_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "user_exists")?;
    let p = Psql::new(config(host), Conn::from_args(args, 1));
    Ok(Value::Bool(role_get(&p, &name, false)?.is_some()))
}

/// The role options of a `user_create`/`group_*` call's keywords.
pub fn role_options(args: &Args) -> RoleOptions {
    let raw = |k: &str| args.kwargs.get(k).filter(|v| !v.is_null()).cloned();
    RoleOptions {
        inherit: opt_bool(args, "inherit"),
        createdb: opt_bool(args, "createdb"),
        createroles: opt_bool(args, "createroles"),
        superuser: opt_bool(args, "superuser"),
        replication: opt_bool(args, "replication"),
        login: opt_bool(args, "login"),
        connlimit: raw("connlimit"),
        encrypted: raw("encrypted"),
        password: raw("rolepassword"),
        valid_until: opt_str(args, "valid_until"),
        groups: raw("groups"),
    }
}

/// Salt's `_role_create`: `false` when the role exists already or the
/// statement fails.
pub fn role_create(
    p: &Psql<'_>,
    name: &str,
    kind: RoleKind,
    o: &RoleOptions,
) -> Result<bool, ExecError> {
    if role_get(p, name, false)?.is_some() {
        tracing::info!("Role '{name}' already exists");
        return Ok(false);
    }
    let args = role::role_cmd_args(name, kind, o, None)?;
    p.exec(&format!("CREATE ROLE \"{name}\" WITH {args}"))
}

/// Salt's `_role_update`: `false` when the role is missing or the
/// statement fails.
pub fn role_update(p: &Psql<'_>, name: &str, o: &RoleOptions) -> Result<bool, ExecError> {
    let Some(current) = role_get(p, name, false)? else {
        tracing::info!("Role '{name}' could not be found");
        return Ok(false);
    };
    let superuser = current.get("superuser").and_then(Value::as_bool);
    let args = role::role_cmd_args(name, RoleKind::Role, o, Some(superuser.unwrap_or(false)))?;
    p.exec(&format!("ALTER ROLE \"{name}\" WITH {args}"))
}

/// Salt's `_role_remove`: whether the role is gone afterwards (`false`
/// when it did not exist).
pub fn role_remove(p: &Psql<'_>, name: &str) -> Result<bool, ExecError> {
    if role_get(p, name, false)?.is_none() {
        tracing::info!("User '{name}' does not exist");
        return Ok(false);
    }
    p.exec(&format!("DROP ROLE \"{name}\""))?;
    Ok(role_get(p, name, false)?.is_none())
}

fn role_name(kind: RoleKind, args: &Args) -> Result<String, ExecError> {
    let (key, fun) = match kind {
        RoleKind::Group => ("groupname", "group"),
        _ => ("username", "user"),
    };
    args.require_str(0, key, &format!("{fun}_create"))
}

fn role_create_fn(kind: RoleKind, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = role_name(kind, args)?;
    let p = Psql::new(config(host), Conn::from_args(args, 1));
    Ok(Value::Bool(role_create(
        &p,
        &name,
        kind,
        &role_options(args),
    )?))
}

fn role_update_fn(kind: RoleKind, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = role_name(kind, args)?;
    let p = Psql::new(config(host), Conn::from_args(args, 1));
    Ok(Value::Bool(role_update(&p, &name, &role_options(args))?))
}

fn role_remove_fn(key: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let fun = if key == "groupname" {
        "group_remove"
    } else {
        "user_remove"
    };
    let name = args.require_str(0, key, fun)?;
    let p = Psql::new(config(host), Conn::from_args(args, 1));
    Ok(Value::Bool(role_remove(&p, &name)?))
}

// ---- schemas ------------------------------------------------------------

/// Salt's `schema_list` of the database `p` is on: name -> owner, acl.
pub fn schema_list(p: &Psql<'_>) -> Result<Map, ExecError> {
    let rows = p.query(
        "SELECT pg_namespace.nspname as \"name\",pg_namespace.nspacl as \"acl\", \
         pg_roles.rolname as \"owner\" FROM pg_namespace \
         LEFT JOIN pg_roles ON pg_roles.oid = pg_namespace.nspowner ",
        false,
    )?;
    Ok(rows
        .into_iter()
        .filter_map(|row| {
            let name = row.get("name").and_then(conn::text)?;
            let mut r = Map::new();
            for key in ["owner", "acl"] {
                r.insert(key.into(), row.get(key).cloned().unwrap_or(Value::Null));
            }
            Some((name, Value::Object(r)))
        })
        .collect())
}

/// Salt's `schema_create`: `false` when it exists or the statement fails.
pub fn schema_create(p: &Psql<'_>, name: &str, owner: Option<&str>) -> Result<bool, ExecError> {
    if schema_list(p)?.contains_key(name) {
        tracing::info!("schema '{name}' already exists");
        return Ok(false);
    }
    let mut sql = format!("CREATE SCHEMA \"{name}\"");
    if let Some(owner) = owner {
        sql.push_str(&format!(" AUTHORIZATION \"{owner}\""));
    }
    p.exec(&sql)
}

/// Salt's `schema_remove`: whether the schema is gone afterwards.
pub fn schema_remove(p: &Psql<'_>, name: &str) -> Result<bool, ExecError> {
    if !schema_list(p)?.contains_key(name) {
        tracing::info!("Schema '{name}' does not exist");
        return Ok(false);
    }
    p.exec(&format!("DROP SCHEMA \"{name}\""))?;
    Ok(!schema_list(p)?.contains_key(name))
}

/// `dbname` and the connection of a schema function whose own
/// arguments before `user` are `own` many.
fn schema_call<'h>(
    fun: &str,
    args: &Args,
    host: &'h Host,
    own: usize,
) -> Result<(String, Psql<'h>), ExecError> {
    let dbname = args.require_str(0, "dbname", fun)?;
    let conn = Conn::from_db_args(args, own, &dbname);
    Ok((dbname, Psql::new(config(host), conn)))
}

fn schema_list_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let (_, p) = schema_call("schema_list", args, host, 1)?;
    Ok(Value::Object(schema_list(&p)?))
}

fn schema_get_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let (_, p) = schema_call("schema_get", args, host, 2)?;
    let name = args.require_str(1, "name", "schema_get")?;
    Ok(schema_list(&p)?.shift_remove(&name).unwrap_or(Value::Null))
}

fn schema_exists_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let (_, p) = schema_call("schema_exists", args, host, 2)?;
    let name = args.require_str(1, "name", "schema_exists")?;
    Ok(Value::Bool(schema_list(&p)?.contains_key(&name)))
}

fn schema_create_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let (_, p) = schema_call("schema_create", args, host, 3)?;
    let name = args.require_str(1, "name", "schema_create")?;
    let owner = args.get_str(2, "owner");
    Ok(Value::Bool(schema_create(&p, &name, owner.as_deref())?))
}

fn schema_remove_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let (_, p) = schema_call("schema_remove", args, host, 2)?;
    let name = args.require_str(1, "name", "schema_remove")?;
    Ok(Value::Bool(schema_remove(&p, &name)?))
}

// ---- extensions ---------------------------------------------------------

/// Salt's `_EXTENSION_*` lifecycle flags of [`create_metadata`].
pub const EXTENSION_NOT_INSTALLED: &str = "EXTENSION NOT INSTALLED";
/// The extension is installed.
pub const EXTENSION_INSTALLED: &str = "EXTENSION INSTALLED";
/// Installed at an older version than asked.
pub const EXTENSION_TO_UPGRADE: &str = "EXTENSION TO UPGRADE";
/// Installed, relocatable, in another schema than asked.
pub const EXTENSION_TO_MOVE: &str = "EXTENSION TO MOVE";

/// Salt's `available_extensions`: name -> `pg_available_extensions` row.
pub fn available_extensions(p: &Psql<'_>) -> Result<Map, ExecError> {
    Ok(p.query("select * from pg_available_extensions();", false)?
        .into_iter()
        .filter(|r| r.contains_key("default_version"))
        .filter_map(|r| Some((r.get("name").and_then(conn::text)?, Value::Object(r))))
        .collect())
}

/// Salt's `installed_extensions`: name -> `pg_extension` row and schema.
pub fn installed_extensions(p: &Psql<'_>) -> Result<Map, ExecError> {
    Ok(p.query(
        "select a.*, b.nspname as schema_name from pg_extension a,  pg_namespace b where a.extnamespace = b.oid;",
        false,
    )?
    .into_iter()
    .filter(|r| r.contains_key("extversion"))
    .filter_map(|r| Some((r.get("extname").and_then(conn::text)?, Value::Object(r))))
    .collect())
}

/// Salt's `LooseVersion(a) < LooseVersion(b)` for extension versions.
fn older(a: &str, b: &str) -> bool {
    let parts = |s: &str| -> Vec<(u64, String)> { regex_parts(s) };
    parts(a) < parts(b)
}

/// A version split as LooseVersion does: runs of digits (numbers) and
/// of letters.
fn regex_parts(s: &str) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let flush = |cur: &mut String, out: &mut Vec<(u64, String)>| {
        if !cur.is_empty() {
            match cur.parse::<u64>() {
                Ok(n) => out.push((n, String::new())),
                Err(_) => out.push((u64::MAX, cur.clone())),
            }
            cur.clear();
        }
    };
    for c in s.chars() {
        if c == '.' {
            flush(&mut cur, &mut out);
        } else if cur
            .chars()
            .next()
            .is_some_and(|d| d.is_ascii_digit() != c.is_ascii_digit())
        {
            flush(&mut cur, &mut out);
            cur.push(c);
        } else {
            cur.push(c);
        }
    }
    flush(&mut cur, &mut out);
    out
}

/// Salt's `create_metadata`: the lifecycle flags of extension `name`
/// against the wanted `schema` and `ext_version`.
pub fn create_metadata(
    p: &Psql<'_>,
    name: &str,
    ext_version: Option<&str>,
    schema: Option<&str>,
) -> Result<Vec<&'static str>, ExecError> {
    let installed = installed_extensions(p)?;
    let Some(Value::Object(ext)) = installed.get(name) else {
        return Ok(vec![EXTENSION_NOT_INSTALLED]);
    };
    let mut flags = vec![EXTENSION_INSTALLED];
    let field = |k: &str| ext.get(k).and_then(conn::text);
    if let Some(want) = ext_version {
        if older(&field("extversion").unwrap_or_else(|| want.into()), want) {
            flags.push(EXTENSION_TO_UPGRADE);
        }
    }
    if let Some(want) = schema {
        if field("extrelocatable").as_deref() == Some("t")
            && field("schema_name").as_deref().unwrap_or(want) != want
        {
            flags.push(EXTENSION_TO_MOVE);
        }
    }
    Ok(flags)
}

/// What `create_extension` is asked for.
#[derive(Debug, Clone, Default)]
pub struct ExtensionOptions {
    /// `IF NOT EXISTS` (default true).
    pub if_not_exists: Option<bool>,
    /// `SCHEMA`.
    pub schema: Option<String>,
    /// `VERSION`.
    pub ext_version: Option<String>,
    /// `FROM`.
    pub from_version: Option<String>,
}

/// Salt's `create_extension`: installs, moves or upgrades `name`; whether
/// it is then installed as asked.
pub fn create_extension(p: &Psql<'_>, name: &str, o: &ExtensionOptions) -> Result<bool, ExecError> {
    let meta = create_metadata(p, name, o.ext_version.as_deref(), o.schema.as_deref())?;
    let installed = !meta.contains(&EXTENSION_NOT_INSTALLED);
    let installable = available_extensions(p)?
        .keys()
        .any(|k| k.to_lowercase() == name.to_lowercase());
    if installable {
        let cmd = if !installed {
            let mut words = vec!["CREATE EXTENSION".to_string()];
            if o.if_not_exists.unwrap_or(true) {
                words.push("IF NOT EXISTS".into());
            }
            words.push(format!("\"{name}\""));
            let mut with = Vec::new();
            if let Some(s) = &o.schema {
                with.push(format!("SCHEMA \"{s}\""));
            }
            if let Some(v) = &o.ext_version {
                with.push(format!("VERSION {v}"));
            }
            if let Some(v) = &o.from_version {
                with.push(format!("FROM {v}"));
            }
            if !with.is_empty() {
                words.push("WITH".into());
                words.extend(with);
            }
            words.push(";".into());
            words.join(" ")
        } else {
            let mut words = Vec::new();
            if let (Some(s), true) = (&o.schema, meta.contains(&EXTENSION_TO_MOVE)) {
                words.push(format!("ALTER EXTENSION \"{name}\" SET SCHEMA \"{s}\";"));
            }
            if let (Some(v), true) = (&o.ext_version, meta.contains(&EXTENSION_TO_UPGRADE)) {
                words.push(format!("ALTER EXTENSION \"{name}\" UPDATE TO {v};"));
            }
            words.join(" ")
        };
        if !cmd.is_empty() {
            p.exec(&cmd)?;
        }
    }
    let meta = create_metadata(p, name, o.ext_version.as_deref(), o.schema.as_deref())?;
    let ok = meta.iter().all(|f| *f == EXTENSION_INSTALLED);
    if !ok {
        tracing::info!("Failed to create ext: {name}");
    }
    Ok(ok)
}

/// Salt's `drop_extension`: whether `name` is not installed afterwards.
pub fn drop_extension(
    p: &Psql<'_>,
    name: &str,
    if_exists: bool,
    restrict: bool,
    cascade: bool,
) -> Result<bool, ExecError> {
    let mut words = vec!["DROP EXTENSION"];
    if if_exists {
        words.push("IF EXISTS");
    }
    words.push(name);
    if cascade {
        words.push("CASCADE");
    }
    if restrict {
        words.push("RESTRICT");
    }
    words.push(";");
    if installed_extensions(p)?.contains_key(name) {
        p.exec(&words.join(" "))?;
    }
    Ok(!installed_extensions(p)?.contains_key(name))
}

fn available_extensions_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let p = Psql::new(config(host), Conn::from_args(args, 0));
    Ok(Value::Object(available_extensions(&p)?))
}

fn installed_extensions_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let p = Psql::new(config(host), Conn::from_args(args, 0));
    Ok(Value::Object(installed_extensions(&p)?))
}

fn extension_fn(fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", fun)?;
    let p = Psql::new(config(host), Conn::from_args(args, 1));
    Ok(match fun {
        "get_available_extension" => available_extensions(&p)?
            .shift_remove(&name)
            .unwrap_or(Value::Null),
        "get_installed_extension" => installed_extensions(&p)?
            .shift_remove(&name)
            .unwrap_or(Value::Null),
        "is_available_extension" => Value::Bool(
            available_extensions(&p)?
                .keys()
                .any(|k| k.to_lowercase() == name.to_lowercase()),
        ),
        _ => Value::Bool(installed_extensions(&p)?.contains_key(&name)),
    })
}

fn create_metadata_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "create_metadata")?;
    let p = Psql::new(config(host), Conn::from_args(args, 3));
    let flags = create_metadata(
        &p,
        &name,
        args.get_str(1, "ext_version").as_deref(),
        args.get_str(2, "schema").as_deref(),
    )?;
    Ok(Value::from(flags))
}

fn create_extension_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "create_extension")?;
    let p = Psql::new(config(host), Conn::from_args(args, 5));
    let o = ExtensionOptions {
        if_not_exists: args
            .get(1, "if_not_exists")
            .filter(|v| !v.is_null())
            .map(crate::exec::py_truth),
        schema: args.get_str(2, "schema"),
        ext_version: args.get_str(3, "ext_version"),
        from_version: args.get_str(4, "from_version"),
    };
    Ok(Value::Bool(create_extension(&p, &name, &o)?))
}

fn drop_extension_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "drop_extension")?;
    let p = Psql::new(config(host), Conn::from_args(args, 4));
    let flag = |i, k, d| {
        args.get(i, k)
            .filter(|v| !v.is_null())
            .map(crate::exec::py_truth)
            .unwrap_or(d)
    };
    Ok(Value::Bool(drop_extension(
        &p,
        &name,
        flag(1, "if_exists", false),
        flag(2, "restrict", false),
        flag(3, "cascade", true),
    )?))
}

// ---- languages ----------------------------------------------------------

/// Salt's `language_list` of the database `p` is on: name -> name.
pub fn language_list(p: &Psql<'_>) -> Result<Map, ExecError> {
    Ok(
        p.query("SELECT lanname AS \"Name\" FROM pg_language", false)?
            .into_iter()
            .filter_map(|r| r.get("Name").cloned())
            .filter_map(|n| Some((conn::text(&n)?, n)))
            .collect(),
    )
}

/// Salt's `language_create`: `false` when present or the statement fails.
pub fn language_create(p: &Psql<'_>, name: &str) -> Result<bool, ExecError> {
    if language_list(p)?.contains_key(name) {
        tracing::info!("Language {name} already exists");
        return Ok(false);
    }
    p.exec(&format!("CREATE LANGUAGE {name}"))
}

/// Salt's `language_remove`: `false` when absent or the statement fails.
pub fn language_remove(p: &Psql<'_>, name: &str) -> Result<bool, ExecError> {
    if !language_list(p)?.contains_key(name) {
        tracing::info!("Language {name} does not exist");
        return Ok(false);
    }
    p.exec(&format!("DROP LANGUAGE {name}"))
}

/// The language functions' connection: `maintenance_db` is their
/// database, then `user, host, port, password, runas` (from `first`).
fn language_conn(args: &Args, first: usize) -> Conn {
    Conn::from_positions(
        args,
        [first + 1, first + 2, first + 3, first, first + 4, first + 5],
    )
}

fn language_list_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    args.require_str(0, "maintenance_db", "language_list")?;
    let p = Psql::new(config(host), language_conn(args, 0));
    Ok(Value::Object(language_list(&p)?))
}

fn language_fn(fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", fun)?;
    args.require_str(1, "maintenance_db", fun)?;
    let p = Psql::new(config(host), language_conn(args, 1));
    Ok(Value::Bool(match fun {
        "language_exists" => language_list(&p)?.contains_key(&name),
        "language_create" => language_create(&p, &name)?,
        _ => language_remove(&p, &name)?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_like_looseversion() {
        assert!(older("1.0", "1.1"));
        assert!(!older("1.10", "1.9"));
        assert!(!older("1.1", "1.1"));
        assert_eq!(
            version_parts("15.18 (Debian 15.18-0+deb12u1)"),
            vec![15, 18]
        );
    }
}
