//! The machine a run happens on, as modules and the engine see it.

use std::sync::Arc;

use halite_state::{CmdOptions, CmdOutput, FileClient, Map, StateEnv, StateModules, Value};

use crate::exec::{Args, ExecModules};

/// Command execution lives in [`crate::command`]; these names stay here for
/// the callers that reach them through the host.
pub use crate::command::{run_command, shell_quote, shell_words};

/// Where events go: the minion's event channel, or a JSON-lines file /
/// the log under `halite-call --local`.
pub trait EventSink: Send + Sync {
    /// Fires `tag` with `data`.
    fn fire(&self, tag: &str, data: &Value);
}

/// An [`EventSink`] that only logs at debug level.
#[derive(Debug, Default)]
pub struct LogEvents;

impl EventSink for LogEvents {
    fn fire(&self, tag: &str, data: &Value) {
        tracing::debug!(tag, %data, "event");
    }
}

/// Everything one run needs about the host: options, grains, pillar, the
/// file client, the module registries and the event sink.
///
/// Cheap to clone (the registries and clients are shared); a run with a
/// pillar override clones it and replaces `pillar`.
#[derive(Clone)]
pub struct Host {
    pub opts: Value,
    pub grains: Value,
    pub pillar: Value,
    pub files: Arc<dyn FileClient>,
    pub exec: ExecModules,
    pub states: StateModules,
    pub events: Arc<dyn EventSink>,
}

impl Host {
    /// Calls an execution function by name.
    pub fn call(&self, fun: &str, args: &Args) -> Result<Value, crate::ExecError> {
        self.exec.call(fun, args, self)
    }

    /// An option from `opts`, `None` when absent.
    pub fn opt(&self, key: &str) -> Option<&Value> {
        self.opts.get(key)
    }

    /// Whether the run is in test mode (`test=True`).
    pub fn test_mode(&self) -> bool {
        self.opts
            .get("test")
            .map(halite_state::truthy)
            .unwrap_or(false)
    }
}

struct HostSalt(Host);

impl halite_render::SaltFunctions for HostSalt {
    fn has(&self, fun: &str) -> bool {
        self.0.exec.has(fun)
    }
    fn call(&self, fun: &str, args: &[Value], kwargs: &Map) -> Result<Value, String> {
        let args = Args {
            positional: args.to_vec(),
            kwargs: kwargs.clone(),
        };
        self.0.call(fun, &args).map_err(|e| e.to_string())
    }
}

struct HostTemplates(Arc<dyn FileClient>);

impl halite_render::TemplateSource for HostTemplates {
    fn get(&self, path: &str, saltenv: &str) -> Result<Option<String>, String> {
        let path = halite_state::strip_salt_url(path)
            .map(|(p, _)| p)
            .unwrap_or(path);
        self.0.read_text(path, saltenv).map_err(|e| e.to_string())
    }
}

impl Host {
    /// The render context for a template or SLS of this host.
    pub fn render_context(
        &self,
        saltenv: &str,
        sls: &str,
        source_path: &str,
        extra: Map,
    ) -> halite_render::RenderContext {
        halite_render::RenderContext {
            grains: self.grains.clone(),
            pillar: self.pillar.clone(),
            opts: self.opts.clone(),
            saltenv: saltenv.to_string(),
            sls: sls.to_string(),
            source_path: source_path.to_string(),
            extra,
            salt: Arc::new(HostSalt(self.clone())),
            files: Arc::new(HostTemplates(self.files.clone())),
        }
    }
}

impl StateEnv for Host {
    fn opts(&self) -> &Value {
        &self.opts
    }
    fn grains(&self) -> &Value {
        &self.grains
    }
    fn pillar(&self) -> &Value {
        &self.pillar
    }
    fn run_cmd(&self, cmd: &str, opts: &CmdOptions) -> std::io::Result<CmdOutput> {
        run_command(cmd, opts)
    }
    fn call_function(&self, fun: &str, args: &[Value], kwargs: &Map) -> Result<Value, String> {
        let args = Args {
            positional: args.to_vec(),
            kwargs: kwargs.clone(),
        };
        self.call(fun, &args).map_err(|e| e.to_string())
    }
    fn file_client(&self) -> &dyn FileClient {
        self.files.as_ref()
    }
    fn render_template(
        &self,
        text: &str,
        engine: &str,
        context: &Map,
        saltenv: &str,
    ) -> Result<String, String> {
        let ctx = self.render_context(saltenv, "", "", context.clone());
        halite_render::render_text(text, engine, &ctx).map_err(|e| e.to_string())
    }
    fn fire_event(&self, tag: &str, data: &Value) {
        self.events.fire(tag, data);
    }
    fn has_function(&self, fun: &str) -> bool {
        self.exec.has(fun)
    }
    /// Grains are detected again from the options (as at start-up). The
    /// pillar is compiled again from `pillar_roots` when this minion
    /// serves its own files (`file_client: local`, as `halite-call
    /// --local`); a job from the master keeps the pillar the master
    /// compiled for it.
    fn refreshed(
        &self,
        grains: bool,
        pillar: bool,
        pillar_override: Option<&Value>,
    ) -> Option<Box<dyn StateEnv>> {
        let mut host = self.clone();
        if grains {
            tracing::debug!("Refreshing grains...");
            host.grains = Value::Object(crate::grains::grains_for(&host.opts));
        }
        let local = host.opts.get("file_client").and_then(Value::as_str) == Some("local");
        if pillar && local {
            tracing::debug!("Refreshing pillar...");
            let (mut compiled, errors) = crate::local::local_pillar(&host)
                .unwrap_or_else(|| (Value::Object(Map::new()), Vec::new()));
            if !errors.is_empty() {
                tracing::warn!("reloading the pillar: {}", errors.join("; "));
                if let Value::Object(m) = &mut compiled {
                    m.insert("_errors".into(), Value::from(errors));
                }
            }
            if let Some(o @ Value::Object(_)) = pillar_override {
                crate::exec::pillar::deep_merge(&mut compiled, o);
            }
            host.pillar = compiled;
        } else if pillar {
            tracing::debug!(
                "reload_pillar: a job from the master keeps the pillar the master compiled for it"
            );
        }
        Some(Box::new(host))
    }
}
