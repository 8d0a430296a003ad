//! Returns the event bus does not hold for a slow reader: read back from
//! the job cache when the reader gets to them (issue 25, session 19).
//!
//! Why: a watching `halite` (or `halite-run state.event`, the API's
//! stream) that reads more slowly than the fleet returns made the bus
//! hold every return not yet read: the bus is bounded at 65,536 events,
//! not in bytes, and a 1,000-state return is ~0.2 MB packed, so the master
//! of a 10,000-minion warm apply grew to 1.2-1.6 GB behind a CLI that
//! printed JSON into a pipe (docs/benchmarks.md). Every return is committed to the
//! job cache before its event fires, so past `event_return_bytes` of
//! returns waiting on the bus a return's event carries where it is (its
//! jid and minion id) instead of its bytes, and a reader reads it back
//! from there, one at a time. Memory is bounded, no return is lost, and no
//! reader, however slow, stalls the master or the minions.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use halite_client::jobcache::JobCache;
use serde_json::{Map, Value};

use crate::events::{ReturnStore, SpillTo};

/// Bytes of packed returns the bus holds for slow readers by default
/// (`event_return_bytes`): ~300 1,000-state returns, a few seconds of a
/// fleet's returns on a 2-core machine.
pub const DEFAULT_EVENT_RETURN_BYTES: u64 = 64 << 20;

/// The job cache as the bus reads spilled returns back: one connection,
/// opened on the first read, shared by the readers (one read at a time;
/// each is a point query and a zstd frame of some tens of KB).
pub struct JobCacheReturns {
    path: PathBuf,
    cache: Mutex<Option<JobCache>>,
}

impl JobCacheReturns {
    /// Reads back from the job cache at `path`.
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            cache: Mutex::new(None),
        }
    }
}

impl ReturnStore for JobCacheReturns {
    fn packed_return(&self, jid: &str, id: &str) -> Result<Vec<u8>, String> {
        let mut guard = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let cache = match &mut *guard {
            Some(cache) => cache,
            None => guard.insert(JobCache::open(&self.path).map_err(|e| e.to_string())?),
        };
        cache
            .packed_return(jid, id)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| {
                format!(
                    "the job cache holds no return of {id} for job {jid} (removed by keep_jobs?)"
                )
            })
    }
}

/// The bus's bound from the master config's `event_return_bytes`
/// (halite's own key; an absent or unreadable value keeps the default,
/// logged), reading back from the job cache at `job_cache`.
pub fn spill_to(extra: &Map<String, Value>, job_cache: PathBuf) -> SpillTo {
    let budget = match extra.get("event_return_bytes") {
        None => DEFAULT_EVENT_RETURN_BYTES,
        Some(v) => match v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
        {
            Some(n) => n,
            None => {
                tracing::warn!(key = "event_return_bytes", value = %v, default = DEFAULT_EVENT_RETURN_BYTES, "not a whole number of bytes; the default is used");
                DEFAULT_EVENT_RETURN_BYTES
            }
        },
    };
    SpillTo {
        budget,
        store: Arc::new(JobCacheReturns::new(job_cache)),
    }
}
