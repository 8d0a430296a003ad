//! Talking to a MySQL or MariaDB server through the server's own command
//! line client (`mariadb`, else `mysql`) in XML batch mode.
//!
//! Why the client and not a Rust driver crate: docs/mysql.md has the
//! measurements. In short, the `mysql` crate adds some 44 crates (ICU and
//! `url` among them) to every build of this crate, while the client ships
//! with every server package, reads MySQL option files (Salt's
//! `connection_default_file`) exactly as the server's own tools do, and
//! speaks every authentication plugin the server does (`unix_socket` for
//! Debian's root). The SQL goes in on stdin and the password in a private
//! option file, so neither shows in `ps`.

use std::io::Write;

use halite_salt_rules::shell::shlex_quote;
use halite_state::{CmdOptions, Map, Value};

use crate::exec::py_truth;

/// How to reach the server: Salt's `connection_*` arguments, or the
/// `mysql.*` config keys when an argument is not given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConnArgs {
    /// `connection_host` / `mysql.host`.
    pub host: Option<String>,
    /// `connection_port` / `mysql.port`.
    pub port: Option<String>,
    /// `connection_user` / `mysql.user`.
    pub user: Option<String>,
    /// `connection_pass` / `mysql.pass`.
    pub pass: Option<String>,
    /// `connection_db` / `mysql.db`: the default database.
    pub db: Option<String>,
    /// `connection_unix_socket` / `mysql.unix_socket`.
    pub unix_socket: Option<String>,
    /// `connection_default_file` / `mysql.default_file`: a MySQL option file.
    pub default_file: Option<String>,
    /// `connection_charset` / `mysql.charset`.
    pub charset: Option<String>,
}

impl ConnArgs {
    /// Salt's `_connect` argument rules: a `connection_<x>` keyword wins;
    /// else `mysql.<x>` from the minion config or pillar (`lookup`), which
    /// is not consulted at all when `connection_default_file` is given (so
    /// the file's settings are not overridden). Empty values count as not
    /// given, as in Salt. With nothing given anywhere no option file is
    /// read, as Salt reads none (`/etc/mysql/debian.cnf` only when named).
    pub fn resolve(kwargs: &Map, lookup: &dyn Fn(&str) -> Option<Value>) -> Self {
        let use_config = !kwargs.contains_key("connection_default_file");
        let get = |name: &str, config: bool| -> Option<String> {
            let v = match kwargs.get(&format!("connection_{name}")) {
                Some(v) => Some(v.clone()),
                None if config => lookup(&format!("mysql.{name}")),
                None => None,
            };
            v.filter(py_truth).map(|v| match v {
                Value::String(s) => s,
                other => halite_salt_rules::pyfmt::python_str(&other),
            })
        };
        ConnArgs {
            host: get("host", use_config),
            port: get("port", use_config),
            user: get("user", use_config),
            pass: get("pass", use_config),
            db: get("db", use_config),
            unix_socket: get("unix_socket", use_config),
            default_file: get("default_file", use_config),
            // Salt reads the charset from the config even beside a default file.
            charset: get("charset", true),
        }
    }
}

/// Whether `path` is a file this process can read (the client refuses to
/// start on a defaults file it cannot open; PyMySQL skips such a file).
fn readable(path: &str) -> bool {
    std::path::Path::new(path).is_file() && std::fs::File::open(path).is_ok()
}

/// One result set: its column names and rows (`None` is SQL NULL).
///
/// Every value is text, as Salt's `mysql.query` returns them (it converts
/// each column with `str`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResultSet {
    /// Column names, in order (empty when the set has no rows: the client's
    /// XML output carries names only inside rows).
    pub columns: Vec<String>,
    /// The rows.
    pub rows: Vec<Vec<Option<String>>>,
}

impl ResultSet {
    /// The first column of the first row, if any.
    pub fn scalar(&self) -> Option<&str> {
        self.rows.first()?.first()?.as_deref()
    }
    /// Each row as a map from column name to value (Salt's `DictCursor`).
    pub fn dict_rows(&self) -> Vec<Map> {
        self.rows
            .iter()
            .map(|row| {
                self.columns
                    .iter()
                    .zip(row)
                    .map(|(c, v)| (c.clone(), v.clone().map_or(Value::Null, Value::from)))
                    .collect()
            })
            .collect()
    }
}

/// An error from the server or the client, worded as Salt words
/// `__context__["mysql.error"]`: `MySQL Error 1045: Access denied ...`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct MysqlError(pub String);

/// Quotes `text` as an SQL string literal, escaping as the MySQL client
/// libraries do (`mysql_real_escape_string`, PyMySQL's `escape_string`).
pub fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\0' => out.push_str("\\0"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\x1a' => out.push_str("\\Z"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// The client program: `mariadb`, else `mysql`, from `PATH`.
fn client_program() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["mariadb", "mysql"].iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// A value for a MySQL option file, double-quoted with the escapes the
/// option-file reader undoes.
fn option_value(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Runs `sql` (one or more `;`-terminated statements) in one session and
/// returns every result set it produced, in order. The session uses
/// `database` as its default database when given (else `connection_db`).
pub fn run_sql(
    conn: &ConnArgs,
    database: Option<&str>,
    sql: &str,
) -> Result<Vec<ResultSet>, MysqlError> {
    let program = client_program().ok_or_else(|| {
        MysqlError(
            "MySQL Error: neither the `mariadb` nor the `mysql` client program was found in \
             PATH; install the server's client package (mariadb-client or mysql-client)"
                .to_string(),
        )
    })?;
    // The option file: the user's default file (included, so its settings
    // apply), then the password, which must win over the file's.
    let default_file = conn.default_file.as_deref().filter(|f| readable(f));
    let private = match &conn.pass {
        Some(pass) => Some(private_option_file(default_file, pass)?),
        None => None,
    };
    let mut words: Vec<String> = vec![program.to_string_lossy().into_owned()];
    match (&private, default_file) {
        (Some(file), _) => words.push(format!("--defaults-file={}", file.path().display())),
        (None, Some(file)) => words.push(format!("--defaults-file={file}")),
        // Salt's client reads no option file unless told to: neither do we.
        (None, None) => words.push("--no-defaults".to_string()),
    }
    let mut opt = |flag: &str, value: &Option<String>| {
        if let Some(v) = value {
            words.push(format!("--{flag}={v}"));
        }
    };
    opt("host", &conn.host);
    opt("port", &conn.port);
    opt("user", &conn.user);
    opt("socket", &conn.unix_socket);
    opt("default-character-set", &conn.charset);
    if let Some(db) = database.map(str::to_string).or_else(|| conn.db.clone()) {
        words.push(format!("--database={db}"));
    }
    // PyMySQL's default connect timeout.
    words.push("--connect-timeout=10".to_string());
    words.push("--batch".to_string());
    words.push("--xml".to_string());
    let cmd = words
        .iter()
        .map(|w| shlex_quote(w))
        .collect::<Vec<_>>()
        .join(" ");
    let opts = CmdOptions {
        stdin: Some(sql.to_string()),
        ..CmdOptions::default()
    };
    if sql.contains("IDENTIFIED") || sql.contains("PASSWORD(") {
        tracing::debug!(
            database,
            "mysql: a statement carrying a password (not logged)"
        );
    } else {
        tracing::debug!(database, "mysql: {sql}");
    }
    let out = crate::command::run_command(&cmd, &opts)
        .map_err(|e| MysqlError(format!("MySQL Error: cannot run {}: {e}", words[0])))?;
    if out.retcode != 0 {
        return Err(MysqlError(client_error(&out.stderr)));
    }
    Ok(parse_xml(&out.stdout))
}

/// A 0600 temp option file holding the password (and including
/// `default_file` first when given).
fn private_option_file(
    default_file: Option<&str>,
    pass: &str,
) -> Result<tempfile::NamedTempFile, MysqlError> {
    let err = |e: std::io::Error| MysqlError(format!("MySQL Error: cannot write a temp file: {e}"));
    let mut file = tempfile::Builder::new()
        .prefix("halite-mysql-")
        .suffix(".cnf")
        .tempfile()
        .map_err(err)?;
    let mut text = String::new();
    if let Some(f) = default_file {
        text.push_str(&format!("!include {f}\n"));
    }
    text.push_str(&format!("[client]\npassword={}\n", option_value(pass)));
    file.write_all(text.as_bytes()).map_err(err)?;
    file.flush().map_err(err)?;
    Ok(file)
}

/// Salt's wording of a client error: `ERROR 1045 (28000): Access denied`
/// (or `... at line 2: ...`) becomes `MySQL Error 1045: Access denied`.
pub fn client_error(stderr: &str) -> String {
    for line in stderr.lines() {
        let Some(rest) = line.strip_prefix("ERROR ") else {
            continue;
        };
        let code: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if code.is_empty() {
            continue;
        }
        let msg = match rest.find(": ") {
            Some(i) => rest[i + 2..].to_string(),
            None => rest[code.len()..].trim().to_string(),
        };
        // The rest of the message may continue on the following lines.
        let tail: Vec<&str> = stderr
            .lines()
            .skip_while(|l| *l != line)
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .collect();
        let mut msg = msg;
        for t in tail {
            msg.push('\n');
            msg.push_str(t);
        }
        return format!("MySQL Error {code}: {msg}");
    }
    format!("MySQL Error: {}", stderr.trim())
}

/// Parses the client's `--xml` output: `<resultset>`s of `<row>`s of
/// `<field name="...">text</field>` (`xsi:nil="true"` for NULL).
pub fn parse_xml(out: &str) -> Vec<ResultSet> {
    let mut sets = Vec::new();
    let mut rest = out;
    while let Some(start) = rest.find("<resultset") {
        rest = &rest[start..];
        let Some(open_end) = rest.find('>') else {
            break;
        };
        let self_closing = rest[..open_end].ends_with('/');
        rest = &rest[open_end + 1..];
        let mut set = ResultSet::default();
        if !self_closing {
            let end = rest.find("</resultset>").unwrap_or(rest.len());
            parse_rows(&rest[..end], &mut set);
            rest = &rest[end..];
        }
        sets.push(set);
    }
    sets
}

/// The `<row>`s of one result set's body.
fn parse_rows(body: &str, set: &mut ResultSet) {
    let mut rest = body;
    while let Some(start) = rest.find("<row>") {
        rest = &rest[start + 5..];
        let end = rest.find("</row>").unwrap_or(rest.len());
        let row_text = &rest[..end];
        rest = &rest[end..];
        let mut names = Vec::new();
        let mut row = Vec::new();
        let mut r = row_text;
        while let Some(f) = r.find("<field name=\"") {
            r = &r[f + 13..];
            let Some(q) = r.find('"') else { break };
            names.push(unescape(&r[..q]));
            r = &r[q + 1..];
            let Some(gt) = r.find('>') else { break };
            if r[..gt].contains("xsi:nil=\"true\"") || r[..gt].ends_with('/') {
                row.push(None);
                r = &r[gt + 1..];
                continue;
            }
            r = &r[gt + 1..];
            let close = r.find("</field>").unwrap_or(r.len());
            row.push(Some(unescape(&r[..close])));
            r = &r[close..];
        }
        if set.columns.is_empty() {
            set.columns = names;
        }
        set.rows.push(row);
    }
}

/// Undoes XML's character escapes.
fn unescape(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let Some(semi) = rest.find(';') else { break };
        let entity = &rest[1..semi];
        let decoded = match entity {
            "lt" => Some('<'),
            "gt" => Some('>'),
            "amp" => Some('&'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            e if e.starts_with("#x") => u32::from_str_radix(&e[2..], 16)
                .ok()
                .and_then(char::from_u32),
            e if e.starts_with('#') => e[1..].parse().ok().and_then(char::from_u32),
            _ => None,
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_with_null_entities_and_two_sets() {
        let out = "<?xml version=\"1.0\"?>\n\n<resultset statement=\"x\" xmlns:xsi=\"y\">\n  <row>\n\t<field name=\"a\">1</field>\n\t<field name=\"b\" xsi:nil=\"true\" />\n\t<field name=\"c\">x&lt;&amp;&quot;y\nz</field>\n  </row>\n</resultset>\n<resultset statement=\"e\" xmlns:xsi=\"y\"></resultset>\n";
        let sets = parse_xml(out);
        assert_eq!(sets.len(), 2);
        assert_eq!(sets[0].columns, vec!["a", "b", "c"]);
        assert_eq!(
            sets[0].rows,
            vec![vec![Some("1".into()), None, Some("x<&\"y\nz".into())]]
        );
        assert!(sets[1].rows.is_empty());
    }

    #[test]
    fn literal_escapes_like_the_client_library() {
        assert_eq!(literal("it's \"a\"\\\n"), r#"'it\'s \"a\"\\\n'"#);
    }

    #[test]
    fn client_errors_are_worded_as_salt() {
        assert_eq!(
            client_error("ERROR 1146 (42S02) at line 1: Table 'nope.x' doesn't exist\n"),
            "MySQL Error 1146: Table 'nope.x' doesn't exist"
        );
        assert_eq!(
            client_error("ERROR 1045 (28000): Access denied for user 'x'@'localhost'\n"),
            "MySQL Error 1045: Access denied for user 'x'@'localhost'"
        );
    }

    #[test]
    fn default_file_keeps_config_out_and_empty_values_are_not_given() {
        let mut kw = Map::new();
        kw.insert("connection_default_file".into(), Value::from("/x.cnf"));
        kw.insert("connection_pass".into(), Value::from(""));
        let lookup = |k: &str| (k == "mysql.user").then(|| Value::from("cfg"));
        let a = ConnArgs::resolve(&kw, &lookup);
        assert_eq!(a.default_file.as_deref(), Some("/x.cnf"));
        assert_eq!(a.user, None);
        assert_eq!(a.pass, None);
        let b = ConnArgs::resolve(&Map::new(), &lookup);
        assert_eq!(b.user.as_deref(), Some("cfg"));
    }
}
