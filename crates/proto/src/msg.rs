//! The messages on the wire. Everything a peer sends is decoded into one
//! of these types (schema-checked by serde) before anything acts on it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// First handshake message, minion -> master (ROUTER), in the clear: who
/// the minion says it is, its identity key and a fresh X25519 key.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Hello {
    pub id: String,
    #[serde(with = "serde_bytes")]
    pub minion_key: Vec<u8>,
    #[serde(with = "serde_bytes")]
    pub ephemeral: Vec<u8>,
    #[serde(with = "serde_bytes")]
    pub nonce: Vec<u8>,
}

/// Second handshake message, master -> minion: the master's identity and
/// ephemeral keys and its signature over the transcript.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Welcome {
    pub id: String,
    pub session: u64,
    #[serde(with = "serde_bytes")]
    pub master_key: Vec<u8>,
    #[serde(with = "serde_bytes")]
    pub ephemeral: Vec<u8>,
    #[serde(with = "serde_bytes")]
    pub nonce: Vec<u8>,
    #[serde(with = "serde_bytes")]
    pub signature: Vec<u8>,
}

/// Third handshake message, minion -> master: the minion's signature over
/// the same transcript, proving it holds the key it presented.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Confirm {
    pub session: u64,
    #[serde(with = "serde_bytes")]
    pub signature: Vec<u8>,
}

/// An AES-256-GCM message inside a session; `counter` is the nonce and
/// must grow strictly, so a replay is refused.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Sealed {
    pub session: u64,
    pub counter: u64,
    #[serde(with = "serde_bytes")]
    pub ciphertext: Vec<u8>,
}

/// Everything a minion may send to the master's ROUTER socket.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum ToMaster {
    Hello(Hello),
    Confirm(Confirm),
    Sealed(Sealed),
}

/// The state of a minion's key on the master, as `halite-key -L` lists it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub enum KeyStatus {
    Pending,
    Accepted,
    Rejected,
    Denied,
}

/// Everything the master's ROUTER socket may send to a minion.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum ToMinion {
    Welcome(Welcome),
    /// The master will not open a session for `id` (key pending, rejected,
    /// denied, or the hello was invalid).
    Refused {
        id: String,
        status: Option<KeyStatus>,
        reason: String,
    },
    Sealed(Sealed),
    /// The master has no such session (it restarted, or dropped the key):
    /// authenticate again.
    UnknownSession {
        session: u64,
    },
}

/// What a minion sends inside its session.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum MinionRequest {
    /// The minion is up (fires `salt/minion/<id>/start`) and these are its grains.
    Start { grains: Value },
    /// A job's result; the master acknowledges it once it is committed.
    Return(JobReturn),
    /// An event to forward onto the master's bus.
    Event { tag: String, data: Value },
    /// Liveness check; the master answers `Pong`.
    Ping,
    /// A job of this minion asks the master for something (its compiled
    /// bundle, a file); the master answers [`MasterMessage::Reply`] with
    /// the same `req`.
    Request { req: u64, body: RequestBody },
    /// The result of a [`MasterMessage::RenderCall`].
    RenderReply {
        call: u64,
        result: Result<Value, String>,
    },
}

/// What a minion's job may ask the master.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum RequestBody {
    /// This minion's compiled bundle for job `jid` (a job targeting it).
    Bundle { jid: String },
    /// Size and sha256 of `salt://path` in `saltenv` (`None`: no such file).
    FileStat { saltenv: String, path: String },
    /// Up to one chunk of the file from `offset`; `sha256` names the
    /// version the minion expects (the master refuses another).
    FileChunk {
        saltenv: String,
        path: String,
        offset: u64,
        sha256: String,
    },
    /// Files (or, with `dirs`, directories) below `prefix` in `saltenv`.
    FileList {
        saltenv: String,
        prefix: String,
        dirs: bool,
    },
    /// The saltenvs the master serves.
    FileEnvs,
}

/// A file on the master's fileserver.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileStat {
    pub size: u64,
    pub sha256: String,
    /// Unix permission bits of the source (`file.managed` `mode: keep`).
    pub mode: u32,
}

/// The master's answer to a [`RequestBody`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum ReplyBody {
    Bundle(Bundle),
    FileStat(Option<FileStat>),
    FileChunk(#[serde(with = "serde_bytes")] Vec<u8>),
    List(Vec<String>),
    /// The request was refused or failed; the text says why.
    Error(String),
}

/// What the master compiled for one minion and one job: the pillar it
/// rendered for that minion alone, and what the minion is to do.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Bundle {
    pub jid: String,
    pub pillar: Value,
    pub action: BundleAction,
}

/// What a minion does with its [`Bundle`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum BundleAction {
    /// Run these low chunks (compiled, before ordering) as a state run.
    /// `files` maps `saltenv` -> `salt://` path -> sha256 of every
    /// file they reference, so cached files need no round trip.
    Run {
        chunks: Vec<Value>,
        files: BTreeMap<String, BTreeMap<String, String>>,
    },
    /// The job's return was computed on the master (a `show_*` view, a
    /// render error): return it as is.
    Return { ret: Value },
    /// Run the function on the minion with this pillar (`pillar.items`).
    Call,
}

/// What the master sends inside a session.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum MasterMessage {
    /// The session is open; here is the current publish key.
    Ready {
        publish_key: PublishKey,
    },
    /// A new publish key (the old one was retired because a key was rejected or deleted).
    PublishKey(PublishKey),
    /// The return of `jid` is committed to the job cache.
    Ack {
        jid: String,
    },
    Pong,
    /// The answer to [`MinionRequest::Request`] `req`.
    Reply {
        req: u64,
        body: ReplyBody,
    },
    /// While compiling job `jid`, a template called `fun`, which needs the
    /// minion's host: run it and answer [`MinionRequest::RenderReply`].
    RenderCall {
        jid: String,
        call: u64,
        fun: String,
        args: Vec<Value>,
        kwargs: Map<String, Value>,
    },
}

/// The symmetric key publications are encrypted with, and its epoch.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
pub struct PublishKey {
    pub epoch: u32,
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    /// Publications already sealed under this key when it was handed over:
    /// a minion joining now refuses them (a job it missed reaches it again
    /// from the master, never from a replay of the old frame).
    #[serde(default)]
    pub sealed: u64,
}

impl std::fmt::Debug for PublishKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublishKey")
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

/// One message on the master's PUB socket: encrypted with the publish
/// key and signed by the master's identity key.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Publication {
    pub epoch: u32,
    pub counter: u64,
    #[serde(with = "serde_bytes")]
    pub ciphertext: Vec<u8>,
    #[serde(with = "serde_bytes")]
    pub signature: Vec<u8>,
}

/// A job as the master publishes it (Salt's load: jid, fun, arg, tgt...).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Job {
    pub jid: String,
    pub fun: String,
    pub arg: Vec<Value>,
    pub kwarg: Map<String, Value>,
    pub tgt: String,
    pub tgt_type: String,
    pub user: String,
    /// The minions the master resolved the target to; only they run it.
    pub minions: Vec<String>,
}

/// A minion's result for one job (Salt's return load).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobReturn {
    pub jid: String,
    pub id: String,
    pub fun: String,
    pub fun_args: Vec<Value>,
    #[serde(rename = "return")]
    pub ret: Value,
    pub retcode: i64,
    pub success: bool,
}
