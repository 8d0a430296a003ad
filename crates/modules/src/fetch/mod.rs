//! The one fetch layer: every place that takes a file `source` (file.managed,
//! archive.extracted, cp.*, pkg `sources`, pkgrepo `key_url`, hash files)
//! resolves it here, so `salt://`, local paths, `file://`, `http://`,
//! `https://` and `ftp://` behave the same everywhere.
//!
//! Remote files are streamed to disk (never held in memory) under Salt's
//! `<cachedir>/extrn_files/<saltenv>/<host>/<path>` layout, and reused when
//! the cached copy already has the wanted hash.

mod config;
pub mod cp;
mod ftp;
pub mod http;
pub mod source_hash;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use halite_state::{strip_salt_url, FileClient, Value};

pub use config::FetchConfig;
pub use source_hash::SourceSum;

/// Why a remote file could not be fetched. The messages are Salt's
/// (`Error: HTTP 404: Not Found reading /path`), since states put them in
/// their comments.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The server answered that the file does not exist (HTTP 404/410, FTP 550).
    #[error("{message}")]
    NotFound {
        /// The URL asked for.
        url: String,
        /// Salt's wording of the failure.
        message: String,
    },
    /// Any other failure: an error status, connecting, TLS, a timeout, the
    /// transfer.
    #[error("{message}")]
    Failed {
        /// The URL asked for.
        url: String,
        /// Salt's wording of the failure.
        message: String,
    },
    /// The URL is not one this layer understands.
    #[error("Invalid URL '{0}': give an http://, https:// or ftp:// URL")]
    BadUrl(String),
    /// Writing the cached copy failed.
    #[error("Unable to write the cached copy of {url} to {path}: {source}")]
    Io {
        /// The URL asked for.
        url: String,
        /// The cache path written.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// Whether `url` is fetched over the network (`http`, `https`, `ftp`):
/// Salt's `REMOTE_PROTOS` less the cloud stores halite has no client for.
pub fn is_remote(url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("ftp://")
}

/// Salt's `Client._extrn_path`: where a remote URL is cached —
/// `<cachedir>/extrn_files/<saltenv>/<host[port]>/<path[-query]>`, with
/// credentials and the port's colon dropped; a name too long for the file
/// system becomes its sha256.
pub fn extrn_path(cachedir: &Path, saltenv: &str, url: &str) -> PathBuf {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let (netloc, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let netloc = netloc.rsplit('@').next().unwrap_or(netloc).replace(':', "");
    let path = path.split('#').next().unwrap_or(path);
    let file_name = match path.split_once('?') {
        Some((p, q)) => format!("{p}-{q}"),
        None => path.to_string(),
    };
    let mut file_name = file_name.trim_start_matches('/').to_string();
    // Salt's MAX_FILENAME_LENGTH; also refuse `..` so a URL stays in its cache dir.
    if file_name.len() > 255 || file_name.split('/').any(|c| c == "..") {
        use sha2::Digest;
        file_name = hex::encode(sha2::Sha256::digest(file_name.as_bytes()));
    }
    if file_name.is_empty() {
        file_name = "index.html".to_string();
    }
    cachedir
        .join("extrn_files")
        .join(saltenv)
        .join(netloc)
        .join(file_name)
}

/// Downloads `url` into the cache (Salt's `cp.cache_file` for a remote URL)
/// and returns the cached path. When `want` is given and the cached copy
/// already has that hash, nothing is downloaded. The download goes to a
/// temp file beside the cache entry and replaces it only when complete, so
/// a failed transfer never leaves a half file where a good one was.
pub fn cache_url(
    cfg: &FetchConfig,
    url: &str,
    saltenv: &str,
    want: Option<&SourceSum>,
) -> Result<PathBuf, FetchError> {
    let dest = extrn_path(&cfg.cachedir, saltenv, url);
    if let Some(want) = want {
        if dest.is_file() && want.matches_file(&dest) {
            tracing::debug!(%url, path = %dest.display(), "cached copy has the wanted hash");
            return Ok(dest);
        }
    }
    download_to(cfg, url, &dest)?;
    tracing::debug!(%url, path = %dest.display(), "downloaded");
    Ok(dest)
}

/// Downloads `url` to `dest` through a temp file beside it, replacing
/// `dest` only once the transfer is complete (the parent must exist or is
/// created).
pub fn download_to(cfg: &FetchConfig, url: &str, dest: &Path) -> Result<(), FetchError> {
    let io = |source: std::io::Error| FetchError::Io {
        url: url.to_string(),
        path: dest.display().to_string(),
        source,
    };
    let dir = dest.parent().unwrap_or(Path::new("/"));
    fs::create_dir_all(dir).map_err(io)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".halite-fetch-")
        .tempfile_in(dir)
        .map_err(io)?;
    {
        let mut out = std::io::BufWriter::new(tmp.as_file_mut());
        download(cfg, url, &mut out)?;
        out.flush().map_err(io)?;
    }
    tmp.persist(dest).map_err(|e| io(e.error))?;
    Ok(())
}

/// Streams the body of `url` into `out`.
pub fn download(cfg: &FetchConfig, url: &str, out: &mut dyn Write) -> Result<u64, FetchError> {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    if lower.starts_with("ftp://") {
        ftp::download(cfg, url, out)
    } else if lower.starts_with("http://") || lower.starts_with("https://") {
        http::download(cfg, url, out)
    } else {
        Err(FetchError::BadUrl(url.to_string()))
    }
}

/// Whether `url` exists on its server (Salt's `source_list` asks with a
/// HEAD request before choosing a source from a list).
pub fn exists(cfg: &FetchConfig, url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    if lower.starts_with("ftp://") {
        ftp::exists(cfg, url)
    } else {
        http::exists(cfg, url)
    }
}

/// Resolves any source URL to a local file: `salt://` through the file
/// client, `http(s)://`/`ftp://` through the cache, `file://` and absolute
/// paths as they are. `Ok(None)` means the file does not exist (a 404, a
/// missing `salt://` file or path); `Err` is any other failure, worded for
/// the user.
pub fn resolve(
    files: &dyn FileClient,
    opts: &Value,
    url: &str,
    saltenv: &str,
    want: Option<&SourceSum>,
) -> Result<Option<PathBuf>, String> {
    if let Some((path, env)) = strip_salt_url(url) {
        return files
            .cache_file(path, env.unwrap_or(saltenv))
            .map_err(|e| e.to_string());
    }
    if is_remote(url) {
        let cfg = FetchConfig::from_opts(opts);
        return match cache_url(&cfg, url, saltenv, want) {
            Ok(p) => Ok(Some(p)),
            Err(FetchError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.to_string()),
        };
    }
    let local = url.strip_prefix("file://").unwrap_or(url);
    if local.starts_with('/') {
        return Ok(Path::new(local).is_file().then(|| PathBuf::from(local)));
    }
    if url.contains("://") {
        return Err(format!(
            "Unable to fetch {url}: halite fetches salt://, http://, https://, ftp://, file:// and local sources"
        ));
    }
    Err(format!(
        "Invalid source '{url}': give a salt://, http(s):// or ftp:// URL or an absolute path"
    ))
}

/// Salt's `file.get_source_sum`: the hash `source` must have, from a
/// `source_hash` that is a digest, `<type>=<digest>`, an absolute path or
/// a URL of a hash file (fetched through the fetch layer).
pub fn get_source_sum(
    files: &dyn FileClient,
    opts: &Value,
    spec: &str,
    file_name: &str,
    source: &str,
    source_hash_name: Option<&str>,
    saltenv: &str,
) -> Result<SourceSum, String> {
    let spec = spec.trim();
    let scheme = spec.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    let is_file = spec.starts_with('/')
        || matches!(
            scheme.as_deref(),
            Some("salt" | "file" | "http" | "https" | "ftp")
        );
    if !is_file {
        if scheme.is_some() {
            return Err(source_hash::invalid_format(spec));
        }
        return source_hash::parse_spec(spec);
    }
    let local = resolve(files, opts, spec, saltenv, None)?
        .ok_or_else(|| format!("Source hash file {spec} not found"))?;
    let text = std::fs::read_to_string(&local)
        .map_err(|e| format!("Unable to read source hash file {spec}: {e}"))?;
    source_hash::extract_hash(&text, file_name, source, source_hash_name)
        .ok_or_else(|| source_hash::invalid_format(spec))
}
