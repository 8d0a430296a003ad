//! Salt's `cron` state: `cron.present`/`absent` (jobs), `env_present`/
//! `env_absent` (`NAME=value` lines) and `cron.file` (a whole crontab from
//! a source), with Salt's comments and changes, over [`crate::exec::cron`].

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::cron::{self as exec, CronTab, JobSpec};
use crate::exec::user::scalar_text;

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "cron",
    functions: &[
        StateFunction::new("present", present),
        StateFunction::new("absent", absent),
        StateFunction::new("env_present", env_present),
        StateFunction::new("env_absent", env_absent),
        StateFunction::new("file", file),
    ],
};

/// `user=` (Salt's default `root`).
fn user_arg(call: &StateCall<'_>) -> Result<String, StateError> {
    Ok(call.arg_str("user")?.unwrap_or_else(|| "root".into()))
}

/// `identifier=`: the job's name unless given (Salt's `identifier=False`).
fn identifier_arg(call: &StateCall<'_>, name: &str) -> Option<String> {
    match call.chunk.get("identifier") {
        None | Some(Value::Bool(false)) => Some(name.to_string()),
        Some(Value::Null) => None,
        Some(v) => scalar_text(v),
    }
}

fn text_arg(call: &StateCall<'_>, key: &str) -> Option<String> {
    call.arg(key).and_then(scalar_text)
}

fn exec_err(e: crate::exec::ExecError) -> StateError {
    StateError::Other(e.to_string())
}

/// Salt's `_check_cron`: `absent`, `present` or `update` for the job
/// `spec` (fields left `None` are not compared).
fn check_cron(tab: &CronTab, cmd: &str, want: &[(&str, Value)], special: bool) -> &'static str {
    let entries = if special { &tab.special } else { &tab.crons };
    for cron in entries {
        let identifier = want
            .iter()
            .find(|(k, _)| *k == "identifier")
            .and_then(|(_, v)| v.as_str());
        if exec::cron_matched(cron, cmd, identifier) {
            let changed = want
                .iter()
                .any(|(key, new)| exec::needs_change(cron.get(*key).unwrap_or(&Value::Null), new));
            return if changed { "update" } else { "present" };
        }
    }
    "absent"
}

fn present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(
        call,
        &[
            "user",
            "minute",
            "hour",
            "daymonth",
            "month",
            "dayweek",
            "comment",
            "commented",
            "identifier",
            "special",
        ],
    )?;
    let name = call.name().trim().to_string();
    let user = user_arg(call)?;
    let identifier = identifier_arg(call, &name);
    let special = text_arg(call, "special");
    let comment = text_arg(call, "comment");
    let commented = call.arg("commented") == Some(&Value::Bool(true));
    let times = ["minute", "hour", "daymonth", "month", "dayweek"]
        .map(|k| exec::time_field(call.arg(k), "*"));
    let mut ret = StateResult::ok(&name, "");
    if call.test {
        let tab = exec::list_tab(&user).map_err(exec_err)?;
        let mut want: Vec<(&str, Value)> = Vec::new();
        if let Some(s) = &special {
            want.push(("spec", Value::from(s.as_str())));
        } else {
            for (k, v) in ["minute", "hour", "daymonth", "month", "dayweek"]
                .iter()
                .zip(times.iter())
            {
                want.push((k, Value::from(v.as_str())));
            }
        }
        want.push((
            "identifier",
            identifier.clone().map(Value::from).unwrap_or(Value::Null),
        ));
        want.push(("cmd", Value::from(name.as_str())));
        want.push((
            "comment",
            comment.clone().map(Value::from).unwrap_or(Value::Null),
        ));
        want.push(("commented", Value::Bool(commented)));
        ret.result = None;
        ret.comment = match check_cron(&tab, &name, &want, special.is_some()) {
            "absent" => format!("Cron {name} is set to be added"),
            "present" => {
                ret.result = Some(true);
                format!("Cron {name} already present")
            }
            _ => format!("Cron {name} is set to be updated"),
        };
        return Ok(ret);
    }
    let spec = JobSpec {
        times: special.is_none().then_some(times),
        special,
        cmd: name.clone(),
        commented,
        comment,
        identifier,
    };
    let data = exec::set_entry(&user, spec).map_err(exec_err)?;
    match data.as_str() {
        "present" => ret.comment = format!("Cron {name} already present"),
        "new" => {
            ret.comment = format!("Cron {name} added to {user}'s crontab");
            ret.changes.insert(user, Value::from(name));
        }
        "updated" => {
            ret.comment = format!("Cron {name} updated");
            ret.changes.insert(user, Value::from(name));
        }
        err => {
            ret.result = Some(false);
            ret.comment =
                format!("Cron {name} for user {user} failed to commit with error \n{err}");
        }
    }
    Ok(ret)
}

fn absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().trim().to_string();
    let user = user_arg(call)?;
    let identifier = identifier_arg(call, &name);
    let special = text_arg(call, "special");
    let mut ret = StateResult::ok(&name, "");
    if call.test {
        let tab = exec::list_tab(&user).map_err(exec_err)?;
        let want = vec![
            (
                "identifier",
                identifier.clone().map(Value::from).unwrap_or(Value::Null),
            ),
            ("cmd", Value::from(name.as_str())),
        ];
        // Salt's _check_cron without `special` looks at timed jobs only.
        ret.result = None;
        ret.comment = match check_cron(&tab, &name, &want, false) {
            "absent" => {
                ret.result = Some(true);
                format!("Cron {name} is absent")
            }
            _ => format!("Cron {name} is set to be removed"),
        };
        return Ok(ret);
    }
    let data = match &special {
        None => exec::rm_job(&user, &name, &Default::default(), identifier.as_deref()),
        Some(s) => exec::rm_special(&user, &name, Some(s), identifier.as_deref()),
    }
    .map_err(exec_err)?;
    match data.as_str() {
        "absent" => ret.comment = format!("Cron {name} already absent"),
        "removed" => {
            ret.comment = format!("Cron {name} removed from {user}'s crontab");
            ret.changes.insert(user, Value::from(name));
        }
        err => {
            ret.result = Some(false);
            ret.comment = format!("Cron {name} for user {user} failed to commit with error {err}");
        }
    }
    Ok(ret)
}

/// Salt's `_check_cron_env`.
fn check_env(tab: &CronTab, name: &str, value: &str) -> &'static str {
    match tab
        .env
        .iter()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
    {
        Some(env) if env.get("value").and_then(Value::as_str) != Some(value) => "update",
        Some(_) => "present",
        None => "absent",
    }
}

fn env_present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(call, &["value", "user"])?;
    let name = call.name().to_string();
    let user = user_arg(call)?;
    let value = text_arg(call, "value");
    let mut ret = StateResult::ok(&name, "");
    if call.test {
        let tab = exec::list_tab(&user).map_err(exec_err)?;
        ret.result = None;
        ret.comment = match check_env(&tab, &name, value.as_deref().unwrap_or_default()) {
            "absent" => format!("Cron env {name} is set to be added"),
            "present" => {
                ret.result = Some(true);
                format!("Cron env {name} already present")
            }
            _ => format!("Cron env {name} is set to be updated"),
        };
        return Ok(ret);
    }
    let data = exec::set_env(&user, &name, value.as_deref()).map_err(exec_err)?;
    match data.as_str() {
        "present" => ret.comment = format!("Cron env {name} already present"),
        "new" => {
            ret.comment = format!("Cron env {name} added to {user}'s crontab");
            ret.changes.insert(user, Value::from(name));
        }
        "updated" => {
            ret.comment = format!("Cron env {name} updated");
            ret.changes.insert(user, Value::from(name));
        }
        err => {
            ret.result = Some(false);
            ret.comment =
                format!("Cron env {name} for user {user} failed to commit with error \n{err}");
        }
    }
    Ok(ret)
}

fn env_absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(call, &["user"])?;
    let name = call.name().trim().to_string();
    let user = user_arg(call)?;
    let mut ret = StateResult::ok(&name, "");
    if call.test {
        let tab = exec::list_tab(&user).map_err(exec_err)?;
        ret.result = None;
        ret.comment = match check_env(&tab, &name, "") {
            "absent" => {
                ret.result = Some(true);
                format!("Cron env {name} is absent")
            }
            _ => format!("Cron env {name} is set to be removed"),
        };
        return Ok(ret);
    }
    let data = exec::rm_env(&user, &name).map_err(exec_err)?;
    match data.as_str() {
        "absent" => ret.comment = format!("Cron env {name} already absent"),
        "removed" => {
            ret.comment = format!("Cron env {name} removed from {user}'s crontab");
            ret.changes.insert(user, Value::from(name));
        }
        err => {
            ret.result = Some(false);
            ret.comment =
                format!("Cron env {name} for user {user} failed to commit with error {err}");
        }
    }
    Ok(ret)
}

/// `cron.file`: the whole crontab of `user` from the source `name`
/// (`salt://` or a local path), rendered with `template` when given.
fn file(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    use crate::states::file::managed;
    let name = call.name().to_string();
    let user = user_arg(call)?;
    let Some(account) = nix::unistd::User::from_name(&user).ok().flatten() else {
        return Ok(StateResult::fail(
            &name,
            format!("Could not identify group for user {user}"),
        ));
    };
    let mut current = exec::raw_cron(&user).map_err(exec_err)?;
    if !current.ends_with('\n') {
        current.push('\n');
    }
    if !call.arg_bool("replace", true) && !current.is_empty() {
        return Ok(StateResult::ok(
            &name,
            format!("User {user} already has a crontab. No changes made"),
        ));
    }
    let saltenv = call.chunk.env().to_string();
    let new = (|| -> Result<String, String> {
        let local = name.strip_prefix("file://").unwrap_or(&name);
        if local.starts_with('/') && !std::path::Path::new(local).is_file() {
            return Err(format!("Local file source {local} does not exist"));
        }
        let (url, path) = managed::resolve_source(call, &Value::from(name.as_str()), &saltenv)?;
        let data = std::fs::read(&path).map_err(|e| format!("Unable to read {url}: {e}"))?;
        let text = String::from_utf8_lossy(&data).into_owned();
        match call.arg_str("template").map_err(|e| e.to_string())? {
            Some(t) if !t.is_empty() => {
                let ctx = managed::template_context(call)?;
                managed::render(call, &text, &t, &ctx, &saltenv)
            }
            _ => Ok(text),
        }
    })();
    let new = match new {
        Ok(n) => n,
        Err(e) => return Ok(StateResult::fail(&name, e)),
    };
    if new == current {
        return Ok(StateResult::ok(
            &name,
            format!("Crontab for user {user} is in the correct state"),
        ));
    }
    let diff = crate::exec::file::diff::unified_diff(&current, &new);
    if call.test {
        let mut ret = StateResult::new(&name, None);
        ret.comment = format!("The following values are set to be changed:\ndiff: {diff}\n");
        return Ok(ret);
    }
    let ran = exec::write_cron_text(&user, &new).map_err(exec_err)?;
    if ran.retcode != 0 {
        return Ok(StateResult::fail(
            &name,
            format!(
                "Unable to update user {user} crontab. Error: {}",
                ran.stderr.trim_end()
            ),
        ));
    }
    let mut changes = Map::new();
    changes.insert("diff".into(), Value::from(diff));
    // Salt writes the new crontab to a temp file of its own (root's) and
    // chowns it to the user first, and reports that chown too.
    let me = nix::unistd::geteuid();
    if account.uid != me {
        changes.insert("user".into(), Value::from(user.as_str()));
    }
    if account.gid != nix::unistd::getegid() {
        let group = nix::unistd::Group::from_gid(account.gid)
            .ok()
            .flatten()
            .map(|g| g.name)
            .unwrap_or_else(|| account.gid.to_string());
        changes.insert("group".into(), Value::from(group));
    }
    let mut ret = StateResult::ok(&name, format!("Crontab for user {user} was updated"));
    ret.changes = changes;
    Ok(ret)
}
