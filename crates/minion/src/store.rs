//! Returns not yet acknowledged by the master. On disk for a real minion
//! (`cachedir/returns/<jid>`, written before the return is sent), so a
//! master restart, or a minion restart, loses none; in memory for swarm
//! identities.
//!
//! A return is held as an [`Arc<PackedReturn>`] from the job's end to its
//! acknowledgement (issue 25): the store, the first send and every resend
//! share one copy of the packed bytes (a 1,000-state return is ~0.3 MB),
//! none is copied to be kept or sent again.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use halite_proto::msg::{JobReturn, PackedReturn};

/// Where unacknowledged returns wait, as sent: their value encoded once
/// ([`PackedReturn`], issue 25), the same bytes kept and sent.
pub enum ReturnStore {
    /// One file per return in this directory (survives a restart).
    Disk(PathBuf),
    /// In memory (swarm identities, `halite-call`, tests), shared with
    /// the link that sends them.
    Memory(Mutex<BTreeMap<String, Arc<PackedReturn>>>),
}

impl ReturnStore {
    /// A store in `dir` (created 0700).
    pub fn disk(dir: PathBuf) -> std::io::Result<Self> {
        std::fs::create_dir_all(&dir)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        Ok(ReturnStore::Disk(dir))
    }

    /// An in-memory store.
    pub fn memory() -> Self {
        ReturnStore::Memory(Mutex::new(BTreeMap::new()))
    }

    /// Keeps `ret` until [`ReturnStore::remove`]. On disk, the gpg
    /// secrets its minion's pillar holds are masked (`**********`), as the
    /// master masks them in its job cache: the return sent now is the
    /// minion's own, and one sent again from disk (after a restart of
    /// either side) reaches the job cache as the master would store it.
    ///
    /// On disk it is one write and a rename, not synced: the file is there
    /// for a restarted minion (the kernel keeps it whatever happens to the
    /// process); only a crash of the host itself within the moments before
    /// the master acknowledges it can lose it, which Salt's minion, which
    /// keeps no return at all, loses too. A sync per return cost every job
    /// a disk flush (a `test.ping` each second was a flush each second).
    pub fn put(&self, ret: &Arc<PackedReturn>) -> std::io::Result<()> {
        match self {
            ReturnStore::Disk(dir) => {
                let masked;
                let ret: &PackedReturn = match halite_logging::redact::secrets_of(&ret.id) {
                    Some(secrets) => {
                        // Decoded only to mask: a minion with gpg secrets.
                        let plain = PackedReturn::clone(ret)
                            .unpack()
                            .map_err(std::io::Error::other)?;
                        masked = PackedReturn::pack(JobReturn {
                            ret: secrets.mask(&plain.ret),
                            fun_args: plain.fun_args.iter().map(|a| secrets.mask(a)).collect(),
                            ..plain
                        })
                        .map_err(std::io::Error::other)?;
                        &masked
                    }
                    None => ret,
                };
                let bytes = halite_proto::encode(ret).map_err(std::io::Error::other)?;
                halite_proto::keyfile::write_private_unsynced(&dir.join(&ret.jid), &bytes)
                    .map_err(std::io::Error::other)
            }
            ReturnStore::Memory(m) => {
                m.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(ret.jid.clone(), Arc::clone(ret));
                Ok(())
            }
        }
    }

    /// Whether the return of `jid` waits here (the job already ran).
    pub fn has(&self, jid: &str) -> bool {
        if !halite_proto::jid::is_jid(jid) {
            return false;
        }
        match self {
            ReturnStore::Disk(dir) => dir.join(jid).is_file(),
            ReturnStore::Memory(m) => m
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(jid),
        }
    }

    /// Forgets the return of `jid` (the master committed it).
    pub fn remove(&self, jid: &str) {
        if !halite_proto::jid::is_jid(jid) {
            return;
        }
        match self {
            ReturnStore::Disk(dir) => {
                let _ = std::fs::remove_file(dir.join(jid));
            }
            ReturnStore::Memory(m) => {
                m.lock().unwrap_or_else(|p| p.into_inner()).remove(jid);
            }
        }
    }

    /// Every return still waiting, oldest jid first (a file an older
    /// minion wrote, with its value decoded, is read too). In memory, the
    /// very returns kept (shared, not copied).
    pub fn pending(&self) -> Vec<Arc<PackedReturn>> {
        match self {
            ReturnStore::Disk(dir) => {
                let mut names: Vec<String> = std::fs::read_dir(dir)
                    .map(|it| {
                        it.filter_map(|e| e.ok()?.file_name().into_string().ok())
                            .collect()
                    })
                    .unwrap_or_default();
                names.retain(|n| halite_proto::jid::is_jid(n));
                names.sort();
                let mut out = Vec::new();
                for name in &names {
                    let path = dir.join(name);
                    let read = std::fs::read(&path)
                        .map_err(|e| e.to_string())
                        .and_then(|b| read_kept(&b));
                    match read {
                        Ok(ret) => out.push(Arc::new(ret)),
                        // Kept for a look; never blocks the other returns.
                        Err(e) => {
                            tracing::warn!(path = %path.display(), error = %e, "a stored return cannot be read; skipped")
                        }
                    }
                }
                out
            }
            ReturnStore::Memory(m) => m
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .values()
                .map(Arc::clone)
                .collect(),
        }
    }
}

/// A kept return's file: this minion's packed form, or an older one's.
fn read_kept(bytes: &[u8]) -> Result<PackedReturn, String> {
    if let Ok(packed) = halite_proto::decode::<PackedReturn>(bytes) {
        return Ok(packed);
    }
    let ret = halite_proto::decode::<JobReturn>(bytes).map_err(|e| e.to_string())?;
    PackedReturn::pack(ret).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_returns_survive_until_removed() {
        let dir = tempfile::tempdir().unwrap();
        let ret = JobReturn {
            jid: "20261121211521000042".into(),
            id: "web1".into(),
            fun: "test.ping".into(),
            fun_args: vec![],
            ret: serde_json::Value::Bool(true),
            retcode: 0,
            success: true,
        };
        let store = ReturnStore::disk(dir.path().join("returns")).unwrap();
        store
            .put(&Arc::new(PackedReturn::pack(ret.clone()).unwrap()))
            .unwrap();
        let reopened = ReturnStore::disk(dir.path().join("returns")).unwrap();
        let back: Vec<JobReturn> = reopened
            .pending()
            .into_iter()
            .map(|p| Arc::unwrap_or_clone(p).unpack().unwrap())
            .collect();
        assert_eq!(back, vec![ret.clone()]);
        // A file an older minion kept (the value decoded) is still sent.
        let older = JobReturn {
            jid: "20261121211521000041".into(),
            ..ret.clone()
        };
        std::fs::write(
            dir.path().join("returns").join(&older.jid),
            halite_proto::encode(&older).unwrap(),
        )
        .unwrap();
        let back: Vec<JobReturn> = reopened
            .pending()
            .into_iter()
            .map(|p| Arc::unwrap_or_clone(p).unpack().unwrap())
            .collect();
        assert_eq!(back, vec![older.clone(), ret.clone()]);
        reopened.remove(&older.jid);
        assert!(reopened.has(&ret.jid) && !reopened.has("20261121211521000043"));
        reopened.remove("../../etc/passwd");
        reopened.remove(&ret.jid);
        assert!(store.pending().is_empty());
    }

    #[test]
    fn a_spooled_return_has_its_minions_secrets_masked() {
        let dir = tempfile::tempdir().unwrap();
        let secret = "Spooled-Secret-5150";
        halite_logging::redact::set_secrets("spool1", &[secret.to_string()]);
        let ret = JobReturn {
            jid: "20261121211521000044".into(),
            id: "spool1".into(),
            fun: "cmd.run".into(),
            fun_args: vec![serde_json::json!(format!("echo {secret}"))],
            ret: serde_json::json!(format!("pw={secret}")),
            retcode: 0,
            success: true,
        };
        let store = ReturnStore::disk(dir.path().join("returns")).unwrap();
        store
            .put(&Arc::new(PackedReturn::pack(ret.clone()).unwrap()))
            .unwrap();
        let raw = std::fs::read(dir.path().join("returns").join(&ret.jid)).unwrap();
        assert!(!raw.windows(secret.len()).any(|w| w == secret.as_bytes()));
        let back = Arc::unwrap_or_clone(store.pending().remove(0))
            .unpack()
            .unwrap();
        assert_eq!(back.ret, "pw=**********");
        assert_eq!(back.fun_args[0], "echo **********");
        // Another minion's return is its own business.
        let other = JobReturn {
            id: "other1".into(),
            ..ret
        };
        store
            .put(&Arc::new(PackedReturn::pack(other).unwrap()))
            .unwrap();
        let back = Arc::unwrap_or_clone(store.pending().remove(0))
            .unpack()
            .unwrap();
        assert_eq!(back.ret, format!("pw={secret}"));
    }
}
