//! The master's cache of each minion's last compiled pillar (Salt's
//! `minion_data_cache` for pillar): kept in memory for pillar targets
//! (`-I`, `-J`, `I@`, `J@`, `pillar_exact`) and in the job cache's SQLite
//! database (table `minion_pillar`) so it survives a restart. The compiler
//! stores into it from its worker threads after each compile; the main
//! loop reads it when it resolves a target.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard};

use halite_client::jobcache::{JobCache, JobCacheError};
use serde_json::Value;

/// Each minion's last compiled pillar, in memory and on disk.
pub struct PillarCache {
    mem: RwLock<HashMap<String, Value>>,
    /// A connection of its own (SQLite in WAL mode), so compiles on worker
    /// threads never wait on the main loop's connection.
    db: Mutex<JobCache>,
}

impl PillarCache {
    /// Opens the job cache at `path` and loads every cached pillar.
    pub fn open(path: &Path) -> Result<Self, JobCacheError> {
        let db = JobCache::open(path)?;
        let mem = db.all_pillars()?.into_iter().collect();
        Ok(Self {
            mem: RwLock::new(mem),
            db: Mutex::new(db),
        })
    }

    /// Remembers `pillar` as minion `id`'s; written to disk only when it
    /// changed and `persist` (a pillar holding secrets the gpg renderer
    /// decrypted is never written in clear: its disk row is dropped, so a
    /// restarted master matches that minion's pillar targets only after its
    /// next compile). A write that fails is logged: the in-memory copy still
    /// serves targets.
    pub fn store(&self, id: &str, pillar: &Value, persist: bool) {
        {
            let mut mem = self.mem.write().unwrap_or_else(PoisonError::into_inner);
            if mem.get(id) == Some(pillar) {
                return;
            }
            mem.insert(id.to_string(), pillar.clone());
        }
        let db = self.db.lock().unwrap_or_else(PoisonError::into_inner);
        let result = if persist {
            db.store_pillar(id, pillar)
        } else {
            db.drop_pillar(id)
        };
        if let Err(e) = result {
            tracing::warn!(%id, error = %e, "cannot update the minion's pillar cached on disk");
        }
    }

    /// Forgets minion `id`'s pillar in memory (its key was deleted; the
    /// job cache's `forget_minion` drops the stored row).
    pub fn forget(&self, id: &str) {
        self.mem
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
            cache.store("web1", &json!({"role": "web"}), true);
            cache.store("db1", &json!({"role": "db"}), true);
            cache.store("db1", &json!({"role": "db2"}), true);
            cache.store("secret1", &json!({"pw": "hunter2"}), false);
            assert_eq!(cache.read()["secret1"], json!({"pw": "hunter2"}));
            assert_eq!(cache.read()["db1"], json!({"role": "db2"}));
            cache.forget("web1");
            assert!(!cache.read().contains_key("web1"));
        }
        let cache = PillarCache::open(&path).unwrap();
        assert_eq!(cache.read()["db1"], json!({"role": "db2"}));
        // forget() is memory only: the key deletion path drops the row.
        assert_eq!(cache.read()["web1"], json!({"role": "web"}));
        // A pillar with decrypted secrets never reached the disk.
        assert!(!cache.read().contains_key("secret1"));
        drop(cache);
        let raw = std::fs::read(&path).unwrap();
        assert!(!raw.windows(7).any(|w| w == b"hunter2"));
    }
}
