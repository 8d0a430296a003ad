//! The local channel between the CLI tools and the master: a Unix socket
//! in `sock_dir` (mode 0600), every request carrying the root key from
//! `cachedir/.root_key` (mode 0600), or, from a user `publisher_acl` names,
//! none (the master checks the socket's peer credentials). Frames are a 4-byte big-endian length
//! then msgpack, bounded like the network frames.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use halite_proto::MAX_FRAME_BYTES;

/// A request from a CLI tool.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LocalRequest {
    /// The contents of `cachedir/.root_key`.
    pub key: String,
    /// What the tool asks.
    pub body: LocalBody,
}

/// What a CLI tool can ask the master.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum LocalBody {
    /// Resolve the target, publish the job; with `watch`, stream its returns.
    Publish {
        /// The target expression.
        tgt: String,
        /// How the target is read (`glob`, `list`, `grain`...).
        tgt_type: String,
        /// The function to run (`mod.fun`).
        fun: String,
        /// Its positional arguments.
        arg: Vec<Value>,
        /// Its keyword arguments.
        kwarg: Map<String, Value>,
        /// Who publishes (the CLI's user, for the job's `user`).
        user: String,
        /// Whether to stream the returns back on this connection.
        watch: bool,
        /// With `watch`, whether the job's progress events
        /// (`salt/job/<jid>/prog/...`) are streamed too: only a client
        /// that draws them asks (a fleet's highstate fires one per state
        /// and minion). Absent from older clients, which get them.
        #[serde(default = "streams_progress")]
        progress: bool,
    },
    /// Stream bus events whose tag matches `tagmatch` (empty: all).
    Events {
        /// The tag pattern (fnmatch) to stream; empty: every event.
        tagmatch: String,
    },
    /// `halite-key` changed keys: reread them now and fire these events.
    KeysChanged {
        /// The events to fire (tag, data), as Salt's key changes fire them.
        events: Vec<(String, Value)>,
    },
    /// Fire an event on the master's bus (`halite-run event.send`, the
    /// orchestration's `salt/run/<jid>/*` events); answered `Ok`.
    FireEvent {
        /// The event's tag.
        tag: String,
        /// The event's data (a mapping; anything else is wrapped as `data`).
        data: Value,
    },
    /// `jobs.active`.
    Active,
    /// The ids a target selects, without publishing (batch mode).
    Resolve {
        /// The target expression.
        tgt: String,
        /// How the target is read.
        tgt_type: String,
    },
    /// The master's counters (`halite-run master.stats`): bundles sent,
    /// not sent because the minion held them, compressed, in flight.
    Stats,
}

/// Older clients' `Publish` without `progress`: they get the progress events.
fn streams_progress() -> bool {
    true
}

/// What the master answers (one reply, or a stream of them).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum LocalReply {
    /// The job was published to these minions.
    Started {
        /// The job id.
        jid: String,
        /// The minions the target selected.
        minions: Vec<String>,
    },
    /// One minion's return event payload (Salt's `_return` shape).
    Return {
        /// The minion.
        id: String,
        /// Its return event's data.
        data: Value,
    },
    /// A bus event (for `Events`).
    Event {
        /// The event's tag.
        tag: String,
        /// The event's data.
        data: Value,
    },
    /// A single value answered (`Active`, `Resolve`).
    Value(Value),
    /// Done, nothing to answer.
    Ok,
    /// The master refused or failed the request; the text says why.
    Error(String),
}

/// Why talking to the master failed.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The root key could not be read (not root, or not the master's host).
    #[error("cannot read the master's root key {path}: {source}; run as root (or the master's user) on the master host")]
    RootKey {
        /// The key file.
        path: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// Nothing listens on the master's socket.
    #[error("cannot connect to the master at {path}: {source}; is halite-master running with this config?")]
    Connect {
        /// The socket.
        path: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// The connection broke mid-request.
    #[error("lost the connection to the master: {0}")]
    Io(#[from] std::io::Error),
    /// A frame was too large or not valid msgpack.
    #[error(transparent)]
    Frame(#[from] halite_proto::FrameError),
    /// The master answered with an error.
    #[error("the master refused the request: {0}")]
    Refused(String),
}

/// Writes one length-prefixed frame.
pub fn write_frame<W: Write, T: Serialize>(w: &mut W, value: &T) -> Result<(), LocalError> {
    let bytes = halite_proto::encode(value)?;
    let len = u32::try_from(bytes.len()).map_err(|_| halite_proto::FrameError::TooLarge {
        size: bytes.len(),
        max: MAX_FRAME_BYTES,
    })?;
    w.write_all(&len.to_be_bytes())?;
    w.write_all(&bytes)?;
    w.flush()?;
    Ok(())
}

/// Reads one length-prefixed frame; `None` at a clean end of stream.
pub fn read_frame<R: Read, T: serde::de::DeserializeOwned>(
    r: &mut R,
) -> Result<Option<T>, LocalError> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME_BYTES {
        return Err(halite_proto::FrameError::TooLarge {
            size: len,
            max: MAX_FRAME_BYTES,
        }
        .into());
    }
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf)?;
    Ok(Some(halite_proto::decode(&buf)?))
}

/// A blocking connection to the master's local socket.
pub struct LocalClient {
    stream: UnixStream,
    key: String,
}

impl LocalClient {
    /// Connects with the root key from `root_key_path`. A user who cannot
    /// read the key (not root) connects without it: the master then knows
    /// the user from the socket's peer credentials and grants what its
    /// `publisher_acl` names; when the socket is closed to that user too,
    /// the key's error says what to do.
    pub fn connect(socket: &Path, root_key_path: &Path) -> Result<Self, LocalError> {
        let key = std::fs::read_to_string(root_key_path).map_err(|source| LocalError::RootKey {
            path: root_key_path.display().to_string(),
            source,
        });
        let stream = match (UnixStream::connect(socket), key) {
            (Ok(stream), key) => {
                let key = key.map(|k| k.trim().to_string()).unwrap_or_default();
                return Ok(Self { stream, key });
            }
            (Err(e), Err(key_error)) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(key_error)
            }
            (Err(source), _) => source,
        };
        Err(LocalError::Connect {
            path: socket.display().to_string(),
            source: stream,
        })
    }

    /// Sends a request.
    pub fn send(&mut self, body: LocalBody) -> Result<(), LocalError> {
        write_frame(
            &mut self.stream,
            &LocalRequest {
                key: self.key.clone(),
                body,
            },
        )
    }

    /// The next reply, waiting at most `timeout` (`None`: forever).
    /// `Ok(None)` on timeout or when the master closed the stream.
    pub fn next(&mut self, timeout: Option<Duration>) -> Result<Option<LocalReply>, LocalError> {
        self.stream
            .set_read_timeout(timeout.map(|t| t.max(Duration::from_millis(1))))?;
        match read_frame(&mut self.stream) {
            Ok(reply) => Ok(reply),
            Err(LocalError::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Sends `body` and waits for one reply; an `Error` reply becomes `Err`.
    pub fn call(&mut self, body: LocalBody) -> Result<LocalReply, LocalError> {
        self.send(body)?;
        match self.next(None)? {
            Some(LocalReply::Error(e)) => Err(LocalError::Refused(e)),
            Some(reply) => Ok(reply),
            None => Err(LocalError::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "master closed the connection",
            ))),
        }
    }
}
