//! Running one job on this host: the function comes from the module
//! registry of `halite-modules`, on a [`halite_modules::Host`] built for
//! the minion identity that received the job.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use halite_modules::host::EventSink;
use halite_modules::{Args, ExecError, ExecModules, Host, LocalFileClient};
use halite_proto::msg::{Job, JobReturn};
use halite_state::{FileClient, StateModules};
use serde_json::{Map, Value};

/// Runs jobs for minion identities. Synchronous: called on a blocking thread.
pub trait JobRunner: Send + Sync {
    /// Runs `job` as minion `id` with `grains`; events go to `events`.
    fn run(&self, id: &str, grains: &Value, job: &Job, events: Arc<dyn EventSink>) -> JobReturn;
    /// The grains of identity `id` (recomputed by `saltutil.refresh_grains`).
    fn grains(&self, id: &str) -> Value;
}

/// The real runner: halite's execution and state modules on this host.
pub struct HostRunner {
    opts: Value,
    exec: ExecModules,
    states: StateModules,
    files: Arc<dyn FileClient>,
    pillar: Value,
    /// `pillar_roots`, compiled per job with the identity's grains until
    /// the master serves pillar.
    pillar_roots: BTreeMap<String, Vec<PathBuf>>,
    /// Grains added over the detected ones per identity (swarm mode).
    grain_overrides: BTreeMap<String, Map<String, Value>>,
}

fn file_roots(opts: &Value) -> BTreeMap<String, Vec<PathBuf>> {
    let mut roots = BTreeMap::new();
    if let Some(Value::Object(envs)) = opts.get("file_roots") {
        for (env, dirs) in envs {
            let dirs = match dirs {
                Value::Array(items) => items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(PathBuf::from)
                    .collect(),
                Value::String(one) => vec![PathBuf::from(one)],
                _ => Vec::new(),
            };
            roots.insert(env.clone(), dirs);
        }
    } else {
        roots.insert("base".to_string(), vec![PathBuf::from("/srv/salt")]);
    }
    roots
}

impl HostRunner {
    /// A runner with the full module table and `opts` (the minion config).
    pub fn new(opts: Value) -> Self {
        let files: Arc<dyn FileClient> = Arc::new(LocalFileClient::new(file_roots(&opts)));
        Self {
            exec: halite_modules::table::exec_modules(),
            states: halite_modules::table::state_modules(),
            files,
            pillar_roots: halite_modules::local::roots_of(&opts, "pillar_roots"),
            pillar: opts
                .get("pillar")
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new())),
            grain_overrides: BTreeMap::new(),
            opts,
        }
    }

    /// Grains that identity `id` reports on top of the host's (swarm mode).
    pub fn with_grains(mut self, id: &str, grains: Map<String, Value>) -> Self {
        self.grain_overrides.insert(id.to_string(), grains);
        self
    }

    fn opts_for(&self, id: &str, jid: Option<&str>) -> Value {
        let mut opts = self.opts.clone();
        if let Value::Object(map) = &mut opts {
            map.insert("id".into(), Value::String(id.to_string()));
            if let Some(jid) = jid {
                map.insert("jid".into(), Value::String(jid.to_string()));
            }
        }
        opts
    }
}

/// Salt's retcode for a function's result: 1 when a dict says
/// `result`/`success` false, 2 when a state run has a failed state.
fn retcode_of(fun: &str, ret: &Value) -> i64 {
    if fun.starts_with("state.") {
        match ret {
            Value::Array(_) => return 1,
            Value::Object(map) => {
                let failed = map
                    .values()
                    .any(|v| v.get("result") == Some(&Value::Bool(false)));
                if failed {
                    return 2;
                }
            }
            _ => {}
        }
    }
    if let Value::Object(map) = ret {
        if ["result", "success"]
            .iter()
            .any(|k| map.get(*k) == Some(&Value::Bool(false)))
        {
            return 1;
        }
    }
    0
}

impl JobRunner for HostRunner {
    fn run(&self, id: &str, grains: &Value, job: &Job, events: Arc<dyn EventSink>) -> JobReturn {
        let mut host = Host {
            opts: self.opts_for(id, Some(&job.jid)),
            grains: grains.clone(),
            pillar: self.pillar.clone(),
            files: self.files.clone(),
            exec: self.exec.clone(),
            states: self.states.clone(),
            events,
        };
        let args = Args {
            positional: job.arg.clone(),
            kwargs: job.kwarg.clone(),
        };
        let mut pillar_errors = Vec::new();
        if self.pillar_roots.values().flatten().any(|d| d.is_dir()) {
            let mut pillar_host = host.clone();
            pillar_host.files = Arc::new(LocalFileClient::new(self.pillar_roots.clone()));
            let (compiled, errors) = halite_modules::pillar_render::compile_pillar(&pillar_host);
            halite_modules::exec::pillar::deep_merge(&mut host.pillar, &compiled);
            pillar_errors = errors;
        }
        let outcome = if !pillar_errors.is_empty() && job.fun.starts_with("state.") {
            let mut errs = vec![Value::from(
                "Pillar failed to render with the following messages:",
            )];
            errs.extend(pillar_errors.into_iter().map(Value::from));
            Ok(Value::Array(errs))
        } else {
            host.call(&job.fun, &args)
        };
        let (ret, retcode) = match outcome {
            Ok(v) => {
                let code = retcode_of(&job.fun, &v);
                (v, code)
            }
            Err(ExecError::NotAvailable(f)) => {
                (Value::String(format!("'{f}' is not available.")), 1)
            }
            Err(ExecError::Invocation(msg)) => (
                Value::String(format!("ERROR executing '{}': {msg}", job.fun)),
                1,
            ),
            Err(ExecError::Execution(msg)) => (Value::String(format!("ERROR: {msg}")), 1),
        };
        JobReturn {
            jid: job.jid.clone(),
            id: id.to_string(),
            fun: job.fun.clone(),
            fun_args: job.arg.clone(),
            ret,
            retcode,
            success: retcode == 0,
        }
    }

    fn grains(&self, id: &str) -> Value {
        let mut grains = halite_modules::grains::grains_for(&self.opts_for(id, None));
        grains.insert("id".into(), Value::String(id.to_string()));
        if let Some(extra) = self.grain_overrides.get(id) {
            for (k, v) in extra {
                grains.insert(k.clone(), v.clone());
            }
        }
        Value::Object(grains)
    }
}

#[cfg(test)]
mod tests {
    use super::retcode_of;
    use serde_json::json;

    #[test]
    fn retcodes_follow_salt() {
        assert_eq!(retcode_of("test.ping", &json!(true)), 0);
        assert_eq!(retcode_of("x.y", &json!({"result": false})), 1);
        assert_eq!(
            retcode_of("state.apply", &json!({"a": {"result": false}})),
            2
        );
        assert_eq!(
            retcode_of("state.apply", &json!(["Rendering SLS failed"])),
            1
        );
        assert_eq!(
            retcode_of("state.apply", &json!({"a": {"result": true}})),
            0
        );
    }
}
