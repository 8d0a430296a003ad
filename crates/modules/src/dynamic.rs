//! Salt's dynamic modules around a state run: the automatic
//! `saltutil.sync_all` before a highstate (`autoload_dynamic_modules`,
//! Salt's `BaseHighState.load_dynamic`), `state.sls ... sync_mods=`, and,
//! on a master compiling for a minion, the names of the minion's custom
//! execution functions, so `salt['mymod.fun']` in a template reaches the
//! minion that loaded it.
//!
//! Where the host runs its own jobs (`halite-call`, a masterless minion)
//! the synced modules are loaded into its registries at once. A minion
//! whose master compiles its run syncs named SLS' `sync_mods=` before
//! asking for the bundle ([`before_master_compile`]) and a highstate's
//! saltenvs, which the master's top file render names in the bundle:
//! before asking, the saltenvs its last highstate matched, and after it
//! only when the top file now matches others ([`after_master_compile`],
//! asking again when that sync changed anything), so that one highstate
//! is compiled once; it keeps the final word on which modules load
//! (`__virtual__`).

use std::sync::Arc;

use halite_state::{Map, Value};

use crate::exec::{Args, ExecError, ExecModule};
use crate::Host;

/// The kinds of custom modules a master's compile for a minion can see:
/// its execution modules (a template's `salt['mymod.fun']`, through
/// [`learn_remote_functions`]), its grains (templates, the top file,
/// pillar) and the utils those modules import. Custom states are not
/// among them: the compile keeps their requisites as written and the
/// minion, which loads them, reconciles them.
const COMPILE_KINDS: [&str; 3] = ["modules", "grains", "utils"];

/// Salt's `load_dynamic`: before a highstate whose top file matched
/// saltenvs `envs`, `saltutil.sync_all(envs, refresh=False)` when the
/// minion's `autoload_dynamic_modules` is on (Salt's default), then the
/// host's registries see what was synced. Whether the sync copied or
/// removed a module of the [`COMPILE_KINDS`] (a compile made before it
/// may have missed it, or used one that is gone); the other kinds
/// (custom states, returners, renderers...) a master's compile never
/// reads from the minion, so they never make it compile again.
pub fn load_dynamic(host: &mut Host, envs: &[String]) -> bool {
    if host.exec.is_remote() {
        // A master compiling for a minion: the minion syncs the saltenvs
        // the master names in the bundle ([`after_master_compile`]).
        learn_remote_functions(host);
        return false;
    }
    let own_roots = host.opt("file_client").and_then(Value::as_str) == Some("local")
        || host.opt("local").is_some_and(halite_state::truthy);
    if own_roots && !crate::python::module_dirs(&host.opts).has_any() {
        return false;
    }
    if !autoload(host) {
        return false;
    }
    let mut kwargs = Map::new();
    kwargs.insert(
        "saltenv".into(),
        Value::Array(envs.iter().map(|e| Value::from(e.as_str())).collect()),
    );
    kwargs.insert("refresh".into(), Value::Bool(false));
    let removals = COMPILE_KINDS.map(crate::exec::saltutil::removals);
    let synced = host.call(
        "saltutil.sync_all",
        &Args {
            positional: Vec::new(),
            kwargs,
        },
    );
    match synced {
        Ok(ret) => {
            let grains = has_synced(&ret, "grains");
            refresh(host, grains);
            // Only what a compile made before the sync could have used:
            // a module copied or removed (a removed one it may have used).
            COMPILE_KINDS.iter().any(|k| has_synced(&ret, k))
                || COMPILE_KINDS.map(crate::exec::saltutil::removals) != removals
        }
        Err(e) => {
            tracing::warn!("the automatic sync before the highstate failed: {e}");
            false
        }
    }
}

/// The minion's `autoload_dynamic_modules` (Salt's default, True, when unset).
fn autoload(host: &Host) -> bool {
    host.call(
        "config.get",
        &Args {
            positional: vec![Value::from("autoload_dynamic_modules")],
            kwargs: Map::new(),
        },
    )
    .ok()
    .is_none_or(|v| v.is_null() || v == "" || halite_state::truthy(&v))
}

/// On a minion whose master compiles its run, before a warm highstate
/// (issue 25, one round trip): instead of [`before_master_compile`]'s
/// sync (a listing per kind of module, each a round trip, before the
/// bundle can even be asked for), what to tell the master it synced: the
/// saltenvs its last highstate matched (`last_saltenvs`) and the
/// [`crate::exec::saltutil::ModulesDigest`] of what it holds. The master
/// compares it with a sync's result from its file server and answers
/// "unchanged" with the bundle, or "sync first"; the caller then syncs
/// with [`load_dynamic`] and asks again, so a changed module is still
/// synced before the render that uses it. `None` (sync before asking, as
/// before) for another function, a first highstate (its saltenvs are not
/// known yet) and `autoload_dynamic_modules: False` (no sync at all).
pub fn synced_for_master(
    host: &Host,
    fun: &str,
    args: &Args,
    last_saltenvs: Option<&[String]>,
) -> Option<(Vec<String>, String)> {
    if !is_highstate(fun, args) || host.exec.is_remote() {
        return None;
    }
    let envs = last_saltenvs.filter(|envs| !envs.is_empty())?;
    if !autoload(host) {
        return None;
    }
    Some((envs.to_vec(), crate::exec::saltutil::synced_digest(host)))
}

/// Whether `state.<fun>` with `args` is a highstate (the top file
/// chooses the SLS): `highstate`/`top`, or `apply`/`test` without mods.
fn is_highstate(fun: &str, args: &Args) -> bool {
    let f = fun.strip_prefix("state.").unwrap_or(fun);
    let mods_given = args.get(0, "mods").is_some_and(|m| match m {
        Value::String(s) => !s.trim().is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Null => false,
        _ => true,
    });
    match f {
        "highstate" | "top" => true,
        "apply" | "test" => !mods_given,
        _ => false,
    }
}

/// On a minion whose master compiles its state run: the sync Salt does
/// before rendering named SLS (the kinds of `sync_mods=`), done here
/// before asking for the bundle (a sync from inside the master's compile
/// would have the minion ask the master for files while the master waits
/// on the minion). Only the master's render of the top file knows a
/// highstate's saltenvs: a highstate syncs `last_saltenvs`, those its last
/// highstate matched (named in that bundle), or before any the job's
/// `saltenv=` or `base`, so the compile sees a module changed since
/// without a second compile; [`after_master_compile`] syncs the matched
/// saltenvs when they are others (then the result is Salt's: its sync
/// removes what those saltenvs do not have). Returns the saltenvs a
/// highstate synced.
pub fn before_master_compile(
    host: &mut Host,
    fun: &str,
    args: &Args,
    last_saltenvs: Option<&[String]>,
) -> Option<Vec<String>> {
    let f = fun.strip_prefix("state.").unwrap_or(fun);
    if is_highstate(fun, args) {
        let envs = match last_saltenvs.filter(|envs| !envs.is_empty()) {
            Some(envs) => envs.to_vec(),
            None => vec![args
                .kwargs
                .get("saltenv")
                .map(crate::exec::py_str)
                .unwrap_or_else(|| "base".to_string())],
        };
        load_dynamic(host, &envs);
        return Some(envs);
    }
    if !matches!(f, "sls" | "apply" | "test") {
        return None;
    }
    let env = args
        .kwargs
        .get("saltenv")
        .and_then(Value::as_str)
        .unwrap_or("base")
        .to_string();
    if let Some(grains) = sync_mods(host, args, &env) {
        refresh(host, grains);
    }
    None
}

/// On a minion whose master compiled its highstate: Salt's
/// `load_dynamic` over the saltenvs the top file matched, which the
/// master names in the bundle (`saltenvs`). A master too old to name
/// them (`None`) leaves the minion to read the top file itself, through
/// the master's files. Saltenvs synced just before the compile
/// (`synced_before`, [`before_master_compile`]) are not synced again.
/// True when the sync copied a module: the compile, made before, may have
/// missed it (a template calling it, a custom grain), so the caller asks
/// for the bundle again.
pub fn after_master_compile(
    host: &mut Host,
    fun: &str,
    args: &Args,
    saltenvs: Option<&[String]>,
    synced_before: Option<&[String]>,
) -> bool {
    if !is_highstate(fun, args) {
        return false;
    }
    let envs: Vec<String> = match saltenvs {
        Some(envs) => envs.to_vec(),
        None => {
            let only = args.kwargs.get("saltenv").map(crate::exec::py_str);
            match crate::exec::state::top_matches(host, only.as_deref()) {
                Ok(matches) => matches.keys().cloned().collect(),
                // The master's compile of the same top file reports them.
                Err(errors) => {
                    tracing::warn!(
                        ?errors,
                        "the top file did not render before the highstate; no custom modules synced"
                    );
                    return false;
                }
            }
        }
    };
    let sorted = |envs: &[String]| {
        let mut envs = envs.to_vec();
        envs.sort_unstable();
        envs.dedup();
        envs
    };
    if synced_before.is_some_and(|before| sorted(before) == sorted(&envs)) {
        return false;
    }
    !envs.is_empty() && load_dynamic(host, &envs)
}

/// `state.sls`/`state.apply <mods>`'s `sync_mods=` (a list, a comma
/// string, `True` or `all`): `saltutil.sync_<kind>` of each kind in
/// `saltenv` before the SLS render, as Salt 3008 does. Unknown kinds are
/// logged and skipped, as Salt's warning. `None` when nothing was asked;
/// else whether grains were synced, for [`refresh`].
pub fn sync_mods(host: &Host, args: &Args, saltenv: &str) -> Option<bool> {
    let kinds: Vec<String> = match args.kwargs.get("sync_mods") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => return None,
        Some(Value::Bool(true)) => vec!["all".into()],
        Some(Value::Array(a)) => a.iter().map(crate::exec::py_str).collect(),
        Some(other) => crate::exec::py_str(other)
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    };
    let kinds = if kinds.iter().any(|k| k == "all") {
        vec!["all".to_string()]
    } else {
        kinds
    };
    let mut grains = false;
    for kind in kinds {
        let fun = format!("saltutil.sync_{kind}");
        if !host.exec.has(&fun) {
            tracing::warn!("Invalid custom module type '{kind}', ignoring");
            continue;
        }
        let mut kwargs = Map::new();
        kwargs.insert("saltenv".into(), Value::from(saltenv));
        match host.call(
            &fun,
            &Args {
                positional: Vec::new(),
                kwargs,
            },
        ) {
            Ok(ret) => grains |= kind == "grains" || (kind == "all" && has_synced(&ret, "grains")),
            Err(e) => tracing::warn!("{fun} before the state run failed: {e}"),
        }
    }
    Some(grains)
}

fn has_synced(ret: &Value, kind: &str) -> bool {
    ret.get(kind)
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

/// Makes `host`'s registries see the modules synced for it: loaded here
/// when the host runs its own jobs (and its custom grains merged again
/// when `grains` were synced); on a master, the minion's custom function
/// names ([`learn_remote_functions`]).
pub fn refresh(host: &mut Host, grains: bool) {
    if host.exec.is_remote() {
        learn_remote_functions(host);
        return;
    }
    crate::python::add_custom_modules(host);
    if grains {
        crate::python::refresh_custom_grains(host);
    }
}

/// On a master compiling for a minion: when some saltenv of the file
/// server holds `_modules`, asks the minion for its functions
/// (`sys.list_functions`) and adds the modules the master does not have
/// as rows whose calls go to the minion, so a template's
/// `salt['mymod.fun']` (and `'mymod.fun' in salt`) sees what the minion
/// loaded. Without `_modules` anywhere this costs nothing.
pub fn learn_remote_functions(host: &mut Host) {
    if !host.exec.is_remote() {
        return;
    }
    let any_custom = host.files.envs().iter().any(|env| {
        host.files
            .list_files(env, "_modules")
            .is_ok_and(|files| !files.is_empty())
    });
    if !any_custom {
        return;
    }
    // The master answers sys.list_functions itself: ask the minion.
    let listed = match host
        .exec
        .call_remote("sys.list_functions", &Args::default())
    {
        None => return,
        Some(Ok(Value::Array(names))) => names,
        Some(Ok(other)) => {
            tracing::warn!(answer = %other, "the minion's sys.list_functions is not a list");
            return;
        }
        Some(Err(e)) => {
            tracing::warn!("cannot list the minion's functions: {e}");
            return;
        }
    };
    let mut by_module: indexmap::IndexMap<String, Vec<&'static str>> = Default::default();
    for name in listed.iter().filter_map(Value::as_str) {
        let Some((m, f)) = name.split_once('.') else {
            continue;
        };
        if host.exec.functions_of(m).is_some() {
            continue;
        }
        by_module
            .entry(m.to_string())
            .or_default()
            .push(crate::python::intern(f));
    }
    for (name, functions) in by_module {
        host.exec.register(Arc::new(OnTheMinion {
            name: crate::python::intern(&name),
            functions,
        }));
    }
}

/// A minion's custom execution module, as a master's registry sees it:
/// names only; its calls go to the minion (the registry's remote).
struct OnTheMinion {
    name: &'static str,
    functions: Vec<&'static str>,
}

impl ExecModule for OnTheMinion {
    fn name(&self) -> &'static str {
        self.name
    }
    fn functions(&self) -> Vec<&'static str> {
        self.functions.clone()
    }
    fn call(&self, fun: &str, _args: &Args, _host: &Host) -> Result<Value, ExecError> {
        // Only reached without a remote: the function lives on the minion.
        Err(ExecError::NotAvailable(format!("{}.{fun}", self.name)))
    }
}
