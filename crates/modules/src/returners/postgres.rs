//! Salt's `postgres` and `pgjsonb` returners (`salt/returners/postgres.py`,
//! `pgjsonb.py`): one row per return in the `salt_returns` table the shop
//! created (Salt's documented schema: `fun, jid, return, id, success,
//! full_ret, alter_time`), `return` and `full_ret` as JSON text
//! (`postgres`) or `jsonb` (`pgjsonb`). Options `returner.postgres.host`
//! (`localhost`), `.port` (5432), `.user` (`salt`), `.passwd` (`salt`),
//! `.db` (`salt`); `pgjsonb` the same under `returner.pgjsonb.` with
//! `.pass` for the password.
//!
//! Through `psql`, as halite's `postgres` execution module reaches a
//! server (`crate::exec::postgres::conn`: the password in a PGPASSFILE,
//! never on the command line); values are SQL string literals with
//! quotes doubled (PostgreSQL's `standard_conforming_strings`, on by
//! default since 9.1).

use halite_salt_rules::pyfmt::json_dumps;
use halite_state::Value;

use super::options::Lookup;
use super::ReturnerError;
use crate::exec::postgres::conn::{Config, Conn, Psql};
use crate::Host;

/// A SQL string literal of `text`.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The connection the options name.
fn connection(opts: &Lookup<'_>, name: &str, password_attr: &str) -> Conn {
    Conn {
        user: Some(opts.string(name, "user", "salt")),
        host: Some(opts.string(name, "host", "localhost")),
        port: Some(opts.string(name, "port", "5432")),
        maintenance_db: Some(opts.string(name, "db", "salt")),
        password: Some(opts.string(name, password_attr, "salt")),
        runas: None,
    }
}

/// Inserts `ret` with `sql` (built from its parts) on the server of `conn`.
fn insert(host: &Host, conn: Conn, sql: &str, which: &str) -> Result<(), ReturnerError> {
    let cfg = Config {
        opts: &host.opts,
        grains: &host.grains,
        pillar: &host.pillar,
    };
    let out = Psql::new(cfg, conn)
        .run(&["-v", "ON_ERROR_STOP=1", "-c", sql])
        .map_err(|e| ReturnerError::Send(format!("{which}: {e}")))?;
    if out.retcode != 0 {
        return Err(ReturnerError::Send(format!(
            "Could not store return with {which} returner: {} (check returner.{which}.host/port/user/db and that the salt_returns table exists)",
            out.stderr.trim()
        )));
    }
    Ok(())
}

/// The parts of a row: `fun`, `jid`, `id`, `success` as text, and the
/// return and the whole dict as JSON.
fn row(ret: &Value) -> [String; 6] {
    let text = |k: &str| {
        ret.get(k)
            .map(halite_salt_rules::pyfmt::python_str)
            .unwrap_or_default()
    };
    let success = ret.get("success").and_then(Value::as_bool).unwrap_or(false);
    [
        text("fun"),
        text("jid"),
        json_dumps(ret.get("return").unwrap_or(&Value::Null), false, None, true),
        text("id"),
        success.to_string(),
        json_dumps(ret, false, None, true),
    ]
}

/// `postgres.returner(ret)`.
pub fn returner(host: &Host, opts: &Lookup<'_>, ret: &Value) -> Result<(), ReturnerError> {
    let [fun, jid, value, id, success, full] = row(ret);
    let sql = format!(
        "INSERT INTO salt_returns (fun, jid, return, id, success, full_ret) VALUES ({}, {}, {}, {}, {}, {})",
        literal(&fun),
        literal(&jid),
        literal(&value),
        literal(&id),
        literal(&success),
        literal(&full)
    );
    insert(
        host,
        connection(opts, "returner.postgres", "passwd"),
        &sql,
        "postgres",
    )
}

/// `pgjsonb.returner(ret)`.
pub fn returner_jsonb(host: &Host, opts: &Lookup<'_>, ret: &Value) -> Result<(), ReturnerError> {
    let [fun, jid, value, id, success, full] = row(ret);
    let now = chrono::Utc::now().timestamp_micros() as f64 / 1e6;
    let sql = format!(
        "INSERT INTO salt_returns (fun, jid, return, id, success, full_ret, alter_time) VALUES ({}, {}, {}::jsonb, {}, {}, {}::jsonb, to_timestamp({now}))",
        literal(&fun),
        literal(&jid),
        literal(&value),
        literal(&id),
        literal(&success),
        literal(&full)
    );
    insert(
        host,
        connection(opts, "returner.pgjsonb", "pass"),
        &sql,
        "pgjsonb",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_double_their_quotes() {
        assert_eq!(literal("it's"), "'it''s'");
        assert_eq!(literal(r"a\b"), r"'a\b'");
    }
}
