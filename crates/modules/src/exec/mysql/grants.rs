//! Salt's reading and writing of MySQL `GRANT` statements: the statement
//! `mysql.grant_add` sends, and the tokens `mysql.grant_exists` compares
//! between that statement and each line of `SHOW GRANTS`.
//!
//! Why a port of Salt's token rules rather than a SQL parser: a grant is
//! "present" exactly when Salt's comparison says so, and users' trees rely
//! on that answer (the order of privileges, `ALL` against `ALL PRIVILEGES`,
//! backticks and escaped `_` in database names).

use super::client::literal;

/// Every privilege Salt accepts in a `grant` (it refuses anything else
/// before building SQL, since the privileges are pasted into it).
const GRANTS: &[&str] = &[
    "ALL PRIVILEGES",
    "ALTER",
    "ALTER ROUTINE",
    "BACKUP_ADMIN",
    "BINLOG_ADMIN",
    "BINLOG ADMIN",
    "BINLOG MONITOR",
    "BINLOG REPLAY",
    "CONNECTION_ADMIN",
    "CONNECTION ADMIN",
    "CREATE",
    "CREATE ROLE",
    "CREATE ROUTINE",
    "CREATE TABLESPACE",
    "CREATE TEMPORARY TABLES",
    "CREATE USER",
    "CREATE VIEW",
    "DELETE",
    "DELETE HISTORY",
    "DROP",
    "DROP ROLE",
    "ENCRYPTION_KEY_ADMIN",
    "EVENT",
    "EXECUTE",
    "FEDERATED ADMIN",
    "FILE",
    "GRANT OPTION",
    "GROUP_REPLICATION_ADMIN",
    "INDEX",
    "INSERT",
    "LOCK TABLES",
    "PERSIST_RO_VARIABLES_ADMIN",
    "PROCESS",
    "READ_ONLY ADMIN",
    "REFERENCES",
    "RELOAD",
    "REPLICA MONITOR",
    "REPLICATION CLIENT",
    "REPLICATION MASTER ADMIN",
    "REPLICATION REPLICA",
    "REPLICATION SLAVE",
    "REPLICATION_SLAVE_ADMIN",
    "REPLICATION SLAVE ADMIN",
    "RESOURCE_GROUP_ADMIN",
    "RESOURCE_GROUP_USER",
    "ROLE_ADMIN",
    "SELECT",
    "SET USER",
    "SET_USER_ID",
    "SERVICE_CONNECTION_ADMIN",
    "SHOW DATABASES",
    "SHOW VIEW",
    "SHUTDOWN",
    "SLAVE MONITOR",
    "SUPER",
    "SYSTEM_VARIABLES_ADMIN",
    "TRIGGER",
    "UPDATE",
    "USAGE",
    "XA_RECOVER_ADMIN",
];

/// What MySQL 8 expands `ALL` on `*.*` to, which Salt compares instead.
pub const MYSQL8_ALL_PRIVILEGES: &[&str] = &[
    "ALTER",
    "ALTER ROUTINE",
    "BACKUP_ADMIN",
    "BINLOG_ADMIN",
    "CONNECTION_ADMIN",
    "CREATE",
    "CREATE ROLE",
    "CREATE ROUTINE",
    "CREATE TABLESPACE",
    "CREATE TEMPORARY TABLES",
    "CREATE USER",
    "CREATE VIEW",
    "DELETE",
    "DROP",
    "DROP ROLE",
    "ENCRYPTION_KEY_ADMIN",
    "EVENT",
    "EXECUTE",
    "FILE",
    "GROUP_REPLICATION_ADMIN",
    "INDEX",
    "INSERT",
    "LOCK TABLES",
    "PERSIST_RO_VARIABLES_ADMIN",
    "PROCESS",
    "REFERENCES",
    "RELOAD",
    "REPLICATION CLIENT",
    "REPLICATION SLAVE",
    "REPLICATION_SLAVE_ADMIN",
    "RESOURCE_GROUP_ADMIN",
    "RESOURCE_GROUP_USER",
    "ROLE_ADMIN",
    "SELECT",
    "SET_USER_ID",
    "SHOW DATABASES",
    "SHOW VIEW",
    "SHUTDOWN",
    "SUPER",
    "SYSTEM_VARIABLES_ADMIN",
    "TRIGGER",
    "UPDATE",
    "XA_RECOVER_ADMIN",
];

/// Salt's `quote_identifier`: backticks, with `_` escaped too when the
/// name is a database in a grant (where `_` is a wildcard). `%` stays
/// single here: Salt's doubling is undone when it fills in arguments.
pub fn quote_identifier(identifier: &str, for_grants: bool) -> String {
    let mut s = identifier.replace('`', "``");
    if for_grants {
        s = s.replace('_', "\\_");
    }
    format!("`{s}`")
}

/// Whether server `version` (`10.11.19-MariaDB-...`) is at least `min`
/// (`10.4`), comparing the leading dotted numbers as Salt's
/// `version_cmp` does for these strings.
pub fn version_at_least(version: &str, min: &str) -> bool {
    fn parts(v: &str) -> Vec<u64> {
        v.split(|c: char| !c.is_ascii_digit() && c != '.')
            .next()
            .unwrap_or("")
            .split('.')
            .filter_map(|p| p.parse().ok())
            .collect()
    }
    parts(version) >= parts(min)
}

/// Salt's `__grant_normalize`: `ALL` is `ALL PRIVILEGES`; every privilege
/// must be one MySQL knows, else the text says which is not.
pub fn normalize(grant: &str) -> Result<String, String> {
    let grant = if grant.trim().eq_ignore_ascii_case("ALL") {
        "ALL PRIVILEGES".to_string()
    } else {
        grant.to_string()
    };
    for part in split(&grant) {
        if !GRANTS.contains(&part.trim().to_uppercase().as_str()) {
            return Err(format!("Invalid grant : '{part}'"));
        }
    }
    Ok(grant)
}

/// Salt's `__grant_split`: the privilege names of `SELECT, UPDATE (col)`
/// (column lists dropped).
fn split(grant: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in grant.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                if !cur.trim().is_empty() {
                    out.push(cur.clone());
                }
                cur.clear();
            }
            c if depth == 0 => cur.push(c),
            _ => {}
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}

/// A generated grant: Salt's statement text (with `%s`-style places for
/// the user and host) and the SQL actually sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    /// The statement with the user and host filled in as literals.
    pub sql: String,
    /// The user, as given.
    pub user: String,
    /// The host, as given.
    pub host: String,
}

/// Splits `db.table` at its last dot, as Python's `rpartition`.
pub fn split_database(database: &str) -> (&str, &str) {
    match database.rfind('.') {
        Some(i) => (&database[..i], &database[i + 1..]),
        None => ("", database),
    }
}

/// Salt's `__grant_generate`: `GRANT <privs> ON <db>.<table> TO user@host`
/// with the privileges upper-cased and comma-spaced, the database and
/// table quoted when `escape`, and `WITH GRANT OPTION`.
pub fn generate(
    grant: &str,
    database: &str,
    user: &str,
    host: &str,
    grant_option: bool,
    escape: bool,
) -> Result<Generated, String> {
    let spaced = comma_space(grant).to_uppercase();
    let grant = normalize(&spaced)?;
    let (mut db, mut table) = {
        let (d, t) = split_database(database);
        (d.to_string(), t.to_string())
    };
    if escape {
        if db != "*" {
            db = quote_identifier(&db, table == "*");
        }
        if table != "*" {
            table = quote_identifier(&table, false);
        }
    }
    let mut sql = format!(
        "GRANT {grant} ON {db}.{table} TO {}@{}",
        literal(user),
        literal(host)
    );
    if grant_option {
        sql.push_str(" WITH GRANT OPTION");
    }
    Ok(Generated {
        sql,
        user: user.to_string(),
        host: host.to_string(),
    })
}

/// `re.sub(r"\s*,\s*", ", ", grant)`: each comma with the blanks around
/// it becomes `", "`.
fn comma_space(grant: &str) -> String {
    let parts: Vec<&str> = grant.split(',').collect();
    let last = parts.len().saturating_sub(1);
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let p = if i > 0 { p.trim_start() } else { p };
            if i < last {
                p.trim_end()
            } else {
                p
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The parts of a grant Salt compares (`tokenize_grant`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tokens {
    /// The grantee's user name, quotes as written (single quotes removed).
    pub user: String,
    /// The grantee's host.
    pub host: String,
    /// The privileges, each as written (`SELECT`, `LOCK TABLES`,
    /// `UPDATE.col` for a column privilege).
    pub grant: Vec<String>,
    /// `db.table` as written (`` `db`.* ``).
    pub database: String,
}

/// Python's `shlex.shlex` in its non-POSIX mode as Salt configures it:
/// words of letters, digits, `_` and `"`; `'...'` and `` `...` `` kept
/// whole with their quotes; every other character a token by itself.
fn lex(text: &str) -> Vec<String> {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '"';
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_whitespace() {
            continue;
        }
        if is_word(c) {
            let mut w = String::from(c);
            while let Some(&n) = chars.peek() {
                if !is_word(n) {
                    break;
                }
                w.push(n);
                chars.next();
            }
            tokens.push(w);
        } else if c == '\'' || c == '`' {
            let mut w = String::from(c);
            for n in chars.by_ref() {
                w.push(n);
                if n == c {
                    break;
                }
            }
            tokens.push(w);
        } else {
            tokens.push(c.to_string());
        }
    }
    tokens
}

/// Salt's `_grant_to_tokens` of a statement (a `SHOW GRANTS` line, or a
/// generated grant with its user and host given).
pub fn tokenize(statement: &str, given: Option<(&str, &str)>) -> Tokens {
    let t = lex(statement);
    let at = |i: usize| t.get(i).map(String::as_str);
    let mut grants = Vec::new();
    let mut multiword: Vec<String> = Vec::new();
    let mut pos = 1;
    let mut database = String::new();
    let mut phrase = "grants";
    let mut column = false;
    let mut current = String::new();
    let (mut user, mut host) = match given {
        Some((u, h)) => (u.to_string(), Some(h.to_string())),
        None => (String::new(), None),
    };
    for token in t.iter().skip(1) {
        let token = token.as_str();
        match (token, phrase) {
            (",", "grants") => {
                pos += 1;
                continue;
            }
            ("(", "grants") => {
                pos += 1;
                column = true;
                continue;
            }
            (")", "grants") => {
                pos += 1;
                column = false;
                continue;
            }
            ("ON", "grants") => {
                phrase = "db";
                pos += 1;
                continue;
            }
            ("TO", "tables") => {
                phrase = "user";
                pos += 1;
                continue;
            }
            ("@", "pre-host") => {
                phrase = "host";
                pos += 1;
                continue;
            }
            _ => {}
        }
        match phrase {
            "grants" => {
                let next = at(pos + 1);
                if matches!(next, Some(",") | Some("ON") | Some("(") | Some(")")) {
                    if !multiword.is_empty() {
                        multiword.push(token.to_string());
                        grants.push(multiword.join(" "));
                        multiword.clear();
                    } else if !column {
                        current = token.to_string();
                        grants.push(token.to_string());
                    } else {
                        grants.push(format!("{current}.{token}"));
                    }
                } else {
                    multiword.push(token.to_string());
                }
            }
            "db" => {
                database.push_str(token);
                match at(pos + 1) {
                    Some(".") => phrase = "tables",
                    None => break,
                    _ => {}
                }
            }
            "tables" => database.push_str(token),
            "user" => {
                if given.is_some() {
                    break;
                }
                user.push_str(token);
                if at(pos + 1) == Some("@") {
                    phrase = "pre-host";
                }
            }
            "host" => {
                host = Some(token.to_string());
                break;
            }
            _ => {}
        }
        pos += 1;
    }
    let (user, host) = match (given, host) {
        (Some(_), h) => (user, h.unwrap_or_default()),
        (None, Some(h)) => (
            user.trim_matches('\'').to_string(),
            h.trim_matches('\'').to_string(),
        ),
        (None, None) => (user, String::new()),
    };
    Tokens {
        user,
        host,
        grant: grants,
        database,
    }
}

/// Salt's `_resolve_grant_aliases`: the names newer MariaDB shows for old
/// privileges, so a grant written with the old name is found.
pub fn resolve_aliases(grants: Vec<String>, server_version: &str) -> Vec<String> {
    if !server_version.contains("MariaDB") {
        return grants;
    }
    grants
        .into_iter()
        .map(|g| match g.as_str() {
            "REPLICATION REPLICA" if version_at_least(server_version, "10.5.1") => {
                "REPLICATION SLAVE".to_string()
            }
            "REPLICATION CLIENT" if version_at_least(server_version, "10.5.2") => {
                "BINLOG MONITOR".to_string()
            }
            "REPLICA MONITOR" if version_at_least(server_version, "10.5.9") => {
                "SLAVE MONITOR".to_string()
            }
            _ => g,
        })
        .collect()
}

/// Salt's comparison form of a user, host or database: without `"`, `\`
/// and backticks.
pub fn bare(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, '"' | '\\' | '`'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_grants_line_tokens() {
        let t = tokenize(
            "GRANT SELECT, INSERT, LOCK TABLES ON `my\\_db`.* TO `u1`@`localhost` WITH GRANT OPTION",
            None,
        );
        assert_eq!(t.grant, vec!["SELECT", "INSERT", "LOCK TABLES"]);
        assert_eq!(t.database, "`my\\_db`.*");
        assert_eq!(t.user, "`u1`");
        assert_eq!(t.host, "`localhost`");
        assert_eq!(bare(&t.database), "my_db.*");
    }

    #[test]
    fn column_privileges_and_quoted_hosts() {
        let t = tokenize(
            "GRANT SELECT (a, b), UPDATE (c) ON `d`.`t` TO 'u'@'10.0.0.%'",
            None,
        );
        // As Salt's `_grant_to_tokens` answers (checked against it).
        assert_eq!(
            t.grant,
            vec!["SELECT", "SELECT.a", "SELECT.b", "UPDATE", "UPDATE.c"]
        );
        assert_eq!(t.database, "`d`.`t`");
        assert_eq!((t.user.as_str(), t.host.as_str()), ("u", "10.0.0.%"));
    }

    #[test]
    fn generate_quotes_and_normalizes() {
        let g = generate("select,insert", "my_db.*", "u", "%", true, true).unwrap();
        assert_eq!(
            g.sql,
            "GRANT SELECT, INSERT ON `my\\_db`.* TO 'u'@'%' WITH GRANT OPTION"
        );
        let g = generate("all", "*.*", "u", "h", false, true).unwrap();
        assert_eq!(g.sql, "GRANT ALL PRIVILEGES ON *.* TO 'u'@'h'");
        assert_eq!(
            generate("select; drop", "a.*", "u", "h", false, true).unwrap_err(),
            "Invalid grant : 'SELECT; DROP'"
        );
    }

    #[test]
    fn versions_compare_numerically() {
        assert!(version_at_least("10.11.19-MariaDB-0+deb12u1", "10.4"));
        assert!(!version_at_least("10.3.39-MariaDB", "10.4"));
        assert!(version_at_least("8.0.36", "8.0.11"));
    }
}
