//! Salt's `mysql` execution functions as one session object: the
//! connection arguments, the server version once asked, and the last
//! error (Salt's `__context__["mysql.error"]`, which the `mysql_*` states
//! read after a function answered `False`).
//!
//! Each function answers what Salt's does (`False`, `[]`, `{}` on a
//! failure, with the error kept for [`Mysql::take_error`]), so the
//! execution module and the states share one behaviour.

use std::cell::RefCell;

use halite_state::{Map, Value};
use sha1::{Digest, Sha1};

use super::client::{literal, run_sql, ConnArgs, MysqlError, ResultSet};
use super::grants::{self, bare, quote_identifier, version_at_least};

/// A session of `mysql.*` calls with one set of connection arguments.
pub struct Mysql {
    conn: ConnArgs,
    version: RefCell<Option<String>>,
    password_column: RefCell<Option<String>>,
    error: RefCell<Option<String>>,
}

/// The arguments of `user_exists`, `user_create` and `user_chpass`.
#[derive(Debug, Clone, Default)]
pub struct UserSpec {
    /// The user name.
    pub user: String,
    /// The host part of the account (`localhost`).
    pub host: String,
    /// A clear-text password.
    pub password: Option<String>,
    /// A password hash (`*6C89...`).
    pub password_hash: Option<String>,
    /// `passwordless` (user_exists) / `allow_passwordless` (create, chpass).
    pub passwordless: bool,
    /// Authenticate through the `unix_socket` (MariaDB) or `auth_socket`
    /// (MySQL) plugin.
    pub unix_socket: bool,
    /// The `mysql.user` column holding the hash (asked when `None`).
    pub password_column: Option<String>,
    /// The plugin MySQL 8 creates the user with.
    pub auth_plugin: Option<String>,
}

impl UserSpec {
    /// A spec naming `user@host` only.
    pub fn new(user: &str, host: &str) -> Self {
        Self {
            user: user.to_string(),
            host: host.to_string(),
            ..Self::default()
        }
    }
}

/// MySQL's `mysql_native_password` hash of `password` (`*` and the upper
/// hex of SHA1(SHA1(password))), which Salt compares on MySQL 8.
pub fn native_password_hash(password: &str) -> String {
    let first = Sha1::digest(password.as_bytes());
    let second = Sha1::digest(first);
    format!("*{}", hex::encode_upper(second))
}

impl Mysql {
    /// A session with these connection arguments.
    pub fn new(conn: ConnArgs) -> Self {
        Self {
            conn,
            version: RefCell::new(None),
            password_column: RefCell::new(None),
            error: RefCell::new(None),
        }
    }

    /// Takes the last error (Salt's `__context__.pop("mysql.error")`).
    pub fn take_error(&self) -> Option<String> {
        self.error.borrow_mut().take()
    }

    fn fail(&self, e: MysqlError) {
        tracing::error!("{}", e.0);
        *self.error.borrow_mut() = Some(e.0);
    }

    /// Runs SQL, keeping its error for the caller's Salt-shaped answer.
    fn sql(&self, database: Option<&str>, sql: &str) -> Option<Vec<ResultSet>> {
        self.sql_with(&self.conn, database, sql)
    }

    fn sql_with(
        &self,
        conn: &ConnArgs,
        database: Option<&str>,
        sql: &str,
    ) -> Option<Vec<ResultSet>> {
        match run_sql(conn, database, sql) {
            Ok(sets) => Some(sets),
            Err(e) => {
                self.fail(e);
                None
            }
        }
    }

    /// Runs one statement and the count of rows it matched (`SELECT`) or
    /// changed (anything else), as the cursor's `rowcount`.
    fn rowcount(&self, conn: &ConnArgs, sql: &str) -> Option<i64> {
        let sets = self.sql_with(conn, None, &format!("{sql};\nSELECT ROW_COUNT();"))?;
        Some(rowcount_of(&sets))
    }

    /// `mysql.version`: the server's `VERSION()`, `""` when unreachable.
    pub fn version(&self) -> String {
        if let Some(v) = self.version.borrow().as_ref() {
            return v.clone();
        }
        let Some(sets) = self.sql(None, "SELECT VERSION();") else {
            return String::new();
        };
        let v = sets
            .first()
            .and_then(ResultSet::scalar)
            .unwrap_or("")
            .to_string();
        *self.version.borrow_mut() = Some(v.clone());
        v
    }

    /// `mysql.status`: `SHOW STATUS` as a dict.
    pub fn status(&self) -> Map {
        let Some(sets) = self.sql(None, "SHOW STATUS;") else {
            return Map::new();
        };
        pairs(sets.first())
    }

    /// Rows of `sql` as dicts (Salt's `__do_query_into_hash`): `[]` on an
    /// error.
    pub fn rows_as_dicts(&self, sql: &str) -> Vec<Map> {
        self.sql(None, &format!("{sql};"))
            .and_then(|s| s.into_iter().next())
            .map(|s| s.dict_rows())
            .unwrap_or_default()
    }

    /// `mysql.plugins_list`: `{name, status}` of every plugin.
    pub fn plugins_list(&self) -> Vec<Map> {
        self.sql(None, "SHOW PLUGINS;")
            .and_then(|s| s.into_iter().next())
            .map(|s| {
                s.rows
                    .into_iter()
                    .map(|r| {
                        let v =
                            |i: usize| r.get(i).cloned().flatten().map_or(Value::Null, Value::from);
                        let mut m = Map::new();
                        m.insert("name".into(), v(0));
                        m.insert("status".into(), v(1));
                        m
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `mysql.verify_login`: whether `user` can log in with `password`
    /// (the other connection arguments as given).
    pub fn verify_login(&self, user: &str, password: Option<&str>) -> bool {
        let mut conn = self.conn.clone();
        conn.user = Some(user.to_string()).filter(|u| !u.is_empty());
        conn.pass = password.map(str::to_string).filter(|p| !p.is_empty());
        run_sql(&conn, None, "SELECT 1;").is_ok()
    }

    /// `mysql.db_list`: the databases.
    pub fn db_list(&self) -> Vec<String> {
        self.sql(None, "SHOW DATABASES;")
            .map(|s| first_column(s.first()))
            .unwrap_or_default()
    }

    /// `mysql.db_get`: a database's character set and collation; an empty
    /// map when it does not exist (or on an error, kept for the caller).
    pub fn db_get(&self, name: &str) -> Map {
        let sql = format!(
            "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM \
             INFORMATION_SCHEMA.SCHEMATA WHERE SCHEMA_NAME={};",
            literal(name)
        );
        let mut out = Map::new();
        if let Some(row) = self
            .sql(None, &sql)
            .and_then(|s| s.into_iter().next())
            .and_then(|s| s.rows.into_iter().next())
        {
            let v = |i: usize| {
                row.get(i)
                    .cloned()
                    .flatten()
                    .map_or(Value::Null, Value::from)
            };
            out.insert("character_set".into(), v(0));
            out.insert("collate".into(), v(1));
        }
        out
    }

    /// `mysql.db_exists`: `SHOW DATABASES LIKE name` matches exactly one.
    pub fn db_exists(&self, name: &str) -> bool {
        self.rowcount(
            &self.conn,
            &format!("SHOW DATABASES LIKE {}", literal(name)),
        ) == Some(1)
    }

    /// `mysql.db_tables`: the tables of a database; `None` (Salt's False)
    /// when it does not exist.
    pub fn db_tables(&self, name: &str) -> Option<Vec<String>> {
        if !self.db_exists(name) {
            return None;
        }
        Some(
            self.sql(
                None,
                &format!("SHOW TABLES IN {};", quote_identifier(name, false)),
            )
            .map(|s| first_column(s.first()))
            .unwrap_or_default(),
        )
    }

    /// `mysql.db_create`: creates a database (False when it exists).
    pub fn db_create(
        &self,
        name: &str,
        character_set: Option<&str>,
        collate: Option<&str>,
    ) -> bool {
        if self.db_exists(name) {
            tracing::info!("DB '{name}' already exists");
            return false;
        }
        let mut sql = format!(
            "CREATE DATABASE IF NOT EXISTS {}",
            quote_identifier(name, false)
        );
        if let Some(cs) = character_set {
            sql.push_str(&format!(" CHARACTER SET {}", literal(cs)));
        }
        if let Some(c) = collate {
            sql.push_str(&format!(" COLLATE {}", literal(c)));
        }
        self.rowcount(&self.conn, &sql).is_some_and(|n| n > 0)
    }

    /// `mysql.alter_db`: changes a database's character set and collation.
    pub fn alter_db(&self, name: &str, character_set: Option<&str>, collate: Option<&str>) -> bool {
        let existing = self.db_get(name);
        let pick = |given: Option<&str>, key: &str| {
            given.map(str::to_string).unwrap_or_else(|| {
                existing
                    .get(key)
                    .map(halite_salt_rules::pyfmt::python_str)
                    .unwrap_or_else(|| "None".into())
            })
        };
        let sql = format!(
            "ALTER DATABASE `{}` CHARACTER SET {} COLLATE {}",
            name.replace('`', "``"),
            pick(character_set, "character_set"),
            pick(collate, "collate")
        );
        self.rowcount(&self.conn, &sql).is_some_and(|n| n > 0)
    }

    /// `mysql.db_remove`: drops a database (never `mysql`).
    pub fn db_remove(&self, name: &str) -> bool {
        if !self.db_exists(name) {
            tracing::info!("DB '{name}' does not exist");
            return false;
        }
        if name == "mysql" || name == "information_scheme" {
            tracing::info!("DB '{name}' may not be removed");
            return false;
        }
        if self
            .sql(
                None,
                &format!("DROP DATABASE {};", quote_identifier(name, false)),
            )
            .is_none()
        {
            return false;
        }
        !self.db_exists(name)
    }

    /// `mysql.user_list`: every account as `{User, Host}`.
    pub fn user_list(&self) -> Vec<Map> {
        self.sql(None, "SELECT User,Host FROM mysql.user;")
            .and_then(|s| s.into_iter().next())
            .map(|s| s.dict_rows())
            .unwrap_or_default()
    }

    /// `mysql.user_info`: the account's row of `mysql.user`.
    pub fn user_info(&self, user: &str, host: &str) -> Option<Map> {
        let sql = format!(
            "SELECT * FROM mysql.user WHERE User = {} AND Host = {};",
            literal(user),
            literal(host)
        );
        self.sql(None, &sql)?
            .into_iter()
            .next()?
            .dict_rows()
            .into_iter()
            .next()
    }

    /// Salt's `__password_column`: `Password` where `mysql.user` has it,
    /// else `authentication_string`.
    fn password_column(&self) -> String {
        if let Some(c) = self.password_column.borrow().as_ref() {
            return c.clone();
        }
        let n = self.rowcount(
            &self.conn,
            "SELECT column_name from information_schema.COLUMNS WHERE table_schema='mysql' \
             and table_name='user' and column_name='Password'",
        );
        let Some(n) = n else {
            return "Password".into();
        };
        let c = if n > 0 {
            "Password"
        } else {
            "authentication_string"
        };
        *self.password_column.borrow_mut() = Some(c.to_string());
        c.to_string()
    }

    /// Salt's `__get_auth_plugin`: the account's plugin.
    fn auth_plugin(&self, user: &str, host: &str) -> String {
        let sql = format!(
            "SELECT plugin FROM mysql.user WHERE User={} and Host={};",
            literal(user),
            literal(host)
        );
        self.sql(None, &sql)
            .and_then(|s| s.first().and_then(|s| s.scalar().map(str::to_string)))
            .unwrap_or_else(|| "mysql_native_password".into())
    }

    /// Salt's retry of a connection with the password being checked: after
    /// a state changed it, the connection's own may be that one.
    fn conn_for(&self, spec: &UserSpec) -> Option<ConnArgs> {
        if !self.version().is_empty() {
            return Some(self.conn.clone());
        }
        let password = spec.password.as_ref()?;
        let last = self.take_error();
        let mut conn = self.conn.clone();
        conn.pass = Some(password.clone());
        let retry = Mysql::new(conn.clone());
        let v = retry.version();
        if v.is_empty() {
            let err = retry.take_error().or(last).unwrap_or_default();
            tracing::error!(
                "MySQL Error: Unable to fetch current server version. Last error was: \"{err}\""
            );
            *self.error.borrow_mut() = Some(err);
            return None;
        }
        *self.version.borrow_mut() = Some(v);
        Some(conn)
    }

    /// `mysql.user_exists`: whether `user@host` exists, with this password
    /// (or hash, or no password / socket authentication) when given.
    pub fn user_exists(&self, spec: &UserSpec) -> bool {
        let Some(conn) = self.conn_for(spec) else {
            return false;
        };
        let column = spec
            .password_column
            .clone()
            .unwrap_or_else(|| self.password_column());
        let plugin = self.auth_plugin(&spec.user, &spec.host);
        let mut sql = format!(
            "SELECT User,Host FROM mysql.user WHERE User = {} AND Host = {}",
            literal(&spec.user),
            literal(&spec.host)
        );
        let version = self.version();
        let mariadb = version.contains("MariaDB");
        if spec.passwordless {
            if spec.unix_socket {
                let plugin = if mariadb {
                    "unix_socket"
                } else {
                    "auth_socket"
                };
                sql.push_str(&format!(" AND plugin={}", literal(plugin)));
            } else {
                sql.push_str(&format!(" AND {column} = ''"));
            }
        } else if let Some(pw) = spec.password.as_deref().filter(|p| !p.is_empty()) {
            if !mariadb && version_at_least(&version, "8.0.11") {
                if plugin == "mysql_native_password" {
                    sql.push_str(&format!(
                        " AND {column} = {}",
                        literal(&native_password_hash(pw))
                    ));
                } else {
                    self.fail(MysqlError("Unable to verify password.".into()));
                }
            } else {
                sql.push_str(&format!(" AND {column} = PASSWORD({})", literal(pw)));
            }
        } else if let Some(hash) = spec.password_hash.as_deref().filter(|p| !p.is_empty()) {
            sql.push_str(&format!(" AND {column} = {}", literal(hash)));
        }
        self.rowcount(&conn, &sql) == Some(1)
    }

    /// `mysql.plugin_status`: the plugin's status (`ACTIVE`), `""` if none.
    pub fn plugin_status(&self, name: &str) -> String {
        let sql = format!(
            "SELECT PLUGIN_STATUS FROM INFORMATION_SCHEMA.PLUGINS WHERE PLUGIN_NAME = {};",
            literal(name)
        );
        self.sql(None, &sql)
            .and_then(|s| s.first().and_then(|s| s.scalar().map(str::to_string)))
            .unwrap_or_default()
    }

    /// `mysql.user_create`: creates `user@host` (False when it exists).
    pub fn user_create(&self, spec: &UserSpec) -> bool {
        let Some(conn) = self.conn_for(spec) else {
            return false;
        };
        if self.user_exists(&UserSpec::new(&spec.user, &spec.host)) {
            tracing::info!("User '{}'@'{}' already exists", spec.user, spec.host);
            return false;
        }
        let column = spec
            .password_column
            .clone()
            .unwrap_or_else(|| self.password_column());
        let version = self.version();
        let mariadb = version.contains("MariaDB");
        let modern_mysql = !mariadb && version_at_least(&version, "8.0.11");
        let plugin = spec
            .auth_plugin
            .clone()
            .unwrap_or_else(|| "mysql_native_password".into());
        let mut sql = format!(
            "CREATE USER {}@{}",
            literal(&spec.user),
            literal(&spec.host)
        );
        if spec.unix_socket {
            let (name, clause) = if mariadb {
                ("unix_socket", " IDENTIFIED VIA unix_socket")
            } else {
                ("auth_socket", " IDENTIFIED WITH auth_socket")
            };
            if self.plugin_status(name).is_empty() {
                self.fail(MysqlError(format!("The {name} plugin is not enabled.")));
                return false;
            }
            if spec.host != "localhost" {
                tracing::error!("Auth via unix_socket can be set only for host=localhost");
                return false;
            }
            sql.push_str(clause);
        } else if !spec.passwordless {
            if let Some(pw) = &spec.password {
                if modern_mysql {
                    sql.push_str(&format!(
                        " IDENTIFIED WITH {} BY {}",
                        literal(&plugin),
                        literal(pw)
                    ));
                } else {
                    sql.push_str(&format!(" IDENTIFIED BY {}", literal(pw)));
                }
            } else if let Some(hash) = &spec.password_hash {
                if modern_mysql {
                    sql.push_str(&format!(
                        " IDENTIFIED WITH {} AS {}",
                        literal(&plugin),
                        literal(hash)
                    ));
                } else {
                    sql.push_str(&format!(" IDENTIFIED BY PASSWORD {}", literal(hash)));
                }
            } else {
                tracing::error!(
                    "password or password_hash must be specified, unless allow_passwordless=True"
                );
                return false;
            }
        }
        if self.sql_with(&conn, None, &format!("{sql};")).is_none() {
            return false;
        }
        let check = UserSpec {
            password: spec.password.clone(),
            password_hash: spec.password_hash.clone(),
            password_column: Some(column),
            ..UserSpec::new(&spec.user, &spec.host)
        };
        self.user_exists(&check)
    }

    /// `mysql.user_chpass`: sets, changes or clears `user@host`'s password.
    pub fn user_chpass(&self, spec: &UserSpec) -> bool {
        let Some(conn) = self.conn_for(spec) else {
            return false;
        };
        if !self.user_exists(&UserSpec::new(&spec.user, &spec.host)) {
            tracing::info!("User '{}'@'{}' does not exists", spec.user, spec.host);
            return false;
        }
        let column = spec
            .password_column
            .clone()
            .unwrap_or_else(|| self.password_column());
        let plugin = self.auth_plugin(&spec.user, &spec.host);
        let version = self.version();
        let mariadb = version.contains("MariaDB");
        let (user, host) = (literal(&spec.user), literal(&spec.host));
        let sql = if mariadb {
            let password_sql = match (&spec.password, &spec.password_hash) {
                (Some(pw), _) => format!("PASSWORD({})", literal(pw)),
                (None, Some(hash)) => literal(hash),
                (None, None) if !spec.passwordless => {
                    tracing::error!(
                        "password or password_hash must be specified, unless allow_passwordless=True"
                    );
                    return false;
                }
                (None, None) => "''".to_string(),
            };
            let mut sql = if version_at_least(&version, "10.4") {
                format!(
                    "ALTER USER {user}@{host} IDENTIFIED VIA {} USING {password_sql}",
                    literal(&plugin)
                )
            } else {
                format!(
                    "UPDATE mysql.user SET {column}={password_sql} WHERE User={user} AND Host = {host}"
                )
            };
            if spec.passwordless && spec.unix_socket {
                if spec.host == "localhost" {
                    if self.plugin_status("unix_socket").is_empty() {
                        self.fail(MysqlError("The unix_socket plugin is not enabled.".into()));
                        return false;
                    }
                    sql = format!(
                        "UPDATE mysql.user SET {column}={password_sql}, plugin='unix_socket' \
                         WHERE User={user} AND Host = {host}"
                    );
                } else {
                    tracing::error!("Auth via unix_socket can be set only for host=localhost");
                }
            }
            sql
        } else {
            let modern = version_at_least(&version, "8.0.11");
            let password_sql = match (&spec.password, &spec.password_hash) {
                (Some(pw), _) if modern => literal(pw),
                (Some(pw), _) => format!("PASSWORD({})", literal(pw)),
                (None, Some(hash)) => literal(hash),
                (None, None) if !spec.passwordless => {
                    tracing::error!(
                        "password or password_hash must be specified, unless allow_passwordless=True"
                    );
                    return false;
                }
                (None, None) => "''".to_string(),
            };
            let mut sql = if modern {
                let how = match (&spec.password, &spec.password_hash) {
                    (Some(_), _) => format!("BY {password_sql}"),
                    (None, Some(_)) => format!("AS {password_sql}"),
                    (None, None) => String::new(),
                };
                format!(
                    "ALTER USER {user}@{host} IDENTIFIED WITH {} {how}",
                    literal(&plugin)
                )
            } else {
                format!(
                    "UPDATE mysql.user SET {column}={password_sql} WHERE User={user} AND Host = {host}"
                )
            };
            if spec.passwordless && spec.unix_socket && spec.host == "localhost" {
                if self.plugin_status("auth_socket").is_empty() {
                    self.fail(MysqlError("The auth_socket plugin is not enabled.".into()));
                    return false;
                }
                sql = if modern {
                    format!("ALTER USER {user}@{host} IDENTIFIED WITH 'auth_socket' AS {user}")
                } else {
                    format!(
                        "UPDATE mysql.user SET {column}={password_sql}, plugin='auth_socket' \
                         WHERE User={user} AND Host = {host}"
                    )
                };
            }
            sql
        };
        let Some(changed) = self.rowcount(&conn, &sql) else {
            return false;
        };
        let at_least = if mariadb { "10.4.0" } else { "8.0.11" };
        if version_at_least(&version, at_least) || changed > 0 {
            return self.sql_with(&conn, None, "FLUSH PRIVILEGES;").is_some();
        }
        false
    }

    /// `mysql.user_remove`: drops `user@host`.
    pub fn user_remove(&self, user: &str, host: &str) -> bool {
        let spec = UserSpec::new(user, host);
        if !self.user_exists(&spec) {
            *self.error.borrow_mut() = Some(format!("User '{user}'@'{host}' does not exists"));
            return false;
        }
        let sql = format!("DROP USER {}@{};", literal(user), literal(host));
        if self.sql(None, &sql).is_none() {
            return false;
        }
        !self.user_exists(&spec)
    }

    /// `mysql.user_grants`: `SHOW GRANTS` of `user@host` (passwords cut);
    /// `None` (Salt's False) when the user does not exist or on an error.
    pub fn user_grants(&self, user: &str, host: &str) -> Option<Vec<String>> {
        if !self.user_exists(&UserSpec::new(user, host)) {
            tracing::info!("User '{user}'@'{host}' does not exist");
            return None;
        }
        let sql = format!("SHOW GRANTS FOR {}@{};", literal(user), literal(host));
        let sets = self.sql(None, &sql)?;
        Some(
            first_column(sets.first())
                .into_iter()
                .map(|g| {
                    let mut tmp = g
                        .split(" IDENTIFIED BY")
                        .next()
                        .unwrap_or_default()
                        .to_string();
                    if g.contains("WITH GRANT OPTION") && !tmp.contains("WITH GRANT OPTION") {
                        tmp.push_str(" WITH GRANT OPTION");
                    }
                    tmp
                })
                .collect(),
        )
    }

    /// `mysql.grant_exists`: whether `user@host` holds every privilege of
    /// `grant` on `database`, compared as Salt compares them.
    pub fn grant_exists(
        &self,
        grant: &str,
        database: &str,
        user: &str,
        host: &str,
        grant_option: bool,
        escape: bool,
    ) -> bool {
        let version = self.version();
        if version.is_empty() {
            let last = self.error.borrow().clone().unwrap_or_default();
            tracing::error!(
                "MySQL Error: Unable to fetch current server version. Last error was: \"{last}\""
            );
            return false;
        }
        let grant = if grant.to_uppercase().contains("ALL") {
            if !version.contains("MariaDB")
                && version_at_least(&version, "8.0")
                && database == "*.*"
            {
                grants::MYSQL8_ALL_PRIVILEGES.join(",")
            } else {
                "ALL PRIVILEGES".to_string()
            }
        } else {
            grant.to_string()
        };
        let target = match grants::generate(&grant, database, user, host, grant_option, escape) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!("Error during grant generation. {e}");
                return false;
            }
        };
        let Some(current) = self.user_grants(user, host) else {
            tracing::error!(
                "Grant does not exist or may not be ordered properly. In some cases, this could \
                 also indicate a connection error. Check your configuration."
            );
            return false;
        };
        // Salt merges the lines of one database before comparing.
        let mut merged: Vec<grants::Tokens> = Vec::new();
        for line in &current {
            let mut t = grants::tokenize(line, None);
            t.grant = grants::resolve_aliases(t.grant, &version);
            match merged.iter_mut().find(|m| m.database == t.database) {
                Some(m) => m.grant.extend(t.grant),
                None => merged.push(t),
            }
        }
        let mut want = grants::tokenize(&target.sql, Some((&target.user, &target.host)));
        want.grant = grants::resolve_aliases(want.grant, &version);
        merged.iter().any(|have| {
            bare(&have.user) == bare(&want.user)
                && bare(&have.database) == bare(&want.database)
                && bare(&have.host) == bare(&want.host)
                && want.grant.iter().all(|g| have.grant.contains(g))
        })
    }

    /// `mysql.grant_add`: grants, then checks that the grant is there.
    pub fn grant_add(
        &self,
        grant: &str,
        database: &str,
        user: &str,
        host: &str,
        grant_option: bool,
        escape: bool,
    ) -> bool {
        let grant = grant.trim();
        let generated = match grants::generate(grant, database, user, host, grant_option, escape) {
            Ok(g) => g,
            Err(e) => {
                tracing::error!("Error during grant generation: {e}");
                return false;
            }
        };
        if self.sql(None, &format!("{};", generated.sql)).is_none() {
            return false;
        }
        self.grant_exists(grant, database, user, host, grant_option, escape)
    }

    /// `mysql.grant_revoke`: revokes, then checks the grant is gone.
    pub fn grant_revoke(
        &self,
        grant: &str,
        database: &str,
        user: &str,
        host: &str,
        grant_option: bool,
        escape: bool,
    ) -> bool {
        let mut grant = match grants::normalize(grant) {
            Ok(g) => g,
            Err(e) => {
                self.fail(MysqlError(e));
                return false;
            }
        };
        if grant_option {
            grant.push_str(", GRANT OPTION");
        }
        let (db, table) = grants::split_database(database);
        let db = if db == "*" {
            db.to_string()
        } else {
            quote_identifier(db, table == "*")
        };
        let table = if table == "*" {
            table.to_string()
        } else {
            quote_identifier(table, false)
        };
        let sql = format!(
            "REVOKE {grant} ON {db}.{table} FROM {}@{};",
            literal(user),
            literal(host)
        );
        if self.sql(None, &sql).is_none() {
            return false;
        }
        !self.grant_exists(&grant, database, user, host, grant_option, escape)
    }

    /// `mysql.query`: runs a statement in `database`; Salt's return dict
    /// (`query time`, then `rows returned`/`columns`/`results` for
    /// `SELECT`/`SHOW`/`DESC`, else `rows affected`). Errors are kept and
    /// answered with `None` (Salt's `{}`/`False`).
    pub fn query(&self, database: &str, query: &str) -> Option<Map> {
        let start = std::time::Instant::now();
        let stmt = query.trim_end().trim_end_matches(';');
        let sql = format!("{stmt}\n;\nSELECT ROW_COUNT() AS `rowcount`;");
        let db = Some(database).filter(|d| !d.is_empty());
        let sets = self.sql(db, &sql)?;
        let elapsed = start.elapsed().as_secs_f64();
        let human = if elapsed < 0.200 {
            format!("{}ms", py_round(elapsed * 1000.0, 1))
        } else {
            format!("{}s", py_round(elapsed, 2))
        };
        let mut ret = Map::new();
        let mut time = Map::new();
        time.insert("human".into(), Value::from(human));
        time.insert("raw".into(), Value::from(py_round(elapsed, 5)));
        ret.insert("query time".into(), Value::Object(time));
        let upper = query.trim().to_uppercase();
        if ["SELECT", "SHOW", "DESC"]
            .iter()
            .any(|k| upper.starts_with(k))
        {
            let first = sets.into_iter().next().unwrap_or_default();
            ret.insert("rows returned".into(), Value::from(first.rows.len()));
            ret.insert(
                "columns".into(),
                Value::from(
                    first
                        .columns
                        .iter()
                        .map(|c| Value::from(c.as_str()))
                        .collect::<Vec<_>>(),
                ),
            );
            let rows: Vec<Value> = first
                .rows
                .into_iter()
                .map(|r| {
                    Value::Array(
                        r.into_iter()
                            .map(|v| v.map_or(Value::Null, Value::from))
                            .collect(),
                    )
                })
                .collect();
            ret.insert("results".into(), Value::Array(rows));
        } else {
            let n = rowcount_of(&sets);
            ret.insert("rows affected".into(), Value::from(n.max(0)));
        }
        Some(ret)
    }
}

/// Python's `str(round(x, n))` for the timings of `mysql.query`.
fn py_round(x: f64, n: i32) -> String {
    let f = 10f64.powi(n);
    halite_salt_rules::pyfmt::float_repr((x * f).round() / f)
}

/// The cursor's `rowcount` of a statement followed by `SELECT
/// ROW_COUNT()`: the rows of its result set when it had one (the client
/// prints a set, empty or not, for every statement returning rows), else
/// the rows it changed.
fn rowcount_of(sets: &[ResultSet]) -> i64 {
    if sets.len() >= 2 {
        return sets[0].rows.len() as i64;
    }
    sets.last()
        .and_then(ResultSet::scalar)
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(0)
}

/// The first column of every row.
fn first_column(set: Option<&ResultSet>) -> Vec<String> {
    set.map(|s| {
        s.rows
            .iter()
            .filter_map(|r| r.first().cloned().flatten())
            .collect()
    })
    .unwrap_or_default()
}

/// Two-column rows as a dict (`SHOW STATUS`).
fn pairs(set: Option<&ResultSet>) -> Map {
    set.map(|s| {
        s.rows
            .iter()
            .filter_map(|r| {
                let k = r.first().cloned().flatten()?;
                let v = r.get(1).cloned().flatten().map_or(Value::Null, Value::from);
                Some((k, v))
            })
            .collect()
    })
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_hash_is_mysqls() {
        // SELECT PASSWORD('mypass') on MariaDB, as in Salt's docs.
        assert_eq!(
            native_password_hash("mypass"),
            "*6C8989366EAF75BB670AD8EA7A7FC1176A95CEF4"
        );
    }
}
