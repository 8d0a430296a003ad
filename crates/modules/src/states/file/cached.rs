//! `file.cached` / `file.not_cached`: a `salt://` (or remote) file is, or
//! is not, in the minion's file cache, where Salt keeps it:
//! `<cachedir>/files/<saltenv>/<path>` for `salt://`,
//! `<cachedir>/extrn_files/<saltenv>/<host>/<path>` for URLs.

use std::fs;
use std::path::{Path, PathBuf};

use halite_state::{strip_salt_url, Map, StateCall, StateError, StateResult, Value};
use serde_json::json;

use crate::exec::file::{expand_user, meta};

/// The URL schemes Salt downloads (`salt.utils.files.REMOTE_PROTOS`).
const REMOTE: &[&str] = &["http", "https", "ftp", "swift", "s3"];

/// The scheme of `name` as `urllib.parse.urlparse` reads it ("" for a path).
fn scheme(name: &str) -> &str {
    match name.split_once("://") {
        Some((s, _))
            if !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            s
        }
        _ => "",
    }
}

/// The `saltenv` argument (Salt's default `base`).
fn saltenv(call: &StateCall<'_>) -> Result<String, StateError> {
    Ok(call
        .arg_str("saltenv")?
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "base".into()))
}

/// The minion's cache directory (`cachedir`).
fn cachedir(call: &StateCall<'_>) -> PathBuf {
    PathBuf::from(
        call.env
            .opts()
            .get("cachedir")
            .and_then(Value::as_str)
            .unwrap_or("/var/cache/salt/minion"),
    )
}

/// Where Salt's `cp.is_cached` looks for `name`; `None` for local paths.
fn cache_path(call: &StateCall<'_>, name: &str, env: &str) -> Option<PathBuf> {
    let base = cachedir(call);
    if let Some((path, url_env)) = strip_salt_url(name) {
        return Some(
            base.join("files")
                .join(url_env.unwrap_or(env))
                .join(path.trim_start_matches('/')),
        );
    }
    let (_, rest) = name.split_once("://")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let host = host.rsplit('@').next().unwrap_or(host);
    Some(
        base.join("extrn_files")
            .join(env)
            .join(host)
            .join(path.split('?').next().unwrap_or(path)),
    )
}

/// The expected hash of `source_hash`: `type=hex`, or a bare hex digest
/// whose type its length tells.
fn source_sum(source_hash: &str) -> Result<(meta::HashType, String), String> {
    let raw = source_hash.trim();
    let (kind, hex) = match raw.split_once('=') {
        Some((t, h)) => (meta::HashType::parse(t).map_err(|e| e.to_string())?, h.trim()),
        None => match meta::HashType::from_hex_len(raw.len()) {
            Some(t) => (t, raw),
            None => {
                return Err(format!(
                    "Invalid hash type or hash length for source_hash '{raw}': give it as <type>=<hex digest> or a hex digest of a known length"
                ))
            }
        },
    };
    if !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!("Invalid hex digest in source_hash '{raw}'"));
    }
    Ok((kind, hex.to_ascii_lowercase()))
}

/// The hash of a file, `None` when it cannot be read.
fn hash_of(path: &Path, kind: meta::HashType) -> Option<String> {
    meta::file_hash(path, kind).ok()
}

/// Copies `name` into the cache (a `salt://` file through the file
/// client, a URL through `cp.cache_file`); the cached path.
fn cache(
    call: &StateCall<'_>,
    name: &str,
    env: &str,
    dest: &Path,
) -> Result<Option<PathBuf>, String> {
    if let Some((path, url_env)) = strip_salt_url(name) {
        let Some(src) = call
            .env
            .file_client()
            .cache_file(path, url_env.unwrap_or(env))
            .map_err(|e| e.to_string())?
        else {
            return Ok(None);
        };
        if src != dest {
            if let Some(parent) = dest.parent() {
                fs::create_dir_all(parent)
                    .map_err(|e| format!("Unable to create {}: {e}", parent.display()))?;
            }
            let tmp = dest.with_extension("halite-partial");
            fs::copy(&src, &tmp)
                .and_then(|_| fs::rename(&tmp, dest))
                .map_err(|e| format!("Unable to cache {name} to {}: {e}", dest.display()))?;
        }
        return Ok(Some(dest.to_path_buf()));
    }
    let mut kwargs = Map::new();
    kwargs.insert("saltenv".into(), json!(env));
    match call
        .env
        .call_function("cp.cache_file", &[json!(name)], &kwargs)?
    {
        Value::String(p) if !p.is_empty() => Ok(Some(PathBuf::from(p))),
        _ => Ok(None),
    }
}

/// `file.cached`: see Salt's documentation (`source_hash`, `skip_verify`, `saltenv`).
pub fn cached(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let mut ret = StateResult::new(name.clone(), Some(false));
    let env = saltenv(call)?;
    let skip_verify = call.arg_bool("skip_verify", false);
    // A falsy `source_hash` (`""`, or a YAML `0000` loaded as 0) means none.
    let source_hash = match call.arg("source_hash") {
        Some(v) if halite_salt_rules::truth::python_bool(v) => {
            Some(halite_salt_rules::pyfmt::python_str(v))
        }
        _ => None,
    };
    let proto = scheme(&name);
    if !skip_verify
        && source_hash.is_none()
        && !call.arg_bool("use_etag", false)
        && REMOTE.contains(&proto)
    {
        ret.comment = format!(
            "Unable to verify upstream hash of source file {name}, please set source_hash or set skip_verify or use_etag to True"
        );
        return Ok(ret);
    }
    let sum = match source_hash.as_deref().map(source_sum).transpose() {
        Ok(s) => s,
        Err(e) => {
            ret.comment = e;
            return Ok(ret);
        }
    };
    let kind = sum.as_ref().map_or(meta::HashType::Sha256, |s| s.0);
    let local_copy = cache_path(call, &name, &env).filter(|p| p.is_file());
    if call.test {
        ret.result = None;
        ret.comment = match (&local_copy, &sum) {
            (Some(p), Some((k, hsum))) if hash_of(p, *k).as_deref() == Some(hsum.as_str()) => {
                format!("File already cached: {name}")
            }
            (Some(_), Some(_)) => format!("Hashes don't match.\nFile will be cached: {name}"),
            (Some(_), None) => format!("No hash found. File will be cached: {name}"),
            (None, _) => format!("File will be cached: {name}"),
        };
        return Ok(ret);
    }
    if proto.is_empty() || proto == "file" {
        let path = name.strip_prefix("file://").unwrap_or(&name);
        let full = fs::canonicalize(expand_user(path))
            .unwrap_or_else(|_| PathBuf::from(expand_user(path)));
        let full_s = full.display().to_string();
        if !full.exists() {
            ret.comment = format!("File {full_s} is not present on the minion");
            return Ok(ret);
        }
        match (&sum, skip_verify) {
            (Some((k, hsum)), false) => {
                let local = hash_of(&full, *k).unwrap_or_default();
                if &local == hsum {
                    ret.result = Some(true);
                    ret.comment =
                        format!("File {full_s} is present on the minion and has hash {local}");
                } else {
                    ret.comment = format!(
                        "File {full_s} is present on the minion, but the hash ({local}) does not match the specified hash ({hsum})"
                    );
                }
            }
            _ => {
                ret.result = Some(true);
                ret.comment = format!("File {full_s} is present on the minion");
            }
        }
        return Ok(ret);
    }
    let pre_hash = local_copy.as_deref().and_then(|p| hash_of(p, kind));
    if let (Some(p), Some(pre), Some((_, hsum)), false) =
        (&local_copy, &pre_hash, &sum, skip_verify)
    {
        if pre == hsum {
            ret.result = Some(true);
            ret.comment = format!("File is already cached to {} with hash {pre}", p.display());
            return Ok(ret);
        }
    }
    let Some(dest) = cache_path(call, &name, &env) else {
        ret.comment = "Only URLs or local file paths are valid input".into();
        return Ok(ret);
    };
    let local = match cache(call, &name, &env, &dest) {
        Ok(Some(p)) => p,
        Ok(None) => {
            ret.comment = format!("Failed to cache {name}, check minion log for more information");
            return Ok(ret);
        }
        Err(e) => {
            ret.comment = e;
            return Ok(ret);
        }
    };
    let post_hash = hash_of(&local, kind);
    if pre_hash != post_hash {
        ret.changes
            .insert("hash".into(), json!({"old": pre_hash, "new": post_hash}));
    }
    let post = post_hash.unwrap_or_default();
    if let (Some((_, hsum)), false) = (&sum, skip_verify) {
        if &post == hsum {
            ret.result = Some(true);
            ret.comment = format!(
                "File is already cached to {} with hash {post}",
                local.display()
            );
        } else {
            ret.comment = format!(
                "File is cached to {}, but the hash ({post}) does not match the specified hash ({hsum})",
                local.display()
            );
        }
        return Ok(ret);
    }
    ret.result = Some(true);
    ret.comment = format!("File is cached to {}", local.display());
    Ok(ret)
}

/// `file.not_cached`: removes the cached copy of a `salt://` or remote file.
pub fn not_cached(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let mut ret = StateResult::new(name.clone(), Some(false));
    let env = saltenv(call)?;
    let proto = scheme(&name);
    if proto.is_empty() || proto == "file" {
        let path = expand_user(name.strip_prefix("file://").unwrap_or(&name));
        let full = fs::canonicalize(&path).unwrap_or_else(|_| PathBuf::from(&path));
        ret.result = Some(true);
        ret.comment = format!("File {} is a local path, no action taken", full.display());
        return Ok(ret);
    }
    match cache_path(call, &name, &env).filter(|p| p.is_file()) {
        // Salt deletes even with test=True; halite predicts instead, as
        // every other state does.
        Some(local) if call.test => {
            ret.result = None;
            ret.comment = format!("{} is set to be deleted", local.display());
        }
        Some(local) => match fs::remove_file(&local) {
            Ok(()) => {
                ret.result = Some(true);
                ret.changes.insert("deleted".into(), json!(true));
                ret.comment = format!("{} was deleted", local.display());
            }
            Err(e) => ret.comment = format!("Failed to delete {}: {e}", local.display()),
        },
        None => {
            ret.result = Some(true);
            ret.comment = format!("{name} is not cached");
        }
    }
    Ok(ret)
}
