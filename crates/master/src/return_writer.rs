//! Returns committed to the job cache off the master's main task (issue
//! 25): a fleet's 1,000-state returns cost their encoding and their
//! SQLite insert, and while the main task did that, pings, publications
//! and every other minion's messages waited behind it. One thread with
//! its own connection to the job cache commits them and hands them back;
//! the main task then acknowledges the returns and fires their events, as
//! it did after its own commit.
//!
//! The writer's queue ([`CommitQueue`]) puts a small return (a ping's)
//! ahead of the large ones queued before it (a fleet's highstates, ~0.4
//! MB each), in a transaction of small ones, and bounds every
//! transaction in bytes as well as in returns: a small return waits for
//! one commit of at most [`MAX_COMMIT_BYTES`], not for the ~30 MB that
//! queued behind the last one (issue 25, session 22).

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use halite_client::jobcache::{JobCache, JobCacheError, ReturnValue};
use halite_proto::msg::{JobReturn, PackedReturn};
use halite_salt_rules::secret::Cleartexts;
use serde_json::Value;

/// Returns committed in one transaction at most.
const MAX_RETURNS_PER_COMMIT: usize = 1024;

/// Packed bytes of returns committed in one transaction at most (one
/// return more when a single one is larger): ~10 highstate returns of
/// 1,000 states, the longest a small return waits for the commit under
/// way. Each commit costs SQLite a WAL append without an fsync
/// (`synchronous = NORMAL`), so smaller groups cost little throughput.
pub const MAX_COMMIT_BYTES: u64 = 4 * 1024 * 1024;

/// A packed return of at most this many bytes is small: committed ahead
/// of the large ones queued before it. A `test.ping`'s is a few dozen
/// bytes, `grains.items`' a few KB, a state run's ~400 bytes per state
/// (so up to ~150 states); checking, compressing and inserting 64 KiB
/// takes well under a millisecond, so a group of small returns stays
/// quick while the highstate returns of a fleet (0.4 MB at 1,000 states)
/// wait their turn.
pub const SMALL_RETURN_BYTES: u64 = 64 * 1024;

/// `return_commit_bytes`' default: returns received and not yet committed
/// and acknowledged, in packed bytes (~100 1,000-state returns; 10,000
/// minions peaked at 23.6 MB with a job cache that kept up).
pub const DEFAULT_RETURN_COMMIT_BYTES: u64 = 32 * 1024 * 1024;

/// A return as the master received it: decoded (an older minion's
/// [`JobReturn`]) or with its value still packed (issue 25: passed to the
/// watching CLI and the job cache as bytes, never built on the main task).
#[derive(Debug, Clone)]
pub struct Received {
    /// The return; its `ret` is `null` when [`Received::packed`] holds it.
    pub ret: JobReturn,
    /// The value's msgpack bytes, checked on the writer's thread before
    /// the commit ([`crate::intake::checked_return`]); of a framed return
    /// ([`Received::frame`]), set by that check once the frame is
    /// expanded.
    pub packed: Option<Arc<Vec<u8>>>,
    /// The minion's zstd frame of the value ([`PackedReturn::zstd`], issue
    /// 25 session 24): expanded and checked on the writer's thread, then
    /// stored in the job cache as it is (the master compresses nothing).
    pub frame: Option<Arc<Vec<u8>>>,
    /// When its message came off the socket (for the acknowledgement's
    /// timing in `master.stats`).
    pub arrived: Instant,
}

impl Received {
    /// An older minion's return, its value decoded.
    pub fn plain(ret: JobReturn) -> Self {
        Self {
            ret,
            packed: None,
            frame: None,
            arrived: Instant::now(),
        }
    }

    /// A packed return (its bytes checked before it is stored:
    /// [`crate::intake::checked_return`]), its value plain or framed.
    pub fn packed(p: PackedReturn) -> Self {
        let bytes = Some(Arc::new(p.ret.into_vec()));
        let (packed, frame) = if p.zstd { (None, bytes) } else { (bytes, None) };
        Self {
            ret: JobReturn {
                jid: p.jid,
                id: p.id,
                fun: p.fun,
                fun_args: p.fun_args,
                ret: Value::Null,
                retcode: p.retcode,
                success: p.success,
            },
            packed,
            frame,
            arrived: Instant::now(),
        }
    }

    /// The value's msgpack bytes: how many the packed value holds, or
    /// its frame says it expands to (at most one past
    /// [`halite_proto::packed::MAX_RETURN_BYTES`]: a frame that says more
    /// is refused anyway); `None` for a decoded return. What the bound on
    /// returns waiting ([`ReturnCounts::hold`]) and the writer's lanes
    /// count, framed or not.
    pub fn size(&self) -> Option<u64> {
        if let Some(bytes) = &self.packed {
            return Some(bytes.len() as u64);
        }
        self.frame.as_ref().map(|frame| {
            halite_proto::packed::framed_len(frame)
                .unwrap_or(frame.len() as u64)
                .min(halite_proto::packed::MAX_RETURN_BYTES as u64 + 1)
        })
    }

    /// The return with its value decoded (to mask secrets in it).
    fn decoded(&self) -> Cow<'_, JobReturn> {
        let Some(bytes) = &self.packed else {
            return Cow::Borrowed(&self.ret);
        };
        let value = halite_proto::packed::unpack(bytes).unwrap_or_else(|e| {
            tracing::error!(jid = %self.ret.jid, id = %self.ret.id, error = %e, "a packed return cannot be read");
            Value::String(format!("the master could not read this return: {e}"))
        });
        Cow::Owned(JobReturn {
            ret: value,
            ..self.ret.clone()
        })
    }

    /// The row the job cache stores: with `secrets`, the return decoded
    /// and masked (the cache packs it); framed, the minion's frame as it
    /// is; packed, the return and its checked bytes (no `Value`, no
    /// transcode); else as received.
    fn record(&self, secrets: Option<&Cleartexts>) -> (Cow<'_, JobReturn>, ReturnValue<'_>) {
        if let Some(secrets) = secrets {
            let ret = self.decoded();
            let masked = JobReturn {
                ret: secrets.mask(&ret.ret),
                fun_args: ret.fun_args.iter().map(|a| secrets.mask(a)).collect(),
                ..ret.into_owned()
            };
            return (Cow::Owned(masked), ReturnValue::Decoded);
        }
        let value = match (&self.frame, &self.packed) {
            (Some(frame), Some(_)) => ReturnValue::Framed(frame),
            (_, Some(bytes)) => ReturnValue::Packed(bytes),
            (_, None) => ReturnValue::Decoded,
        };
        (Cow::Borrowed(&self.ret), value)
    }
}

/// Returns received, packed or not, for `halite-run master.stats` (and
/// the tests that prove a minion sends its returns packed), and the bound
/// on those waiting for their commit: past `return_commit_bytes` the
/// master stops reading from its minions until the job cache's writer
/// catches up (issue 25: a writer behind a fleet held every return
/// received meanwhile, unbounded).
#[derive(Debug, Default)]
pub struct ReturnCounts {
    /// `return_commit_bytes`: [`ReturnCounts::held_bytes`] at which the
    /// master stops reading; 0, no bound.
    pub bound: u64,
    /// [`halite_proto::msg::MinionRequest::PackedReturn`]s.
    pub packed: u64,
    /// [`halite_proto::msg::MinionRequest::Return`]s (older minions, and
    /// packed returns whose arguments were too deep, which become error
    /// returns).
    pub plain: u64,
    /// Of the packed returns, those whose value came as a zstd frame
    /// ([`PackedReturn::zstd`]).
    pub zstd: u64,
    /// Returns received and not yet acknowledged: queued for the job
    /// cache's commit, or committed and not yet handled by the main task.
    pub held: u64,
    /// Their packed bytes.
    pub held_bytes: u64,
    /// The most `held_bytes` has been.
    pub peak_held_bytes: u64,
    /// Returns acknowledged, and how long after their arrival (issue 25: a
    /// swarm resent returns whose acknowledgement came late).
    pub acked: u64,
    waits: AckWaits,
    /// The same for small returns ([`SMALL_RETURN_BYTES`]: a ping's), the
    /// ones that must not wait behind a fleet's highstate returns.
    small_waits: AckWaits,
    /// How the main task's turns sorted the messages they read (handled,
    /// parked, ahead of a full turn, deferred: [`crate::read_bound`]).
    pub sorted: crate::read_bound::Sorted,
}

impl ReturnCounts {
    /// Counters with `bound` bytes of returns waiting for their commit at
    /// most (`return_commit_bytes`; 0: no bound).
    pub fn bounded(bound: u64) -> Self {
        Self {
            bound,
            ..Self::default()
        }
    }

    /// Bytes the master may still read from its minions before the
    /// returns waiting for their commit reach the bound: 0 stops its
    /// reading (the messages wait in the ROUTER's queue, then on TCP; a
    /// minion keeps its return until it is acknowledged). A batch read may
    /// pass the bound by one message at most.
    pub fn room(&self) -> u64 {
        match self.bound {
            0 => u64::MAX,
            bound => bound.saturating_sub(self.held_bytes),
        }
    }

    /// Bytes of small messages the master may still read once the bound
    /// is reached ([`crate::read_bound::SMALL_ROOM`] past it).
    pub fn small_room(&self) -> u64 {
        match self.bound {
            0 => u64::MAX,
            bound => (bound + crate::read_bound::SMALL_ROOM).saturating_sub(self.held_bytes),
        }
    }

    /// `returns` are queued for the commit: the bytes they hold.
    pub fn hold(&mut self, returns: &[(u64, Received)]) -> u64 {
        let bytes = packed_bytes(returns);
        self.held += returns.len() as u64;
        self.held_bytes += bytes;
        self.peak_held_bytes = self.peak_held_bytes.max(self.held_bytes);
        bytes
    }

    /// `count` returns holding `bytes` (as [`ReturnCounts::hold`] gave)
    /// were committed (or not) and are handled.
    pub fn release(&mut self, count: usize, bytes: u64) {
        self.held = self.held.saturating_sub(count as u64);
        self.held_bytes = self.held_bytes.saturating_sub(bytes);
    }

    /// A return that arrived at `arrived`, committed at `committed`, is
    /// acknowledged now; `small`: its packed bytes are within
    /// [`SMALL_RETURN_BYTES`].
    pub fn acked(&mut self, arrived: Instant, committed: Instant, small: bool) {
        let now = Instant::now();
        self.acked += 1;
        self.waits.add(arrived, committed, now);
        if small {
            self.small_waits.add(arrived, committed, now);
        }
    }

    /// The counters as `master.stats` shows them.
    pub fn snapshot(&self) -> Value {
        serde_json::json!({
            "packed": self.packed,
            "plain": self.plain,
            "zstd": self.zstd,
            "held": self.held,
            "held_bytes": self.held_bytes,
            "peak_held_bytes": self.peak_held_bytes,
            "bound": self.bound,
            "read_past_bound": self.sorted.read_past_bound,
            "parked": self.sorted.parked,
            "ahead": self.sorted.ahead,
            "deferred": self.sorted.deferred,
            "acked": self.acked,
            "ack_wait_ms": self.waits.snapshot(),
            "small_acked": self.small_waits.count,
            "small_ack_wait_ms": self.small_waits.snapshot(),
        })
    }
}

/// How long returns waited for their acknowledgement, from their arrival
/// at the ROUTER.
#[derive(Debug, Default)]
struct AckWaits {
    count: u64,
    total: Duration,
    max: Duration,
    /// Of that wait, the most from the arrival to the end of the commit
    /// (the main task's reading and the writer's queue and commit)...
    to_commit_max: Duration,
    /// ... and from the end of the commit to the acknowledgement (the
    /// main task's turn to handle the committed batch).
    after_commit_max: Duration,
}

impl AckWaits {
    fn add(&mut self, arrived: Instant, committed: Instant, now: Instant) {
        let wait = now.saturating_duration_since(arrived);
        self.count += 1;
        self.total += wait;
        self.max = self.max.max(wait);
        self.to_commit_max = self
            .to_commit_max
            .max(committed.saturating_duration_since(arrived));
        self.after_commit_max = self
            .after_commit_max
            .max(now.saturating_duration_since(committed));
    }

    fn snapshot(&self) -> Value {
        let ms = |d: Duration| (d.as_secs_f64() * 10_000.0).round() / 10.0;
        let mean = match u32::try_from(self.count) {
            Ok(n) if n > 0 => ms(self.total / n),
            _ => 0.0,
        };
        serde_json::json!({
            "mean": mean,
            "max": ms(self.max),
            "to_commit_max": ms(self.to_commit_max),
            "after_commit_max": ms(self.after_commit_max),
        })
    }
}

/// The packed bytes of `returns` ([`Received::size`]).
fn packed_bytes(returns: &[(u64, Received)]) -> u64 {
    returns.iter().filter_map(|(_, r)| r.size()).sum()
}

/// Returns of one intake batch to commit.
pub struct ToStore {
    /// Each return with the session it came from.
    pub returns: Vec<(u64, Received)>,
    /// The gpg secrets of each return's minion, masked (`**********`) in
    /// what the job cache stores; `None`: stored as received.
    pub secrets: Vec<Option<Arc<Cleartexts>>>,
    /// Minions that announced themselves in the same batch: their missed
    /// jobs are redelivered once these returns are committed.
    pub started: Vec<String>,
    /// The bytes the returns hold ([`ReturnCounts::hold`]), released when
    /// the batch is handled.
    pub held_bytes: u64,
}

/// Returns the writer committed in one transaction (or could not), and
/// the batches ([`ToStore`]) that are done with it.
pub struct Stored {
    /// The returns, with the sessions they came from.
    pub returns: Vec<(u64, Received)>,
    /// For each, whether it is new; or why the commit failed (then none is
    /// acknowledged, and the minions send them again).
    pub fresh: Result<Vec<bool>, String>,
    /// [`ToStore::started`] of the batches done: the minions whose missed
    /// jobs may be redelivered now.
    pub started: Vec<String>,
    /// The bytes these returns held ([`ToStore::held_bytes`], split
    /// exactly between a batch's parts: each byte is released once).
    pub held_bytes: u64,
    /// Batches whose returns are all handled now, and every batch queued
    /// before them too (a batch's `started` waits for the returns queued
    /// before it, in whichever order they were committed).
    pub batches: usize,
    /// When the commit ended.
    pub committed: Instant,
}

/// Why the writer could not start.
#[derive(Debug, thiserror::Error)]
pub enum ReturnWriterError {
    /// Its connection to the job cache could not be opened.
    #[error(transparent)]
    Open(#[from] JobCacheError),
    /// Its thread could not be started.
    #[error("cannot start the job cache's writer thread: {0}")]
    Thread(#[from] std::io::Error),
}

/// The job cache's writer thread for returns.
pub struct ReturnWriter {
    queue: Option<mpsc::Sender<ToStore>>,
    thread: Option<JoinHandle<()>>,
}

impl ReturnWriter {
    /// Opens its own connection to the job cache at `path` and starts the
    /// thread; `done` gets every commit's returns, small ones first
    /// ([`CommitQueue`]).
    pub fn start(
        path: &Path,
        done: impl Fn(Stored) + Send + 'static,
    ) -> Result<Self, ReturnWriterError> {
        let mut cache = JobCache::open(path)?.without_autocheckpoint()?;
        let hold = hold_path(path);
        let (queue, batches) = mpsc::channel::<ToStore>();
        let thread = std::thread::Builder::new()
            .name("job-cache".into())
            .spawn(move || {
                let mut queue = CommitQueue::default();
                loop {
                    if queue.is_empty() {
                        match batches.recv() {
                            Ok(batch) => queue.admit(batch),
                            Err(_) => break,
                        }
                    }
                    // Everything queued meanwhile is sorted before a group
                    // is taken: a small return that came last goes first.
                    let mut open = true;
                    loop {
                        match batches.try_recv() {
                            Ok(batch) => queue.admit(batch),
                            Err(mpsc::TryRecvError::Empty) => break,
                            Err(mpsc::TryRecvError::Disconnected) => {
                                open = false;
                                break;
                            }
                        }
                    }
                    // A stopping master commits everything, held or not.
                    let large = !open || !crate::test_hold::held(&hold);
                    let group = queue.take(large);
                    if group.is_empty() && queue.has_large() && !large {
                        if let Ok(batch) = batches.recv_timeout(Duration::from_millis(10)) {
                            queue.admit(batch);
                        }
                        continue;
                    }
                    let (group, fresh) = commit(&mut cache, group);
                    if let Some(stored) = queue.settle(group, fresh, Instant::now()) {
                        done(stored);
                    }
                }
            })?;
        Ok(Self {
            queue: Some(queue),
            thread: Some(thread),
        })
    }

    /// Queues `batch` for the writer; gives it back when the writer is gone
    /// (the caller commits it itself).
    pub fn store(&self, batch: ToStore) -> Result<(), ToStore> {
        match &self.queue {
            Some(queue) => queue.send(batch).map_err(|e| e.0),
            None => Err(batch),
        }
    }

    /// Commits what is queued and stops the thread (a stopping master: the
    /// returns it received are committed regardless).
    pub fn finish(&mut self) {
        self.queue = None;
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("the job cache's writer thread panicked; the minions will resend the returns it did not commit");
            }
        }
    }
}

/// A test build's hold on large commits: while a file of this name sits
/// beside the job cache, the writer commits no large return (small ones
/// go on), so a test can see a ping pass a queue of large returns
/// without timing anything. Only with debug assertions: a release
/// master never looks.
pub fn hold_path(job_cache: &Path) -> PathBuf {
    let mut name = job_cache.as_os_str().to_owned();
    name.push(".hold-large-commits");
    PathBuf::from(name)
}

/// One return waiting in the writer's queue.
struct Queued {
    sid: u64,
    received: Received,
    secrets: Option<Arc<Cleartexts>>,
    /// Its batch's number ([`CommitQueue`] counts the batches it admits).
    batch: u64,
    /// Its packed bytes, as [`ReturnCounts::hold`] counted them.
    bytes: u64,
}

impl Queued {
    fn key(&self) -> (String, String) {
        (self.received.ret.jid.clone(), self.received.ret.id.clone())
    }
}

/// A batch admitted whose returns are not all handled, or that waits for
/// a batch admitted before it.
struct OpenBatch {
    /// Its returns not committed yet.
    left: usize,
    /// Its held bytes not released yet: the last of its returns releases
    /// what remains, so the parts add up to [`ToStore::held_bytes`].
    held_bytes: u64,
    started: Vec<String>,
}

/// The writer's queue (issue 25, session 22): small returns
/// ([`SMALL_RETURN_BYTES`]) in one lane, the rest in another; a commit
/// takes small returns first, and is bounded by [`MAX_RETURNS_PER_COMMIT`]
/// and [`MAX_COMMIT_BYTES`]. Returns of different jobs or minions are
/// independent; a return whose job and minion have a large return
/// queued goes behind it, so two returns of one minion and job keep
/// their order. A batch's `started` minions are handed back once its
/// returns and those of every batch before it are committed, as when
/// the batches were committed in order.
#[derive(Default)]
pub struct CommitQueue {
    small: VecDeque<Queued>,
    large: VecDeque<Queued>,
    /// How many returns of each (jid, minion) wait in the large lane.
    large_keys: HashMap<(String, String), usize>,
    /// The batches not done, oldest first; the first is number `first`.
    open: VecDeque<OpenBatch>,
    first: u64,
}

impl CommitQueue {
    /// No return waits.
    pub fn is_empty(&self) -> bool {
        self.small.is_empty() && self.large.is_empty()
    }

    /// A large return waits.
    pub fn has_large(&self) -> bool {
        !self.large.is_empty()
    }

    /// Queues `batch`'s returns, each in its lane.
    pub fn admit(&mut self, batch: ToStore) {
        let number = self.first + self.open.len() as u64;
        let ToStore {
            returns,
            secrets,
            started,
            held_bytes,
        } = batch;
        self.open.push_back(OpenBatch {
            left: returns.len(),
            held_bytes,
            started,
        });
        let mut secrets = secrets.into_iter();
        for (sid, received) in returns {
            let size = received.size();
            let bytes = size.unwrap_or(0);
            let queued = Queued {
                sid,
                received,
                secrets: secrets.next().flatten(),
                batch: number,
                bytes,
            };
            // A return whose size is not known (an older minion's, or
            // one the master made an error of) queues with the large ones.
            let small = size.is_some()
                && bytes <= SMALL_RETURN_BYTES
                && !self.large_keys.contains_key(&queued.key());
            if small {
                self.small.push_back(queued);
            } else {
                *self.large_keys.entry(queued.key()).or_default() += 1;
                self.large.push_back(queued);
            }
        }
    }

    /// The next commit's returns: small ones if any wait, else large ones
    /// when `large` (a test build may hold them), within
    /// [`MAX_RETURNS_PER_COMMIT`] and [`MAX_COMMIT_BYTES`].
    fn take(&mut self, large: bool) -> Vec<Queued> {
        let from_large = self.small.is_empty();
        if from_large && !large {
            return Vec::new();
        }
        let lane = if from_large {
            &mut self.large
        } else {
            &mut self.small
        };
        let mut group: Vec<Queued> = Vec::new();
        let mut bytes = 0u64;
        while let Some(next) = lane.front() {
            if group.len() >= MAX_RETURNS_PER_COMMIT
                || (!group.is_empty() && bytes + next.bytes > MAX_COMMIT_BYTES)
            {
                break;
            }
            bytes += next.bytes;
            let Some(next) = lane.pop_front() else { break };
            group.push(next);
        }
        if from_large {
            for queued in &group {
                let key = queued.key();
                if let Some(n) = self.large_keys.get_mut(&key) {
                    *n -= 1;
                    if *n == 0 {
                        self.large_keys.remove(&key);
                    }
                }
            }
        }
        group
    }

    /// `group` was committed (`fresh`, at `committed`): what the main task
    /// gets of it, with the batches done; `None` when there is nothing.
    fn settle(
        &mut self,
        group: Vec<Queued>,
        fresh: Result<Vec<bool>, String>,
        committed: Instant,
    ) -> Option<Stored> {
        let mut held_bytes = 0u64;
        let mut returns = Vec::with_capacity(group.len());
        for queued in group {
            let index = usize::try_from(queued.batch - self.first).unwrap_or(usize::MAX);
            if let Some(open) = self.open.get_mut(index) {
                open.left = open.left.saturating_sub(1);
                let bytes = if open.left == 0 {
                    open.held_bytes
                } else {
                    queued.bytes.min(open.held_bytes)
                };
                open.held_bytes -= bytes;
                held_bytes += bytes;
            }
            returns.push((queued.sid, queued.received));
        }
        let mut started = Vec::new();
        let mut batches = 0;
        while self.open.front().is_some_and(|b| b.left == 0) {
            if let Some(done) = self.open.pop_front() {
                // A batch without returns released nothing yet.
                held_bytes += done.held_bytes;
                started.extend(done.started);
                self.first += 1;
                batches += 1;
            }
        }
        if returns.is_empty() && batches == 0 {
            return None;
        }
        Some(Stored {
            returns,
            fresh,
            started,
            held_bytes,
            batches,
            committed,
        })
    }
}

/// Checks `group`'s packed bytes ([`crate::intake::checked_return`]: those
/// that are no value a minion may send become error returns) and commits
/// it in one transaction: the returns as checked, and for each whether it
/// is new (or why the commit failed). An empty group commits nothing.
fn commit(cache: &mut JobCache, group: Vec<Queued>) -> (Vec<Queued>, Result<Vec<bool>, String>) {
    if group.is_empty() {
        return (group, Ok(Vec::new()));
    }
    let group: Vec<Queued> = group
        .into_iter()
        .map(|q| {
            let id = q.received.ret.id.clone();
            Queued {
                received: crate::intake::checked_return(&id, q.received),
                ..q
            }
        })
        .collect();
    let fresh = store(
        cache,
        group
            .iter()
            .map(|q| q.received.record(q.secrets.as_deref())),
    );
    // Stored: the main task fires the events from the expanded bytes.
    let group = group
        .into_iter()
        .map(|mut q| {
            q.received.frame = None;
            q
        })
        .collect();
    (group, fresh)
}

/// Checks and commits `batch` on the caller's thread (the master's own
/// commit when the writer thread is gone).
pub fn store_here(cache: &mut JobCache, batch: ToStore) -> Stored {
    let mut queue = CommitQueue::default();
    queue.admit(batch);
    let mut group = Vec::new();
    while !queue.is_empty() {
        group.extend(queue.take(true));
    }
    let (group, fresh) = commit(cache, group);
    queue
        .settle(group, fresh, Instant::now())
        .unwrap_or_else(|| Stored {
            returns: Vec::new(),
            fresh: Ok(Vec::new()),
            started: Vec::new(),
            held_bytes: 0,
            batches: 0,
            committed: Instant::now(),
        })
}

/// Commits `rows` in one transaction: for each return, whether it is new
/// (or why the commit failed).
fn store<'r>(
    cache: &mut JobCache,
    rows: impl Iterator<Item = (Cow<'r, JobReturn>, ReturnValue<'r>)>,
) -> Result<Vec<bool>, String> {
    let (rets, packed): (Vec<_>, Vec<_>) = rows.unzip();
    cache
        .store_return_rows(rets.iter().map(AsRef::as_ref).zip(packed))
        .map_err(|e| e.to_string())
}

impl Drop for ReturnWriter {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ret(jid: &str, id: &str, value: serde_json::Value) -> JobReturn {
        JobReturn {
            jid: jid.into(),
            id: id.into(),
            fun: "test.echo".into(),
            fun_args: vec![],
            ret: value,
            retcode: 0,
            success: true,
        }
    }

    #[test]
    fn batches_are_committed_in_order_and_a_resend_is_not_new() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.sqlite");
        let (tx, rx) = mpsc::channel();
        let mut writer = ReturnWriter::start(&path, move |stored| {
            tx.send(stored).unwrap();
        })
        .unwrap();
        let jid = "20260101000000000001";
        for (n, id) in ["web1", "web2", "web1"].into_iter().enumerate() {
            writer
                .store(ToStore {
                    returns: vec![(n as u64, Received::plain(ret(jid, id, json!(id))))],
                    // web2's secrets masked: the record differs from the return.
                    secrets: vec![(id == "web2").then(|| Arc::new(Cleartexts::new(["web2"])))],
                    started: vec![format!("started-{n}")],
                    held_bytes: 0,
                })
                .map_err(|_| "writer gone")
                .unwrap();
        }
        writer.finish();
        // However the writer grouped them, in order, each batch done once.
        let (mut seen, mut started, mut batches) = (Vec::new(), Vec::new(), 0);
        for s in rx.try_iter() {
            let sids = s.returns.iter().map(|(sid, _)| *sid);
            seen.extend(sids.zip(s.fresh.unwrap()));
            started.extend(s.started);
            batches += s.batches;
        }
        assert_eq!(seen, [(0, true), (1, true), (2, false)]);
        assert_eq!(started, ["started-0", "started-1", "started-2"]);
        assert_eq!(batches, 3);
        let cache = JobCache::open(&path).unwrap();
        let mut rows = cache.returns(jid).unwrap();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(rows[0].0, "web1");
        assert_eq!(rows[1].1["return"], json!("**********"), "{rows:?}");
        // Gone: a batch is given back to be committed by the caller.
        assert!(writer
            .store(ToStore {
                returns: vec![],
                secrets: vec![],
                started: vec![],
                held_bytes: 0,
            })
            .is_err());
    }

    #[test]
    fn a_packed_return_is_stored_as_its_bytes_compressed_and_masked_when_it_must_be() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = JobCache::open(&dir.path().join("jobs.sqlite")).unwrap();
        let value = json!({"test_|-a_|-a_|-succeed_without_changes": {
            "duration": 0.1 + 0.2, "start_time": "12:00:00.000001", "big": u64::MAX,
            "comment": "Succès ✓ \u{1F600} pw=hunter22", "changes": {}, "__run_num__": 0}});
        let packed = |jid: &str, id: &str| {
            Received::packed(
                halite_proto::msg::PackedReturn::pack(ret(jid, id, value.clone())).unwrap(),
            )
        };
        let (plain_jid, packed_jid) = ("20260101000000000001", "20260101000000000002");
        let batch = ToStore {
            returns: vec![
                (0, Received::plain(ret(plain_jid, "web1", value.clone()))),
                (1, packed(packed_jid, "web1")),
                (2, packed(packed_jid, "web2")),
            ],
            secrets: vec![None, None, Some(Arc::new(Cleartexts::new(["hunter22"])))],
            started: vec![],
            held_bytes: 0,
        };
        assert_eq!(
            store_here(&mut cache, batch).fresh.unwrap(),
            [true, true, true]
        );
        let column = |jid: &str, id: &str| -> Vec<u8> {
            let conn = rusqlite::Connection::open(dir.path().join("jobs.sqlite")).unwrap();
            conn.query_row(
                "SELECT ret FROM returns WHERE jid = ?1 AND id = ?2",
                [jid, id],
                |r| r.get(0),
            )
            .unwrap()
        };
        // The packed bytes themselves, compressed: the same column as the
        // decoded value gives, and no JSON in it.
        let bytes = halite_proto::packed::pack(&value).unwrap();
        assert_eq!(
            zstd::decode_all(&column(packed_jid, "web1")[..]).unwrap(),
            bytes
        );
        assert_eq!(column(packed_jid, "web1"), column(plain_jid, "web1"));
        // Read back as the value (floats, big ints, unicode) for either.
        let read = |jid: &str| cache.returns(jid).unwrap();
        assert_eq!(read(plain_jid)[0].1["return"], value);
        let packed_rows = read(packed_jid);
        assert_eq!(packed_rows[0].1["return"], value);
        // web2's secret is masked, the rest as sent.
        let comment =
            &packed_rows[1].1["return"]["test_|-a_|-a_|-succeed_without_changes"]["comment"];
        assert_eq!(comment, "Succès ✓ \u{1F600} pw=**********");
        let stored = zstd::decode_all(&column(packed_jid, "web2")[..]).unwrap();
        assert!(!stored.windows(8).any(|w| w == b"hunter22"));
    }

    #[test]
    fn a_framed_return_is_stored_as_the_minions_frame_unless_it_must_be_masked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.sqlite");
        let mut cache = JobCache::open(&path).unwrap();
        let value = json!({"a": {"comment": "pw=hunter22 ".repeat(500), "duration": 0.5}});
        let jid = "20260101000000000001";
        let framed = |id: &str| {
            halite_proto::msg::PackedReturn::pack(ret(jid, id, value.clone()))
                .unwrap()
                .framed()
                .unwrap()
        };
        let (web1, web2) = (framed("web1"), framed("web2"));
        let mut counts = ReturnCounts::default();
        let returns = vec![
            (0, Received::packed(web1.clone())),
            (1, Received::packed(web2)),
        ];
        // Counted at the size the frame names, not the frame's own.
        let plain_len = halite_proto::packed::pack(&value).unwrap().len() as u64;
        assert_eq!(counts.hold(&returns), 2 * plain_len);
        let batch = ToStore {
            returns,
            secrets: vec![None, Some(Arc::new(Cleartexts::new(["hunter22"])))],
            started: vec![],
            held_bytes: 2 * plain_len,
        };
        let stored = store_here(&mut cache, batch);
        assert_eq!(stored.fresh.unwrap(), [true, true]);
        // Handed back expanded (the events' bytes), the frame let go.
        for (_, r) in &stored.returns {
            assert_eq!(r.packed.as_ref().map(|b| b.len() as u64), Some(plain_len));
            assert!(r.frame.is_none());
        }
        let column = |id: &str| -> Vec<u8> {
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.query_row("SELECT ret FROM returns WHERE id = ?1", [id], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(column("web1"), web1.ret.to_vec());
        let masked = zstd::decode_all(&column("web2")[..]).unwrap();
        assert!(!masked.windows(8).any(|w| w == b"hunter22"));
        let rows = cache.returns(jid).unwrap();
        assert_eq!(rows[0].1["return"], value);
        assert!(rows[1].1["return"]["a"]["comment"]
            .as_str()
            .unwrap()
            .starts_with("pw=********** "));
    }

    /// A packed return of `jid` from `id` whose value is a string of `len`
    /// bytes (packed: a few bytes more).
    fn sized(jid: &str, id: &str, len: usize) -> Received {
        let value = json!("x".repeat(len));
        Received::packed(halite_proto::msg::PackedReturn::pack(ret(jid, id, value)).unwrap())
    }

    /// A batch of `returns` (sessions 0..), its bytes held in `counts`.
    fn batch(counts: &mut ReturnCounts, returns: Vec<Received>, started: &[&str]) -> ToStore {
        let returns: Vec<(u64, Received)> = returns.into_iter().map(|r| (0, r)).collect();
        ToStore {
            held_bytes: counts.hold(&returns),
            secrets: vec![None; returns.len()],
            returns,
            started: started.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn ids(stored: &Stored) -> Vec<(String, String)> {
        stored
            .returns
            .iter()
            .map(|(_, r)| (r.ret.jid.clone(), r.ret.id.clone()))
            .collect()
    }

    #[test]
    fn a_small_return_queued_behind_large_ones_is_committed_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.sqlite");
        // The writer takes no large group while this exists (a test build's
        // hold): what it commits meanwhile went ahead of them.
        std::fs::write(hold_path(&path), b"").unwrap();
        let (tx, rx) = mpsc::channel();
        let mut writer = ReturnWriter::start(&path, move |stored| {
            tx.send(stored).unwrap();
        })
        .unwrap();
        let mut counts = ReturnCounts::default();
        let (highstate, ping) = ("20260101000000000001", "20260101000000000002");
        for n in 0..3 {
            let large = (0..4)
                .map(|k| sized(highstate, &format!("web{n}{k}"), 300_000))
                .collect();
            let large = batch(&mut counts, large, &[]);
            writer.store(large).map_err(|_| "writer gone").unwrap();
        }
        let small = batch(&mut counts, vec![sized(ping, "probe", 1)], &[]);
        writer.store(small).map_err(|_| "writer gone").unwrap();
        let first = rx.recv_timeout(Duration::from_secs(60)).unwrap();
        assert_eq!(ids(&first), [(ping.to_string(), "probe".to_string())]);
        assert_eq!(first.fresh.clone().unwrap(), [true]);
        let cache = JobCache::open(&path).unwrap();
        assert_eq!(cache.returns(ping).unwrap().len(), 1);
        assert!(cache.returns(highstate).unwrap().is_empty());
        // Let go, the twelve large ones follow, none lost.
        std::fs::remove_file(hold_path(&path)).unwrap();
        writer.finish();
        let rest: Vec<Stored> = rx.try_iter().collect();
        assert_eq!(rest.iter().map(|s| s.returns.len()).sum::<usize>(), 12);
        assert_eq!(cache.returns(highstate).unwrap().len(), 12);
        for s in std::iter::once(&first).chain(&rest) {
            counts.release(s.returns.len(), s.held_bytes);
        }
        assert_eq!((counts.held, counts.held_bytes), (0, 0));
    }

    #[test]
    fn a_commit_is_bounded_in_bytes_and_a_split_batch_releases_its_bytes_exactly_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = JobCache::open(&dir.path().join("jobs.sqlite")).unwrap();
        let mut counts = ReturnCounts::default();
        let jid = "20260101000000000001";
        // One batch: ten returns of 1 MiB, two small ones among them, and
        // a minion that started; then a batch of one small return.
        let mut returns: Vec<Received> = (0..10)
            .map(|k| sized(jid, &format!("big{k}"), 1 << 20))
            .collect();
        returns.insert(3, sized(jid, "small1", 10));
        returns.push(sized(jid, "small2", 60_000));
        let first = batch(&mut counts, returns, &["restarted"]);
        let second = batch(&mut counts, vec![sized(jid, "small3", 10)], &["later"]);
        let held = first.held_bytes + second.held_bytes;
        let mut queue = CommitQueue::default();
        queue.admit(first);
        queue.admit(second);
        let mut commits = Vec::new();
        while !queue.is_empty() {
            let group = queue.take(true);
            let bytes: u64 = group.iter().map(|q| q.bytes).sum();
            assert!(
                group.len() == 1 || bytes <= MAX_COMMIT_BYTES,
                "{bytes} bytes in one commit"
            );
            let (group, fresh) = commit(&mut cache, group);
            let stored = queue.settle(group, fresh, Instant::now()).unwrap();
            counts.release(stored.returns.len(), stored.held_bytes);
            commits.push(stored);
        }
        // The small ones first, in one commit; then the large in groups of 3
        // (four would pass 4 MiB).
        let names: Vec<Vec<String>> = commits
            .iter()
            .map(|s| ids(s).into_iter().map(|(_, id)| id).collect())
            .collect();
        assert_eq!(names[0], ["small1", "small2", "small3"]);
        assert_eq!(
            names[1..].iter().map(Vec::len).collect::<Vec<_>>(),
            [3, 3, 3, 1]
        );
        // The first batch's bytes released across its five commits, once:
        // none held at the end, some until its last part.
        assert_eq!((counts.held, counts.held_bytes), (0, 0));
        let released: u64 = commits.iter().map(|s| s.held_bytes).sum();
        assert_eq!(released, held);
        assert!(commits[3].held_bytes > 0);
        // Both batches are done with the last commit only, and their
        // started minions with it (the second's waited for the first's
        // large returns, as the batches were queued in that order).
        let done: Vec<(usize, Vec<String>)> = commits
            .iter()
            .map(|s| (s.batches, s.started.clone()))
            .collect();
        assert_eq!(
            done,
            [
                (0, vec![]),
                (0, vec![]),
                (0, vec![]),
                (0, vec![]),
                (2, vec!["restarted".to_string(), "later".to_string()]),
            ]
        );
        assert_eq!(cache.returns(jid).unwrap().len(), 13);
    }

    #[test]
    fn two_returns_of_one_minion_and_job_keep_their_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.sqlite");
        let mut cache = JobCache::open(&path).unwrap();
        let mut counts = ReturnCounts::default();
        let (job, other) = ("20260101000000000001", "20260101000000000002");
        let mut queue = CommitQueue::default();
        // web1's large return of `job`, then a small one of the same job and
        // minion (the later one is what the job cache keeps), then small
        // ones of another job and another minion, which may go first.
        queue.admit(batch(&mut counts, vec![sized(job, "web1", 100_000)], &[]));
        queue.admit(batch(
            &mut counts,
            vec![
                sized(job, "web1", 5),
                sized(other, "web1", 5),
                sized(job, "web2", 5),
            ],
            &[],
        ));
        let mut order = Vec::new();
        while !queue.is_empty() {
            let (group, fresh) = commit(&mut cache, queue.take(true));
            let stored = queue.settle(group, fresh, Instant::now()).unwrap();
            order.push(ids(&stored));
        }
        let pair = |j: &str, i: &str| (j.to_string(), i.to_string());
        assert_eq!(
            order,
            [
                vec![pair(other, "web1"), pair(job, "web2")],
                vec![pair(job, "web1"), pair(job, "web1")],
            ]
        );
        let kept = cache.returns(job).unwrap();
        let web1 = kept.iter().find(|(id, _)| id == "web1").unwrap();
        assert_eq!(web1.1["return"], json!("xxxxx"));
    }
}
