//! Salt's `cp` execution module: the listings formulas call at render
//! time (`salt['cp.list_master_dirs'](prefix='users/files/user/')`) and
//! the file functions (`cp.get_file`, `cp.hash_file`...) over the file
//! client — the master's fileserver on a minion.

use std::path::{Path, PathBuf};

use halite_state::{strip_salt_url, Map, Value};

use crate::exec::file::meta::sha256_file;
use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "cp",
    functions: &[
        ExecFunction::new("list_master", |a, h| list_master(a, h, false)),
        ExecFunction::new("list_master_dirs", |a, h| list_master(a, h, true)),
        ExecFunction::new("list_states", list_states),
        ExecFunction::new("get_file", |a, h| get_file(h, a, &file_env(a, h))),
        ExecFunction::new("get_file_str", |a, h| cached_fun("get_file_str", a, h)),
        ExecFunction::new("cache_file", |a, h| cached_fun("cache_file", a, h)),
        ExecFunction::new("hash_file", |a, h| cached_fun("hash_file", a, h)),
        ExecFunction::new("get_url", |a, h| {
            crate::fetch::cp::get_url(h, a, &file_env(a, h))
        }),
    ],
};

/// The local copy of `source` (`salt://` through the file client, else a
/// local path), `None` when there is no such file.
fn cached(host: &Host, source: &str, saltenv: &str) -> Result<Option<PathBuf>, ExecError> {
    match strip_salt_url(source) {
        Some((path, env)) => host
            .files
            .cache_file(path, env.unwrap_or(saltenv))
            .map_err(|e| ExecError::Execution(e.to_string())),
        None if crate::fetch::is_remote(source) => {
            let cfg = crate::fetch::FetchConfig::from_opts(&host.opts);
            crate::fetch::cache_url(&cfg, source, saltenv, None)
                .map(Some)
                .map_err(|e| ExecError::Execution(e.to_string()))
        }
        None => {
            let p = PathBuf::from(source);
            Ok(p.is_file().then_some(p))
        }
    }
}

/// Salt's `cp.get_file`: copies `source` to `dest` (into it when `dest`
/// is a directory); the destination path, or `""` when nothing was copied.
fn get_file(host: &Host, args: &Args, saltenv: &str) -> Result<Value, ExecError> {
    let source = args.require_str(0, "path", "cp.get_file")?;
    let dest = args.require_str(1, "dest", "cp.get_file")?;
    let Some(local) = cached(host, &source, saltenv)? else {
        return Ok(Value::from(""));
    };
    let mut dest = PathBuf::from(dest);
    if dest.is_dir() {
        if let Some(name) = local_name(&source) {
            dest = dest.join(name);
        }
    }
    let makedirs = args
        .kwargs
        .get("makedirs")
        .is_some_and(halite_state::truthy);
    if let Some(parent) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.is_dir() {
            if !makedirs {
                return Ok(Value::from(""));
            }
            std::fs::create_dir_all(parent).map_err(|e| ExecError::Execution(e.to_string()))?;
        }
    }
    let text = match args.kwargs.get("template").and_then(Value::as_str) {
        Some(engine) => {
            let raw =
                std::fs::read_to_string(&local).map_err(|e| ExecError::Execution(e.to_string()))?;
            Some(
                halite_state::StateEnv::render_template(host, &raw, engine, &Map::new(), saltenv)
                    .map_err(ExecError::Execution)?,
            )
        }
        None => None,
    };
    let written = match text {
        Some(t) => std::fs::write(&dest, t),
        None => std::fs::copy(&local, &dest).map(|_| ()),
    };
    written.map_err(|e| ExecError::Execution(format!("cannot write {}: {e}", dest.display())))?;
    Ok(Value::from(dest.display().to_string()))
}

/// The file name of a `salt://` or local path.
fn local_name(source: &str) -> Option<String> {
    let path = strip_salt_url(source).map_or(source, |(p, _)| p);
    Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
}

/// The saltenv of the listings: the first argument, else the minion's
/// `saltenv` option, else `base`.
fn saltenv(args: &Args, host: &Host) -> String {
    args.get_str(0, "saltenv")
        .filter(|s| !s.is_empty())
        .or_else(|| {
            host.opt("saltenv")
                .and_then(|v| v.as_str().map(String::from))
        })
        .unwrap_or_else(|| "base".to_string())
}

/// The saltenv of the file functions, which take the path first: the
/// `saltenv` keyword only, else the minion's option, else `base`.
fn file_env(args: &Args, host: &Host) -> String {
    args.kwargs
        .get("saltenv")
        .or_else(|| host.opt("saltenv"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("base")
        .to_string()
}

/// `cp.get_file_str`, `cp.cache_file` and `cp.hash_file` (`fun`) `<path>`:
/// the file's text, its local copy or its hash; `False` (`{}` for the
/// hash) when there is no such file.
fn cached_fun(fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let file_env = file_env(args, host);
    let source = args.require_str(0, "path", &format!("cp.{fun}"))?;
    if fun == "hash_file" && crate::fetch::is_remote(&source) {
        // Salt hashes only files of its fileserver or local paths.
        return Ok(Value::Object(Map::new()));
    }
    let local = cached(host, &source, &file_env)?;
    Ok(match (fun, local) {
        ("hash_file", None) => Value::Object(Map::new()),
        (_, None) => Value::Bool(false),
        ("cache_file", Some(p)) => Value::from(p.display().to_string()),
        ("get_file_str", Some(p)) => Value::from(
            std::fs::read_to_string(&p).map_err(|e| ExecError::Execution(e.to_string()))?,
        ),
        (_, Some(p)) => serde_json::json!({
            "hash_type": "sha256",
            "hsum": sha256_file(&p).map_err(|e| ExecError::Execution(e.to_string()))?,
        }),
    })
}

/// `cp.list_states [saltenv]`: every SLS of the saltenv.
fn list_states(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let saltenv = saltenv(args, host);
    // Salt's Client.list_states: every .sls, `a/init.sls` as `a`,
    // slashes to dots, sorted and unique.
    let files = host
        .files
        .list_files(&saltenv, "")
        .map_err(|e| ExecError::Execution(e.to_string()))?;
    let mut out: Vec<String> = files
        .iter()
        .filter(|p| p.ends_with(".sls"))
        .map(|p| {
            let dotted = p.replace('/', ".");
            if p.ends_with("/init.sls") {
                dotted[..dotted.len() - 9].to_string()
            } else {
                dotted[..dotted.len() - 4].to_string()
            }
        })
        .collect();
    out.sort();
    out.dedup();
    Ok(Value::Array(out.into_iter().map(Value::from).collect()))
}

/// `cp.list_master [saltenv] [prefix]` (files) and `cp.list_master_dirs`
/// (`dirs`): the fileserver's paths under a prefix.
fn list_master(args: &Args, host: &Host, dirs: bool) -> Result<Value, ExecError> {
    let saltenv = saltenv(args, host);
    // Salt's fileserver strips '/' from the prefix, then keeps every
    // path that starts with it as a string ('users/files/user/' keeps
    // 'users/files/user'); the result is sorted.
    let prefix = args.get_str(1, "prefix").unwrap_or_default();
    let prefix = prefix.trim_matches('/').to_string();
    let all = if dirs {
        host.files.list_dirs(&saltenv, "")
    } else {
        host.files.list_files(&saltenv, "")
    }
    .map_err(|e| ExecError::Execution(e.to_string()))?;
    let mut out: Vec<String> = all.into_iter().filter(|p| p.starts_with(&prefix)).collect();
    out.sort();
    out.dedup();
    Ok(Value::Array(out.into_iter().map(Value::from).collect()))
}
