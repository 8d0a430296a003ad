//! Salt's `test` execution module: liveness and argument echo functions.

use halite_state::{Map, Value};

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The version halite reports as `test.version` (Salt-compatible numbering
/// so that formulas comparing `saltversioninfo` keep working).
pub const SALT_COMPAT_VERSION: &str = "3008.5";

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "test",
    functions: &[
        ExecFunction::new("ping", ping),
        ExecFunction::new("echo", echo),
        ExecFunction::new("true", ping),
        ExecFunction::new("false", false_),
        ExecFunction::new("sleep", |a, _| sleep("sleep", a)),
        ExecFunction::new("version", version),
        ExecFunction::new("arg", arg),
        ExecFunction::new("kwarg", kwarg),
        ExecFunction::new("retcode", retcode),
        ExecFunction::new("exception", exception),
        ExecFunction::new("not_loaded", not_loaded),
        ExecFunction::new("get_opts", get_opts),
        ExecFunction::new("opts_pkg", get_opts),
        ExecFunction::new("outputter", outputter),
        ExecFunction::new("rand_sleep", |a, _| sleep("rand_sleep", a)),
    ],
};

/// `test.ping` and `test.true`: `True`.
fn ping(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Bool(true))
}

/// `test.false`: `False`.
fn false_(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Bool(false))
}

/// `test.echo <text>`: the text, as Python's `str()` of it.
fn echo(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(args
        .get(0, "text")
        .cloned()
        .map(|v| match v {
            Value::String(s) => Value::String(s),
            other => Value::String(crate::exec::py_str(&other)),
        })
        .unwrap_or(Value::from("")))
}

/// `test.outputter <data>`: the data unchanged.
fn outputter(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(args.get(0, "data").cloned().unwrap_or(Value::Null))
}

/// `test.sleep <length>` and `test.rand_sleep <max>` (`fun`): sleeps that
/// many seconds, refusing more than a day.
fn sleep(fun: &str, args: &Args) -> Result<Value, ExecError> {
    let secs = args
        .get(0, if fun == "sleep" { "length" } else { "max" })
        .and_then(|v| {
            v.as_f64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        })
        .ok_or_else(|| {
            ExecError::Invocation(format!("test.{fun}() requires a number of seconds"))
        })?;
    if !(0.0..=86400.0).contains(&secs) {
        return Err(ExecError::Invocation(format!(
            "test.{fun}: {secs} is not a valid number of seconds"
        )));
    }
    // A job signalled by saltutil.kill_job stops sleeping: Salt's job
    // process dies of the signal.
    if let Some(signal) = crate::job_procs::sleep(std::time::Duration::from_secs_f64(secs)) {
        return Err(ExecError::Execution(format!(
            "test.{fun} was stopped by signal {signal}"
        )));
    }
    Ok(Value::Bool(true))
}

/// `test.version`: the Salt version halite is compatible with.
fn version(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::from(SALT_COMPAT_VERSION))
}

/// `test.arg`: the positional and keyword arguments it was given.
fn arg(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let mut m = Map::new();
    m.insert("args".into(), Value::Array(args.positional.clone()));
    m.insert("kwargs".into(), Value::Object(args.kwargs.clone()));
    Ok(Value::Object(m))
}

/// `test.kwarg`: the keyword arguments it was given.
fn kwarg(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Object(args.kwargs.clone()))
}

/// `test.retcode [code]`: the code given (0 by default).
fn retcode(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(args.get(0, "code").cloned().unwrap_or(Value::from(0)))
}

/// `test.exception [message]`: fails with the message.
fn exception(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Err(ExecError::Execution(
        args.get_str(0, "message")
            .unwrap_or_else(|| "Test Exception".into()),
    ))
}

/// `test.get_opts` and `test.opts_pkg`: the minion's options.
fn get_opts(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    Ok(host.opts.clone())
}

/// `test.not_loaded`: the modules that failed to load (none).
fn not_loaded(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Array(Vec::new()))
}
