//! Custom Python modules (`_modules`, `_states`, `_grains`) as rows of
//! halite's registries: the [`halite_python`] worker runs them, and their
//! `__salt__` calls come back here to halite's Rust functions.
//!
//! They are read from the `_<kind>` directories of every saltenv's
//! `file_roots` (a masterless minion reads its own trees) and from
//! `<cachedir>/extmods/<kind>` (where `saltutil.sync_*` puts them, as in
//! Salt). A custom module replaces a native one of the same name, as in
//! Salt. With no Python file in any of them, no worker is ever started.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use halite_python::{Call, Callback, Dunders, ModuleDirs, PythonError, PythonHost};
use halite_state::{Map, StateCall, StateEnv, StateError, StateModule, StateResult, Value};

use crate::exec::{Args, ExecError, ExecModule};
use crate::Host;

/// The kinds of custom module directories, by Salt's names
/// (`_modules` in the file roots, `extmods/modules` in the cache).
pub const KINDS: [&str; 6] = [
    "modules",
    "states",
    "grains",
    "utils",
    "renderers",
    "returners",
];

/// The directories custom modules of each kind are loaded from for a
/// minion with options `opts`: every saltenv's `file_roots` first, then
/// `<cachedir>/extmods`.
pub fn module_dirs(opts: &Value) -> ModuleDirs {
    let roots = crate::local::roots_of(opts, "file_roots");
    let cachedir = opts
        .get("cachedir")
        .and_then(Value::as_str)
        .unwrap_or("/var/cache/halite/minion");
    let dirs_of = |kind: &str| -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        for root in roots.values().flatten() {
            let d = root.join(format!("_{kind}"));
            if !out.contains(&d) {
                out.push(d);
            }
        }
        out.push(PathBuf::from(cachedir).join("extmods").join(kind));
        out
    };
    ModuleDirs {
        modules: dirs_of("modules"),
        states: dirs_of("states"),
        grains: dirs_of("grains"),
        utils: dirs_of("utils"),
        renderers: dirs_of("renderers"),
        returners: dirs_of("returners"),
    }
}

/// The interpreter for the worker: `python_bin` of the config, else `python3`.
fn python_bin(opts: &Value) -> Option<PathBuf> {
    opts.get("python_bin")
        .and_then(Value::as_str)
        .map(PathBuf::from)
}

/// How long one Python call may run: `python_timeout` (seconds) of the
/// config; no limit by default, as Salt's minion has none.
fn call_timeout(opts: &Value) -> Option<Duration> {
    opts.get("python_timeout")
        .and_then(Value::as_f64)
        .filter(|s| *s > 0.0)
        .map(Duration::from_secs_f64)
}

/// One Python host per (interpreter, directories, `salt_fallback` on) in
/// this process: the worker started for the first job is reused by the next.
type HostKey = (Option<PathBuf>, ModuleDirs, bool);
/// The hosts started in this process, by [`HostKey`].
type Hosts = Mutex<Vec<(HostKey, Arc<PythonHost>)>>;

fn hosts() -> &'static Hosts {
    static HOSTS: OnceLock<Hosts> = OnceLock::new();
    HOSTS.get_or_init(Default::default)
}

/// The Python host for `opts`, `None` when no custom module directory
/// holds Python (then nothing Python ever starts). `native` is the list
/// of functions halite serves for `__salt__`.
pub fn python_host(opts: &Value, native: impl FnOnce() -> Vec<String>) -> Option<Arc<PythonHost>> {
    let dirs = module_dirs(opts);
    if !dirs.has_any() {
        return None;
    }
    let key = (python_bin(opts), dirs, fallback_on(opts));
    let mut hosts = hosts().lock().ok()?;
    if let Some((_, h)) = hosts.iter().find(|(k, _)| *k == key) {
        return Some(h.clone());
    }
    let host = Arc::new(new_host(&key, native()));
    hosts.push((key, host.clone()));
    Some(host)
}

/// Whether `salt_fallback` is configured: then `__salt__` in a custom
/// module reaches Salt's own functions too ([`crate::salt_fallback`]).
fn fallback_on(opts: &Value) -> bool {
    opts.get("salt_fallback")
        .and_then(Value::as_str)
        .is_some_and(|p| !p.is_empty())
}

/// A Python host for `key`: `native` execution functions, halite's Rust
/// state functions for `__states__`, and Salt's through `salt_fallback`.
fn new_host(key: &HostKey, native: Vec<String>) -> PythonHost {
    let states = crate::table::state_modules();
    let native_states = states
        .names()
        .filter_map(|m| states.get(m).map(|module| (m, module.functions())))
        .flat_map(|(m, funs)| funs.into_iter().map(move |f| format!("{m}.{f}")))
        .collect();
    PythonHost::new(key.0.clone(), key.1.clone(), native)
        .with_native_states(native_states)
        .with_open_salt(key.2)
}

/// Makes every loaded Python host read its directories again (after
/// `saltutil.sync_*` wrote new files).
pub fn reload_all() {
    if let Ok(hosts) = hosts().lock() {
        for (_, h) in hosts.iter() {
            h.reload();
        }
    }
}

/// A name of a Python module or function, kept for the process: the
/// registries hold `&'static str`. Each distinct name is stored once.
pub(crate) fn intern(s: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let Ok(mut names) = NAMES.get_or_init(Default::default).lock() else {
        return Box::leak(s.to_string().into_boxed_str());
    };
    if let Some(n) = names.get(s) {
        return n;
    }
    let n: &'static str = Box::leak(s.to_string().into_boxed_str());
    names.insert(n);
    n
}

/// The dunders of a call on `host`'s data.
fn dunders(opts: &Value, grains: &Value, pillar: &Value, test: bool) -> Dunders {
    Dunders {
        opts: opts.clone(),
        grains: grains.clone(),
        pillar: pillar.clone(),
        saltenv: opts
            .get("saltenv")
            .and_then(Value::as_str)
            .map(String::from),
        test,
        job: opts.get("jid").and_then(Value::as_str).map(String::from),
    }
}

/// Adds the custom execution and state modules of `host`'s directories to
/// its registries, replacing native modules of the same name. A worker
/// that cannot start is logged and leaves the host as it was.
pub fn add_custom_modules(host: &mut Host) {
    let exec = host.exec.clone();
    let Some(py) = python_host(&host.opts, || exec.list_functions()) else {
        return;
    };
    let d = dunders(&host.opts, &host.grains, &host.pillar, host.test_mode());
    let inventory = match py.inventory(&d, call_timeout(&host.opts)) {
        Ok(inv) => inv,
        Err(e) => {
            tracing::error!("custom Python modules are not loaded: {e}");
            return;
        }
    };
    for (name, funs) in &inventory.modules {
        host.exec.register(Arc::new(PyExec {
            name: intern(name),
            functions: funs.iter().map(|f| intern(f)).collect(),
            py: py.clone(),
        }));
    }
    for (name, funs) in &inventory.states {
        host.states.register(Arc::new(PyState {
            name: intern(name),
            functions: funs.iter().map(|f| intern(f)).collect(),
            py: py.clone(),
        }));
    }
}

/// Calls the custom returner `name` (`_returners/<name>.py`, or synced
/// into `extmods/returners`) with `ret`: `None` when no custom returner
/// has that name, else what its `returner(ret)` did.
pub fn call_returner(host: &Host, name: &str, ret: &Value) -> Option<Result<(), String>> {
    if !module_dirs(&host.opts).has_kind("returners") {
        return None;
    }
    let exec = host.exec.clone();
    let py = python_host(&host.opts, || exec.list_functions())?;
    let d = dunders(&host.opts, &host.grains, &host.pillar, host.test_mode());
    let inventory = match py.inventory(&d, call_timeout(&host.opts)) {
        Ok(inv) => inv,
        Err(e) => return Some(Err(format!("custom returners are not loaded: {e}"))),
    };
    let loaded = inventory
        .returners
        .get(name)
        .is_some_and(|funs| funs.iter().any(|f| f == "returner"));
    if !loaded {
        return None;
    }
    let fun = format!("{name}.returner");
    let call = Call::Returner { fun: &fun, ret };
    Some(
        py.call(&call, &d, &HostCallback(host), call_timeout(&host.opts))
            .map(|_| ())
            .map_err(|e| error_text(&e)),
    )
}

/// Merges the `_grains` functions' grains into `host`'s grains (at start,
/// `reload_grains`, `saltutil.refresh_grains`); their `__salt__` calls
/// reach the host's functions.
pub fn refresh_custom_grains(host: &mut Host) {
    let extra = grains_with(&host.opts, &host.grains, &HostCallback(host));
    if let Value::Object(g) = &mut host.grains {
        g.extend(extra);
    }
}

/// The `_grains` functions' grains for a minion with options `opts` and
/// core grains `grains` (the minion daemon, which has no host yet: their
/// `__salt__` calls are not served there).
pub fn custom_grains(opts: &Value, grains: &Value) -> Map {
    grains_with(opts, grains, &halite_python::NoCallback)
}

fn grains_with(opts: &Value, grains: &Value, callback: &dyn Callback) -> Map {
    let Some(py) = python_host(opts, || crate::table::exec_modules().list_functions()) else {
        return Map::new();
    };
    if !py.dirs().has_kind("grains") {
        return Map::new();
    }
    let d = dunders(opts, grains, &Value::Object(Map::new()), false);
    match py.call(&Call::Grains, &d, callback, call_timeout(opts)) {
        Ok(Value::Object(extra)) => extra,
        Ok(other) => {
            tracing::warn!("custom grains returned {other}, not a dict");
            Map::new()
        }
        Err(e) => {
            tracing::error!("custom grains failed: {e}");
            Map::new()
        }
    }
}

/// Runs the `#!py` renderer or a custom renderer of `_renderers` over
/// `input` for a template of `host`; `None` when there is no such renderer.
pub fn render(
    host: &Host,
    renderer: &str,
    input: &Value,
    ctx: &halite_render::RenderContext,
) -> Option<Result<Value, String>> {
    let exec = host.exec.clone();
    let builtin = matches!(renderer, "py" | "pyobjects");
    let py = if builtin {
        // `#!py` needs no custom directory: a host of its own when none exists.
        python_host(&host.opts, || exec.list_functions())
            .unwrap_or_else(|| py_only_host(&host.opts, host.exec.list_functions()))
    } else {
        python_host(&host.opts, || exec.list_functions())?
    };
    let mut d = dunders(&ctx.opts, &ctx.grains, &ctx.pillar, host.test_mode());
    d.saltenv = Some(ctx.saltenv.clone());
    if !builtin {
        let inv = py.inventory(&d, call_timeout(&host.opts)).ok()?;
        if !inv.renderers.contains_key(renderer) {
            return None;
        }
    }
    let text = match input {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let call = Call::Render {
        renderer,
        text: &text,
        path: &ctx.source_path,
        sls: &ctx.sls,
    };
    Some(
        py.call(&call, &d, &RenderCallback(host), call_timeout(&host.opts))
            .map_err(|e| error_text(&e)),
    )
}

/// The Python host of a minion without custom directories, for `#!py`.
fn py_only_host(opts: &Value, native: Vec<String>) -> Arc<PythonHost> {
    let key = (python_bin(opts), ModuleDirs::default(), fallback_on(opts));
    let Ok(mut hosts) = hosts().lock() else {
        return Arc::new(new_host(&key, native));
    };
    if let Some((_, h)) = hosts.iter().find(|(k, _)| *k == key) {
        return h.clone();
    }
    let host = Arc::new(new_host(&key, native));
    hosts.push((key, host.clone()));
    host
}

/// Salt's text for `fun` not being available: the `__virtual__` reason
/// when a custom module of that name declined.
pub fn missing_text(opts: &Value, fun: &str) -> String {
    let dirs = module_dirs(opts);
    let key = (python_bin(opts), dirs, fallback_on(opts));
    let found = hosts()
        .lock()
        .ok()
        .and_then(|h| h.iter().find(|(k, _)| *k == key).map(|(_, h)| h.clone()));
    let inv = found.and_then(|py| py.inventory(&Dunders::default(), call_timeout(opts)).ok());
    match inv {
        Some(inv) => inv.missing("modules", fun),
        None => format!("'{fun}' is not available."),
    }
}

/// `__salt__` calls of a Python function on a [`Host`].
struct HostCallback<'a>(&'a Host);

impl Callback for HostCallback<'_> {
    fn salt_call(&self, fun: &str, args: &[Value], kwargs: &Map) -> Result<Value, String> {
        let args = Args {
            positional: args.to_vec(),
            kwargs: kwargs.clone(),
        };
        self.0.call(fun, &args).map_err(|e| e.to_string())
    }
    fn has(&self, fun: &str) -> bool {
        crate::salt_fallback::has(self.0, fun)
    }
}

/// `__salt__` calls of a Python renderer (`#!py`, `_renderers`): pillar
/// functions unmasked, as Salt renders with masking off.
struct RenderCallback<'a>(&'a Host);

impl Callback for RenderCallback<'_> {
    fn salt_call(&self, fun: &str, args: &[Value], kwargs: &Map) -> Result<Value, String> {
        let mut kwargs = kwargs.clone();
        crate::exec::pillar::unmask_for_render(fun, &mut kwargs);
        HostCallback(self.0).salt_call(fun, args, &kwargs)
    }
    fn has(&self, fun: &str) -> bool {
        HostCallback(self.0).has(fun)
    }
}

/// `__salt__`, `__states__` and `__running__` of a Python state on the
/// engine's environment, in the state's test mode.
struct EnvCallback<'a> {
    env: &'a dyn StateEnv,
    test: bool,
}

impl Callback for EnvCallback<'_> {
    fn salt_call(&self, fun: &str, args: &[Value], kwargs: &Map) -> Result<Value, String> {
        self.env.call_function(fun, args, kwargs)
    }
    fn has(&self, fun: &str) -> bool {
        self.env.has_function(fun)
    }
    fn state_call(&self, fun: &str, kwargs: &Map) -> Result<Value, String> {
        self.env
            .call_state(fun, kwargs, self.test)
            .ok_or_else(|| format!("'{fun}' is not available."))
    }
    fn running(&self) -> Value {
        self.env
            .running()
            .unwrap_or_else(|| Value::Object(Map::new()))
    }
}

/// The failure text of a Python error: the exception's message for
/// Salt's own exceptions (as `Error running 'm.f': <message>`), the
/// traceback's last lines for any other.
fn error_text(e: &PythonError) -> String {
    match e {
        PythonError::Raised { kind, message, .. }
            if kind == "CommandExecutionError" || kind == "SaltInvocationError" =>
        {
            message.clone()
        }
        other => other.traceback_tail().unwrap_or_else(|| other.to_string()),
    }
}

/// A custom execution module: its functions run in the Python worker.
struct PyExec {
    name: &'static str,
    functions: Vec<&'static str>,
    py: Arc<PythonHost>,
}

impl ExecModule for PyExec {
    fn name(&self) -> &'static str {
        self.name
    }
    fn functions(&self) -> Vec<&'static str> {
        self.functions.clone()
    }
    fn call(&self, fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
        let full = format!("{}.{fun}", self.name);
        if !self.functions.contains(&fun) {
            return Err(ExecError::NotAvailable(full));
        }
        let kwargs: Map = args
            .kwargs
            .iter()
            .filter(|(k, _)| !k.starts_with("__pub_"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let call = Call::Exec {
            fun: &full,
            args: &args.positional,
            kwargs: &kwargs,
        };
        let d = dunders(&host.opts, &host.grains, &host.pillar, host.test_mode());
        self.py
            .call(&call, &d, &HostCallback(host), call_timeout(&host.opts))
            .map_err(|e| match &e {
                PythonError::Raised { kind, message, .. } if kind == "SaltInvocationError" => {
                    ExecError::Invocation(message.clone())
                }
                _ => ExecError::Execution(error_text(&e)),
            })
    }
}

/// A custom state module: its functions run in the Python worker with
/// the low chunk as arguments, `__opts__['test']` and `__low__`.
struct PyState {
    name: &'static str,
    functions: Vec<&'static str>,
    py: Arc<PythonHost>,
}

impl StateModule for PyState {
    fn name(&self) -> &'static str {
        self.name
    }
    fn functions(&self) -> Vec<&'static str> {
        self.functions.clone()
    }
    fn call(&self, fun: &str, call: &StateCall<'_>) -> Result<StateResult, StateError> {
        let full = format!("{}.{fun}", self.name);
        // Salt's own low chunk.
        let low: Map = call
            .chunk
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let env = call.env;
        let d = dunders(env.opts(), env.grains(), env.pillar(), call.test);
        let request = Call::State {
            fun: &full,
            low: &low,
            sfun: call.sfun,
            reqs: call.reqs,
        };
        let ret = match self.py.call(
            &request,
            &d,
            &EnvCallback {
                env,
                test: call.test,
            },
            call_timeout(env.opts()),
        ) {
            Ok(ret) => ret,
            Err(e) => {
                let mut r = StateResult::new(call.name(), Some(false));
                r.comment = format!("An exception occurred in this state: {}", error_text(&e));
                return Ok(r);
            }
        };
        state_result(call.name(), ret)
    }
}

/// A state function's returned dict as a [`StateResult`]; Salt's text
/// when it is not one.
fn state_result(name: &str, ret: Value) -> Result<StateResult, StateError> {
    let Value::Object(mut map) = ret else {
        return Err(StateError::Other(format!(
            "The state function returned {ret}, not a dict with name, changes, result and comment"
        )));
    };
    let missing: Vec<&str> = ["name", "changes", "result", "comment"]
        .into_iter()
        .filter(|k| !map.contains_key(*k))
        .collect();
    if !missing.is_empty() {
        return Err(StateError::Other(format!(
            "The following keys were not present in the state return: {}",
            missing.join(",")
        )));
    }
    let mut r = StateResult::new(
        map.remove("name")
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_else(|| name.to_string()),
        map.remove("result").and_then(|v| v.as_bool()),
    );
    r.changes = match map.remove("changes") {
        Some(Value::Object(c)) => c,
        _ => Map::new(),
    };
    r.comment = match map.remove("comment") {
        Some(Value::String(s)) => s,
        Some(Value::Array(lines)) => lines
            .iter()
            .map(crate::exec::py_str)
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Value::Null) | None => String::new(),
        Some(other) => crate::exec::py_str(&other),
    };
    r.extra = map;
    Ok(r)
}
