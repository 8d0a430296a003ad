//! Bundles on their way to minions (issue 25): packed once on the compile
//! worker, not sent again to a minion that holds the same one, compressed
//! when large, and bounded in number between the start of their compile
//! and their hand-over to the socket.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use halite_proto::bundle::{pack, Packed};
use halite_proto::msg::{Bundle, ReplyBody};
use serde_json::{json, Value};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What the master counts about the bundles it answers, for
/// `halite-run master.stats` and the tests that prove a bundle was (not) sent.
#[derive(Debug, Default)]
pub struct BundleStats {
    /// Bundles compiled for a minion that reads packed bundles.
    packed: AtomicU64,
    /// Bundles sent in full (packed, or the old [`ReplyBody::Bundle`]).
    sent: AtomicU64,
    /// Bundles not sent: the minion held the same ("you have it").
    unchanged: AtomicU64,
    /// Of those, the ones not even compiled: the minion's compile record
    /// showed every input unchanged (`compile_record.rs`).
    compile_skipped: AtomicU64,
    /// Bundles sent zstd-compressed.
    compressed: AtomicU64,
    /// Encoded size of the packed bundles sent, before compression.
    plain_bytes: AtomicU64,
    /// Bytes of packed bundles put on the wire (after compression).
    wire_bytes: AtomicU64,
    /// Replies between the start of their work and their hand-over.
    in_flight: AtomicU64,
    /// The most there ever were at once.
    peak_in_flight: AtomicU64,
    /// Warm highstates whose synced custom modules the master found
    /// unchanged (one round trip: no sync).
    modules_unchanged: AtomicU64,
    /// Those told to sync first (the modules changed since their sync).
    sync_first: AtomicU64,
}

impl BundleStats {
    /// Counts a bundle request's check of the custom modules it synced:
    /// `unchanged`, or told to sync first.
    pub fn modules_checked(&self, unchanged: bool) {
        let counter = if unchanged {
            &self.modules_unchanged
        } else {
            &self.sync_first
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters as the stats call shows them; `max_in_flight` is the bound.
    pub fn snapshot(&self, max_in_flight: usize) -> Value {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        json!({
            "packed": get(&self.packed),
            "sent": get(&self.sent),
            "unchanged": get(&self.unchanged),
            "compile_skipped": get(&self.compile_skipped),
            "compressed": get(&self.compressed),
            "plain_bytes": get(&self.plain_bytes),
            "wire_bytes": get(&self.wire_bytes),
            "in_flight": get(&self.in_flight),
            "peak_in_flight": get(&self.peak_in_flight),
            "modules_unchanged": get(&self.modules_unchanged),
            "sync_first": get(&self.sync_first),
            "max_in_flight": max_in_flight,
        })
    }
}

/// Bounds the replies a master prepares at once (compiled bundles, file
/// chunks read), from the start of their work until their frame is handed
/// to the socket: `max_bundles_in_flight` in the master config.
#[derive(Clone)]
pub struct InFlight {
    slots: Arc<Semaphore>,
    stats: Arc<BundleStats>,
    max: usize,
}

/// One reply's place in [`InFlight`]; dropping it frees the place.
pub struct InFlightSlot {
    _permit: OwnedSemaphorePermit,
    stats: Arc<BundleStats>,
}

impl Drop for InFlightSlot {
    fn drop(&mut self) {
        self.stats.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl InFlight {
    /// At most `max` replies in flight (0 is read as 1: a master must answer).
    pub fn new(max: usize, stats: Arc<BundleStats>) -> Self {
        let max = max.max(1);
        Self {
            slots: Arc::new(Semaphore::new(max)),
            stats,
            max,
        }
    }

    /// The bound.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Waits for a place; `None` once the master is closing the semaphore.
    pub async fn enter(&self) -> Option<InFlightSlot> {
        let permit = self.slots.clone().acquire_owned().await.ok()?;
        let now = self.stats.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.stats.peak_in_flight.fetch_max(now, Ordering::Relaxed);
        Some(InFlightSlot {
            _permit: permit,
            stats: self.stats.clone(),
        })
    }
}

/// How a bundle is answered to one minion.
#[derive(Debug, Clone)]
pub struct BundleAnswer {
    /// The digest of the bundle the minion holds, if it said.
    pub have: Option<String>,
    /// Whether the minion reads packed bundles (newer minions).
    pub packed: bool,
    /// Bundles encoded larger than this are compressed (`bundle_compress_threshold`).
    pub compress_above: usize,
}

impl BundleAnswer {
    /// "You have it" without a compile, when the minion holds `digest`
    /// (the bundle its last compile gave, whose inputs are unchanged);
    /// `None` when it holds another or does not read packed bundles.
    pub fn already_held(&self, digest: &str, stats: &BundleStats) -> Option<ReplyBody> {
        if !self.packed || self.have.as_deref() != Some(digest) {
            return None;
        }
        stats.unchanged.fetch_add(1, Ordering::Relaxed);
        stats.compile_skipped.fetch_add(1, Ordering::Relaxed);
        Some(ReplyBody::SameBundle {
            digest: digest.to_string(),
            modules_unchanged: false,
        })
    }

    /// The reply for `bundle`: "you have it" when the minion holds the same
    /// digest, else the bundle packed (compressed when large); the old
    /// [`ReplyBody::Bundle`] for a minion that does not read packed ones.
    pub fn reply(&self, bundle: Bundle, stats: &BundleStats) -> ReplyBody {
        if !self.packed {
            stats.sent.fetch_add(1, Ordering::Relaxed);
            return ReplyBody::Bundle(bundle);
        }
        // Compressed only once it is known to be sent.
        let packed = match pack(&bundle, None) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(jid = %bundle.jid, error = %e, "cannot pack a bundle; sending it unpacked");
                stats.sent.fetch_add(1, Ordering::Relaxed);
                return ReplyBody::Bundle(bundle);
            }
        };
        self.reply_packed(&bundle.jid, packed, stats)
    }

    /// [`BundleAnswer::reply`] for a bundle packed already (uncompressed),
    /// to a minion that reads packed bundles.
    pub fn reply_packed(&self, jid: &str, packed: Packed, stats: &BundleStats) -> ReplyBody {
        stats.packed.fetch_add(1, Ordering::Relaxed);
        if self.have.as_deref() == Some(packed.digest.as_str()) {
            stats.unchanged.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%jid, digest = %packed.digest, "bundle unchanged: not sent");
            return ReplyBody::SameBundle {
                digest: packed.digest,
                modules_unchanged: false,
            };
        }
        let packed = packed.compressed_above(self.compress_above);
        stats.sent.fetch_add(1, Ordering::Relaxed);
        if packed.zstd {
            stats.compressed.fetch_add(1, Ordering::Relaxed);
        }
        stats
            .plain_bytes
            .fetch_add(packed.plain_len as u64, Ordering::Relaxed);
        stats
            .wire_bytes
            .fetch_add(packed.bytes.len() as u64, Ordering::Relaxed);
        ReplyBody::PackedBundle {
            digest: packed.digest,
            zstd: packed.zstd,
            bytes: packed.bytes,
            modules_unchanged: false,
        }
    }
}
