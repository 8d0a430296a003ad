//! The master's ROUTER: one task reads every peer's messages into a
//! bounded queue, one task writes replies; neither waits on a peer that
//! does not read.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use zeromq::{ByteBudget, RouterSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

use crate::{
    receive_options, TransportError, PEER_SEND_BYTES, PEER_SEND_MESSAGES, QUEUED_INCOMING_BYTES,
    SEND_TOTAL_BYTES,
};

/// Replies waiting for the send task (each is bounded by the socket's send
/// limits once handed over; this only decouples the daemon's task).
const OUTGOING_QUEUE: usize = 65_536;

/// One message from a peer: its routing id and its single payload frame.
/// It counts against the incoming queue's budget until dropped.
pub struct Inbound {
    /// The ROUTER's id of the connection (where a reply goes).
    pub routing: Bytes,
    /// The one frame the peer sent.
    pub payload: Bytes,
    _permit: OwnedSemaphorePermit,
}

/// A bound ROUTER socket and its two loops; dropping it stops them.
pub struct Router {
    /// Messages from peers, in arrival order, at most
    /// [`QUEUED_INCOMING_BYTES`] of them waiting at once.
    pub incoming: mpsc::Receiver<Inbound>,
    sender: RouterSender,
    tasks: [JoinHandle<()>; 2],
}

/// Queues replies for the ROUTER's send loop; cheap to clone.
#[derive(Clone)]
pub struct RouterSender {
    outgoing: mpsc::Sender<(Bytes, Vec<u8>)>,
}

impl RouterSender {
    /// Queues `payload` for the peer `routing` without waiting; false when
    /// the queue is full (the reply is dropped, and the caller may log it).
    pub fn try_send(&self, routing: Bytes, payload: Vec<u8>) -> bool {
        self.outgoing.try_send((routing, payload)).is_ok()
    }
}

impl Router {
    /// Binds a ROUTER with halite's limits on `endpoint` and starts its loops.
    pub async fn bind(endpoint: &str) -> Result<Self, TransportError> {
        let mut options = receive_options();
        options.send_limits(
            PEER_SEND_MESSAGES,
            PEER_SEND_BYTES,
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
        let (mut send_half, mut recv_half) = socket.split();
        let (incoming_tx, incoming) = mpsc::channel::<Inbound>(8192);
        let (outgoing, mut outgoing_rx) = mpsc::channel::<(Bytes, Vec<u8>)>(OUTGOING_QUEUE);
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
                    _permit: permit,
                };
                if incoming_tx.send(inbound).await.is_err() {
                    break;
                }
            }
        });
        let send_task = tokio::spawn(async move {
            while let Some((routing, payload)) = outgoing_rx.recv().await {
                let mut msg = ZmqMessage::from(payload);
                msg.push_front(routing);
                // Never waits: a reply over the peer's limits is dropped.
                if let Err(e) = send_half.send(msg).await {
                    tracing::debug!(error = %e, "reply dropped");
                }
            }
        });
        Ok(Router {
            incoming,
            sender: RouterSender { outgoing },
            tasks: [recv_task, send_task],
        })
    }

    /// A handle that queues replies.
    pub fn sender(&self) -> RouterSender {
        self.sender.clone()
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
