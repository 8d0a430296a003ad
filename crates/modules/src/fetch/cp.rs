//! `cp.get_url`: fetches any URL (`salt://`, `http(s)://`, `ftp://`,
//! `file://`, a local path) to a destination, or into the cache when no
//! destination is given, as Salt's `Client.get_url` does.

use std::path::{Path, PathBuf};

use halite_state::Value;

use super::{source_hash, FetchConfig};
use crate::exec::{Args, ExecError};
use crate::Host;

fn exec_err(e: impl std::fmt::Display) -> ExecError {
    ExecError::Execution(e.to_string())
}

/// Where `url` lands under `dest`: `dest` itself, or `dest/<basename>`
/// when `dest` is a directory (or ends with `/`).
fn target(dest: &str, url: &str) -> PathBuf {
    let base = url
        .split(['?', '#'])
        .next()
        .unwrap_or(url)
        .rsplit('/')
        .next()
        .filter(|b| !b.is_empty())
        .unwrap_or("index.html");
    let d = Path::new(dest);
    if dest.ends_with('/') || d.is_dir() {
        d.join(base)
    } else {
        d.to_path_buf()
    }
}

/// `cp.get_url path [dest] [saltenv=] [makedirs=False] [source_hash=]`:
/// the destination path, the cached path when `dest` is empty or absent,
/// `""` when `dest`'s directory is missing and `makedirs` is not set. A
/// download failure (404, TLS, timeout) is an error with Salt's wording.
pub(crate) fn get_url(host: &Host, args: &Args, saltenv: &str) -> Result<Value, ExecError> {
    let url = args.require_str(0, "path", "cp.get_url")?;
    let dest = args.get_str(1, "dest").unwrap_or_default();
    let makedirs = args.get(3, "makedirs").is_some_and(halite_state::truthy);
    let saltenv = args
        .kwargs
        .get("saltenv")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(saltenv);
    let want = match args.get_str(4, "source_hash").filter(|s| !s.is_empty()) {
        Some(spec) => Some(source_hash::parse_spec(&spec).map_err(exec_err)?),
        None => None,
    };
    let cfg = FetchConfig::from_opts(&host.opts);
    let remote = super::is_remote(&url);
    if dest.is_empty() {
        let cached = if remote {
            super::cache_url(&cfg, &url, saltenv, want.as_ref()).map_err(exec_err)?
        } else {
            match super::resolve(host.files.as_ref(), &host.opts, &url, saltenv, None)
                .map_err(exec_err)?
            {
                Some(p) => p,
                None => return Ok(Value::Bool(false)),
            }
        };
        return Ok(Value::from(cached.display().to_string()));
    }
    let dest = target(&dest, &url);
    if let Some(parent) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.is_dir() {
            if !makedirs {
                return Ok(Value::from(""));
            }
            std::fs::create_dir_all(parent).map_err(exec_err)?;
        }
    }
    if remote {
        if let Some(want) = &want {
            if want.matches_file(&dest) {
                return Ok(Value::from(dest.display().to_string()));
            }
        }
        super::download_to(&cfg, &url, &dest).map_err(exec_err)?;
        return Ok(Value::from(dest.display().to_string()));
    }
    let local =
        super::resolve(host.files.as_ref(), &host.opts, &url, saltenv, None).map_err(exec_err)?;
    let Some(local) = local else {
        return Ok(Value::Bool(false));
    };
    std::fs::copy(&local, &dest)
        .map_err(|e| exec_err(format!("cannot write {}: {e}", dest.display())))?;
    Ok(Value::from(dest.display().to_string()))
}
