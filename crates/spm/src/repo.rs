//! Repositories: `create_repo` writes a directory's `SPM-METADATA`;
//! `update_repo` downloads every configured repository's metadata into
//! `spm_cache_dir`; installs look packages up there and download them.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::archive::read_package;
use crate::config::SpmConfig;
use crate::error::{Result, SpmError};
use crate::install::compare_versions;

/// The largest metadata or package accepted from a repository.
const MAX_DOWNLOAD_BYTES: u64 = 256 * 1024 * 1024;

/// One repository from `spm_repos_config` (or `<it>.d/*.repo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoConfig {
    /// The repository's name (its file's key in `spm.repos.d`).
    pub name: String,
    /// Where it is (`file://`, `http(s)://`).
    pub url: String,
    /// The user for an HTTP repository, if it needs one.
    pub username: Option<String>,
    /// The password for an HTTP repository, if it needs one.
    pub password: Option<String>,
}

/// A package a repository offers.
#[derive(Debug, Clone)]
pub struct RepoPackage {
    /// The repository offering it.
    pub repo: RepoConfig,
    /// The package name.
    pub name: String,
    /// The `.spm` file's name in the repository.
    pub filename: String,
    /// The package's FORMULA fields, as the repository's metadata lists them.
    pub info: Map<String, Value>,
}

impl RepoPackage {
    fn version(&self) -> String {
        field_text(&self.info, "version")
    }
    fn release(&self) -> String {
        field_text(&self.info, "release")
    }
}

fn field_text(map: &Map<String, Value>, key: &str) -> String {
    match map.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Scans `dir` for `.spm` files and writes `dir/SPM-METADATA` (the newest
/// version and release of each package). Returns the packages listed.
pub fn create_repo(dir: &Path) -> Result<Vec<String>> {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| SpmError::io("cannot list", dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "spm"))
        .collect();
    entries.sort();
    let mut newest: BTreeMap<String, (Map<String, Value>, String)> = BTreeMap::new();
    for path in entries {
        let package = match read_package(&path) {
            Ok(package) => package,
            Err(e) => {
                tracing::warn!("skipping {}: {e}", path.display());
                continue;
            }
        };
        let info = package.formula.variables.clone();
        let file_name = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let keep_old = newest.get(&package.formula.name).is_some_and(|(old, _)| {
            let by_version =
                compare_versions(&package.formula.version, &field_text(old, "version"));
            by_version.then_with(|| {
                compare_versions(&package.formula.release, &field_text(old, "release"))
            }) == std::cmp::Ordering::Less
        });
        if !keep_old {
            newest.insert(package.formula.name.clone(), (info, file_name));
        }
    }
    let mut metadata = Map::new();
    for (name, (info, filename)) in &newest {
        let mut entry = Map::new();
        entry.insert("filename".into(), Value::String(filename.clone()));
        entry.insert("info".into(), Value::Object(info.clone()));
        metadata.insert(name.clone(), Value::Object(entry));
    }
    write_atomically(
        &dir.join("SPM-METADATA"),
        crate::yaml::dump(&Value::Object(metadata)).as_bytes(),
    )?;
    Ok(newest.into_keys().collect())
}

/// The enabled repositories, in file order (`spm_repos_config`, then the
/// `.repo` files of `<spm_repos_config>.d` by name).
pub fn configured_repos(config: &SpmConfig) -> Result<Vec<RepoConfig>> {
    let mut files = Vec::new();
    if config.spm_repos_config.is_file() {
        files.push(config.spm_repos_config.clone());
    }
    let mut dot_d = config.spm_repos_config.clone().into_os_string();
    dot_d.push(".d");
    let dot_d = PathBuf::from(dot_d);
    if dot_d.is_dir() {
        let mut more: Vec<PathBuf> = fs::read_dir(&dot_d)
            .map_err(|e| SpmError::io("cannot list", &dot_d, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "repo"))
            .collect();
        more.sort();
        files.extend(more);
    }
    let mut repos = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file).map_err(|e| SpmError::io("cannot read", &file, e))?;
        let bad = |message: String| SpmError::Config {
            path: file.clone(),
            message,
        };
        let value = crate::yaml::load(&text).map_err(bad)?;
        let Value::Object(map) = value else {
            if value.is_null() {
                continue;
            }
            return Err(bad(
                "a repository file maps repository names to {url: ...}".into()
            ));
        };
        for (name, settings) in map {
            if name.contains('/') || name.is_empty() || name.starts_with('.') {
                return Err(bad(format!(
                    "repository name '{name}' must be a plain name"
                )));
            }
            let text = |key: &str| {
                settings
                    .get(key)
                    .and_then(Value::as_str)
                    .map(str::to_string)
            };
            if settings.get("enabled") == Some(&Value::Bool(false)) {
                continue;
            }
            let url = text("url").ok_or_else(|| bad(format!("repository {name} has no url")))?;
            repos.push(RepoConfig {
                name,
                url,
                username: text("username"),
                password: text("password"),
            });
        }
    }
    Ok(repos)
}

/// Downloads the metadata of every configured repository (or only `only`)
/// into the cache. Returns the names of the repositories updated.
pub fn update_repos(config: &SpmConfig, only: Option<&str>) -> Result<Vec<String>> {
    let mut updated = Vec::new();
    for repo in configured_repos(config)? {
        if only.is_some_and(|o| o != repo.name) {
            continue;
        }
        update_one(config, &repo)?;
        updated.push(repo.name);
    }
    Ok(updated)
}

fn update_one(config: &SpmConfig, repo: &RepoConfig) -> Result<()> {
    let url = format!("{}/SPM-METADATA", repo.url.trim_end_matches('/'));
    let bytes = fetch(repo, &url)?;
    let repo_err = |message: String| SpmError::Repo {
        repo: repo.name.clone(),
        message,
    };
    let text = String::from_utf8(bytes).map_err(|_| repo_err(format!("{url} is not UTF-8")))?;
    let metadata = crate::yaml::load(&text).map_err(|e| repo_err(format!("{url}: {e}")))?;
    let metadata = match metadata {
        Value::Null => Value::Object(Map::new()),
        Value::Object(m) => Value::Object(m),
        _ => return Err(repo_err(format!("{url} is not a mapping of packages"))),
    };
    fs::create_dir_all(&config.spm_cache_dir)
        .map_err(|e| SpmError::io("cannot create", &config.spm_cache_dir, e))?;
    write_atomically(
        &cache_file(config, &repo.name),
        metadata.to_string().as_bytes(),
    )
}

fn cache_file(config: &SpmConfig, repo: &str) -> PathBuf {
    config.spm_cache_dir.join(format!("{repo}.metadata.json"))
}

/// Every package the configured repositories offer, from the cache
/// (downloading a repository's metadata first when it was never fetched).
pub fn available_packages(config: &SpmConfig) -> Result<Vec<RepoPackage>> {
    let mut out = Vec::new();
    for repo in configured_repos(config)? {
        let path = cache_file(config, &repo.name);
        if !path.is_file() {
            tracing::warn!("Updating repo metadata");
            update_one(config, &repo)?;
        }
        let text = fs::read_to_string(&path).map_err(|e| SpmError::io("cannot read", &path, e))?;
        let Ok(Value::Object(packages)) = serde_json::from_str::<Value>(&text) else {
            return Err(SpmError::Repo {
                repo: repo.name.clone(),
                message: format!(
                    "cached metadata {} is damaged; run `halite-spm update_repo`",
                    path.display()
                ),
            });
        };
        for (name, entry) in packages {
            let (Some(Value::String(filename)), Some(Value::Object(info))) =
                (entry.get("filename"), entry.get("info"))
            else {
                continue;
            };
            out.push(RepoPackage {
                repo: repo.clone(),
                name,
                filename: filename.clone(),
                info: info.clone(),
            });
        }
    }
    Ok(out)
}

/// The best offer for `name`: highest version, then release; at a tie,
/// a `file://` repository wins (as in Salt).
pub fn best_offer<'a>(offers: &'a [RepoPackage], name: &str) -> Option<&'a RepoPackage> {
    offers
        .iter()
        .filter(|p| p.name == name)
        .reduce(|best, candidate| {
            let ordering = compare_versions(&candidate.version(), &best.version())
                .then_with(|| compare_versions(&candidate.release(), &best.release()));
            match ordering {
                std::cmp::Ordering::Greater => candidate,
                std::cmp::Ordering::Equal
                    if candidate.repo.url.starts_with("file://")
                        && !best.repo.url.starts_with("file://") =>
                {
                    candidate
                }
                _ => best,
            }
        })
}

/// Downloads `offer` to `<spm_cache_dir>/<repo>/<filename>` and returns that path.
pub fn download(config: &SpmConfig, offer: &RepoPackage) -> Result<PathBuf> {
    let filename = &offer.filename;
    if filename.contains('/') || filename.starts_with('.') || !filename.ends_with(".spm") {
        return Err(SpmError::Repo {
            repo: offer.repo.name.clone(),
            message: format!("package file name '{filename}' is not a plain .spm name"),
        });
    }
    let dir = config.spm_cache_dir.join(&offer.repo.name);
    fs::create_dir_all(&dir).map_err(|e| SpmError::io("cannot create", &dir, e))?;
    let url = format!("{}/{}", offer.repo.url.trim_end_matches('/'), filename);
    let bytes = fetch(&offer.repo, &url)?;
    let dest = dir.join(filename);
    write_atomically(&dest, &bytes)?;
    Ok(dest)
}

/// Reads a `file://`, `http://` or `https://` URL.
fn fetch(repo: &RepoConfig, url: &str) -> Result<Vec<u8>> {
    let repo_err = |message: String| SpmError::Repo {
        repo: repo.name.clone(),
        message,
    };
    if let Some(path) = url.strip_prefix("file://") {
        return fs::read(path).map_err(|e| repo_err(format!("cannot read {path}: {e}")));
    }
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(repo_err(format!(
            "unsupported URL {url} (use file://, http:// or https://)"
        )));
    }
    let mut request = ureq::get(url);
    if let Some(user) = &repo.username {
        let password = repo.password.as_deref().ok_or_else(|| {
            repo_err(format!(
                "Auth defined, but password is not set for username: '{user}'"
            ))
        })?;
        let token = basic_auth(user, password);
        request = request.header("Authorization", &format!("Basic {token}"));
    }
    let response = request
        .call()
        .map_err(|e| repo_err(format!("cannot download {url}: {e}")))?;
    let mut body = Vec::new();
    response
        .into_body()
        .into_reader()
        .take(MAX_DOWNLOAD_BYTES)
        .read_to_end(&mut body)
        .map_err(|e| repo_err(format!("cannot download {url}: {e}")))?;
    Ok(body)
}

/// `user:password` in base64 for HTTP basic auth.
fn basic_auth(user: &str, password: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

/// Writes `path` through a temporary file in the same directory and a rename.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::Builder::new()
        .prefix(".halite-spm")
        .tempfile_in(dir)
        .map_err(|e| SpmError::io("cannot create a temporary file in", dir, e))?;
    std::io::Write::write_all(&mut temp, bytes)
        .map_err(|e| SpmError::io("cannot write", path, e))?;
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(temp.path(), fs::Permissions::from_mode(0o644))
        .map_err(|e| SpmError::io("cannot chmod", temp.path(), e))?;
    temp.persist(path)
        .map_err(|e| SpmError::io("cannot write", path, e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::basic_auth;

    #[test]
    fn basic_auth_is_base64_of_user_colon_password() {
        assert_eq!(
            basic_auth("Aladdin", "open sesame"),
            "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(basic_auth("a", "b"), "YTpi");
    }
}
