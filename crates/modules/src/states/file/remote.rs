//! Salt's `file.source_list` and the remote half of `file.get_managed` /
//! `file.manage_file`: which of a list of sources exists (a HEAD request
//! for `http(s)://`/`ftp://`), the hash a remote source must have, its
//! cached download, and Salt's comments when any of that fails.

use std::path::{Path, PathBuf};

use halite_state::{StateCall, Value};

use crate::fetch::{self, FetchConfig, SourceSum};

/// The source `file.managed` chose: its URL and, for anything but a remote
/// URL, its local copy (a remote one is fetched once its hash is known).
pub(crate) struct Picked {
    /// The URL (or path) as given.
    pub url: String,
    /// The local file, `None` for a remote URL not fetched yet.
    pub local: Option<PathBuf>,
}

/// Salt's `file.source_list`: the first source of `source` that exists. A
/// lone remote URL is taken unchecked (its download reports what is wrong);
/// in a list, a remote URL counts when a HEAD request answers success.
pub(crate) fn pick_source(
    call: &StateCall<'_>,
    source: &Value,
    saltenv: &str,
) -> Result<Picked, String> {
    let candidates =
        source_candidates(source, true).ok_or_else(|| format!("Invalid source: {source}"))?;
    // Salt's source_list checks the entries of a list (even of one); a
    // plain string is taken as it is and fails later if missing.
    let single = !matches!(source, Value::Array(_));
    for url in &candidates {
        if fetch::is_remote(url) {
            if single || fetch::exists(&FetchConfig::from_opts(call.env.opts()), url) {
                return Ok(Picked {
                    url: url.clone(),
                    local: None,
                });
            }
            continue;
        }
        let files = call.env.file_client();
        if let Some(path) = fetch::resolve(files, call.env.opts(), url, saltenv, None)? {
            return Ok(Picked {
                url: url.clone(),
                local: Some(path),
            });
        }
    }
    match (single, candidates.as_slice()) {
        (true, [one]) => Err(format!(
            "Source file {one} not found in saltenv '{saltenv}'"
        )),
        _ => Err("none of the specified sources were found".to_string()),
    }
}

/// The hash a remote `url` must have for `name`: from `source_hash` (a
/// digest or a hash file, looked up by `source_hash_name`), `None` with
/// `skip_verify`, else Salt's error asking for one.
pub(crate) fn wanted_sum(
    call: &StateCall<'_>,
    name: &str,
    url: &str,
    saltenv: &str,
) -> Result<Option<SourceSum>, String> {
    if call.arg_bool("skip_verify", false) {
        return Ok(None);
    }
    let spec = call.arg("source_hash").and_then(|v| match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    });
    let Some(spec) = spec else {
        return Err(format!(
            "Unable to verify upstream hash of source file {url}, please set source_hash or set skip_verify to True"
        ));
    };
    let hash_name = call.arg("source_hash_name").and_then(Value::as_str);
    fetch::get_source_sum(
        call.env.file_client(),
        call.env.opts(),
        &spec,
        name,
        url,
        hash_name,
        saltenv,
    )
    .map(Some)
    // Salt's get_managed words this one itself, and the state adds its
    // own "Unable to manage file: " in front again.
    .map_err(|e| format!("Unable to manage file: {e}"))
}

/// Downloads `url` into the cache (reusing a cached copy that already has
/// the wanted hash); Salt's "Failed to cache" wording on failure.
pub(crate) fn fetch(
    call: &StateCall<'_>,
    url: &str,
    saltenv: &str,
    want: Option<&SourceSum>,
) -> Result<PathBuf, String> {
    let cfg = FetchConfig::from_opts(call.env.opts());
    fetch::cache_url(&cfg, url, saltenv, want).map_err(|e| format!("Failed to cache {url}: {e}"))
}

/// Salt's `manage_file` check of a downloaded file against its wanted
/// hash: the wording names the source when the target exists, the target
/// when it is new (as Salt's two code paths do).
pub(crate) fn check_sum(
    local: &Path,
    want: &SourceSum,
    url: &str,
    name: &str,
) -> Result<(), String> {
    let got =
        crate::exec::file::meta::file_hash(local, want.hash_type).map_err(|e| e.to_string())?;
    if got == want.hsum {
        return Ok(());
    }
    let kind = want.type_name();
    let target_exists = std::fs::symlink_metadata(name).is_ok();
    Err(if target_exists {
        format!(
            "Specified {kind} checksum for {url} ({}) does not match actual checksum ({got}). If the 'source_hash' value refers to a remote file with multiple possible matches, then it may be necessary to set 'source_hash_name'.",
            want.hsum
        )
    } else {
        format!(
            "Specified {kind} checksum for {name} ({}) does not match actual checksum ({got})",
            want.hsum
        )
    })
}

/// Salt's `file.cached` for a remote URL, as `archive.extracted` uses it:
/// a hash is required unless `skip_verify`; a cached copy with the wanted
/// hash is reused; a download that does not have it fails with Salt's
/// comment.
pub(crate) fn cached_remote(
    call: &StateCall<'_>,
    url: &str,
    saltenv: &str,
    source_hash: Option<&str>,
    source_hash_name: Option<&str>,
    skip_verify: bool,
) -> Result<PathBuf, String> {
    let want = match (source_hash.filter(|s| !s.is_empty()), skip_verify) {
        (_, true) => None,
        (None, false) => {
            return Err(format!(
                "Unable to verify upstream hash of source file {url}, please set source_hash or set skip_verify or use_etag to True"
            ))
        }
        (Some(spec), false) => Some(fetch::get_source_sum(
            call.env.file_client(),
            call.env.opts(),
            spec,
            "",
            url,
            source_hash_name,
            saltenv,
        )?),
    };
    let cfg = FetchConfig::from_opts(call.env.opts());
    let local = fetch::cache_url(&cfg, url, saltenv, want.as_ref()).map_err(|e| e.to_string())?;
    if let Some(want) = want {
        let got = crate::exec::file::meta::file_hash(&local, want.hash_type)
            .map_err(|e| e.to_string())?;
        if got != want.hsum {
            return Err(format!(
                "File is cached to {}, but the hash ({got}) does not match the specified hash ({})",
                local.display(),
                want.hsum
            ));
        }
    }
    Ok(local)
}

/// Whether the first source of `source` is a remote URL (states that do
/// not download in test mode ask this).
pub(crate) fn first_is_remote(source: &Value) -> Option<String> {
    source_candidates(source, false)?
        .into_iter()
        .next()
        .filter(|u| fetch::is_remote(u))
}

/// The URLs of a `source` argument in order: a string, or a list of
/// strings and `{url: hash}` dicts (Salt's `source_list`); `None` when it
/// is neither (an empty string only when `allow_empty`).
pub(crate) fn source_candidates(source: &Value, allow_empty: bool) -> Option<Vec<String>> {
    match source {
        Value::Array(items) => Some(
            items
                .iter()
                .filter_map(|i| match i {
                    Value::String(s) => Some(s.clone()),
                    Value::Object(m) => m.keys().next().cloned(),
                    _ => None,
                })
                .collect(),
        ),
        Value::String(s) if allow_empty || !s.is_empty() => Some(vec![s.clone()]),
        _ => None,
    }
}
