//! `salt_fallback: <python>` (off by default): a function that neither
//! halite nor the custom Python modules provide runs through Salt's own
//! loader, where Salt is installed on the host. One short-lived process
//! per call runs the shim `salt_fallback.py` with that interpreter and
//! halite's options, grains and pillar (`salt.loader.minion_mods`); each
//! use is logged, so halite's own coverage is never mistaken for Salt's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use halite_state::{CmdOptions, CmdTimeout, Map, Value};

use crate::exec::{Args, ExecError};
use crate::Host;

/// The shim the interpreter runs (Python; Salt importable).
const SHIM: &str = include_str!("salt_fallback.py");

/// `fun` run through Salt's loader when `salt_fallback` is set; `None`
/// when it is not set or Salt has no such function either (then the
/// caller's "is not available" stands).
pub fn call(host: &Host, fun: &str, args: &Args) -> Option<Result<Value, ExecError>> {
    let python = interpreter(host)?;
    Some(run(host, python, fun, args)).and_then(|r| r.transpose())
}

/// The configured `salt_fallback` interpreter; `None` when it is off or
/// the host is a master compiling for a minion (the minion decides).
fn interpreter(host: &Host) -> Option<&str> {
    if host.exec.is_remote() {
        return None;
    }
    host.opt("salt_fallback")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
}

/// Whether Salt's own loader has `fun` (a function neither halite nor a
/// custom module has), when `salt_fallback` is set: what makes
/// `salt['network.netstat']` defined in a template and
/// `'network.netstat' in __salt__` true in a custom module. Asked once per
/// function and interpreter in a process (one short Python run each).
pub fn has(host: &Host, fun: &str) -> bool {
    type Answers = Mutex<HashMap<(String, String), bool>>;
    static ANSWERS: OnceLock<Answers> = OnceLock::new();
    let Some(python) = interpreter(host) else {
        return false;
    };
    if host.exec.has(fun) || !fun.contains('.') {
        return false;
    }
    let key = (python.to_string(), fun.to_string());
    let answers = ANSWERS.get_or_init(Default::default);
    if let Some(known) = answers.lock().ok().and_then(|a| a.get(&key).copied()) {
        return known;
    }
    let found = match shim(host, python, fun, &Args::default(), true) {
        Ok(answer) => answer.get("has").is_some(),
        Err(e) => {
            tracing::warn!("{e}");
            false
        }
    };
    if let Ok(mut a) = answers.lock() {
        a.insert(key, found);
    }
    found
}

/// Runs the shim; `Ok(None)` when Salt has no `fun`.
fn run(host: &Host, python: &str, fun: &str, args: &Args) -> Result<Option<Value>, ExecError> {
    let answer = shim(host, python, fun, args, false)?;
    if answer.get("missing").is_some() {
        return Ok(None);
    }
    tracing::warn!("{fun} ran through Salt's own module (salt_fallback)");
    if let Some(error) = answer.get("error").and_then(Value::as_str) {
        return Err(match answer.get("kind").and_then(Value::as_str) {
            Some("SaltInvocationError") => ExecError::Invocation(error.to_string()),
            _ => ExecError::Execution(error.trim_end().to_string()),
        });
    }
    Ok(Some(answer.get("ret").cloned().unwrap_or(Value::Null)))
}

/// One run of the shim for `fun` (only asking whether Salt has it when
/// `check`): its JSON answer.
fn shim(
    host: &Host,
    python: &str,
    fun: &str,
    args: &Args,
    check: bool,
) -> Result<Value, ExecError> {
    let shim = shim_path(host)?;
    let kwargs: Map = args
        .kwargs
        .iter()
        .filter(|(k, _)| !k.starts_with("__pub_"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let request = serde_json::json!({
        "fun": fun,
        "check": check,
        "args": args.positional,
        "kwargs": kwargs,
        "opts": host.opts,
        "grains": host.grains,
        "pillar": host.pillar,
    });
    let cmd = format!(
        "{} -I -B {}",
        halite_salt_rules::shell::shlex_quote(python),
        halite_salt_rules::shell::shlex_quote(&shim.to_string_lossy())
    );
    let timeout = host
        .opt("python_timeout")
        .and_then(Value::as_f64)
        .filter(|s| *s > 0.0)
        .map(|s| CmdTimeout {
            duration: std::time::Duration::from_secs_f64(s),
            shown: s.to_string(),
        });
    let out = crate::command::run_command(
        &cmd,
        &CmdOptions {
            stdin: Some(request.to_string()),
            timeout,
            ..Default::default()
        },
    )
    .map_err(|e| {
        ExecError::Execution(format!(
            "salt_fallback: cannot run {python} for {fun}: {e}; set salt_fallback to a python that can import salt, or remove it"
        ))
    })?;
    let answer: Value = serde_json::from_str(&out.stdout).map_err(|_| {
        let tail: Vec<&str> = out.stderr.lines().rev().take(5).collect();
        ExecError::Execution(format!(
            "salt_fallback: {python} did not answer for {fun} (exit {}): {}",
            out.retcode,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ))
    })?;
    Ok(answer)
}

/// `<cachedir>/salt_fallback/shim.py`, written when missing or changed.
fn shim_path(host: &Host) -> Result<PathBuf, ExecError> {
    let cachedir = host
        .opt("cachedir")
        .and_then(Value::as_str)
        .unwrap_or("/var/cache/halite/minion");
    let dir = Path::new(cachedir).join("salt_fallback");
    let path = dir.join("shim.py");
    if std::fs::read_to_string(&path).ok().as_deref() != Some(SHIM) {
        let io = |e: std::io::Error| {
            ExecError::Execution(format!(
                "salt_fallback: cannot write {}: {e}",
                path.display()
            ))
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        std::fs::write(&path, SHIM).map_err(io)?;
    }
    Ok(path)
}
