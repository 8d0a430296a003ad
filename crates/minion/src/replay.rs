//! The highest publication counter a minion ran, per publish-key epoch,
//! kept in `cachedir/publications` so a publication captured on the wire
//! and replayed after the minion restarts is refused (the class of Salt's
//! CVE-2022-22936). Recorded before a job runs: at most once per minion.
//!
//! The counters are checked in memory; their file is written by a thread
//! of its own (`Keeper`), a new file and a rename, not synced (as the
//! minion's kept returns, `store.rs`), so no job waits for the disk. A
//! write and a rename are a disk flush's worth when the disk is busy (the
//! rename of a file replaced waits for its data): a sync before every job,
//! then the rename alone, held each `test.ping` 0.1-1.1 s during a fleet
//! highstate on the bench's shared disk (issue 25, session 24). The file
//! lags a job by that write at most: a minion killed within it may run a
//! replay of that one publication once after it restarts; a link that
//! ends (a reconnection, a stop) waits for the last write, and a crash of
//! the host loses what the kernel had not written back, which the sync did
//! not cover either (the rename after it was never synced).

use std::path::{Path, PathBuf};
use std::sync::mpsc;

use serde::{Deserialize, Serialize};

/// Epochs remembered (the master rotates its key on `publish_session` and
/// on key changes; older epochs can no longer be opened anyway).
const EPOCHS_KEPT: usize = 16;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Seen {
    /// (epoch, highest counter run), newest epoch last.
    epochs: Vec<(u32, u64)>,
}

/// The per-epoch counters, on disk for a real minion, in memory for the swarm.
pub struct ReplayGuard {
    seen: Seen,
    keeper: Option<Keeper>,
}

/// The thread that writes the counters' file, so that the link (every
/// identity's jobs, returns and pings) never waits for the disk; dropped,
/// it finishes the last write.
struct Keeper {
    /// The counters to write, all of them each time (the newest wins).
    newest: Option<mpsc::Sender<Vec<u8>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Keeper {
    fn start(path: PathBuf) -> std::io::Result<Keeper> {
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        let thread = std::thread::Builder::new()
            .name("publications".into())
            .spawn(move || {
                while let Ok(mut bytes) = rx.recv() {
                    while let Ok(newer) = rx.try_recv() {
                        bytes = newer;
                    }
                    wait_while_held(&path);
                    if let Err(e) = halite_proto::keyfile::write_private_unsynced(&path, &bytes) {
                        tracing::error!(path = %path.display(), error = %e, "cannot record the publication counters in cachedir; a replay of the jobs run since would not be refused after a restart: check the directory's space and permissions");
                    }
                }
            })?;
        Ok(Keeper {
            newest: Some(tx),
            thread: Some(thread),
        })
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        drop(self.newest.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A test build's hold on the counters' writes: while `<file>.hold` exists
/// beside the counters' file, the keeper waits before writing, so a test
/// sees a job run and answer while its counter is not yet written, without
/// timing anything. Only with debug assertions: a release minion never
/// looks.
#[cfg(debug_assertions)]
fn wait_while_held(path: &Path) {
    let mut hold = path.as_os_str().to_owned();
    hold.push(".hold");
    while Path::new(&hold).exists() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[cfg(not(debug_assertions))]
fn wait_while_held(_path: &Path) {}

impl ReplayGuard {
    /// Counters kept at `path` (read now; a missing or unreadable file
    /// starts empty, with a log line for the unreadable one), written by a
    /// `Keeper` of their own.
    pub fn at(path: PathBuf) -> Self {
        let seen = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(path = %path.display(), error = %e, "unreadable publication counters ignored");
                Seen::default()
            }),
            Err(_) => Seen::default(),
        };
        let keeper = Keeper::start(path.clone())
            .map_err(|e| {
                tracing::error!(path = %path.display(), error = %e, "cannot start the thread that keeps the publication counters; they are kept in memory only, and a replay after a restart would not be refused");
            })
            .ok();
        Self { seen, keeper }
    }

    /// Counters in memory only (the swarm's identities).
    pub fn memory() -> Self {
        Self {
            seen: Seen::default(),
            keeper: None,
        }
    }

    /// The highest counter of `epoch` already run (0: none).
    pub fn floor(&self, epoch: u32) -> u64 {
        self.seen
            .epochs
            .iter()
            .find(|(e, _)| *e == epoch)
            .map_or(0, |(_, c)| *c)
    }

    /// Records that publication (`epoch`, `counter`) is about to run: at
    /// once in memory, and handed to the `Keeper` for the file; an error
    /// when the keeper cannot take it.
    pub fn record(&mut self, epoch: u32, counter: u64) -> std::io::Result<()> {
        match self.seen.epochs.iter_mut().find(|(e, _)| *e == epoch) {
            Some((_, c)) => *c = (*c).max(counter),
            None => {
                self.seen.epochs.push((epoch, counter));
                if self.seen.epochs.len() > EPOCHS_KEPT {
                    self.seen.epochs.remove(0);
                }
            }
        }
        let Some(newest) = self.keeper.as_ref().and_then(|k| k.newest.as_ref()) else {
            return Ok(());
        };
        let bytes = serde_json::to_vec(&self.seen).map_err(std::io::Error::other)?;
        newest.send(bytes).map_err(|_| {
            std::io::Error::other("the thread that keeps the publication counters has stopped")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_survive_a_restart_and_old_epochs_age_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("publications");
        let mut guard = ReplayGuard::at(path.clone());
        assert_eq!(guard.floor(7), 0);
        guard.record(7, 3).unwrap();
        guard.record(7, 2).unwrap();
        // A guard dropped (its link ended) has written its last counters.
        drop(guard);
        let mut guard = ReplayGuard::at(path.clone());
        assert_eq!(guard.floor(7), 3);
        for epoch in 100..100 + EPOCHS_KEPT as u32 {
            guard.record(epoch, 1).unwrap();
        }
        drop(guard);
        let reopened = ReplayGuard::at(path.clone());
        assert_eq!((reopened.floor(7), reopened.floor(100)), (0, 1));
        std::fs::write(&path, b"{garbage").unwrap();
        assert_eq!(ReplayGuard::at(path).floor(100), 0);
    }

    #[test]
    fn a_record_is_checked_at_once_and_written_after_without_holding_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("publications");
        let hold = dir.path().join("publications.hold");
        std::fs::write(&hold, b"").unwrap();
        let mut guard = ReplayGuard::at(path.clone());
        // Returns while the write is held: the caller never waits for it.
        guard.record(9, 5).unwrap();
        assert_eq!(guard.floor(9), 5);
        assert!(!path.exists(), "written while held");
        std::fs::remove_file(&hold).unwrap();
        drop(guard);
        assert_eq!(ReplayGuard::at(path).floor(9), 5);
    }
}
