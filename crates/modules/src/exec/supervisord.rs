//! Salt's `supervisord` execution module: processes of a running
//! `supervisord` listed, started, stopped, added and removed through its
//! `supervisorctl`, with the daemon's config (`conf_file`), another
//! `supervisorctl` (`bin_env`: the binary or a virtualenv holding it) and
//! another user (`user`) as Salt takes them.

use halite_state::{CmdOptions, Map, Value};

use crate::exec::signature::{self, Signature};
use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "supervisord",
    functions: &[
        ExecFunction::new("start", |a, h| action_fn("start", a, h)),
        ExecFunction::new("stop", |a, h| action_fn("stop", a, h)),
        ExecFunction::new("restart", |a, h| action_fn("restart", a, h)),
        ExecFunction::new("add", |a, h| group_fn("add", a, h)),
        ExecFunction::new("remove", |a, h| group_fn("remove", a, h)),
        ExecFunction::new("reread", reread_fn),
        ExecFunction::new("update", update_fn),
        ExecFunction::new("status", status_fn),
        ExecFunction::new("status_raw", status_raw_fn),
        ExecFunction::new("status_bool", status_bool_fn),
        ExecFunction::new("custom", custom_fn),
        ExecFunction::new("options", options_fn),
    ],
};

/// The Python signatures of the functions, for Salt's argument errors.
const SIGNATURES: &[Signature] = &[
    Signature::new("start", &[], &["name", "user", "conf_file", "bin_env"]),
    Signature::new("stop", &[], &["name", "user", "conf_file", "bin_env"]),
    Signature::new("restart", &[], &["name", "user", "conf_file", "bin_env"]),
    Signature::new("add", &["name"], &["user", "conf_file", "bin_env"]),
    Signature::new("remove", &["name"], &["user", "conf_file", "bin_env"]),
    Signature::new("reread", &[], &["user", "conf_file", "bin_env"]),
    Signature::new("update", &[], &["user", "conf_file", "bin_env", "name"]),
    Signature::new("status", &[], &["name", "user", "conf_file", "bin_env"]),
    Signature::new("status_raw", &[], &["name", "user", "conf_file", "bin_env"]),
    Signature::new(
        "status_bool",
        &["name"],
        &["expected_state", "user", "conf_file", "bin_env"],
    ),
    Signature::new("custom", &["command"], &["user", "conf_file", "bin_env"]),
    Signature::new("options", &["name"], &["conf_file"]),
];

/// How to reach the daemon: Salt's `user`, `conf_file` and `bin_env`,
/// which every function takes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ctl {
    /// Run `supervisorctl` as this user.
    pub user: Option<String>,
    /// `supervisorctl -c <conf_file>`.
    pub conf_file: Option<String>,
    /// The `supervisorctl` binary, or a virtualenv with `bin/supervisorctl`.
    pub bin_env: Option<String>,
}

impl Ctl {
    /// The connection arguments of an execution call; `first` is the
    /// position of `user` (the others follow it, as in Salt's signatures).
    fn from_args(args: &Args, first: usize) -> Self {
        Ctl {
            user: args.get_str(first, "user"),
            conf_file: args.get_str(first + 1, "conf_file"),
            bin_env: args.get_str(first + 2, "bin_env"),
        }
    }

    /// Salt's `_get_supervisorctl_bin`: `supervisorctl` on `PATH`, in a
    /// virtualenv's `bin/`, or the given path itself.
    fn binary(&self) -> Result<String, ExecError> {
        let not_found = || ExecError::Execution("Could not find a `supervisorctl` binary".into());
        match self.bin_env.as_deref().filter(|b| !b.is_empty()) {
            None => crate::exec::cmd::which("supervisorctl").ok_or_else(not_found),
            Some(env) if std::path::Path::new(env).is_dir() => {
                let bin = std::path::Path::new(env).join("bin").join("supervisorctl");
                if bin.is_file() {
                    Ok(bin.to_string_lossy().into_owned())
                } else {
                    Err(not_found())
                }
            }
            Some(bin) => Ok(bin.to_string()),
        }
    }

    /// Runs `supervisorctl [-c conf] <words...>` and returns Salt's
    /// `_get_return`: its stdout, prefixed with `ERROR: ` when it failed
    /// and does not already say so.
    pub fn run(&self, words: &[&str]) -> Result<String, ExecError> {
        let (retcode, stdout) = self.run_raw(words)?;
        if retcode != 0 && !stdout.contains("ERROR") {
            return Ok(format!("ERROR: {stdout}"));
        }
        Ok(stdout)
    }

    /// Runs `supervisorctl [-c conf] <words...>`: its exit code and stdout.
    fn run_raw(&self, words: &[&str]) -> Result<(i32, String), ExecError> {
        let mut argv = vec![self.binary()?];
        if let Some(conf) = &self.conf_file {
            argv.push("-c".into());
            argv.push(conf.clone());
        }
        argv.extend(words.iter().map(|w| w.to_string()));
        let cmd = argv
            .iter()
            .map(|w| crate::host::shell_quote(w))
            .collect::<Vec<_>>()
            .join(" ");
        let opts = CmdOptions {
            runas: self.user.clone(),
            ..CmdOptions::default()
        };
        tracing::debug!(%cmd, "running supervisorctl");
        let out = crate::command::run_command(&cmd, &opts)
            .map_err(|e| ExecError::Execution(format!("Unable to run {}: {e}", argv[0])))?;
        Ok((out.retcode, out.stdout))
    }

    /// Salt's `supervisord.start`/`stop`/`restart` of `name` (`all` by
    /// default); a group's `grp:*` is passed as `grp:`.
    pub fn action(&self, verb: &str, name: &str) -> Result<String, ExecError> {
        let group = name.strip_suffix('*').filter(|n| n.ends_with(':'));
        self.run(&[verb, group.unwrap_or(name)])
    }

    /// Salt's `supervisord.add`/`remove`: a group is named without its `:`.
    pub fn group_action(&self, verb: &str, name: &str) -> Result<String, ExecError> {
        self.run(&[verb, group_name(name)])
    }

    /// Salt's `supervisord.reread`.
    pub fn reread(&self) -> Result<String, ExecError> {
        self.run(&["reread"])
    }

    /// Salt's `supervisord.update`, of every group or only `name`.
    pub fn update(&self, name: Option<&str>) -> Result<String, ExecError> {
        match name.filter(|n| !n.is_empty()) {
            Some(n) => self.run(&["update", group_name(n)]),
            None => self.run(&["update"]),
        }
    }

    /// Salt's `supervisord.status_raw`.
    pub fn status_raw(&self, name: Option<&str>) -> Result<String, ExecError> {
        match name.filter(|n| !n.is_empty()) {
            Some(n) => self.run(&["status", n]),
            None => self.run(&["status"]),
        }
    }

    /// Salt's `supervisord.status`: each process's state and reason.
    ///
    /// Unlike Salt, whose `status` reads the `ERROR: ` it prefixed to the
    /// output of supervisor 4.2's exit code 3 ("some process is not
    /// running") as a process named `ERROR:`, the lines are read as they
    /// are: a stopped process is a process in state `STOPPED`.
    pub fn status(&self, name: Option<&str>) -> Result<Vec<Process>, ExecError> {
        let mut words = vec!["status"];
        words.extend(name.filter(|n| !n.is_empty()));
        let (retcode, stdout) = self.run_raw(&words)?;
        let text = match (retcode, name) {
            (0 | 3, _) => stdout,
            // Not even a list: the daemon is unreachable or the config
            // wrong. Salt parses the error text into bogus processes.
            (_, None) => {
                return Err(ExecError::Execution(format!(
                    "supervisorctl status failed ({retcode}): {stdout}; \
                     is supervisord running with this conf_file?"
                )))
            }
            (_, Some(_)) => stdout,
        };
        Ok(text.lines().filter_map(parse_status_line).collect())
    }
}

/// `grp:` and `grp:*` name the group `grp` for `add`/`remove`/`update`.
fn group_name(name: &str) -> &str {
    name.strip_suffix(":*")
        .or_else(|| name.strip_suffix(':'))
        .unwrap_or(name)
}

/// One line of `supervisorctl status`.
#[derive(Debug, Clone, PartialEq)]
pub struct Process {
    /// `prog` or `group:prog`.
    pub name: String,
    /// `RUNNING`, `STOPPED`...
    pub state: String,
    /// The rest of the line (`pid 12, uptime 0:00:01`, `Not started`).
    pub reason: String,
}

/// Salt's split of a status line: name, state, and the rest.
fn parse_status_line(line: &str) -> Option<Process> {
    let mut words = line.split_whitespace();
    let name = words.next()?.to_string();
    let state = words.next().unwrap_or_default().to_string();
    let rest = line.trim_start();
    let rest = rest[name.len()..].trim_start();
    let reason = rest[state.len()..].trim().to_string();
    Some(Process {
        name,
        state,
        reason,
    })
}

/// `status` as Salt returns it: `{name: {state, reason}}`.
pub fn status_value(processes: &[Process]) -> Value {
    let mut ret = Map::new();
    for p in processes {
        let mut one = Map::new();
        one.insert("state".into(), Value::from(p.state.clone()));
        one.insert("reason".into(), Value::from(p.reason.clone()));
        ret.insert(p.name.clone(), Value::Object(one));
    }
    Value::Object(ret)
}

/// Under `test=True` a function that would change the daemon's processes
/// says what it would run instead of running it. Salt runs it anyway;
/// halite does not, so a dry run (or the registry's dispatch probe, which
/// calls every function with no arguments) never stops `all` programs.
fn test_mode(host: &Host, verb: &str, name: &str) -> Option<Value> {
    host.test_mode().then(|| {
        Value::from(
            format!("test=True: would run supervisorctl {verb} {name}")
                .trim_end()
                .to_string(),
        )
    })
}

/// `supervisord.start`/`stop`/`restart [name=all]`.
fn action_fn(verb: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, verb, args)?;
    let name = args.get_str(0, "name").unwrap_or_else(|| "all".into());
    if let Some(said) = test_mode(host, verb, &name) {
        return Ok(said);
    }
    Ok(Value::from(Ctl::from_args(args, 1).action(verb, &name)?))
}

/// `supervisord.add`/`remove <name>`.
fn group_fn(verb: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, verb, args)?;
    let name = args.require_str(0, "name", verb)?;
    if let Some(said) = test_mode(host, verb, &name) {
        return Ok(said);
    }
    Ok(Value::from(
        Ctl::from_args(args, 1).group_action(verb, &name)?,
    ))
}

fn reread_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "reread", args)?;
    if let Some(said) = test_mode(host, "reread", "") {
        return Ok(said);
    }
    Ok(Value::from(Ctl::from_args(args, 0).reread()?))
}

fn update_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "update", args)?;
    let name = args.get_str(3, "name");
    if let Some(said) = test_mode(host, "update", name.as_deref().unwrap_or("")) {
        return Ok(said);
    }
    Ok(Value::from(
        Ctl::from_args(args, 0).update(name.as_deref())?,
    ))
}

fn status_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "status", args)?;
    let name = args.get_str(0, "name");
    Ok(status_value(
        &Ctl::from_args(args, 1).status(name.as_deref())?,
    ))
}

fn status_raw_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "status_raw", args)?;
    let name = args.get_str(0, "name");
    Ok(Value::from(
        Ctl::from_args(args, 1).status_raw(name.as_deref())?,
    ))
}

/// `supervisord.status_bool <name> [expected_state]`: whether the process
/// exists (in that state).
fn status_bool_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "status_bool", args)?;
    let name = args.require_str(0, "name", "status_bool")?;
    let expected = args.get_str(1, "expected_state");
    let ctl = Ctl::from_args(args, 2);
    // Exit code 3 is supervisor 4.2's "not running", not a failure (Salt
    // prefixes `ERROR: ` there and so never finds a stopped process).
    let last = ctl
        .run_raw(&["status", &name])?
        .1
        .lines()
        .filter_map(parse_status_line)
        .next_back();
    Ok(Value::Bool(match last {
        Some(p) if p.reason != "(no such process)" && p.name == name => {
            expected.is_none_or(|e| e == p.state)
        }
        _ => false,
    }))
}

/// `supervisord.custom <command>`: any `supervisorctl` command line.
fn custom_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "custom", args)?;
    let command = args.require_str(0, "command", "custom")?;
    if let Some(said) = test_mode(host, &command, "") {
        return Ok(said);
    }
    let words: Vec<&str> = command.split_whitespace().collect();
    Ok(Value::from(Ctl::from_args(args, 1).run(&words)?))
}

/// `supervisord.options <name> [conf_file]`: the `[program:<name>]`
/// section of the daemon's config, numbers and booleans typed as Salt's
/// `to_num` and its `true`/`false` check do.
fn options_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "options", args)?;
    let name = args.require_str(0, "name", "options")?;
    let conf = match args.get_str(1, "conf_file") {
        Some(c) => c,
        None => ["/etc/supervisor/supervisord.conf", "/etc/supervisord.conf"]
            .iter()
            .find(|p| std::path::Path::new(p).exists())
            .map(|p| p.to_string())
            .ok_or_else(|| ExecError::Execution("No suitable config file found".into()))?,
    };
    let text = std::fs::read_to_string(&conf)
        .map_err(|e| ExecError::Execution(format!("Unable to read from {conf}: {e}")))?;
    let section = format!("program:{name}");
    let items = ini_section(&text, &section)
        .ok_or_else(|| ExecError::Execution(format!("Process '{name}' not found")))?;
    let mut ret = Map::new();
    for (key, val) in items {
        let val = val.split(';').next().unwrap_or_default().trim().to_string();
        let typed = if let Ok(i) = val.parse::<i64>() {
            Value::from(i)
        } else if let Ok(f) = val.parse::<f64>() {
            Value::from(f)
        } else if val.eq_ignore_ascii_case("true") {
            Value::Bool(true)
        } else if val.eq_ignore_ascii_case("false") {
            Value::Bool(false)
        } else {
            Value::from(val)
        };
        ret.insert(key, typed);
    }
    Ok(Value::Object(ret))
}

/// The `key = value` lines of `[section]` of an INI file (keys lowercased
/// as Python's configparser does), `None` when the section is absent.
fn ini_section(text: &str, section: &str) -> Option<Vec<(String, String)>> {
    let mut found = false;
    let mut inside = false;
    let mut items: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') && trimmed.ends_with(']') {
            inside = trimmed[1..trimmed.len() - 1].trim() == section;
            found |= inside;
            continue;
        }
        if !inside || trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            // A continuation line of the previous value.
            if let Some(last) = items.last_mut() {
                last.1.push('\n');
                last.1.push_str(trimmed);
            }
            continue;
        }
        if let Some(pos) = trimmed.find(['=', ':']) {
            let key = trimmed[..pos].trim().to_lowercase();
            let val = trimmed[pos + 1..].trim().to_string();
            items.retain(|(k, _)| *k != key);
            items.push((key, val));
        }
    }
    found.then_some(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_split_as_salt_does() {
        let p = parse_status_line("grp:sleeper   RUNNING   pid 12, uptime 0:00:01").unwrap();
        assert_eq!(p.name, "grp:sleeper");
        assert_eq!(p.state, "RUNNING");
        assert_eq!(p.reason, "pid 12, uptime 0:00:01");
        let p = parse_status_line("sleeper STOPPED").unwrap();
        assert_eq!(p.reason, "");
        assert!(parse_status_line("   ").is_none());
    }

    #[test]
    fn group_names_lose_their_colon() {
        assert_eq!(group_name("grp:"), "grp");
        assert_eq!(group_name("grp:*"), "grp");
        assert_eq!(group_name("prog"), "prog");
    }

    #[test]
    fn ini_sections_are_read_like_configparser() {
        let text = "[program:a]\ncommand = sleep 1 ; comment\nAutostart=true\n\n[program:b]\nx=1\n";
        let items = ini_section(text, "program:a").unwrap();
        assert_eq!(
            items,
            vec![
                ("command".to_string(), "sleep 1 ; comment".to_string()),
                ("autostart".to_string(), "true".to_string())
            ]
        );
        assert!(ini_section(text, "program:c").is_none());
    }
}
