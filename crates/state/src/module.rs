//! The plugin contract between the executor and state modules.
//!
//! A state module (`test`, `cmd`, `file`, `pkg`...) is one file of
//! `halite-modules` declaring a [`StateTable`] of its functions (name ->
//! handler), registered by its name in one list there; the registry lists
//! the names of the rows and dispatches through the same rows, so the two
//! cannot disagree. The executor hands it a
//! [`StateCall`]: the chunk, test mode, and a [`StateEnv`] giving access to
//! the host (commands, execution functions, files, templates, events).

use rustc_hash::{FxHashMap, FxHashSet};
use std::path::PathBuf;
use std::sync::Arc;

use crate::chunk::LowChunk;
use crate::ret::StateResult;
use crate::value::{Map, Value};
pub(crate) use halite_salt_rules::truthy;

/// Why a state function could not produce a normal result.
///
/// The executor turns it into a failed state whose comment is the message,
/// so a module never has to panic on bad arguments.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A required argument is missing (Salt: "Missing parameter ...").
    #[error("Missing parameter {0} for state {1}")]
    MissingArg(String, String),
    /// An argument has the wrong type or value.
    #[error("{0}")]
    BadArg(String),
    /// Anything else the module wants to report as a failure.
    #[error("{0}")]
    Other(String),
}

/// One call of a state function.
pub struct StateCall<'a> {
    /// The whole chunk: `name`, the arguments and the bookkeeping keys.
    pub chunk: &'a LowChunk,
    /// `test=True` for this call (global or per state): predict, change nothing.
    pub test: bool,
    /// The host the state runs on.
    pub env: &'a dyn StateEnv,
    /// For `mod_watch`: the function of the watching state (Salt's `sfun`).
    pub sfun: Option<&'a str>,
    /// For `mod_watch`: the watching state's `watch`/`watch_any`
    /// requisites, keyed by kind, each a list of who the watched state is
    /// (`state`, `__id__`, `name`, `fun`, `__sls__`, `__env__`) and its
    /// `__changes__` (Salt's `__reqs__`, which also lists the other kinds;
    /// no mod_watch function reads them).
    pub reqs: Option<&'a Map>,
}

impl<'a> StateCall<'a> {
    /// The `name` argument.
    pub fn name(&self) -> &str {
        self.chunk.name()
    }
    /// An argument, `None` when absent or null.
    pub fn arg(&self, key: &str) -> Option<&'a Value> {
        self.chunk.get(key).filter(|v| !v.is_null())
    }
    /// A string argument; numbers and booleans are rendered as Salt would
    /// (`0644` loads as 644 and must still be usable as a mode).
    pub fn arg_str(&self, key: &str) -> Result<Option<String>, StateError> {
        match self.arg(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(Value::Bool(b)) => Ok(Some(if *b { "True" } else { "False" }.to_string())),
            Some(other) => Err(StateError::BadArg(format!(
                "Argument '{key}' must be a string, not {}",
                type_name(other)
            ))),
        }
    }
    /// A required string argument.
    pub fn require_str(&self, key: &str) -> Result<String, StateError> {
        self.arg_str(key)?.ok_or_else(|| {
            StateError::MissingArg(
                key.to_string(),
                format!("{}.{}", self.chunk.state(), self.chunk.fun()),
            )
        })
    }
    /// A boolean argument with Salt's truthiness for strings (`"True"`, `"yes"`...).
    pub fn arg_bool(&self, key: &str, default: bool) -> bool {
        match self.arg(key) {
            None => default,
            Some(v) => truthy(v),
        }
    }
    /// A list argument; a scalar becomes a one-element list.
    pub fn arg_list(&self, key: &str) -> Vec<Value> {
        match self.arg(key) {
            None => Vec::new(),
            Some(Value::Array(a)) => a.clone(),
            Some(v) => vec![v.clone()],
        }
    }
}

/// Python's name of a value's type, for error messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "None",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// A state module: a named set of state functions.
///
/// Every shipped module is a [`StateTable`], one per file in
/// `halite-modules`; the trait is what the registry holds. `call` must not panic on any input: bad arguments come back
/// as `Err(StateError)`, which the executor reports as a failed state.
pub trait StateModule: Send + Sync {
    /// The module name used in SLS (`file`, `pkg`...).
    fn name(&self) -> &'static str;
    /// The functions it provides; `mod_watch` included when it has one.
    /// Asked once, when the module is registered.
    fn functions(&self) -> Vec<&'static str>;
    /// Runs `fun`. Unknown functions are filtered out at compile time.
    fn call(&self, fun: &str, call: &StateCall<'_>) -> Result<StateResult, StateError>;
    /// Whether `fun` consumes the `check_cmd` argument itself (Salt: the
    /// module has `mod_run_check_cmd` and the function a `check_cmd`
    /// parameter, as `file.managed` does, which checks the new content in a
    /// temp file before writing it). The executor then skips its generic
    /// `check_cmd` run for this call.
    fn runs_own_check_cmd(&self, fun: &str) -> bool {
        let _ = fun;
        false
    }
}

/// The handler of one state function: the call in, Salt's return out.
pub type StateHandler = fn(&StateCall<'_>) -> Result<StateResult, StateError>;

/// One row of a state module's table: a function name and its handler.
///
/// Why a table: the names a module lists and the functions it dispatches
/// to are the same data, so they cannot drift apart.
#[derive(Clone, Copy)]
pub struct StateFunction {
    /// The function name used in SLS (`present`, `mod_watch`...).
    pub name: &'static str,
    /// What runs it.
    pub run: StateHandler,
    /// Whether the function consumes `check_cmd` itself
    /// ([`StateModule::runs_own_check_cmd`]).
    pub own_check_cmd: bool,
}

impl StateFunction {
    /// A function named `name` run by `run`.
    pub const fn new(name: &'static str, run: StateHandler) -> Self {
        Self {
            name,
            run,
            own_check_cmd: false,
        }
    }

    /// The same function, consuming `check_cmd` itself.
    pub const fn with_own_check_cmd(self) -> Self {
        Self {
            own_check_cmd: true,
            ..self
        }
    }
}

/// A state module written as one table: its name and its functions.
///
/// Each module file of `halite-modules` declares one `pub const MODULE:
/// StateTable` and is registered by its name in one list there (see
/// docs/adding-a-module.md).
#[derive(Clone, Copy)]
pub struct StateTable {
    /// The module name used in SLS (`file`, `pkg`...).
    pub name: &'static str,
    /// Every function of the module, `mod_watch` included when it has one.
    pub functions: &'static [StateFunction],
}

impl StateTable {
    /// The row of `fun`, if the module has it.
    pub fn function(&self, fun: &str) -> Option<&'static StateFunction> {
        self.functions.iter().find(|f| f.name == fun)
    }
}

impl StateModule for StateTable {
    fn name(&self) -> &'static str {
        self.name
    }
    fn functions(&self) -> Vec<&'static str> {
        self.functions.iter().map(|f| f.name).collect()
    }
    fn call(&self, fun: &str, call: &StateCall<'_>) -> Result<StateResult, StateError> {
        match self.function(fun) {
            Some(f) => (f.run)(call),
            None => Err(StateError::Other(format!(
                "{}.{fun} is not available",
                self.name
            ))),
        }
    }
    fn runs_own_check_cmd(&self, fun: &str) -> bool {
        self.function(fun).is_some_and(|f| f.own_check_cmd)
    }
}

/// The registry of state modules, filled by `halite-modules`' table.
#[derive(Default, Clone)]
pub struct StateModules {
    /// The modules by name, hashed: asked for twice per state (an ordered
    /// tree compared a few names each time).
    modules: FxHashMap<&'static str, Arc<dyn StateModule>>,
    /// Every (module, function) pair, for [`StateModules::has`]: asked a
    /// few times per state, it was a tree walk and a scan of the
    /// module's function list each time.
    functions: FxHashSet<(&'static str, &'static str)>,
}

impl StateModules {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a module (a later one with the same name replaces the earlier).
    pub fn register(&mut self, module: Arc<dyn StateModule>) {
        let name = module.name();
        self.functions.retain(|(m, _)| *m != name);
        self.functions
            .extend(module.functions().into_iter().map(|f| (name, f)));
        self.modules.insert(name, module);
    }
    /// The module named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn StateModule>> {
        self.modules.get(name)
    }
    /// Whether `module.fun` exists.
    pub fn has(&self, module: &str, fun: &str) -> bool {
        // The set is covariant in its keys: looked up with shorter-lived strs.
        let functions: &FxHashSet<(&str, &str)> = &self.functions;
        functions.contains(&(module, fun))
    }
    /// Every registered module name, in name order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> {
        let mut names: Vec<&'static str> = self.modules.keys().copied().collect();
        names.sort_unstable();
        names.into_iter()
    }
}

/// How to run a shell command for `unless`, `onlyif`, `check_cmd` and
/// state modules that shell out.
#[derive(Debug, Clone, Default)]
pub struct CmdOptions {
    /// The directory to run in (Salt's `cwd`).
    pub cwd: Option<String>,
    /// The user to run as (Salt's `runas`).
    pub runas: Option<String>,
    /// The shell for `python_shell` commands (default `/bin/sh`).
    pub shell: Option<String>,
    /// Extra environment variables (Salt's `env`).
    pub env: Vec<(String, String)>,
    /// Text fed to the command's standard input.
    pub stdin: Option<String>,
    /// Run through the shell (`/bin/sh -c`) — Salt's `python_shell=True`.
    pub python_shell: bool,
    /// Salt's `timeout=`: the command (and every process it started) is
    /// killed when it runs longer.
    pub timeout: Option<CmdTimeout>,
}

/// A `timeout=` of a command, as the user gave it.
///
/// Why not a bare `Duration`: Salt's message for a timed-out command
/// quotes the number as Python prints it ("Timed out after 1.5 seconds",
/// "after 1 seconds"), so the text is kept beside the duration.
#[derive(Debug, Clone, PartialEq)]
pub struct CmdTimeout {
    /// How long the command may run.
    pub duration: std::time::Duration,
    /// Python's `str()` of the number given.
    pub shown: String,
}

impl CmdTimeout {
    /// Reads `timeout=` the way Salt's `TimedProc` does: a positive number
    /// limits the run, `0`/`None`/`False` (falsy) means no limit, anything
    /// else is refused with Salt's message.
    pub fn from_value(v: Option<&Value>) -> Result<Option<Self>, String> {
        let (secs, shown) = match v {
            None | Some(Value::Null) | Some(Value::Bool(false)) => return Ok(None),
            // Python's bool is an int: `timeout=True` is one second.
            Some(Value::Bool(true)) => (1.0, "True".to_string()),
            Some(Value::Number(n)) => match n.as_f64() {
                Some(f) => (f, n.to_string()),
                None => return Err(format!("Error: timeout {n} must be a number")),
            },
            Some(Value::String(s)) => return Err(format!("Error: timeout {s} must be a number")),
            // A list or a mapping, shown as JSON.
            Some(other) => return Err(format!("Error: timeout {other} must be a number")),
        };
        if secs == 0.0 {
            return Ok(None);
        }
        // A negative limit has already passed, as Python's `join(-1)`.
        let duration = std::time::Duration::try_from_secs_f64(secs.max(0.0))
            .unwrap_or(std::time::Duration::MAX);
        Ok(Some(Self { duration, shown }))
    }
}

/// What a command did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CmdOutput {
    /// The exit code (Salt's `retcode`).
    pub retcode: i32,
    /// What it printed on standard output.
    pub stdout: String,
    /// What it printed on standard error.
    pub stderr: String,
    /// Its process id (Salt's `pid`).
    pub pid: u32,
    /// Killed for running past its `timeout=`: `stdout` then holds Salt's
    /// "... : Timed out after N seconds" and `retcode` is 1, and Salt's
    /// `cmd.*` functions leave the job's retcode alone.
    pub timed_out: bool,
}

/// Why a file could not be fetched from the file server.
#[derive(Debug, thiserror::Error)]
pub enum FileClientError {
    /// The master refused the file (the text says why).
    #[error("{0}")]
    Refused(String),
    /// Reading or writing a cached file failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// Anything else, worded for the user.
    #[error("{0}")]
    Other(String),
}

/// Access to `salt://` files: local file roots for `halite-call --local`,
/// the master's fileserver on a minion.
///
/// Paths are given without the `salt://` prefix (use [`strip_salt_url`]),
/// relative to the root of `saltenv`, `/`-separated.
pub trait FileClient: Send + Sync {
    /// A local path holding the file's content, or `None` when absent.
    fn cache_file(&self, path: &str, saltenv: &str) -> Result<Option<PathBuf>, FileClientError>;
    /// Every file below `prefix` (`""` for all), relative to the root.
    fn list_files(&self, saltenv: &str, prefix: &str) -> Result<Vec<String>, FileClientError>;
    /// Every directory below `prefix`, relative to the root.
    fn list_dirs(&self, saltenv: &str, prefix: &str) -> Result<Vec<String>, FileClientError>;
    /// The saltenvs this client serves.
    fn envs(&self) -> Vec<String> {
        vec!["base".to_string()]
    }
    /// The file's text, or `None` when absent.
    fn read_text(&self, path: &str, saltenv: &str) -> Result<Option<String>, FileClientError> {
        match self.cache_file(path, saltenv)? {
            None => Ok(None),
            Some(p) => {
                std::fs::read_to_string(&p)
                    .map(Some)
                    .map_err(|source| FileClientError::Io {
                        path: p.display().to_string(),
                        source,
                    })
            }
        }
    }
}

/// Splits `salt://path?saltenv=x` into (`path`, saltenv override).
/// Returns `None` when `url` is not a `salt://` URL.
pub fn strip_salt_url(url: &str) -> Option<(&str, Option<&str>)> {
    let rest = url.strip_prefix("salt://")?;
    match rest.split_once('?') {
        Some((p, q)) => {
            let env = q.split('&').find_map(|kv| kv.strip_prefix("saltenv="));
            Some((p, env))
        }
        None => Some((rest, None)),
    }
}

/// The host a state runs on, as the state engine and state modules see it.
///
/// `halite-modules` implements it over the real machine; the same engine
/// runs under `halite-call --local` and inside a minion.
pub trait StateEnv: Send + Sync {
    /// The minion's options (Salt's `__opts__`).
    fn opts(&self) -> &Value;
    /// The minion's grains.
    fn grains(&self) -> &Value;
    /// The minion's pillar for this run.
    fn pillar(&self) -> &Value;
    /// Runs a command.
    fn run_cmd(&self, cmd: &str, opts: &CmdOptions) -> std::io::Result<CmdOutput>;
    /// Calls an execution function (`file.file_exists`, `test.true`...).
    fn call_function(&self, fun: &str, args: &[Value], kwargs: &Map) -> Result<Value, String>;
    /// The file server.
    fn file_client(&self) -> &dyn FileClient;
    /// Renders a template (`jinja`...) with the run's grains/pillar/opts plus
    /// `context` (file.managed's `context`/`defaults`).
    fn render_template(
        &self,
        text: &str,
        engine: &str,
        context: &Map,
        saltenv: &str,
    ) -> Result<String, String>;
    /// Fires an event (`fire_event`, state progress).
    fn fire_event(&self, tag: &str, data: &Value);
    /// Fires an event the caller no longer needs: a sink that keeps the
    /// value (the minion's, which sends it on) takes it without a copy.
    fn fire_event_owned(&self, tag: &str, data: Value) {
        self.fire_event(tag, &data)
    }
    /// Fires a state's progress event (`state_events`), whose data is
    /// `{"ret": ret, "len": len}`: a sink that encodes events (the
    /// minion's) encodes it from the state's return itself, without a
    /// copy of it as a `Value` first (issue 25: a 1,000-state run fires
    /// 1,000 of them, on every minion).
    fn fire_progress_event(&self, tag: &str, ret: &crate::SmallDict, len: usize) {
        self.fire_event_owned(tag, progress_data(ret, len))
    }
    /// Whether the execution function `fun` (`mod.fun`) exists here.
    fn has_function(&self, fun: &str) -> bool {
        let _ = fun;
        true
    }
    /// Every low chunk of the current run (Salt's `__lowstate__`), so a state
    /// can resolve a requisite given by ID to the state's `name` (the
    /// `clean` of `file.directory`/`file.recurse` keeps what required `file`
    /// states manage). Empty when the caller does not provide it.
    fn lowstate(&self) -> &[LowChunk] {
        &[]
    }
    /// The run's accumulators (`file.accumulated` charges them, the
    /// `file.managed`/`file.blockreplace` states after it read them).
    /// `None` outside a state run.
    fn accumulators(&self) -> Option<&crate::accumulators::Accumulators> {
        None
    }
    /// Salt's `__running__`: the returns of the states of this run that
    /// finished so far, by tag, as an object. `None` outside a state run.
    fn running(&self) -> Option<Value> {
        None
    }
    /// Salt's `__states__['mod.fun'](**kwargs)`: runs the state function
    /// `fun` with `kwargs` (its `name` and arguments) outside the run's
    /// graph, in test mode when `test`, and returns its dict (`name`,
    /// `changes`, `result`, `comment`). `None` when this environment has no
    /// state modules to call (outside a state run) or no such function.
    fn call_state(&self, fun: &str, kwargs: &Map, test: bool) -> Option<Value> {
        let _ = (fun, kwargs, test);
        None
    }
    /// This environment with its grains detected again (`grains`) and/or
    /// its pillar compiled again (`pillar`), for the states after one with
    /// `reload_grains` / `reload_pillar` (Salt's `check_refresh`).
    /// `pillar_override` is the run's `pillar=` argument, merged over a
    /// recompiled pillar as Salt does. `None` when it cannot refresh.
    fn refreshed(
        &self,
        grains: bool,
        pillar: bool,
        pillar_override: Option<&Value>,
    ) -> Option<Box<dyn StateEnv>> {
        let _ = (grains, pillar, pillar_override);
        None
    }
}

/// The data of a state's progress event (`salt/job/<jid>/prog/<id>/<n>`),
/// as Salt fires it: the state's return and how many states the run has.
pub fn progress_data(ret: &crate::SmallDict, len: usize) -> Value {
    let mut data = Map::new();
    data.insert("ret".into(), ret.to_value());
    data.insert("len".into(), Value::from(len));
    Value::Object(data)
}
