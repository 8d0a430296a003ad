//! Decoded bundles kept in memory between jobs (issue 25): a warm
//! highstate whose bundle the master says is unchanged runs from a copy
//! of the one decoded for the last job, instead of reading the kept
//! file, opening its seal, decompressing it, hashing it and decoding
//! every chunk again (a sixth of a warm minion's CPU).
//!
//! Bounded in bytes over all of a process's identities
//! ([`DEFAULT_BOUND_BYTES`]), and admitted while there is room: a real
//! minion (one identity) always has its bundle kept; a swarm keeps the
//! first identities' whose bundles fit and the others read their files
//! as before, paying nothing for a copy they would never use (an LRU at
//! 1,000 identities of different bundles would evict every entry before
//! its next use, and copy each bundle once per job for nothing).
//!
//! An entry is served only for the identity it was kept for, the digest
//! the master named, and while that identity's file is the one it was
//! decoded beside ([`FileStamp`]): a changed bundle has another digest
//! and is never served from here (its job decodes the new one and
//! replaces it), and a file removed, replaced or written again on disk
//! is read again, as without this copy (its damage is found there, and
//! the bundle asked for in full). The stamp is the one the file caches
//! share: with the ctime, which no process can set back, a file written
//! again is read again even when its size and mtime were put back.

use std::sync::{Arc, Mutex};

use halite_modules::exec::file::meta::FileStamp;
use halite_proto::msg::Bundle;
use halite_state::LowChunk;

/// The default bound on the decoded bundles kept, over all identities:
/// 32 MiB, about 50 bundles of the fleet bench's 1,000 states (129 KB
/// encoded each; a real minion's one bundle up to ~50,000 such states).
pub const DEFAULT_BOUND_BYTES: usize = 32 << 20;

/// Bytes of memory a decoded bundle takes per byte of its encoding: a
/// 1,000-chunk bundle of the fleet bench's shape (198 KB encoded) holds
/// 831 KB decoded (a counting allocator: 4.2 per byte); rounded up, so
/// the bound errs on the side of keeping less.
const DECODED_PER_ENCODED_BYTE: usize = 5;

/// One identity's kept bundle.
struct Entry {
    id: String,
    digest: String,
    /// Its file when it was kept.
    stamp: FileStamp,
    /// The estimated bytes it holds ([`DECODED_PER_ENCODED_BYTE`]).
    cost: usize,
    bundle: Arc<Bundle<LowChunk>>,
}

/// The decoded bundles kept, by identity and digest, within a bound.
pub struct DecodedBundles {
    bound: usize,
    entries: Mutex<Vec<Entry>>,
}

impl DecodedBundles {
    /// Keeps at most `bound` bytes of decoded bundles (0: none).
    pub fn new(bound: usize) -> Self {
        Self {
            bound,
            entries: Mutex::new(Vec::new()),
        }
    }

    /// A copy of the bundle kept for `id`, for job `jid`, when its digest
    /// is `digest` and its file's stamp still `stamp`; `None` otherwise.
    pub fn get(
        &self,
        id: &str,
        jid: &str,
        digest: &str,
        stamp: &FileStamp,
    ) -> Option<Bundle<LowChunk>> {
        let kept = {
            let entries = self.entries.lock().ok()?;
            let entry = entries.iter().find(|e| e.id == id)?;
            if entry.digest != digest || entry.stamp != *stamp {
                return None;
            }
            Arc::clone(&entry.bundle)
        };
        // Copied outside the lock: other identities' jobs do not wait.
        let mut bundle = Bundle::clone(&kept);
        bundle.jid = jid.to_string();
        Some(bundle)
    }

    /// Keeps a copy of `bundle` (encoded in `encoded_len` bytes, named
    /// `digest`, its file stamped `stamp`) for `id`, in place of what `id`
    /// held, when it fits in the bound beside the other identities' (none
    /// is evicted for it).
    pub fn keep(
        &self,
        id: &str,
        digest: &str,
        stamp: FileStamp,
        encoded_len: usize,
        bundle: &Bundle<LowChunk>,
    ) {
        let cost = encoded_len.saturating_mul(DECODED_PER_ENCODED_BYTE);
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        entries.retain(|e| e.id != id);
        let used: usize = entries.iter().map(|e| e.cost).sum();
        if used.saturating_add(cost) > self.bound {
            return;
        }
        entries.push(Entry {
            id: id.to_string(),
            digest: digest.to_string(),
            stamp,
            cost,
            bundle: Arc::new(bundle.clone()),
        });
    }

    /// Whether `id` has a bundle kept here.
    pub fn has(&self, id: &str) -> bool {
        self.entries
            .lock()
            .is_ok_and(|entries| entries.iter().any(|e| e.id == id))
    }

    /// Drops what `id` holds here.
    pub fn forget(&self, id: &str) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.retain(|e| e.id != id);
        }
    }

    /// The estimated bytes kept, over all identities.
    pub fn bytes(&self) -> usize {
        self.entries
            .lock()
            .map(|entries| entries.iter().map(|e| e.cost).sum())
            .unwrap_or(0)
    }
}
