//! How Salt's postgres module reaches a server: the `psql` command line
//! (`_psql_cmd`), the OS user it runs as and the password file
//! (`_run_psql`), and the CSV of `COPY (...) TO STDOUT` (`psql_query`).
//!
//! Why the CLI and not a client crate: Salt drives PostgreSQL through
//! `psql` run as the `postgres` OS user, so peer authentication over the
//! local socket, `~/.pgpass`, `PG*` variables and `postgres.bins_dir` all
//! behave as they do under Salt.

use std::io::Write;

use halite_state::{CmdOptions, CmdOutput, CmdTimeout, Map, Value};

use crate::exec::{Args, ExecError};

/// A keyword-only argument in [`Conn::from_positions`].
pub const NONE: usize = usize::MAX;

/// What a connection is read from besides its arguments: the minion's
/// opts, grains and pillar, for the `postgres.*` config keys.
#[derive(Clone, Copy)]
pub struct Config<'a> {
    /// `__opts__`.
    pub opts: &'a Value,
    /// `__grains__` (the OS family picks the default OS user).
    pub grains: &'a Value,
    /// `__pillar__`.
    pub pillar: &'a Value,
}

impl Config<'_> {
    /// Salt's `config.option(key)`: a non-empty string, or `None`.
    pub fn option(&self, key: &str) -> Option<String> {
        let v = halite_render::config_call(
            "config.option",
            self.opts,
            self.grains,
            self.pillar,
            &[Value::from(key)],
            &Map::new(),
        )?;
        text(&v).filter(|s| !s.is_empty())
    }

    /// The `psql` (or `initdb`...) to run: under `postgres.bins_dir` when
    /// set and there, else on PATH (Salt's `_find_pg_binary`).
    pub fn binary(&self, util: &str) -> Option<String> {
        if let Some(dir) = self.option("postgres.bins_dir") {
            let path = std::path::Path::new(&dir).join(util);
            if path.is_file() {
                return Some(path.display().to_string());
            }
        }
        crate::grains::hw::which(util)
    }
}

/// A scalar argument as text: strings as they are, numbers and booleans
/// stringified, null as `None`.
pub fn text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// The connection arguments of one call, before config defaults: the
/// database user, host, port, maintenance database and password, and the
/// OS user `psql` runs as.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conn {
    /// `--username` (the exec module's `user`, the states' `db_user`).
    pub user: Option<String>,
    /// `--host` (`db_host` in states).
    pub host: Option<String>,
    /// `--port` (`db_port` in states).
    pub port: Option<String>,
    /// `--dbname` (`maintenance_db`).
    pub maintenance_db: Option<String>,
    /// The database user's password (`db_password` in states).
    pub password: Option<String>,
    /// The OS user (`runas`; the states' and schema functions' `user`).
    pub runas: Option<String>,
}

impl Conn {
    /// The exec module's arguments `user, host, port, maintenance_db,
    /// password` (positional from `first`, or by keyword) and `runas`
    /// (keyword only: it comes after each function's own options).
    pub fn from_args(args: &Args, first: usize) -> Self {
        Self::from_positions(
            args,
            [first, first + 1, first + 2, first + 3, first + 4, NONE],
        )
    }

    /// The connection arguments at the positions `[user, host, port,
    /// maintenance_db, password, runas]` of a function's signature
    /// ([`NONE`]: keyword only), or by keyword.
    pub fn from_positions(args: &Args, at: [usize; 6]) -> Self {
        let get = |i: usize, key: &str| {
            let v = if i == NONE {
                args.kwargs.get(key)
            } else {
                args.get(i, key)
            };
            v.and_then(text)
        };
        Conn {
            user: get(at[0], "user"),
            host: get(at[1], "host"),
            port: get(at[2], "port"),
            maintenance_db: get(at[3], "maintenance_db"),
            password: get(at[4], "password"),
            runas: get(at[5], "runas"),
        }
    }

    /// The schema functions' arguments (`dbname` is the database):
    /// `user` is the OS user there, `db_user`/`db_password`/`db_host`/
    /// `db_port` the connection, positional from `first`.
    pub fn from_db_args(args: &Args, first: usize, dbname: &str) -> Self {
        let get = |i: usize, key: &str| args.get(first + i, key).and_then(text);
        Conn {
            runas: get(0, "user"),
            user: get(1, "db_user"),
            password: get(2, "db_password"),
            host: get(3, "db_host"),
            port: get(4, "db_port"),
            maintenance_db: Some(dbname.to_string()),
        }
    }

    /// The same connection against another database.
    pub fn on_db(&self, db: Option<&str>) -> Self {
        Conn {
            maintenance_db: db.map(str::to_string),
            ..self.clone()
        }
    }
}

/// A connection with its config defaults applied, ready to run `psql`.
pub struct Psql<'a> {
    cfg: Config<'a>,
    conn: Conn,
}

impl<'a> Psql<'a> {
    /// `conn` on the host whose config is `cfg`.
    pub fn new(cfg: Config<'a>, conn: Conn) -> Self {
        Psql { cfg, conn }
    }

    /// The same server, another database (`maintenance_db`).
    pub fn on_db(&self, db: Option<&str>) -> Psql<'a> {
        Psql {
            cfg: self.cfg,
            conn: self.conn.on_db(db),
        }
    }

    /// Salt's `_psql_cmd`: `psql --no-align --no-readline --no-psqlrc
    /// --no-password [--username U] [--host H] [--port P] --dbname D`
    /// then `extra`.
    fn argv(&self, extra: &[&str]) -> Result<Vec<String>, ExecError> {
        let psql = self.cfg.binary("psql").ok_or_else(|| {
            ExecError::Execution(
                "psql was not found: install the PostgreSQL client (apt-get install postgresql-client) or set postgres.bins_dir".into(),
            )
        })?;
        let mut argv = vec![
            psql,
            "--no-align".into(),
            "--no-readline".into(),
            "--no-psqlrc".into(),
            "--no-password".into(),
        ];
        let c = &self.conn;
        let pick =
            |given: &Option<String>, key: &str| given.clone().or_else(|| self.cfg.option(key));
        if let Some(user) = pick(&c.user, "postgres.user") {
            argv.extend(["--username".into(), user]);
        }
        if let Some(host) = pick(&c.host, "postgres.host") {
            argv.extend(["--host".into(), host]);
        }
        if let Some(port) = pick(&c.port, "postgres.port") {
            argv.extend(["--port".into(), port]);
        }
        let db =
            pick(&c.maintenance_db, "postgres.maintenance_db").unwrap_or_else(|| "postgres".into());
        argv.extend(["--dbname".into(), db]);
        argv.extend(extra.iter().map(|s| s.to_string()));
        Ok(argv)
    }

    /// The OS user `psql` runs as: `runas`, else `postgres` (`_postgresql`
    /// on OpenBSD) when the host is a local socket, else the minion's own
    /// user — Salt's rule.
    fn runas(&self) -> Option<String> {
        if self.conn.runas.is_some() {
            return self.conn.runas.clone();
        }
        let host = self
            .conn
            .host
            .clone()
            .or_else(|| self.cfg.option("postgres.host"));
        match host {
            Some(h) if !h.starts_with('/') => None,
            _ => {
                let family = self.cfg.grains.get("os_family").and_then(Value::as_str);
                Some(if family == Some("OpenBSD") {
                    "_postgresql".into()
                } else {
                    "postgres".into()
                })
            }
        }
    }

    /// Runs `psql` with `extra` (Salt's `_psql_prepare_and_run`): as the
    /// OS user, with the password in a `PGPASSFILE` only that user reads,
    /// under `postgres.timeout`.
    pub fn run(&self, extra: &[&str]) -> Result<CmdOutput, ExecError> {
        let argv = self.argv(extra)?;
        let runas = self.runas();
        let password = self
            .conn
            .password
            .clone()
            .or_else(|| self.cfg.option("postgres.pass"));
        let passfile = match &password {
            Some(pw) => Some(self.passfile(pw, runas.as_deref())?),
            None => None,
        };
        let cmd = argv
            .iter()
            .map(|w| crate::command::shell_quote(w))
            .collect::<Vec<_>>()
            .join(" ");
        // config.option answers "" for a key that is not set.
        let limit = halite_render::config_call(
            "config.option",
            self.cfg.opts,
            self.cfg.grains,
            self.cfg.pillar,
            &[Value::from("postgres.timeout")],
            &Map::new(),
        )
        .filter(|v| v.as_str() != Some(""));
        let timeout = CmdTimeout::from_value(limit.as_ref()).map_err(ExecError::Invocation)?;
        // The variable names the file; the password stays in the file.
        let env = passfile
            .iter()
            .map(|file| ("PGPASSFILE".to_string(), file.path().display().to_string()))
            .collect();
        let opts = CmdOptions {
            runas,
            env,
            timeout,
            ..CmdOptions::default()
        };
        tracing::debug!(?argv, "running psql");
        let out = crate::command::run_command(&cmd, &opts)
            .map_err(|e| ExecError::Execution(format!("cannot run psql: {e}")))?;
        if out.retcode != 0 {
            tracing::error!(
                "Error connecting to Postgresql server: {}",
                out.stderr.trim()
            );
        }
        Ok(out)
    }

    /// Salt's pgpass line `host:port:*:user:password` in a temp file owned
    /// by the OS user `psql` runs as (mode 0600), removed when dropped.
    fn passfile(
        &self,
        password: &str,
        runas: Option<&str>,
    ) -> Result<tempfile::NamedTempFile, ExecError> {
        let host = self
            .conn
            .host
            .clone()
            .filter(|h| !h.starts_with('/'))
            .unwrap_or_else(|| "localhost".into());
        let port = self.conn.port.clone().unwrap_or_else(|| "*".into());
        let user = self
            .conn
            .user
            .clone()
            .or_else(|| runas.map(str::to_string))
            .unwrap_or_else(|| "*".into());
        let failed = |e: std::io::Error| {
            ExecError::Execution(format!("cannot write the PGPASSFILE for psql: {e}"))
        };
        let mut file = tempfile::NamedTempFile::new().map_err(failed)?;
        write!(file, "{host}:{port}:*:{user}:{password}").map_err(failed)?;
        file.flush().map_err(failed)?;
        if let Some(owner) = runas {
            let found = nix::unistd::User::from_name(owner)
                .map_err(|e| ExecError::Execution(format!("cannot look up user {owner}: {e}")))?
                .ok_or_else(|| {
                    ExecError::Execution(format!(
                        "User '{owner}' does not exist: create it or pass runas/user"
                    ))
                })?;
            nix::unistd::chown(file.path(), Some(found.uid), None).map_err(|e| {
                ExecError::Execution(format!("cannot give the PGPASSFILE to {owner}: {e}"))
            })?;
        }
        Ok(file)
    }

    /// Runs one statement (`-c`); whether psql succeeded.
    pub fn exec(&self, sql: &str) -> Result<bool, ExecError> {
        Ok(self.run(&["-c", sql])?.retcode == 0)
    }

    /// Salt's `psql_query`: rows of `COPY (query) TO STDOUT WITH CSV
    /// HEADER` as maps of column -> text; no rows when psql fails.
    pub fn query(&self, query: &str, write: bool) -> Result<Vec<Map>, ExecError> {
        let mut sql = format!(
            "COPY ({}) TO STDOUT WITH CSV HEADER",
            query.trim().trim_end_matches(';')
        );
        if write {
            sql = format!("START TRANSACTION READ WRITE; {sql}; COMMIT TRANSACTION;");
        }
        let out = self.run(&["-v", "datestyle=ISO,MDY", "-c", &sql])?;
        if out.retcode > 0 {
            return Ok(Vec::new());
        }
        let mut rows = parse_csv(&out.stdout)?;
        if write {
            // The COMMIT tag psql prints after the rows.
            rows.pop();
        }
        Ok(rows)
    }
}

/// Rows of a CSV with a header line, as maps of column -> text.
pub fn parse_csv(text: &str) -> Result<Vec<Map>, ExecError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(text.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| ExecError::Execution(format!("cannot read psql's CSV output: {e}")))?
        .iter()
        .map(str::to_string)
        .collect();
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record
            .map_err(|e| ExecError::Execution(format!("cannot read psql's CSV output: {e}")))?;
        if record.is_empty() {
            continue;
        }
        let row: Map = header
            .iter()
            .zip(record.iter())
            .map(|(k, v)| (k.clone(), Value::from(v)))
            .collect();
        rows.push(row);
    }
    Ok(rows)
}

/// The members of a PostgreSQL array literal (`{a,"b c"}`), as Salt
/// reads them with Python's csv module.
pub fn pg_array(text: &str) -> Vec<String> {
    let inner = text.trim_matches(|c| c == '{' || c == '}');
    if inner.is_empty() {
        return Vec::new();
    }
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(inner.as_bytes());
    reader
        .records()
        .next()
        .and_then(Result::ok)
        .map(|r| r.iter().map(str::to_string).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_rows_keep_quoted_commas_and_newlines() {
        let rows = parse_csv("name,acl\n\"a,b\",\"x\ny\"\nc,\n").unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0]["name"], "a,b");
        assert_eq!(rows[0]["acl"], "x\ny");
        assert_eq!(rows[1]["acl"], "");
    }

    #[test]
    fn arrays_split_like_salt() {
        assert_eq!(pg_array("{a,\"b c\"}"), vec!["a", "b c"]);
        assert!(pg_array("").is_empty());
        assert!(pg_array("{}").is_empty());
    }
}
