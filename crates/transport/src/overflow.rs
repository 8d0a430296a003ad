//! Replies waiting for their peer's queue: a swarm's one connection
//! carries the replies of all its identities, and a slow reader's queue
//! fills; a reply that did not fit used to be dropped, leaving a job
//! waiting for an answer that never came. Here it waits, in order per
//! peer, within a byte budget for all peers and for a bounded time.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;

/// Replies waiting for full peer queues, per peer in arrival order.
pub(crate) struct Overflow {
    by_peer: HashMap<Bytes, VecDeque<(Instant, Bytes)>>,
    bytes: usize,
    limit: usize,
    max_age: Duration,
    count: usize,
}

impl Overflow {
    /// An empty overflow holding at most `limit` bytes, each reply for at
    /// most `max_age`.
    pub(crate) fn new(limit: usize, max_age: Duration) -> Self {
        Self {
            by_peer: HashMap::new(),
            bytes: 0,
            limit,
            max_age,
            count: 0,
        }
    }

    /// Whether replies wait for `routing` (a new one must queue behind them).
    pub(crate) fn holds(&self, routing: &Bytes) -> bool {
        self.by_peer.contains_key(routing)
    }

    /// Whether nothing waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.by_peer.is_empty()
    }

    /// Replies waiting.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Keeps `payload` for `routing`; false (nothing kept) when it does
    /// not fit the budget.
    pub(crate) fn push(&mut self, routing: Bytes, payload: Bytes) -> bool {
        let cost = payload.len() + routing.len();
        if self.bytes + cost > self.limit {
            return false;
        }
        self.bytes += cost;
        self.count += 1;
        self.by_peer
            .entry(routing)
            .or_default()
            .push_back((Instant::now(), payload));
        true
    }

    /// The peers with replies waiting.
    pub(crate) fn peers(&self) -> Vec<Bytes> {
        self.by_peer.keys().cloned().collect()
    }

    /// The oldest reply waiting for `routing`.
    pub(crate) fn front(&self, routing: &Bytes) -> Option<Bytes> {
        self.by_peer
            .get(routing)
            .and_then(|q| q.front())
            .map(|(_, p)| p.clone())
    }

    /// Removes the oldest reply of `routing` (it was queued).
    pub(crate) fn pop(&mut self, routing: &Bytes) {
        let Some(queue) = self.by_peer.get_mut(routing) else {
            return;
        };
        if let Some((_, payload)) = queue.pop_front() {
            self.bytes -= payload.len() + routing.len();
            self.count -= 1;
        }
        if queue.is_empty() {
            self.by_peer.remove(routing);
        }
    }

    /// Forgets every reply of `routing` (the peer is gone); how many.
    pub(crate) fn forget(&mut self, routing: &Bytes) -> u64 {
        let Some(queue) = self.by_peer.remove(routing) else {
            return 0;
        };
        for (_, payload) in &queue {
            self.bytes -= payload.len() + routing.len();
        }
        self.count -= queue.len();
        queue.len() as u64
    }

    /// Drops the replies that waited longer than the age limit (their
    /// peer does not read); how many.
    pub(crate) fn expire(&mut self) -> u64 {
        let now = Instant::now();
        let mut dropped = 0u64;
        let max_age = self.max_age;
        let mut freed = 0usize;
        self.by_peer.retain(|routing, queue| {
            while queue
                .front()
                .is_some_and(|(at, _)| now.duration_since(*at) > max_age)
            {
                if let Some((_, payload)) = queue.pop_front() {
                    freed += payload.len() + routing.len();
                    dropped += 1;
                }
            }
            !queue.is_empty()
        });
        self.bytes -= freed;
        self.count -= dropped as usize;
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_per_peer_within_the_budget() {
        let mut o = Overflow::new(100, Duration::from_secs(60));
        let (a, b) = (Bytes::from_static(b"a"), Bytes::from_static(b"b"));
        assert!(o.push(a.clone(), Bytes::from(vec![1; 40])));
        assert!(o.push(b.clone(), Bytes::from(vec![2; 40])));
        // 82 bytes held: 41 more do not fit.
        assert!(!o.push(a.clone(), Bytes::from(vec![3; 40])));
        assert!(o.push(a.clone(), Bytes::from(vec![4; 10])));
        assert_eq!(o.front(&a).map(|p| p[0]), Some(1));
        o.pop(&a);
        assert_eq!(o.front(&a).map(|p| p[0]), Some(4));
        assert_eq!(o.forget(&b), 1);
        o.pop(&a);
        assert!(o.is_empty());
        assert_eq!(o.len(), 0);
        assert!(o.push(a, Bytes::from(vec![5; 98])));
    }

    #[test]
    fn old_replies_expire() {
        let mut o = Overflow::new(100, Duration::ZERO);
        o.push(Bytes::from_static(b"a"), Bytes::from_static(b"x"));
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(o.expire(), 1);
        assert!(o.is_empty());
        assert!(o.push(Bytes::from_static(b"a"), Bytes::from(vec![0; 99])));
    }
}
