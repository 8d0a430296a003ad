//! The machine a run happens on, as modules and the engine see it: plain
//! data (options, grains, pillar) and the services a caller hands in (file
//! client, module registries, event sink).
//!
//! What is built from a host lives beside it, each in its own file: the
//! render context of its templates ([`crate::render_context`]) and the
//! engine's view of it ([`crate::state_env`]); commands run through
//! [`crate::command`].
//!
//! The calling convention of execution functions lives here too ([`Args`],
//! [`ExecError`], [`ExecModule`], [`ExecTable`], the [`ExecModules`]
//! registry): a host holds the registry and every function is called with
//! the host, so the types refer to each other and share one file (moved
//! from `exec/mod.rs`, which re-exports them; the import graph has no
//! circle).

use std::collections::BTreeMap;
use std::sync::Arc;

use halite_state::{FileClient, Map, StateModules, Value};

/// Command execution lives in [`crate::command`]; these names stay here for
/// the callers that reach them through the host.
pub use crate::command::{run_command, shell_quote, shell_words};

/// Where events go: the minion's event channel, or a JSON-lines file /
/// the log under `halite-call --local`.
pub trait EventSink: Send + Sync {
    /// Fires `tag` with `data`.
    fn fire(&self, tag: &str, data: &Value);
    /// Fires `tag` with a `data` the caller gives away (a state's progress
    /// event): a sink that keeps it takes it without a copy.
    fn fire_owned(&self, tag: &str, data: Value) {
        self.fire(tag, &data)
    }
    /// Fires a state's progress event, `{"ret": ret, "len": len}`
    /// ([`halite_state::progress_data`]): a sink that encodes events (the
    /// minion's) encodes it straight from the state's return.
    fn fire_progress(&self, tag: &str, ret: &halite_state::SmallDict, len: usize) {
        self.fire_owned(tag, halite_state::progress_data(ret, len))
    }
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
    ///
    /// A function nobody here provides runs through Salt's own loader
    /// when `salt_fallback` is configured ([`crate::salt_fallback`]); a
    /// master compiling for a minion never does that (the minion decides).
    pub fn call(&self, fun: &str, args: &Args) -> Result<Value, ExecError> {
        match self.exec.call(fun, args, self) {
            Err(ExecError::NotAvailable(f)) if !self.exec.is_remote() => {
                crate::salt_fallback::call(self, fun, args)
                    .unwrap_or(Err(ExecError::NotAvailable(f)))
            }
            other => other,
        }
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

/// Arguments of an execution function call: positional, then `key=value`.
///
/// On the command line each is parsed as YAML, as Salt does
/// (`test.echo 1` passes the integer 1).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Args {
    /// Positional arguments, in order.
    pub positional: Vec<Value>,
    /// Keyword arguments (`key=value`).
    pub kwargs: Map,
}

impl Args {
    /// Positional argument `i`, or the keyword argument `key`.
    pub fn get(&self, i: usize, key: &str) -> Option<&Value> {
        self.kwargs.get(key).or_else(|| self.positional.get(i))
    }
    /// Like [`Args::get`] as a string (numbers and booleans stringified).
    pub fn get_str(&self, i: usize, key: &str) -> Option<String> {
        self.get(i, key).and_then(|v| match v {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            other => Some(other.to_string()),
        })
    }
    /// A required string argument.
    pub fn require_str(&self, i: usize, key: &str, fun: &str) -> Result<String, ExecError> {
        self.get_str(i, key).ok_or_else(|| {
            ExecError::Invocation(format!(
                "{fun}() missing 1 required positional argument: '{key}'"
            ))
        })
    }
    /// A boolean keyword argument with Salt's truthiness.
    pub fn get_bool(&self, i: usize, key: &str, default: bool) -> bool {
        self.get(i, key)
            .map(halite_state::truthy)
            .unwrap_or(default)
    }
}

/// Why an execution function failed.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// `mod.fun` does not exist (Salt: "'x.y' is not available.").
    #[error("'{0}' is not available.")]
    NotAvailable(String),
    /// Bad arguments (Salt's SaltInvocationError).
    #[error("{0}")]
    Invocation(String),
    /// The function ran and failed (Salt's CommandExecutionError).
    #[error("{0}")]
    Execution(String),
}

/// An execution module: a named set of functions callable from the CLI,
/// from templates (`salt['mod.fun']`) and from states (`unless: - fun: ...`).
///
/// Every shipped module is an [`ExecTable`]; the trait is what the
/// registry holds.
pub trait ExecModule: Send + Sync {
    /// The module name (`cmd`, `pkg`...).
    fn name(&self) -> &'static str;
    /// Its functions, for `sys.list_functions` and existence checks; asked
    /// once, when the module is registered.
    fn functions(&self) -> Vec<&'static str>;
    /// Runs `fun` on `host`. Must not panic on any input.
    fn call(&self, fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError>;
}

/// The handler of one execution function: the arguments and the host in,
/// the function's return out.
pub type ExecHandler = fn(&Args, &Host) -> Result<Value, ExecError>;

/// One row of an execution module's table: a function name and its handler.
///
/// Why a table: the names a module lists and the functions it dispatches
/// to are the same data, so they cannot drift apart.
#[derive(Clone, Copy)]
pub struct ExecFunction {
    /// The function name (`run_all` of `cmd.run_all`).
    pub name: &'static str,
    /// What runs it.
    pub run: ExecHandler,
}

impl ExecFunction {
    /// A function named `name` run by `run`.
    pub const fn new(name: &'static str, run: ExecHandler) -> Self {
        Self { name, run }
    }
}

/// An execution module written as one table: its name and its functions.
///
/// Each module file declares one `pub const MODULE: ExecTable` and is
/// registered by its name in the list of [`crate::exec`]. The registry
/// lists the names of the rows and dispatches through the same rows, so
/// listed names and dispatch cannot disagree; `tests/registry.rs` checks
/// that no handler answers "not available" for a name it is listed under
/// (see docs/adding-a-module.md).
#[derive(Clone, Copy)]
pub struct ExecTable {
    /// The module name (`cmd`, `pkg`...).
    pub name: &'static str,
    /// Every function of the module.
    pub functions: &'static [ExecFunction],
}

impl ExecTable {
    /// The row of `fun`, if the module has it.
    pub fn function(&self, fun: &str) -> Option<&'static ExecFunction> {
        self.functions.iter().find(|f| f.name == fun)
    }
}

impl ExecModule for ExecTable {
    fn name(&self) -> &'static str {
        self.name
    }
    fn functions(&self) -> Vec<&'static str> {
        self.functions.iter().map(|f| f.name).collect()
    }
    fn call(&self, fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
        match self.function(fun) {
            Some(f) => (f.run)(args, host),
            None => Err(ExecError::NotAvailable(format!("{}.{fun}", self.name))),
        }
    }
}

/// Where a function that needs the minion's host goes when SLS is
/// compiled on the master: the minion, as a render-time call of the job.
pub trait RemoteExec: Send + Sync {
    /// Runs `fun` on the minion and returns its result or error text.
    fn call(&self, fun: &str, args: &Args) -> Result<Value, String>;
}

/// Where this host's Salt mine lives: the master, over the minion's link
/// (or the master's own store while it compiles SLS for a minion). The
/// `mine` execution module is the only caller; errors are texts for the
/// user (`ExecError::Execution`).
pub trait MineLink: Send + Sync {
    /// Salt's `_mine`: stores `data` (`{function or alias: result}`) as
    /// this minion's mine, merged into it or, with `clear`, replacing it.
    fn store(&self, data: Map, clear: bool) -> Result<Value, String>;
    /// Salt's `_mine_get`: the mine data of the minions `tgt` selects.
    fn get(&self, tgt: &str, fun: &Value, tgt_type: &str) -> Result<Value, String>;
    /// Salt's `_mine_delete`: forgets `fun` in this minion's mine.
    fn delete(&self, fun: &str) -> Result<Value, String>;
    /// Salt's `_mine_flush`: forgets this minion's whole mine.
    fn flush(&self) -> Result<Value, String>;
    /// The `mine_functions` of this minion's pillar as the master compiles
    /// it now (`{}` when none).
    fn pillar_functions(&self) -> Result<Map, String>;
}

/// The functions the master answers itself while compiling for a
/// minion: lookups in that minion's cached grains and compiled pillar,
/// and reads of the master's own file roots. Everything else needs the
/// minion's host.
pub const ANSWERED_ON_MASTER: &[&str] = &[
    "grains.get",
    "grains.item",
    "grains.items",
    "grains.ls",
    "grains.filter_by",
    "grains.fetch",
    "pillar.get",
    "pillar.item",
    "pillar.items",
    "pillar.raw",
    "pillar.data",
    "pillar.fetch",
    "pillar.keys",
    "pillar.ls",
    "pillar.obfuscate",
    "pillar.file_exists",
    "config.get",
    "config.option",
    "sys.list_functions",
    "sys.list_modules",
    "sys.doc",
    "cp.get_file_str",
    "cp.list_master",
    "cp.list_master_dirs",
    "cp.list_states",
    "cp.hash_file",
    "state.sls_exists",
    "mine.get",
    "test.echo",
    "test.ping",
    "test.true",
    "test.false",
];

/// The registry of execution modules, filled by [`crate::table`].
#[derive(Default, Clone)]
pub struct ExecModules {
    modules: BTreeMap<&'static str, Arc<dyn ExecModule>>,
    /// Every function of each module, asked on every call.
    functions: BTreeMap<&'static str, Vec<&'static str>>,
    /// Set on the master while compiling for a minion.
    remote: Option<Arc<dyn RemoteExec>>,
    /// Where the `mine` module sends and reads mine data (none when
    /// masterless).
    mine: Option<Arc<dyn MineLink>>,
}

impl ExecModules {
    /// Adds a module.
    pub fn register(&mut self, module: Arc<dyn ExecModule>) {
        self.functions.insert(module.name(), module.functions());
        self.modules.insert(module.name(), module);
    }
    /// Whether `mod.fun` exists.
    pub fn has(&self, fun: &str) -> bool {
        fun.split_once('.')
            .and_then(|(m, f)| self.functions.get(m).map(|fs| fs.contains(&f)))
            .unwrap_or(false)
    }
    /// The functions of module `name`, `None` when there is no such module.
    pub fn functions_of(&self, name: &str) -> Option<&[&'static str]> {
        self.functions.get(name).map(Vec::as_slice)
    }
    /// Every `mod.fun`, sorted.
    pub fn list_functions(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .functions
            .iter()
            .flat_map(|(m, fs)| fs.iter().map(move |f| format!("{m}.{f}")))
            .collect();
        out.sort();
        out
    }
    /// The same registry, sending every function the master cannot
    /// answer ([`ANSWERED_ON_MASTER`]) to `remote`.
    pub fn with_remote(&self, remote: Arc<dyn RemoteExec>) -> Self {
        Self {
            modules: self.modules.clone(),
            functions: self.functions.clone(),
            remote: Some(remote),
            mine: self.mine.clone(),
        }
    }

    /// Whether calls go to a minion (a master compiling for it).
    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// Calls `mod.fun` on the minion even when the master would answer
    /// it itself; `None` without a remote.
    pub fn call_remote(&self, fun: &str, args: &Args) -> Option<Result<Value, String>> {
        self.remote.as_ref().map(|r| r.call(fun, args))
    }

    /// This registry, with the `mine` module reaching its mine through
    /// `link` (by value: the maps are not copied again).
    pub fn with_mine(mut self, link: Arc<dyn MineLink>) -> Self {
        self.mine = Some(link);
        self
    }

    /// Where this host's mine lives, when it has one.
    pub fn mine(&self) -> Option<&Arc<dyn MineLink>> {
        self.mine.as_ref()
    }

    /// Calls `mod.fun`.
    pub fn call(&self, fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
        if let Some(remote) = &self.remote {
            if self.has(fun) && !ANSWERED_ON_MASTER.contains(&fun) {
                return remote.call(fun, args).map_err(ExecError::Execution);
            }
        }
        let (m, f) = fun
            .split_once('.')
            .ok_or_else(|| ExecError::NotAvailable(fun.to_string()))?;
        let module = self
            .modules
            .get(m)
            .ok_or_else(|| ExecError::NotAvailable(fun.to_string()))?;
        if !self.has(fun) {
            return Err(ExecError::NotAvailable(fun.to_string()));
        }
        module.call(f, args, host)
    }
}
