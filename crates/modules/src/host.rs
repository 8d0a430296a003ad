//! The machine a run happens on, as modules and the engine see it: plain
//! data (options, grains, pillar) and the services a caller hands in (file
//! client, module registries, event sink).
//!
//! What is built from a host lives beside it, each in its own file: the
//! render context of its templates ([`crate::render_context`]) and the
//! engine's view of it ([`crate::state_env`]); commands run through
//! [`crate::command`].

use std::sync::Arc;

use halite_state::{FileClient, StateModules, Value};

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
    /// The minion's config (Salt's `__opts__`).
    pub opts: Value,
    /// The minion's grains (`__grains__`).
    pub grains: Value,
    /// The minion's pillar (`__pillar__`).
    pub pillar: Value,
    /// Where `salt://` files come from (the master, or the local file roots).
    pub files: Arc<dyn FileClient>,
    /// The execution modules (`__salt__`).
    pub exec: ExecModules,
    /// The state modules (`__states__`).
    pub states: StateModules,
    /// Where events go (the master's bus, or nowhere when masterless).
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
