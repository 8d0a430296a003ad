//! What the master's main task reads from its minions in one turn, and
//! what it leaves for later (issue 25, sessions 22 and 23).
//!
//! - **A turn is bounded**: at most [`TURN_BYTES`] and [`TURN_MESSAGES`]
//!   of messages in the order they came (one message past the bytes at
//!   most), so the commits that came back, a CLI's command and the other
//!   branches of the main loop wait for at most that much decoding. It
//!   used to take up to `return_commit_bytes` (32 MiB) in one turn.
//! - **A small message goes ahead of a full turn**: once a turn is full,
//!   what else waits is read on (not decoded): a small message (a ping's
//!   return, a bundle request, an event) from a connection with nothing
//!   waiting is handled in this turn, the others are parked here and
//!   handled first by the next turns ([`Parked::take`]).
//! - **Past `return_commit_bytes`** the master goes on reading the same
//!   way, handling only the small messages and parking the others until
//!   the commits make room (session 22: it used to read nothing, and a
//!   ping's return waited in the ROUTER's queue behind every large message
//!   received before it).
//!
//! A connection with a message parked has all its later ones parked
//! behind it, so each minion's messages are handled in the order it sent
//! them. A parked message still counts against the ROUTER's queue budget
//! (its permit goes with it), so parking holds no more than the queue did.

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
/// small returns, thousands of pings. Also the small messages' share of
/// one turn beside its [`TURN_BYTES`].
pub const SMALL_ROOM: u64 = 1024 * 1024;

/// Bytes of messages one turn of the main task takes in arrival order
/// (one message past it at most): a writer's commit
/// ([`crate::return_writer::MAX_COMMIT_BYTES`]), about twenty warm
/// 1,000-state returns, some tens of ms of opening and decoding.
pub const TURN_BYTES: u64 = 4 * 1024 * 1024;

/// Messages one turn handles at most (and returns one commit holds at
/// most, [`crate::return_writer`]).
pub const TURN_MESSAGES: usize = 1024;

/// Messages parked at most; past it the master stops reading, as it did
/// at the bound before (the ROUTER's queue holds 8,192 messages).
const MAX_PARKED: usize = 8192;

/// What the turn's bounds need of a message: its size and its connection.
pub trait Message {
    /// The bytes it holds.
    fn bytes(&self) -> u64;
    /// Its connection (the ROUTER's routing id).
    fn route(&self) -> &Bytes;
}

impl Message for Inbound {
    fn bytes(&self) -> u64 {
        self.payload.len() as u64
    }
    fn route(&self) -> &Bytes {
        &self.routing
    }
}

/// How the messages of turns were sorted (`master.stats` `returns`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sorted {
    /// Small messages handled while the returns held the bound.
    pub read_past_bound: u64,
    /// Messages parked while the returns held the bound.
    pub parked: u64,
    /// Small messages handled ahead of a full turn (under the bound).
    pub ahead: u64,
    /// Messages left for a later turn (under the bound: the turn was full).
    pub deferred: u64,
}

/// Messages read and not handled yet, in arrival order.
pub struct Parked<M = Inbound> {
    messages: VecDeque<M>,
    /// Parked messages per connection (routing id).
    by_route: HashMap<Bytes, usize>,
}

impl<M> Default for Parked<M> {
    fn default() -> Self {
        Self {
            messages: VecDeque::new(),
            by_route: HashMap::new(),
        }
    }
}

impl<M: Message> Parked<M> {
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

    /// `message`, read past the bound or a full turn, if it may be handled
    /// now: small, from a connection with nothing parked, and within
    /// `small_room` (less the `taken` bytes of those handled with it,
    /// which it adds to). Otherwise it is parked.
    pub fn sort(&mut self, message: M, small_room: u64, taken: &mut u64) -> Option<M> {
        let bytes = message.bytes();
        let now = bytes <= SMALL_MESSAGE_BYTES
            && *taken + bytes <= small_room
            && !self.by_route.contains_key(message.route());
        if now {
            *taken += bytes;
            return Some(message);
        }
        *self.by_route.entry(message.route().clone()).or_default() += 1;
        self.messages.push_back(message);
        None
    }

    /// The oldest parked messages, at most `max` and about `room` bytes
    /// (one message past it at most), to handle now.
    pub fn take(&mut self, room: u64, max: usize) -> Vec<M> {
        let mut taken = Vec::new();
        let mut bytes = 0u64;
        while taken.len() < max && bytes < room {
            let Some(message) = self.messages.pop_front() else {
                break;
            };
            if let Some(n) = self.by_route.get_mut(message.route()) {
                *n -= 1;
                if *n == 0 {
                    self.by_route.remove(message.route());
                }
            }
            bytes += message.bytes();
            taken.push(message);
        }
        taken
    }

    /// One turn's messages: `first` and what `next` gives, within `room`
    /// (the bytes left under `return_commit_bytes`) and `small_room`
    /// ([`crate::return_writer::ReturnCounts::small_room`]).
    ///
    /// Under the bound with nothing parked, up to [`TURN_BYTES`] and
    /// [`TURN_MESSAGES`] in arrival order; once that is full (or past the
    /// bound, or with messages parked), the rest is read on and sorted
    /// ([`Parked::sort`]): the small messages of connections with nothing
    /// parked within [`SMALL_ROOM`] more, the others parked. Reading stops
    /// when `next` has nothing, the turn holds [`TURN_MESSAGES`], or
    /// [`Parked::is_full`].
    pub fn gather(
        &mut self,
        first: M,
        mut next: impl FnMut() -> Option<M>,
        room: u64,
        small_room: u64,
        sorted: &mut Sorted,
    ) -> Vec<M> {
        let past_bound = room == 0;
        let mut batch = Vec::new();
        let mut bytes = 0u64;
        let mut message = Some(first);
        if !past_bound && self.is_empty() {
            let limit = room.min(TURN_BYTES);
            while let Some(m) = message.take() {
                bytes += m.bytes();
                batch.push(m);
                if batch.len() >= TURN_MESSAGES {
                    return batch;
                }
                message = next();
                if bytes >= limit {
                    break;
                }
            }
        }
        let small_room = small_room.min(bytes.max(TURN_BYTES) + SMALL_ROOM);
        while let Some(m) = message {
            match self.sort(m, small_room, &mut bytes) {
                Some(m) => {
                    if past_bound {
                        sorted.read_past_bound += 1;
                    } else {
                        sorted.ahead += 1;
                    }
                    batch.push(m);
                }
                None if past_bound => sorted.parked += 1,
                None => sorted.deferred += 1,
            }
            if batch.len() >= TURN_MESSAGES || self.is_full() {
                break;
            }
            message = next();
        }
        batch
    }
}
