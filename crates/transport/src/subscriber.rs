//! The minion's side: a DEALER for requests and answers, a SUB whose
//! publications arrive on their own task so a busy DEALER never delays them.

use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use zeromq::{DealerSocket, Socket, SocketRecv, SocketSend, SubSocket, ZmqMessage};

use crate::{connect, receive_options, TransportError, SEND_TIMEOUT};

/// Publications held for the minion's task before the SUB stops reading.
const PUBLICATION_QUEUE: usize = 1024;
/// Bytes of publications held for the minion's task before the SUB stops
/// reading (a fake master sending 16 MiB publications faster than their
/// signatures are checked must not fill 1024 of them).
const PUBLICATION_QUEUE_BYTES: usize = 64 * 1024 * 1024;

/// A DEALER connected to a master's ROUTER, with the receive limits.
pub struct Dealer {
    socket: DealerSocket,
    /// The socket's events, until [`Dealer::watch`] takes them.
    monitor: Option<futures_channel::mpsc::Receiver<zeromq::SocketEvent>>,
}

/// Tells the minion at once when the master closes its connection (a
/// restart), instead of a ping going unanswered: taken from a [`Dealer`]
/// so it can be awaited beside the dealer's own receive.
pub struct ConnectionWatch {
    events: Option<futures_channel::mpsc::Receiver<zeromq::SocketEvent>>,
}

impl ConnectionWatch {
    /// Resolves when the transport reports the connection closed; never,
    /// when the socket reports no more events.
    pub async fn disconnected(&mut self) {
        use futures_util::StreamExt;
        if let Some(events) = self.events.as_mut() {
            while let Some(event) = events.next().await {
                if let zeromq::SocketEvent::Disconnected(_) = event {
                    return;
                }
            }
        }
        self.events = None;
        std::future::pending::<()>().await
    }
}

impl Dealer {
    /// Connects to `endpoint`, giving up after `timeout`.
    pub async fn connect(endpoint: &str, timeout: Duration) -> Result<Self, TransportError> {
        let mut socket = DealerSocket::with_options(receive_options());
        connect(&mut socket, endpoint, timeout).await?;
        let monitor = Some(socket.monitor());
        Ok(Dealer { socket, monitor })
    }

    /// The watch on this connection (once; later calls get a watch that
    /// never fires).
    pub fn watch(&mut self) -> ConnectionWatch {
        ConnectionWatch {
            events: self.monitor.take(),
        }
    }

    /// Sends one frame; a master that does not take it within
    /// [`SEND_TIMEOUT`] loses it (logged at debug), so one stuck send never
    /// stalls the minion.
    pub async fn send(&mut self, frame: Vec<u8>) {
        match tokio::time::timeout(SEND_TIMEOUT, self.socket.send(ZmqMessage::from(frame))).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "send to master failed"),
            Err(_) => tracing::debug!("send to master timed out"),
        }
    }

    /// The frames of the next message; an error (the master closed the
    /// connection or sent what the decoder refuses) ends the link.
    pub async fn recv(&mut self) -> Result<Vec<Bytes>, zeromq::ZmqError> {
        self.socket.recv().await.map(|msg| msg.into_vec())
    }
}

/// A SUB connected to a master's PUB, subscribed to everything, read by its
/// own task.
pub struct Subscriber {
    publications: mpsc::Receiver<(Bytes, OwnedSemaphorePermit)>,
    task: JoinHandle<()>,
}

impl Subscriber {
    /// Connects to `endpoint` within `timeout` and subscribes to everything.
    pub async fn connect(endpoint: &str, timeout: Duration) -> Result<Self, TransportError> {
        let mut socket = SubSocket::with_options(receive_options());
        connect(&mut socket, endpoint, timeout).await?;
        socket
            .subscribe("")
            .await
            .map_err(|source| TransportError::Subscribe {
                endpoint: endpoint.to_string(),
                source,
            })?;
        let (tx, publications) = mpsc::channel(PUBLICATION_QUEUE);
        let queued = Arc::new(Semaphore::new(PUBLICATION_QUEUE_BYTES));
        let task = tokio::spawn(async move {
            loop {
                match socket.recv().await {
                    Ok(msg) => {
                        let Some(frame) = msg.into_vec().into_iter().next() else {
                            continue;
                        };
                        let cost = u32::try_from(frame.len().min(PUBLICATION_QUEUE_BYTES))
                            .unwrap_or(u32::MAX);
                        // Waits while the minion is behind: the master then waits on TCP.
                        let Ok(permit) = queued.clone().acquire_many_owned(cost).await else {
                            break;
                        };
                        if tx.send((frame, permit)).await.is_err() {
                            break;
                        }
                    }
                    Err(e) => {
                        // The channel closes: the link sees the master as lost.
                        tracing::warn!(error = %e, "publication stream from the master ended");
                        break;
                    }
                }
            }
        });
        Ok(Subscriber { publications, task })
    }

    /// The next publication's frame; `None` once the stream has ended.
    pub async fn recv(&mut self) -> Option<Bytes> {
        self.publications.recv().await.map(|(frame, _permit)| frame)
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.task.abort();
    }
}
