//! Salt's `syslog` returner (`salt/returners/syslog_return.py`): the
//! return as one JSON line (Python's `json.dumps`) to the local syslog,
//! at `syslog.level` (default `LOG_INFO`) of `syslog.facility` (default
//! `LOG_USER`), with ident `syslog.tag` (at most 32 characters; default
//! the program's name) and `syslog.options` (`LOG_PID` adds the pid).
//!
//! The line is what glibc's `syslog(3)` writes for Python's `syslog`
//! module (`<PRI>Mmm dd hh:mm:ss ident[pid]: message`), sent as one
//! datagram to the syslog socket: `/dev/log`, or `syslog.socket` (halite's
//! own option, for a syslog daemon listening elsewhere).

use std::os::unix::net::UnixDatagram;

use halite_state::Value;

use super::options::Lookup;
use super::ReturnerError;
use crate::Host;

/// Salt's virtual name, the prefix of its options.
const NAME: &str = "syslog";

/// Python's `syslog` module's priority names.
const LEVELS: &[(&str, u32)] = &[
    ("LOG_EMERG", 0),
    ("LOG_ALERT", 1),
    ("LOG_CRIT", 2),
    ("LOG_ERR", 3),
    ("LOG_WARNING", 4),
    ("LOG_NOTICE", 5),
    ("LOG_INFO", 6),
    ("LOG_DEBUG", 7),
];

/// Python's `syslog` module's facility names.
const FACILITIES: &[(&str, u32)] = &[
    ("LOG_KERN", 0),
    ("LOG_USER", 8),
    ("LOG_MAIL", 16),
    ("LOG_DAEMON", 24),
    ("LOG_AUTH", 32),
    ("LOG_SYSLOG", 40),
    ("LOG_LPR", 48),
    ("LOG_NEWS", 56),
    ("LOG_UUCP", 64),
    ("LOG_CRON", 72),
    ("LOG_AUTHPRIV", 80),
    ("LOG_FTP", 88),
    ("LOG_LOCAL0", 128),
    ("LOG_LOCAL1", 136),
    ("LOG_LOCAL2", 144),
    ("LOG_LOCAL3", 152),
    ("LOG_LOCAL4", 160),
    ("LOG_LOCAL5", 168),
    ("LOG_LOCAL6", 176),
    ("LOG_LOCAL7", 184),
];

/// Python's `syslog` module's `openlog` options.
const LOG_OPTIONS: &[&str] = &[
    "LOG_PID",
    "LOG_CONS",
    "LOG_NDELAY",
    "LOG_ODELAY",
    "LOG_NOWAIT",
    "LOG_PERROR",
];

/// The value of `name` in `table`, or an error naming what exists.
fn lookup_name(table: &[(&str, u32)], what: &str, name: &str) -> Result<u32, ReturnerError> {
    table
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            ReturnerError::BadOption(format!(
                "syslog has no {what} {name}: use one of {}",
                table.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ))
        })
}

/// `syslog.options` as a list of names (a string is one name).
fn option_names(v: Option<Value>) -> Vec<String> {
    match v {
        Some(Value::Array(a)) => a.iter().map(halite_salt_rules::pyfmt::python_str).collect(),
        Some(Value::String(s)) if !s.is_empty() => vec![s],
        _ => Vec::new(),
    }
}

/// The ident when no `syslog.tag` is set: the program's name, as
/// Python's `syslog.openlog()` takes `sys.argv[0]`.
fn program_name() -> String {
    std::env::args()
        .next()
        .as_deref()
        .and_then(|a| std::path::Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "halite".into())
}

/// The datagram glibc's `syslog(3)` sends for `message`.
pub fn line(priority: u32, ident: &str, pid: bool, message: &str) -> String {
    let stamp = chrono::Local::now().format("%b %e %H:%M:%S");
    let pid = if pid {
        format!("[{}]", std::process::id())
    } else {
        String::new()
    };
    format!("<{priority}>{stamp} {ident}{pid}: {message}")
}

/// `syslog.returner(ret)`.
pub fn returner(_host: &Host, opts: &Lookup<'_>, ret: &Value) -> Result<(), ReturnerError> {
    let level = lookup_name(LEVELS, "level", &opts.string(NAME, "level", "LOG_INFO"))?;
    let facility = lookup_name(
        FACILITIES,
        "facility",
        &opts.string(NAME, "facility", "LOG_USER"),
    )?;
    let options = option_names(opts.get(NAME, "options"));
    if let Some(bad) = options.iter().find(|o| !LOG_OPTIONS.contains(&o.as_str())) {
        return Err(ReturnerError::BadOption(format!(
            "syslog has no option {bad}: use any of {}",
            LOG_OPTIONS.join(", ")
        )));
    }
    let ident = match opts.get(NAME, "tag") {
        Some(Value::String(t)) if t.chars().count() > 32 => {
            return Err(ReturnerError::BadOption(
                "syslog.tag is limited to 32 characters".into(),
            ))
        }
        Some(Value::String(t)) => t,
        Some(_) => {
            return Err(ReturnerError::BadOption(
                "syslog.tag must be a string".into(),
            ))
        }
        None => program_name(),
    };
    let socket = opts.string(NAME, "socket", "/dev/log");
    let message = halite_salt_rules::pyfmt::json_dumps(ret, false, None, true);
    let datagram = line(
        facility | level,
        &ident,
        options.iter().any(|o| o == "LOG_PID"),
        &message,
    );
    let sock = UnixDatagram::unbound()
        .map_err(|e| ReturnerError::Send(format!("cannot open a datagram socket: {e}")))?;
    sock.send_to(datagram.as_bytes(), &socket).map_err(|e| {
        ReturnerError::Send(format!(
            "cannot send to the syslog socket {socket}: {e} (is a syslog daemon running? set syslog.socket to where it listens)"
        ))
    })?;
    Ok(())
}
