//! The compile memo (issue 25): minions whose rendered high data is
//! identical share its compile to chunks.
//!
//! The compile from rendered high data to low chunks (`extend`, the
//! structure checks, `_in` requisites, `exclude`, chunks, the requisite
//! graph and its order) is a pure function of the high data, the disabled
//! requisites and the state module table (which modules have
//! `mod_watch`). The owner of a memo keeps the module table fixed for the
//! memo's life (the master's compiler owns one), so the key is the
//! sha256 of the high data (keys in their order, every value) and the
//! disabled requisites. Two minions whose renders gave the same high data
//! (a homogeneous fleet, or SLS that do not read the minion's own data)
//! get the same chunks, compiled once.
//!
//! High data that carries yamlex string origins is not memoised (the
//! origins are not in the key). A digest is stored only the second time it
//! is seen, so per-minion high data costs its hash and nothing else; at
//! most [`MAX_PLANS`] results are kept (the oldest dropped first).
//!
//! Even the hash is waste where every minion's high data differs (paths
//! built from the id): after [`PROBE_EVERY`] hashed compiles in a row found
//! nothing seen before, the memo hashes only every [`PROBE_EVERY`]th
//! compile, until one finds its digest seen again. This decides only
//! whether the memo is asked, never what a minion gets.

use std::collections::{HashSet, VecDeque};
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use sha2::{Digest, Sha256};

use crate::origins::StringOrigins;
use crate::value::Map;

/// Most compile results kept at once.
pub const MAX_PLANS: usize = 16;
/// Most digests remembered as seen once (the set is cleared when full).
const MAX_SEEN: usize = 4096;
/// Hashed compiles in a row that found nothing before the memo only
/// probes, and how often it probes then (one compile in this many).
pub const PROBE_EVERY: u64 = 16;

/// Compile results by the digest of their high data (see the module).
#[derive(Default)]
pub struct PlanMemo<T> {
    inner: Mutex<Inner<T>>,
}

struct Inner<T> {
    seen: HashSet<[u8; 32]>,
    plans: VecDeque<([u8; 32], Arc<T>)>,
    hits: u64,
    misses: u64,
    /// Hashed compiles in a row whose digest was new.
    new_in_a_row: u64,
    /// Compiles not hashed since the last probe.
    unhashed: u64,
}

impl<T> Default for Inner<T> {
    fn default() -> Self {
        Self {
            seen: HashSet::new(),
            plans: VecDeque::new(),
            hits: 0,
            misses: 0,
            new_in_a_row: 0,
            unhashed: 0,
        }
    }
}

impl<T> Inner<T> {
    /// Whether this compile is hashed (see the module on probing).
    fn hash_this_one(&mut self) -> bool {
        if self.new_in_a_row < PROBE_EVERY || self.unhashed + 1 >= PROBE_EVERY {
            self.unhashed = 0;
            true
        } else {
            self.unhashed += 1;
            false
        }
    }
}

/// How often a memo answered (for profiles and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanMemoStats {
    /// Compiles answered from the memo.
    pub hits: u64,
    /// Compiles run (memoisable or not).
    pub misses: u64,
}

impl<T: Clone> PlanMemo<T> {
    /// An empty memo.
    pub fn new() -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The compile of `high` with `disabled` requisites: a copy of the
    /// result of an earlier compile of the same high data, or
    /// `compile(high, origins)` (stored when this high data was seen before).
    pub fn get_or_compile(
        &self,
        high: Map,
        origins: StringOrigins,
        disabled: &[String],
        compile: impl FnOnce(Map, StringOrigins) -> T,
    ) -> T {
        {
            let mut inner = self.lock();
            if !origins.is_empty() || !inner.hash_this_one() {
                inner.misses += 1;
                drop(inner);
                return compile(high, origins);
            }
        }
        let key = digest(&high, disabled);
        let store = {
            let mut inner = self.lock();
            if let Some(plan) = inner
                .plans
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, plan)| plan.clone())
            {
                inner.hits += 1;
                inner.new_in_a_row = 0;
                // Copied outside the lock: other compiles go on meanwhile.
                drop(inner);
                return T::clone(&plan);
            }
            inner.misses += 1;
            if inner.seen.contains(&key) {
                inner.new_in_a_row = 0;
                true
            } else {
                inner.new_in_a_row += 1;
                if inner.seen.len() >= MAX_SEEN {
                    inner.seen.clear();
                }
                inner.seen.insert(key);
                false
            }
        };
        let plan = compile(high, origins);
        if store {
            let mut inner = self.lock();
            if !inner.plans.iter().any(|(k, _)| *k == key) {
                if inner.plans.len() >= MAX_PLANS {
                    inner.plans.pop_front();
                }
                inner.plans.push_back((key, Arc::new(plan.clone())));
            }
        }
        plan
    }

    /// The memo's counters.
    pub fn stats(&self) -> PlanMemoStats {
        let inner = self.lock();
        PlanMemoStats {
            hits: inner.hits,
            misses: inner.misses,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<T>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// sha256 of the high data's JSON (keys in their order) and the disabled
/// requisites.
fn digest(high: &Map, disabled: &[String]) -> [u8; 32] {
    let mut hasher = HashWriter(Sha256::new());
    // Writing into a hasher cannot fail and JSON values always encode; an
    // error would still give a key no other high data has.
    if serde_json::to_writer(&mut hasher, high).is_err() {
        hasher.0.update(b"\0unencodable");
    }
    for d in disabled {
        hasher.0.update(b"\0");
        hasher.0.update(d.as_bytes());
    }
    hasher.0.finalize().into()
}

/// A hasher as an `io::Write`, so the high data is hashed without a copy.
struct HashWriter(Sha256);

impl Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;
    use serde_json::json;

    fn high(v: Value) -> Map {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn equal_high_data_is_compiled_once_from_its_second_sight() {
        let memo = PlanMemo::new();
        let compiles = std::cell::Cell::new(0);
        let compile = |h: Map, _| {
            compiles.set(compiles.get() + 1);
            h.len()
        };
        let a = json!({"a": {"test": ["nop"]}});
        for _ in 0..4 {
            assert_eq!(
                memo.get_or_compile(high(a.clone()), StringOrigins::new(), &[], compile),
                1
            );
        }
        // Seen, stored, then answered twice.
        assert_eq!(compiles.get(), 2);
        assert_eq!(memo.stats(), PlanMemoStats { hits: 2, misses: 2 });
        // Key order, another value, other disabled requisites: other keys.
        let b = json!({"a": {"test": ["nop"]}, "b": {"test": ["nop"]}});
        let c = json!({"b": {"test": ["nop"]}, "a": {"test": ["nop"]}});
        for (h, d) in [
            (&b, vec![]),
            (&b, vec![]),
            (&c, vec![]),
            (&a, vec!["require".to_string()]),
        ] {
            memo.get_or_compile(high(h.clone()), StringOrigins::new(), &d, compile);
        }
        assert_eq!(compiles.get(), 6);
    }

    #[test]
    fn high_data_never_seen_twice_is_hashed_only_to_probe() {
        let memo = PlanMemo::new();
        let hashed = |memo: &PlanMemo<usize>| memo.lock().seen.len();
        let distinct = |i: usize| high(json!({ format!("s{i}"): {"test": ["nop"]} }));
        let n = PROBE_EVERY as usize;
        for i in 0..n {
            memo.get_or_compile(distinct(i), StringOrigins::new(), &[], |h, _| h.len());
        }
        assert_eq!(hashed(&memo), n, "the first ones are all hashed");
        for i in n..3 * n {
            memo.get_or_compile(distinct(i), StringOrigins::new(), &[], |h, _| h.len());
        }
        assert_eq!(hashed(&memo), n + 2, "then one in PROBE_EVERY");
        // A probe that finds a digest seen before hashes every compile again.
        let same = || high(json!({"same": {"test": ["nop"]}}));
        let mut i = 0;
        while memo.stats().hits == 0 {
            memo.get_or_compile(same(), StringOrigins::new(), &[], |h, _| h.len());
            i += 1;
            assert!(i < 3 * n, "the probe must find the repeated high data");
        }
        let hits = memo.stats().hits;
        for _ in 0..4 {
            memo.get_or_compile(same(), StringOrigins::new(), &[], |h, _| h.len());
        }
        assert_eq!(memo.stats().hits, hits + 4);
    }
}
