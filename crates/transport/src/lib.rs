//! The ZeroMQ layer of both daemons, in one place: which sockets, with
//! which limits, and the loops that move frames between them and the
//! daemons' tasks (the master's ROUTER and PUB, the minion's DEALER and
//! SUB), and the [`Shutdown`] both daemons drain their work with.
//!
//! The limits are what an unauthenticated peer cannot get past (issue 17;
//! `docs/wire.md`):
//! - a message over [`MAX_MESSAGE_BYTES`] is refused by the decoder from its
//!   frame header, before any memory is reserved for it (the peer is
//!   disconnected);
//! - all connections of a socket together hold at most
//!   [`RECEIVE_BUDGET_BYTES`] in messages still arriving;
//! - received messages wait for the daemon within [`QUEUED_INCOMING_BYTES`];
//!   past it the receive loop stops reading (TCP pushes back on the peers);
//! - a ROUTER queues at most [`PEER_SEND_MESSAGES`] messages and
//!   [`PEER_SEND_BYTES`] bytes per peer and [`SEND_TOTAL_BYTES`] in all;
//!   a reply that does not fit waits in the send task's overflow
//!   ([`SEND_OVERFLOW_BYTES`] for all peers, a minute at most) and is
//!   dropped, counted and reported only past it, never queued without end.

mod open_files;
mod overflow;
mod router;
mod shutdown;
mod subscriber;

pub use open_files::{apply_max_open_files, raise_open_files_limit, OpenFilesLimit};
pub use router::{Inbound, ReplyCounts, Router, RouterLimits, RouterSender};
pub use shutdown::{Shutdown, Work};
pub use subscriber::{ConnectionWatch, Dealer, Subscriber};
pub use zeromq::ZmqError;

use std::sync::Arc;
use std::time::Duration;

use zeromq::{ByteBudget, Socket, SocketOptions};

/// The largest ZeroMQ message a peer may send: one halite frame
/// ([`halite_proto::MAX_FRAME_BYTES`]) plus a routing id and the framing
/// overhead the decoder counts.
pub const MAX_MESSAGE_BYTES: usize = halite_proto::MAX_FRAME_BYTES + 64 * 1024;
/// Bytes all connections of one socket may hold in messages still arriving.
pub const RECEIVE_BUDGET_BYTES: usize = 256 * 1024 * 1024;
/// Bytes of received messages waiting for the daemon's task.
pub const QUEUED_INCOMING_BYTES: usize = 256 * 1024 * 1024;
/// Messages a ROUTER queues for one peer (libzmq's default high-water mark).
pub const PEER_SEND_MESSAGES: usize = 1000;
/// Bytes a ROUTER queues for one peer: two of the largest frames.
pub const PEER_SEND_BYTES: usize = 2 * MAX_MESSAGE_BYTES;
/// Bytes a ROUTER queues for all its peers together.
pub const SEND_TOTAL_BYTES: usize = 512 * 1024 * 1024;
/// Bytes of replies a ROUTER keeps waiting for full peer queues, all
/// peers together, before it drops one (router.rs, overflow.rs).
pub const SEND_OVERFLOW_BYTES: usize = 256 * 1024 * 1024;
/// Bytes of publications the PUB holds waiting for their fan-out to its
/// subscribers' queues (four of the largest frames); a publication past it
/// is refused, and the master says so to the CLI that asked for the job.
pub const PUB_FANOUT_BYTES: usize = 4 * MAX_MESSAGE_BYTES;
/// Subscriptions one subscriber of the PUB may hold (a minion holds one).
pub const MAX_SUBSCRIPTIONS: usize = 16;
/// Bytes of subscriptions one subscriber of the PUB may hold.
pub const MAX_SUBSCRIPTION_BYTES: usize = 4096;
/// How long one send may wait for a DEALER's queue (the master not reading).
pub const SEND_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The listening socket could not be bound.
    #[error("cannot bind {endpoint}: {source}; is the port free and the address local?")]
    Bind {
        /// The address asked for.
        endpoint: String,
        /// What ZeroMQ said.
        source: zeromq::ZmqError,
    },
    /// The connection to the master could not be set up.
    #[error("cannot connect to {endpoint}: {source}")]
    Connect {
        /// The address asked for.
        endpoint: String,
        /// What ZeroMQ said.
        source: zeromq::ZmqError,
    },
    /// The master did not answer the connection in time.
    #[error("no answer from {endpoint} within {} s", .timeout.as_secs())]
    ConnectTimeout {
        /// The address asked for.
        endpoint: String,
        /// How long was waited.
        timeout: Duration,
    },
    /// The subscription to publications could not be set up.
    #[error("cannot subscribe on {endpoint}: {source}")]
    Subscribe {
        /// The address asked for.
        endpoint: String,
        /// What ZeroMQ said.
        source: zeromq::ZmqError,
    },
}

/// Receive limits every halite socket gets: the message size limit and a
/// receive budget of its own.
fn receive_options() -> SocketOptions {
    let mut options = SocketOptions::default();
    options
        .max_message_size(MAX_MESSAGE_BYTES)
        .receive_budget(Arc::new(ByteBudget::new(RECEIVE_BUDGET_BYTES)));
    options
}

/// The master's PUB socket (publications).
pub struct PubChannel {
    socket: zeromq::PubSocket,
}

impl PubChannel {
    /// Binds a PUB on `endpoint`. Subscribers' messages (their
    /// subscriptions) are held to the same size limit as everything else,
    /// so a fake subscriber cannot claim a huge frame either.
    pub async fn bind(endpoint: &str) -> Result<Self, TransportError> {
        let mut options = receive_options();
        // A subscriber that does not read holds at most this many
        // publications and bytes (their bytes are shared with the other
        // subscribers; past either, a publication is dropped for it, as
        // libzmq's PUB does at its high-water mark), the publications not
        // yet fanned out at most PUB_FANOUT_BYTES, and a subscriber may
        // subscribe only a little: a halite minion subscribes once.
        options
            .send_limits(
                PEER_SEND_MESSAGES,
                PEER_SEND_BYTES,
                Arc::new(ByteBudget::new(PUB_FANOUT_BYTES)),
            )
            .subscription_limits(MAX_SUBSCRIPTIONS, MAX_SUBSCRIPTION_BYTES);
        let mut socket = zeromq::PubSocket::with_options(options);
        socket
            .bind(endpoint)
            .await
            .map_err(|source| TransportError::Bind {
                endpoint: endpoint.to_string(),
                source,
            })?;
        Ok(PubChannel { socket })
    }

    /// Publishes `frame` from synchronous code: a PUB send only queues
    /// (slow subscribers drop), so its future is ready on the first poll.
    pub fn publish_now(&mut self, frame: Vec<u8>) -> Result<(), zeromq::ZmqError> {
        use zeromq::SocketSend;
        let fut = self.socket.send(zeromq::ZmqMessage::from(frame));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let mut fut = std::pin::pin!(fut);
        match std::future::Future::poll(fut.as_mut(), &mut cx) {
            std::task::Poll::Ready(r) => r,
            std::task::Poll::Pending => Err(zeromq::ZmqError::Other("publish queue is busy")),
        }
    }
}

/// Connects `socket` to `endpoint` within `timeout`.
async fn connect<S: Socket>(
    socket: &mut S,
    endpoint: &str,
    timeout: Duration,
) -> Result<(), TransportError> {
    match tokio::time::timeout(timeout, socket.connect(endpoint)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(source)) => Err(TransportError::Connect {
            endpoint: endpoint.to_string(),
            source,
        }),
        Err(_) => Err(TransportError::ConnectTimeout {
            endpoint: endpoint.to_string(),
            timeout,
        }),
    }
}
