//! Returns committed to the job cache off the master's main task (issue
//! 25): a fleet's 1,000-state returns cost their JSON encoding and their
//! SQLite insert, and while the main task did that, pings, publications
//! and every other minion's messages waited behind it. One thread with
//! its own connection to the job cache commits the batches in order
//! (the batches queued meanwhile in one transaction) and hands each back;
//! the main task then acknowledges the returns and fires their events, as
//! it did after its own commit.

use std::path::Path;
use std::sync::mpsc;
use std::thread::JoinHandle;

use halite_client::jobcache::{JobCache, JobCacheError};
use halite_proto::msg::JobReturn;

/// Returns committed in one transaction at most.
const MAX_RETURNS_PER_COMMIT: usize = 1024;

/// Returns of one intake batch to commit.
pub struct ToStore {
    /// Each return with the session it came from.
    pub returns: Vec<(u64, JobReturn)>,
    /// What the job cache stores for each return instead, when it differs
    /// (its minion's secrets masked); `None`: the return as received.
    pub records: Vec<Option<JobReturn>>,
    /// Minions that announced themselves in the same batch: their missed
    /// jobs are redelivered once these returns are committed.
    pub started: Vec<String>,
}

/// A batch the writer committed (or could not).
pub struct Stored {
    /// The returns, with the sessions they came from.
    pub returns: Vec<(u64, JobReturn)>,
    /// For each, whether it is new; or why the commit failed (then none is
    /// acknowledged, and the minions send them again).
    pub fresh: Result<Vec<bool>, String>,
    /// As in [`ToStore::started`].
    pub started: Vec<String>,
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
                    let mut group = vec![first];
                    let mut count = group[0].returns.len();
                    while count < MAX_RETURNS_PER_COMMIT {
                        match batches.try_recv() {
                            Ok(next) => {
                                count += next.returns.len();
                                group.push(next);
                            }
                            Err(_) => break,
                        }
                    }
                    let records = group.iter().flat_map(|b| {
                        b.returns
                            .iter()
                            .zip(&b.records)
                            .map(|((_, ret), record)| record.as_ref().unwrap_or(ret))
                    });
                    let result = cache.store_returns(records).map_err(|e| e.to_string());
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
                    returns: vec![(n as u64, ret(jid, id, json!(id)))],
                    // web2's secrets masked: the record differs from the return.
                    records: vec![(id == "web2").then(|| ret(jid, id, json!("**********")))],
                    started: vec![format!("started-{n}")],
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
                records: vec![],
                started: vec![],
            })
            .is_err());
    }
}
