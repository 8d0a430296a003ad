//! `fileserver_backend`: the master's backends in the configured order
//! (default `[roots]`), one [`FileClient`] over all of them. A path is
//! served by the first backend that has it as a file; listings and
//! saltenvs are the union, as in Salt.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use halite_modules::LocalFileClient;
use halite_state::{FileClient, FileClientError};
use serde_json::Value;

use crate::gitfs::{GitFs, Mount};

/// One backend of `fileserver_backend`.
#[derive(Debug, Clone)]
pub enum Backend {
    /// `roots`: the `file_roots` directories.
    Roots(LocalFileClient),
    /// `gitfs`: the `gitfs_remotes`.
    Git(Arc<GitFs>),
}

/// The master's fileserver backends in order, as one file client.
#[derive(Debug, Clone)]
pub struct Fileserver {
    backends: Vec<Backend>,
}

impl Fileserver {
    /// `file_roots` alone (Salt's default `fileserver_backend: [roots]`).
    pub fn roots_only(file_roots: BTreeMap<String, Vec<PathBuf>>) -> Self {
        Self {
            backends: vec![Backend::Roots(LocalFileClient::new(file_roots))],
        }
    }

    /// The backends `fileserver_backend` of the master's `opts` names, in
    /// its order; gitfs caches under `<cachedir>/gitfs`. A backend halite
    /// does not have is logged and left out.
    pub fn from_opts(
        opts: &Value,
        file_roots: BTreeMap<String, Vec<PathBuf>>,
        cachedir: &Path,
    ) -> Self {
        let names: Vec<String> = match opts.get("fileserver_backend") {
            Some(Value::Array(items)) => items
                .iter()
                .map(halite_salt_rules::pyfmt::python_str)
                .collect(),
            Some(Value::String(s)) => s.split(',').map(|s| s.trim().to_string()).collect(),
            _ => vec!["roots".to_string()],
        };
        let mut backends = Vec::new();
        for name in names {
            // Salt accepts the names with or without "fs" ("git", "rootsfs").
            match name.trim_end_matches("fs") {
                "roots" => backends.push(Backend::Roots(LocalFileClient::new(file_roots.clone()))),
                "git" => backends.push(Backend::Git(Arc::new(GitFs::new(opts, cachedir)))),
                other => tracing::error!(
                    backend = %other,
                    "fileserver_backend names a backend halite does not have (it has roots and gitfs); left out"
                ),
            }
        }
        Self { backends }
    }

    /// The gitfs backend, when configured.
    pub fn gitfs(&self) -> Option<&Arc<GitFs>> {
        self.backends.iter().find_map(|b| match b {
            Backend::Git(g) => Some(g),
            Backend::Roots(_) => None,
        })
    }

    /// Every directory of the `roots` backends, each once (sorted): what a
    /// master stamps to know whether its state tree changed between two
    /// jobs (gitfs is stamped by its commits, [`Fileserver::commits`]).
    pub fn root_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = BTreeSet::new();
        for backend in &self.backends {
            if let Backend::Roots(roots) = backend {
                for env in roots.envs() {
                    dirs.extend(roots.roots(&env).iter().cloned());
                }
            }
        }
        dirs.into_iter().collect()
    }

    /// The file `salt://path` of `saltenv` is, from the first backend that
    /// has it; refused when it leads outside its root.
    pub fn resolve(&self, path: &str, saltenv: &str) -> Result<Option<PathBuf>, FileClientError> {
        for backend in &self.backends {
            let found = match backend {
                Backend::Roots(roots) => roots.resolve(path, saltenv)?,
                Backend::Git(git) => git.resolve_cached(saltenv, path, |mounts| {
                    for mount in mounts {
                        if let Some(p) = mount_resolve(mount, path)? {
                            return Ok(Some(p));
                        }
                    }
                    Ok(None)
                })?,
            };
            if let Some(p) = found.filter(|p| p.is_file()) {
                return Ok(Some(p));
            }
        }
        self.never_fetched(saltenv, path)?;
        Ok(None)
    }

    /// An error naming the gitfs remotes never fetched, when `saltenv` is
    /// served by no other backend (the file may be in those remotes).
    fn never_fetched(&self, saltenv: &str, path: &str) -> Result<(), FileClientError> {
        let Some(git) = self.gitfs() else {
            return Ok(());
        };
        let missing = git.unfetched();
        if missing.is_empty() || self.served_envs().iter().any(|e| e == saltenv) {
            return Ok(());
        }
        let remotes: Vec<String> = missing
            .iter()
            .map(|(id, why)| format!("{id} ({why})"))
            .collect();
        Err(FileClientError::Refused(format!(
            "salt://{path} cannot be served in saltenv '{saltenv}': gitfs remote {} has never been fetched; fix the remote and run 'halite-run fileserver.update backend=gitfs'",
            remotes.join(", ")
        )))
    }

    fn list(
        &self,
        saltenv: &str,
        prefix: &str,
        dirs: bool,
    ) -> Result<Vec<String>, FileClientError> {
        let mut out = BTreeSet::new();
        for backend in &self.backends {
            match backend {
                Backend::Roots(roots) => {
                    let listed = if dirs {
                        roots.list_dirs(saltenv, prefix)?
                    } else {
                        roots.list_files(saltenv, prefix)?
                    };
                    out.extend(listed);
                }
                Backend::Git(git) => {
                    let listed = git.list_cached(saltenv, prefix, dirs, |mounts| {
                        let mut all = Vec::new();
                        for mount in mounts {
                            all.extend(mount_list(mount, prefix, dirs)?);
                        }
                        Ok::<_, FileClientError>(all)
                    })?;
                    out.extend(listed.iter().cloned());
                }
            }
        }
        if out.is_empty() {
            self.never_fetched(saltenv, prefix)?;
        }
        Ok(out.into_iter().collect())
    }

    /// The saltenvs some backend serves now (the union, sorted).
    pub fn served_envs(&self) -> Vec<String> {
        let mut out = BTreeSet::new();
        for backend in &self.backends {
            match backend {
                Backend::Roots(roots) => out.extend(roots.envs()),
                Backend::Git(git) => out.extend(git.envs()),
            }
        }
        out.into_iter().collect()
    }

    /// The commit each gitfs remote serves each of `saltenvs` from:
    /// `"<remote> <saltenv>"` -> commit (what a minion's bundle names).
    pub fn commits(&self, saltenvs: &BTreeSet<String>) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        if let Some(git) = self.gitfs() {
            for env in saltenvs {
                for mount in git.mounts(env).iter() {
                    out.insert(format!("{} {env}", mount.remote), mount.commit.clone());
                }
            }
        }
        out
    }
}

/// `path` below a mount's prefix, or `None` when the mount does not hold it.
fn below_mountpoint<'a>(mount: &Mount, path: &'a str) -> Option<&'a str> {
    let path = path.trim_matches('/');
    if mount.mountpoint.is_empty() {
        return Some(path);
    }
    if path == mount.mountpoint {
        return Some("");
    }
    path.strip_prefix(mount.mountpoint.as_str())?
        .strip_prefix('/')
}

/// A client over one mount's directory (its symlink checks are the roots').
fn mount_client(mount: &Mount) -> LocalFileClient {
    LocalFileClient::new(BTreeMap::from([(String::new(), vec![mount.dir.clone()])]))
}

fn mount_resolve(mount: &Mount, path: &str) -> Result<Option<PathBuf>, FileClientError> {
    match below_mountpoint(mount, path) {
        Some(rel) if !rel.is_empty() => mount_client(mount).resolve(rel, ""),
        _ => Ok(None),
    }
}

fn mount_list(mount: &Mount, prefix: &str, dirs: bool) -> Result<Vec<String>, FileClientError> {
    let prefix = prefix.trim_matches('/');
    let client = mount_client(mount);
    let inner = match below_mountpoint(mount, prefix) {
        Some(rel) => rel.to_string(),
        // The prefix is above the mountpoint: the whole mount is below it.
        None if prefix.is_empty() || mount.mountpoint.starts_with(&format!("{prefix}/")) => {
            String::new()
        }
        None => return Ok(Vec::new()),
    };
    let listed = if dirs {
        client.list_dirs("", &inner)?
    } else {
        client.list_files("", &inner)?
    };
    if mount.mountpoint.is_empty() {
        return Ok(listed);
    }
    let mut out: Vec<String> = listed
        .into_iter()
        .map(|p| format!("{}/{p}", mount.mountpoint))
        .collect();
    if dirs && (prefix.is_empty() || mount.mountpoint.starts_with(prefix)) {
        // The mountpoint is a directory of the saltenv (not its parents:
        // Salt 3008's dir_list lists only the mountpoint itself).
        out.push(mount.mountpoint.clone());
    }
    Ok(out)
}

impl FileClient for Fileserver {
    fn cache_file(&self, path: &str, saltenv: &str) -> Result<Option<PathBuf>, FileClientError> {
        self.resolve(path, saltenv)
    }
    fn list_files(&self, saltenv: &str, prefix: &str) -> Result<Vec<String>, FileClientError> {
        self.list(saltenv, prefix, false)
    }
    fn list_dirs(&self, saltenv: &str, prefix: &str) -> Result<Vec<String>, FileClientError> {
        self.list(saltenv, prefix, true)
    }
    /// The saltenvs served, and `base` while a gitfs remote was never
    /// fetched: its top file is then looked for, and the error names the
    /// remote instead of "no top file".
    fn envs(&self) -> Vec<String> {
        let mut out: BTreeSet<String> = self.served_envs().into_iter().collect();
        if self.gitfs().is_some_and(|g| !g.unfetched().is_empty()) {
            out.insert("base".to_string());
        }
        out.into_iter().collect()
    }
}
