//! Salt's `cp` execution module: the listings formulas call at render
//! time (`salt['cp.list_master_dirs'](prefix='users/files/user/')`) and
//! the file functions (`cp.get_file`, `cp.hash_file`...) over the file
//! client — the master's fileserver on a minion.

use std::path::{Path, PathBuf};

use halite_state::{strip_salt_url, Map, Value};

use crate::exec::file::meta::sha256_file;
use crate::exec::{Args, ExecError, ExecModule};
use crate::Host;

/// `cp.list_master`, `cp.list_master_dirs`, `cp.list_states`,
/// `cp.get_file`, `cp.get_file_str`, `cp.cache_file`, `cp.hash_file`.
pub struct CpExec;

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

impl ExecModule for CpExec {
    fn name(&self) -> &'static str {
        "cp"
    }

    fn functions(&self) -> Vec<&'static str> {
        vec![
            "list_master",
            "list_master_dirs",
            "list_states",
            "get_file",
            "get_file_str",
            "cache_file",
            "hash_file",
            "get_url",
        ]
    }

    fn call(&self, fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
        let saltenv = args
            .get_str(0, "saltenv")
            .filter(|s| !s.is_empty())
            .or_else(|| {
                host.opt("saltenv")
                    .and_then(|v| v.as_str().map(String::from))
            })
            .unwrap_or_else(|| "base".to_string());
        // Salt's fileserver strips '/' from the prefix, then keeps every
        // path that starts with it as a string ('users/files/user/' keeps
        // 'users/files/user'); the result is sorted.
        // The file functions take the path first; saltenv only by keyword.
        let file_env = args
            .kwargs
            .get("saltenv")
            .or_else(|| host.opt("saltenv"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or("base")
            .to_string();
        match fun {
            "get_file" => return get_file(host, args, &file_env),
            "get_url" => return crate::fetch::cp::get_url(host, args, &file_env),
            "hash_file" if crate::fetch::is_remote(&args.require_str(0, "path", "cp.hash_file")?) => {
                // Salt hashes only files of its fileserver or local paths.
                return Ok(Value::Object(Map::new()));
            }
            "get_file_str" | "cache_file" | "hash_file" => {
                let source = args.require_str(0, "path", &format!("cp.{fun}"))?;
                let local = cached(host, &source, &file_env)?;
                return Ok(match (fun, local) {
                    ("hash_file", None) => Value::Object(Map::new()),
                    (_, None) => Value::Bool(false),
                    ("cache_file", Some(p)) => Value::from(p.display().to_string()),
                    ("get_file_str", Some(p)) => Value::from(
                        std::fs::read_to_string(&p)
                            .map_err(|e| ExecError::Execution(e.to_string()))?,
                    ),
                    (_, Some(p)) => serde_json::json!({
                        "hash_type": "sha256",
                        "hsum": sha256_file(&p).map_err(|e| ExecError::Execution(e.to_string()))?,
                    }),
                });
            }
            _ => {}
        }
        if fun == "list_states" {
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
            return Ok(Value::Array(out.into_iter().map(Value::from).collect()));
        }
        let prefix = args.get_str(1, "prefix").unwrap_or_default();
        let prefix = prefix.trim_matches('/').to_string();
        let all = match fun {
            "list_master" => host.files.list_files(&saltenv, ""),
            "list_master_dirs" => host.files.list_dirs(&saltenv, ""),
            other => return Err(ExecError::NotAvailable(format!("cp.{other}"))),
        }
        .map_err(|e| ExecError::Execution(e.to_string()))?;
        let mut out: Vec<String> = all.into_iter().filter(|p| p.starts_with(&prefix)).collect();
        out.sort();
        out.dedup();
        Ok(Value::Array(out.into_iter().map(Value::from).collect()))
    }
}

/// This module, as registered.
pub const MODULE: CpExec = CpExec;
