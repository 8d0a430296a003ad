//! The master's ROUTER: one task reads every peer's messages into a
//! bounded queue, one task writes replies; neither waits on a peer that
//! does not read. A reply that does not fit its peer's queue waits in the
//! send task's overflow (overflow.rs) instead of being dropped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use zeromq::{
    ByteBudget, RouterSendHalf, RouterSocket, Socket, SocketRecv, SocketSend, ZmqMessage,
};

use crate::overflow::Overflow;
use crate::{
    receive_options, TransportError, MAX_MESSAGE_BYTES, PEER_SEND_BYTES, PEER_SEND_MESSAGES,
    QUEUED_INCOMING_BYTES, SEND_OVERFLOW_BYTES, SEND_TOTAL_BYTES,
};

/// Replies waiting for the send task (each is bounded by the socket's send
/// limits once handed over; this only decouples the daemon's task).
const OUTGOING_QUEUE: usize = 65_536;

/// How often replies waiting in the overflow are offered to their peers'
/// queues again (the queues give no signal when they drain).
const OVERFLOW_RETRY: Duration = Duration::from_millis(5);

/// How often, at most, dropped replies are reported at warn level: the
/// first drop at once, then what was dropped since, every this often
/// while drops go on (a peer that does not read, or a flood of replies,
/// costs one log line per period, not one per reply).
const REPORT_EVERY: Duration = Duration::from_secs(10);

/// One message from a peer: its routing id and its single payload frame.
/// It counts against the incoming queue's budget until dropped.
pub struct Inbound {
    /// The ROUTER's id of the connection (where a reply goes).
    pub routing: Bytes,
    /// The one frame the peer sent.
    pub payload: Bytes,
    /// When the receive task read it off the socket (the master times a
    /// return's acknowledgement from here: `master.stats` `returns`).
    pub arrived: Instant,
    _permit: OwnedSemaphorePermit,
}

/// How much a ROUTER holds for its peers: the zeromq queue of each peer,
/// and the overflow where replies wait when a peer's queue is full. Every
/// byte is bounded: a peer that does not read costs the master at most
/// `peer_bytes` plus its share of `overflow_bytes`, for at most
/// [`RouterLimits::overflow_age`].
#[derive(Debug, Clone)]
pub struct RouterLimits {
    /// Messages queued for one peer ([`PEER_SEND_MESSAGES`]).
    pub peer_messages: usize,
    /// Bytes queued for one peer ([`PEER_SEND_BYTES`]); never less than one
    /// largest message, so any reply fits an empty queue.
    pub peer_bytes: usize,
    /// Bytes of replies waiting for full peer queues, all peers together
    /// ([`SEND_OVERFLOW_BYTES`]); 0 drops a reply that does not fit at once.
    pub overflow_bytes: usize,
    /// How long a reply may wait in the overflow before it is dropped (the
    /// peer does not read; the minion asks again).
    pub overflow_age: Duration,
}

impl Default for RouterLimits {
    fn default() -> Self {
        Self {
            peer_messages: PEER_SEND_MESSAGES,
            peer_bytes: PEER_SEND_BYTES,
            overflow_bytes: SEND_OVERFLOW_BYTES,
            overflow_age: Duration::from_secs(60),
        }
    }
}

/// A bound ROUTER socket and its two loops; dropping it stops them.
pub struct Router {
    /// Messages from peers, in arrival order, at most
    /// [`QUEUED_INCOMING_BYTES`] of them waiting at once.
    pub incoming: mpsc::Receiver<Inbound>,
    sender: RouterSender,
    tasks: [JoinHandle<()>; 2],
}

/// What became of the replies the send task was given, for
/// `halite-run master.stats`.
#[derive(Debug, Default)]
pub struct ReplyCounts {
    /// Replies that waited in the overflow because their peer's queue was full.
    pub overflowed: AtomicU64,
    /// Replies dropped: the overflow was full, or they waited in it too long.
    pub dropped: AtomicU64,
    /// Replies whose peer had disconnected (its minion reconnects and asks again).
    pub undeliverable: AtomicU64,
}

/// Queues replies for the ROUTER's send loop; cheap to clone.
#[derive(Clone)]
pub struct RouterSender {
    outgoing: mpsc::Sender<(Bytes, Vec<u8>)>,
    counts: Arc<ReplyCounts>,
}

impl RouterSender {
    /// Queues `payload` for the peer `routing` without waiting; false when
    /// the queue is full (the reply is dropped, and the caller may log it).
    pub fn try_send(&self, routing: Bytes, payload: Vec<u8>) -> bool {
        let queued = self.outgoing.try_send((routing, payload)).is_ok();
        if !queued {
            self.counts.dropped.fetch_add(1, Ordering::Relaxed);
        }
        queued
    }

    /// The send task's counters (replies overflowed, dropped, undeliverable).
    pub fn counts(&self) -> &ReplyCounts {
        &self.counts
    }
}

impl Router {
    /// Binds a ROUTER with halite's default limits on `endpoint` and starts
    /// its loops.
    pub async fn bind(endpoint: &str) -> Result<Self, TransportError> {
        Self::bind_with(endpoint, RouterLimits::default()).await
    }

    /// Binds a ROUTER with `limits` on `endpoint` and starts its loops.
    pub async fn bind_with(endpoint: &str, limits: RouterLimits) -> Result<Self, TransportError> {
        let mut options = receive_options();
        options.send_limits(
            limits.peer_messages.max(1),
            limits.peer_bytes.max(MAX_MESSAGE_BYTES),
            Arc::new(ByteBudget::new(SEND_TOTAL_BYTES)),
        );
        let mut socket = RouterSocket::with_options(options);
        socket
            .bind(endpoint)
            .await
            .map_err(|source| TransportError::Bind {
                endpoint: endpoint.to_string(),
                source,
            })?;
        let (send_half, mut recv_half) = socket.split();
        let (incoming_tx, incoming) = mpsc::channel::<Inbound>(8192);
        let (outgoing, outgoing_rx) = mpsc::channel::<(Bytes, Vec<u8>)>(OUTGOING_QUEUE);
        let queued = Arc::new(Semaphore::new(QUEUED_INCOMING_BYTES));
        let recv_task = tokio::spawn(async move {
            loop {
                let msg = match recv_half.recv().await {
                    Ok(msg) => msg,
                    Err(e) => {
                        // A peer's bad frame disconnects that peer only.
                        tracing::debug!(error = %e, "router receive error");
                        continue;
                    }
                };
                let arrived = Instant::now();
                // Exactly [routing id, payload]; anything else is dropped.
                if msg.len() != 2 {
                    continue;
                }
                let mut frames = msg.into_vec().into_iter();
                let (Some(routing), Some(payload)) = (frames.next(), frames.next()) else {
                    continue;
                };
                // Never more than the budget (a message is far smaller anyway).
                let cost = (routing.len() + payload.len()).min(QUEUED_INCOMING_BYTES);
                let cost = u32::try_from(cost).unwrap_or(u32::MAX);
                // Waits while the daemon is behind: the peers then wait on TCP.
                let Ok(permit) = queued.clone().acquire_many_owned(cost).await else {
                    break;
                };
                let inbound = Inbound {
                    routing,
                    payload,
                    arrived,
                    _permit: permit,
                };
                if incoming_tx.send(inbound).await.is_err() {
                    break;
                }
            }
        });
        let counts = Arc::new(ReplyCounts::default());
        let send_task = tokio::spawn(send_loop(
            send_half,
            outgoing_rx,
            Overflow::new(limits.overflow_bytes, limits.overflow_age),
            counts.clone(),
        ));
        Ok(Router {
            incoming,
            sender: RouterSender { outgoing, counts },
            tasks: [recv_task, send_task],
        })
    }

    /// A handle that queues replies.
    pub fn sender(&self) -> RouterSender {
        self.sender.clone()
    }
}

/// What one attempt to hand a reply to its peer's queue gave.
enum Offer {
    Queued,
    /// The peer's queue is full: try again later.
    Full,
    /// The peer is gone.
    Gone,
}

/// Hands `payload` to the queue of peer `routing` without waiting.
async fn offer(send_half: &mut RouterSendHalf, routing: &Bytes, payload: &Bytes) -> Offer {
    let mut msg = ZmqMessage::from(payload.clone());
    msg.push_front(routing.clone());
    match send_half.send(msg).await {
        Ok(()) => Offer::Queued,
        Err(zeromq::ZmqError::BufferFull(_)) => Offer::Full,
        Err(e) => {
            tracing::debug!(error = %e, "reply to a disconnected peer discarded");
            Offer::Gone
        }
    }
}

/// Writes replies to their peers: in order per peer, a reply that does not
/// fit its peer's queue waiting in `overflow` (retried every
/// [`OVERFLOW_RETRY`]) rather than dropped; what the overflow cannot hold
/// is dropped, counted and reported at warn level.
async fn send_loop(
    mut send_half: RouterSendHalf,
    mut outgoing_rx: mpsc::Receiver<(Bytes, Vec<u8>)>,
    mut overflow: Overflow,
    counts: Arc<ReplyCounts>,
) {
    let mut since = Instant::now();
    let mut reported_at: Option<Instant> = None;
    let mut reported = 0u64;
    // Drops counted while nothing else wakes the loop are reported too.
    let mut report = tokio::time::interval(REPORT_EVERY);
    report.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // One timer for the whole loop: a steady stream of new replies must
    // not keep postponing the retry of the waiting ones.
    let mut retry = tokio::time::interval(OVERFLOW_RETRY);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            next = outgoing_rx.recv() => {
                let Some((routing, payload)) = next else { break };
                let payload = Bytes::from(payload);
                // A peer with replies waiting gets this one after them.
                let fits = if overflow.holds(&routing) {
                    Offer::Full
                } else {
                    offer(&mut send_half, &routing, &payload).await
                };
                match fits {
                    Offer::Queued => {}
                    Offer::Gone => {
                        counts.undeliverable.fetch_add(1, Ordering::Relaxed);
                    }
                    Offer::Full => {
                        if overflow.push(routing, payload) {
                            counts.overflowed.fetch_add(1, Ordering::Relaxed);
                        } else {
                            counts.dropped.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
            _ = report.tick(), if counts.dropped.load(Ordering::Relaxed) > reported => {}
            _ = retry.tick(), if !overflow.is_empty() => {
                let expired = overflow.expire();
                counts.dropped.fetch_add(expired, Ordering::Relaxed);
                for routing in overflow.peers() {
                    while let Some(payload) = overflow.front(&routing) {
                        match offer(&mut send_half, &routing, &payload).await {
                            Offer::Queued => overflow.pop(&routing),
                            Offer::Full => break,
                            Offer::Gone => {
                                let n = overflow.forget(&routing);
                                counts.undeliverable.fetch_add(n, Ordering::Relaxed);
                                break;
                            }
                        }
                    }
                }
            }
        }
        let dropped = counts.dropped.load(Ordering::Relaxed);
        if dropped > reported && reported_at.is_none_or(|at| at.elapsed() >= REPORT_EVERY) {
            tracing::warn!(
                dropped = dropped - reported,
                waiting = overflow.len(),
                "replies to minions dropped in the last {} s: the master's send queue, or their connection's queue and the master's reply overflow, were full, or a reply waited over a minute (the minions ask again)",
                since.elapsed().as_secs()
            );
            reported = dropped;
            reported_at = Some(Instant::now());
            since = Instant::now();
        }
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
