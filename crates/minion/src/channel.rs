//! A job's synchronous line to its master: a blocking job thread asks
//! (its compiled bundle, a file chunk) and waits for the answer, which the
//! link routes back by request number.

use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use halite_proto::msg::{ReplyBody, RequestBody};
use tokio::sync::mpsc;

/// A request from a job thread, with where its answer goes.
pub struct JobRequest {
    /// The identity (agent index in the link) asking.
    pub agent: usize,
    /// What the job asks.
    pub body: RequestBody,
    /// Where the master's answer goes.
    pub reply: std_mpsc::Sender<ReplyBody>,
}

/// Why a request to the master got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// No answer within this many seconds.
    #[error("the master did not answer within {0} s")]
    Timeout(u64),
    /// The session ended before the answer came.
    #[error("the connection to the master was lost")]
    Lost,
    /// The master refused the request (the text says why).
    #[error("the master refused: {0}")]
    Refused(String),
}

/// The handle a job thread holds: cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct MasterChannel {
    agent: usize,
    tx: mpsc::UnboundedSender<JobRequest>,
    timeout: Duration,
}

impl MasterChannel {
    /// A channel for identity `agent` over the link's request queue `tx`.
    pub fn new(agent: usize, tx: mpsc::UnboundedSender<JobRequest>, timeout: Duration) -> Self {
        Self { agent, tx, timeout }
    }

    /// Asks the master and waits for its answer; a `ReplyBody::Error`
    /// comes back as [`ChannelError::Refused`].
    pub fn request(&self, body: RequestBody) -> Result<ReplyBody, ChannelError> {
        let (reply, answer) = std_mpsc::channel();
        self.tx
            .send(JobRequest {
                agent: self.agent,
                body,
                reply,
            })
            .map_err(|_| ChannelError::Lost)?;
        match answer.recv_timeout(self.timeout) {
            Ok(ReplyBody::Error(e)) => Err(ChannelError::Refused(e)),
            Ok(body) => Ok(body),
            Err(std_mpsc::RecvTimeoutError::Timeout) => {
                Err(ChannelError::Timeout(self.timeout.as_secs()))
            }
            Err(std_mpsc::RecvTimeoutError::Disconnected) => Err(ChannelError::Lost),
        }
    }
}
