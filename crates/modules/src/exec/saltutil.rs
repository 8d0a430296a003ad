//! Salt's `saltutil.sync_*`: copies the custom modules of the file
//! server's `_modules`, `_states`, `_grains`, `_renderers` and `_utils`
//! (every saltenv, or the one asked) into `<cachedir>/extmods/<kind>/`,
//! where the Python host loads them ([`crate::python`]). The file client
//! is the master's for a minion, the local roots for `--local`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use halite_state::Value;

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "saltutil",
    functions: &[
        ExecFunction::new("sync_modules", |a, h| sync_one("modules", a, h)),
        ExecFunction::new("sync_states", |a, h| sync_one("states", a, h)),
        ExecFunction::new("sync_grains", |a, h| sync_one("grains", a, h)),
        ExecFunction::new("sync_renderers", |a, h| sync_one("renderers", a, h)),
        ExecFunction::new("sync_utils", |a, h| sync_one("utils", a, h)),
        ExecFunction::new("sync_returners", |a, h| sync_one("returners", a, h)),
        ExecFunction::new("sync_all", sync_all),
        ExecFunction::new("running", running),
        ExecFunction::new("kill_job", |a, h| signal_named(9, a, h)),
        ExecFunction::new("term_job", |a, h| signal_named(15, a, h)),
        ExecFunction::new("signal_job", signal_job),
        ExecFunction::new("kill_all_jobs", |a, h| signal_all(9, a, h)),
        ExecFunction::new("term_all_jobs", |a, h| signal_all(15, a, h)),
        ExecFunction::new("is_running", is_running),
        ExecFunction::new("refresh_modules", refresh_modules),
        ExecFunction::new("clear_cache", clear_cache),
    ],
};

/// The keys of Salt 3008's `sync_all` return, in its order; halite syncs
/// the five kinds of [`crate::python::KINDS`], the others stay empty.
const SYNC_ALL_KEYS: &[&str] = &[
    "tops",
    "clouds",
    "beacons",
    "modules",
    "states",
    "sdb",
    "grains",
    "renderers",
    "returners",
    "output",
    "utils",
    "log_handlers",
    "executors",
    "proxymodules",
    "engines",
    "thorium",
    "serializers",
    "matchers",
    "resources",
    "pillar",
    "wrapper",
];

/// `saltutil.running`: the jobs this minion runs now (itself included,
/// as Salt's proc files list it), each as its job's load with the pid.
/// Without a running minion (`halite-call --local`) there are none.
fn running(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    let jobs = crate::minion_control::for_host(host)
        .map(|c| c.running())
        .unwrap_or_default();
    Ok(Value::Array(jobs))
}

/// `saltutil.signal_job <jid> <signal>`.
fn signal_job(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let signal = args
        .get(1, "signal")
        .and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))
        .and_then(|s| i32::try_from(s).ok())
        .ok_or_else(|| {
            ExecError::Invocation(
                "signal_job() missing 1 required positional argument: 'sig' (a signal number such as 15)"
                    .into(),
            )
        })?;
    signal_named(signal, args, host)
}

/// `saltutil.kill_job <jid>` (9), `term_job <jid>` (15), `signal_job`:
/// Salt's "Signal N sent to job JID at pid PID", or `""` when the minion
/// runs no such job. The job's commands (their process groups) get the
/// signal and its waits end; the job's own return then says it was
/// stopped by that signal.
fn signal_named(signal: i32, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let jid = args.require_str(0, "jid", "signal_job")?;
    let Some(control) = crate::minion_control::for_host(host) else {
        return Ok(Value::from(""));
    };
    if !control.signal_job(&jid, signal) {
        return Ok(Value::from(""));
    }
    Ok(Value::from(format!(
        "Signal {signal} sent to job {jid} at pid {}",
        std::process::id()
    )))
}

/// `saltutil.is_running <fun>`: the running jobs whose function matches
/// the glob `fun` (Salt's fnmatch), as `running` shows them.
fn is_running(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let pattern = args.require_str(0, "fun", "is_running")?;
    let jobs = crate::minion_control::for_host(host)
        .map(|c| c.running())
        .unwrap_or_default();
    Ok(Value::Array(
        jobs.into_iter()
            .filter(|j| {
                j.get("fun")
                    .and_then(Value::as_str)
                    .is_some_and(|f| halite_state::fnmatch(f, &pattern))
            })
            .collect(),
    ))
}

/// `saltutil.kill_all_jobs` (9) / `term_all_jobs` (15): the signal to
/// every running job but this one; Salt's list of `signal_job` answers.
fn signal_all(signal: i32, _args: &Args, host: &Host) -> Result<Value, ExecError> {
    let Some(control) = crate::minion_control::for_host(host) else {
        return Ok(Value::Array(Vec::new()));
    };
    let own = host.opt("jid").and_then(Value::as_str).unwrap_or_default();
    let mut said = Vec::new();
    for job in control.running() {
        let Some(jid) = job.get("jid").and_then(Value::as_str) else {
            continue;
        };
        if jid != own && control.signal_job(jid, signal) {
            said.push(Value::from(format!(
                "Signal {signal} sent to job {jid} at pid {}",
                std::process::id()
            )));
        }
    }
    Ok(Value::Array(said))
}

/// `saltutil.refresh_modules`: loaded Python modules read their
/// directories again (halite's own modules are compiled in); True.
fn refresh_modules(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    crate::python::reload_all();
    Ok(Value::Bool(true))
}

/// What `clear_cache` keeps in the cachedir: returns the master has not
/// acknowledged (`returns/`), the replay guard (`publications`) and the
/// state-run lock. Salt's removes every file; these are halite's
/// delivery and safety records, not caches.
const CACHE_KEPT: &[&str] = &["returns", "publications", crate::state_lock::LOCK_FILE];

/// `saltutil.clear_cache`: removes the files of the minion's cachedir
/// (directories stay, as Salt's), except [`CACHE_KEPT`]; True, or False
/// when a file could not be removed (logged, as Salt's).
fn clear_cache(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    let cachedir = host
        .opt("cachedir")
        .and_then(Value::as_str)
        .unwrap_or("/var/cache/halite/minion");
    let root = Path::new(cachedir);
    let Ok(top) = std::fs::read_dir(root) else {
        return Ok(Value::Bool(true));
    };
    let mut ok = true;
    for entry in top.flatten() {
        let name = entry.file_name();
        if CACHE_KEPT.iter().any(|k| name.to_str() == Some(*k)) {
            continue;
        }
        ok &= remove_files(&entry.path());
    }
    Ok(Value::Bool(ok))
}

/// Removes `path` if a file, or every file below it if a directory
/// (symlinks are removed, never followed); false when one resisted.
fn remove_files(path: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return true;
    };
    if !meta.is_dir() {
        return match std::fs::remove_file(path) {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(path = %path.display(), error = %e, "Attempt to clear cache with saltutil.clear_cache FAILED");
                false
            }
        };
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return true;
    };
    // Every file is tried, even after one resisted.
    let mut ok = true;
    for entry in entries.flatten() {
        ok &= remove_files(&entry.path());
    }
    ok
}

/// `saltutil.sync_<kind> [saltenv=...]`: the list of synced modules
/// (`modules.mymod`) that were new or changed.
fn sync_one(kind: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let envs = saltenvs(args, host);
    let listed = envs.iter().map(|env| list_kind(kind, env, host)).collect();
    let synced = sync_kind(kind, &envs, listed, host)?;
    // Nothing new: the loaded modules stand (a highstate syncs every run).
    if !synced.is_empty() {
        crate::python::reload_all();
    }
    Ok(Value::from(synced))
}

/// `saltutil.sync_all [saltenv=...]`: every kind, as Salt's dict.
fn sync_all(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let envs = saltenvs(args, host);
    let kinds: Vec<&str> = SYNC_ALL_KEYS
        .iter()
        .copied()
        .filter(|key| crate::python::KINDS.contains(key))
        .collect();
    let mut listed = kinds
        .iter()
        .copied()
        .zip(list_at_once(&kinds, &envs, host))
        .collect::<std::collections::HashMap<_, _>>();
    let mut out = halite_state::Map::new();
    let mut any = false;
    for key in SYNC_ALL_KEYS {
        let synced = if crate::python::KINDS.contains(key) {
            let kind_listed = listed
                .remove(key)
                .unwrap_or_else(|| envs.iter().map(|env| list_kind(key, env, host)).collect());
            sync_kind(key, &envs, kind_listed, host)?
        } else {
            Vec::new()
        };
        any |= !synced.is_empty();
        out.insert((*key).to_string(), Value::from(synced));
    }
    if any {
        crate::python::reload_all();
    }
    Ok(Value::Object(out))
}

/// The saltenvs to sync: `saltenv=` (a string or list), else every one
/// the file client serves.
fn saltenvs(args: &Args, host: &Host) -> Vec<String> {
    match args.get(0, "saltenv") {
        Some(Value::String(s)) => s.split(',').map(|e| e.trim().to_string()).collect(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect(),
        _ => host.files.envs(),
    }
}

/// `<cachedir>/extmods/<kind>` of `host`.
fn extmods_dir(host: &Host, kind: &str) -> PathBuf {
    let cachedir = host
        .opt("cachedir")
        .and_then(Value::as_str)
        .unwrap_or("/var/cache/halite/minion");
    Path::new(cachedir).join("extmods").join(kind)
}

/// What `_<kind>/` of one saltenv holds, or why it cannot be listed.
type Listed = Result<Vec<String>, ExecError>;

/// The files of `_<kind>/` in saltenv `env`.
fn list_kind(kind: &str, env: &str, host: &Host) -> Listed {
    let prefix = format!("_{kind}");
    host.files
        .list_files(env, &prefix)
        .map_err(|e| ExecError::Execution(format!("cannot list {prefix} of saltenv {env}: {e}")))
}

/// Every `_<kind>/` of `kinds` in every saltenv of `envs`, listed at once:
/// per kind (in `kinds`' order) the listing of each env (in `envs`' order).
///
/// Concurrently (issue 25, session 19): on a minion each listing is a
/// round trip to the master, and a highstate's sync (Salt's
/// `autoload_dynamic_modules`) asked for six of them one after the other
/// before the job could even ask for its bundle. A swarm's job threads
/// spent most of a fleet run waiting there (`gdb` during a warm apply: 26
/// of 64 job threads in `RemoteFileClient::list`), while both the master
/// and the swarm had idle CPU. The requests and their answers are the
/// same; only their waits overlap. A thread that cannot be started lists
/// on this one.
fn list_at_once(kinds: &[&str], envs: &[String], host: &Host) -> Vec<Vec<Listed>> {
    let pairs: Vec<(&str, &str)> = kinds
        .iter()
        .flat_map(|kind| envs.iter().map(move |env| (*kind, env.as_str())))
        .collect();
    if pairs.len() < 2 {
        return kinds
            .iter()
            .map(|kind| envs.iter().map(|env| list_kind(kind, env, host)).collect())
            .collect();
    }
    let mut flat: Vec<Listed> = std::thread::scope(|scope| {
        let started: Vec<_> = pairs
            .iter()
            .map(|&(kind, env)| {
                std::thread::Builder::new()
                    .name("sync-list".into())
                    .spawn_scoped(scope, move || list_kind(kind, env, host))
                    .map_err(|_| (kind, env))
            })
            .collect();
        started
            .into_iter()
            .map(|handle| match handle {
                Ok(h) => h.join().unwrap_or_else(|_| {
                    Err(ExecError::Execution(
                        "listing modules to sync panicked".into(),
                    ))
                }),
                Err((kind, env)) => list_kind(kind, env, host),
            })
            .collect()
    });
    let mut out = Vec::with_capacity(kinds.len());
    for _ in kinds {
        let rest = flat.split_off(envs.len().min(flat.len()));
        out.push(std::mem::replace(&mut flat, rest));
    }
    out
}

/// Copies `_<kind>/` of `envs` (`listed`: each env's listing, in order)
/// into the extmods directory (the first env holding a path wins, as
/// Salt), removes files no env has any more, and returns
/// `<kind>.<module>` for each module whose files changed.
fn sync_kind(
    kind: &str,
    envs: &[String],
    listed: Vec<Listed>,
    host: &Host,
) -> Result<Vec<String>, ExecError> {
    let dest = extmods_dir(host, kind);
    let mut wanted: BTreeSet<String> = BTreeSet::new();
    let mut changed: BTreeSet<String> = BTreeSet::new();
    for (env, files) in envs.iter().zip(listed) {
        let files = files?;
        for file in files {
            let Some(rel) = module_rel(kind, &file) else {
                continue;
            };
            if !wanted.insert(rel.to_string()) {
                continue;
            }
            let Some(src) = host
                .files
                .cache_file(&file, env)
                .map_err(|e| ExecError::Execution(format!("cannot fetch salt://{file}: {e}")))?
            else {
                continue;
            };
            let target = dest.join(rel);
            let new = std::fs::read(&src).map_err(|e| io_err(&src, e))?;
            if std::fs::read(&target).ok().as_deref() == Some(new.as_slice()) {
                continue;
            }
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(|e| io_err(parent, e))?;
            }
            std::fs::write(&target, &new).map_err(|e| io_err(&target, e))?;
            changed.insert(module_name(kind, rel));
        }
    }
    if remove_stale(&dest, &wanted) {
        if let Some(count) = crate::python::KINDS
            .iter()
            .position(|k| *k == kind)
            .and_then(|i| REMOVALS.get(i))
        {
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        crate::python::reload_all();
    }
    Ok(changed.into_iter().collect())
}

/// The path below `_<kind>/` of the file server's `file` when a sync of
/// `kind` copies it: `None` outside `_<kind>/`, for `..` or empty parts,
/// and for bytecode caches (Salt's sync skips them too).
fn module_rel<'a>(kind: &str, file: &'a str) -> Option<&'a str> {
    let rel = file
        .strip_prefix('_')?
        .strip_prefix(kind)?
        .strip_prefix('/')?;
    is_module_path(rel).then_some(rel)
}

/// Whether `rel` (a path below `_<kind>/`, or below `extmods/<kind>/`)
/// is a module file a sync keeps.
fn is_module_path(rel: &str) -> bool {
    !rel.split('/')
        .any(|part| part == ".." || part.is_empty() || part == "__pycache__")
        && !rel.ends_with(".pyc")
}

/// A digest of a set of custom modules: per kind of
/// [`crate::python::KINDS`], each module file's path below `_<kind>/` and
/// the sha256 of its content (issue 25, one round trip before a warm
/// highstate). The minion takes it of what its extension-module
/// directories hold ([`synced_digest`]); the master of what a sync of the
/// same saltenvs would copy from its file server ([`served_digest`]). Equal
/// digests mean the sync would copy and remove nothing, so the minion's
/// bundle request carries it instead of the minion listing every kind
/// first; both sides build it here, so they cannot drift apart.
#[derive(Debug, Default)]
pub struct ModulesDigest {
    /// (index of the kind in `KINDS`, path below `_<kind>/`) -> sha256.
    files: std::collections::BTreeMap<(usize, String), String>,
}

impl ModulesDigest {
    /// Adds `rel` of `kind` with content digest `sha256`; a kind that is
    /// not one of `KINDS` is not synced, so not counted.
    fn add(&mut self, kind: &str, rel: &str, sha256: String) {
        if let Some(k) = crate::python::KINDS.iter().position(|x| *x == kind) {
            self.files.insert((k, rel.to_string()), sha256);
        }
    }

    /// The digest: hex sha256 over every (kind, path, sha256) in order.
    pub fn finish(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        for ((kind, rel), sha256) in &self.files {
            hasher.update(crate::python::KINDS[*kind].as_bytes());
            hasher.update(b"\0");
            hasher.update(rel.as_bytes());
            hasher.update(b"\0");
            hasher.update(sha256.as_bytes());
            hasher.update(b"\n");
        }
        hex::encode(hasher.finalize())
    }
}

/// The [`ModulesDigest`] of what `host`'s extension-module directories
/// (`<cachedir>/extmods/<kind>`) hold now: after a sync of some saltenvs,
/// exactly what that sync copied; a file changed or removed there by hand,
/// or another saltenv's sync since, gives another digest (and so a sync).
pub fn synced_digest(host: &Host) -> String {
    let mut digest = ModulesDigest::default();
    for kind in crate::python::KINDS {
        let dir = extmods_dir(host, kind);
        for entry in walkdir::WalkDir::new(&dir).into_iter().flatten() {
            if !entry.file_type().is_file() {
                continue;
            }
            let Ok(rel) = entry.path().strip_prefix(&dir) else {
                continue;
            };
            let rel = rel.to_string_lossy();
            if !is_module_path(&rel) {
                continue;
            }
            // Unreadable: a digest no master gives, so the minion syncs.
            let sha256 = crate::exec::file::meta::sha256_file(entry.path())
                .unwrap_or_else(|e| format!("unreadable: {e}"));
            digest.add(kind, &rel, sha256);
        }
    }
    digest.finish()
}

/// The [`ModulesDigest`] of what `saltutil.sync_all saltenv=<envs>` would
/// leave in the extension-module directories, from a file server: `list`
/// answers the files below a prefix of a saltenv (as `FileList`), `sha256`
/// a file's content digest (`None`: no such file, as `FileStat`). The
/// first saltenv holding a path wins, as in the sync.
pub fn served_digest<E>(
    envs: &[String],
    mut list: impl FnMut(&str, &str) -> Result<Vec<String>, E>,
    mut sha256: impl FnMut(&str, &str) -> Result<Option<String>, E>,
) -> Result<String, E> {
    let mut digest = ModulesDigest::default();
    for kind in crate::python::KINDS {
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for env in envs {
            for file in list(env, &format!("_{kind}"))? {
                let Some(rel) = module_rel(kind, &file) else {
                    continue;
                };
                if !seen.insert(rel.to_string()) {
                    continue;
                }
                if let Some(hash) = sha256(env, &file)? {
                    digest.add(kind, rel, hash);
                }
            }
        }
    }
    Ok(digest.finish())
}

/// Per kind of [`crate::python::KINDS`], how many syncs of this process
/// removed a module no saltenv has any more. Salt's sync return lists
/// only new and changed modules, so a caller that must know whether a
/// sync touched a kind (the minion after its master's compile,
/// [`crate::dynamic::load_dynamic`]) compares [`removals`] before and after.
static REMOVALS: [std::sync::atomic::AtomicU64; crate::python::KINDS.len()] =
    [const { std::sync::atomic::AtomicU64::new(0) }; crate::python::KINDS.len()];

/// How many syncs removed a module of `kind` (`modules`, `grains`...).
pub fn removals(kind: &str) -> u64 {
    crate::python::KINDS
        .iter()
        .position(|k| *k == kind)
        .and_then(|i| REMOVALS.get(i))
        .map_or(0, |c| c.load(std::sync::atomic::Ordering::Relaxed))
}

/// `modules.mymod` for `mymod.py`, `modules.pkg` for `pkg/__init__.py`.
fn module_name(kind: &str, rel: &str) -> String {
    let first = rel.split('/').next().unwrap_or(rel);
    let name = first.strip_suffix(".py").unwrap_or(first);
    format!("{kind}.{name}")
}

/// Removes files of `dest` that no saltenv provides any more (Salt's
/// `clean_dynamic_modules`); whether it removed any.
fn remove_stale(dest: &Path, wanted: &BTreeSet<String>) -> bool {
    let mut removed = false;
    for entry in walkdir::WalkDir::new(dest).into_iter().flatten() {
        if !entry.file_type().is_file() {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(dest) else {
            continue;
        };
        if !wanted.contains(&rel.to_string_lossy().to_string()) {
            tracing::info!(
                "removing {} (no saltenv has it any more)",
                entry.path().display()
            );
            removed |= std::fs::remove_file(entry.path()).is_ok();
        }
    }
    removed
}

fn io_err(path: &Path, e: std::io::Error) -> ExecError {
    ExecError::Execution(format!("{}: {e}", path.display()))
}
