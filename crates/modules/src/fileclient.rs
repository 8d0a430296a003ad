//! `salt://` served from local file roots (`halite-call --local`, and the
//! master's own fileserver).

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use halite_state::{FileClient, FileClientError};

/// A [`FileClient`] over `file_roots`: saltenv -> directories searched in order.
#[derive(Debug, Clone, Default)]
pub struct LocalFileClient {
    roots: BTreeMap<String, Vec<PathBuf>>,
}

/// Checks that a `salt://` path stays inside its root: relative, no `..`.
pub fn check_relative(path: &str) -> Result<&Path, FileClientError> {
    let p = Path::new(path);
    if p.is_absolute() || path.contains('\0') {
        return Err(FileClientError::Refused(format!(
            "refusing absolute or invalid path '{path}'"
        )));
    }
    for c in p.components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            _ => {
                return Err(FileClientError::Refused(format!(
                    "refusing path '{path}' that leaves the file root"
                )))
            }
        }
    }
    Ok(p)
}

impl LocalFileClient {
    /// A client over `roots` (saltenv -> directories).
    pub fn new(roots: BTreeMap<String, Vec<PathBuf>>) -> Self {
        LocalFileClient { roots }
    }

    /// The directories of `saltenv`.
    pub fn roots(&self, saltenv: &str) -> &[PathBuf] {
        self.roots.get(saltenv).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Resolves `path` to a file inside one of the roots, refusing anything
    /// (including a symlink) that leads outside that root.
    pub fn resolve(&self, path: &str, saltenv: &str) -> Result<Option<PathBuf>, FileClientError> {
        let rel = check_relative(path.trim_start_matches('/'))?;
        for root in self.roots(saltenv) {
            let candidate = root.join(rel);
            if !candidate.exists() {
                continue;
            }
            let real = candidate
                .canonicalize()
                .map_err(|source| FileClientError::Io {
                    path: candidate.display().to_string(),
                    source,
                })?;
            let real_root = root.canonicalize().unwrap_or_else(|_| root.clone());
            if !real.starts_with(&real_root) {
                return Err(FileClientError::Refused(format!(
                    "refusing '{path}': it leads outside the file root"
                )));
            }
            return Ok(Some(candidate));
        }
        Ok(None)
    }

    fn walk(
        &self,
        saltenv: &str,
        prefix: &str,
        dirs: bool,
    ) -> Result<Vec<String>, FileClientError> {
        let prefix = prefix.trim_matches('/');
        if !prefix.is_empty() {
            check_relative(prefix)?;
        }
        let mut out = std::collections::BTreeSet::new();
        for root in self.roots(saltenv) {
            let real_root = root.canonicalize().unwrap_or_else(|_| root.clone());
            let start = if prefix.is_empty() {
                root.clone()
            } else {
                root.join(prefix)
            };
            if !start
                .canonicalize()
                .is_ok_and(|real| real.starts_with(&real_root))
            {
                continue;
            }
            let mut stack = vec![start];
            while let Some(dir) = stack.pop() {
                let Ok(rd) = std::fs::read_dir(&dir) else {
                    continue;
                };
                for entry in rd.flatten() {
                    let p = entry.path();
                    let Ok(rel) = p.strip_prefix(root) else {
                        continue;
                    };
                    let rel = rel.to_string_lossy().replace('\\', "/");
                    // A symlink is listed only when it stays inside the root.
                    let is_link = entry.file_type().is_ok_and(|t| t.is_symlink());
                    if is_link
                        && !p
                            .canonicalize()
                            .is_ok_and(|real| real.starts_with(&real_root))
                    {
                        continue;
                    }
                    let is_dir = p.is_dir();
                    if is_dir {
                        if dirs {
                            out.insert(rel);
                        }
                        stack.push(p);
                    } else if !dirs {
                        out.insert(rel);
                    }
                }
            }
        }
        Ok(out.into_iter().collect())
    }
}

impl FileClient for LocalFileClient {
    fn cache_file(&self, path: &str, saltenv: &str) -> Result<Option<PathBuf>, FileClientError> {
        self.resolve(path, saltenv)
            .map(|p| p.filter(|p| p.is_file()))
    }
    fn list_files(&self, saltenv: &str, prefix: &str) -> Result<Vec<String>, FileClientError> {
        self.walk(saltenv, prefix, false)
    }
    fn list_dirs(&self, saltenv: &str, prefix: &str) -> Result<Vec<String>, FileClientError> {
        self.walk(saltenv, prefix, true)
    }
    fn envs(&self) -> Vec<String> {
        self.roots.keys().cloned().collect()
    }
}
