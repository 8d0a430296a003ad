//! halite's runners: the functions `halite-run` (Salt's `salt-run`) calls
//! on the master host, as a library so the reactor can call them inside
//! the master later. They reach the master through its local socket
//! (halite-client), never by linking the daemon.
//!
//! - [`orchestrate`]: `state.orchestrate` and its aliases;
//! - [`saltmod`]: the `salt.*` states an orchestration is made of;
//! - [`event`]: the `event.send` runner;
//! - [`jobs`], [`manage`], [`fileserver`], [`cache`], [`mine`]: the
//!   runners of those names that read the master's state;
//! - `salt.cmd`: an execution function run on the master host.

pub mod cache;
pub mod event;
pub mod fileserver;
pub mod jobs;
pub mod manage;
pub mod mine;
pub mod orchestrate;
pub mod saltmod;
pub mod wheel;

use std::sync::Arc;

use halite_client::MasterConfig;
use halite_state::{Map, Value};

/// Why a runner could not give its return.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The call itself is wrong (missing or bad arguments); the text
    /// says how to call it.
    #[error("{0}")]
    Usage(String),
    /// The runner does not exist (Salt's text).
    #[error("'{0}' is not available.")]
    NotAvailable(String),
    /// The runner ran and failed.
    #[error("{0}")]
    Failed(String),
    /// Talking to the master failed.
    #[error(transparent)]
    Local(#[from] halite_client::local::LocalError),
}

/// The keyword argument (and the orchestration's option) naming who
/// calls a runner: Salt's `__user__`, which the reactor sets to `Reactor`
/// on its runner reactions so the events of what they start are not
/// reacted to again.
pub const USER_KEY: &str = "__user__";

/// Whether `fun` runs an orchestration (`state.orchestrate`, `state.orch`,
/// and `state.sls` as salt-run names it).
pub fn is_orchestrate(fun: &str) -> bool {
    matches!(fun, "state.orchestrate" | "state.orch" | "state.sls")
}

/// The SLS names of `mods` as Salt takes them: a list, or a comma
/// separated string.
fn mods_of(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(a)) => a.iter().map(halite_salt_rules::pyfmt::python_str).collect(),
        Some(Value::String(s)) => s
            .split(',')
            .map(|m| m.trim().to_string())
            .filter(|m| !m.is_empty())
            .collect(),
        Some(other) => vec![halite_salt_rules::pyfmt::python_str(other)],
        None => Vec::new(),
    }
}

/// Positional `i`, or keyword `key`, as Python binds a runner's arguments.
fn arg<'a>(positional: &'a [Value], kwargs: &'a Map, i: usize, key: &str) -> Option<&'a Value> {
    kwargs.get(key).or_else(|| positional.get(i))
}

/// Calls runner `fun` with `positional` and keyword arguments `kwargs`
/// and returns its return data, as `halite-run`, `salt.runner` and the
/// reactor call runners.
pub fn call_runner_args(
    cfg: &MasterConfig,
    fun: &str,
    positional: &[Value],
    kwargs: &Map,
) -> Result<Value, RunnerError> {
    if kwargs.contains_key(USER_KEY) && !is_orchestrate(fun) {
        // Salt's internal keys are not the runner's arguments.
        let mut kw = kwargs.clone();
        kw.remove(USER_KEY);
        return call_runner_args(cfg, fun, positional, &kw);
    }
    match fun {
        "event.send" => {
            let tag = arg(positional, kwargs, 0, "tag")
                .map(halite_salt_rules::pyfmt::python_str)
                .ok_or_else(|| {
                    RunnerError::Usage(
                        "event.send needs a tag: halite-run event.send my/tag data='{\"id\": \"web1\"}'"
                            .into(),
                    )
                })?;
            event::send(cfg, &tag, arg(positional, kwargs, 1, "data"))
        }
        "jobs.list_jobs" => jobs::list_jobs(cfg),
        "jobs.print_job" | "jobs.exit_success" | "jobs.lookup_jid" | "jobs.list_job" => {
            let jid = arg(positional, kwargs, 0, "jid")
                .map(halite_salt_rules::pyfmt::python_str)
                .ok_or_else(|| {
                    RunnerError::Usage(format!("{fun} needs a jid: halite-run {fun} <jid>"))
                })?;
            match fun {
                "jobs.print_job" => jobs::print_job(cfg, &jid),
                "jobs.lookup_jid" => jobs::lookup_jid(cfg, &jid),
                "jobs.list_job" => jobs::list_job(cfg, &jid),
                _ => jobs::exit_success(cfg, &jid),
            }
        }
        "manage.up" | "manage.down" | "manage.status" | "manage.present" | "manage.not_present"
        | "manage.joined" => {
            let timeout = arg(positional, kwargs, usize::MAX, "timeout")
                .and_then(Value::as_u64)
                .unwrap_or(cfg.timeout);
            let (up, down) = manage::ping_all(cfg, std::time::Duration::from_secs(timeout))?;
            Ok(match fun {
                "manage.down" | "manage.not_present" => Value::from(down),
                "manage.status" => {
                    let mut m = Map::new();
                    m.insert("up".into(), Value::from(up));
                    m.insert("down".into(), Value::from(down));
                    Value::Object(m)
                }
                _ => Value::from(up),
            })
        }
        "manage.versions" => manage::versions(cfg, std::time::Duration::from_secs(cfg.timeout)),
        "fileserver.file_list" | "fileserver.dir_list" => {
            let saltenv = arg(positional, kwargs, 0, "saltenv")
                .map(halite_salt_rules::pyfmt::python_str)
                .unwrap_or_else(|| "base".into());
            if fun == "fileserver.file_list" {
                fileserver::file_list(cfg, &saltenv)
            } else {
                fileserver::dir_list(cfg, &saltenv)
            }
        }
        "fileserver.envs" => fileserver::envs(cfg, arg(positional, kwargs, 0, "backend")),
        "fileserver.update" => fileserver::update(cfg, arg(positional, kwargs, 0, "backend")),
        "git_pillar.update" => fileserver::git_pillar_update(cfg),
        "cache.grains" | "cache.pillar" | "cache.mine" => {
            let tgt = arg(positional, kwargs, 0, "tgt")
                .map(halite_salt_rules::pyfmt::python_str)
                .unwrap_or_else(|| "*".into());
            let tgt_type = arg(positional, kwargs, 1, "tgt_type")
                .map(halite_salt_rules::pyfmt::python_str)
                .unwrap_or_else(|| "glob".into());
            match fun {
                "cache.grains" => cache::grains(cfg, &tgt, &tgt_type),
                "cache.pillar" => cache::pillar(cfg, &tgt, &tgt_type),
                _ => cache::mine(cfg, &tgt, &tgt_type),
            }
        }
        "mine.get" => mine::get_runner(cfg, positional, kwargs),
        "salt.cmd" => {
            let Some(target) =
                arg(positional, kwargs, 0, "fun").map(halite_salt_rules::pyfmt::python_str)
            else {
                return Err(RunnerError::Usage(
                    "salt.cmd needs a function: halite-run salt.cmd test.ping".into(),
                ));
            };
            let host = orchestrate::master_host(cfg, Arc::new(event::MasterBus::new(cfg)));
            let mut rest = kwargs.clone();
            rest.remove("fun");
            let args = halite_modules::Args {
                positional: positional.iter().skip(1).cloned().collect(),
                kwargs: rest,
            };
            host.call(&target, &args)
                .map_err(|e| RunnerError::Failed(e.to_string()))
        }
        _ if is_orchestrate(fun) && !positional.is_empty() => {
            let mut kw = kwargs.clone();
            kw.entry("mods").or_insert_with(|| positional[0].clone());
            call_runner(cfg, fun, &kw)
        }
        _ if is_orchestrate(fun) => call_runner(cfg, fun, kwargs),
        _ => Err(RunnerError::NotAvailable(fun.to_string())),
    }
}

/// Calls runner `fun` with keyword arguments `kwargs` (positional ones
/// already bound to their names) and returns its return data, as
/// `salt.runner` and the reactor call runners.
pub fn call_runner(cfg: &MasterConfig, fun: &str, kwargs: &Map) -> Result<Value, RunnerError> {
    if !is_orchestrate(fun) {
        return call_runner_args(cfg, fun, &[], kwargs);
    }
    let req = orchestrate::Orchestrate {
        mods: mods_of(kwargs.get("mods").or_else(|| kwargs.get("arg"))),
        saltenv: kwargs
            .get("saltenv")
            .and_then(Value::as_str)
            .map(String::from),
        pillar: kwargs.get("pillar").cloned(),
        test: kwargs.get("test").is_some_and(halite_salt_rules::truthy),
        exclude: kwargs.get("exclude").cloned(),
        user: kwargs
            .get(USER_KEY)
            .map(halite_salt_rules::pyfmt::python_str),
    };
    let events: Arc<dyn halite_modules::host::EventSink> = Arc::new(event::MasterBus::new(cfg));
    Ok(orchestrate::orchestrate(cfg, &req, events)?.to_value())
}
