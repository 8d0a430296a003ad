//! The highest publication counter a minion ran, per publish-key epoch,
//! kept in `cachedir/publications` so a publication captured on the wire
//! and replayed after the minion restarts is refused (the class of Salt's
//! CVE-2022-22936). Written before a job runs: at most once per minion.

use std::path::PathBuf;

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
    path: Option<PathBuf>,
    seen: Seen,
}

impl ReplayGuard {
    /// Counters kept at `path` (read now; a missing or unreadable file
    /// starts empty, with a log line for the unreadable one).
    pub fn at(path: PathBuf) -> Self {
        let seen = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(path = %path.display(), error = %e, "unreadable publication counters ignored");
                Seen::default()
            }),
            Err(_) => Seen::default(),
        };
        Self {
            path: Some(path),
            seen,
        }
    }

    /// Counters in memory only (the swarm's identities).
    pub fn memory() -> Self {
        Self {
            path: None,
            seen: Seen::default(),
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

    /// Records that publication (`epoch`, `counter`) is about to run, on
    /// disk first; an error when it could not be kept.
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
        let Some(path) = &self.path else {
            return Ok(());
        };
        let bytes = serde_json::to_vec(&self.seen).map_err(std::io::Error::other)?;
        halite_proto::keyfile::write_private(path, &bytes).map_err(std::io::Error::other)
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
        assert_eq!(ReplayGuard::at(path.clone()).floor(7), 3);
        for epoch in 100..100 + EPOCHS_KEPT as u32 {
            guard.record(epoch, 1).unwrap();
        }
        let reopened = ReplayGuard::at(path.clone());
        assert_eq!((reopened.floor(7), reopened.floor(100)), (0, 1));
        std::fs::write(&path, b"{garbage").unwrap();
        assert_eq!(ReplayGuard::at(path).floor(100), 0);
    }
}
