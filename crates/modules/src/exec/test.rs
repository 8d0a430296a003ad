//! Salt's `test` execution module: liveness and argument echo functions.

use halite_state::{Map, Value};

use crate::exec::{Args, ExecError, ExecModule};
use crate::Host;

/// The version halite reports as `test.version` (Salt-compatible numbering
/// so that formulas comparing `saltversioninfo` keep working).
pub const SALT_COMPAT_VERSION: &str = "3008.5";

/// `test.*` functions.
pub struct TestExec;

impl ExecModule for TestExec {
    fn name(&self) -> &'static str {
        "test"
    }

    fn functions(&self) -> Vec<&'static str> {
        vec![
            "ping",
            "echo",
            "true",
            "false",
            "sleep",
            "version",
            "arg",
            "kwarg",
            "retcode",
            "exception",
            "not_loaded",
            "get_opts",
            "opts_pkg",
            "outputter",
            "rand_sleep",
        ]
    }

    fn call(&self, fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
        match fun {
            "ping" => Ok(Value::Bool(true)),
            "echo" => Ok(args
                .get(0, "text")
                .cloned()
                .map(|v| match v {
                    Value::String(s) => Value::String(s),
                    other => Value::String(crate::exec::py_str(&other)),
                })
                .unwrap_or(Value::from(""))),
            "outputter" => Ok(args.get(0, "data").cloned().unwrap_or(Value::Null)),
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            "sleep" | "rand_sleep" => {
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
                std::thread::sleep(std::time::Duration::from_secs_f64(secs));
                Ok(Value::Bool(true))
            }
            "version" => Ok(Value::from(SALT_COMPAT_VERSION)),
            "arg" => {
                let mut m = Map::new();
                m.insert("args".into(), Value::Array(args.positional.clone()));
                m.insert("kwargs".into(), Value::Object(args.kwargs.clone()));
                Ok(Value::Object(m))
            }
            "kwarg" => Ok(Value::Object(args.kwargs.clone())),
            "retcode" => Ok(args.get(0, "code").cloned().unwrap_or(Value::from(0))),
            "exception" => Err(ExecError::Execution(
                args.get_str(0, "message")
                    .unwrap_or_else(|| "Test Exception".into()),
            )),
            "get_opts" | "opts_pkg" => Ok(host.opts.clone()),
            "not_loaded" => Ok(Value::Array(Vec::new())),
            other => Err(ExecError::NotAvailable(format!("test.{other}"))),
        }
    }
}

/// This module, as registered.
pub const MODULE: TestExec = TestExec;
