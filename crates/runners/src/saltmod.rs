//! Salt's `salt` state module (`salt/states/saltmod.py`): the states an
//! orchestration SLS is made of. They run on the master (registered only
//! in the orchestration's registry, never on a minion) and reach the
//! fleet through the master's local socket: `salt.state` and
//! `salt.function` publish a job and wait for its returns,
//! `salt.wait_for_event` follows the master's event bus, `salt.runner`
//! calls another runner.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use halite_client::job::{run_batched, run_job, JobOutcome, JobRequest};
use halite_client::local::{LocalBody, LocalClient, LocalReply};
use halite_client::MasterConfig;
use halite_salt_rules::pyfmt::python_str as py_str;
use halite_salt_rules::truth::python_bool;
use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "salt",
    functions: &[
        StateFunction::new("state", state),
        StateFunction::new("function", function),
        StateFunction::new("wait_for_event", wait_for_event),
        StateFunction::new("runner", runner),
        StateFunction::new("parallel_runners", parallel_runners),
    ],
};

/// The master's config, from the orchestration's options (they are the
/// master's, see [`crate::orchestrate`]).
pub fn master_config(env: &dyn halite_state::StateEnv) -> Result<MasterConfig, StateError> {
    serde_json::from_value(env.opts().clone()).map_err(|e| {
        StateError::Other(format!(
            "salt.* states run only in an orchestration on the master (halite-run state.orchestrate): {e}"
        ))
    })
}

/// The user the jobs are published as (Salt's `__user__`).
pub(crate) fn user() -> String {
    std::env::var("SUDO_USER")
        .or_else(|_| std::env::var("USER"))
        .unwrap_or_else(|_| "root".into())
}

/// Who runs the orchestration (`Reactor` when a reactor started it), or
/// the process's user.
pub(crate) fn run_user(env: &dyn halite_state::StateEnv) -> String {
    env.opts()
        .get(crate::USER_KEY)
        .and_then(Value::as_str)
        .map(String::from)
        .unwrap_or_else(user)
}

/// A runner a step calls runs as the orchestration's user, so what a
/// reactor started stays marked as the reactor's all the way down.
fn inherit_user(env: &dyn halite_state::StateEnv, kwargs: &mut Map) {
    if let Some(u) = env.opts().get(crate::USER_KEY) {
        kwargs.insert(crate::USER_KEY.into(), u.clone());
    }
}

/// `timeout=` of a step, or the master's `timeout`.
fn step_timeout(call: &StateCall<'_>, cfg: &MasterConfig) -> Result<Duration, StateError> {
    match call.arg("timeout") {
        None => Ok(Duration::from_secs(cfg.timeout)),
        Some(v) => v
            .as_f64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            .filter(|s| *s >= 0.0)
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .ok_or_else(|| {
                StateError::BadArg(format!(
                    "timeout must be a number of seconds, not {}",
                    py_str(v)
                ))
            }),
    }
}

/// `fail_minions` as Salt reads it: a list, a comma separated string, or
/// anything else ignored with a warning.
fn fail_minions(call: &StateCall<'_>, warnings: &mut Vec<Value>) -> Vec<String> {
    match call.arg("fail_minions") {
        None => Vec::new(),
        Some(Value::String(s)) => s.split(',').map(|m| m.trim().to_string()).collect(),
        Some(Value::Array(a)) => a.iter().map(py_str).collect(),
        Some(_) => {
            warnings.push(Value::from(
                "'fail_minions' needs to be a list or a comma separated string. Ignored.",
            ));
            Vec::new()
        }
    }
}

/// Salt's `state.check_result(ret, recurse=True)` without a highstate:
/// a non-empty mapping where no state (at any depth) failed.
pub(crate) fn check_result(ret: &Value) -> bool {
    let Value::Object(m) = ret else { return false };
    if m.is_empty() {
        return false;
    }
    m.values().all(|item| match item {
        Value::Object(s) => match s.get("result") {
            Some(Value::Bool(false)) => false,
            Some(_) => true,
            None => check_result(item),
        },
        _ => true,
    })
}

/// One line saying why a minion's return is not a state result (Salt's
/// `_format_failure_detail`); empty when its `changes` entry says enough.
fn failure_detail(minion: &str, ret: Option<&Value>) -> String {
    match ret {
        None => format!("Minion {minion} did not return a state result."),
        Some(Value::Array(items)) => {
            let parts: Vec<String> = items
                .iter()
                .filter(|v| python_bool(v))
                .map(py_str)
                .collect();
            if parts.is_empty() {
                format!("Minion {minion} returned an empty error list.")
            } else {
                format!("Minion {minion} returned errors: {}", parts.join("; "))
            }
        }
        Some(Value::Object(_)) => String::new(),
        Some(other) => format!(
            "Minion {minion} returned {} instead of a state result.",
            halite_salt_rules::pyfmt::python_repr(other)
        ),
    }
}

/// The minions of a job with what each returned (`None`: no return), in
/// target order.
fn returns_of(outcome: &JobOutcome) -> Vec<(String, Option<Value>, i64)> {
    outcome
        .minions
        .iter()
        .map(|id| match outcome.returns.get(id) {
            Some(data) => (
                id.clone(),
                Some(data.get("return").cloned().unwrap_or(Value::Null)),
                data.get("retcode").and_then(Value::as_i64).unwrap_or(0),
            ),
            None => (id.clone(), None, 0),
        })
        .collect()
}

/// Salt's `_fire_args`: `salt/run/<orchestration jid>/args` says which
/// step publishes what, before it does.
fn fire_args(call: &StateCall<'_>, kind: &str, req: &JobRequest) {
    let Some(jid) = call
        .env
        .opts()
        .get("__orchestration_jid__")
        .and_then(Value::as_str)
    else {
        return;
    };
    // Salt 3008.5's keys (a capture of its bus, docs/orchestration.md):
    // `_cmd_meta` for a function step; `expect_minions`, `ret`, `ssh` and
    // `timeout` as the step gave them or their defaults.
    let function = kind == "function";
    let mut args = Map::new();
    if function {
        args.insert("_cmd_meta".into(), Value::Bool(true));
    }
    args.insert("arg".into(), Value::Array(req.arg.clone()));
    args.insert(
        "expect_minions".into(),
        Value::Bool(call.arg_bool("expect_minions", !function)),
    );
    args.insert("kwarg".into(), Value::Object(req.kwarg.clone()));
    args.insert(
        "ret".into(),
        call.arg("ret").cloned().unwrap_or_else(|| Value::from("")),
    );
    args.insert("ssh".into(), Value::Bool(call.arg_bool("ssh", false)));
    args.insert("tgt_type".into(), Value::from(req.tgt_type.as_str()));
    args.insert(
        "timeout".into(),
        call.arg("timeout").cloned().unwrap_or(Value::Null),
    );
    let mut data = Map::new();
    data.insert("type".into(), Value::from(kind));
    data.insert("tgt".into(), Value::from(req.tgt.as_str()));
    data.insert("name".into(), Value::from(call.name()));
    data.insert("args".into(), Value::Object(args));
    // Not in Salt's event: the run's user, so a reactor on `salt/run/*`
    // skips the steps of the orchestrations it started itself.
    data.insert("user".into(), Value::from(run_user(call.env)));
    call.env
        .fire_event(&format!("salt/run/{jid}/args"), &Value::Object(data));
}

fn publish(
    call: &StateCall<'_>,
    kind: &str,
    cfg: &MasterConfig,
    fun: &str,
    arg: Vec<Value>,
    kwarg: Map,
) -> Result<JobOutcome, StateError> {
    let tgt = call.require_str("tgt")?;
    let tgt_type = call.arg_str("tgt_type")?.unwrap_or_else(|| "glob".into());
    let timeout = step_timeout(call, cfg)?;
    let mut req = JobRequest {
        tgt,
        tgt_type,
        fun: fun.to_string(),
        arg,
        kwarg,
        user: user(),
    };
    tracing::debug!(tgt = %req.tgt, fun, "orchestration step publishes");
    fire_args(call, kind, &req);
    // `ret`, `ret_config`, `ret_kwargs`: the minions also send their
    // returns to these returners (as `--return`).
    if let Some(mut spec) = call
        .arg("ret")
        .and_then(halite_modules::returners::ReturnSpec::from_names)
    {
        spec.ret_config = call.arg_str("ret_config")?.filter(|c| !c.is_empty());
        if let Some(Value::Object(k)) = call.arg("ret_kwargs") {
            spec.ret_kwargs = k.clone();
        }
        spec.to_kwargs(&mut req.kwarg);
    }
    match call.arg("batch") {
        Some(b) => run_batched(cfg, &req, &py_str(b), timeout),
        None => run_job(cfg, &req, timeout),
    }
    .map_err(|e| StateError::Other(e.to_string()))
}

fn refuse_ssh(call: &StateCall<'_>) -> Result<(), StateError> {
    if call.arg_bool("ssh", false) {
        return Err(StateError::Other(
            "ssh=True is not supported: halite has no salt-ssh. Install halite-minion on these hosts and target them without ssh.".into(),
        ));
    }
    Ok(())
}

/// `salt.state`: applies `sls` (or the highstate) to the targeted minions.
fn state(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    refuse_ssh(call)?;
    let name = call.name().to_string();
    let allow_fail = match call.arg("allow_fail") {
        None => 0,
        Some(v) => match v
            .as_i64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
        {
            Some(n) => n,
            None => {
                return Ok(StateResult::fail(
                    name,
                    "Passed invalid value for 'allow_fail', must be an int",
                ))
            }
        },
    };
    let mut arg = Vec::new();
    let fun = if call.arg_bool("highstate", false) {
        "state.highstate"
    } else if let Some(top) = call.arg_str("top")? {
        arg.push(Value::from(top));
        "state.top"
    } else if let Some(sls) = call.arg("sls") {
        arg.push(match sls {
            Value::Array(a) => Value::from(a.iter().map(py_str).collect::<Vec<_>>().join(",")),
            other => Value::from(py_str(other)),
        });
        "state.sls"
    } else {
        return Ok(StateResult::fail(
            name,
            "No highstate or sls specified, no execution made",
        ));
    };
    let mut kwarg = Map::new();
    match call.arg("test") {
        Some(t) => {
            kwarg.insert("test".into(), t.clone());
        }
        None if call.test => {
            kwarg.insert("test".into(), Value::Bool(true));
        }
        None => {}
    }
    if let Some(p) = call.arg("pillar").filter(|p| python_bool(p)) {
        kwarg.insert("pillar".into(), p.clone());
    }
    for key in ["pillarenv", "saltenv", "exclude"] {
        if let Some(v) = call.arg(key) {
            kwarg.insert(key.into(), v.clone());
        }
    }
    kwarg.insert("queue".into(), Value::Bool(call.arg_bool("queue", false)));
    match call.arg("concurrent") {
        None => {
            kwarg.insert("concurrent".into(), Value::Bool(false));
        }
        Some(Value::Bool(b)) => {
            kwarg.insert("concurrent".into(), Value::Bool(*b));
        }
        Some(_) => {
            return Ok(StateResult::fail(
                name,
                "Must pass in boolean for value of 'concurrent'",
            ))
        }
    }
    let cfg = master_config(call.env)?;
    let mut warnings = Vec::new();
    let outcome = publish(call, "state", &cfg, fun, arg, kwarg)?;
    let fail_minions = fail_minions(call, &mut warnings);
    let mut ret = StateResult::new(name, Some(true));
    if let Some(jid) = &outcome.jid {
        ret.extra
            .insert("__jid__".into(), Value::from(jid.as_str()));
    }
    if !warnings.is_empty() {
        ret.extra.insert("warnings".into(), Value::Array(warnings));
    }
    let expect_minions = call.arg_bool("expect_minions", true);
    if outcome.minions.is_empty() && expect_minions {
        ret.result = Some(false);
        ret.comment = "No minions returned".into();
        return Ok(ret);
    }
    let mut changes = Map::new();
    let mut fail = Vec::new();
    let mut details = Vec::new();
    let mut no_change = Vec::new();
    for (minion, m_ret, _) in returns_of(&outcome) {
        let ok = m_ret.as_ref().is_some_and(check_result);
        if !ok {
            if !fail_minions.contains(&minion) {
                let detail = failure_detail(&minion, m_ret.as_ref());
                if !detail.is_empty() {
                    details.push(detail);
                }
                fail.push(minion.clone());
            }
            changes.insert(minion, m_ret.unwrap_or(Value::Bool(false)));
            continue;
        }
        let changed = m_ret.as_ref().and_then(Value::as_object).is_some_and(|m| {
            m.values()
                .any(|s| s.get("changes").is_some_and(python_bool))
        });
        match (changed, m_ret) {
            (true, Some(r)) => {
                changes.insert(minion, r);
            }
            _ => no_change.push(minion),
        }
    }
    let mut comment;
    if fail.len() as i64 > allow_fail {
        ret.result = Some(false);
        comment = format!("Run failed on minions: {}", fail.join(", "));
        details.sort();
        if !details.is_empty() {
            comment.push('\n');
            comment.push_str(&details.join("\n"));
        }
    } else {
        comment = "States ran successfully.".to_string();
        if !changes.is_empty() {
            let ids: Vec<&str> = changes.keys().map(String::as_str).collect();
            comment.push_str(&format!(" Updating {}.", ids.join(", ")));
        }
        if !no_change.is_empty() {
            comment.push_str(&format!(" No changes made to {}.", no_change.join(", ")));
        }
    }
    ret.comment = comment;
    let test = call.arg("test").map(python_bool).unwrap_or(false) || call.test;
    if !changes.is_empty() {
        ret.changes.insert("out".into(), Value::from("highstate"));
        ret.changes.insert("ret".into(), Value::Object(changes));
        if test && ret.result == Some(true) {
            ret.result = None;
        }
    }
    Ok(ret)
}

/// `salt.function`: runs one execution function on the targeted minions.
fn function(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    refuse_ssh(call)?;
    let name = call.name().to_string();
    let tgt = call.require_str("tgt")?;
    let mut warnings = Vec::new();
    let arg = match call.arg("arg") {
        None => Vec::new(),
        Some(Value::String(s)) => {
            warnings.push(Value::from("Please specify 'arg' as a list of arguments."));
            s.split_whitespace().map(Value::from).collect()
        }
        Some(Value::Array(a)) => a.clone(),
        Some(other) => vec![other.clone()],
    };
    let kwarg = match call.arg("kwarg") {
        None => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Err(StateError::BadArg(format!(
                "kwarg must be a dictionary of keyword arguments, not {}",
                halite_state::type_name(other)
            )))
        }
    };
    let mut ret = StateResult::new(name.clone(), Some(true));
    if !warnings.is_empty() {
        ret.extra
            .insert("warnings".into(), Value::Array(warnings.clone()));
    }
    if call.test {
        ret.result = None;
        ret.comment = format!("Function {name} would be executed on target {tgt}");
        return Ok(ret);
    }
    let cfg = master_config(call.env)?;
    let outcome = match publish(call, "function", &cfg, &name, arg, kwarg) {
        Ok(o) => o,
        Err(e) => {
            ret.result = Some(false);
            ret.comment = e.to_string();
            return Ok(ret);
        }
    };
    if let Some(jid) = &outcome.jid {
        ret.extra
            .insert("__jid__".into(), Value::from(jid.as_str()));
    }
    let fail_minions = fail_minions(call, &mut warnings);
    if !warnings.is_empty() {
        ret.extra.insert("warnings".into(), Value::Array(warnings));
    }
    let fail_function = call.arg_str("fail_function")?;
    let mut changes = Map::new();
    let mut fail: Vec<String> = Vec::new();
    // Minions that did not return are left out, as Salt's default
    // `expect_minions=False` leaves them.
    for (minion, m_ret, retcode) in returns_of(&outcome) {
        let Some(m_ret) = m_ret else { continue };
        if retcode != 0 {
            ret.result = Some(false);
            if !fail.contains(&minion) {
                fail.push(minion.clone());
            }
        }
        let mut ok = match &fail_function {
            None => true,
            Some(f) => call
                .env
                .call_function(f, std::slice::from_ref(&m_ret), &Map::new())
                .map(|v| python_bool(&v))
                .unwrap_or(false),
        };
        if m_ret == Value::Bool(false) {
            ok = false;
        }
        if !ok && !fail_minions.contains(&minion) && !fail.contains(&minion) {
            fail.push(minion.clone());
        }
        changes.insert(minion, m_ret);
    }
    if outcome.returns.is_empty() {
        ret.result = Some(false);
        ret.comment = "No minions responded".into();
        return Ok(ret);
    }
    if fail.is_empty() {
        ret.comment = "Function ran successfully.".into();
    } else {
        ret.result = Some(false);
        ret.comment = format!(
            "Running function {name} failed on minions: {}",
            fail.join(", ")
        );
    }
    let ids: Vec<String> = changes.keys().cloned().collect();
    ret.comment
        .push_str(&format!(" Function {name} ran on {}.", ids.join(", ")));
    ret.changes.insert("ret".into(), Value::Object(changes));
    Ok(ret)
}

/// The identifier `event_id` of an event's data (or of its inner `data`,
/// as events fired by minions carry it).
fn event_identifier<'a>(data: &'a Value, event_id: &str) -> Option<&'a Value> {
    data.get(event_id)
        .filter(|v| !v.is_null())
        .or_else(|| data.get("data").and_then(|d| d.get(event_id)))
        .filter(|v| !v.is_null())
}

/// `salt.wait_for_event`: waits until an event whose tag matches `name`
/// has been seen for every identifier of `id_list`.
fn wait_for_event(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    if call.test {
        return Ok(StateResult::new(name.clone(), None)
            .with_comment(format!("Orchestration would wait for event '{name}'")));
    }
    let mut id_list: Vec<String> = match call.arg("id_list") {
        Some(Value::Array(a)) => a.iter().map(py_str).collect(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(other) => vec![py_str(other)],
        None => {
            return Err(StateError::MissingArg(
                "id_list".into(),
                "salt.wait_for_event".into(),
            ))
        }
    };
    let event_id = call.arg_str("event_id")?.unwrap_or_else(|| "id".into());
    let timeout = match call.arg("timeout") {
        None => Duration::from_secs(300),
        Some(_) => {
            let cfg = master_config(call.env)?;
            step_timeout(call, &cfg)?
        }
    };
    let cfg = master_config(call.env)?;
    let mut ret = StateResult::new(name.clone(), Some(false));
    let mut client = LocalClient::connect(&cfg.local_socket(), &cfg.root_key_path())
        .map_err(|e| StateError::Other(e.to_string()))?;
    client
        .send(LocalBody::Events {
            tagmatch: name.clone(),
        })
        .map_err(|e| StateError::Other(e.to_string()))?;
    let start = Instant::now();
    let deadline = start + timeout;
    let mut seen: Vec<Value> = Vec::new();
    while !id_list.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let reply = client
            .next(Some(left))
            .map_err(|e| StateError::Other(e.to_string()))?;
        let Some(LocalReply::Event { tag, data }) = reply else {
            if reply.is_none() && Instant::now() < deadline {
                return Err(StateError::Other(
                    "the master closed its event stream; is halite-master still running?".into(),
                ));
            }
            continue;
        };
        if !halite_salt_rules::fnmatch(&tag, &name) {
            continue;
        }
        let Some(val) = event_identifier(&data, &event_id) else {
            continue;
        };
        let found: BTreeSet<String> = match val {
            Value::Array(a) => a.iter().map(py_str).collect(),
            other => std::iter::once(py_str(other)).collect(),
        };
        id_list.retain(|id| {
            if found.contains(id) {
                seen.push(Value::from(id.as_str()));
                false
            } else {
                true
            }
        });
    }
    if !seen.is_empty() {
        ret.changes
            .insert("minions_seen".into(), Value::Array(seen));
    }
    if id_list.is_empty() {
        ret.result = Some(true);
        ret.comment = format!(
            "All events seen in {} seconds.",
            start.elapsed().as_secs_f64()
        );
    } else {
        ret.comment = "Timeout value reached.".into();
    }
    Ok(ret)
}

/// `salt.runner`: runs another runner on the master.
fn runner(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    if call.test {
        return Ok(StateResult::new(name.clone(), None)
            .with_comment(format!("Runner function '{name}' would be executed.")));
    }
    let cfg = master_config(call.env)?;
    let mut kwargs = runner_kwargs(call.chunk);
    inherit_user(call.env, &mut kwargs);
    let (ret_value, success) = match crate::call_runner(&cfg, &name, &kwargs) {
        Ok(v) => {
            let ok = !v.as_object().is_some_and(|m| m.contains_key("Error"));
            (v, ok)
        }
        Err(e) => (Value::from(e.to_string()), false),
    };
    let mut ret = StateResult::new(name.clone(), Some(success));
    ret.changes.insert("return".into(), ret_value);
    ret.comment = format!(
        "Runner function '{name}' {}.",
        if success { "executed" } else { "failed" }
    );
    Ok(ret)
}

/// The keyword arguments a runner step passes on: every argument of the
/// chunk but the state's own bookkeeping.
fn runner_kwargs(chunk: &halite_state::LowChunk) -> Map {
    let Value::Object(all) = chunk.to_value() else {
        return Map::new();
    };
    all.into_iter()
        .filter(|(k, _)| {
            !k.starts_with("__")
                && !matches!(
                    k.as_str(),
                    "name"
                        | "state"
                        | "fun"
                        | "order"
                        | "require"
                        | "watch"
                        | "onfail"
                        | "onchanges"
                        | "prereq"
                        | "require_in"
                        | "watch_in"
                        | "onfail_in"
                        | "onchanges_in"
                        | "prereq_in"
                        | "use"
                        | "use_in"
                        | "listen"
                        | "listen_in"
                        | "require_any"
                        | "watch_any"
                        | "onfail_any"
                        | "onchanges_any"
                        | "onlyif"
                        | "unless"
                        | "creates"
                        | "fire_event"
                        | "reload_modules"
                        | "failhard"
                        | "retry"
                        | "parallel"
                        | "runners"
                )
        })
        .collect()
}

/// `salt.parallel_runners`: runs several runners at once; fails when one
/// of them fails.
fn parallel_runners(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let runners: Vec<(String, String, Map)> = match call.arg("runners") {
        Some(Value::String(s)) => vec![(s.clone(), s.clone(), Map::new())],
        Some(Value::Object(m)) => m
            .iter()
            .map(|(id, conf)| {
                let mut kwargs = conf.as_object().cloned().unwrap_or_default();
                let fun = kwargs
                    .remove("name")
                    .map(|v| py_str(&v))
                    .unwrap_or_else(|| id.clone());
                (id.clone(), fun, kwargs)
            })
            .collect(),
        _ => {
            return Ok(StateResult::fail(
                name,
                "The runners parameter must be a string or dict.",
            ))
        }
    };
    if call.test {
        return Ok(StateResult::new(name, None).with_comment(format!(
            "Runner functions {} would be executed.",
            runners
                .iter()
                .map(|(_, f, _)| f.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let cfg = master_config(call.env)?;
    let results: Vec<(String, Result<Value, crate::RunnerError>)> = std::thread::scope(|s| {
        let handles: Vec<_> = runners
            .iter()
            .map(|(id, fun, kwargs)| {
                let cfg = &cfg;
                let mut kwargs = kwargs.clone();
                inherit_user(call.env, &mut kwargs);
                (
                    id.clone(),
                    s.spawn(move || crate::call_runner(cfg, fun, &kwargs)),
                )
            })
            .collect();
        handles
            .into_iter()
            .map(|(id, h)| {
                let r = h.join().unwrap_or_else(|_| {
                    Err(crate::RunnerError::Failed("the runner panicked".into()))
                });
                (id, r)
            })
            .collect()
    });
    let mut changes = Map::new();
    let mut failed = Vec::new();
    for (id, r) in results {
        let (value, ok) = match r {
            Ok(v) => {
                let ok = !v.as_object().is_some_and(|m| m.contains_key("Error"))
                    && v.get("result") != Some(&Value::Bool(false));
                (v, ok)
            }
            Err(e) => (Value::from(e.to_string()), false),
        };
        if !ok {
            failed.push(id.clone());
        }
        let mut entry = Map::new();
        entry.insert("return".into(), value);
        changes.insert(id, Value::Object(entry));
    }
    let comment = match failed.len() {
        0 => "All runner functions executed successfully.".to_string(),
        1 => format!("Runner {} failed.", failed[0]),
        _ => format!("Runners {} failed.", failed.join(", ")),
    };
    let mut ret = StateResult::new(name, Some(failed.is_empty())).with_comment(comment);
    ret.changes = changes;
    Ok(ret)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn check_result_is_salts() {
        assert!(check_result(
            &json!({"a": {"result": true}, "b": {"result": null}})
        ));
        assert!(!check_result(
            &json!({"a": {"result": true}, "b": {"result": false}})
        ));
        assert!(!check_result(&json!({})));
        assert!(!check_result(&json!(["Rendering SLS 'base:x' failed"])));
        assert!(!check_result(&json!({"m": {"a": {"result": false}}})));
    }

    #[test]
    fn failure_details_say_what_came_back() {
        assert_eq!(
            failure_detail("web1", None),
            "Minion web1 did not return a state result."
        );
        assert_eq!(
            failure_detail(
                "web1",
                Some(&json!(["No matching sls found for 'x' in env 'base'"]))
            ),
            "Minion web1 returned errors: No matching sls found for 'x' in env 'base'"
        );
        assert_eq!(
            failure_detail("web1", Some(&json!(false))),
            "Minion web1 returned False instead of a state result."
        );
    }
}
