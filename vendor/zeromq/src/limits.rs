//! Memory limits for peers that are not trusted (a halite patch: see
//! `docs/wire.md` in the halite repository).
//!
//! Upstream reserves a buffer for whatever length a frame header claims and
//! queues up to 100 000 messages for a peer that does not read. These
//! limits bound both, before any allocation is made for the peer's claim.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Bytes counted for each frame on top of its payload: the bookkeeping a
/// frame costs in memory, so a message of a million empty frames is not free.
pub(crate) const FRAME_OVERHEAD: usize = 64;

/// A byte allowance shared by every connection of one socket.
#[derive(Debug)]
pub struct ByteBudget {
    limit: usize,
    used: AtomicUsize,
}

impl ByteBudget {
    /// An allowance of `limit` bytes, none in use.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            used: AtomicUsize::new(0),
        }
    }

    /// Takes `n` bytes if they fit under the limit.
    pub(crate) fn try_take(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|&total| total <= self.limit)
            })
            .is_ok()
    }

    /// Gives back `n` bytes taken before.
    pub(crate) fn give_back(&self, n: usize) {
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                Some(used.saturating_sub(n))
            });
    }

    /// Bytes in use now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// The limit this allowance was made with.
    pub fn limit(&self) -> usize {
        self.limit
    }
}

/// What a socket may queue for sending: per peer (messages and bytes) and
/// for all peers together. A ROUTER drops a message that does not fit
/// (as libzmq's ROUTER does at its high-water mark) instead of waiting.
#[derive(Debug, Clone)]
pub(crate) struct SendLimits {
    pub(crate) peer_messages: usize,
    pub(crate) peer_bytes: usize,
    pub(crate) total: Arc<ByteBudget>,
}

/// The bytes one peer has queued for sending, with the socket's total.
#[derive(Debug, Clone)]
pub(crate) struct SendAccount {
    pub(crate) peer: Arc<ByteBudget>,
    pub(crate) total: Arc<ByteBudget>,
}

impl SendAccount {
    /// Takes `n` bytes from both the peer's and the socket's allowance.
    pub(crate) fn try_take(&self, n: usize) -> bool {
        if !self.peer.try_take(n) {
            return false;
        }
        if !self.total.try_take(n) {
            self.peer.give_back(n);
            return false;
        }
        true
    }

    /// Gives `n` bytes back to both allowances.
    pub(crate) fn give_back(&self, n: usize) {
        self.peer.give_back(n);
        self.total.give_back(n);
    }
}

/// Bytes a message costs while queued.
pub(crate) fn message_cost(message: &crate::codec::Message) -> usize {
    match message {
        crate::codec::Message::Message(m) => zmq_message_cost(m),
        _ => FRAME_OVERHEAD,
    }
}

/// Bytes a [`crate::ZmqMessage`] costs while queued.
pub(crate) fn zmq_message_cost(message: &crate::ZmqMessage) -> usize {
    message.iter().map(|f| f.len() + FRAME_OVERHEAD).sum()
}
