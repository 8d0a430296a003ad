//! Salt's `mysql` execution module (MySQL and MariaDB): databases, users,
//! grants and queries, connecting with Salt's `connection_*` arguments or
//! the `mysql.*` config keys.
//!
//! The functions live on [`Mysql`] (`ops.rs`), shared with the
//! `mysql_user`, `mysql_database`, `mysql_grants` and `mysql_query`
//! states; the server is reached through its own command-line client
//! (`client.rs`; docs/mysql.md says why); Salt's grant comparison is in
//! `grants.rs`.

pub mod client;
pub mod grants;
pub mod ops;

use halite_state::{Map, Value};

pub use client::ConnArgs;
pub use ops::{Mysql, UserSpec};

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "mysql",
    functions: &[
        ExecFunction::new("version", |a, h| Ok(Value::from(session(a, h).version()))),
        ExecFunction::new("status", |a, h| Ok(Value::Object(session(a, h).status()))),
        ExecFunction::new("db_list", |a, h| Ok(Value::from(session(a, h).db_list()))),
        ExecFunction::new("db_exists", db_exists),
        ExecFunction::new("db_get", db_get),
        ExecFunction::new("db_tables", db_tables),
        ExecFunction::new("db_create", db_create),
        ExecFunction::new("alter_db", alter_db),
        ExecFunction::new("db_remove", db_remove),
        ExecFunction::new("user_list", |a, h| {
            Ok(Value::from(
                session(a, h)
                    .user_list()
                    .into_iter()
                    .map(Value::Object)
                    .collect::<Vec<_>>(),
            ))
        }),
        ExecFunction::new("user_exists", user_exists),
        ExecFunction::new("user_info", user_info),
        ExecFunction::new("user_create", user_create),
        ExecFunction::new("user_chpass", user_chpass),
        ExecFunction::new("user_remove", user_remove),
        ExecFunction::new("user_grants", user_grants),
        ExecFunction::new("grant_exists", |a, h| grant_fn("grant_exists", a, h)),
        ExecFunction::new("grant_add", |a, h| grant_fn("grant_add", a, h)),
        ExecFunction::new("grant_revoke", |a, h| grant_fn("grant_revoke", a, h)),
        ExecFunction::new("query", query),
        ExecFunction::new("plugin_status", plugin_status),
        ExecFunction::new("quote_identifier", quote_identifier),
        ExecFunction::new("tokenize_grant", tokenize_grant),
        ExecFunction::new("showvariables", |a, h| {
            Ok(hashes(session(a, h).rows_as_dicts("SHOW VARIABLES")))
        }),
        ExecFunction::new("showglobal", |a, h| {
            Ok(hashes(session(a, h).rows_as_dicts("SHOW GLOBAL VARIABLES")))
        }),
        ExecFunction::new("processlist", |a, h| {
            Ok(dicts(session(a, h).rows_as_dicts("SHOW FULL PROCESSLIST")))
        }),
        ExecFunction::new("plugins_list", |a, h| {
            Ok(dicts(session(a, h).plugins_list()))
        }),
        ExecFunction::new("verify_login", verify_login),
    ],
};

/// A session for a call: the `connection_*` keywords of `kwargs`, else the
/// `mysql.*` keys of the minion config and pillar (Salt's
/// `config.option`).
pub fn session_from(kwargs: &Map, opts: &Value, grains: &Value, pillar: &Value) -> Mysql {
    let lookup = |key: &str| {
        halite_render::config_call(
            "config.option",
            opts,
            grains,
            pillar,
            &[Value::from(key), Value::Null],
            &Map::new(),
        )
        .filter(|v| !v.is_null())
    };
    Mysql::new(ConnArgs::resolve(kwargs, &lookup))
}

/// A list of dicts.
fn dicts(rows: Vec<Map>) -> Value {
    Value::Array(rows.into_iter().map(Value::Object).collect())
}

/// `showvariables`/`showglobal`: the rows as dicts, `[[]]` when there are
/// none, as Salt answers.
fn hashes(rows: Vec<Map>) -> Value {
    if rows.is_empty() {
        return Value::Array(vec![Value::Array(vec![])]);
    }
    dicts(rows)
}

fn verify_login(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let user = args.require_str(0, "user", "verify_login")?;
    let password = args.get_str(1, "password");
    Ok(Value::from(
        session(args, host).verify_login(&user, password.as_deref()),
    ))
}

fn session(args: &Args, host: &Host) -> Mysql {
    session_from(&args.kwargs, &host.opts, &host.grains, &host.pillar)
}

/// An optional string argument (None/empty as not given where Salt
/// tests `is not None`, kept as given otherwise).
fn opt_str(args: &Args, i: usize, key: &str) -> Option<String> {
    args.get_str(i, key)
}

/// `host` (positional `i`), `localhost` by default as in Salt.
fn host_arg(args: &Args, i: usize) -> String {
    args.get_str(i, "host")
        .unwrap_or_else(|| "localhost".into())
}

fn db_exists(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "db_exists")?;
    Ok(Value::from(session(args, host).db_exists(&name)))
}

fn db_get(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "db_get")?;
    Ok(Value::Object(session(args, host).db_get(&name)))
}

fn db_tables(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "db_tables")?;
    Ok(session(args, host)
        .db_tables(&name)
        .map_or(Value::Bool(false), Value::from))
}

fn db_create(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "db_create")?;
    let cs = opt_str(args, 1, "character_set");
    let collate = opt_str(args, 2, "collate");
    Ok(Value::from(session(args, host).db_create(
        &name,
        cs.as_deref(),
        collate.as_deref(),
    )))
}

fn alter_db(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "alter_db")?;
    let cs = opt_str(args, 1, "character_set");
    let collate = opt_str(args, 2, "collate");
    Ok(Value::from(session(args, host).alter_db(
        &name,
        cs.as_deref(),
        collate.as_deref(),
    )))
}

fn db_remove(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "db_remove")?;
    Ok(Value::from(session(args, host).db_remove(&name)))
}

/// The user arguments in Salt's positional order: `user, host, password,
/// password_hash, <passwordless|allow_passwordless>, unix_socket,
/// password_column[, auth_plugin]`.
fn user_spec(args: &Args, fun: &str, passwordless_key: &str) -> Result<UserSpec, ExecError> {
    Ok(UserSpec {
        user: args.require_str(0, "user", fun)?,
        host: host_arg(args, 1),
        password: opt_str(args, 2, "password"),
        password_hash: opt_str(args, 3, "password_hash"),
        passwordless: args.get_bool(4, passwordless_key, false),
        unix_socket: args.get_bool(5, "unix_socket", false),
        password_column: opt_str(args, 6, "password_column"),
        auth_plugin: opt_str(args, 7, "auth_plugin"),
    })
}

fn user_exists(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let spec = user_spec(args, "user_exists", "passwordless")?;
    Ok(Value::from(session(args, host).user_exists(&spec)))
}

fn user_create(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let spec = user_spec(args, "user_create", "allow_passwordless")?;
    Ok(Value::from(session(args, host).user_create(&spec)))
}

fn user_chpass(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let spec = user_spec(args, "user_chpass", "allow_passwordless")?;
    Ok(Value::from(session(args, host).user_chpass(&spec)))
}

fn user_remove(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let user = args.require_str(0, "user", "user_remove")?;
    Ok(Value::from(
        session(args, host).user_remove(&user, &host_arg(args, 1)),
    ))
}

fn user_info(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let user = args.require_str(0, "user", "user_info")?;
    Ok(session(args, host)
        .user_info(&user, &host_arg(args, 1))
        .map_or(Value::Bool(false), Value::Object))
}

fn user_grants(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let user = args.require_str(0, "user", "user_grants")?;
    Ok(session(args, host)
        .user_grants(&user, &host_arg(args, 1))
        .map_or(Value::Bool(false), Value::from))
}

/// `grant_exists`, `grant_add`, `grant_revoke` (`fun`): `grant, database,
/// user, host='localhost', grant_option=False, escape=True`.
fn grant_fn(fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let grant = args.require_str(0, "grant", fun)?;
    let database = args.require_str(1, "database", fun)?;
    let user = args.require_str(2, "user", fun)?;
    let on = host_arg(args, 3);
    let grant_option = args.get_bool(4, "grant_option", false);
    let escape = args.get_bool(5, "escape", true);
    let m = session(args, host);
    let done = match fun {
        "grant_add" => m.grant_add(&grant, &database, &user, &on, grant_option, escape),
        "grant_revoke" => m.grant_revoke(&grant, &database, &user, &on, grant_option, escape),
        _ => m.grant_exists(&grant, &database, &user, &on, grant_option, escape),
    };
    Ok(Value::from(done))
}

fn query(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let database = args.require_str(0, "database", "query")?;
    let q = args.require_str(1, "query", "query")?;
    let m = session(args, host);
    Ok(match m.query(&database, &q) {
        Some(ret) => Value::Object(ret),
        None => Value::Bool(false),
    })
}

fn plugin_status(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "plugin_status")?;
    Ok(Value::from(session(args, host).plugin_status(&name)))
}

fn quote_identifier(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let identifier = args.require_str(0, "identifier", "quote_identifier")?;
    let for_grants = args.get_bool(1, "for_grants", false);
    // Salt doubles `%` here (its query arguments undo it).
    Ok(Value::from(
        grants::quote_identifier(&identifier, for_grants).replace('%', "%%"),
    ))
}

fn tokenize_grant(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let grant = args.require_str(0, "grant", "tokenize_grant")?;
    let t = grants::tokenize(&grant, None);
    let mut m = Map::new();
    m.insert("user".into(), Value::from(t.user));
    m.insert("host".into(), Value::from(t.host));
    m.insert("grant".into(), Value::from(t.grant));
    m.insert("database".into(), Value::from(t.database));
    Ok(Value::Object(m))
}

/// A session for a `mysql_*` state: the chunk's `connection_*` arguments
/// (Salt's `**connection_args`), else the `mysql.*` config keys.
pub fn session_for_state(call: &halite_state::StateCall<'_>) -> Mysql {
    let kwargs: Map = call
        .chunk
        .iter()
        .filter(|(k, _)| k.starts_with("connection_"))
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    session_from(
        &kwargs,
        call.env.opts(),
        call.env.grains(),
        call.env.pillar(),
    )
}
