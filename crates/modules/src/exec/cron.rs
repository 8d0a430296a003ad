//! Salt's `cron` execution module: a user's crontab read and written with
//! the real `crontab` binary, in Salt's format (everything Salt manages sits
//! below `# Lines below here are managed by Salt, do not edit`, each job's
//! identifier in a `# SALT_CRON_IDENTIFIER:<id>` comment above it), so a
//! crontab Salt wrote is read back here and the other way round.

use std::io::Write;

use halite_state::{Map, Value};

use crate::exec::signature::{self, Signature};
use crate::exec::user::scalar_text;
use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The line above everything Salt manages in a crontab.
pub const TAG: &str = "# Lines below here are managed by Salt, do not edit";
/// The comment key naming a job's identifier.
pub const SALT_CRON_IDENTIFIER: &str = "SALT_CRON_IDENTIFIER";
/// The identifier of a job written without one.
pub const SALT_CRON_NO_IDENTIFIER: &str = "NO ID SET";

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "cron",
    functions: &[
        ExecFunction::new("raw_cron", raw_cron_fn),
        ExecFunction::new("list_tab", list_tab_fn),
        ExecFunction::new("ls", list_tab_fn),
        ExecFunction::new("get_entry", get_entry_fn),
        ExecFunction::new("set_job", set_job_fn),
        ExecFunction::new("set_special", set_special_fn),
        ExecFunction::new("rm_job", rm_job_fn),
        ExecFunction::new("rm", rm_job_fn),
        ExecFunction::new("rm_special", rm_special_fn),
        ExecFunction::new("set_env", set_env_fn),
        ExecFunction::new("rm_env", rm_env_fn),
        ExecFunction::new("write_cron_file", write_cron_file_fn),
        ExecFunction::new("write_cron_file_verbose", write_cron_file_verbose_fn),
    ],
};

/// The Python signatures of the functions, for Salt's argument errors.
const SIGNATURES: &[Signature] = &[
    Signature::new("raw_cron", &["user"], &[]),
    Signature::new("list_tab", &["user"], &[]),
    Signature::new("get_entry", &["user"], &["identifier", "cmd"]),
    Signature::new(
        "set_job",
        &[
            "user", "minute", "hour", "daymonth", "month", "dayweek", "cmd",
        ],
        &["commented", "comment", "identifier"],
    ),
    Signature::new(
        "set_special",
        &["user", "special", "cmd"],
        &["commented", "comment", "identifier"],
    ),
    Signature::new(
        "rm_job",
        &["user", "cmd"],
        &[
            "minute",
            "hour",
            "daymonth",
            "month",
            "dayweek",
            "identifier",
        ],
    ),
    Signature::new("rm_special", &["user", "cmd"], &["special", "identifier"]),
    Signature::new("set_env", &["user", "name"], &["value"]),
    Signature::new("rm_env", &["user", "name"], &[]),
    Signature::new("write_cron_file", &["user", "path"], &[]),
    Signature::new("write_cron_file_verbose", &["user", "path"], &[]),
];

/// A parsed crontab, as Salt's `cron.list_tab` returns it: the lines above
/// the tag (`pre`), the timed jobs (`crons`), the `@reboot`-style jobs
/// (`special`) and the environment lines (`env`), each entry a dict with
/// Salt's keys.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CronTab {
    /// Lines above Salt's tag, kept as they are.
    pub pre: Vec<String>,
    /// `minute hour daymonth month dayweek cmd` jobs.
    pub crons: Vec<Map>,
    /// `@spec cmd` jobs.
    pub special: Vec<Map>,
    /// `NAME=value` lines.
    pub env: Vec<Map>,
}

impl CronTab {
    /// Salt's dict form.
    pub fn to_value(&self) -> Value {
        let list = |v: &[Map]| Value::Array(v.iter().cloned().map(Value::Object).collect());
        let mut m = Map::new();
        m.insert(
            "pre".into(),
            Value::Array(self.pre.iter().cloned().map(Value::from).collect()),
        );
        m.insert("crons".into(), list(&self.crons));
        m.insert("special".into(), list(&self.special));
        m.insert("env".into(), list(&self.env));
        Value::Object(m)
    }
}

fn field<'a>(entry: &'a Map, key: &str) -> &'a Value {
    entry.get(key).unwrap_or(&Value::Null)
}

fn field_str<'a>(entry: &'a Map, key: &str) -> Option<&'a str> {
    entry.get(key).and_then(Value::as_str)
}

fn opt(s: Option<&str>) -> Value {
    s.map(Value::from).unwrap_or(Value::Null)
}

/// Parses crontab text (Salt's `list_tab` on `raw_cron`'s output).
pub fn parse_tab(data: &str) -> CronTab {
    let mut ret = CronTab::default();
    let mut flag = false;
    let mut comment: Option<String> = None;
    let mut identifier: Option<String> = None;
    for raw in data.lines() {
        if raw == TAG {
            flag = true;
            continue;
        }
        if !flag {
            ret.pre.push(raw.to_string());
            continue;
        }
        let (line, commented) = match raw.strip_prefix("#DISABLED#") {
            Some(rest) => (rest, true),
            None => (raw, false),
        };
        if line.starts_with('@') {
            let comps: Vec<&str> = line.split_whitespace().collect();
            if comps.len() < 2 {
                continue;
            }
            let mut dat = Map::new();
            dat.insert("spec".into(), Value::from(comps[0]));
            dat.insert("cmd".into(), Value::from(comps[1..].join(" ")));
            dat.insert("identifier".into(), opt(identifier.take().as_deref()));
            dat.insert("comment".into(), opt(comment.take().as_deref()));
            dat.insert("commented".into(), Value::Bool(commented));
            ret.special.push(dat);
        } else if line.starts_with('#') {
            let mut comment_line = line.trim_start_matches(['#', ' ']).to_string();
            if let Some(pos) = comment_line.find(SALT_CRON_IDENTIFIER) {
                let after = comment_line[pos + SALT_CRON_IDENTIFIER.len()..].to_string();
                comment_line = comment_line[..pos].trim_end().to_string();
                // Python: parts[1][1:] when longer than one character.
                let after = after
                    .split(SALT_CRON_IDENTIFIER)
                    .next()
                    .unwrap_or_default()
                    .to_string();
                if after.chars().count() > 1 {
                    identifier = Some(after.chars().skip(1).collect());
                }
            }
            comment = Some(match comment.take() {
                None => comment_line,
                Some(c) => format!("{c}\n{comment_line}"),
            });
        } else if line
            .find('=')
            .is_some_and(|eq| eq > 0 && line.find(' ').is_none_or(|sp| eq < sp))
        {
            if let Some((name, value)) = line.split_once('=') {
                let mut dat = Map::new();
                dat.insert("name".into(), Value::from(name));
                dat.insert("value".into(), Value::from(value));
                ret.env.push(dat);
            }
        } else {
            let comps: Vec<&str> = line.split(' ').collect();
            if comps.len() > 5 {
                let mut dat = Map::new();
                for (i, key) in ["minute", "hour", "daymonth", "month", "dayweek"]
                    .iter()
                    .enumerate()
                {
                    dat.insert((*key).into(), Value::from(comps[i]));
                }
                dat.insert("identifier".into(), opt(identifier.take().as_deref()));
                dat.insert("cmd".into(), Value::from(comps[5..].join(" ")));
                dat.insert("comment".into(), opt(comment.take().as_deref()));
                dat.insert("commented".into(), Value::Bool(commented));
                ret.crons.push(dat);
            }
        }
    }
    ret
}

/// The comment line Salt writes above a job, if any.
fn entry_comment(entry: &Map, rstrip: bool) -> Option<String> {
    let comment = field_str(entry, "comment");
    let identifier = field_str(entry, "identifier");
    if comment.is_none() && identifier.is_none() {
        return None;
    }
    let mut line = String::from("#");
    if let Some(c) = comment.filter(|c| !c.is_empty()) {
        let c = if rstrip { c.trim_end() } else { c };
        line.push(' ');
        line.push_str(&c.replace('\n', "\n# "));
    }
    if let Some(id) = identifier.filter(|i| !i.is_empty()) {
        line.push_str(&format!(" {SALT_CRON_IDENTIFIER}:{id}"));
    }
    line.push('\n');
    Some(line)
}

/// Renders a crontab as Salt writes it (`_render_tab`).
pub fn render_tab(tab: &CronTab) -> String {
    let mut out = String::new();
    for pre in &tab.pre {
        out.push_str(pre);
        out.push('\n');
    }
    out.push_str(TAG);
    out.push('\n');
    for env in &tab.env {
        let name = field_str(env, "name").unwrap_or_default();
        match field(env, "value") {
            Value::Null => out.push_str(&format!("{name}=\"\"\n")),
            Value::String(s) if s.is_empty() => out.push_str(&format!("{name}=\"\"\n")),
            v => out.push_str(&format!("{name}={}\n", crate::exec::py_str(v))),
        }
    }
    let disabled = |e: &Map| {
        if field(e, "commented") == &Value::Bool(true) {
            "#DISABLED#"
        } else {
            ""
        }
    };
    for cron in &tab.crons {
        if let Some(c) = entry_comment(cron, false) {
            out.push_str(&c);
        }
        let parts: Vec<&str> = ["minute", "hour", "daymonth", "month", "dayweek", "cmd"]
            .iter()
            .map(|k| field_str(cron, k).unwrap_or_default())
            .collect();
        out.push_str(&format!("{}{}\n", disabled(cron), parts.join(" ")));
    }
    for cron in &tab.special {
        if let Some(c) = entry_comment(cron, true) {
            out.push_str(&c);
        }
        out.push_str(&format!(
            "{}{} {}\n",
            disabled(cron),
            field_str(cron, "spec").unwrap_or_default(),
            field_str(cron, "cmd").unwrap_or_default()
        ));
    }
    out
}

/// Salt's `_cron_matched`: whether a crontab entry is the job `cmd` with
/// `identifier` (an entry written without identifier matches by command).
pub fn cron_matched(entry: &Map, cmd: &str, identifier: Option<&str>) -> bool {
    let mut cid = field_str(entry, "identifier")
        .filter(|s| !s.is_empty())
        .unwrap_or(SALT_CRON_NO_IDENTIFIER)
        .to_string();
    let identifier = identifier
        .filter(|s| !s.is_empty())
        .unwrap_or(SALT_CRON_NO_IDENTIFIER);
    let same_cmd = field_str(entry, "cmd") == Some(cmd);
    if !same_cmd && cid == SALT_CRON_NO_IDENTIFIER && identifier == SALT_CRON_NO_IDENTIFIER {
        return false;
    }
    if same_cmd && cid == SALT_CRON_NO_IDENTIFIER {
        cid = identifier.to_string();
    }
    identifier == cid
}

/// Salt's `_needs_change`: whether `new` asks for something `old` is not
/// (`None` asks for nothing; `random` is satisfied by anything but `*`).
pub fn needs_change(old: &Value, new: &Value) -> bool {
    if old == new {
        return false;
    }
    if new.as_str() == Some("random") {
        return old.as_str() == Some("*");
    }
    !new.is_null()
}

/// Whether the running process is `user` (then `crontab` needs no `-u`).
fn is_current_user(user: &str) -> Result<bool, ExecError> {
    let uid = crate::exec::file::meta::user_to_uid(user)
        .map_err(|e| ExecError::Execution(format!("User {user} is not available: {e}")))?;
    Ok(nix::unistd::geteuid().as_raw() == uid)
}

/// The `crontab` arguments that address `user`'s crontab.
fn crontab_user_args(user: &str) -> Result<Vec<String>, ExecError> {
    if is_current_user(user)? {
        Ok(Vec::new())
    } else if nix::unistd::geteuid().is_root() {
        Ok(vec!["-u".into(), user.into()])
    } else {
        Err(ExecError::Execution(format!(
            "cannot manage the crontab of {user}: run as root or as {user}"
        )))
    }
}

/// What one `crontab` run did (Salt's `cmd.run_all` dict).
#[derive(Debug, Clone, Default)]
pub struct CrontabRun {
    /// The exit status.
    pub retcode: i32,
    /// Standard output, unstripped.
    pub stdout: String,
    /// Standard error, unstripped.
    pub stderr: String,
}

fn run_crontab(args: &[String]) -> Result<CrontabRun, ExecError> {
    tracing::debug!(?args, "running crontab");
    let out = std::process::Command::new("crontab")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| {
            ExecError::Execution(format!(
                "cannot run crontab: {e}; install it (Debian: apt-get install cron)"
            ))
        })?;
    Ok(CrontabRun {
        retcode: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Salt's `cron.raw_cron`: the text of `user`'s crontab (empty when none).
pub fn raw_cron(user: &str) -> Result<String, ExecError> {
    let mut args = crontab_user_args(user)?;
    args.push("-l".into());
    let ran = run_crontab(&args)?;
    let lines: Vec<&str> = ran.stdout.split_inclusive('\n').collect();
    let skip = if lines
        .first()
        .is_some_and(|l| l.starts_with("# DO NOT EDIT THIS FILE - edit the master and reinstall."))
    {
        3.min(lines.len())
    } else {
        0
    };
    Ok(lines[skip..].concat())
}

/// Salt's `cron.list_tab`.
pub fn list_tab(user: &str) -> Result<CronTab, ExecError> {
    Ok(parse_tab(&raw_cron(user)?))
}

/// Salt's `cron.write_cron_file_verbose`: installs the file at `path` as
/// `user`'s crontab.
pub fn write_cron_file(user: &str, path: &str) -> Result<CrontabRun, ExecError> {
    let mut args = crontab_user_args(user)?;
    args.push(path.into());
    run_crontab(&args)
}

/// Writes `text` as `user`'s crontab through a private temp file.
pub fn write_cron_text(user: &str, text: &str) -> Result<CrontabRun, ExecError> {
    let mut tmp = tempfile::Builder::new()
        .prefix("halite-cron-")
        .tempfile()
        .map_err(|e| ExecError::Execution(format!("cannot create a temp file: {e}")))?;
    tmp.write_all(text.as_bytes())
        .and_then(|_| tmp.flush())
        .map_err(|e| ExecError::Execution(format!("cannot write a temp file: {e}")))?;
    let path = tmp.path().to_string_lossy().into_owned();
    write_cron_file(user, &path)
}

/// Writes a parsed crontab back; `Err(stderr)` when `crontab` refused it.
fn commit(user: &str, tab: &CronTab) -> Result<Result<(), String>, ExecError> {
    let ran = write_cron_text(user, &render_tab(tab))?;
    Ok(if ran.retcode != 0 {
        Err(ran.stderr.trim_end().to_string())
    } else {
        Ok(())
    })
}

/// A time field as Salt normalises it: `str(value).lower()`.
pub fn time_field(v: Option<&Value>, default: &str) -> String {
    v.and_then(scalar_text)
        .unwrap_or_else(|| default.to_string())
        .to_lowercase()
}

/// A random number in `lo..=hi`, from the standard library's hasher seed.
fn random_in(lo: i64, hi: i64) -> i64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(lo as u64 ^ (hi as u64).rotate_left(17));
    let span = (hi - lo + 1).max(1) as u64;
    lo + (h.finish() % span) as i64
}

/// Salt's `_get_cron_date_time`: `random` and `a:b` ranges resolved.
fn cron_date_time(
    minute: &str,
    hour: &str,
    daymonth: &str,
    month: &str,
    dayweek: &str,
) -> Result<[String; 5], ExecError> {
    let resolve = |value: &str, lo: i64, hi: i64| -> Result<String, ExecError> {
        if value == "random" {
            return Ok(random_in(lo, hi).to_string());
        }
        let parts: Vec<&str> = value.split(':').collect();
        if parts.len() == 2 {
            let mut sorted = parts.clone();
            sorted.sort();
            let parse = |s: &str| {
                s.trim().parse::<i64>().map_err(|_| {
                    ExecError::Invocation(format!(
                        "invalid literal for int() with base 10: '{s}' (a range is start:end)"
                    ))
                })
            };
            let (a, b) = (parse(sorted[0])?, parse(sorted[1])?);
            return Ok(random_in(a.min(b), a.max(b)).to_string());
        }
        Ok(value.to_string())
    };
    let minute = resolve(minute, 0, 59)?;
    let hour = resolve(hour, 0, 23)?;
    let month = resolve(month, 1, 12)?;
    let dayweek = resolve(dayweek, 0, 6)?;
    let daymonth_max = match month.as_str() {
        "1" | "3" | "5" | "7" | "8" | "10" | "12" => 31,
        "4" | "6" | "9" | "11" => 30,
        _ => 28,
    };
    let daymonth = if daymonth == "random" {
        random_in(1, daymonth_max).to_string()
    } else {
        daymonth.to_string()
    };
    Ok([minute, hour, daymonth, month, dayweek])
}

/// What a job should look like, for [`set_job`] and [`set_special`].
#[derive(Debug, Clone, Default)]
pub struct JobSpec {
    /// `[minute, hour, daymonth, month, dayweek]`, lowercased; `None` for
    /// an `@special` job.
    pub times: Option<[String; 5]>,
    /// `@reboot`, `@daily`...: set for a special job.
    pub special: Option<String>,
    /// The command.
    pub cmd: String,
    /// `#DISABLED#` in front of the line.
    pub commented: bool,
    /// The comment above the line.
    pub comment: Option<String>,
    /// The job's identifier.
    pub identifier: Option<String>,
}

const TIME_KEYS: [&str; 5] = ["minute", "hour", "daymonth", "month", "dayweek"];

/// Salt's `cron.set_job` / `cron.set_special`: `new`, `updated`,
/// `present`, or crontab's error text.
pub fn set_entry(user: &str, mut spec: JobSpec) -> Result<String, ExecError> {
    let tab = list_tab(user)?;
    for cron in tab.crons.iter().chain(tab.special.iter()) {
        if !cron_matched(cron, &spec.cmd, spec.identifier.as_deref()) {
            continue;
        }
        let mut cid = Some(
            field_str(cron, "identifier")
                .filter(|s| !s.is_empty())
                .unwrap_or(SALT_CRON_NO_IDENTIFIER)
                .to_string(),
        );
        let setted_id = field_str(cron, "identifier").unwrap_or(SALT_CRON_NO_IDENTIFIER);
        let mut tests: Vec<(Value, Value)> = vec![
            (field(cron, "comment").clone(), opt(spec.comment.as_deref())),
            (
                field(cron, "commented").clone(),
                Value::Bool(spec.commented),
            ),
            (opt(spec.identifier.as_deref()), Value::from(setted_id)),
            (field(cron, "spec").clone(), opt(spec.special.as_deref())),
        ];
        for (i, key) in TIME_KEYS.iter().enumerate() {
            let wanted = spec.times.as_ref().map(|t| Value::from(t[i].as_str()));
            tests.push((field(cron, key).clone(), wanted.unwrap_or(Value::Null)));
        }
        tests.push((field(cron, "cmd").clone(), Value::from(spec.cmd.as_str())));
        if !tests.iter().any(|(old, new)| needs_change(old, new)) {
            return Ok("present".into());
        }
        let was_special = cron.contains_key("spec");
        let cid_str = cid.clone().unwrap_or_default();
        if was_special {
            rm_special(user, &spec.cmd, None, Some(&cid_str))?;
        } else {
            rm_job(
                user,
                &spec.cmd,
                &[None, None, None, None, None],
                Some(&cid_str),
            )?;
        }
        if let Some(times) = spec.times.as_mut() {
            for (i, key) in TIME_KEYS.iter().enumerate() {
                if let Some(old) = field_str(cron, key) {
                    if !needs_change(&Value::from(old), &Value::from(times[i].as_str())) {
                        times[i] = old.to_string();
                    }
                }
            }
        }
        if let Some(old) = field_str(cron, "spec") {
            if !needs_change(&Value::from(old), &opt(spec.special.as_deref())) {
                spec.special = Some(old.to_string());
            }
        }
        if !needs_change(field(cron, "commented"), &Value::Bool(spec.commented)) {
            spec.commented = field(cron, "commented") == &Value::Bool(true);
        }
        if !needs_change(field(cron, "comment"), &opt(spec.comment.as_deref())) {
            spec.comment = field_str(cron, "comment").map(str::to_string);
        }
        if field_str(cron, "cmd") == Some(spec.cmd.as_str())
            && cid.as_deref() == Some(SALT_CRON_NO_IDENTIFIER)
        {
            if let Some(id) = spec.identifier.clone() {
                cid = Some(id);
            }
            if cid.as_deref() == Some(SALT_CRON_NO_IDENTIFIER)
                && field_str(cron, "identifier").is_none()
            {
                cid = None;
            }
        }
        let cid_val = opt(cid.as_deref());
        if cid.is_none() || !needs_change(&cid_val, &opt(spec.identifier.as_deref())) {
            spec.identifier = cid;
        }
        // Salt's recursion: the old entry is gone, so this adds the new one.
        let jret = set_entry(user, spec)?;
        return Ok(if jret == "new" {
            "updated".into()
        } else {
            jret
        });
    }
    let mut tab = tab;
    let mut entry = Map::new();
    match (&spec.special, &spec.times) {
        (Some(special), _) => {
            entry.insert("spec".into(), Value::from(special.as_str()));
            entry.insert("cmd".into(), Value::from(spec.cmd.as_str()));
            entry.insert("identifier".into(), opt(spec.identifier.as_deref()));
            entry.insert("comment".into(), opt(spec.comment.as_deref()));
            entry.insert("commented".into(), Value::Bool(spec.commented));
            tab.special.push(entry);
        }
        (None, times) => {
            let t = times
                .clone()
                .unwrap_or_else(|| ["*", "*", "*", "*", "*"].map(str::to_string));
            let resolved = cron_date_time(&t[0], &t[1], &t[2], &t[3], &t[4])?;
            for (i, key) in TIME_KEYS.iter().enumerate() {
                entry.insert((*key).into(), Value::from(resolved[i].as_str()));
            }
            entry.insert("identifier".into(), opt(spec.identifier.as_deref()));
            entry.insert("cmd".into(), Value::from(spec.cmd.as_str()));
            entry.insert("comment".into(), opt(spec.comment.as_deref()));
            entry.insert("commented".into(), Value::Bool(spec.commented));
            tab.crons.push(entry);
        }
    }
    Ok(match commit(user, &tab)? {
        Ok(()) => "new".into(),
        Err(stderr) => stderr,
    })
}

/// Salt's `cron.rm_job`: `removed`, `absent`, or crontab's error text.
/// `times` narrows the match to jobs with those fields when any is set.
pub fn rm_job(
    user: &str,
    cmd: &str,
    times: &[Option<String>; 5],
    identifier: Option<&str>,
) -> Result<String, ExecError> {
    let mut tab = list_tab(user)?;
    let narrowed = times.iter().any(Option::is_some);
    let pos = tab.crons.iter().position(|val| {
        cron_matched(val, cmd, identifier)
            && (!narrowed
                || TIME_KEYS.iter().zip(times.iter()).all(|(key, want)| {
                    let have = field_str(val, key).unwrap_or_default();
                    want.as_deref().is_none_or(|w| {
                        have == w || (w.eq_ignore_ascii_case("random") && have != "*")
                    })
                }))
    });
    let Some(pos) = pos else {
        return Ok("absent".into());
    };
    tab.crons.remove(pos);
    Ok(match commit(user, &tab)? {
        Ok(()) => "removed".into(),
        Err(stderr) => stderr,
    })
}

/// Salt's `cron.rm_special`: `removed`, `absent`, or crontab's error text.
pub fn rm_special(
    user: &str,
    cmd: &str,
    special: Option<&str>,
    identifier: Option<&str>,
) -> Result<String, ExecError> {
    let mut tab = list_tab(user)?;
    let pos = tab.special.iter().position(|val| {
        cron_matched(val, cmd, identifier)
            && special.is_none_or(|s| field_str(val, "spec") == Some(s))
    });
    let ret = match pos {
        Some(p) => {
            tab.special.remove(p);
            "removed"
        }
        None => "absent",
    };
    Ok(match commit(user, &tab)? {
        Ok(()) => ret.into(),
        Err(stderr) => stderr,
    })
}

/// Salt's `cron.set_env`: `new`, `updated`, `present`, or crontab's error.
pub fn set_env(user: &str, name: &str, value: Option<&str>) -> Result<String, ExecError> {
    let mut tab = list_tab(user)?;
    if let Some(env) = tab.env.iter().find(|e| field_str(e, "name") == Some(name)) {
        if opt(value) != *field(env, "value") {
            rm_env(user, name)?;
            let jret = set_env(user, name, value)?;
            return Ok(if jret == "new" {
                "updated".into()
            } else {
                jret
            });
        }
        return Ok("present".into());
    }
    let mut env = Map::new();
    env.insert("name".into(), Value::from(name));
    env.insert("value".into(), opt(value));
    tab.env.push(env);
    Ok(match commit(user, &tab)? {
        Ok(()) => "new".into(),
        Err(stderr) => stderr,
    })
}

/// Salt's `cron.rm_env`: `removed`, `absent`, or crontab's error.
pub fn rm_env(user: &str, name: &str) -> Result<String, ExecError> {
    let mut tab = list_tab(user)?;
    let pos = tab
        .env
        .iter()
        .rposition(|e| field_str(e, "name") == Some(name));
    let ret = match pos {
        Some(p) => {
            tab.env.remove(p);
            "removed"
        }
        None => "absent",
    };
    Ok(match commit(user, &tab)? {
        Ok(()) => ret.into(),
        Err(stderr) => stderr,
    })
}

fn text_arg(args: &Args, i: usize, key: &str) -> Option<String> {
    args.get(i, key).and_then(scalar_text)
}

fn raw_cron_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "raw_cron", args)?;
    raw_cron(&args.require_str(0, "user", "raw_cron")?).map(Value::from)
}

fn list_tab_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "list_tab", args)?;
    list_tab(&args.require_str(0, "user", "list_tab")?).map(|t| t.to_value())
}

fn get_entry_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "get_entry", args)?;
    let user = args.require_str(0, "user", "get_entry")?;
    let identifier = text_arg(args, 1, "identifier");
    let cmd = if identifier.is_some() {
        None
    } else {
        text_arg(args, 2, "cmd")
    };
    let tab = list_tab(&user)?;
    let found = tab.crons.iter().chain(tab.special.iter()).find(|e| {
        identifier
            .as_deref()
            .is_some_and(|id| field_str(e, "identifier") == Some(id))
            || cmd
                .as_deref()
                .is_some_and(|c| field_str(e, "cmd") == Some(c))
    });
    Ok(found
        .cloned()
        .map(Value::Object)
        .unwrap_or(Value::Bool(false)))
}

fn set_job_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "set_job", args)?;
    let user = args.require_str(0, "user", "set_job")?;
    let mut times: [String; 5] = Default::default();
    for (i, key) in TIME_KEYS.iter().enumerate() {
        args.require_str(i + 1, key, "set_job")?;
        times[i] = time_field(args.get(i + 1, key), "*");
    }
    let cmd = args.require_str(6, "cmd", "set_job")?;
    let spec = JobSpec {
        times: Some(times),
        special: None,
        cmd,
        commented: args.get_bool(7, "commented", false),
        comment: text_arg(args, 8, "comment"),
        identifier: text_arg(args, 9, "identifier"),
    };
    set_entry(&user, spec).map(Value::from)
}

fn set_special_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "set_special", args)?;
    let user = args.require_str(0, "user", "set_special")?;
    let special = args.require_str(1, "special", "set_special")?;
    let cmd = args.require_str(2, "cmd", "set_special")?;
    let spec = JobSpec {
        times: None,
        special: Some(special),
        cmd,
        commented: args.get_bool(3, "commented", false),
        comment: text_arg(args, 4, "comment"),
        identifier: text_arg(args, 5, "identifier"),
    };
    set_entry(&user, spec).map(Value::from)
}

fn rm_job_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "rm_job", args)?;
    let user = args.require_str(0, "user", "rm_job")?;
    let cmd = args.require_str(1, "cmd", "rm_job")?;
    let mut times: [Option<String>; 5] = Default::default();
    for (i, key) in TIME_KEYS.iter().enumerate() {
        times[i] = text_arg(args, i + 2, key);
    }
    rm_job(
        &user,
        &cmd,
        &times,
        text_arg(args, 7, "identifier").as_deref(),
    )
    .map(Value::from)
}

fn rm_special_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "rm_special", args)?;
    let user = args.require_str(0, "user", "rm_special")?;
    let cmd = args.require_str(1, "cmd", "rm_special")?;
    rm_special(
        &user,
        &cmd,
        text_arg(args, 2, "special").as_deref(),
        text_arg(args, 3, "identifier").as_deref(),
    )
    .map(Value::from)
}

fn set_env_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "set_env", args)?;
    let user = args.require_str(0, "user", "set_env")?;
    let name = args.require_str(1, "name", "set_env")?;
    set_env(&user, &name, text_arg(args, 2, "value").as_deref()).map(Value::from)
}

fn rm_env_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "rm_env", args)?;
    let user = args.require_str(0, "user", "rm_env")?;
    let name = args.require_str(1, "name", "rm_env")?;
    rm_env(&user, &name).map(Value::from)
}

fn write_cron_file_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "write_cron_file", args)?;
    let user = args.require_str(0, "user", "write_cron_file")?;
    let path = args.require_str(1, "path", "write_cron_file")?;
    Ok(Value::Bool(write_cron_file(&user, &path)?.retcode == 0))
}

fn write_cron_file_verbose_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "write_cron_file_verbose", args)?;
    let user = args.require_str(0, "user", "write_cron_file_verbose")?;
    let path = args.require_str(1, "path", "write_cron_file_verbose")?;
    let ran = write_cron_file(&user, &path)?;
    let mut m = Map::new();
    m.insert("pid".into(), Value::from(0));
    m.insert("retcode".into(), Value::from(ran.retcode));
    m.insert("stdout".into(), Value::from(ran.stdout.trim_end()));
    m.insert("stderr".into(), Value::from(ran.stderr.trim_end()));
    Ok(Value::Object(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_render_round_trip_salts_format() {
        let text = "MAILTO=root\n# Lines below here are managed by Salt, do not edit\nSHELL=/bin/sh\n# backups SALT_CRON_IDENTIFIER:nightly\n0 2 * * * /usr/bin/backup --all\n# SALT_CRON_IDENTIFIER:boot\n#DISABLED#@reboot /bin/true\n";
        let tab = parse_tab(text);
        assert_eq!(tab.pre, vec!["MAILTO=root".to_string()]);
        assert_eq!(tab.env.len(), 1);
        assert_eq!(field_str(&tab.crons[0], "identifier"), Some("nightly"));
        assert_eq!(field_str(&tab.crons[0], "comment"), Some("backups"));
        assert_eq!(
            field_str(&tab.crons[0], "cmd"),
            Some("/usr/bin/backup --all")
        );
        assert_eq!(field(&tab.special[0], "commented"), &Value::Bool(true));
        assert_eq!(field_str(&tab.special[0], "comment"), Some(""));
        assert_eq!(render_tab(&tab), text);
    }

    #[test]
    fn matching_follows_salts_identifier_rules() {
        let tab = parse_tab(&format!(
            "{TAG}\n* * * * * /bin/a\n# SALT_CRON_IDENTIFIER:x\n* * * * * /bin/b\n"
        ));
        assert!(cron_matched(&tab.crons[0], "/bin/a", None));
        assert!(cron_matched(&tab.crons[0], "/bin/a", Some("anything")));
        assert!(!cron_matched(&tab.crons[0], "/bin/c", None));
        assert!(cron_matched(&tab.crons[1], "/bin/other", Some("x")));
        assert!(!cron_matched(&tab.crons[1], "/bin/b", Some("y")));
    }
}
