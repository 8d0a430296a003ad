//! `salt://` served from local file roots (`halite-call --local`, and the
//! master's own fileserver).

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use halite_state::{FileClient, FileClientError};

/// A [`FileClient`] over `file_roots`: saltenv -> directories searched in order.
#[derive(Debug, Clone, Default)]
pub struct LocalFileClient {
    roots: BTreeMap<String, Vec<PathBuf>>,
    real_roots: RealRoots,
}

/// The directory a root names: its device and inode.
type DirId = (u64, u64);

/// The real path of each file root, resolved once and kept while the root
/// still leads to the same directory (issue 25: canonicalizing the root for
/// every `salt://` source was 2 `getcwd` and 4 `readlink` per state).
///
/// Salt's fileserver takes the root's `realpath` on every lookup, so a root
/// that is a symlink serves what it points to now. Here a kept real path is
/// used only while `stat` of the root and `stat` of the kept path both give
/// the directory it was resolved from: a root retargeted (`ln -sfn`),
/// replaced, or moved is resolved again on its next lookup. A source found
/// outside a kept real path is checked against a fresh one before it is
/// refused, so a stale entry can delay nothing but its own refresh.
#[derive(Debug, Clone, Default)]
struct RealRoots(Arc<Mutex<HashMap<PathBuf, (PathBuf, DirId)>>>);

/// Whether `root/rel` exists with no symlink among `rel`'s own components
/// (`rel` already checked: relative, no `..`). Then it is inside the root,
/// wherever the root itself leads, and Salt's `realpath` check of it would
/// pass: one `lstat` per component, where resolving the source and its
/// root took a `readlink` per component of both. Anything else (a link, a
/// component that cannot be read, no component at all) is checked the
/// long way.
/// `Some(is a regular file)` when so, `None` for the long way.
fn no_link_below(root: &Path, rel: &Path) -> Option<bool> {
    let mut path = root.to_path_buf();
    let mut last = None;
    for part in rel.components() {
        if let Component::Normal(name) = part {
            path.push(name);
            match std::fs::symlink_metadata(&path) {
                Ok(md) if !md.file_type().is_symlink() => last = Some(md.is_file()),
                _ => return None,
            }
        }
    }
    last
}

fn dir_id(path: &Path) -> Option<DirId> {
    std::fs::metadata(path).ok().map(|md| (md.dev(), md.ino()))
}

impl RealRoots {
    /// The real path of `root` now (`root` itself when it cannot be
    /// resolved, as before).
    fn of(&self, root: &Path) -> PathBuf {
        let kept = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(root)
            .cloned();
        if let Some((real, id)) = kept {
            if dir_id(root) == Some(id) && dir_id(&real) == Some(id) {
                return real;
            }
        }
        self.fresh(root)
    }

    /// Resolves `root` again and keeps what it gives.
    fn fresh(&self, root: &Path) -> PathBuf {
        let Ok(real) = root.canonicalize() else {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(root);
            return root.to_path_buf();
        };
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match dir_id(&real) {
            Some(id) => {
                kept.insert(root.to_path_buf(), (real.clone(), id));
            }
            None => {
                kept.remove(root);
            }
        }
        real
    }

    /// Whether `real` (a canonical path) lies inside `root`: against the
    /// kept real path, and when not, against a fresh one.
    fn contains(&self, root: &Path, real: &Path) -> bool {
        real.starts_with(self.of(root)) || real.starts_with(self.fresh(root))
    }
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
        LocalFileClient {
            roots,
            real_roots: RealRoots::default(),
        }
    }

    /// The directories of `saltenv`.
    pub fn roots(&self, saltenv: &str) -> &[PathBuf] {
        self.roots.get(saltenv).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Resolves `path` to a file inside one of the roots, refusing anything
    /// (including a symlink) that leads outside that root.
    pub fn resolve(&self, path: &str, saltenv: &str) -> Result<Option<PathBuf>, FileClientError> {
        self.find(path, saltenv).map(|found| found.map(|(p, _)| p))
    }

    /// [`Self::resolve`], and whether the path found is a regular file
    /// when the way there told it (`None`: not known).
    fn find(
        &self,
        path: &str,
        saltenv: &str,
    ) -> Result<Option<(PathBuf, Option<bool>)>, FileClientError> {
        let rel = check_relative(path.trim_start_matches('/'))?;
        for root in self.roots(saltenv) {
            let candidate = root.join(rel);
            if let Some(is_file) = no_link_below(root, rel) {
                return Ok(Some((candidate, Some(is_file))));
            }
            let real = match candidate.canonicalize() {
                Ok(real) => real,
                Err(_) if !candidate.exists() => continue,
                Err(source) => {
                    return Err(FileClientError::Io {
                        path: candidate.display().to_string(),
                        source,
                    })
                }
            };
            if !self.real_roots.contains(root, &real) {
                return Err(FileClientError::Refused(format!(
                    "refusing '{path}': it leads outside the file root"
                )));
            }
            return Ok(Some((candidate, None)));
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
            let real_root = self.real_roots.fresh(root);
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
        // A regular file's `lstat` on the way there answers `is_file`.
        self.find(path, saltenv).map(|found| {
            found.and_then(|(p, is_file)| is_file.unwrap_or_else(|| p.is_file()).then_some(p))
        })
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test")]
    use super::*;
    use std::os::unix::fs::symlink;

    fn client(root: &Path) -> LocalFileClient {
        LocalFileClient::new(BTreeMap::from([(
            "base".to_string(),
            vec![root.to_path_buf()],
        )]))
    }

    fn served(files: &LocalFileClient, path: &str) -> Option<String> {
        files
            .cache_file(path, "base")
            .unwrap()
            .map(|p| std::fs::read_to_string(p).unwrap())
    }

    fn refused(files: &LocalFileClient, path: &str) -> bool {
        matches!(
            files.cache_file(path, "base"),
            Err(FileClientError::Refused(_))
        )
    }

    #[test]
    fn a_root_that_is_a_symlink_serves_where_it_points_now() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(a.join("motd"), "from a\n").unwrap();
        std::fs::write(b.join("motd"), "from b\n").unwrap();
        std::fs::write(b.join("only-b"), "b's own\n").unwrap();
        // b links back into a: outside b, inside the root's old target.
        symlink(a.join("motd"), b.join("into-a")).unwrap();
        std::fs::write(dir.path().join("secret"), "no\n").unwrap();
        symlink(dir.path().join("secret"), a.join("out")).unwrap();
        let root = dir.path().join("srv");
        symlink(&a, &root).unwrap();
        let files = client(&root);

        assert_eq!(served(&files, "motd").as_deref(), Some("from a\n"));
        assert_eq!(served(&files, "only-b"), None);
        assert!(refused(&files, "out"), "a link out of the root");

        // Retargeted between two lookups, as a release switch does.
        std::fs::remove_file(&root).unwrap();
        symlink(&b, &root).unwrap();
        // First: no lookup inside the root has refreshed it yet.
        assert!(
            refused(&files, "into-a"),
            "the root's old target is outside it now"
        );
        assert_eq!(served(&files, "motd").as_deref(), Some("from b\n"));
        assert_eq!(served(&files, "only-b").as_deref(), Some("b's own\n"));
        // And back: what a serves is served again.
        std::fs::remove_file(&root).unwrap();
        symlink(&a, &root).unwrap();
        assert_eq!(served(&files, "motd").as_deref(), Some("from a\n"));
        assert_eq!(served(&files, "only-b"), None);
    }

    #[test]
    fn a_root_moved_away_is_resolved_again() {
        let dir = tempfile::tempdir().unwrap();
        let (old, moved) = (dir.path().join("old"), dir.path().join("moved"));
        std::fs::create_dir_all(&old).unwrap();
        std::fs::write(old.join("motd"), "kept\n").unwrap();
        // A link that leads to `old/secret`: inside the root only while
        // the root's directory is at `old`.
        symlink(old.join("secret"), old.join("via")).unwrap();
        std::fs::write(old.join("secret"), "inside\n").unwrap();
        let root = dir.path().join("srv");
        symlink(&old, &root).unwrap();
        let files = client(&root);
        assert_eq!(served(&files, "via").as_deref(), Some("inside\n"));

        // The directory moved (the root follows it), and another took its
        // old place: `via` now leads out of the root.
        std::fs::rename(&old, &moved).unwrap();
        std::fs::create_dir_all(&old).unwrap();
        std::fs::write(old.join("secret"), "someone else's\n").unwrap();
        std::fs::remove_file(&root).unwrap();
        symlink(&moved, &root).unwrap();
        assert!(refused(&files, "via"), "the old place is not the root");
        assert_eq!(served(&files, "motd").as_deref(), Some("kept\n"));
    }

    #[test]
    fn a_link_among_a_sources_directories_is_followed_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let (root, outside) = (dir.path().join("srv"), dir.path().join("outside"));
        std::fs::create_dir_all(root.join("real/sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("real/sub/conf"), "inside\n").unwrap();
        std::fs::write(outside.join("conf"), "outside\n").unwrap();
        symlink(root.join("real"), root.join("alias")).unwrap();
        symlink(&outside, root.join("real/away")).unwrap();
        let files = client(&root);
        assert_eq!(served(&files, "real/sub/conf").as_deref(), Some("inside\n"));
        assert_eq!(
            served(&files, "alias/sub/conf").as_deref(),
            Some("inside\n")
        );
        assert!(refused(&files, "real/away/conf"), "a directory link out");
        assert!(refused(&files, "alias/away/conf"), "two links, then out");
        assert_eq!(served(&files, "real/sub/none"), None);
        assert_eq!(served(&files, "real/sub"), None, "a directory is no file");
    }

    #[test]
    fn a_missing_root_or_source_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("srv");
        let files = client(&root);
        assert_eq!(served(&files, "motd"), None);
        std::fs::create_dir_all(&root).unwrap();
        assert_eq!(served(&files, "motd"), None);
        std::fs::write(root.join("motd"), "now\n").unwrap();
        assert_eq!(served(&files, "motd").as_deref(), Some("now\n"));
    }
}
