//! The messages on the wire. Everything a peer sends is decoded into one
//! of these types (schema-checked by serde) before anything acts on it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// First handshake message, minion -> master (ROUTER), in the clear: who
/// the minion says it is, its identity key and a fresh X25519 key.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Hello {
    /// The minion id it claims; the master checks it against the accepted key.
    pub id: String,
    /// The minion's Ed25519 identity key (public), as `halite-key` lists it.
    #[serde(with = "serde_bytes")]
    pub minion_key: Vec<u8>,
    /// A fresh X25519 public key for this session's key agreement.
    #[serde(with = "serde_bytes")]
    pub ephemeral: Vec<u8>,
    /// Random bytes that make this handshake's transcript unique.
    #[serde(with = "serde_bytes")]
    pub nonce: Vec<u8>,
}

/// Second handshake message, master -> minion: the master's identity and
/// ephemeral keys and its signature over the transcript.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Welcome {
    /// The master's id, bound into the transcript it signs.
    pub id: String,
    /// The session number later [`Sealed`] messages name.
    pub session: u64,
    /// The master's Ed25519 identity key (public), pinned by the minion.
    #[serde(with = "serde_bytes")]
    pub master_key: Vec<u8>,
    /// The master's fresh X25519 public key for this session.
    #[serde(with = "serde_bytes")]
    pub ephemeral: Vec<u8>,
    /// The master's random bytes for the transcript.
    #[serde(with = "serde_bytes")]
    pub nonce: Vec<u8>,
    /// The master's signature over the transcript, proving its identity.
    #[serde(with = "serde_bytes")]
    pub signature: Vec<u8>,
}

/// Third handshake message, minion -> master: the minion's signature over
/// the same transcript, proving it holds the key it presented.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Confirm {
    /// The session being confirmed (from [`Welcome::session`]).
    pub session: u64,
    /// The minion's signature over the transcript.
    #[serde(with = "serde_bytes")]
    pub signature: Vec<u8>,
}

/// An AES-256-GCM message inside a session; `counter` is the nonce and
/// must grow strictly, so a replay is refused.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Sealed {
    /// The session whose key sealed this message.
    pub session: u64,
    /// The message's nonce: strictly growing, so a replay is refused.
    pub counter: u64,
    /// The AES-256-GCM ciphertext (message and tag).
    #[serde(with = "serde_bytes")]
    pub ciphertext: Vec<u8>,
}

/// Everything a minion may send to the master's ROUTER socket.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum ToMaster {
    /// The first handshake message.
    Hello(Hello),
    /// The third handshake message.
    Confirm(Confirm),
    /// A message inside an open session.
    Sealed(Sealed),
    /// The first handshake message of `halite-call` on a minion host
    /// (Salt's salt-call authenticating with the minion's key beside a
    /// running salt-minion): the master opens a session that lives beside
    /// the minion daemon's instead of replacing it.
    CallerHello(Hello),
}

/// The state of a minion's key on the master, as `halite-key -L` lists it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub enum KeyStatus {
    /// Known but not yet accepted (`halite-key -a` accepts it).
    Pending,
    /// Trusted: the minion may open sessions.
    Accepted,
    /// Refused by an operator; the minion may not connect.
    Rejected,
    /// A second key for an id already accepted: refused until resolved.
    Denied,
}

/// Everything the master's ROUTER socket may send to a minion.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum ToMinion {
    /// The second handshake message.
    Welcome(Welcome),
    /// The master will not open a session for `id` (key pending, rejected,
    /// denied, or the hello was invalid).
    Refused {
        /// The minion id the hello claimed.
        id: String,
        /// The key's state on the master, when the master knows the key.
        status: Option<KeyStatus>,
        /// Why the session was refused, for the minion's log.
        reason: String,
    },
    /// A message inside an open session.
    Sealed(Sealed),
    /// The master has no such session (it restarted, or dropped the key):
    /// authenticate again.
    UnknownSession {
        /// The session the master does not know.
        session: u64,
    },
}

/// What a minion sends inside its session.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum MinionRequest {
    /// The minion is up (fires `salt/minion/<id>/start`) and these are its grains.
    Start {
        /// The minion's grains, for targeting and the start event.
        grains: Value,
    },
    /// A job's result; the master acknowledges it once it is committed.
    Return(JobReturn),
    /// A job's result with its value packed ([`PackedReturn`]): sent only
    /// to a master whose [`MasterMessage::Ready`] says `packed_returns`
    /// (an older one is sent [`MinionRequest::Return`]); acknowledged the
    /// same way.
    PackedReturn(PackedReturn),
    /// An event to forward onto the master's bus.
    Event {
        /// The event's tag (`salt/...` or a custom one).
        tag: String,
        /// The event's data.
        data: Value,
    },
    /// Several events in one message, fired on the master's bus one by
    /// one in this order, exactly as the same [`MinionRequest::Event`]s
    /// would be (issue 25: a 1,000-state run fires 1,000 progress events,
    /// and one sealed message per event was most of the master's work per
    /// minion). Sent only to a master whose [`MasterMessage::Ready`] says
    /// `batched_events`; an older master gets single events.
    Events {
        /// The events, oldest first.
        events: Vec<MinionEvent>,
    },
    /// Liveness check; the master answers `Pong`.
    Ping,
    /// A job of this minion asks the master for something (its compiled
    /// bundle, a file); the master answers [`MasterMessage::Reply`] with
    /// the same `req`.
    Request {
        /// The minion's number for this request, echoed in the reply.
        req: u64,
        /// What the job asks for.
        body: RequestBody,
    },
    /// The result of a [`MasterMessage::RenderCall`].
    RenderReply {
        /// The number of the [`MasterMessage::RenderCall`] answered.
        call: u64,
        /// The function's return, or why it failed.
        result: Result<Value, String>,
    },
}

/// One event of a [`MinionRequest::Events`] batch.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MinionEvent {
    /// The event's tag (`salt/...` or a custom one).
    pub tag: String,
    /// The event's data (`null` when it is [`MinionEvent::packed`]).
    pub data: Value,
    /// The event's data already encoded (msgpack), so that a master reads
    /// the batch without decoding the values of events nobody on its bus
    /// wants (issue 25: most of a fleet run's million progress events).
    /// Sent only to a master whose [`MasterMessage::Ready`] says
    /// `packed_events`; absent from older minions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packed: Option<serde_bytes::ByteBuf>,
}

impl MinionEvent {
    /// An event whose data goes as decoded by the master (`data`).
    pub fn plain(tag: String, data: Value) -> Self {
        Self {
            tag,
            data,
            packed: None,
        }
    }

    /// An event whose data goes encoded ([`MinionEvent::packed`]).
    pub fn packed(tag: String, data: &Value) -> Result<Self, crate::FrameError> {
        let bytes =
            rmp_serde::to_vec_named(data).map_err(|e| crate::FrameError::Encode(e.to_string()))?;
        Ok(Self {
            tag,
            data: Value::Null,
            packed: Some(serde_bytes::ByteBuf::from(bytes)),
        })
    }

    /// The event's data, decoded from its packed form when it has one
    /// (with the decoder's depth limit).
    pub fn into_data(self) -> Result<Value, crate::FrameError> {
        match self.packed {
            Some(bytes) => crate::decode(&bytes),
            None => Ok(self.data),
        }
    }
}

/// What a minion's job may ask the master.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum RequestBody {
    /// This minion's compiled bundle for job `jid` (a job targeting it).
    Bundle {
        /// The job whose bundle is asked for.
        jid: String,
        /// The digest of the bundle the minion holds from an earlier job
        /// ([`crate::bundle::Packed::digest`]): when the compile gives the
        /// same, the master answers [`ReplyBody::SameBundle`] instead of
        /// sending it again. Absent from older minions (and ignored by
        /// older masters, which send the bundle).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        have: Option<String>,
        /// The minion reads [`ReplyBody::PackedBundle`] and
        /// [`ReplyBody::SameBundle`]; false from older minions, which are
        /// sent [`ReplyBody::Bundle`] as before.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        packed: bool,
        /// The minion keeps its answers to this compile's render-time
        /// calls and answers a repeated [`MasterMessage::RenderCall`] from
        /// them, never running one twice: the master may send a call
        /// again when no answer came. False from older minions, whose
        /// calls are sent once.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        kept_calls: bool,
        /// A warm highstate's custom modules (issue 25, one round trip):
        /// what the minion last synced, so the master checks it against
        /// its file server instead of the minion listing every kind of
        /// module first. The master answers a bundle with
        /// `modules_unchanged`, or [`ReplyBody::SyncFirst`]. Absent from
        /// older minions (which sync before asking) and ignored by older
        /// masters (whose answer lacks `modules_unchanged`: the minion
        /// then syncs as before).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        synced: Option<SyncedModules>,
    },
    /// Size and sha256 of `salt://path` in `saltenv` (`None`: no such file).
    FileStat {
        /// The environment the file is looked up in.
        saltenv: String,
        /// The path below `salt://`.
        path: String,
    },
    /// Up to one chunk of the file from `offset`; `sha256` names the
    /// version the minion expects (the master refuses another).
    FileChunk {
        /// The environment the file is looked up in.
        saltenv: String,
        /// The path below `salt://`.
        path: String,
        /// Where in the file the chunk starts.
        offset: u64,
        /// The sha256 of the version the minion expects.
        sha256: String,
    },
    /// Files (or, with `dirs`, directories) below `prefix` in `saltenv`.
    FileList {
        /// The environment listed.
        saltenv: String,
        /// Only paths below this prefix are listed.
        prefix: String,
        /// Whether to list directories instead of files.
        dirs: bool,
    },
    /// The saltenvs the master serves.
    FileEnvs,
    /// This minion's bundle for a call of its own (`halite-call fun ...`
    /// without `--local`, Salt's salt-call): compiled as a job would be,
    /// with no job published.
    CallBundle {
        /// The function called (`state.apply`, `pillar.items`...).
        fun: String,
        /// Its positional arguments.
        arg: Vec<Value>,
        /// Its keyword arguments.
        kwarg: Map<String, Value>,
        /// The grains the call sees (salt-call renders with the minion's
        /// own grains); not an object: the grains the master cached.
        #[serde(default)]
        grains: Value,
        /// As [`RequestBody::Bundle`]'s `kept_calls`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        kept_calls: bool,
    },
    /// A mine request (`mine.send`, `mine.get`...): see [`crate::mine`].
    Mine(crate::mine::MineRequest),
    /// A job this minion starts by itself (its scheduler): the master
    /// records it in the job cache under the minion's jid, targeted at the
    /// minion alone, so its return lands there as a published job's does
    /// and its bundle can be asked for. Answered `List([jid])`.
    OwnJob {
        /// The job: `tgt` and `minions` name the asking minion only.
        job: Job,
        /// The schedule item that started it (Salt's `schedule` key).
        schedule: Option<String>,
    },
}

/// What a minion's custom modules were last synced from
/// ([`RequestBody::Bundle`]'s `synced`).
///
/// One digest for every kind, not one per kind: the answer the minion
/// needs is "sync or not", and a sync lists every kind anyway (Salt's
/// `sync_all`), so per-kind digests would buy nothing but bytes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SyncedModules {
    /// The saltenvs synced (those the minion's last highstate matched), in
    /// the order the sync read them (the first holding a path wins).
    pub saltenvs: Vec<String>,
    /// `halite_modules::exec::saltutil::ModulesDigest` of what the minion's
    /// extension-module directories hold now.
    pub digest: String,
}

/// A file on the master's fileserver.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileStat {
    /// The file's size in bytes.
    pub size: u64,
    /// The file's sha256, naming the version chunks are read from.
    pub sha256: String,
    /// Unix permission bits of the source (`file.managed` `mode: keep`).
    pub mode: u32,
}

/// The master's answer to a [`RequestBody`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum ReplyBody {
    /// The compiled bundle asked for.
    Bundle(Bundle),
    /// The file's size and sha256 (`None`: no such file).
    FileStat(Option<FileStat>),
    /// One chunk of the file.
    FileChunk(#[serde(with = "serde_bytes")] Vec<u8>),
    /// A list of paths or saltenvs.
    List(Vec<String>),
    /// The request was refused or failed; the text says why.
    Error(String),
    /// A plain value (the answer to a [`RequestBody::Mine`]).
    Value(Value),
    /// The compiled bundle, packed once on the master
    /// ([`crate::bundle::pack`]): only to a minion that asked `packed`.
    PackedBundle {
        /// The sha256 of the encoded bundle, the name the minion keeps it by.
        digest: String,
        /// Whether `bytes` are zstd-compressed.
        zstd: bool,
        /// The encoded bundle without its job id.
        #[serde(with = "serde_bytes")]
        bytes: Vec<u8>,
        /// The request's `synced` matched the master's file server: the
        /// minion's custom modules are those a sync would give, so it does
        /// not sync. False (absent) when the request carried none, and
        /// from older masters.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        modules_unchanged: bool,
    },
    /// "You have it": the compile gave the bundle the minion said it holds
    /// (`have`); nothing else is sent.
    SameBundle {
        /// The digest the minion sent, confirmed.
        digest: String,
        /// As [`ReplyBody::PackedBundle`]'s `modules_unchanged`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        modules_unchanged: bool,
    },
    /// The custom modules the request said were synced (`synced`) are not
    /// what the master's file server holds now: the minion syncs, then
    /// asks for its bundle again. Nothing was compiled (a compile made
    /// before the sync could have used the old modules). Sent only to a
    /// minion whose request carried `synced`, so never to older minions.
    SyncFirst,
}

impl ReplyBody {
    /// The answer with `modules_unchanged` set, when it is a bundle that
    /// can carry it (a packed or "same" bundle).
    pub fn with_modules_unchanged(mut self) -> Self {
        if let ReplyBody::PackedBundle {
            modules_unchanged, ..
        }
        | ReplyBody::SameBundle {
            modules_unchanged, ..
        } = &mut self
        {
            *modules_unchanged = true;
        }
        self
    }
}

/// What the master compiled for one minion and one job: the pillar it
/// rendered for that minion alone, and what the minion is to do.
///
/// `C` is the type a low chunk is held as: `Value` on the wire and on
/// the master; a minion decodes a packed bundle straight into its
/// engine's chunk type (issue 25: decoding every chunk into a `Value`
/// map and then copying it into the engine's dict was a tenth of a warm
/// swarm's CPU). The bytes are the same either way.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Bundle<C = Value> {
    /// The job this bundle is for.
    pub jid: String,
    /// The pillar rendered for this minion alone.
    pub pillar: Value,
    /// What the minion is to do.
    pub action: BundleAction<C>,
    /// The git commits the bundle was compiled from: `"<gitfs remote>
    /// <saltenv>"` -> commit (empty without gitfs; absent in older masters').
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub commits: BTreeMap<String, String>,
    /// For a highstate, the saltenvs the master's render of the top file
    /// matched for this minion (empty: none): the minion syncs its custom
    /// modules from them (Salt's `load_dynamic`) without fetching and
    /// rendering the top file itself. `None` for other jobs, and from
    /// masters too old to say (the minion then reads the top file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saltenvs: Option<Vec<String>>,
    /// The cleartexts the master's gpg renderer decrypted for this
    /// minion's pillar, so the minion can mask them in what it writes to
    /// its own disk and logs (a spooled return, a kept bundle, a debug
    /// line). Cleartexts rather than digests: the same sealed bundle
    /// already carries them inside `pillar`, and finding a secret inside
    /// any output needs the text. Empty without gpg secrets, and absent
    /// from (and ignored by) older peers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
}

/// What a minion does with its [`Bundle`] (`C`: as in [`Bundle`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum BundleAction<C = Value> {
    /// Run these low chunks (compiled, before ordering) as a state run.
    /// `files` maps `saltenv` -> `salt://` path -> sha256 of every
    /// file they reference, so cached files need no round trip.
    Run {
        /// The compiled low chunks, in compile order.
        chunks: Vec<C>,
        /// `saltenv` -> `salt://` path -> sha256 of each file the chunks use.
        files: BTreeMap<String, BTreeMap<String, String>>,
        /// Which chunks' strings are Salt's yamlex strings (printed
        /// quoted): `(chunk index, bits)` as `halite_state::origins`
        /// encodes them. Empty (and absent on the wire) without yamlex;
        /// older peers ignore it.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        yamlex: Vec<(u32, u8)>,
    },
    /// The job's return was computed on the master (a `show_*` view, a
    /// render error): return it as is.
    Return {
        /// The return, ready to send back.
        ret: Value,
    },
    /// Run the function on the minion with this pillar (`pillar.items`).
    Call,
}

impl<C> Bundle<C> {
    /// The same bundle with each chunk made by `f` (a minion turns a
    /// bundle that came as `Value`s into its engine's chunks).
    pub fn map_chunks<D>(self, f: impl FnMut(C) -> D) -> Bundle<D> {
        Bundle {
            jid: self.jid,
            pillar: self.pillar,
            action: match self.action {
                BundleAction::Run {
                    chunks,
                    files,
                    yamlex,
                } => BundleAction::Run {
                    chunks: chunks.into_iter().map(f).collect(),
                    files,
                    yamlex,
                },
                BundleAction::Return { ret } => BundleAction::Return { ret },
                BundleAction::Call => BundleAction::Call,
            },
            commits: self.commits,
            saltenvs: self.saltenvs,
            secrets: self.secrets,
        }
    }
}

/// What the master sends inside a session.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum MasterMessage {
    /// The session is open; here is the current publish key.
    Ready {
        /// The current publish key.
        publish_key: PublishKey,
        /// The master's publish port, as Salt's master tells its minions
        /// at sign-in: a minion listing several masters (`host:port`
        /// entries) subscribes where each master says. `None` from a
        /// master that predates it: the minion's `publish_port` is used.
        #[serde(default)]
        publish_port: Option<u16>,
        /// The master reads [`MinionRequest::Events`] (several events in
        /// one message); false from a master that predates it, which the
        /// minion then sends one [`MinionRequest::Event`] per event.
        #[serde(default)]
        batched_events: bool,
        /// The master reads [`MinionEvent::packed`] in a batch; false from
        /// a master that predates it, which is sent the data decoded.
        #[serde(default)]
        packed_events: bool,
        /// The master reads [`MinionRequest::PackedReturn`]; false from a
        /// master that predates it, which is sent [`MinionRequest::Return`].
        #[serde(default)]
        packed_returns: bool,
        /// The master reads a [`PackedReturn`] whose value is a zstd frame
        /// ([`PackedReturn::zstd`]) and stores the frame as it is; false
        /// from a master that predates it, which is sent the bytes plain.
        #[serde(default)]
        zstd_returns: bool,
    },
    /// A new publish key (the old one was retired because a key was rejected or deleted).
    PublishKey(PublishKey),
    /// The return of `jid` is committed to the job cache.
    Ack {
        /// The job whose return was committed.
        jid: String,
    },
    /// The answer to [`MinionRequest::Ping`].
    Pong,
    /// The answer to [`MinionRequest::Request`] `req`.
    Reply {
        /// The number of the request answered.
        req: u64,
        /// The answer.
        body: ReplyBody,
    },
    /// While compiling job `jid`, a template called `fun`, which needs the
    /// minion's host: run it and answer [`MinionRequest::RenderReply`].
    RenderCall {
        /// The job being compiled.
        jid: String,
        /// The master's number for this call, echoed in the reply.
        call: u64,
        /// The execution function a template called (`mod.fun`).
        fun: String,
        /// Its positional arguments.
        args: Vec<Value>,
        /// Its keyword arguments.
        kwargs: Map<String, Value>,
        /// The master may send this call again under the same number
        /// (the compile's minion said `kept_calls`): keep the answer and
        /// answer a repeat from it, or once the first run ends. False from
        /// older masters, whose numbers are not unique across restarts.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        repeatable: bool,
    },
}

/// The symmetric key publications are encrypted with, and its epoch.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
pub struct PublishKey {
    /// Which key this is: publications name the epoch they were sealed with.
    pub epoch: u32,
    /// The AES-256-GCM key.
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
    /// The epoch of the publish key that sealed this publication.
    pub epoch: u32,
    /// The publication's nonce: strictly growing, so a replay is refused.
    pub counter: u64,
    /// The sealed [`Job`].
    #[serde(with = "serde_bytes")]
    pub ciphertext: Vec<u8>,
    /// The master's Ed25519 signature over epoch, counter and ciphertext.
    #[serde(with = "serde_bytes")]
    pub signature: Vec<u8>,
}

/// A job as the master publishes it (Salt's load: jid, fun, arg, tgt...).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Job {
    /// The job id (Salt's `jid`, a timestamp).
    pub jid: String,
    /// The function to run (`mod.fun`).
    pub fun: String,
    /// Its positional arguments.
    pub arg: Vec<Value>,
    /// Its keyword arguments.
    pub kwarg: Map<String, Value>,
    /// The target expression as given (`web*`, a list...).
    pub tgt: String,
    /// How the target is read (`glob`, `list`, `grain`...).
    pub tgt_type: String,
    /// Who published the job.
    pub user: String,
    /// The minions the master resolved the target to; only they run it.
    pub minions: Vec<String>,
    /// No subscriber of the master's bus wanted this job's progress
    /// events (`salt/job/<jid>/prog/...`) when it was published: a
    /// minion whose own config leaves `state_events` unset fires none
    /// for it (issue 25: a fleet highstate's per-state events were a
    /// fifth of its minions' and a third of its master's CPU, for a bus
    /// that dropped every one). Absent on the wire when false, and false
    /// from a master that does not send it: progress as before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub progress_unwatched: bool,
}

impl Job {
    /// The arguments as Salt shows them in a job's load and events
    /// (`salt/job/<jid>/new`, the job cache): the positional ones, then
    /// the keyword ones in one `{"__kwarg__": true, ...}` dict (Salt's
    /// `salt.utils.args.condition_input`), absent when there are none.
    pub fn salt_arg(&self) -> Vec<Value> {
        let mut arg = self.arg.clone();
        if !self.kwarg.is_empty() {
            let mut kw = Map::with_capacity(self.kwarg.len() + 1);
            kw.insert("__kwarg__".into(), Value::Bool(true));
            kw.extend(self.kwarg.iter().map(|(k, v)| (k.clone(), v.clone())));
            arg.push(Value::Object(kw));
        }
        arg
    }
}

/// A minion's result for one job (Salt's return load).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobReturn {
    /// The job answered; `req` for a call of the minion's own
    /// (`halite-call`, Salt's salt-call): the master gives it a jid.
    pub jid: String,
    /// The minion that answers.
    pub id: String,
    /// The function it ran.
    pub fun: String,
    /// The arguments it ran it with.
    pub fun_args: Vec<Value>,
    /// What the function returned (Salt's `return`).
    #[serde(rename = "return")]
    pub ret: Value,
    /// The process exit code Salt would give (0: success).
    pub retcode: i64,
    /// Whether the function succeeded.
    pub success: bool,
}

/// A [`JobReturn`] whose value (Salt's `return`) travels as msgpack bytes
/// (issue 25): the master checks them ([`crate::packed::check`]) and
/// passes them on to the watching CLI and the job cache without building
/// the value; everything else is as in [`JobReturn`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PackedReturn {
    /// As [`JobReturn::jid`].
    pub jid: String,
    /// As [`JobReturn::id`].
    pub id: String,
    /// As [`JobReturn::fun`].
    pub fun: String,
    /// As [`JobReturn::fun_args`] (small: decoded as before).
    pub fun_args: Vec<Value>,
    /// [`JobReturn::ret`] encoded ([`crate::packed::pack`]); when
    /// [`PackedReturn::zstd`], those bytes as one zstd frame
    /// ([`crate::packed::frame`]).
    #[serde(rename = "return")]
    pub ret: serde_bytes::ByteBuf,
    /// As [`JobReturn::retcode`].
    pub retcode: i64,
    /// As [`JobReturn::success`].
    pub success: bool,
    /// `ret` is a zstd frame (issue 25, session 24: the minion compresses
    /// its return, the master stores the frame as it is instead of
    /// compressing every return itself). Sent only to a master whose
    /// [`MasterMessage::Ready`] says `zstd_returns`; absent (false) from a
    /// minion that predates it, and never written when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub zstd: bool,
}

impl PackedReturn {
    /// `ret` with its value encoded once.
    pub fn pack(ret: JobReturn) -> Result<Self, crate::FrameError> {
        let bytes = crate::packed::pack(&ret.ret)?;
        Ok(Self {
            jid: ret.jid,
            id: ret.id,
            fun: ret.fun,
            fun_args: ret.fun_args,
            ret: serde_bytes::ByteBuf::from(bytes),
            retcode: ret.retcode,
            success: ret.success,
            zstd: false,
        })
    }

    /// This return with its value as a zstd frame ([`crate::packed::frame`]),
    /// for a master that reads one (`zstd_returns`); the header's fields
    /// are copied (they are small), the value is compressed once.
    pub fn framed(&self) -> Result<Self, crate::FrameError> {
        if self.zstd {
            return Ok(self.clone());
        }
        Ok(Self {
            jid: self.jid.clone(),
            id: self.id.clone(),
            fun: self.fun.clone(),
            fun_args: self.fun_args.clone(),
            ret: serde_bytes::ByteBuf::from(crate::packed::frame(&self.ret)?),
            retcode: self.retcode,
            success: self.success,
            zstd: true,
        })
    }

    /// The return with its value decoded (for an older master, or to
    /// read it); a zstd frame is expanded first, within
    /// [`crate::packed::MAX_RETURN_BYTES`].
    pub fn unpack(self) -> Result<JobReturn, crate::FrameError> {
        let ret = if self.zstd {
            let plain = crate::packed::unframe(&self.ret, crate::packed::MAX_RETURN_BYTES)?;
            crate::packed::unpack(&plain)?
        } else {
            crate::packed::unpack(&self.ret)?
        };
        Ok(JobReturn {
            jid: self.jid,
            id: self.id,
            fun: self.fun,
            fun_args: self.fun_args,
            ret,
            retcode: self.retcode,
            success: self.success,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode, encode};

    /// `MasterMessage` as masters before batched events sent it.
    #[derive(Serialize)]
    enum OldMasterMessage {
        Ready {
            publish_key: PublishKey,
            publish_port: Option<u16>,
        },
    }

    #[test]
    fn a_master_that_predates_batched_events_gets_single_events() {
        let publish_key = PublishKey {
            epoch: 1,
            key: vec![7; 32],
            sealed: 0,
        };
        let old = encode(&OldMasterMessage::Ready {
            publish_key: publish_key.clone(),
            publish_port: Some(4505),
        })
        .unwrap();
        match decode::<MasterMessage>(&old).unwrap() {
            MasterMessage::Ready {
                batched_events,
                packed_events,
                packed_returns,
                zstd_returns,
                publish_port,
                ..
            } => {
                assert!(!batched_events);
                assert!(!packed_events);
                assert!(!packed_returns);
                assert!(!zstd_returns);
                assert_eq!(publish_port, Some(4505));
            }
            other => panic!("{other:?}"),
        }
        let new = encode(&MasterMessage::Ready {
            publish_key,
            publish_port: None,
            batched_events: true,
            packed_events: true,
            packed_returns: true,
            zstd_returns: true,
        })
        .unwrap();
        assert!(matches!(
            decode::<MasterMessage>(&new).unwrap(),
            MasterMessage::Ready {
                batched_events: true,
                packed_events: true,
                packed_returns: true,
                zstd_returns: true,
                ..
            }
        ));
    }

    #[test]
    fn a_batch_keeps_its_events_in_order() {
        let events: Vec<MinionEvent> = (0..3)
            .map(|n| {
                MinionEvent::plain(
                    format!("salt/job/1/prog/web/{n}"),
                    serde_json::json!({"len": 3, "ret": {"n": n}}),
                )
            })
            .collect();
        let bytes = encode(&MinionRequest::Events {
            events: events.clone(),
        })
        .unwrap();
        assert_eq!(
            decode::<MinionRequest>(&bytes).unwrap(),
            MinionRequest::Events { events }
        );
    }

    /// A batch as minions before packed events sent it.
    #[derive(Serialize)]
    enum OldMinionRequest {
        Events { events: Vec<OldMinionEvent> },
    }

    #[derive(Serialize)]
    struct OldMinionEvent {
        tag: String,
        data: Value,
    }

    #[test]
    fn packed_and_plain_events_read_as_the_same_data() {
        let data = serde_json::json!({"len": 2, "ret": {"a": [1, 2.5, "x", null], "changes": {}}});
        // An older minion's batch: no packed field.
        let old = encode(&OldMinionRequest::Events {
            events: vec![OldMinionEvent {
                tag: "t".into(),
                data: data.clone(),
            }],
        })
        .unwrap();
        let MinionRequest::Events { mut events } = decode::<MinionRequest>(&old).unwrap() else {
            panic!("not a batch");
        };
        let plain = events.pop().unwrap();
        assert!(plain.packed.is_none());
        assert_eq!(plain.into_data().unwrap(), data);
        // A packed one carries no decoded data, and gives the same.
        let packed = MinionEvent::packed("t".into(), &data).unwrap();
        let bytes = encode(&MinionRequest::Events {
            events: vec![packed],
        })
        .unwrap();
        let MinionRequest::Events { mut events } = decode::<MinionRequest>(&bytes).unwrap() else {
            panic!("not a batch");
        };
        let packed = events.pop().unwrap();
        assert_eq!(packed.data, Value::Null);
        assert_eq!(packed.into_data().unwrap(), data);
        // Garbage in the packed field is an error, not a panic.
        let bad = MinionEvent {
            tag: "t".into(),
            data: Value::Null,
            packed: Some(serde_bytes::ByteBuf::from(vec![0xc1, 0xff])),
        };
        assert!(bad.into_data().is_err());
    }

    #[test]
    fn packed_and_plain_returns_read_as_the_same_return() {
        let ret = JobReturn {
            jid: "20260101000000000001".into(),
            id: "web1".into(),
            fun: "state.apply".into(),
            fun_args: vec![serde_json::json!("bench")],
            ret: serde_json::json!({"test_|-a_|-a_|-succeed_without_changes":
                {"result": true, "duration": 0.1 + 0.2, "comment": "Succès ✓", "__run_num__": 0}}),
            retcode: 0,
            success: true,
        };
        // A plain return decodes as before.
        let plain = encode(&MinionRequest::Return(ret.clone())).unwrap();
        assert_eq!(
            decode::<MinionRequest>(&plain).unwrap(),
            MinionRequest::Return(ret.clone())
        );
        // A packed one carries the same value, checked without building it.
        let packed = PackedReturn::pack(ret.clone()).unwrap();
        crate::packed::check(&packed.ret).unwrap();
        let bytes = encode(&MinionRequest::PackedReturn(packed)).unwrap();
        let MinionRequest::PackedReturn(back) = decode::<MinionRequest>(&bytes).unwrap() else {
            panic!("not a packed return");
        };
        assert_eq!(back.unpack().unwrap(), ret);
        // Garbage in its value is an error, not a panic.
        let mut bad = PackedReturn::pack(ret).unwrap();
        bad.ret = serde_bytes::ByteBuf::from(vec![0x92, 0x01]);
        assert!(crate::packed::check(&bad.ret).is_err());
        assert!(bad.unpack().is_err());
    }

    /// `PackedReturn` as minions before compressed returns sent it.
    #[derive(Serialize)]
    enum OldPackedRequest {
        #[allow(dead_code, reason = "the variants before it, for their numbers")]
        Start {
            grains: Value,
        },
        #[allow(dead_code, reason = "the variants before it, for their numbers")]
        Return(JobReturn),
        PackedReturn(OldPackedReturn),
    }

    #[derive(Serialize)]
    struct OldPackedReturn {
        jid: String,
        id: String,
        fun: String,
        fun_args: Vec<Value>,
        #[serde(rename = "return")]
        ret: serde_bytes::ByteBuf,
        retcode: i64,
        success: bool,
    }

    #[test]
    fn a_framed_return_reads_as_the_plain_one_and_old_shapes_are_plain() {
        let ret = JobReturn {
            jid: "20260101000000000001".into(),
            id: "web1".into(),
            fun: "state.apply".into(),
            fun_args: vec![serde_json::json!("bench")],
            ret: serde_json::json!({"a": {"comment": "Succès ✓".repeat(200), "duration": 0.1 + 0.2}}),
            retcode: 0,
            success: true,
        };
        let plain = PackedReturn::pack(ret.clone()).unwrap();
        // An older minion's packed return (no `zstd` field) is plain, and a
        // plain one is written as older minions wrote it, byte for byte.
        let old = encode(&OldPackedRequest::PackedReturn(OldPackedReturn {
            jid: ret.jid.clone(),
            id: ret.id.clone(),
            fun: ret.fun.clone(),
            fun_args: ret.fun_args.clone(),
            ret: plain.ret.clone(),
            retcode: 0,
            success: true,
        }))
        .unwrap();
        assert_eq!(
            encode(&MinionRequest::PackedReturn(plain.clone())).unwrap(),
            old
        );
        let MinionRequest::PackedReturn(back) = decode::<MinionRequest>(&old).unwrap() else {
            panic!("not a packed return");
        };
        assert!(!back.zstd);
        // A framed one: smaller, marked, the same return once read.
        let framed = plain.framed().unwrap();
        assert!(framed.zstd);
        assert!(
            framed.ret.len() < plain.ret.len() / 4,
            "{}",
            framed.ret.len()
        );
        assert_eq!(
            crate::packed::unframe(&framed.ret, crate::packed::MAX_RETURN_BYTES).unwrap(),
            plain.ret.to_vec()
        );
        let bytes = encode(&MinionRequest::PackedReturn(framed)).unwrap();
        let MinionRequest::PackedReturn(back) = decode::<MinionRequest>(&bytes).unwrap() else {
            panic!("not a packed return");
        };
        assert!(back.zstd);
        assert_eq!(back.unpack().unwrap(), ret);
    }

    /// `RenderCall` as masters before repeated render-time calls sent
    /// and read it.
    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    enum OldRenderCall {
        RenderCall {
            jid: String,
            call: u64,
            fun: String,
            args: Vec<Value>,
            kwargs: Map<String, Value>,
        },
    }

    #[test]
    fn a_render_call_stays_readable_by_and_from_older_peers() {
        let old = OldRenderCall::RenderCall {
            jid: "j1".into(),
            call: 7,
            fun: "cmd.run".into(),
            args: vec![Value::from("id")],
            kwargs: Map::new(),
        };
        // An older master's call: not repeatable, so the minion runs it
        // every time it comes, as before.
        match decode::<MasterMessage>(&encode(&old).unwrap()).unwrap() {
            MasterMessage::RenderCall {
                call, repeatable, ..
            } => assert_eq!((call, repeatable), (7, false)),
            other => panic!("{other:?}"),
        }
        // A newer master's repeatable call, read by an older minion.
        let new = encode(&MasterMessage::RenderCall {
            jid: "j1".into(),
            call: 7,
            fun: "cmd.run".into(),
            args: vec![Value::from("id")],
            kwargs: Map::new(),
            repeatable: true,
        })
        .unwrap();
        assert_eq!(decode::<OldRenderCall>(&new).unwrap(), old);
    }

    /// The bundle request and its answers as peers before the one round
    /// trip (session 21) encode and decode them.
    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    enum OldRequest {
        Bundle {
            jid: String,
            have: Option<String>,
            packed: bool,
            kept_calls: bool,
        },
    }

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    enum OldReply {
        PackedBundle {
            digest: String,
            zstd: bool,
            #[serde(with = "serde_bytes")]
            bytes: Vec<u8>,
        },
        SameBundle {
            digest: String,
        },
    }

    #[test]
    fn the_one_round_trip_fields_stay_readable_by_and_from_older_peers() {
        let old = OldRequest::Bundle {
            jid: "j1".into(),
            have: Some("ab".into()),
            packed: true,
            kept_calls: true,
        };
        // An older minion's request: nothing synced said, so the master
        // answers as before (it synced through its own listings).
        match decode::<RequestBody>(&encode(&old).unwrap()).unwrap() {
            RequestBody::Bundle { synced, have, .. } => {
                assert_eq!(synced, None);
                assert_eq!(have.as_deref(), Some("ab"));
            }
            other => panic!("{other:?}"),
        }
        // A newer minion's request, read by an older master: the field is
        // ignored, the bundle answered as before.
        let new = encode(&RequestBody::Bundle {
            jid: "j1".into(),
            have: Some("ab".into()),
            packed: true,
            kept_calls: true,
            synced: Some(SyncedModules {
                saltenvs: vec!["base".into()],
                digest: "cd".into(),
            }),
        })
        .unwrap();
        assert_eq!(decode::<OldRequest>(&new).unwrap(), old);

        // An older master's answers: `modules_unchanged` false, so the
        // newer minion syncs as before.
        let same = encode(&OldReply::SameBundle {
            digest: "ab".into(),
        })
        .unwrap();
        assert_eq!(
            decode::<ReplyBody>(&same).unwrap(),
            ReplyBody::SameBundle {
                digest: "ab".into(),
                modules_unchanged: false
            }
        );
        let packed = encode(&OldReply::PackedBundle {
            digest: "ab".into(),
            zstd: false,
            bytes: vec![1, 2],
        })
        .unwrap();
        assert!(matches!(
            decode::<ReplyBody>(&packed).unwrap(),
            ReplyBody::PackedBundle {
                modules_unchanged: false,
                ..
            }
        ));
        // A newer master's answers, read by an older minion (never sent
        // one, as it never says `synced`, but readable all the same).
        let unchanged = ReplyBody::SameBundle {
            digest: "ab".into(),
            modules_unchanged: false,
        }
        .with_modules_unchanged();
        assert!(matches!(
            unchanged,
            ReplyBody::SameBundle {
                modules_unchanged: true,
                ..
            }
        ));
        assert_eq!(
            decode::<OldReply>(&encode(&unchanged).unwrap()).unwrap(),
            OldReply::SameBundle {
                digest: "ab".into()
            }
        );
        let packed = ReplyBody::PackedBundle {
            digest: "ab".into(),
            zstd: false,
            bytes: vec![1, 2],
            modules_unchanged: true,
        };
        assert_eq!(
            decode::<OldReply>(&encode(&packed).unwrap()).unwrap(),
            OldReply::PackedBundle {
                digest: "ab".into(),
                zstd: false,
                bytes: vec![1, 2]
            }
        );
    }
}
