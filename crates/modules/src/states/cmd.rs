//! Salt's `cmd` state module: `run`, `wait`, `script`, `wait_script` and
//! `mod_watch`.

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::cmd::{apply_success_retcodes, cmd_options, env_pairs, run_all_value};

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "cmd",
    functions: &[
        StateFunction::new("run", CmdState::run),
        StateFunction::new("wait", wait),
        StateFunction::new("script", CmdState::script),
        StateFunction::new("wait_script", wait),
        StateFunction::new("mod_watch", mod_watch),
    ],
};

/// Namespace of `cmd.run` and `cmd.script`: their bodies keep their place
/// (and indentation) while command execution moves into one module.
struct CmdState;

fn chunk_kwargs(call: &StateCall<'_>) -> Map {
    let mut kw = Map::new();
    for (k, v) in call.chunk.iter() {
        if !halite_state::requisite::is_internal_keyword(k) && k != "name" {
            kw.insert(k.to_string(), v.clone());
        }
    }
    // runas and env are runtime keywords in Salt but cmd uses them too.
    for k in [
        "runas",
        "cwd",
        "shell",
        "env",
        "timeout",
        "success_retcodes",
        "stdin",
    ] {
        if let Some(v) = call.chunk.get(k) {
            kw.insert(k.into(), v.clone());
        }
    }
    kw
}

/// Parses the last line of a `stateful` command's output (Salt's
/// `_reinterpreted_state`).
fn reinterpret(mut state: StateResult) -> StateResult {
    let ret = std::mem::take(&mut state.changes);
    state.comment = String::new();
    let out = ret
        .get("stdout")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if out.is_empty() {
        if let Some(e) = ret
            .get("stderr")
            .and_then(Value::as_str)
            .filter(|e| !e.is_empty())
        {
            state.comment = e.to_string();
        }
        return state;
    }
    let mut is_json = false;
    let mut idx: Option<usize> = None;
    let mut data: Map = match serde_json::from_str::<Value>(&out) {
        Ok(Value::Object(m)) => {
            is_json = true;
            m
        }
        Ok(_) => {
            state.result = Some(false);
            state.comment = "script JSON output must be a JSON object (e.g., {})!".into();
            return state;
        }
        Err(_) => {
            let trimmed = out.trim_end();
            let line = match trimmed.rfind('\n') {
                Some(i) => {
                    idx = Some(i);
                    &out[i + 1..]
                }
                None => out.as_str(),
            };
            let mut m = Map::new();
            for item in crate::command::shell_words(line) {
                match item.split_once('=') {
                    Some((k, v)) if !v.contains('=') => {
                        m.insert(k.into(), Value::from(v));
                    }
                    _ => {
                        state.result = Some(false);
                        state.comment =
                            "Failed parsing script output! Stdout must be JSON or a line of name=value pairs.".into();
                        state.changes = ret;
                        return state;
                    }
                }
            }
            m
        }
    };
    let changed = data
        .get("changed")
        .map(|v| {
            matches!(
                v.as_str().map(str::to_lowercase).as_deref(),
                Some("true" | "yes" | "1")
            ) || v == &Value::Bool(true)
        })
        .unwrap_or(false);
    if let Some(c) = data.shift_remove("comment") {
        state.comment = c
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| c.to_string());
    }
    if changed {
        for (k, v) in &ret {
            data.entry(k.clone()).or_insert_with(|| v.clone());
        }
        let stdout = if is_json {
            String::new()
        } else {
            match idx {
                Some(i) => out[..i].to_string(),
                None => String::new(),
            }
        };
        data.insert("stdout".into(), Value::from(stdout));
        state.changes = data;
    }
    state
}

impl CmdState {
    fn run(call: &StateCall<'_>) -> Result<StateResult, StateError> {
        let name = call.name().to_string();
        let mut ret = StateResult::new(&name, Some(false));
        let stateful = call.chunk.get("stateful") == Some(&Value::Bool(true));
        let kwargs = chunk_kwargs(call);
        if let Err(e) = env_pairs(kwargs.get("env")) {
            ret.comment = e;
            return Ok(ret);
        }
        if call.test {
            ret.result = None;
            // `str()` of the name: quoted when it is a yamlex string.
            let shown = call.chunk.shown_name();
            ret.comment = format!("Command \"{shown}\" would have been executed");
            ret.changes.insert("cmd".into(), Value::from(name));
            return Ok(if stateful { reinterpret(ret) } else { ret });
        }
        if let Some(cwd) = kwargs.get("cwd").and_then(Value::as_str) {
            if !std::path::Path::new(cwd).is_dir() {
                ret.comment = format!("Desired working directory \"{cwd}\" is not available");
                return Ok(ret);
            }
        }
        // A bad `timeout` fails the state with Salt's message as comment.
        let opts = match cmd_options(&kwargs, call.env.grains(), true) {
            Ok(opts) => opts,
            Err(e) => {
                ret.comment = e;
                return Ok(ret);
            }
        };
        let mut out = match call.env.run_cmd(&name, &opts) {
            Ok(o) => o,
            Err(e) => {
                ret.comment = format!("Unable to run command '{name}': {e}");
                return Ok(ret);
            }
        };
        apply_success_retcodes(&mut out, &kwargs);
        if let Value::Object(m) = run_all_value(&out) {
            ret.changes = m;
        }
        ret.result = Some(out.retcode == 0);
        let shown = call.chunk.shown_name();
        ret.comment = format!("Command \"{shown}\" run");
        if stateful {
            ret = reinterpret(ret);
        }
        Ok(ret)
    }

    fn script(call: &StateCall<'_>) -> Result<StateResult, StateError> {
        let name = call.name().to_string();
        let mut ret = StateResult::new(&name, Some(false));
        let stateful = call.chunk.get("stateful") == Some(&Value::Bool(true));
        let mut kwargs = chunk_kwargs(call);
        if let Err(e) = env_pairs(kwargs.get("env")) {
            ret.comment = e;
            return Ok(ret);
        }
        let source = call
            .arg_str("source")?
            .unwrap_or_else(|| name.split_whitespace().next().unwrap_or("").to_string());
        if !kwargs.contains_key("args") && name.split_whitespace().count() > 1 {
            if let Some((_, rest)) = name.split_once(' ') {
                kwargs.insert("args".into(), Value::from(rest));
            }
        }
        let mut ctx = call
            .arg("defaults")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if let Some(c) = call.arg("context").and_then(Value::as_object) {
            ctx.extend(c.clone());
        }
        kwargs.insert("context".into(), Value::Object(ctx));
        if call.test {
            ret.result = None;
            let shown = call.chunk.shown_name();
            ret.comment = format!("Command '{shown}' would have been executed");
            return Ok(if stateful { reinterpret(ret) } else { ret });
        }
        if let Some(cwd) = kwargs.get("cwd").and_then(Value::as_str) {
            if !std::path::Path::new(cwd).is_dir() {
                ret.comment = format!("Desired working directory \"{cwd}\" is not available");
                return Ok(ret);
            }
        }
        let saltenv = call.chunk.env();
        let saltenv = if saltenv.is_empty() { "base" } else { saltenv };
        let args = crate::Args {
            positional: vec![Value::from(source.clone())],
            kwargs: kwargs.clone(),
        };
        let _ = args;
        let out = match call
            .env
            .call_function("cmd.script", &[Value::from(source.clone())], &{
                let mut k = kwargs.clone();
                k.insert("saltenv".into(), Value::from(saltenv));
                k
            }) {
            Ok(v) => v,
            Err(e) => {
                ret.comment = e;
                return Ok(ret);
            }
        };
        if let Value::Object(m) = out {
            let rc = m.get("retcode").and_then(Value::as_i64).unwrap_or(1);
            ret.changes = m;
            ret.result = Some(rc == 0);
        }
        let shown = call.chunk.shown_name();
        ret.comment = format!("Command '{shown}' run");
        if stateful {
            ret = reinterpret(ret);
        }
        Ok(ret)
    }
}

/// `cmd.wait` and `cmd.wait_script`: nothing by themselves; they run as
/// `mod_watch` when a watched state changed.
fn wait(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    Ok(StateResult::ok(call.name(), ""))
}

/// `cmd.mod_watch`: runs the command or script of the watching state.
fn mod_watch(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    match call.sfun.unwrap_or("") {
        "wait" | "run" | "watch" => CmdState::run(call),
        "wait_script" | "script" => CmdState::script(call),
        other => Ok(StateResult::fail(
            call.name(),
            format!(
                "cmd.{other} does not work with the watch requisite, please use cmd.wait or cmd.wait_script"
            ),
        )),
    }
}
