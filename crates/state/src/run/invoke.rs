//! One call of a state module's function, turned into Salt's return
//! dict; the environment the function sees.

use super::StateReturn;
use crate::chunk::LowChunk;
use crate::module::{CmdOptions, StateCall, StateEnv, StateError, StateModules};
use crate::value::{Map, Value};

/// Calls the state function of `low` and shapes its return as Salt's dict.
pub(super) fn call_module(
    modules: &StateModules,
    env: &dyn StateEnv,
    low: &LowChunk,
    test: bool,
    sfun: Option<&str>,
    reqs: Option<&Map>,
) -> StateReturn {
    let name = low.get("name").cloned().unwrap_or(Value::Null);
    let Some(module) = modules.get(low.state()) else {
        let mut ret = StateReturn::new();
        ret.insert("result", Value::Bool(false));
        ret.insert("name", name);
        ret.insert("changes", Value::Object(Map::new()));
        ret.insert(
            "comment",
            Value::from(format!("State '{}' is not available", low.state())),
        );
        return ret;
    };
    let sfun = sfun.or_else(|| low.get("sfun").and_then(Value::as_str));
    let call = StateCall {
        chunk: low,
        test,
        env,
        sfun,
        reqs,
    };
    let mut ret;
    match module.call(low.fun(), &call) {
        Ok(r) => {
            // Room for the executor's five bookkeeping keys (no regrowth).
            ret = StateReturn::with_capacity(9 + r.extra.len());
            ret.insert("name", Value::from(r.name));
            ret.insert("changes", Value::Object(r.changes));
            ret.insert(
                "result",
                match r.result {
                    Some(b) => Value::Bool(b),
                    None => Value::Null,
                },
            );
            ret.insert("comment", Value::from(r.comment));
            for (k, v) in r.extra {
                ret.insert(k, v);
            }
        }
        Err(e) => {
            ret = StateReturn::with_capacity(9);
            ret.insert("result", Value::Bool(false));
            ret.insert("name", name);
            ret.insert("changes", Value::Object(Map::new()));
            let comment = match e {
                StateError::MissingArg(..) => format!("{e}\n"),
                _ => format!("An exception occurred in this state: {e}"),
            };
            ret.insert("comment", Value::from(comment));
        }
    }
    ret
}

/// Adds the keys every return of a chunk carries: `__sls__`, `__id__`, `name`.
pub(super) fn stamp_identity(ret: &mut StateReturn, low: &LowChunk) {
    ret.insert(
        "__sls__",
        low.get("__sls__").cloned().unwrap_or(Value::Null),
    );
    ret.insert("__id__", Value::from(low.id()));
    ret.insert("name", low.get("name").cloned().unwrap_or(Value::Null));
}

/// The host as a state function sees it during a run: the real host plus
/// the run's low chunks (for modules that resolve requisites themselves).
pub(super) struct RunEnv<'a> {
    pub(super) inner: &'a dyn StateEnv,
    pub(super) lowstate: &'a [LowChunk],
    pub(super) accumulators: &'a crate::accumulators::Accumulators,
    /// The state modules, for `__states__` of a custom state.
    pub(super) modules: &'a StateModules,
    /// The returns so far (Salt's `__running__`); `None` for a
    /// `parallel: True` state, which runs beside the rest.
    pub(super) running: Option<&'a super::Running>,
}

impl StateEnv for RunEnv<'_> {
    fn opts(&self) -> &Value {
        self.inner.opts()
    }
    fn grains(&self) -> &Value {
        self.inner.grains()
    }
    fn pillar(&self) -> &Value {
        self.inner.pillar()
    }
    fn run_cmd(&self, cmd: &str, opts: &CmdOptions) -> std::io::Result<crate::module::CmdOutput> {
        self.inner.run_cmd(cmd, opts)
    }
    fn call_function(&self, fun: &str, args: &[Value], kwargs: &Map) -> Result<Value, String> {
        self.inner.call_function(fun, args, kwargs)
    }
    fn file_client(&self) -> &dyn crate::module::FileClient {
        self.inner.file_client()
    }
    fn render_template(
        &self,
        text: &str,
        engine: &str,
        context: &Map,
        saltenv: &str,
    ) -> Result<String, String> {
        self.inner.render_template(text, engine, context, saltenv)
    }
    fn fire_event(&self, tag: &str, data: &Value) {
        self.inner.fire_event(tag, data)
    }
    fn fire_event_owned(&self, tag: &str, data: Value) {
        self.inner.fire_event_owned(tag, data)
    }
    fn fire_progress_event(&self, tag: &str, ret: &crate::SmallDict, len: usize) {
        self.inner.fire_progress_event(tag, ret, len)
    }
    fn lowstate(&self) -> &[LowChunk] {
        self.lowstate
    }
    fn accumulators(&self) -> Option<&crate::accumulators::Accumulators> {
        Some(self.accumulators)
    }
    fn has_function(&self, fun: &str) -> bool {
        self.inner.has_function(fun)
    }
    fn running(&self) -> Option<Value> {
        let running = self.running?;
        Some(Value::Object(
            running
                .iter()
                .map(|(tag, ret)| (tag.clone(), ret.to_value()))
                .collect(),
        ))
    }
    fn call_state(&self, fun: &str, kwargs: &Map, test: bool) -> Option<Value> {
        let (state, f) = fun.split_once('.')?;
        if !self.modules.has(state, f) {
            return None;
        }
        let mut low = LowChunk::with_capacity(kwargs.len() + 2);
        low.insert("state", Value::from(state));
        low.insert("fun", Value::from(f));
        for (k, v) in kwargs {
            low.insert(k.clone(), v.clone());
        }
        // Salt's __states__ calls the function itself: its return dict,
        // without the run's bookkeeping keys.
        let ret = call_module(self.modules, self, &low, test, None, None);
        Some(Value::Object(
            ["name", "changes", "result", "comment"]
                .iter()
                .filter_map(|k| ret.get(k).map(|v| (k.to_string(), v.clone())))
                .chain(
                    ret.iter()
                        .filter(|(k, _)| !matches!(*k, "name" | "changes" | "result" | "comment"))
                        .map(|(k, v)| (k.to_string(), v.clone())),
                )
                .collect(),
        ))
    }
}
