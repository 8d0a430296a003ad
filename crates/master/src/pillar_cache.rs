//! The master's cache of each minion's last compiled pillar (Salt's
//! `minion_data_cache` for pillar): kept in memory for pillar targets
//! (`-I`, `-J`, `I@`, `J@`, `pillar_exact`) and in the job cache's SQLite
//! database (table `minion_pillar`) so it survives a restart. The compiler
//! stores into it from its worker threads after each compile; the main
//! loop reads it when it resolves a target.
//!
//! It also remembers, per minion, the cleartexts the gpg renderer
//! decrypted for its pillar ([`Cleartexts`]): the disk copy of the pillar
//! has them masked (`**********`), and the master masks them in that
//! minion's returns before its job cache stores them
//! ([`PillarCache::secrets`]). They are held in memory only.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard};

use std::sync::Arc;

use halite_client::jobcache::{JobCache, JobCacheError};
use halite_salt_rules::secret::Cleartexts;
use serde_json::Value;

/// Each minion's last compiled pillar, in memory and on disk.
pub struct PillarCache {
    mem: RwLock<HashMap<String, Value>>,
    /// The decrypted secrets of each minion's pillar, memory only.
    secrets: RwLock<HashMap<String, Arc<Cleartexts>>>,
    /// A connection of its own (SQLite in WAL mode), so compiles on worker
    /// threads never wait on the main loop's connection.
    db: Mutex<JobCache>,
}

impl PillarCache {
    /// Opens the job cache at `path` and loads every cached pillar.
    pub fn open(path: &Path) -> Result<Self, JobCacheError> {
        let db = JobCache::open(path)?.without_autocheckpoint()?;
        let mem = db.all_pillars()?.into_iter().collect();
        Ok(Self {
            mem: RwLock::new(mem),
            secrets: RwLock::new(HashMap::new()),
            db: Mutex::new(db),
        })
    }

    /// Remembers `pillar` as minion `id`'s, with `decrypted` the
    /// cleartexts the gpg renderer produced for it. The disk copy is
    /// written when the pillar changed, with those cleartexts masked (so a
    /// restarted master matches pillar targets on a secret's value only
    /// after the minion's next compile, and `halite-run cache.pillar` shows
    /// `**********`). A write that fails is logged: the in-memory copy
    /// still serves targets.
    pub fn store(&self, id: &str, pillar: &Value, decrypted: &[String]) {
        let secrets = Arc::new(Cleartexts::new(decrypted));
        // The master's log lines never show them either.
        halite_logging::redact::set_secrets(id, decrypted);
        self.secrets
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.to_string(), secrets.clone());
        {
            let mut mem = self.mem.write().unwrap_or_else(PoisonError::into_inner);
            if mem.get(id) == Some(pillar) {
                return;
            }
            mem.insert(id.to_string(), pillar.clone());
        }
        let db = self.db.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = db.store_pillar(id, &secrets.mask(pillar)) {
            tracing::warn!(%id, error = %e, "cannot update the minion's pillar cached on disk");
        }
    }

    /// Adds `decrypted` to minion `id`'s secrets without touching its
    /// cached pillar (a compile whose pillar failed to render may still
    /// have decrypted some, and its bundle carries them).
    pub fn add_secrets(&self, id: &str, decrypted: &[String]) {
        if decrypted.is_empty() {
            return;
        }
        halite_logging::redact::add_secrets(id, decrypted);
        let mut all = self.secrets.write().unwrap_or_else(PoisonError::into_inner);
        let merged = match all.get(id) {
            Some(old) => old.extended(decrypted),
            None => Cleartexts::new(decrypted),
        };
        all.insert(id.to_string(), Arc::new(merged));
    }

    /// Minion `id`'s decrypted secrets, to mask in what is written to disk
    /// (`None` when its pillar has none).
    pub fn secrets(&self, id: &str) -> Option<Arc<Cleartexts>> {
        self.secrets
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .filter(|s| !s.is_empty())
            .cloned()
    }

    /// Forgets minion `id`'s pillar in memory (its key was deleted; the
    /// job cache's `forget_minion` drops the stored row).
    pub fn forget(&self, id: &str) {
        halite_logging::redact::forget(id);
        self.mem
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        self.secrets
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    /// A read view of every cached pillar, for matching targets.
    pub fn read(&self) -> RwLockReadGuard<'_, HashMap<String, Value>> {
        self.mem.read().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stored_pillars_are_read_back_after_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.sqlite");
        {
            let cache = PillarCache::open(&path).unwrap();
            cache.store("web1", &json!({"role": "web"}), &[]);
            cache.store("db1", &json!({"role": "db"}), &[]);
            cache.store("db1", &json!({"role": "db2"}), &[]);
            let pw = ["hunter2".to_string()];
            cache.store("secret1", &json!({"pw": "hunter2", "user": "admin"}), &pw);
            assert_eq!(
                cache.read()["secret1"],
                json!({"pw": "hunter2", "user": "admin"})
            );
            let masked = cache
                .secrets("secret1")
                .unwrap()
                .mask(&json!({"out": "pw=hunter2"}));
            assert_eq!(masked, json!({"out": "pw=**********"}));
            assert!(cache.secrets("db1").is_none());
            assert_eq!(cache.read()["db1"], json!({"role": "db2"}));
            cache.forget("web1");
            assert!(!cache.read().contains_key("web1"));
        }
        let cache = PillarCache::open(&path).unwrap();
        assert_eq!(cache.read()["db1"], json!({"role": "db2"}));
        // forget() is memory only: the key deletion path drops the row.
        assert_eq!(cache.read()["web1"], json!({"role": "web"}));
        // A pillar with decrypted secrets reached the disk masked.
        assert_eq!(
            cache.read()["secret1"],
            json!({"pw": "**********", "user": "admin"})
        );
        assert!(cache.secrets("secret1").is_none());
        drop(cache);
        let raw = std::fs::read(&path).unwrap();
        assert!(!raw.windows(7).any(|w| w == b"hunter2"));
    }
}
