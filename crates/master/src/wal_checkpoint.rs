//! The job cache's WAL checkpointer (issue 25): the master's connections
//! commit with `wal_autocheckpoint=0` ([`JobCache::without_autocheckpoint`])
//! and this thread, on a connection of its own, moves the WAL back into the
//! database. SQLite's automatic checkpoint runs on the committing
//! connection and `fsync`s there: on a busy disk the return writer sat in
//! it for 0.2-2.6 s, committing nothing (a ping's return waited behind it).
//!
//! A `PASSIVE` checkpoint takes no lock that a writer waits for: commits go
//! on while it copies and flushes. It runs once about [`WAL_BOUND_BYTES`]
//! were committed since the last one. Under a steady stream of commits a
//! passive checkpoint never catches the WAL's end, so SQLite cannot start
//! the WAL over; past [`WAL_HARD_BOUND_FRAMES`] a `RESTART` (it waits for
//! the writer, but only for what the passive one left) bounds the file.
//! When no commit was signalled for [`IDLE`] (the master's other
//! connections' writes included), a passive checkpoint and a `TRUNCATE`
//! that waits for no one empty the file. What a commit promises is unchanged
//! (`synchronous=NORMAL`: committed before acknowledged, flushed at a
//! checkpoint).
//!
//! [`JobCache::without_autocheckpoint`]: halite_client::jobcache::JobCache::without_autocheckpoint

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use rusqlite::Connection;

/// Bytes committed (as the writer counts them) after which a passive
/// checkpoint runs: about SQLite's own 1,000 pages of 4 KiB.
pub const WAL_BOUND_BYTES: u64 = 4 << 20;

/// What a commit adds to the WAL beyond its returns' bytes (its b-tree and
/// index pages), counted per commit.
const COMMIT_PAGES_BYTES: u64 = 2 * 4096;

/// WAL frames past which a checkpoint restarts the WAL (waiting for the
/// writer to finish its commit): 64 MiB of 4 KiB pages.
pub const WAL_HARD_BOUND_FRAMES: i64 = 16_384;

/// No commit for this long: the WAL is checkpointed and truncated.
pub const IDLE: Duration = Duration::from_secs(1);

/// Why the checkpointer could not start.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointerError {
    /// Its connection to the job cache could not be opened.
    #[error("cannot open the job cache {path} for its checkpointer: {source}")]
    Open {
        /// The job cache.
        path: String,
        /// SQLite's reason.
        source: rusqlite::Error,
    },
    /// Its thread could not be started.
    #[error("cannot start the job cache's checkpointer thread: {0}")]
    Thread(#[from] std::io::Error),
}

/// Tells the checkpointer what was committed; cheap to clone and to call
/// after every commit (a channel send, no lock the commit path waits for).
#[derive(Clone)]
pub struct CheckpointSignal(mpsc::Sender<u64>);

impl CheckpointSignal {
    /// A commit of returns holding `bytes` has ended.
    pub fn committed(&self, bytes: u64) {
        let _ = self.0.send(bytes.saturating_add(COMMIT_PAGES_BYTES));
    }
}

/// The checkpointer's thread; it ends when every [`CheckpointSignal`] is
/// dropped (the master stopping), after a last checkpoint.
pub struct Checkpointer {
    signal: CheckpointSignal,
}

impl Checkpointer {
    /// Opens a connection of its own to the job cache at `path` and starts
    /// the thread.
    pub fn start(path: &Path) -> Result<Self, CheckpointerError> {
        let open = |path: &Path| -> rusqlite::Result<Connection> {
            let conn = Connection::open(path)?;
            conn.pragma_update(None, "wal_autocheckpoint", 0)?;
            conn.busy_timeout(Duration::from_secs(5))?;
            Ok(conn)
        };
        let conn = open(path).map_err(|source| CheckpointerError::Open {
            path: path.display().to_string(),
            source,
        })?;
        let hold = hold_path(path);
        let (tx, rx) = mpsc::channel::<u64>();
        std::thread::Builder::new()
            .name("job-cache-ckpt".into())
            .spawn(move || run(&conn, &rx, &hold))?;
        Ok(Self {
            signal: CheckpointSignal(tx),
        })
    }

    /// A handle for a committing thread.
    pub fn signal(&self) -> CheckpointSignal {
        self.signal.clone()
    }
}

/// The thread: checkpoints as the signals' bytes add up, and when idle.
fn run(conn: &Connection, commits: &mpsc::Receiver<u64>, hold: &Path) {
    let mut pending: u64 = 0;
    loop {
        match commits.recv_timeout(IDLE) {
            Ok(bytes) => {
                pending = pending.saturating_add(bytes);
                if pending < WAL_BOUND_BYTES {
                    continue;
                }
                crate::test_hold::wait_while_held(hold);
                pending = 0;
                if let Some((_, log, _)) = checkpoint(conn, "PASSIVE") {
                    if log > WAL_HARD_BOUND_FRAMES {
                        checkpoint(conn, "RESTART");
                    }
                }
            }
            // Also what the master's other connections wrote (a job at
            // publish, grains), which no signal counts: a passive
            // checkpoint with nothing to copy costs no flush.
            Err(mpsc::RecvTimeoutError::Timeout) => {
                crate::test_hold::wait_while_held(hold);
                pending = 0;
                idle_truncate(conn);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                if pending > 0 {
                    checkpoint(conn, "PASSIVE");
                }
                break;
            }
        }
    }
}

/// Runs `PRAGMA wal_checkpoint(mode)`: SQLite's (busy, WAL frames,
/// frames checkpointed), or `None` when it failed (logged; the next one
/// tries again).
fn checkpoint(conn: &Connection, mode: &str) -> Option<(i64, i64, i64)> {
    let started = std::time::Instant::now();
    let row = conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
        ))
    });
    match row {
        Ok((busy, log, done)) if log > 0 => {
            tracing::debug!(
                mode,
                busy,
                log,
                done,
                ms = started.elapsed().as_millis() as u64,
                "job cache checkpointed"
            );
            Some((busy, log, done))
        }
        Ok(row) => Some(row),
        Err(e) => {
            tracing::warn!(mode, error = %e, "the job cache's checkpoint failed; the next one tries again");
            None
        }
    }
}

/// Idle: everything into the database (passive), then the WAL truncated if
/// no one is writing or reading an old snapshot (it waits for no one).
fn idle_truncate(conn: &Connection) {
    let Some((_, log, done)) = checkpoint(conn, "PASSIVE") else {
        return;
    };
    if log == 0 || log != done || conn.busy_timeout(Duration::ZERO).is_err() {
        return;
    }
    checkpoint(conn, "TRUNCATE");
    let _ = conn.busy_timeout(Duration::from_secs(5));
}

/// A test build's hold on checkpoints: while a file of this name sits
/// beside the job cache, the checkpointer waits before each checkpoint (as
/// if it sat in a long `fsync`), so a test can see commits go on meanwhile
/// without timing anything. Only with debug assertions: a release master
/// never looks.
pub fn hold_path(job_cache: &Path) -> PathBuf {
    let mut name = job_cache.as_os_str().to_owned();
    name.push(".hold-checkpoint");
    PathBuf::from(name)
}
