//! `unless`, `onlyif`, `creates` and `check_cmd`: the commands and
//! functions that decide whether a state runs, and whether it worked.

use super::invoke::stamp_identity;
use super::{Executor, StateReturn};
use crate::chunk::LowChunk;
use crate::module::{truthy, CmdOptions, CmdTimeout};
use crate::requisite::py_str;
use crate::value::{Map, Value};

/// The outcome of one `onlyif`/`unless` entry; `Fails` tells whether it
/// came from a shell command (rather than a `fun:` call).
pub(super) enum Condition {
    Holds,
    Fails(bool),
    BadType,
    NoFun(String),
}

impl<'a> Executor<'a> {
    pub(super) fn cmd_options(&self, low: &LowChunk) -> CmdOptions {
        let excluded: Vec<String> = match low.get("cmd_opts_exclude") {
            Some(Value::Array(a)) => a.iter().map(py_str).collect(),
            Some(v) => vec![py_str(v)],
            None => Vec::new(),
        };
        let get = |k: &str| {
            if excluded.iter().any(|e| e == k) {
                None
            } else {
                low.get(k).filter(|v| !v.is_null()).map(py_str)
            }
        };
        let mut env = Vec::new();
        if !excluded.iter().any(|e| e == "env") {
            match low.get("env") {
                Some(Value::Object(m)) => env.extend(m.iter().map(|(k, v)| (k.clone(), py_str(v)))),
                Some(Value::Array(a)) => {
                    for item in a {
                        if let Value::Object(m) = item {
                            env.extend(m.iter().map(|(k, v)| (k.clone(), py_str(v))));
                        }
                    }
                }
                _ => {}
            }
        }
        CmdOptions {
            cwd: get("cwd"),
            runas: get("runas"),
            shell: get("shell").or_else(|| {
                self.env()
                    .grains()
                    .get("shell")
                    .and_then(Value::as_str)
                    .map(String::from)
            }),
            env,
            stdin: None,
            python_shell: true,
            // A timeout Salt would refuse runs the check unlimited, as before.
            timeout: if excluded.iter().any(|e| e == "timeout") {
                None
            } else {
                CmdTimeout::from_value(low.get("timeout")).unwrap_or(None)
            },
        }
    }

    pub(super) fn retcode(&self, cmd: &str, opts: &CmdOptions) -> i32 {
        match self.env().run_cmd(cmd, opts) {
            Ok(out) => out.retcode,
            Err(e) => {
                tracing::debug!("command {cmd:?} could not run: {e}");
                127
            }
        }
    }

    pub(super) fn run_check_function(&self, entry: &Map) -> Result<Value, String> {
        let fun = entry.get("fun").map(py_str).unwrap_or_default();
        let args: Vec<Value> = match entry.get("args") {
            Some(Value::Array(a)) => a.clone(),
            Some(v) => vec![v.clone()],
            None => Vec::new(),
        };
        let kwargs: Map = entry
            .iter()
            .filter(|(k, _)| *k != "fun" && *k != "args" && *k != "get_return")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut result = self.env().call_function(&fun, &args, &kwargs)?;
        if let Some(path) = entry.get("get_return").map(py_str) {
            for part in path.split(':') {
                result = match result {
                    Value::Object(m) => m.get(part).cloned().unwrap_or(Value::Null),
                    Value::Array(a) => part
                        .parse::<usize>()
                        .ok()
                        .and_then(|i| a.get(i).cloned())
                        .unwrap_or(Value::Null),
                    _ => Value::Null,
                };
            }
        }
        Ok(result)
    }

    /// Evaluates one `onlyif`/`unless` entry: a shell command (exit 0
    /// holds) or a `fun:` mapping (a truthy return holds).
    pub(super) fn eval_condition(&self, entry: &Value, cmd_opts: &CmdOptions) -> Condition {
        match entry {
            Value::Object(m) if !m.contains_key("fun") => {
                Condition::NoFun(crate::requisite::py_dict(m))
            }
            Value::Object(m) => match self.run_check_function(m) {
                Ok(v) if truthy(&v) => Condition::Holds,
                _ => Condition::Fails(false),
            },
            Value::Null | Value::Array(_) => Condition::BadType,
            other => {
                if self.retcode(&py_str(other), cmd_opts) == 0 {
                    Condition::Holds
                } else {
                    Condition::Fails(true)
                }
            }
        }
    }

    /// Salt's `_run_check`: unless / onlyif / creates.
    pub(super) fn run_check(&self, low: &LowChunk) -> StateReturn {
        let mut comments: Vec<String> = Vec::new();
        let mut result = false;
        let mut skip_watch: Option<bool> = None;
        let cmd_opts = self.cmd_options(low);
        let list = |v: &Value| match v {
            Value::Array(a) => a.clone(),
            other => vec![other.clone()],
        };
        if let Some(onlyif) = low.get("onlyif") {
            let mut r = false;
            let mut comment = String::new();
            for entry in list(onlyif) {
                match self.eval_condition(&entry, &cmd_opts) {
                    Condition::NoFun(m) => {
                        comment = format!("no `fun` argument in onlyif: {m}");
                        break;
                    }
                    Condition::BadType => {
                        comment = "onlyif execution failed, bad type passed".into();
                        r = false;
                        break;
                    }
                    Condition::Holds => {
                        comment = "onlyif condition is true".into();
                        r = false;
                    }
                    Condition::Fails(_) => {
                        comment = "onlyif condition is false".into();
                        skip_watch = Some(true);
                        r = true;
                        break;
                    }
                }
            }
            result = r;
            comments.push(comment);
        }
        if let Some(unless) = low.get("unless") {
            let mut r = false;
            let mut comment = String::new();
            let mut sw: Option<bool> = None;
            for entry in list(unless) {
                match self.eval_condition(&entry, &cmd_opts) {
                    Condition::NoFun(m) => {
                        comment = format!("no `fun` argument in unless: {m}");
                        break;
                    }
                    Condition::BadType => {
                        comment = "unless condition is false, bad type passed".into();
                        r = false;
                    }
                    Condition::Holds => {
                        comment = "unless condition is true".into();
                        sw = Some(true);
                        r = true;
                    }
                    Condition::Fails(from_command) => {
                        // Salt drops skip_watch for a failing command, and
                        // keeps it for a failing function.
                        if from_command {
                            sw = None;
                        }
                        comment = "unless condition is false".into();
                        r = false;
                        break;
                    }
                }
            }
            result = r || result;
            comments.push(comment);
            if let Some(s) = sw {
                skip_watch = Some(s || skip_watch.unwrap_or(false));
            }
        }
        if let Some(creates) = low.get("creates") {
            let (r, comment) = match creates {
                Value::String(p) if std::path::Path::new(p).exists() => {
                    (true, format!("{p} exists"))
                }
                Value::Array(a) if a.iter().all(|p| std::path::Path::new(&py_str(p)).exists()) => {
                    (true, "All files in creates exist".to_string())
                }
                _ => (false, "Creates files not found".to_string()),
            };
            if r {
                skip_watch = Some(true);
            }
            result = r || result;
            comments.push(comment);
        }
        let mut ret = StateReturn::new();
        ret.insert("result", Value::Bool(result));
        ret.insert("comment", Value::from(comments.join("\n")));
        stamp_identity(&mut ret, low);
        if let Some(sw) = skip_watch {
            ret.insert("skip_watch", Value::Bool(sw));
        }
        ret
    }

    /// Salt's `_run_check_cmd`.
    pub(super) fn run_check_cmd(&self, low: &LowChunk) -> StateReturn {
        let mut ret = StateReturn::new();
        let mut result = false;
        let mut opts = CmdOptions {
            python_shell: true,
            ..Default::default()
        };
        opts.shell = self
            .env
            .grains()
            .get("shell")
            .and_then(Value::as_str)
            .map(String::from);
        let cmds = match low.get("check_cmd") {
            Some(Value::Array(a)) => a.iter().map(py_str).collect(),
            Some(v) => vec![py_str(v)],
            None => Vec::new(),
        };
        for cmd in cmds {
            let rc = self.retcode(&cmd, &opts);
            if rc == 0 && !result {
                ret.insert(
                    "comment",
                    Value::from("check_cmd determined the state succeeded"),
                );
                result = true;
            } else if rc != 0 {
                ret.insert(
                    "comment",
                    Value::from("check_cmd determined the state failed"),
                );
                result = false;
                break;
            }
        }
        ret.insert("result", Value::Bool(result));
        stamp_identity(&mut ret, low);
        ret
    }
}
