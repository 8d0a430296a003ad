//! Requests being answered now, by session and request number. A minion
//! sends an idempotent request again when no answer came within its
//! `request_channel_timeout` (the first answer may have been lost on a full
//! queue); while the first is still being worked on (a compile waiting for
//! a slot under a fleet highstate), the repeat is not worked on twice: the
//! one answer coming serves both. A repeat after the answer was sent is
//! answered again (it was lost). Entries live as long as their work, so
//! this holds no more than the requests in flight.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The (session, request number) pairs being answered, shared with the
/// tasks that answer them.
#[derive(Clone, Default)]
pub struct Answering {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    pairs: Mutex<HashSet<(u64, u64)>>,
    repeats: AtomicU64,
}

/// Held by the work answering one request; dropping it (once the answer is
/// queued) lets a later repeat be answered again.
pub struct Answer {
    inner: Arc<Inner>,
    key: (u64, u64),
}

impl Answering {
    /// Starts answering request `req` of session `sid`; `None` when it is
    /// being answered already (the repeat is counted and needs nothing).
    pub fn start(&self, sid: u64, req: u64) -> Option<Answer> {
        let key = (sid, req);
        let fresh = match self.inner.pairs.lock() {
            Ok(mut pairs) => pairs.insert(key),
            // A poisoned set only loses the deduplication: answer anyway.
            Err(_) => true,
        };
        if !fresh {
            self.inner.repeats.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(Answer {
            inner: self.inner.clone(),
            key,
        })
    }

    /// Repeats that arrived while their first was being answered.
    pub fn repeats(&self) -> u64 {
        self.inner.repeats.load(Ordering::Relaxed)
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        if let Ok(mut pairs) = self.inner.pairs.lock() {
            pairs.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_is_answered_once_while_in_flight_and_again_after() {
        let a = Answering::default();
        let first = a.start(7, 1);
        assert!(first.is_some());
        assert!(
            a.start(7, 1).is_none(),
            "a repeat in flight is not worked on"
        );
        assert!(
            a.start(8, 1).is_some(),
            "another session's number 1 is its own"
        );
        assert_eq!(a.repeats(), 1);
        drop(first);
        assert!(
            a.start(7, 1).is_some(),
            "once answered, a repeat is answered again"
        );
    }
}
