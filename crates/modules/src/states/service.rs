//! Salt's `service` state: `running`, `dead`, `enabled`, `disabled`,
//! `masked`, `unmasked` and `mod_watch` (restart/reload/full_restart on a
//! `watch`), with Salt's comments, over [`crate::exec::service`].

use std::time::Duration;

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::service::{self as svc, Provider};
use crate::ExecError;

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "service",
    functions: &[
        StateFunction::new("running", |c| running(&ctx(c), c)),
        StateFunction::new("dead", |c| dead(&ctx(c), c)),
        StateFunction::new("enabled", enabled),
        StateFunction::new("disabled", disabled),
        StateFunction::new("masked", |c| masked(&ctx(c), c.arg_bool("runtime", false))),
        StateFunction::new("unmasked", |c| {
            unmasked(&ctx(c), c.arg_bool("runtime", false))
        }),
        StateFunction::new("mod_watch", |c| mod_watch(&ctx(c), c)),
    ],
};

/// The [`Ctx`] of a call: the host's init system, test mode, the name.
fn ctx(call: &StateCall<'_>) -> Ctx {
    Ctx {
        p: Provider::for_opts(call.env.opts()),
        test: call.test,
        name: call.name().to_string(),
    }
}

/// `service.enabled`: the service starts at boot.
fn enabled(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let ctx = ctx(call);
    let mut ret = StateResult::ok(&ctx.name, "");
    apply(&mut ret, enable(&ctx, None, true));
    if ctx.test && ret.comment == format!("The named service {} is not available", ctx.name) {
        ret.result = None;
        ret.comment = format!(
            "Service {} not present; if created in this state run, it would have been enabled",
            ctx.name
        );
    }
    Ok(ret)
}

/// `service.disabled`: the service does not start at boot.
fn disabled(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let ctx = ctx(call);
    let mut ret = StateResult::ok(&ctx.name, "");
    apply(&mut ret, disable(&ctx, None, true));
    Ok(ret)
}

/// What every function needs: the provider, test mode and the service name.
struct Ctx {
    p: Provider,
    test: bool,
    name: String,
}

/// The part of a return `_enable`/`_disable` produce; applied over the
/// state's return like Python's `ret.update(...)`.
#[derive(Default)]
struct Partial {
    result: Option<Option<bool>>,
    comment: Option<String>,
    changes: Option<Map>,
}

fn apply(ret: &mut StateResult, part: Partial) {
    if let Some(r) = part.result {
        ret.result = r;
    }
    if let Some(c) = part.comment {
        ret.comment = c;
    }
    if let Some(ch) = part.changes {
        ret.changes = ch;
    }
}

fn exec_err(e: ExecError) -> String {
    e.to_string()
}

/// Salt's `_available`; an error message when the service does not exist.
fn check_available(ctx: &Ctx) -> Result<bool, String> {
    svc::available(ctx.p, &ctx.name).map_err(exec_err)
}

fn not_available(name: &str) -> String {
    format!("The named service {name} is not available")
}

/// Salt's `_enable`: `started` is `Some(true)` (running), `None` (in the
/// desired state) or `Some(false)` (dead).
fn enable(ctx: &Ctx, started: Option<bool>, result: bool) -> Partial {
    toggle(ctx, started, result, true)
}

/// Salt's `_disable`.
fn disable(ctx: &Ctx, started: Option<bool>, result: bool) -> Partial {
    toggle(ctx, started, result, false)
}

fn toggle(ctx: &Ctx, started: Option<bool>, result: bool, on: bool) -> Partial {
    let name = &ctx.name;
    let (word, past) = if on {
        ("enabled", "enabled")
    } else {
        ("disabled", "disabled")
    };
    match check_available(ctx) {
        Err(e) => {
            return Partial {
                result: Some(Some(false)),
                comment: Some(e),
                changes: None,
            }
        }
        Ok(false) => {
            // _disable treats a missing service as already disabled.
            let r = if on { Some(false) } else { Some(true) };
            return Partial {
                result: Some(r),
                comment: Some(not_available(name)),
                changes: None,
            };
        }
        Ok(true) => {}
    }
    let mut part = Partial {
        result: Some(Some(result)),
        ..Default::default()
    };
    let before = match svc::enabled(ctx.p, name) {
        Ok(e) => e == on,
        Err(e) => {
            return Partial {
                result: Some(Some(false)),
                comment: Some(exec_err(e)),
                changes: None,
            }
        }
    };
    if before {
        part.comment = Some(match started {
            Some(true) => format!("Service {name} is already {word}, and is running"),
            None => {
                part.changes = Some(Map::new());
                format!("Service {name} is already {word}, and is in the desired state")
            }
            Some(false) => format!("Service {name} is already {word}, and is dead"),
        });
        return part;
    }
    if ctx.test {
        part.result = Some(None);
        part.comment = Some(format!("Service {name} set to be {word}"));
        return part;
    }
    let outcome = if on {
        svc::enable(ctx.p, name)
    } else {
        svc::disable(ctx.p, name)
    };
    let error = match outcome {
        Ok(true) => {
            let after = svc::enabled(ctx.p, name).map(|e| e == on).unwrap_or(false);
            let mut changes = Map::new();
            if before != after {
                changes.insert(name.clone(), Value::Bool(true));
            }
            part.changes = Some(changes);
            part.comment = Some(match started {
                Some(true) => format!("Service {name} has been {past}, and is running"),
                None => format!("Service {name} has been {past}, and is in the desired state"),
                Some(false) => format!("Service {name} has been {past}, and is dead"),
            });
            return part;
        }
        Ok(false) => None,
        Err(e) => Some(exec_err(e)),
    };
    part.result = Some(Some(false));
    let mut comment = match (on, started) {
        (true, Some(true)) => format!("Failed when setting service {name} to start at boot, but the service is running"),
        (true, None) => format!("Failed when setting service {name} to start at boot, but the service was already running"),
        (true, Some(false)) => format!("Failed when setting service {name} to start at boot, and the service is dead"),
        (false, Some(true)) => format!("Failed when setting service {name} to not start at boot, and is running"),
        (false, None) => {
            format!("Failed when setting service {name} to not start at boot, but the service was already running")
        }
        (false, Some(false)) => format!("Failed when setting service {name} to not start at boot, and the service is dead"),
    };
    if let (true, Some(detail)) = (on, error) {
        comment.push_str(&format!(". Additional information follows:\n\n{detail}"));
    }
    part.comment = Some(comment);
    part
}

/// The `enable:` argument: `Some(true/false)` when given (strings use
/// Salt's truthiness), `None` when absent.
fn enable_arg(call: &StateCall<'_>) -> Option<bool> {
    call.arg("enable").map(halite_state::truthy)
}

/// `init_delay` in seconds (integer or float); bad values are an error.
fn init_delay(call: &StateCall<'_>) -> Result<Option<f64>, StateError> {
    match call.arg("init_delay") {
        None => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64().filter(|d| *d > 0.0)),
        Some(Value::String(s)) => s
            .trim()
            .parse::<f64>()
            .map(|d| Some(d).filter(|d| *d > 0.0))
            .map_err(|_| {
                StateError::BadArg(format!("init_delay must be a number of seconds, not '{s}'"))
            }),
        Some(other) => Err(StateError::BadArg(format!(
            "init_delay must be a number of seconds, not {}",
            halite_state::type_name(other)
        ))),
    }
}

fn sleep(delay: Option<f64>) {
    if let Some(d) = delay {
        std::thread::sleep(Duration::from_secs_f64(d.min(86_400.0)));
    }
}

/// `12` for 12.0, `1.5` otherwise, as Python prints the value it was given.
fn seconds_text(d: f64) -> String {
    if d.fract() == 0.0 {
        format!("{}", d as i64)
    } else {
        d.to_string()
    }
}

fn enabled_used_error(call: &StateCall<'_>, name: &str) -> Option<StateResult> {
    call.arg("enabled").map(|_| {
        StateResult::fail(
            name,
            format!("Service {name} uses non-existent option \"enabled\".  Perhaps \"enable\" option was intended?"),
        )
    })
}

fn running(ctx: &Ctx, call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = ctx.name.clone();
    if let Some(r) = enabled_used_error(call, &name) {
        return Ok(r);
    }
    let enable_flag = enable_arg(call);
    let delay = init_delay(call)?;
    let sig = call.arg_str("sig")?;
    let mut ret = StateResult::ok(&name, "");
    if ctx.p.offline() {
        ret.comment = "Running in OFFLINE mode. Nothing to do".into();
        return Ok(ret);
    }
    match check_available(ctx) {
        Err(e) => return Ok(StateResult::fail(&name, e)),
        Ok(false) => {
            if ctx.test {
                ret.result = None;
                ret.comment = format!("Service {name} not present; if created in this state run, it would have been started");
            } else {
                ret.result = Some(false);
                ret.comment = not_available(&name);
            }
            return Ok(ret);
        }
        Ok(true) => {}
    }
    let before =
        svc::status(ctx.p, &name, sig.as_deref()).map_err(|e| StateError::Other(e.to_string()))?;
    let before_enabled = svc::enabled(ctx.p, &name).unwrap_or(false);
    let unmask = call.arg_bool("unmask", false);
    let unmask_comment = if unmask {
        unmasked(ctx, call.arg_bool("unmask_runtime", false))?.comment
    } else {
        String::new()
    };
    let joined = |first: String| {
        [first, unmask_comment.clone()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    };
    if before {
        ret.comment = joined(format!("The service {name} is already running"));
        match enable_flag {
            Some(true) if !before_enabled => apply(&mut ret, enable(ctx, None, true)),
            Some(false) if before_enabled => apply(&mut ret, disable(ctx, None, true)),
            _ => {}
        }
        return Ok(ret);
    }
    if ctx.test {
        ret.result = None;
        ret.comment = joined(format!("Service {name} is set to start"));
        return Ok(ret);
    }
    match svc::action(ctx.p, "start", &name) {
        Err(e) => return Ok(StateResult::fail(&name, e.to_string())),
        Ok(false) => {
            ret.result = Some(false);
            ret.comment = format!("Service {name} failed to start");
            match enable_flag {
                Some(true) => apply(&mut ret, enable(ctx, Some(false), false)),
                Some(false) => apply(&mut ret, disable(ctx, Some(false), false)),
                None => {}
            }
            return Ok(ret);
        }
        Ok(true) => {}
    }
    sleep(delay);
    let after = svc::status(ctx.p, &name, sig.as_deref()).unwrap_or(false);
    let after_enabled = svc::enabled(ctx.p, &name).unwrap_or(false);
    if (before_enabled != after_enabled || before != after) && ret.changes.is_empty() {
        ret.changes.insert(name.clone(), Value::Bool(after));
    }
    if after {
        ret.comment = format!("Started service {name}");
    } else {
        ret.comment = format!("Service {name} failed to start");
        ret.result = Some(false);
    }
    match enable_flag {
        Some(true) => apply(&mut ret, enable(ctx, Some(after), after)),
        Some(false) => apply(&mut ret, disable(ctx, Some(after), after)),
        None => {}
    }
    if let Some(d) = delay {
        ret.comment = format!(
            "{}\nDelayed return for {} seconds",
            ret.comment,
            seconds_text(d)
        );
    }
    if unmask {
        ret.comment = format!("{}\n{}", ret.comment, unmask_comment);
    }
    Ok(ret)
}

fn dead(ctx: &Ctx, call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = ctx.name.clone();
    if let Some(r) = enabled_used_error(call, &name) {
        return Ok(r);
    }
    let enable_flag = enable_arg(call);
    let delay = init_delay(call)?;
    let sig = call.arg_str("sig")?;
    let mut ret = StateResult::ok(&name, "");
    if ctx.p.offline() {
        ret.comment = "Running in OFFLINE mode. Nothing to do".into();
        return Ok(ret);
    }
    match check_available(ctx) {
        Err(e) => return Ok(StateResult::fail(&name, e)),
        Ok(false) => {
            if ctx.test {
                ret.result = None;
                ret.comment = format!("Service {name} not present; if created in this state run, it would have been stopped");
            } else {
                // A service that does not exist is as dead as it gets.
                ret.comment = not_available(&name);
            }
            return Ok(ret);
        }
        Ok(true) => {}
    }
    let before =
        svc::status(ctx.p, &name, sig.as_deref()).map_err(|e| StateError::Other(e.to_string()))?;
    let before_enabled = svc::enabled(ctx.p, &name).unwrap_or(false);
    if !before {
        ret.comment = format!("The service {name} is already dead");
        match enable_flag {
            Some(true) if !before_enabled => apply(&mut ret, enable(ctx, None, true)),
            Some(false) if before_enabled => apply(&mut ret, disable(ctx, None, true)),
            _ => {}
        }
        return Ok(ret);
    }
    if ctx.test {
        ret.result = None;
        ret.comment = format!("Service {name} is set to be killed");
        return Ok(ret);
    }
    let stopped = match svc::action(ctx.p, "stop", &name) {
        Ok(ok) => ok,
        Err(e) => return Ok(StateResult::fail(&name, e.to_string())),
    };
    if !stopped {
        ret.result = Some(false);
        ret.comment = format!("Service {name} failed to die");
        match enable_flag {
            Some(true) => apply(&mut ret, enable(ctx, Some(true), false)),
            Some(false) => apply(&mut ret, disable(ctx, Some(true), false)),
            None => {}
        }
        return Ok(ret);
    }
    sleep(delay);
    let after = svc::status(ctx.p, &name, None).unwrap_or(false);
    let after_enabled = svc::enabled(ctx.p, &name).unwrap_or(false);
    if (before_enabled != after_enabled || before != after) && ret.changes.is_empty() {
        ret.changes.insert(name.clone(), Value::Bool(after));
    }
    if after {
        ret.result = Some(false);
        ret.comment = format!("Service {name} failed to die");
    } else {
        ret.comment = format!("Service {name} was killed");
    }
    match enable_flag {
        Some(true) => apply(&mut ret, enable(ctx, Some(after), !after)),
        Some(false) => apply(&mut ret, disable(ctx, Some(after), !after)),
        None => {}
    }
    Ok(ret)
}

fn mask_state(ctx: &Ctx, runtime: bool, on: bool) -> Result<StateResult, StateError> {
    let name = &ctx.name;
    if !ctx.p.can_mask() {
        return Ok(StateResult::fail(
            name,
            "Service masking not available on this minion",
        ));
    }
    let mask_type = if runtime { "runtime masked" } else { "masked" };
    let action = if on {
        mask_type
    } else if runtime {
        "runtime unmasked"
    } else {
        "unmasked"
    };
    let mut expected = Map::new();
    expected.insert(mask_type.into(), serde_json::json!({"old": !on, "new": on}));
    let is_masked = match svc::masked(ctx.p, name, runtime) {
        Ok(m) => m,
        Err(e) => return Ok(StateResult::fail(name, e.to_string())),
    };
    if is_masked == on {
        let comment = if on {
            format!("Service {name} is already {mask_type}")
        } else {
            format!("Service {name} was already {action}")
        };
        return Ok(StateResult::ok(name, comment));
    }
    if ctx.test {
        return Ok(StateResult::would_change(
            name,
            format!("Service {name} would be {action}"),
            expected,
        ));
    }
    if let Err(e) = svc::mask(ctx.p, name, runtime, on) {
        return Ok(StateResult::fail(name, e.to_string()));
    }
    // Salt reports a mask that did not take with result True; kept as is.
    let mut ret = StateResult::ok(name, "");
    if svc::masked(ctx.p, name, runtime).unwrap_or(!on) == on {
        ret.changes = expected;
        ret.comment = format!("Service {name} was {action}");
    } else {
        ret.comment = if on {
            format!("Failed to mask service {name}")
        } else {
            format!("Failed to unmask service {name}")
        };
    }
    Ok(ret)
}

fn masked(ctx: &Ctx, runtime: bool) -> Result<StateResult, StateError> {
    mask_state(ctx, runtime, true)
}

fn unmasked(ctx: &Ctx, runtime: bool) -> Result<StateResult, StateError> {
    mask_state(ctx, runtime, false)
}

fn mod_watch(ctx: &Ctx, call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = ctx.name.clone();
    let sig = call.arg_str("sig")?;
    let delay = init_delay(call)?;
    let sfun = call.sfun.unwrap_or("");
    // With systemd installed but not PID 1, Salt's `service.running`/`dead`
    // do nothing, but its `mod_watch` reaches `service.status`/`start`/
    // `restart` of the SysV module loaded beside the offline systemd one
    // (debian_service), so a watch starts or restarts the init script.
    let offline_sysv = Ctx {
        p: Provider::SysV,
        test: ctx.test,
        name: ctx.name.clone(),
    };
    let ctx = if ctx.p.offline() { &offline_sysv } else { ctx };
    let is_running =
        || svc::status(ctx.p, &name, sig.as_deref()).map_err(|e| StateError::Other(e.to_string()));
    let (verb, participle, fun) = match sfun {
        "dead" => {
            if !is_running()? {
                return Ok(StateResult::ok(&name, "Service is already stopped"));
            }
            ("stop", "stopped".to_string(), "stop")
        }
        "running" => {
            let (verb, fun) = if is_running()? {
                if call.arg_bool("reload", false) {
                    if call.arg_bool("force", false) {
                        ("forcefully reload", "force_reload")
                    } else {
                        ("reload", "reload")
                    }
                } else if call.arg_bool("full_restart", false) && ctx.p.has_full_restart() {
                    ("fully restart", "full_restart")
                } else {
                    ("restart", "restart")
                }
            } else {
                ("start", "start")
            };
            (verb, format!("{verb}ed"), fun)
        }
        other => {
            return Ok(StateResult::fail(
                &name,
                format!("Unable to trigger watch for service.{other}"),
            ))
        }
    };
    if ctx.test {
        return Ok(StateResult::would_change(
            &name,
            format!("Service is set to be {participle}"),
            Map::new(),
        ));
    }
    if verb == "start" {
        // Salt stops first so that a half-started service starts cleanly.
        let _ = svc::action(ctx.p, "stop", &name);
    }
    let result = match svc::action(ctx.p, fun, &name) {
        Ok(r) => r,
        Err(e) => return Ok(StateResult::fail(&name, e.to_string())),
    };
    sleep(delay);
    let mut ret = StateResult::new(&name, Some(result));
    ret.changes.insert(name.clone(), Value::Bool(result));
    ret.comment = if result {
        format!("Service {participle}")
    } else {
        format!("Failed to {verb} the service")
    };
    Ok(ret)
}
