//! The Python host: custom Salt modules (`_modules`, `_states`, `_grains`,
//! `_utils`, `_renderers`, `#!py` SLS) run in one `python3` worker that
//! emulates Salt's loader, while halite's Rust functions stay the fast
//! path. `__salt__['cmd.run'](...)` in a module comes back to the caller
//! through [`Callback`]: this crate knows nothing of halite's modules
//! (they depend on it, not the other way).
//!
//! The worker is started on first need, reused by later calls, and started
//! again when it died or a call ran past its deadline. The protocol is in
//! docs/python.md.

pub mod protocol;
pub mod worker;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::worker::Worker;

/// How a `__salt__['mod.fun'](...)` the worker cannot serve itself reaches
/// the caller's functions (halite's Rust modules).
pub trait Callback {
    /// Runs `fun` with the arguments; `Err` is the message the Python side
    /// raises as `CommandExecutionError`.
    fn salt_call(
        &self,
        fun: &str,
        args: &[Value],
        kwargs: &Map<String, Value>,
    ) -> Result<Value, String>;

    /// Whether `fun` exists on the caller's side beyond the functions the
    /// worker was told of at load (`salt_fallback`'s Salt functions): the
    /// answer of `'mod.fun' in __salt__`.
    fn has(&self, fun: &str) -> bool {
        let _ = fun;
        false
    }

    /// `__states__['mod.fun'](**kwargs)` of a state function the caller
    /// provides (halite's Rust states): the state's return dict. `Err` is
    /// raised in Python as `CommandExecutionError`.
    fn state_call(&self, fun: &str, kwargs: &Map<String, Value>) -> Result<Value, String> {
        let _ = kwargs;
        Err(format!("'{fun}' is not available."))
    }

    /// Salt's `__running__` for the state being called: the returns of the
    /// run's states finished so far, by tag (`{}` outside a state run).
    fn running(&self) -> Value {
        Value::Object(Map::new())
    }
}

/// A [`Callback`] for requests that call nothing back (grains, load).
pub struct NoCallback;

impl Callback for NoCallback {
    fn salt_call(&self, fun: &str, _: &[Value], _: &Map<String, Value>) -> Result<Value, String> {
        Err(format!("'{fun}' is not available."))
    }
}

/// Why a Python request failed.
#[derive(Debug, thiserror::Error)]
pub enum PythonError {
    /// The interpreter could not be started.
    #[error("cannot start the Python worker '{0}': {1}; install python3 or set python_bin in the minion config")]
    Spawn(String, #[source] std::io::Error),
    /// The worker exited or its pipe broke; the next request starts a new one.
    #[error("{0}")]
    Died(String),
    /// The call ran past the job's timeout; the worker was killed.
    #[error("the Python call did not finish within the job's timeout; the worker was killed and will be restarted")]
    Timeout,
    /// The worker answered something this side does not understand.
    #[error("{0}")]
    Protocol(String),
    /// The Python code raised: the exception's class, message and traceback.
    #[error("{kind}: {message}")]
    Raised {
        /// The exception class name (`CommandExecutionError`).
        kind: String,
        /// `str(exception)`.
        message: String,
        /// `traceback.format_exc()`.
        traceback: String,
    },
}

impl PythonError {
    /// The traceback's last lines as Salt prints them for a failed call:
    /// the `Traceback` header, the innermost frame and the exception line.
    pub fn traceback_tail(&self) -> Option<String> {
        let PythonError::Raised { traceback, .. } = self else {
            return None;
        };
        let lines: Vec<&str> = traceback.trim_end().lines().collect();
        let frame = lines.iter().rposition(|l| l.starts_with("  File "))?;
        let mut out = vec!["Traceback (most recent call last):"];
        out.extend(&lines[frame..]);
        Some(out.join("\n"))
    }
}

/// The directories each kind of custom module is loaded from, in order
/// (the first file of a name wins, as in Salt's loader).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleDirs {
    /// `_modules`: execution modules.
    pub modules: Vec<PathBuf>,
    /// `_states`: state modules.
    pub states: Vec<PathBuf>,
    /// `_grains`: grain functions.
    pub grains: Vec<PathBuf>,
    /// `_utils`: `__utils__`.
    pub utils: Vec<PathBuf>,
    /// `_renderers`: custom renderers.
    pub renderers: Vec<PathBuf>,
    /// `_returners`: custom returners (`returner(ret)`).
    pub returners: Vec<PathBuf>,
}

impl ModuleDirs {
    /// Whether any of the directories holds a Python module: when none
    /// does, no worker is ever started.
    pub fn has_any(&self) -> bool {
        self.all().any(|(_, d)| has_python(d))
    }

    /// Whether any directory of `kind`'s list holds a Python module.
    pub fn has_kind(&self, kind: &str) -> bool {
        self.all().any(|(k, d)| k == kind && has_python(d))
    }

    fn all(&self) -> impl Iterator<Item = (&'static str, &PathBuf)> {
        [
            ("modules", &self.modules),
            ("states", &self.states),
            ("grains", &self.grains),
            ("utils", &self.utils),
            ("renderers", &self.renderers),
            ("returners", &self.returners),
        ]
        .into_iter()
        .flat_map(|(k, v)| v.iter().map(move |d| (k, d)))
    }

    fn to_json(&self) -> Value {
        let list = |v: &[PathBuf]| -> Value {
            v.iter()
                .map(|p| Value::from(p.display().to_string()))
                .collect()
        };
        json!({
            "modules": list(&self.modules),
            "states": list(&self.states),
            "grains": list(&self.grains),
            "utils": list(&self.utils),
            "renderers": list(&self.renderers),
            "returners": list(&self.returners),
        })
    }
}

fn has_python(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let p = e.path();
            p.extension().is_some_and(|x| x == "py") || p.join("__init__.py").is_file()
        })
    })
}

/// What the loader found: the functions of each module that loaded, and
/// the modules whose `__virtual__` declined (with its reason).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inventory {
    /// Execution modules: name -> public function names (aliases applied).
    pub modules: BTreeMap<String, Vec<String>>,
    /// State modules: name -> function names.
    pub states: BTreeMap<String, Vec<String>>,
    /// Custom renderers by name.
    pub renderers: BTreeMap<String, Vec<String>>,
    /// Custom returners: name -> function names (`returner`...).
    pub returners: BTreeMap<String, Vec<String>>,
    /// Declined or broken modules per kind: name -> reason (`None`: no reason given).
    pub declined: BTreeMap<String, BTreeMap<String, Option<String>>>,
    /// Import errors with their tracebacks, for the log.
    pub errors: Vec<String>,
}

impl Inventory {
    fn from_json(v: &Value) -> Self {
        let funs = |kind: &str| -> BTreeMap<String, Vec<String>> {
            v.get(kind)
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, fs)| {
                            let names = fs
                                .as_array()
                                .map(|a| {
                                    a.iter()
                                        .filter_map(Value::as_str)
                                        .map(String::from)
                                        .collect()
                                })
                                .unwrap_or_default();
                            (k.clone(), names)
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let declined = v
            .get("declined")
            .and_then(Value::as_object)
            .map(|kinds| {
                kinds
                    .iter()
                    .map(|(kind, mods)| {
                        let mods = mods
                            .as_object()
                            .map(|m| {
                                m.iter()
                                    .map(|(k, r)| (k.clone(), r.as_str().map(String::from)))
                                    .collect()
                            })
                            .unwrap_or_default();
                        (kind.clone(), mods)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            modules: funs("modules"),
            states: funs("states"),
            renderers: funs("renderers"),
            returners: funs("returners"),
            declined,
            errors: v
                .get("errors")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// Salt's text for a call of `fun` (`mod.fun`) that no module provides:
    /// the `__virtual__` reason when the module declined.
    pub fn missing(&self, kind: &str, fun: &str) -> String {
        let module = fun.split('.').next().unwrap_or(fun);
        match self.declined.get(kind).and_then(|d| d.get(module)) {
            Some(Some(reason)) => format!("'{module}' __virtual__ returned False: {reason}"),
            Some(None) => format!("'{module}' __virtual__ returned False"),
            None => format!("'{fun}' is not available."),
        }
    }
}

/// The loader's dunders for one request: `__opts__`, `__grains__`,
/// `__pillar__`, the saltenv (`__env__`), and for states `test`.
#[derive(Debug, Clone, Default)]
pub struct Dunders {
    /// `__opts__`.
    pub opts: Value,
    /// `__grains__`.
    pub grains: Value,
    /// `__pillar__`.
    pub pillar: Value,
    /// `__env__`/`__saltenv__`.
    pub saltenv: Option<String>,
    /// `__opts__['test']`.
    pub test: bool,
    /// The job the call belongs to (its jid): `__context__` is one dict
    /// per job, as in Salt. `None` keeps one dict for the worker's life
    /// (one `halite-call` process is one job).
    pub job: Option<String>,
}

impl Dunders {
    /// `opts`, `grains` and `pillar` serialized (linear in their size).
    fn parts(&self) -> [String; 3] {
        let text = |v: &Value| serde_json::to_string(v).unwrap_or_else(|_| "{}".into());
        [text(&self.opts), text(&self.grains), text(&self.pillar)]
    }

    /// `request` (an object) with its `dunders` spliced in as text; the
    /// big parts only when `big` is given (the worker does not hold them).
    fn frame(&self, request: &Value, big: Option<&[String; 3]>) -> Vec<u8> {
        let mut s = serde_json::to_string(request).unwrap_or_else(|_| "{}".into());
        s.pop(); // the closing brace
        if s.len() > 1 {
            s.push(',');
        }
        s.push_str("\"dunders\":{");
        if let Some([o, g, p]) = big {
            for (k, v) in [("opts", o), ("grains", g), ("pillar", p)] {
                s.push_str(&format!("\"{k}\":{v},"));
            }
        }
        let saltenv = serde_json::to_string(&self.saltenv).unwrap_or_else(|_| "null".into());
        let job = serde_json::to_string(&self.job).unwrap_or_else(|_| "null".into());
        s.push_str(&format!(
            "\"saltenv\":{saltenv},\"job\":{job},\"test\":{}}}}}",
            self.test
        ));
        s.into_bytes()
    }

    fn to_json(&self) -> Value {
        json!({
            "opts": self.opts,
            "grains": self.grains,
            "pillar": self.pillar,
            "saltenv": self.saltenv,
            "job": self.job,
            "test": self.test,
        })
    }
}

/// One call of a custom function.
#[derive(Debug, Clone)]
pub enum Call<'a> {
    /// An execution function: `mod.fun` with positional and keyword arguments.
    Exec {
        /// `mod.fun`.
        fun: &'a str,
        /// Positional arguments.
        args: &'a [Value],
        /// Keyword arguments.
        kwargs: &'a Map<String, Value>,
    },
    /// A state function with its low chunk (the state's arguments).
    State {
        /// `mod.fun`.
        fun: &'a str,
        /// The low chunk: `name` and the arguments.
        low: &'a Map<String, Value>,
        /// For `mod_watch`: the watching state's function and requisites.
        sfun: Option<&'a str>,
        /// For `mod_watch`: Salt's `__reqs__`.
        reqs: Option<&'a Map<String, Value>>,
    },
    /// A `_returners` module's function (`name.returner`) with the
    /// job's return dict.
    Returner {
        /// `name.returner`.
        fun: &'a str,
        /// Salt's return dict.
        ret: &'a Value,
    },
    /// Every `_grains` function, merged.
    Grains,
    /// A `#!py` file (`renderer` "py") or a custom renderer over `text`.
    Render {
        /// `py` or the custom renderer's name.
        renderer: &'a str,
        /// The file's text (after the renderers before it).
        text: &'a str,
        /// Where it came from, for tracebacks.
        path: &'a str,
        /// The SLS name (`sls`, `__sls__`).
        sls: &'a str,
    },
}

impl Call<'_> {
    fn to_json(&self, dunders: &Dunders) -> Value {
        let d = dunders.to_json();
        match self {
            Call::Exec { fun, args, kwargs } => {
                json!({"op": "call", "kind": "exec", "fun": fun, "args": args, "kwargs": kwargs, "dunders": d})
            }
            Call::State {
                fun,
                low,
                sfun,
                reqs,
            } => json!({
                "op": "call", "kind": "state", "fun": fun, "kwargs": low,
                "sfun": sfun, "reqs": reqs, "dunders": d,
            }),
            Call::Returner { fun, ret } => {
                json!({"op": "call", "kind": "returner", "fun": fun, "args": [ret], "dunders": d})
            }
            Call::Grains => json!({"op": "grains", "dunders": d}),
            Call::Render {
                renderer,
                text,
                path,
                sls,
            } => json!({
                "op": "render", "renderer": renderer, "text": text, "path": path,
                "sls": sls, "saltenv": dunders.saltenv, "dunders": d,
            }),
        }
    }
}

/// The Python host of one minion: the interpreter, the module
/// directories, and the idle workers kept for the next call.
pub struct PythonHost {
    python: PathBuf,
    dirs: ModuleDirs,
    /// The functions halite provides natively (`__salt__` lists them).
    native: Vec<String>,
    /// The state functions halite provides natively (`__states__` reaches
    /// them through [`Callback::state_call`]).
    native_states: Vec<String>,
    /// Whether `__salt__` may ask the caller for functions it was not told
    /// of ([`Callback::has`]: `salt_fallback`).
    open_salt: bool,
    idle: Mutex<Vec<Worker>>,
    /// What the modules of the current generation hold (locked before
    /// `idle` wherever both are).
    loaded: Mutex<Loaded>,
}

/// The host's current load generation and the inventory a worker of it
/// found. [`PythonHost::reload`] starts a new generation: a worker that
/// was loading or running across it loaded the files of before, so its
/// inventory is not kept and it is not kept idle (a sync writing modules
/// while another job's worker loads them would otherwise leave that job's
/// view, missing a module or holding an old one, to the next job).
#[derive(Default)]
struct Loaded {
    generation: u64,
    inventory: Option<Inventory>,
}

/// How many idle workers are kept (a nested or concurrent call starts
/// another; more than this are stopped when they finish).
const MAX_IDLE: usize = 2;

impl PythonHost {
    /// A host running `python` (`python3` when `None`, found on PATH) over
    /// `dirs`; `native` are the `mod.fun` names the caller serves.
    pub fn new(python: Option<PathBuf>, dirs: ModuleDirs, native: Vec<String>) -> Self {
        Self {
            python: python.unwrap_or_else(|| PathBuf::from("python3")),
            dirs,
            native,
            native_states: Vec::new(),
            open_salt: false,
            idle: Mutex::new(Vec::new()),
            loaded: Mutex::new(Loaded::default()),
        }
    }

    /// This host with the state functions the caller provides
    /// (`mod.fun`), reachable from Python as `__states__['mod.fun']`.
    pub fn with_native_states(mut self, states: Vec<String>) -> Self {
        self.native_states = states;
        self
    }

    /// This host with `__salt__` asking the caller ([`Callback::has`])
    /// about functions it was not told of at load: `salt_fallback`'s.
    pub fn with_open_salt(mut self, open: bool) -> Self {
        self.open_salt = open;
        self
    }

    /// The module directories this host loads.
    pub fn dirs(&self) -> &ModuleDirs {
        &self.dirs
    }

    /// What the loader found (starting the worker if none ran yet; a
    /// `timeout` bounds the imports and `__virtual__` calls).
    pub fn inventory(
        &self,
        dunders: &Dunders,
        timeout: Option<Duration>,
    ) -> Result<Inventory, PythonError> {
        if let Some(inv) = self.loaded().inventory.clone() {
            return Ok(inv);
        }
        let (worker, inv) = self.spawn_loaded(dunders, timeout.map(|t| Instant::now() + t))?;
        self.checkin(worker);
        Ok(inv)
    }

    /// Runs `call`, serving its `__salt__` calls through `callback`; a
    /// `timeout` kills the worker when the call runs past it.
    pub fn call(
        &self,
        call: &Call<'_>,
        dunders: &Dunders,
        callback: &dyn Callback,
        timeout: Option<Duration>,
    ) -> Result<Value, PythonError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut worker = self.checkout(dunders, deadline)?;
        // opts, grains and pillar are most of a request's bytes: sent only
        // when they differ from what this worker holds.
        let parts = dunders.parts();
        let body = if worker.held.as_ref() == Some(&parts) {
            dunders.frame(&call.to_json(dunders), None)
        } else {
            let body = dunders.frame(&call.to_json(dunders), Some(&parts));
            worker.held = Some(parts);
            body
        };
        let ret = worker.request_raw(&body, callback, deadline);
        match &ret {
            Ok(_) | Err(PythonError::Raised { .. }) => self.checkin(worker),
            Err(e) => tracing::warn!("the Python worker is dropped: {e}"),
        }
        ret
    }

    /// Forgets the loaded modules: the next call starts a worker that
    /// loads them again (after `saltutil.sync_*` changed the files). A
    /// worker busy now (loading, or running another job's call) finishes
    /// that call and is then stopped, not kept ([`Loaded`]).
    pub fn reload(&self) {
        let stopped = {
            let mut loaded = self.loaded();
            loaded.generation += 1;
            loaded.inventory = None;
            self.idle
                .lock()
                .map(|mut idle| std::mem::take(&mut *idle))
                .unwrap_or_default()
        };
        // Stopped outside the locks.
        drop(stopped);
    }

    fn loaded(&self) -> std::sync::MutexGuard<'_, Loaded> {
        self.loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// An idle worker, or a new one that has loaded the modules.
    fn checkout(
        &self,
        dunders: &Dunders,
        deadline: Option<Instant>,
    ) -> Result<Worker, PythonError> {
        while let Some(mut w) = self.idle.lock().ok().and_then(|mut i| i.pop()) {
            if w.alive() {
                return Ok(w);
            }
            tracing::info!("the Python worker had exited; starting a new one");
        }
        self.spawn_loaded(dunders, deadline)
            .map(|(worker, _)| worker)
    }

    /// A new worker that has loaded the modules, and what it found (kept
    /// for the next calls unless a reload came while it loaded).
    fn spawn_loaded(
        &self,
        dunders: &Dunders,
        deadline: Option<Instant>,
    ) -> Result<(Worker, Inventory), PythonError> {
        let generation = self.loaded().generation;
        let mut worker = Worker::spawn(&self.python)?;
        worker.generation = generation;
        let load = json!({
            "op": "load",
            "dirs": self.dirs.to_json(),
            "native": self.native,
            "native_states": self.native_states,
            "open_salt": self.open_salt,
            "dunders": dunders.to_json(),
        });
        let inv = worker.request(&load, &NoCallback, deadline)?;
        let inv = Inventory::from_json(&inv);
        for e in &inv.errors {
            tracing::warn!("{e}");
        }
        let mut loaded = self.loaded();
        if loaded.generation == generation {
            loaded.inventory.get_or_insert_with(|| inv.clone());
        }
        Ok((worker, inv))
    }

    /// Keeps `worker` for the next call, unless it loaded the modules of
    /// before the last reload (then it stops as it is dropped).
    fn checkin(&self, worker: Worker) {
        let loaded = self.loaded();
        if worker.generation != loaded.generation {
            drop(loaded);
            tracing::debug!("a Python worker of modules reloaded since is stopped");
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() < MAX_IDLE {
                idle.push(worker);
            }
        }
    }
}
