//! Salt's `supervisord` state: a program (or a `group:`) of a running
//! supervisord kept running (`running`, restarted on `watch`) or stopped
//! (`dead`), with Salt's comments and `changes`.
//!
//! Salt 3008 moved this state out of its core (3007 is the last release
//! shipping `salt/states/supervisord.py`); halite keeps that behaviour.

use halite_state::{StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::supervisord::{Ctl, Process};

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "supervisord",
    functions: &[
        StateFunction::new("running", |c| running(c, false)),
        StateFunction::new("dead", dead),
        StateFunction::new("mod_watch", |c| running(c, true)),
    ],
};

fn err(e: crate::exec::ExecError) -> StateError {
    StateError::Other(e.to_string())
}

/// The state's `user`, `conf_file` and `bin_env`.
fn ctl(call: &StateCall<'_>) -> Result<Ctl, StateError> {
    Ok(Ctl {
        user: call.arg_str("user")?,
        conf_file: call.arg_str("conf_file")?,
        bin_env: call.arg_str("bin_env")?,
    })
}

/// Salt's `_check_error`: the comment for what `supervisorctl` answered;
/// "already started", "not running" and an active group are success.
fn check_error(ret: &mut StateResult, output: &str, success: &str) {
    let benign = [
        "already started",
        "not running",
        "process group already active",
    ];
    if output.contains("ERROR") && !benign.iter().any(|b| output.contains(b)) {
        ret.comment = output.to_string();
        ret.result = Some(false);
    } else {
        ret.comment = success.to_string();
    }
}

/// Salt's `_is_stopped_state`.
fn is_stopped_state(state: &str) -> bool {
    matches!(
        state,
        "STOPPED" | "STOPPING" | "EXITED" | "FATAL" | "BACKOFF"
    )
}

/// `grp:` of every `grp:prog`.
fn groups(all: &[Process]) -> Vec<String> {
    let mut groups: Vec<String> = all
        .iter()
        .filter_map(|p| p.name.find(':').map(|i| p.name[..=i].to_string()))
        .collect();
    groups.sort();
    groups.dedup();
    groups
}

/// Whether `name` (a program or a `grp:`) has a stopped process: `None`
/// when it is not known to the daemon; with the kind Salt names in its
/// comments ("group", "service").
fn stopped(name: &str, all: &[Process]) -> (Option<bool>, Option<&'static str>) {
    if groups(all).iter().any(|g| g == name) {
        let any = all
            .iter()
            .any(|p| p.name.starts_with(name) && is_stopped_state(&p.state));
        (Some(any), Some("group"))
    } else if let Some(p) = all.iter().find(|p| p.name == name) {
        (Some(is_stopped_state(&p.state)), Some("service"))
    } else {
        (None, None)
    }
}

/// Salt's `supervisord.running` (and `mod_watch`, which restarts by
/// default): `restart`, `update`, `user`, `conf_file`, `bin_env`.
fn running(call: &StateCall<'_>, watch: bool) -> Result<StateResult, StateError> {
    let raw = call.name();
    let name = match raw.strip_suffix('*') {
        Some(group) if group.ends_with(':') => group.to_string(),
        _ => raw.to_string(),
    };
    let restart = call.arg_bool("restart", watch);
    let update = call.arg_bool("update", false);
    let ctl = ctl(call)?;
    let mut ret = StateResult::ok(&name, "");
    let all = ctl.status(None).map_err(err)?;
    let is_group = name.ends_with(':');
    let matches: Vec<(&str, bool)> = if all.iter().any(|p| p.name == name) {
        all.iter()
            .filter(|p| p.name == name)
            .map(|p| (p.name.as_str(), p.state.eq_ignore_ascii_case("running")))
            .collect()
    } else if groups(&all).contains(&name) {
        all.iter()
            .filter(|p| p.name.starts_with(&name))
            .map(|p| (p.name.as_str(), p.state.eq_ignore_ascii_case("running")))
            .collect()
    } else {
        Vec::new()
    };
    let to_add = matches.is_empty();

    if call.test {
        predict(&mut ret, &name, is_group, to_add, &matches);
        return Ok(ret);
    }

    let mut changes: Vec<String> = Vec::new();
    let mut just_updated = false;
    if update {
        let comment = "Updating supervisor";
        let result = ctl.update(None).map_err(err)?;
        check_error(&mut ret, &result, comment);
        just_updated = result.contains(&format!("{name}: updated"));
    } else if to_add {
        let comment = format!("Adding service: {name}");
        ctl.reread().map_err(err)?;
        let result = ctl.group_action("add", &name).map_err(err)?;
        check_error(&mut ret, &result, &comment);
        changes.push(comment);
    }

    let (is_stopped, kind) = stopped(&name, &all);
    let kind = kind.map(|k| format!(" {k}")).unwrap_or_default();
    match is_stopped {
        Some(false) if restart && !just_updated => {
            let comment = format!("Restarting{kind}: {name}");
            let result = ctl.action("restart", &name).map_err(err)?;
            check_error(&mut ret, &result, &comment);
            changes.push(comment);
        }
        Some(false) if just_updated => {
            ret.comment = format!("Not starting updated{kind}: {name}");
        }
        Some(false) => {
            ret.comment = format!("Not starting already running{kind}: {name}");
        }
        _ if !just_updated => {
            let comment = format!("Starting{kind}: {name}");
            changes.push(comment.clone());
            let result = ctl.action("start", &name).map_err(err)?;
            check_error(&mut ret, &result, &comment);
        }
        _ => {}
    }
    if ret.result == Some(true) && !changes.is_empty() {
        ret.changes
            .insert(name.clone(), Value::from(changes.join(" ")));
    }
    Ok(ret)
}

/// What `running` would do, for `test=True` (Salt predicts no changes,
/// only the comment).
fn predict(
    ret: &mut StateResult,
    name: &str,
    is_group: bool,
    to_add: bool,
    matches: &[(&str, bool)],
) {
    if to_add {
        ret.result = None;
        ret.comment = if is_group {
            format!("Group '{name}' will be added and started")
        } else {
            format!("Service {name} will be added and started")
        };
        return;
    }
    let to_start: Vec<&str> = matches
        .iter()
        .filter(|(_, up)| !up)
        .map(|(n, _)| *n)
        .collect();
    ret.comment = match (to_start.is_empty(), is_group) {
        (true, true) => format!("All services in group '{name}' are already running"),
        (true, false) => format!("Service {name} is already running"),
        (false, true) if to_start.len() == matches.len() => {
            format!("All services in group '{name}' will be started")
        }
        (false, true) => format!(
            "The following services will be started: {}",
            to_start.join(" ")
        ),
        (false, false) => format!("Service {name} will be started"),
    };
    if !to_start.is_empty() {
        ret.result = None;
    }
}

/// Salt's `supervisord.dead`: `user`, `conf_file`, `bin_env`.
fn dead(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let mut ret = StateResult::ok(&name, "");
    if call.test {
        // Salt predicts a stop without looking.
        ret.result = None;
        ret.comment = format!("Service {name} is set to be stopped");
        return Ok(ret);
    }
    let ctl = ctl(call)?;
    let all = ctl.status(None).map_err(err)?;
    match stopped(&name, &all).0 {
        None => ret.comment = format!("Service {name} doesn't exist"),
        Some(true) => ret.comment = format!("Service {name} is not running"),
        Some(false) => {
            let comment = format!("Stopping service: {name}");
            let result = ctl.action("stop", &name).map_err(err)?;
            // Salt checks a dict keyed by the name here, so only a
            // program literally named ERROR could fail; a failed stop is
            // reported as one.
            check_error(&mut ret, &result, &comment);
            ret.changes.insert(name.clone(), Value::from(comment));
        }
    }
    Ok(ret)
}
