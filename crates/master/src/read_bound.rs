//! What the master reads from its minions once the returns waiting for
//! their commit fill `return_commit_bytes` (issue 25, session 22). It used
//! to read nothing: a ping's return then waited in the ROUTER's queue
//! behind every large message received before it (up to the queue's
//! 256 MiB). Now it goes on reading, handles the small messages (a
//! ping's return, a bundle request, an event) and parks the others here
//! until the commits make room; a connection with a message parked has
//! all its later ones parked behind it, so each minion's messages are
//! handled in the order it sent them. A parked message still counts
//! against the ROUTER's queue budget (its permit goes with it), so
//! parking holds no more than the queue did.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use halite_transport::Inbound;

use crate::return_writer::SMALL_RETURN_BYTES;

/// A message of at most this many bytes is handled past the bound: a
/// small return ([`SMALL_RETURN_BYTES`]) with its envelope (jid, id,
/// function, arguments, the session's seal).
pub const SMALL_MESSAGE_BYTES: u64 = SMALL_RETURN_BYTES + 4096;

/// Bytes of small returns the master may hold past `return_commit_bytes`
/// (past it, small messages are parked too): room for 16 of the largest
/// small returns, thousands of pings.
pub const SMALL_ROOM: u64 = 1024 * 1024;

/// Messages parked at most; past it the master stops reading, as it did
/// at the bound before (the ROUTER's queue holds 8,192 messages).
const MAX_PARKED: usize = 8192;

/// Messages read past the bound and not handled yet, in arrival order.
#[derive(Default)]
pub struct Parked {
    messages: VecDeque<Inbound>,
    /// Parked messages per connection (routing id).
    by_route: HashMap<Bytes, usize>,
}

impl Parked {
    /// Nothing parked.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Parked messages.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// No more messages may be parked: the master stops reading.
    pub fn is_full(&self) -> bool {
        self.messages.len() >= MAX_PARKED
    }

    /// `message`, read past the bound, if it may be handled now: small,
    /// from a connection with nothing parked, and within `small_room`
    /// (less the `taken` bytes of those handled with it, which it adds
    /// to). Otherwise it is parked.
    pub fn sort(&mut self, message: Inbound, small_room: u64, taken: &mut u64) -> Option<Inbound> {
        let bytes = message.payload.len() as u64;
        let now = bytes <= SMALL_MESSAGE_BYTES
            && *taken + bytes <= small_room
            && !self.by_route.contains_key(&message.routing);
        if now {
            *taken += bytes;
            return Some(message);
        }
        *self.by_route.entry(message.routing.clone()).or_default() += 1;
        self.messages.push_back(message);
        None
    }

    /// The oldest parked messages, at most `max` and about `room` bytes
    /// (one message past it at most), to handle now.
    pub fn take(&mut self, room: u64, max: usize) -> Vec<Inbound> {
        let mut taken = Vec::new();
        let mut bytes = 0u64;
        while taken.len() < max && bytes < room {
            let Some(message) = self.messages.pop_front() else {
                break;
            };
            if let Some(n) = self.by_route.get_mut(&message.routing) {
                *n -= 1;
                if *n == 0 {
                    self.by_route.remove(&message.routing);
                }
            }
            bytes += message.payload.len() as u64;
            taken.push(message);
        }
        taken
    }
}
