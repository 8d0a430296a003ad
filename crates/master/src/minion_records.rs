//! One record per minion behind one lock: the map the compile records
//! ([`crate::compile_record`]) and the pillar records
//! ([`crate::pillar_record`]) both keep, written once. A compile that
//! panicked while holding the lock does not poison it (the records are
//! only a cache: the next job compiles fresh when one is missing), and the
//! map holds at most [`MAX_RECORDS`] minions (dropped whole when full, as
//! a fleet larger than that gains nothing from an LRU's bookkeeping).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::compile_record::MAX_RECORDS;

/// Records of type `R` by minion id (see the module's documentation).
pub struct MinionRecords<R> {
    map: Mutex<HashMap<String, R>>,
}

impl<R> Default for MinionRecords<R> {
    fn default() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
        }
    }
}

impl<R> MinionRecords<R> {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, R>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What `take` gives from minion `id`'s record (`None` without one).
    pub fn find<T>(&self, id: &str, take: impl FnOnce(&R) -> Option<T>) -> Option<T> {
        self.lock().get(id).and_then(take)
    }

    /// Records `record` for minion `id`, replacing its last one; a new
    /// minion when [`MAX_RECORDS`] are held drops them all first.
    pub fn insert(&self, id: &str, record: R) {
        let mut map = self.lock();
        if map.len() >= MAX_RECORDS && !map.contains_key(id) {
            map.clear();
        }
        map.insert(id.to_string(), record);
    }

    /// Drops minion `id`'s record (its compile cannot be reused).
    pub fn remove(&self, id: &str) {
        self.lock().remove(id);
    }

    /// How many minions have a record.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no minion has a record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_replaces_the_minions_last_and_a_panic_does_not_poison_the_map() {
        let records = MinionRecords::<u32>::default();
        assert!(records.is_empty());
        records.insert("web1", 1);
        records.insert("web1", 2);
        records.insert("web2", 3);
        assert_eq!(records.len(), 2);
        assert_eq!(records.find("web1", |r| Some(*r)), Some(2));
        assert_eq!(records.find("web1", |r| (*r > 5).then_some(*r)), None);
        let poisoned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _held = records.lock();
            panic!("a compile panicked while holding the lock");
        }));
        assert!(poisoned.is_err());
        records.remove("web1");
        assert_eq!(records.find("web1", |r| Some(*r)), None);
        assert_eq!(records.len(), 1);
    }
}
