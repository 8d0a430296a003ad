//! What the modules' integration tests share: a [`Host`] over the real
//! module tables, and one call of a state function built the way the
//! engine builds it (a low chunk, a [`StateCall`]). Each test file used to
//! carry its own copy of both (duplicates D1–D4, D7 of issue 18).

#![allow(dead_code, reason = "each test file uses the helpers it needs")]

use std::sync::Arc;

use halite_modules::host::LogEvents;
use halite_modules::{table, Host, LocalFileClient};
use halite_state::{LowChunk, StateCall, StateError, StateResult};
use serde_json::{json, Value};

/// A host with the real module tables, no options, grains or pillar, and
/// no file roots.
pub fn host() -> Host {
    host_with(json!({}), json!({}))
}

/// A host with the real module tables and the given `opts` and `grains`.
pub fn host_with(opts: Value, grains: Value) -> Host {
    Host {
        opts,
        grains,
        pillar: json!({}),
        files: Arc::new(LocalFileClient::default()),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    }
}

/// One state function call: `module.fun` for `name`, with `args` (an
/// object) in its low chunk, in test mode when `test`; `sfun` is the
/// watched function a `mod_watch` call is told about.
pub struct Call<'a> {
    /// The state module (`git`).
    pub module: &'a str,
    /// The function (`latest`).
    pub fun: &'a str,
    /// The state's `name` (also its id).
    pub name: &'a str,
    /// The state's other arguments, as an object.
    pub args: Value,
    /// `test=True`.
    pub test: bool,
    /// For `mod_watch`: the function of the state that watched.
    pub sfun: Option<&'a str>,
}

impl Call<'_> {
    /// Runs the call through the host's state table, as the engine does.
    pub fn run(self, host: &Host) -> Result<StateResult, StateError> {
        let mut chunk = serde_json::Map::new();
        chunk.insert("state".into(), json!(self.module));
        chunk.insert("name".into(), json!(self.name));
        chunk.insert("__id__".into(), json!(self.name));
        if let Value::Object(extra) = self.args {
            chunk.extend(extra);
        }
        chunk.insert("fun".into(), json!(self.fun));
        let chunk = LowChunk::from(chunk);
        let call = StateCall {
            chunk: &chunk,
            test: self.test,
            env: host,
            sfun: self.sfun,
            reqs: None,
        };
        let Some(module) = host.states.get(self.module) else {
            panic!("no state module {}", self.module);
        };
        module.call(self.fun, &call)
    }
}

/// `module.fun` for `name`; an error of the call panics the test.
pub fn state(
    host: &Host,
    module: &str,
    fun: &str,
    name: &str,
    args: Value,
    test: bool,
) -> StateResult {
    let call = Call {
        module,
        fun,
        name,
        args,
        test,
        sfun: None,
    };
    call.run(host)
        .unwrap_or_else(|e| panic!("{module}.{fun}: {e}"))
}

/// `module.fun` for `name`; an error of the call is the failed result the
/// engine would report for it.
pub fn state_or_fail(
    host: &Host,
    module: &str,
    fun: &str,
    name: &str,
    args: Value,
    test: bool,
) -> StateResult {
    let call = Call {
        module,
        fun,
        name,
        args,
        test,
        sfun: None,
    };
    call.run(host)
        .unwrap_or_else(|e| StateResult::fail(name, e.to_string()))
}
