//! Minion keys on disk, in Salt's layout under `pki_dir`: `minions/`
//! (accepted), `minions_pre/` (pending), `minions_rejected/`,
//! `minions_denied/`; one 0600 file per minion holding its public key.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use halite_proto::keyfile::{
    ensure_private_dir, read_public, write_private, write_private_unsynced, KeyFileError,
};
use halite_proto::msg::KeyStatus;
use halite_proto::{validate_minion_id, InvalidMinionId, PublicKey};

/// Why a key operation failed.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// A minion id that could escape the key directory.
    #[error(transparent)]
    InvalidId(#[from] InvalidMinionId),
    /// A key file could not be read or written.
    #[error(transparent)]
    File(#[from] KeyFileError),
    /// The key directory is not readable and writable by this user.
    #[error("{} is not readable and writable by this user (uid {uid}; the directory belongs to uid {owner}): run this as root (sudo) or as the user that owns pki_dir", path.display())]
    NotPermitted {
        /// The directory.
        path: PathBuf,
        /// Who runs this.
        uid: u32,
        /// Who owns the directory.
        owner: u32,
    },
    /// The key directory could not be changed.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done (`move`, `delete`...).
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
}

/// The four key directories of a master.
#[derive(Debug, Clone)]
pub struct KeyStore {
    pki_dir: PathBuf,
}

/// Salt's directory name for each key status.
pub fn status_dir(status: KeyStatus) -> &'static str {
    match status {
        KeyStatus::Accepted => "minions",
        KeyStatus::Pending => "minions_pre",
        KeyStatus::Rejected => "minions_rejected",
        KeyStatus::Denied => "minions_denied",
    }
}

/// Every status, in the order a lookup checks them.
pub const ALL_STATUSES: [KeyStatus; 4] = [
    KeyStatus::Accepted,
    KeyStatus::Pending,
    KeyStatus::Rejected,
    KeyStatus::Denied,
];

/// Flushes the filesystem holding `dir` (syncfs(2)): one flush for a batch.
fn sync_filesystem(dir: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let handle = fs::File::open(dir)?;
    // SAFETY: syncfs takes an open descriptor, which `handle` keeps open.
    if unsafe { libc::syncfs(handle.as_raw_fd()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Refuses a `pki_dir` this process cannot read and write (a non-root
/// user running `halite-key`) with an error that says what to do, rather
/// than a failure to create a directory that exists.
fn check_access(dir: &Path) -> Result<(), KeyError> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let Ok(c_path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return Ok(());
    };
    // SAFETY: access(2) reads a NUL-terminated path and nothing else.
    let ok = unsafe { libc::access(c_path.as_ptr(), libc::R_OK | libc::W_OK | libc::X_OK) } == 0;
    if ok {
        return Ok(());
    }
    Err(KeyError::NotPermitted {
        path: dir.to_path_buf(),
        // SAFETY: geteuid has no preconditions.
        uid: unsafe { libc::geteuid() },
        owner: fs::metadata(dir).map(|m| m.uid()).unwrap_or(0),
    })
}

impl KeyStore {
    /// Opens (and creates) the key directories under `pki_dir`.
    pub fn open(pki_dir: &Path) -> Result<Self, KeyError> {
        if let Err(e) = ensure_private_dir(pki_dir) {
            // Not allowed to create it: say whose directory is in the way.
            if let KeyFileError::Io { source, .. } = &e {
                if source.kind() == std::io::ErrorKind::PermissionDenied {
                    let mut existing = pki_dir;
                    while !existing.exists() {
                        existing = existing.parent().unwrap_or(Path::new("/"));
                    }
                    check_access(existing)?;
                }
            }
            return Err(e.into());
        }
        check_access(pki_dir)?;
        for status in ALL_STATUSES {
            ensure_private_dir(&pki_dir.join(status_dir(status)))?;
        }
        Ok(Self {
            pki_dir: pki_dir.to_path_buf(),
        })
    }

    /// The pki_dir.
    pub fn pki_dir(&self) -> &Path {
        &self.pki_dir
    }

    fn path(&self, status: KeyStatus, id: &str) -> Result<PathBuf, KeyError> {
        validate_minion_id(id)?;
        Ok(self.pki_dir.join(status_dir(status)).join(id))
    }

    /// Where `id` stands: (status, key), or `None` when unknown. The
    /// denied directory is checked last: a denied key does not hide an
    /// accepted one.
    pub fn status(&self, id: &str) -> Result<Option<(KeyStatus, PublicKey)>, KeyError> {
        for status in ALL_STATUSES {
            let path = self.path(status, id)?;
            if path.is_file() {
                return Ok(Some((status, read_public(&path)?)));
            }
        }
        Ok(None)
    }

    /// Stores `key` for `id` under `status` (removing it from pending
    /// when it moves elsewhere).
    pub fn put(&self, status: KeyStatus, id: &str, key: &PublicKey) -> Result<(), KeyError> {
        let path = self.path(status, id)?;
        write_private(&path, format!("{}\n", key.to_hex()).as_bytes())?;
        Ok(())
    }

    /// Stores many keys at once with a single sync of the filesystem at the
    /// end instead of one fsync per key (a burst of new minions, or a
    /// flood of Hellos, costs one disk flush per batch). One result per key.
    pub fn put_many(&self, keys: &[(KeyStatus, String, PublicKey)]) -> Vec<Result<(), KeyError>> {
        let results: Vec<Result<(), KeyError>> = keys
            .iter()
            .map(|(status, id, key)| {
                let path = self.path(*status, id)?;
                write_private_unsynced(&path, format!("{}\n", key.to_hex()).as_bytes())?;
                Ok(())
            })
            .collect();
        if results.iter().any(Result::is_ok) {
            if let Err(e) = sync_filesystem(&self.pki_dir) {
                tracing::warn!(error = %e, "cannot sync the new keys to disk");
            }
        }
        results
    }

    /// Moves `id` from `from` to `to`; `false` when it was not in `from`.
    pub fn transition(&self, id: &str, from: KeyStatus, to: KeyStatus) -> Result<bool, KeyError> {
        let src = self.path(from, id)?;
        if !src.is_file() {
            return Ok(false);
        }
        let dst = self.path(to, id)?;
        fs::rename(&src, &dst).map_err(|source| KeyError::Io {
            action: "move",
            path: src.clone(),
            source,
        })?;
        Ok(true)
    }

    /// Removes `id` from every directory; the statuses it was removed from.
    pub fn delete(&self, id: &str) -> Result<Vec<KeyStatus>, KeyError> {
        let mut removed = Vec::new();
        for status in ALL_STATUSES {
            let path = self.path(status, id)?;
            if path.is_file() {
                fs::remove_file(&path).map_err(|source| KeyError::Io {
                    action: "remove",
                    path: path.clone(),
                    source,
                })?;
                removed.push(status);
            }
        }
        Ok(removed)
    }

    /// The ids under `status`, sorted. Files whose names are not valid ids are skipped.
    pub fn ids(&self, status: KeyStatus) -> Result<Vec<String>, KeyError> {
        let dir = self.pki_dir.join(status_dir(status));
        let entries = fs::read_dir(&dir).map_err(|source| KeyError::Io {
            action: "list",
            path: dir.clone(),
            source,
        })?;
        let mut ids: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().map(|t| t.is_file()).unwrap_or(false))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| validate_minion_id(name).is_ok())
            .collect();
        ids.sort();
        Ok(ids)
    }

    /// Every status with its ids.
    pub fn list(&self) -> Result<BTreeMap<&'static str, Vec<String>>, KeyError> {
        let mut out = BTreeMap::new();
        for status in ALL_STATUSES {
            out.insert(status_dir(status), self.ids(status)?);
        }
        Ok(out)
    }

    /// The accepted keys, by id.
    pub fn accepted(&self) -> Result<HashMap<String, PublicKey>, KeyError> {
        let mut out = HashMap::new();
        for id in self.ids(KeyStatus::Accepted)? {
            if let Ok(key) = read_public(&self.path(KeyStatus::Accepted, &id)?) {
                out.insert(id, key);
            }
        }
        Ok(out)
    }

    /// A cheap fingerprint of the accepted directory (its mtime and entry
    /// count), so the master rereads keys only when it changed.
    pub fn accepted_stamp(&self) -> Option<(std::time::SystemTime, u64)> {
        let meta = fs::metadata(self.pki_dir.join(status_dir(KeyStatus::Accepted))).ok()?;
        use std::os::unix::fs::MetadataExt;
        Some((
            meta.modified().ok()?,
            meta.nlink() ^ meta.ino() ^ (meta.ctime_nsec() as u64),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use halite_proto::Identity;

    #[test]
    fn keys_move_between_states_and_ids_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let store = KeyStore::open(&dir.path().join("pki")).unwrap();
        let key = Identity::generate().unwrap().public();
        store.put(KeyStatus::Pending, "web1", &key).unwrap();
        assert_eq!(
            store.status("web1").unwrap(),
            Some((KeyStatus::Pending, key))
        );
        assert!(store
            .transition("web1", KeyStatus::Pending, KeyStatus::Accepted)
            .unwrap());
        assert_eq!(store.ids(KeyStatus::Accepted).unwrap(), vec!["web1"]);
        assert!(store.ids(KeyStatus::Pending).unwrap().is_empty());
        assert_eq!(store.accepted().unwrap().get("web1"), Some(&key));
        assert_eq!(store.delete("web1").unwrap(), vec![KeyStatus::Accepted]);
        assert_eq!(store.status("web1").unwrap(), None);
        assert!(matches!(
            store.put(KeyStatus::Pending, "../evil", &key),
            Err(KeyError::InvalidId(_))
        ));
        assert!(matches!(store.status("a/b"), Err(KeyError::InvalidId(_))));
        assert!(!dir.path().join("evil").exists());
    }

    #[test]
    fn the_longest_id_is_stored_and_temp_files_are_never_ids() {
        let dir = tempfile::tempdir().unwrap();
        let store = KeyStore::open(&dir.path().join("pki")).unwrap();
        let key = Identity::generate().unwrap().public();
        let longest = "w".repeat(halite_proto::id::MAX_MINION_ID_BYTES);
        store.put(KeyStatus::Pending, &longest, &key).unwrap();
        assert_eq!(
            store.status(&longest).unwrap(),
            Some((KeyStatus::Pending, key))
        );
        // `web.tmp` is a valid id: writing `web` must neither touch nor hide it.
        let other = Identity::generate().unwrap().public();
        store.put(KeyStatus::Pending, "web.tmp", &other).unwrap();
        store.put(KeyStatus::Pending, "web", &key).unwrap();
        store.put(KeyStatus::Pending, "web", &key).unwrap();
        assert_eq!(
            store.status("web.tmp").unwrap(),
            Some((KeyStatus::Pending, other))
        );
        let listed = store.ids(KeyStatus::Pending).unwrap();
        assert_eq!(
            listed,
            vec!["web".to_string(), "web.tmp".to_string(), longest]
        );
        // No temporary file is left behind.
        let files = std::fs::read_dir(dir.path().join("pki/minions_pre"))
            .unwrap()
            .count();
        assert_eq!(files, 3);
    }
}
