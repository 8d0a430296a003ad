//! The messages on the wire. Everything a peer sends is decoded into one
//! of these types (schema-checked by serde) before anything acts on it.

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
}

/// The symmetric key publications are encrypted with, and its epoch.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
pub struct PublishKey {
    pub epoch: u32,
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
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
