//! `salt://` on a minion: files come from the master's fileserver over
//! the session, by sha256, into a content-addressed cache
//! (`cachedir/files/<sha256>`), so an unchanged file is never sent twice —
//! not to the same minion, nor to the other identities of a swarm.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;

use halite_modules::exec::file::meta::sha256_file;
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
        if cached.is_file() {
            if sha256_file(&cached).is_ok_and(|got| got == sha) {
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
