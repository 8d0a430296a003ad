//! A [`Host`] as the state engine's [`StateEnv`]: how states reach the
//! host's data, run commands, call functions, render templates, fire
//! events, and get a refreshed host after `reload_grains`/`reload_pillar`.

use halite_state::{CmdOptions, CmdOutput, FileClient, Map, StateEnv, Value};

use crate::command::run_command;
use crate::exec::Args;
use crate::Host;

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
    fn fire_event_owned(&self, tag: &str, data: Value) {
        self.events.fire_owned(tag, data);
    }
    fn fire_progress_event(&self, tag: &str, ret: &halite_state::SmallDict, len: usize) {
        self.events.fire_progress(tag, ret, len);
    }
    fn has_function(&self, fun: &str) -> bool {
        self.exec.has(fun) || crate::salt_fallback::has(self, fun)
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
            crate::python::refresh_custom_grains(&mut host);
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
