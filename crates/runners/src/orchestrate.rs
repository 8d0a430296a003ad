//! `state.orchestrate` (`state.orch`, and `state.sls` through halite-run):
//! renders an SLS from the master's `file_roots` and runs it with the
//! state engine on the master, as Salt's orchestrate runner does, with the
//! `salt.*` states of [`crate::saltmod`] registered beside the usual ones.
//! The run's minion id is Salt's `<master id>_master`.

use std::sync::Arc;

use halite_client::MasterConfig;
use halite_modules::host::EventSink;
use halite_modules::{Args, Host, LocalFileClient};
use halite_state::{Map, Value};

use crate::RunnerError;

/// What `state.orchestrate` was asked.
#[derive(Debug, Clone, Default)]
pub struct Orchestrate {
    /// The SLS to run (comma separated or a list, as `state.sls` takes).
    pub mods: Vec<String>,
    /// `saltenv=` (default `base`).
    pub saltenv: Option<String>,
    /// `pillar=`: pillar data the SLS sees.
    pub pillar: Option<Value>,
    /// `test=True`: every step predicts (`salt.state` publishes its jobs
    /// with `test=True`).
    pub test: bool,
    /// `exclude=`.
    pub exclude: Option<Value>,
    /// Who runs it (Salt's `__user__`): `Reactor` when a reactor started
    /// it, so the reactor skips the run's own `salt/run/...` events; the
    /// process's user when `None`.
    pub user: Option<String>,
}

/// What an orchestration returned.
#[derive(Debug, Clone)]
pub struct Orchestration {
    /// `<master id>_master`: the key the outputter shows the run under.
    pub id: String,
    /// The run's return: state tag -> state return, or a list of errors.
    pub data: Value,
    /// Salt's retcode for it: 0, or 1 when a step failed or nothing ran.
    pub retcode: i32,
}

impl Orchestration {
    /// Salt's runner return: `{"data": {"<id>_master": ...}, "outputter":
    /// "highstate", "retcode": N}`, what `--out json` prints.
    pub fn to_value(&self) -> Value {
        let mut data = Map::new();
        data.insert(self.id.clone(), self.data.clone());
        let mut out = Map::new();
        out.insert("data".into(), Value::Object(data));
        out.insert("outputter".into(), Value::from("highstate"));
        out.insert("retcode".into(), Value::from(self.retcode));
        Value::Object(out)
    }
}

/// The master's id: `id` in its config, else the host name (Salt's default).
pub fn master_id(cfg: &MasterConfig) -> String {
    cfg.extra
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .unwrap_or_else(halite_modules::grains::net::hostname)
}

/// The host an orchestration runs on: the master's options (so the
/// `salt.*` states find its socket), `<id>_master`, the master's file
/// roots, the state modules plus `salt`.
pub fn master_host(cfg: &MasterConfig, events: Arc<dyn EventSink>) -> Host {
    let mut opts = match cfg.opts() {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    opts.insert(
        "id".into(),
        Value::from(format!("{}_master", master_id(cfg))),
    );
    opts.insert("__role".into(), Value::from("master"));
    opts.insert("file_client".into(), Value::from("local"));
    let opts = Value::Object(opts);
    let grains = Value::Object(halite_modules::grains::grains_for(&opts));
    let files = Arc::new(LocalFileClient::new(halite_modules::local::roots_of(
        &opts,
        "file_roots",
    )));
    let mut states = halite_modules::table::state_modules();
    states.register(Arc::new(crate::saltmod::MODULE));
    Host {
        opts,
        grains,
        pillar: Value::Object(Map::new()),
        files,
        exec: halite_modules::table::exec_modules(),
        states,
        events,
    }
}

/// The events of an orchestration's run: Salt 3008.5's master fires no
/// event for the orchestration's own states (its master options say
/// `local: True`, so `state_events` and `fire_event` stay silent there;
/// recorded in docs/orchestration.md), only `salt/run/<jid>/new|args|ret`
/// and the events of the jobs the steps publish. The state engine's
/// `salt/state_result/<jid>/...` and `salt/job/<jid>/prog/...` of the
/// run's own jid are dropped here; everything else passes.
struct RunEvents {
    inner: Arc<dyn EventSink>,
    own: [String; 2],
}

impl EventSink for RunEvents {
    fn fire(&self, tag: &str, data: &Value) {
        if self.own.iter().any(|p| tag.starts_with(p.as_str())) {
            tracing::debug!(
                tag,
                "an orchestration's own state event: not fired, as in Salt"
            );
            return;
        }
        self.inner.fire(tag, data);
    }
}

/// Runs the orchestration `req` on the master of `cfg`.
pub fn orchestrate(
    cfg: &MasterConfig,
    req: &Orchestrate,
    events: Arc<dyn EventSink>,
) -> Result<Orchestration, RunnerError> {
    if req.mods.is_empty() {
        return Err(RunnerError::Usage(
            "state.orchestrate needs the SLS to run: halite-run state.orchestrate <sls>".into(),
        ));
    }
    let jid = halite_modules::exec::state::new_jid();
    let events: Arc<dyn EventSink> = Arc::new(RunEvents {
        inner: events,
        own: [
            format!("salt/state_result/{jid}/"),
            format!("salt/job/{jid}/prog/"),
        ],
    });
    let mut host = master_host(cfg, events);
    let user = req.user.clone().unwrap_or_else(crate::saltmod::user);
    if let Value::Object(o) = &mut host.opts {
        o.insert("__orchestration_jid__".into(), Value::from(jid.as_str()));
        o.insert(crate::USER_KEY.into(), Value::from(user.as_str()));
    }
    // Salt 3008.5: `[mods, {<keyword arguments given>..., orchestration_jid}]`.
    let mut given = Map::new();
    if req.test {
        given.insert("test".into(), Value::Bool(true));
    }
    if let Some(env) = &req.saltenv {
        given.insert("saltenv".into(), Value::from(env.as_str()));
    }
    if let Some(p) = &req.pillar {
        given.insert("pillar".into(), p.clone());
    }
    if let Some(e) = &req.exclude {
        given.insert("exclude".into(), e.clone());
    }
    given.insert("orchestration_jid".into(), Value::from(jid.as_str()));
    let fun_args = vec![Value::from(req.mods.join(",")), Value::Object(given)];
    let mut new = Map::new();
    new.insert("fun".into(), Value::from("runner.state.orchestrate"));
    new.insert("fun_args".into(), Value::Array(fun_args));
    new.insert("jid".into(), Value::from(jid.as_str()));
    new.insert("user".into(), Value::from(user.as_str()));
    host.events
        .fire(&format!("salt/run/{jid}/new"), &Value::Object(new.clone()));
    let mut kwargs = Map::new();
    kwargs.insert("__pub_jid".into(), Value::from(jid.as_str()));
    kwargs.insert("test".into(), Value::Bool(req.test));
    if let Some(env) = &req.saltenv {
        kwargs.insert("saltenv".into(), Value::from(env.as_str()));
    }
    if let Some(p) = &req.pillar {
        if !p.is_object() {
            return Err(RunnerError::Usage(
                "Pillar data must be formatted as a dictionary: pillar='{\"key\": \"value\"}'"
                    .into(),
            ));
        }
        kwargs.insert("pillar".into(), p.clone());
    }
    if let Some(e) = &req.exclude {
        kwargs.insert("exclude".into(), e.clone());
    }
    let args = Args {
        positional: vec![Value::from(req.mods.join(","))],
        kwargs,
    };
    let data = host
        .call("state.sls", &args)
        .map_err(|e| RunnerError::Failed(e.to_string()))?;
    // Salt: `state.check_result` of the run decides 0 or 1.
    let retcode = if crate::saltmod::check_result(&data) {
        0
    } else {
        1
    };
    let orch = Orchestration {
        id: host
            .opts
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("master")
            .to_string(),
        data,
        retcode,
    };
    let mut ret = new;
    ret.insert("return".into(), orch.to_value());
    ret.insert("success".into(), Value::Bool(retcode == 0));
    host.events
        .fire(&format!("salt/run/{jid}/ret"), &Value::Object(ret));
    Ok(orch)
}
