//! Returns committed to the job cache off the master's main task (issue
//! 25): a fleet's 1,000-state returns cost their encoding and their
//! SQLite insert, and while the main task did that, pings, publications
//! and every other minion's messages waited behind it. One thread with
//! its own connection to the job cache commits the batches in order
//! (the batches queued meanwhile in one transaction) and hands each back;
//! the main task then acknowledges the returns and fires their events, as
//! it did after its own commit.

use std::borrow::Cow;
use std::path::Path;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use halite_client::jobcache::{JobCache, JobCacheError};
use halite_proto::msg::{JobReturn, PackedReturn};
use halite_salt_rules::secret::Cleartexts;
use serde_json::Value;

/// Returns committed in one transaction at most.
const MAX_RETURNS_PER_COMMIT: usize = 1024;

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
    /// the commit ([`crate::intake::checked_return`]).
    pub packed: Option<Arc<Vec<u8>>>,
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
            arrived: Instant::now(),
        }
    }

    /// A packed return (its bytes checked before it is stored:
    /// [`crate::intake::checked_return`]).
    pub fn packed(p: PackedReturn) -> Self {
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
            packed: Some(Arc::new(p.ret.into_vec())),
            arrived: Instant::now(),
        }
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
    /// and masked (the cache packs it); packed, the return and its checked
    /// bytes, stored as they are (no `Value`, no transcode); else as
    /// received.
    fn record(&self, secrets: Option<&Cleartexts>) -> (Cow<'_, JobReturn>, Option<&[u8]>) {
        if let Some(secrets) = secrets {
            let ret = self.decoded();
            let masked = JobReturn {
                ret: secrets.mask(&ret.ret),
                fun_args: ret.fun_args.iter().map(|a| secrets.mask(a)).collect(),
                ..ret.into_owned()
            };
            return (Cow::Owned(masked), None);
        }
        (
            Cow::Borrowed(&self.ret),
            self.packed.as_deref().map(Vec::as_slice),
        )
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
    ack_wait_total: Duration,
    ack_wait_max: Duration,
    /// Of that wait, the most from the arrival to the end of the commit
    /// (the main task's reading and the writer's queue and commit)...
    to_commit_max: Duration,
    /// ... and from the end of the commit to the acknowledgement (the
    /// main task's turn to handle the committed batch).
    after_commit_max: Duration,
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
    /// acknowledged now.
    pub fn acked(&mut self, arrived: Instant, committed: Instant) {
        let now = Instant::now();
        let wait = now.saturating_duration_since(arrived);
        self.acked += 1;
        self.ack_wait_total += wait;
        self.ack_wait_max = self.ack_wait_max.max(wait);
        self.to_commit_max = self
            .to_commit_max
            .max(committed.saturating_duration_since(arrived));
        self.after_commit_max = self
            .after_commit_max
            .max(now.saturating_duration_since(committed));
    }

    /// The counters as `master.stats` shows them.
    pub fn snapshot(&self) -> Value {
        let ms = |d: Duration| (d.as_secs_f64() * 10_000.0).round() / 10.0;
        let mean = match u32::try_from(self.acked) {
            Ok(n) if n > 0 => ms(self.ack_wait_total / n),
            _ => 0.0,
        };
        serde_json::json!({
            "packed": self.packed,
            "plain": self.plain,
            "held": self.held,
            "held_bytes": self.held_bytes,
            "peak_held_bytes": self.peak_held_bytes,
            "bound": self.bound,
            "acked": self.acked,
            "ack_wait_ms": {
                "mean": mean,
                "max": ms(self.ack_wait_max),
                "to_commit_max": ms(self.to_commit_max),
                "after_commit_max": ms(self.after_commit_max),
            },
        })
    }
}

/// The packed bytes of `returns`.
fn packed_bytes(returns: &[(u64, Received)]) -> u64 {
    returns
        .iter()
        .filter_map(|(_, r)| r.packed.as_ref())
        .map(|b| b.len() as u64)
        .sum()
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

impl ToStore {
    /// The batch with every packed return's bytes checked (those that are
    /// no value a minion may send become error returns): what is stored,
    /// acknowledged and fired.
    fn checked(mut self) -> Self {
        self.returns = self
            .returns
            .into_iter()
            .map(|(sid, r)| {
                let id = r.ret.id.clone();
                (sid, crate::intake::checked_return(&id, r))
            })
            .collect();
        self
    }
}

/// A batch the writer committed (or could not).
pub struct Stored {
    /// The returns, with the sessions they came from.
    pub returns: Vec<(u64, Received)>,
    /// For each, whether it is new; or why the commit failed (then none is
    /// acknowledged, and the minions send them again).
    pub fresh: Result<Vec<bool>, String>,
    /// As in [`ToStore::started`].
    pub started: Vec<String>,
    /// As [`ToStore::held_bytes`].
    pub held_bytes: u64,
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
    /// thread; `done` gets every committed batch, in order.
    pub fn start(
        path: &Path,
        done: impl Fn(Stored) + Send + 'static,
    ) -> Result<Self, ReturnWriterError> {
        let mut cache = JobCache::open(path)?;
        let (queue, batches) = mpsc::channel::<ToStore>();
        let thread = std::thread::Builder::new()
            .name("job-cache".into())
            .spawn(move || {
                while let Ok(first) = batches.recv() {
                    // The batches that queued during the last commit go together.
                    let mut group = vec![first.checked()];
                    let mut count = group[0].returns.len();
                    while count < MAX_RETURNS_PER_COMMIT {
                        match batches.try_recv() {
                            Ok(next) => {
                                count += next.returns.len();
                                group.push(next.checked());
                            }
                            Err(_) => break,
                        }
                    }
                    let result = store(&mut cache, &group);
                    let committed = Instant::now();
                    let mut fresh = result.map(Vec::into_iter);
                    for batch in group {
                        let n = batch.returns.len();
                        let mine = match &mut fresh {
                            Ok(all) => Ok(all.by_ref().take(n).collect()),
                            Err(e) => Err(e.clone()),
                        };
                        done(Stored {
                            returns: batch.returns,
                            fresh: mine,
                            started: batch.started,
                            held_bytes: batch.held_bytes,
                            committed,
                        });
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

/// Checks and commits `batch` on the caller's thread (the master's own
/// commit when the writer thread is gone).
pub fn store_here(cache: &mut JobCache, batch: ToStore) -> Stored {
    let batch = batch.checked();
    let fresh = store(cache, std::slice::from_ref(&batch));
    Stored {
        returns: batch.returns,
        fresh,
        started: batch.started,
        held_bytes: batch.held_bytes,
        committed: Instant::now(),
    }
}

/// Commits `batches` (checked) in one transaction: for each return,
/// whether it is new (or why the commit failed).
fn store(cache: &mut JobCache, batches: &[ToStore]) -> Result<Vec<bool>, String> {
    let rows: Vec<(Cow<'_, JobReturn>, Option<&[u8]>)> = batches
        .iter()
        .flat_map(|b| {
            b.returns
                .iter()
                .zip(&b.secrets)
                .map(|((_, received), secrets)| received.record(secrets.as_deref()))
        })
        .collect();
    let (rets, packed): (Vec<_>, Vec<_>) = rows.into_iter().unzip();
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
        let stored: Vec<Stored> = rx.try_iter().collect();
        let seen: Vec<(u64, Vec<bool>, Vec<String>)> = stored
            .into_iter()
            .map(|s| (s.returns[0].0, s.fresh.unwrap(), s.started))
            .collect();
        assert_eq!(
            seen,
            [
                (0, vec![true], vec!["started-0".to_string()]),
                (1, vec![true], vec!["started-1".to_string()]),
                (2, vec![false], vec!["started-2".to_string()]),
            ]
        );
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
        assert_eq!(store(&mut cache, &[batch]).unwrap(), [true, true, true]);
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
}
