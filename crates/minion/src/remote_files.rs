//! `salt://` on a minion: files come from the master's fileserver over
//! the session, by sha256, into a content-addressed cache
//! (`cachedir/files/<sha256>`), so an unchanged file is never sent twice —
//! not to the same minion, nor to the other identities of a swarm.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex, OnceLock, PoisonError};

use halite_modules::exec::file::meta::{sha256_file, FileStamp};
use halite_modules::fileclient::check_relative;
use halite_proto::msg::{ReplyBody, RequestBody};
use halite_state::{FileClient, FileClientError};
use sha2::{Digest, Sha256};

use crate::channel::MasterChannel;

/// saltenv -> `salt://` path -> sha256, as the master's bundle lists them.
pub type Manifest = BTreeMap<String, BTreeMap<String, String>>;

/// A [`FileClient`] over the master's fileserver with a local cache.
pub struct RemoteFileClient {
    master: MasterChannel,
    cache: PathBuf,
    manifest: Manifest,
    envs: OnceLock<Vec<String>>,
}

fn refused(e: impl std::fmt::Display) -> FileClientError {
    FileClientError::Refused(e.to_string())
}

fn io(path: &std::path::Path, source: std::io::Error) -> FileClientError {
    FileClientError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// What identifies one version of a file on disk.
type Stamp = FileStamp;

/// The stamp of `path` now (`None`: it cannot be read).
fn stamp(path: &Path) -> Option<Stamp> {
    FileStamp::of(path)
}

/// How many verified copies are remembered before the list starts over.
const MAX_VERIFIED: usize = 16_384;

/// Cached copies this process has seen hash to their name, with the stamp
/// they had then (issue 25). Every `file.managed` from `salt://` checks
/// its cached copy before deploying it; rehashing it on every state (the
/// bench's two 1 MB files, for every identity of a swarm) was 7.6% of a
/// warm highstate's CPU. A copy whose stamp changed since (rewritten,
/// replaced, damaged by a write) is hashed again.
static VERIFIED: LazyLock<Mutex<HashMap<PathBuf, Stamp>>> = LazyLock::new(Mutex::default);

/// Whether `cached` still hashes to `sha` (its file name): remembered
/// while its stamp is unchanged.
#[cfg(test)]
fn verified_copy(cached: &Path, sha: &str) -> bool {
    stamp(cached).is_some_and(|now| verified_as_of(cached, sha, now))
}

/// Whether `cached`, whose stamp is `now` (a regular file), still hashes to
/// `sha`: the caller's stat is the only one (issue 25: `cache_file` asked
/// `is_file` and then stamped the same path again).
fn verified_as_of(cached: &Path, sha: &str, now: Stamp) -> bool {
    let mut known = VERIFIED.lock().unwrap_or_else(PoisonError::into_inner);
    if known.get(cached) == Some(&now) {
        return true;
    }
    known.remove(cached);
    // Hashed without the lock held: other job threads' copies go on.
    drop(known);
    if !sha256_file(cached).is_ok_and(|got| got == sha) {
        return false;
    }
    remember_verified(cached, now);
    true
}

/// Remembers that `cached`, as of `stamp`, hashes to its name.
fn remember_verified(cached: &Path, stamp: Stamp) {
    let mut known = VERIFIED.lock().unwrap_or_else(PoisonError::into_inner);
    if known.len() >= MAX_VERIFIED {
        known.clear();
    }
    known.insert(cached.to_path_buf(), stamp);
}

impl RemoteFileClient {
    /// A client asking `master`, caching under `cache` (`cachedir/files`),
    /// trusting the hashes of `manifest` without asking.
    pub fn new(master: MasterChannel, cache: PathBuf, manifest: Manifest) -> Self {
        Self {
            master,
            cache,
            manifest,
            envs: OnceLock::new(),
        }
    }

    fn sha_of(&self, path: &str, saltenv: &str) -> Result<Option<String>, FileClientError> {
        if let Some(sha) = self.manifest.get(saltenv).and_then(|m| m.get(path)) {
            return Ok(Some(sha.clone()));
        }
        match self.master.request(RequestBody::FileStat {
            saltenv: saltenv.to_string(),
            path: path.to_string(),
        }) {
            Ok(ReplyBody::FileStat(stat)) => Ok(stat.map(|s| s.sha256)),
            Ok(other) => Err(refused(format!("unexpected answer {other:?}"))),
            Err(e) => Err(refused(e)),
        }
    }

    fn download(&self, path: &str, saltenv: &str, sha: &str) -> Result<PathBuf, FileClientError> {
        std::fs::create_dir_all(&self.cache).map_err(|e| io(&self.cache, e))?;
        let target = self.cache.join(sha);
        let mut tmp =
            tempfile::NamedTempFile::new_in(&self.cache).map_err(|e| io(&self.cache, e))?;
        let mut hasher = Sha256::new();
        let mut offset = 0u64;
        loop {
            let chunk = match self.master.request(RequestBody::FileChunk {
                saltenv: saltenv.to_string(),
                path: path.to_string(),
                offset,
                sha256: sha.to_string(),
            }) {
                Ok(ReplyBody::FileChunk(bytes)) => bytes,
                Ok(other) => return Err(refused(format!("unexpected answer {other:?}"))),
                Err(e) => return Err(refused(e)),
            };
            if chunk.is_empty() {
                break;
            }
            hasher.update(&chunk);
            tmp.write_all(&chunk).map_err(|e| io(tmp.path(), e))?;
            offset += chunk.len() as u64;
        }
        let got = hex::encode(hasher.finalize());
        if got != sha {
            return Err(refused(format!(
                "salt://{path} arrived with sha256 {got}, expected {sha}; it changed on the master during the transfer, run again"
            )));
        }
        tmp.persist(&target).map_err(|e| io(&target, e.error))?;
        // Hashed while it arrived: the next state need not read it again.
        if let Some(now) = stamp(&target) {
            remember_verified(&target, now);
        }
        tracing::debug!(path, saltenv, sha, "cached from the master");
        Ok(target)
    }

    fn list(
        &self,
        saltenv: &str,
        prefix: &str,
        dirs: bool,
    ) -> Result<Vec<String>, FileClientError> {
        match self.master.request(RequestBody::FileList {
            saltenv: saltenv.to_string(),
            prefix: prefix.to_string(),
            dirs,
        }) {
            Ok(ReplyBody::List(items)) => Ok(items),
            Ok(other) => Err(refused(format!("unexpected answer {other:?}"))),
            Err(e) => Err(refused(e)),
        }
    }
}

impl FileClient for RemoteFileClient {
    fn cache_file(&self, path: &str, saltenv: &str) -> Result<Option<PathBuf>, FileClientError> {
        let path = check_relative(path.trim_start_matches('/'))?
            .to_string_lossy()
            .into_owned();
        let Some(sha) = self.sha_of(&path, saltenv)? else {
            return Ok(None);
        };
        if !is_sha256(&sha) {
            return Err(refused(format!(
                "the master sent a malformed hash for salt://{path}"
            )));
        }
        let cached = self.cache.join(&sha);
        // A cached copy is used only while it still hashes to its name: a
        // damaged or tampered cache is fetched again, never deployed.
        // One stat: a missing, unreadable or non-regular copy has no stamp.
        if let Some(now) = stamp(&cached) {
            if verified_as_of(&cached, &sha, now) {
                return Ok(Some(cached));
            }
            tracing::warn!(path = %path, "cached copy does not match its sha256; fetching it again");
            let _ = std::fs::remove_file(&cached);
        }
        self.download(&path, saltenv, &sha).map(Some)
    }

    fn list_files(&self, saltenv: &str, prefix: &str) -> Result<Vec<String>, FileClientError> {
        self.list(saltenv, prefix, false)
    }

    fn list_dirs(&self, saltenv: &str, prefix: &str) -> Result<Vec<String>, FileClientError> {
        self.list(saltenv, prefix, true)
    }

    fn envs(&self) -> Vec<String> {
        self.envs
            .get_or_init(|| match self.master.request(RequestBody::FileEnvs) {
                Ok(ReplyBody::List(envs)) => envs,
                _ => vec!["base".to_string()],
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test")]
    use super::*;

    fn sha(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    #[test]
    fn a_verified_copy_changed_on_disk_is_hashed_again_and_refused() {
        let dir = tempfile::tempdir().unwrap();
        let good = b"the master's file\n".to_vec();
        let name = sha(&good);
        let cached = dir.path().join(&name);
        std::fs::write(&cached, &good).unwrap();
        assert!(verified_copy(&cached, &name));
        assert!(verified_copy(&cached, &name), "unchanged: still good");

        // Damaged in place, same size, its mtime put back: ctime moved,
        // so it is hashed again and refused.
        let mtime = std::fs::metadata(&cached).unwrap().modified().unwrap();
        let mut bad = good.clone();
        bad[0] ^= 0x20;
        std::fs::write(&cached, &bad).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&cached)
            .unwrap()
            .set_times(std::fs::FileTimes::new().set_modified(mtime))
            .unwrap();
        assert_eq!(
            std::fs::metadata(&cached).unwrap().modified().unwrap(),
            mtime
        );
        assert!(!verified_copy(&cached, &name));

        // Replaced by another file with the right bytes: good again.
        let other = dir.path().join("other");
        std::fs::write(&other, &good).unwrap();
        std::fs::rename(&other, &cached).unwrap();
        assert!(verified_copy(&cached, &name));
        // Gone: not a copy at all.
        std::fs::remove_file(&cached).unwrap();
        assert!(!verified_copy(&cached, &name));
    }
}
