//! The local channel between the CLI tools and the master: a Unix socket
//! in `sock_dir` (mode 0600), every request carrying the root key from
//! `cachedir/.root_key` (mode 0600), or, from a user `publisher_acl` names,
//! none (the master checks the socket's peer credentials). Frames are a 4-byte big-endian length
//! then msgpack, bounded like the network frames.

use std::io::{Read, Write};
use std::ops::Range;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use halite_proto::cursor::Cursor;
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
    match read_frame_bytes(r)? {
        Some(bytes) => Ok(Some(halite_proto::decode(&bytes)?)),
        None => Ok(None),
    }
}

/// Reads one length-prefixed frame's bytes, not decoded; `None` at a
/// clean end of stream.
pub fn read_frame_bytes<R: Read>(r: &mut R) -> Result<Option<Vec<u8>>, LocalError> {
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
    Ok(Some(buf))
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

impl LocalClient {
    /// The rest of the replies read by a thread of their own, at most
    /// `depth` frames ahead of the caller (issue 25: a watching `halite`
    /// reads a fleet's next return while it writes the last; before, the
    /// master's stream waited behind every write to the terminal or
    /// pipe). The thread ends when the master closes the stream, on a
    /// read error, or when the [`FrameStream`] is dropped.
    pub fn into_frames(self, depth: usize) -> Result<FrameStream, LocalError> {
        let shutdown = self.stream.try_clone()?;
        self.stream.set_read_timeout(None)?;
        let (tx, rx) = mpsc::sync_channel(depth.max(1));
        let mut stream = self.stream;
        let reader = std::thread::Builder::new()
            .name("halite-local-reader".into())
            .spawn(move || loop {
                let frame = read_frame_bytes(&mut stream);
                let last = !matches!(frame, Ok(Some(_)));
                if tx.send(frame).is_err() || last {
                    return;
                }
            })?;
        Ok(FrameStream {
            rx: Some(rx),
            shutdown,
            reader: Some(reader),
        })
    }
}

/// The master's replies on a local connection, as frames read ahead by a
/// thread ([`LocalClient::into_frames`]).
pub struct FrameStream {
    rx: Option<mpsc::Receiver<Result<Option<Vec<u8>>, LocalError>>>,
    shutdown: UnixStream,
    reader: Option<JoinHandle<()>>,
}

impl FrameStream {
    /// The next frame's bytes, waiting at most `timeout` (`None`:
    /// forever). `Ok(None)` on timeout or when the master closed the
    /// stream, as [`LocalClient::next`] answers.
    pub fn next(&mut self, timeout: Option<Duration>) -> Result<Option<Vec<u8>>, LocalError> {
        let Some(rx) = self.rx.as_ref() else {
            return Ok(None);
        };
        let got = match timeout {
            None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            Some(t) => rx.recv_timeout(t),
        };
        match got {
            Ok(Ok(Some(frame))) => Ok(Some(frame)),
            Ok(Ok(None)) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                // The stream ended: every later call answers at once.
                self.rx = None;
                Ok(None)
            }
            Ok(Err(e)) => {
                self.rx = None;
                Err(e)
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
        }
    }
}

impl Drop for FrameStream {
    fn drop(&mut self) {
        // A reader waiting to hand over a frame sees the channel closed;
        // one waiting on the socket sees its end.
        self.rx = None;
        let _ = self.shutdown.shutdown(std::net::Shutdown::Both);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// One reply read from its frame: a minion's return with its value left
/// as the msgpack bytes the master spliced in ([`PackedReturn`]), or any
/// other reply decoded.
#[derive(Debug)]
pub enum Streamed {
    /// A [`LocalReply::Return`] whose value was not decoded.
    Return(PackedReturn),
    /// Any other reply (or a return this reading does not take apart:
    /// decoded whole, as [`read_frame`] decodes it).
    Reply(LocalReply),
}

impl Streamed {
    /// Reads `frame`: a return as a [`PackedReturn`] when its layout is
    /// the one the master writes (a map `{"Return": {"id", "data"}}`
    /// whose `data` is a map with string keys, each once, holding values
    /// a decode accepts but for `return`'s, which is only whole, all
    /// nested at most [`halite_proto::MAX_VALUE_DEPTH`] levels), anything
    /// else decoded whole as before, so that what cannot be taken apart
    /// reads exactly as it did.
    pub fn parse(frame: Vec<u8>) -> Result<Streamed, LocalError> {
        Streamed::parse_printing(frame, |_, _| false).map(|(read, _)| read)
    }

    /// [`Streamed::parse`], with the return's value handed to `print`
    /// where the parse comes to it (issue 25, session 26: `halite --out
    /// json` stepped over each ~0.2 MB return to find the keys after it,
    /// then walked it again to print it; now it prints it in that one
    /// walk). `print(id, cur)` reads the value at `cur` and answers `true`
    /// only when it read exactly that one whole value, nested at most
    /// [`halite_proto::MAX_VALUE_DEPTH`] levels, and left `cur` just after
    /// it: what [`Cursor::step`] checks, so the parse reads the frame as
    /// [`Streamed::parse`] does. On `false` the parse steps over the value
    /// itself, from where it was, whatever `print` left of `cur`.
    ///
    /// The answer's `bool` is `print`'s: what it made of the value is the
    /// caller's to use only when the frame read as a
    /// [`Streamed::Return`] (any other frame is decoded whole, as before).
    pub fn parse_printing(
        frame: Vec<u8>,
        print: impl FnMut(&str, &mut Cursor<'_>) -> bool,
    ) -> Result<(Streamed, bool), LocalError> {
        match PackedReturn::parse(&frame, print) {
            Some((id, fields, printed)) => Ok((
                Streamed::Return(PackedReturn { id, frame, fields }),
                printed,
            )),
            None => Ok((Streamed::Reply(halite_proto::decode(&frame)?), false)),
        }
    }
}

/// A minion's return as the master streamed it, its data still msgpack
/// (issue 25: a 1,000-state return is ~0.2 MB packed; `halite` prints it
/// straight from the bytes instead of building a `Value`, and decodes
/// only the few keys of the data it reads).
#[derive(Debug)]
pub struct PackedReturn {
    /// The minion.
    pub id: String,
    frame: Vec<u8>,
    /// Each key of the return event's data and where its value's bytes
    /// are in `frame`.
    fields: Vec<(Range<usize>, Range<usize>)>,
}

impl PackedReturn {
    /// The msgpack bytes of the data's `key` (`None`: no such key). They
    /// hold a value a decode accepts (strings UTF-8, string keys, no
    /// binary data, not too deep), but a key may be there twice (a
    /// reader that minds falls back to [`PackedReturn::into_reply`]);
    /// `"return"`'s are only one whole value, nested not too deep (see
    /// [`PackedReturn::packed`]).
    pub fn field(&self, key: &str) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|(k, _)| &self.frame[k.clone()] == key.as_bytes())
            .map(|(_, v)| &self.frame[v.clone()])
    }

    /// The data's `key` decoded (`None`: no such key).
    pub fn decoded(&self, key: &str) -> Option<Value> {
        self.field(key)
            .and_then(|bytes| halite_proto::decode(bytes).ok())
    }

    /// The msgpack bytes of the return's value (`None`: the data had no
    /// `"return"`): one whole value nested at most
    /// [`halite_proto::MAX_VALUE_DEPTH`] levels, not checked further (the
    /// printers check what they read): it may still hold what a decode
    /// refuses (binary data, invalid UTF-8, a key twice), and a reader that
    /// meets such falls back to [`PackedReturn::into_reply`].
    pub fn packed(&self) -> Option<&[u8]> {
        self.field("return")
    }

    /// The reply decoded whole, exactly as [`read_frame`] decodes it.
    pub fn into_reply(self) -> Result<LocalReply, LocalError> {
        Ok(halite_proto::decode(&self.frame)?)
    }

    /// The id and where each key of the data and its value are; `None`
    /// for any other layout, a key twice, or a value a decode refuses
    /// (but for `return`'s, stepped over by its shape).
    fn parse(
        frame: &[u8],
        mut print: impl FnMut(&str, &mut Cursor<'_>) -> bool,
    ) -> Option<ReturnParts> {
        let mut cur = Cursor::new(frame);
        if cur.map_len().ok()? != 1 || cur.str().ok()? != "Return" || cur.map_len().ok()? != 2 {
            return None;
        }
        if cur.str().ok()? != "id" {
            return None;
        }
        let id = cur.str().ok()?.to_string();
        if cur.str().ok()? != "data" {
            return None;
        }
        let n = cur.map_len().ok()?;
        let mut fields: Vec<(Range<usize>, Range<usize>)> = Vec::with_capacity(n.min(32));
        let mut printed = false;
        for _ in 0..n {
            let key = cur.key().ok()?;
            let key_end = cur.pos();
            let key = key_end - key.len()..key_end;
            let start = cur.pos();
            // The return's value (the bulk of the frame) is checked by
            // whoever reads it; the other keys as a decode would.
            if &frame[key.clone()] == b"return" {
                let before = cur;
                if !printed && print(&id, &mut cur) {
                    printed = true;
                } else {
                    cur = before;
                    cur.step(1).ok()?;
                }
            } else {
                cur.skip(1).ok()?;
            }
            if fields
                .iter()
                .any(|(k, _)| frame[k.clone()] == frame[key.clone()])
            {
                return None;
            }
            fields.push((key, start..cur.pos()));
        }
        if !cur.is_empty() {
            return None;
        }
        Some((id, fields, printed))
    }
}

/// What [`PackedReturn::parse`] finds in a frame: the id, each key of
/// the data with its value's place, and whether `print` read the return.
type ReturnParts = (String, Vec<(Range<usize>, Range<usize>)>, bool);
