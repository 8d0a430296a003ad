//! What the `postgres_*` states share: their connection arguments
//! (`user` is the OS user there, `db_user`/`db_host`/`db_port`/
//! `db_password` the server's) and Salt's `__virtual__` of the states.

use halite_state::{StateCall, StateError, StateResult, Value};

use super::conn::{text, Config, Conn, Psql};
use crate::exec::ExecError;

/// The connection of a state call: `user` -> runas, `db_*` -> server,
/// `maintenance_db` (or `db` for the database the state is about).
pub fn conn(call: &StateCall<'_>, db: Option<String>) -> Conn {
    let get = |k: &str| call.arg(k).and_then(text);
    Conn {
        user: get("db_user"),
        host: get("db_host"),
        port: get("db_port"),
        password: get("db_password"),
        runas: get("user"),
        maintenance_db: db.or_else(|| get("maintenance_db")),
    }
}

/// A `psql` for the state call, refused as Salt refuses the state module
/// when the postgres execution module is absent.
pub fn psql<'a>(call: &StateCall<'a>, db: Option<String>) -> Result<Psql<'a>, StateError> {
    if !super::available() {
        return Err(StateError::Other(
            "Unable to load postgres module.  Make sure `postgres.bins_dir` is set.".into(),
        ));
    }
    let env = call.env;
    let cfg = Config {
        opts: env.opts(),
        grains: env.grains(),
        pillar: env.pillar(),
    };
    Ok(Psql::new(cfg, conn(call, db)))
}

/// An argument given and not null, as a Python bool (`x is not None`).
pub fn opt_bool(call: &StateCall<'_>, key: &str) -> Option<bool> {
    call.arg(key).map(crate::exec::py_truth)
}

/// An argument as text.
pub fn opt_str(call: &StateCall<'_>, key: &str) -> Option<String> {
    call.arg(key).and_then(text)
}

/// A failed state for an error of the execution module (Salt would show
/// the exception's text).
pub fn failed(name: &str, e: ExecError) -> StateResult {
    let mut r = StateResult::new(name, Some(false));
    r.comment = e.to_string();
    r
}

/// `changes[name] = value`.
pub fn changed(r: &mut StateResult, name: &str, value: impl Into<Value>) {
    r.changes.insert(name.to_string(), value.into());
}
