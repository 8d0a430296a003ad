//! The master daemon: ROUTER (auth, returns, events) and PUB
//! (publications) on the network, the local socket for the CLI, and one
//! task that owns all state (sessions, keys, job cache) — no per-minion
//! task, no lock.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use halite_modules::exec::RemoteExec;
use halite_modules::Args;
use halite_proto::crypto::{random_u64, PendingSession, Publisher, SessionCipher};
use halite_proto::keyfile::{load_or_create_identity, write_private};
use halite_proto::mine::MineRequest;
use halite_proto::msg::{
    Hello, Job, JobReturn, KeyStatus, MasterMessage, MinionRequest, ReplyBody, RequestBody,
    ToMaster, ToMinion,
};
use halite_proto::{decode, encode, tags, validate_minion_id, Identity, JidGenerator, PublicKey};
use halite_transport::{Inbound, PubChannel, Router, RouterSender, Shutdown};
use serde_json::{json, Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

use crate::admission::Admission;
use crate::bundles::{BundleAnswer, BundleStats, InFlight, InFlightSlot};
use crate::compiler::Compiler;
use crate::config::MasterConfig;
use crate::events::{EventBus, Interest, Subscription};
use crate::fileserver::FileServer;
use crate::jobcache::JobCache;
use crate::keys::KeyStore;
use crate::local::{LocalBody, LocalReply, LocalRequest};
use crate::mine::{CompileMine, MineQuestion, MineStore};
use crate::render_calls::{Answered, Asked, CallNumbers, PendingCalls};
use crate::return_writer::Received;
use crate::targeting::{check_minions, MinionFacts};

/// Handshakes that may wait for their `Confirm` at once (a flood of
/// hellos cannot grow memory without bound).
const MAX_PENDING_HANDSHAKES: usize = 50_000;
/// `halite-call` sessions kept per minion id beside the daemon's: the
/// oldest is closed when another opens (each call needs one for seconds).
const MAX_CALLER_SESSIONS: usize = 4;
/// How long a handshake may wait for its `Confirm`.
const HANDSHAKE_TTL: Duration = Duration::from_secs(30);
/// How long a stopping master waits for its compiles and file reads in
/// flight (the returns already received are committed regardless).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// An authenticated minion.
struct Session {
    id: String,
    key: PublicKey,
    cipher: SessionCipher,
    routing: Bytes,
}

/// A job some targeted minions have not returned yet (`jobs.active`).
struct ActiveJob {
    /// Shared with the compile threads: its `minions` is the whole target
    /// (10,000 ids at fleet scale), which a minion's bundle request must
    /// not copy (issue 25, session 26: cloned per request, it was a
    /// quarter of the master's CPU at 10,000).
    job: Arc<Job>,
    /// `job.minions` as a set: a bundle request asks, once per minion and
    /// job, whether its minion is targeted (a scan of the list was
    /// quadratic over a fleet).
    targeted: HashSet<String>,
    returned: BTreeSet<String>,
    /// Targeted minions that have not returned yet.
    waiting: HashSet<String>,
    started: Instant,
    /// The schedule item of a job a minion's scheduler started (Salt's
    /// `schedule` key of its return).
    schedule: Option<String>,
}

impl ActiveJob {
    /// A job just published to its targeted minions, none returned yet.
    fn new(job: Job, schedule: Option<String>) -> Self {
        let targeted: HashSet<String> = job.minions.iter().cloned().collect();
        ActiveJob {
            waiting: targeted.clone(),
            targeted,
            job: Arc::new(job),
            returned: BTreeSet::new(),
            started: Instant::now(),
            schedule,
        }
    }
}

/// A key file a Hello asked for (pending, denied, or accepted by
/// `auto_accept`), written at the end of the batch with the others (one
/// sync for all).
struct NewKey {
    routing: Bytes,
    status: KeyStatus,
    id: String,
    key: PublicKey,
    reason: &'static str,
}

/// A request from a local client connection to the state task.
struct LocalCommand {
    body: LocalBody,
    reply: oneshot::Sender<LocalReply>,
}

/// Work finished off the state task (a compile, a file read) or asked of
/// it by a compile thread (a render-time call on a minion).
enum Internal {
    /// Send `body` as the answer to request `req` of session `sid`.
    Reply { sid: u64, req: u64, body: ReplyBody },
    /// Seal and send `plain`, an answer the worker encoded ([`reply_frame`]);
    /// `slot` (its place among the replies in flight) is freed once sent.
    EncodedReply {
        sid: u64,
        plain: Vec<u8>,
        slot: Option<InFlightSlot>,
    },
    /// Key files of Hellos were written (one result per key).
    KeysWritten {
        batch: Vec<NewKey>,
        results: Vec<Result<(), String>>,
    },
    /// Run `fun` on the minion of session `sid` for the compile of `jid`
    /// (call number `call`; `kept`: the minion answers a repeat from what
    /// it kept, so the call may be sent again: crate::render_calls).
    RenderCall {
        sid: u64,
        jid: String,
        call: u64,
        kept: bool,
        fun: String,
        args: Args,
        reply: crate::render_calls::Waiter,
    },
    /// A compile's `mine.get` (crate::mine).
    Mine(MineQuestion),
}

/// The encoded `Reply` to request `req`: `body`, or an error the minion
/// can show when `body` is too large for one frame. Runs on the compile
/// worker for bundles (issue 25: a 1000-chunk bundle's encoding is ~8% of
/// its compile, and the main task also serves returns, events and pings).
fn reply_frame(req: u64, body: ReplyBody) -> Result<Vec<u8>, halite_proto::FrameError> {
    match encode(&MasterMessage::Reply { req, body }) {
        Ok(plain) if plain.len() + 4096 < halite_proto::MAX_FRAME_BYTES => Ok(plain),
        too_big => {
            let why = match too_big {
                Ok(plain) => format!(
                    "the answer is {} bytes, over the {} byte message limit; split the run into smaller state.sls calls",
                    plain.len(),
                    halite_proto::MAX_FRAME_BYTES
                ),
                Err(e) => format!("cannot encode the answer: {e}"),
            };
            let body = ReplyBody::Error(why);
            encode(&MasterMessage::Reply { req, body })
        }
    }
}

/// The data of Salt's `salt/job/<jid>/ret/<id>` event for `ret`, which
/// it consumes: a 1,000-state return is moved into the event, not copied
/// (`json!` would serialise it into a new value).
fn return_event(ret: JobReturn, user: String, schedule: Option<String>) -> Value {
    // Keys in the order Salt's event has them (a packed return's value
    // is spliced in at "return" when the event is sent: events.rs).
    let mut data = Map::new();
    data.insert("cmd".into(), Value::from("_return"));
    data.insert("fun".into(), Value::String(ret.fun));
    data.insert("fun_args".into(), Value::Array(ret.fun_args));
    data.insert("id".into(), Value::String(ret.id));
    data.insert("jid".into(), Value::String(ret.jid));
    data.insert("retcode".into(), Value::from(ret.retcode));
    data.insert("return".into(), ret.ret);
    data.insert("success".into(), Value::Bool(ret.success));
    data.insert("ts".into(), Value::from(chrono::Utc::now().timestamp()));
    data.insert("user".into(), Value::String(user));
    if let Some(name) = schedule {
        data.insert("schedule".into(), Value::String(name));
    }
    Value::Object(data)
}

/// A compile thread's way to call functions on the minion it compiles for.
struct MinionCalls {
    sid: u64,
    jid: String,
    internal: mpsc::UnboundedSender<Internal>,
    timeout: Duration,
    /// The numbers of this compile's calls.
    numbers: CallNumbers,
    /// The minion keeps its answers (`kept_calls`): calls may go again.
    kept: bool,
}

impl RemoteExec for MinionCalls {
    fn call(&self, fun: &str, args: &Args) -> Result<Value, String> {
        let (reply, answer) = std::sync::mpsc::channel();
        self.internal
            .send(Internal::RenderCall {
                sid: self.sid,
                jid: self.jid.clone(),
                call: self.numbers.next(fun, args),
                kept: self.kept,
                fun: fun.to_string(),
                args: args.clone(),
                reply,
            })
            .map_err(|_| "the master is shutting down".to_string())?;
        match answer.recv_timeout(self.timeout) {
            Ok(result) => result,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(format!(
                "the minion did not answer the render-time call {fun} within {} s (render_call_timeout)",
                self.timeout.as_secs()
            )),
            Err(_) => Err(format!(
                "the minion disconnected before answering the render-time call {fun}"
            )),
        }
    }
}

/// The network side: the ROUTER's send half, the PUB, and the minions'
/// sessions and handshakes on them.
struct Wire {
    /// Replies and sealed messages to one minion (the ROUTER's send half).
    to_router: RouterSender,
    /// Publications to every minion (the PUB).
    publications: PubChannel,
    /// Authenticated minions by session id.
    sessions: HashMap<u64, Session>,
    /// The session of each authenticated minion id.
    by_id: HashMap<String, u64>,
    /// Sessions of `halite-call` (Salt's salt-call) per minion id: they
    /// live beside the minion daemon's session, the oldest closed past
    /// [`MAX_CALLER_SESSIONS`].
    callers: HashMap<String, VecDeque<u64>>,
    /// Handshakes begun with a `CallerHello`.
    caller_handshakes: HashSet<u64>,
    /// Handshakes waiting for their `Confirm`: the connection that sent the
    /// Hello and when.
    handshakes: HashMap<u64, (PendingSession, Bytes, Instant)>,
}

/// Key trust and admission: which minion keys are accepted, the rate
/// limits on unauthenticated Hellos, and the key files being written.
struct Trust {
    /// The key directories (`minions`, `minions_pre`, ...).
    keys: KeyStore,
    /// Accepted keys in memory, reread when the directory changes.
    accepted: HashMap<String, PublicKey>,
    /// The accepted directory's stamp when `accepted` was read.
    accepted_stamp: Option<(std::time::SystemTime, u64)>,
    /// Rate limits on Hellos and new key files.
    admission: Admission,
    /// Key files in `minions_pre` (recounted on every tick).
    pending_keys: usize,
    /// Key files queued by the current batch.
    new_keys: Vec<NewKey>,
    /// The pending keys of that batch, by id.
    queued: HashMap<String, PublicKey>,
    /// Keys `auto_accept` is writing, by id, with the newest Hello of each:
    /// it is welcomed once the key file is on disk.
    accepting: HashMap<String, (PublicKey, Bytes, Hello, bool)>,
    /// A batch of key files is being written.
    keys_in_flight: bool,
    /// When the pending-key cap was last logged.
    cap_warned: Option<Instant>,
    /// Hellos refused by the cap since it was last logged.
    cap_refusals: u64,
}

/// The master's own keys: its identity and the publish key, rotated.
struct Signing {
    /// The master's identity key pair (handshakes, publication signatures).
    identity: Identity,
    /// The current publish key publications are sealed with.
    publisher: Publisher,
    /// When the publish key was made (rotated every `publish_session` s).
    publisher_since: Instant,
}

/// The job book-keeping: the job cache, the jobs still waiting for
/// returns, and the grains targeting reads.
struct JobBook {
    /// The job cache (jobs, returns, grains) on disk.
    jobs: JobCache,
    /// Jobs some targeted minions have not returned yet, by jid.
    active: HashMap<String, ActiveJob>,
    /// Makes the jids of new jobs.
    jids: JidGenerator,
    /// The last grains of each minion (grain targeting).
    grains: HashMap<String, Value>,
    /// Grains received in the current batch, written with it.
    grains_to_store: Vec<(String, Value)>,
    /// Minions that (re)started in the current batch: their missed jobs
    /// are redelivered once the batch's returns are committed.
    started: Vec<String>,
    /// Commits returns off this task (return_writer.rs); `None`: this
    /// task commits them itself (the writer could not start).
    writer: Option<crate::return_writer::ReturnWriter>,
    /// Batches handed to the writer and not yet back. While one is out,
    /// a restarted minion's redeliveries wait behind it: its resent return
    /// may be in that batch, and a job redelivered before the return's
    /// acknowledgement would run again once the minion drops the return.
    commits_pending: usize,
}

/// The name `master.stats` counts a minion's request under.
fn request_kind(body: &RequestBody) -> &'static str {
    match body {
        RequestBody::Bundle { .. } => "bundle",
        RequestBody::CallBundle { .. } => "call_bundle",
        RequestBody::FileStat { .. } => "file_stat",
        RequestBody::FileChunk { .. } => "file_chunk",
        RequestBody::FileList { .. } => "file_list",
        RequestBody::FileEnvs => "file_envs",
        RequestBody::Mine(_) => "mine",
        RequestBody::OwnJob { .. } => "own_job",
    }
}

/// Work done off the state task: compiles and file reads on blocking
/// threads, and the render-time calls compiles make on minions.
struct CompileSide {
    /// Renders and compiles a minion's states for a job.
    compiler: Arc<Compiler>,
    /// Answers `salt://` file requests.
    fileserver: Arc<FileServer>,
    /// The compile threads (compiles and file reads): one per core, at a
    /// lower priority than this task, which serves the sockets.
    workers: Arc<crate::workers::Workers>,
    /// Replies prepared at once, from their work's start until sent
    /// (`max_bundles_in_flight`): bounds the memory of a fleet highstate.
    in_flight: InFlight,
    /// Requests being answered: a minion's repeat of one is not worked on twice.
    answering: crate::answering::Answering,
    /// Bundles sent, not sent (the minion held them), compressed.
    bundle_stats: Arc<BundleStats>,
    /// Where finished work reports back to the state task.
    internal: mpsc::UnboundedSender<Internal>,
    /// The daemon's shutdown: work spawned off the state task holds a guard.
    shutdown: Shutdown,
    /// Render-time calls waiting for their minion, by call number.
    render_calls: PendingCalls,
    /// Minions' requests received, by kind (`master.stats`: how many round
    /// trips a job costs, e.g. one for a warm highstate).
    requests: BTreeMap<&'static str, u64>,
}

/// All master state, owned by one task, in parts with one job each.
struct Master {
    /// The master's configuration.
    cfg: MasterConfig,
    /// The local event bus (`salt/...` events for the CLI and watchers).
    bus: EventBus,
    /// Sockets, sessions and handshakes.
    wire: Wire,
    /// Key trust and admission.
    trust: Trust,
    /// The master's own keys.
    signing: Signing,
    /// Jobs, returns and grains.
    book: JobBook,
    /// Compiles, file reads and render-time calls.
    compile: CompileSide,
    /// Every minion's Salt mine.
    mine: MineStore,
    /// Minions' events received (`master.stats`).
    event_counts: crate::minion_events::EventCounts,
    return_counts: crate::return_writer::ReturnCounts,
    /// Messages read past `return_commit_bytes` and not handled yet.
    parked: crate::read_bound::Parked,
    /// Missed jobs published again (`master.stats`).
    redelivered: crate::redelivery::RedeliveryCounts,
}

/// At most the first 300 bytes of `text` (on a character boundary), for
/// quoting what an unauthenticated peer sent.
fn clip(text: &str) -> String {
    const MAX: usize = 300;
    if text.len() <= MAX {
        return text.to_string();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &text[..end], text.len())
}

/// Creates `dir` with `mode` if missing.
fn ensure_dir(dir: &Path, mode: u32) -> anyhow::Result<()> {
    if !dir.exists() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("cannot chmod {}", dir.display()))?;
    }
    Ok(())
}

/// Reads or creates the local clients' root key.
fn root_key(cfg: &MasterConfig) -> anyhow::Result<String> {
    let path = cfg.root_key_path();
    if let Ok(text) = std::fs::read_to_string(&path) {
        if !text.trim().is_empty() {
            return Ok(text.trim().to_string());
        }
    }
    let key = format!(
        "{:016x}{:016x}{:016x}{:016x}",
        random_u64()?,
        random_u64()?,
        random_u64()?,
        random_u64()?
    );
    write_private(&path, key.as_bytes())?;
    Ok(key)
}

/// Runs the master until `shutdown` is triggered, then drains: no new CLI
/// connection or job, the work in flight finishes (within
/// [`SHUTDOWN_GRACE`]) and every return already received is written to
/// the job cache before the master exits.
pub async fn run(cfg: MasterConfig, shutdown: Shutdown) -> anyhow::Result<()> {
    ensure_dir(&cfg.cachedir, 0o700)?;
    ensure_dir(&cfg.sock_dir, 0o755)?;
    let identity = load_or_create_identity(&cfg.pki_dir, "master")?;
    let keys = KeyStore::open(&cfg.pki_dir)?;
    // The job cache's checkpoints run on a thread of their own
    // (wal_checkpoint.rs): none of the master's connections checkpoints
    // after its commit.
    let checkpointer = crate::wal_checkpoint::Checkpointer::start(&cfg.job_cache_path())?;
    let jobs = JobCache::open(&cfg.job_cache_path())?.without_autocheckpoint()?;
    match jobs.clean_old_jobs(cfg.keep_jobs) {
        Ok(n) if n > 0 => tracing::info!(removed = n, "old jobs removed from the job cache"),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "keep_jobs cleanup failed"),
    }
    let grains: HashMap<String, Value> = jobs.all_grains()?.into_iter().collect();
    let root_key = Arc::new(root_key(&cfg)?);

    let ret_endpoint = format!("tcp://{}:{}", cfg.interface, cfg.ret_port);
    let mut router = Router::bind_with(
        &ret_endpoint,
        crate::reply_limits::router_limits(&cfg.extra),
    )
    .await?;
    let pub_endpoint = format!("tcp://{}:{}", cfg.interface, cfg.publish_port);
    let publications = PubChannel::bind(&pub_endpoint).await?;

    let socket_path = cfg.local_socket();
    let _ = std::fs::remove_file(&socket_path);
    let listener = UnixListener::bind(&socket_path)
        .with_context(|| format!("cannot bind {}", socket_path.display()))?;
    let local_acl = Arc::new(crate::publisher_acl::LocalAcl::from_config(&cfg));
    open_socket_to_publishers(&cfg, &socket_path, local_acl.enabled())?;
    tracing::info!(ret = %ret_endpoint, publish = %pub_endpoint, socket = %socket_path.display(), "halite-master listening");

    let to_router = router.sender();

    // Bounded in events, and in bytes of returns for slow readers (spill.rs).
    let bus =
        EventBus::new(65536).with_spill(crate::spill::spill_to(&cfg.extra, cfg.job_cache_path()));
    let (local_tx, mut local_rx) = mpsc::channel::<LocalCommand>(1024);
    crate::reactor::start(&cfg, &bus, in_process(local_tx.clone()), shutdown.clone());
    let accept_task = tokio::spawn(accept_local(
        listener,
        root_key,
        local_acl,
        local_tx,
        bus.clone(),
        shutdown.clone(),
    ));

    let git = crate::git_sources::GitSources::load(&cfg);
    git.spawn_updaters(&shutdown);
    let fileserver = Arc::new(FileServer::with_backends(
        git.fileserver.clone(),
        cfg.file_buffer_size,
    ));
    let pillars = Arc::new(crate::pillar_cache::PillarCache::open(
        &cfg.job_cache_path(),
    )?);
    let mine = MineStore::open(&cfg.job_cache_path())?.with_acl(cfg.extra.get("mine_get").cloned());
    let (internal, mut internal_rx) = mpsc::unbounded_channel::<Internal>();
    // The writer's commits come back on their own channel, all of them
    // handled in one turn of the main task: with commits of at most 4 MiB
    // a ping's commit must not wait one turn per large commit before it.
    let (stored_tx, mut stored_rx) = mpsc::unbounded_channel::<crate::return_writer::Stored>();
    let writer = {
        let checkpoint = checkpointer.signal();
        let done = move |stored: crate::return_writer::Stored| {
            checkpoint.committed(stored.held_bytes);
            let _ = stored_tx.send(stored);
        };
        match crate::return_writer::ReturnWriter::start(&cfg.job_cache_path(), done) {
            Ok(writer) => Some(writer),
            Err(e) => {
                tracing::warn!(error = %e, "returns are committed on the main task");
                None
            }
        }
    };
    let (mine_tx, mut mine_rx) = mpsc::unbounded_channel::<MineQuestion>();
    let mine_timeout = Duration::from_secs(cfg.render_call_timeout);
    let compiler = Arc::new(
        Compiler::new(cfg.opts(), fileserver.clone(), cfg.pillar_roots.clone())
            .with_pillar_cache(pillars)
            .with_pillar_sources(
                [
                    git.pillar_sources(),
                    halite_modules::ext_pillar::sources_from_opts(&cfg.opts()),
                ]
                .concat(),
            )
            .with_mine(Arc::new(move |id: &str| {
                CompileMine::link(id, mine_tx.clone(), mine_timeout)
            })),
    );
    // Compiles' mine questions join the state task's internal queue.
    let mine_internal = internal.clone();
    tokio::spawn(async move {
        while let Some(question) = mine_rx.recv().await {
            if mine_internal.send(Internal::Mine(question)).is_err() {
                return;
            }
        }
    });
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let bundle_stats = Arc::new(BundleStats::default());
    let mut master = Master {
        bus,
        wire: Wire {
            to_router,
            publications,
            sessions: HashMap::new(),
            by_id: HashMap::new(),
            callers: HashMap::new(),
            caller_handshakes: HashSet::new(),
            handshakes: HashMap::new(),
        },
        trust: Trust {
            admission: Admission::new(&cfg),
            pending_keys: keys.ids(KeyStatus::Pending).map_or(0, |ids| ids.len()),
            keys,
            accepted: HashMap::new(),
            accepted_stamp: None,
            new_keys: Vec::new(),
            queued: HashMap::new(),
            accepting: HashMap::new(),
            keys_in_flight: false,
            cap_warned: None,
            cap_refusals: 0,
        },
        signing: Signing {
            identity,
            publisher: Publisher::generate()?,
            publisher_since: Instant::now(),
        },
        book: JobBook {
            jobs,
            active: HashMap::new(),
            jids: JidGenerator::new(),
            grains,
            grains_to_store: Vec::new(),
            started: Vec::new(),
            writer,
            commits_pending: 0,
        },
        compile: CompileSide {
            compiler,
            fileserver,
            workers: Arc::new(
                crate::workers::Workers::start(cores)
                    .context("cannot start the master's compile threads")?,
            ),
            in_flight: InFlight::new(cfg.max_bundles_in_flight, bundle_stats.clone()),
            answering: Default::default(),
            bundle_stats,
            internal,
            shutdown: shutdown.clone(),
            render_calls: PendingCalls::new(
                Duration::from_secs(cfg.request_channel_timeout),
                Duration::from_secs(cfg.render_call_timeout),
            ),
            requests: BTreeMap::new(),
        },
        mine,
        event_counts: Default::default(),
        return_counts: crate::return_writer::ReturnCounts::bounded(
            crate::reply_limits::whole_number(
                &cfg.extra,
                "return_commit_bytes",
                crate::return_writer::DEFAULT_RETURN_COMMIT_BYTES,
            ),
        ),
        parked: Default::default(),
        redelivered: Default::default(),
        cfg,
    };
    master.refresh_keys(true);

    let mut tick =
        tokio::time::interval(Duration::from_secs(master.cfg.key_rescan_interval.max(1)));
    let mut last_cleanup = Instant::now();
    // Hellos held for pending_key_rate are answered as its tokens come back.
    let mut held_tick = tokio::time::interval(Duration::from_millis(50));
    held_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let stop = shutdown.triggered();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            // Past `return_commit_bytes`, small messages only (read_bound.rs).
            Some(first) = router.incoming.recv(), if master.reads() => {
                let batch = master.gather(first, &mut router.incoming);
                master.handle_batch(batch);
            }
            // A turn of what was parked (read_bound.rs), while there is room.
            _ = std::future::ready(()), if master.unparks() => master.unpark(),
            Some(work) = internal_rx.recv() => master.on_internal(work),
            Some(stored) = stored_rx.recv() => master.on_stored(stored, &mut stored_rx),
            _ = held_tick.tick(), if master.trust.admission.has_held() => {
                master.answer_held_hellos();
                master.flush_new_keys();
            }
            Some(cmd) = local_rx.recv() => {
                let reply = master.handle_local(cmd.body);
                let _ = cmd.reply.send(reply);
            }
            _ = tick.tick() => {
                master.refresh_keys(false);
                master.expire();
                master.trust.admission.tidy();
                if let Ok(pending) = master.trust.keys.ids(KeyStatus::Pending) {
                    master.trust.pending_keys = pending.len() + master.trust.queued.len();
                }
                let session = master.cfg.publish_session;
                if session > 0 && master.signing.publisher_since.elapsed() >= Duration::from_secs(session) {
                    master.rotate_publish_key();
                }
                if last_cleanup.elapsed() > Duration::from_secs(3600) {
                    last_cleanup = Instant::now();
                    if let Err(e) = master.book.jobs.clean_old_jobs(master.cfg.keep_jobs) {
                        tracing::warn!(error = %e, "keep_jobs cleanup failed");
                    }
                }
            }
        }
    }
    tracing::info!(
        in_flight = shutdown.running(),
        "halite-master stopping: no new jobs; draining the work in flight"
    );
    // The accept task ends on the signal: no new CLI connection.
    let _ = std::fs::remove_file(master.cfg.local_socket());
    let deadline = tokio::time::Instant::now() + SHUTDOWN_GRACE;
    loop {
        tokio::select! {
            // Everything already received goes first: returns are committed.
            biased;
            // Past `return_commit_bytes`, small messages only (read_bound.rs).
            Some(first) = router.incoming.recv(), if master.reads() => {
                let batch = master.gather(first, &mut router.incoming);
                master.handle_batch(batch);
            }
            _ = std::future::ready(()), if master.unparks() => master.unpark(),
            Some(work) = internal_rx.recv() => master.on_internal(work),
            Some(stored) = stored_rx.recv() => master.on_stored(stored, &mut stored_rx),
            Some(cmd) = local_rx.recv() => {
                let _ = cmd.reply.send(LocalReply::Error(
                    "the master is shutting down; run the command again once it is back".into(),
                ));
            }
            _ = shutdown.drained() => break,
            _ = tokio::time::sleep_until(deadline) => {
                tracing::warn!(abandoned = shutdown.running(), "compiles or file reads still running at the end of the shutdown grace were abandoned");
                break;
            }
        }
    }
    // What was parked, then what arrived while the last work finished.
    let parked = master.parked.take(u64::MAX, usize::MAX);
    for first in parked {
        master.handle_batch(vec![first]);
    }
    while let Ok(first) = router.incoming.try_recv() {
        master.handle_batch(vec![first]);
    }
    // The returns queued for the writer are committed, and acknowledged
    // while the socket is still up.
    if let Some(mut writer) = master.book.writer.take() {
        writer.finish();
    }
    while let Ok(stored) = stored_rx.try_recv() {
        master.on_stored(stored, &mut stored_rx);
    }
    while let Ok(work) = internal_rx.try_recv() {
        master.on_internal(work);
    }
    drop(router);
    accept_task.abort();
    tracing::info!("halite-master shutting down");
    Ok(())
}

impl Master {
    /// What became of replies to minions (`master.stats`' `replies`):
    /// waited for a full connection queue, dropped past the overflow
    /// (the minion asks again), for a gone connection, repeats of
    /// requests still being answered, and render-time calls sent again.
    fn reply_stats(&self) -> Value {
        use std::sync::atomic::Ordering::Relaxed;
        let counts = self.wire.to_router.counts();
        json!({
            "overflowed": counts.overflowed.load(Relaxed),
            "dropped": counts.dropped.load(Relaxed),
            "undeliverable": counts.undeliverable.load(Relaxed),
            "repeated_requests": self.compile.answering.repeats(),
            "render_calls_resent": self.compile.render_calls.resent(),
        })
    }

    fn send(&self, routing: &Bytes, msg: &ToMinion) {
        queue_reply(&self.wire.to_router, routing, msg);
    }

    fn send_sealed(&mut self, sid: u64, msg: &MasterMessage) {
        match encode(msg) {
            Ok(plain) => self.seal_and_send(sid, &plain),
            Err(e) => tracing::warn!(error = %e, "cannot encode a message"),
        }
    }

    /// Answers request `req` of session `sid`; an answer too large for one
    /// frame (a huge bundle) becomes an error the minion can show.
    fn send_reply(&mut self, sid: u64, req: u64, body: ReplyBody) {
        match reply_frame(req, body) {
            Ok(plain) => self.seal_and_send(sid, &plain),
            Err(e) => tracing::warn!(error = %e, "cannot encode a message"),
        }
    }

    fn seal_and_send(&mut self, sid: u64, plain: &[u8]) {
        let Some(session) = self.wire.sessions.get_mut(&sid) else {
            return;
        };
        let sealed = match session.cipher.seal(plain).map_err(|e| e.to_string()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "cannot seal a message");
                return;
            }
        };
        let routing = session.routing.clone();
        self.send(&routing, &ToMinion::Sealed(sealed));
    }

    /// Rereads the accepted keys when the directory changed (or `force`);
    /// ends the sessions of minions no longer accepted and rotates the
    /// publish key so they cannot read the next publication.
    fn refresh_keys(&mut self, force: bool) {
        let stamp = self.trust.keys.accepted_stamp();
        if !force && stamp == self.trust.accepted_stamp {
            return;
        }
        let accepted = match self.trust.keys.accepted() {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(error = %e, "cannot read accepted keys");
                return;
            }
        };
        self.trust.accepted_stamp = stamp;
        let revoked: Vec<u64> = self
            .wire
            .sessions
            .iter()
            .filter(|(_, s)| accepted.get(&s.id) != Some(&s.key))
            .map(|(sid, _)| *sid)
            .collect();
        for sid in &revoked {
            if let Some(s) = self.wire.sessions.remove(sid) {
                tracing::info!(id = %s.id, "key no longer accepted; session closed");
                if self.wire.by_id.get(&s.id) == Some(sid) {
                    self.wire.by_id.remove(&s.id);
                }
                self.wire.callers.remove(&s.id);
                if !accepted.contains_key(&s.id) {
                    self.book.grains.remove(&s.id);
                    if let Some(pillars) = self.compile.compiler.pillar_cache() {
                        pillars.forget(&s.id);
                    }
                    let _ = self.book.jobs.forget_minion(&s.id);
                }
            }
        }
        self.trust.accepted = accepted;
        let accepted = &self.trust.accepted;
        self.mine.keep_only(|id| accepted.contains_key(id));
        if !revoked.is_empty() {
            self.rotate_publish_key();
        }
    }

    fn rotate_publish_key(&mut self) {
        match Publisher::generate() {
            Ok(p) => {
                self.signing.publisher = p;
                self.signing.publisher_since = Instant::now();
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot rotate the publish key");
                return;
            }
        }
        let key = self.signing.publisher.key().clone();
        let sids: Vec<u64> = self.wire.sessions.keys().copied().collect();
        for sid in sids {
            self.send_sealed(sid, &MasterMessage::PublishKey(key.clone()));
        }
        tracing::info!(epoch = key.epoch, "publish key rotated");
    }

    fn expire(&mut self) {
        self.wire
            .handshakes
            .retain(|_, (_, _, at)| at.elapsed() < HANDSHAKE_TTL);
        let handshakes = &self.wire.handshakes;
        self.wire
            .caller_handshakes
            .retain(|sid| handshakes.contains_key(sid));
        self.book
            .active
            .retain(|_, a| a.started.elapsed() < Duration::from_secs(24 * 3600));
        self.resend_render_calls();
    }

    /// Sends again the render-time calls with no answer after
    /// `request_channel_timeout` (crate::render_calls), on the minion's
    /// session: the one it was sent on, or the daemon's new one if the
    /// minion reconnected since (a `halite-call`'s ends with the call).
    fn resend_render_calls(&mut self) {
        for due in self.compile.render_calls.due(Instant::now()) {
            let asked = &due.asked;
            let sid = if self.wire.sessions.contains_key(&asked.sid) {
                Some(asked.sid)
            } else if asked.caller {
                None
            } else {
                self.wire.by_id.get(&asked.id).copied()
            };
            let Some(sid) = sid else { continue };
            tracing::info!(id = %asked.id, call = due.call, fun = %due.question.fun, "no answer to a render-time call yet; asking again");
            self.compile.render_calls.sent_on(due.call, sid);
            let question = due.question;
            self.send_sealed(
                sid,
                &MasterMessage::RenderCall {
                    jid: question.jid,
                    call: due.call,
                    fun: question.fun,
                    args: question.args.positional,
                    kwargs: question.args.kwargs,
                    repeatable: true,
                },
            );
        }
    }

    /// The writer's commit `first` and every other one waiting in
    /// `more`: acknowledged, fired and released in this one turn, then a
    /// turn of the parked messages the room allows.
    fn on_stored(
        &mut self,
        first: crate::return_writer::Stored,
        more: &mut mpsc::UnboundedReceiver<crate::return_writer::Stored>,
    ) {
        let mut next = Some(first);
        while let Some(stored) = next {
            self.book.commits_pending = self.book.commits_pending.saturating_sub(stored.batches);
            self.returns_stored(stored);
            next = more.try_recv().ok();
        }
        self.unpark();
    }

    fn on_internal(&mut self, work: Internal) {
        match work {
            Internal::Reply { sid, req, body } => self.send_reply(sid, req, body),
            Internal::EncodedReply { sid, plain, slot } => {
                self.seal_and_send(sid, &plain);
                // The frame is the socket's now (bounded by its own limits).
                drop(slot);
            }
            Internal::KeysWritten { batch, results } => self.keys_written(batch, results),
            Internal::Mine(question) => {
                let answer = self
                    .mine_answer(&question.requester, question.request)
                    .unwrap_or_else(|| Err("not a mine.get".into()));
                let _ = question.reply.send(answer);
            }
            Internal::RenderCall {
                sid,
                jid,
                call,
                kept,
                fun,
                args,
                reply,
            } => {
                let Some(id) = self.wire.sessions.get(&sid).map(|s| s.id.clone()) else {
                    let _ = reply.send(Err(format!(
                        "the minion disconnected before the render-time call {fun}"
                    )));
                    return;
                };
                let caller = self
                    .wire
                    .callers
                    .get(&id)
                    .is_some_and(|sids| sids.contains(&sid));
                let repeat = kept.then(|| crate::render_calls::Question {
                    jid: jid.clone(),
                    fun: fun.clone(),
                    args: args.clone(),
                });
                let asked = Asked {
                    id,
                    sid,
                    caller,
                    repeat,
                };
                if !self
                    .compile
                    .render_calls
                    .insert(call, asked, reply, Instant::now())
                {
                    // The same call of the same job waits already: its answer serves both.
                    return;
                }
                self.send_sealed(
                    sid,
                    &MasterMessage::RenderCall {
                        jid,
                        call,
                        fun,
                        args: args.positional,
                        kwargs: args.kwargs,
                        repeatable: kept,
                    },
                );
            }
        }
    }

    /// Answers a minion's request off the state task: a compile or a file
    /// read runs on a blocking thread, one per core at once.
    fn on_minion_request(&mut self, sid: u64, id: &str, req: u64, body: RequestBody) {
        *self
            .compile
            .requests
            .entry(request_kind(&body))
            .or_default() += 1;
        let internal = self.compile.internal.clone();
        let workers = self.compile.workers.clone();
        let work: Box<dyn FnOnce() -> ReplyBody + Send> = match body {
            RequestBody::Bundle {
                jid,
                have,
                packed,
                kept_calls,
                synced,
            } => {
                let Some(active) = self
                    .book
                    .active
                    .get(&jid)
                    .filter(|a| a.targeted.contains(id))
                else {
                    let body = ReplyBody::Error(format!(
                        "job {jid} is not running for minion {id} on this master"
                    ));
                    self.send_reply(sid, req, body);
                    return;
                };
                let job = Arc::clone(&active.job);
                let grains = self
                    .book
                    .grains
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| json!({ "id": id }));
                let compiler = self.compile.compiler.clone();
                let remote = Arc::new(MinionCalls {
                    sid,
                    numbers: CallNumbers::for_job(id, &jid),
                    jid,
                    internal: internal.clone(),
                    timeout: Duration::from_secs(self.cfg.render_call_timeout),
                    kept: kept_calls,
                });
                let id = id.to_string();
                let answer = BundleAnswer {
                    have,
                    packed,
                    compress_above: self.cfg.bundle_compress_threshold,
                };
                let stats = self.compile.bundle_stats.clone();
                let fileserver = self.compile.fileserver.clone();
                Box::new(move || {
                    // A warm highstate's custom modules, checked here
                    // rather than listed by the minion first (one round trip).
                    let Some(synced) = synced else {
                        return compiler.answer(&id, &grains, &job, remote, &answer, &stats);
                    };
                    let stamp = compiler.records().tree_stamp(&job.jid, fileserver.client());
                    match fileserver.modules_digest(&stamp, &synced.saltenvs) {
                        Ok(digest) if digest == synced.digest => {
                            stats.modules_checked(true);
                            compiler
                                .answer(&id, &grains, &job, remote, &answer, &stats)
                                .with_modules_unchanged()
                        }
                        checked => {
                            if let Err(e) = checked {
                                tracing::debug!(%id, error = %e, "custom modules not checked: the minion syncs");
                            }
                            tracing::debug!(%id, jid = %job.jid, "custom modules changed: the minion syncs first");
                            stats.modules_checked(false);
                            ReplyBody::SyncFirst
                        }
                    }
                })
            }
            RequestBody::CallBundle {
                fun,
                arg,
                kwarg,
                grains,
                kept_calls,
            } => {
                let job = Job {
                    jid: halite_proto::jid::CALLER_JID.into(),
                    fun,
                    arg,
                    kwarg,
                    tgt: id.to_string(),
                    tgt_type: "glob".into(),
                    user: "root".into(),
                    minions: vec![id.to_string()],
                    progress_unwatched: false,
                };
                let grains = if grains.is_object() {
                    grains
                } else {
                    self.book
                        .grains
                        .get(id)
                        .cloned()
                        .unwrap_or_else(|| json!({ "id": id }))
                };
                let compiler = self.compile.compiler.clone();
                let remote = Arc::new(MinionCalls {
                    sid,
                    jid: job.jid.clone(),
                    internal: internal.clone(),
                    timeout: Duration::from_secs(self.cfg.render_call_timeout),
                    numbers: CallNumbers::fresh(random_u64().unwrap_or(req)),
                    kept: kept_calls,
                });
                let id = id.to_string();
                Box::new(move || ReplyBody::Bundle(compiler.bundle(&id, &grains, &job, remote)))
            }
            RequestBody::Mine(MineRequest::PillarFunctions) => {
                let grains = self
                    .book
                    .grains
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| json!({ "id": id }));
                let compiler = self.compile.compiler.clone();
                let remote = Arc::new(MinionCalls {
                    sid,
                    jid: "mine".into(),
                    internal: internal.clone(),
                    timeout: Duration::from_secs(self.cfg.render_call_timeout),
                    numbers: CallNumbers::fresh(random_u64().unwrap_or(req)),
                    kept: false,
                });
                let id = id.to_string();
                Box::new(move || ReplyBody::Value(compiler.mine_functions(&id, &grains, remote)))
            }
            RequestBody::Mine(request) => {
                let body = match self.mine_answer(id, request) {
                    Some(Ok(value)) => ReplyBody::Value(value),
                    Some(Err(e)) => ReplyBody::Error(e),
                    None => ReplyBody::Error("unanswerable mine request".into()),
                };
                self.send_reply(sid, req, body);
                return;
            }
            RequestBody::OwnJob { job, schedule } => {
                let body = self.own_job(id, job, schedule);
                self.send_reply(sid, req, body);
                return;
            }
            other => {
                let fileserver = self.compile.fileserver.clone();
                Box::new(move || fileserver.answer(&other))
            }
        };
        // A repeat (the minion's request_channel_timeout passed) of a
        // request still being answered: the one answer serves both.
        let Some(answer) = self.compile.answering.start(sid, req) else {
            tracing::debug!(%id, req, "request asked again while it is answered");
            return;
        };
        let work_guard = self.compile.shutdown.work();
        let in_flight = self.compile.in_flight.clone();
        tokio::spawn(async move {
            // Dropped after the answer is queued for this task.
            let _work = work_guard;
            let _answer = answer;
            // A place among the replies in flight first, then a compile
            // thread: a reply waiting to be sealed holds its place, not a core.
            let slot = in_flight.enter().await;
            // The answer is encoded on the worker too; the main task only seals it.
            let encoded = workers.run(move || reply_frame(req, work())).await;
            let _ = match encoded {
                Ok(Ok(plain)) => internal.send(Internal::EncodedReply { sid, plain, slot }),
                Ok(Err(e)) => internal.send(Internal::Reply {
                    sid,
                    req,
                    body: ReplyBody::Error(format!("cannot encode the answer: {e}")),
                }),
                Err(e) => internal.send(Internal::Reply {
                    sid,
                    req,
                    body: ReplyBody::Error(format!("the request failed on the master: {e}")),
                }),
            };
        });
    }

    /// Records a job minion `id` started by itself (its scheduler), as
    /// Salt's master saves the load of a minion's `req` return: in the job
    /// cache, targeted at that minion alone, and active until it returns.
    fn own_job(&mut self, id: &str, job: Job, schedule: Option<String>) -> ReplyBody {
        if job.minions != [id] || job.tgt != id || !halite_proto::jid::is_jid(&job.jid) {
            return ReplyBody::Error(format!(
                "a minion's own job must target that minion alone ({id}) and carry a valid jid"
            ));
        }
        if self.book.active.contains_key(&job.jid) {
            return ReplyBody::Error(format!("job {} is already known", job.jid));
        }
        if let Err(e) = crate::job_load::store(&self.book.jobs, &job) {
            return ReplyBody::Error(format!("cannot record the job: {e}"));
        }
        let jid = job.jid.clone();
        self.book
            .active
            .insert(jid.clone(), ActiveJob::new(job, schedule));
        ReplyBody::List(vec![jid])
    }

    /// One turn's messages: `first` and what else waits in `incoming`,
    /// bounded per turn and under `return_commit_bytes`
    /// ([`crate::read_bound::Parked::gather`]): a small message goes ahead
    /// of a full turn, the others wait parked for [`Master::unpark`].
    fn gather(&mut self, first: Inbound, incoming: &mut mpsc::Receiver<Inbound>) -> Vec<Inbound> {
        let (room, small_room) = (self.return_counts.room(), self.return_counts.small_room());
        self.parked.gather(
            first,
            || incoming.try_recv().ok(),
            room,
            small_room,
            &mut self.return_counts.sorted,
        )
    }

    /// Whether the main task reads from the ROUTER: under
    /// `return_commit_bytes`, or past it while small messages may still
    /// be handled and parked ([`crate::read_bound`]).
    fn reads(&self) -> bool {
        (self.return_counts.room() > 0 && self.parked.is_empty())
            || (!self.parked.is_full() && self.return_counts.small_room() > 0)
    }

    /// Whether parked messages may be handled now: the commits left room
    /// under `return_commit_bytes`.
    fn unparks(&self) -> bool {
        !self.parked.is_empty() && self.return_counts.room() > 0
    }

    /// Handles one turn of the parked messages, oldest first, within the
    /// room under `return_commit_bytes` (one message past it at most);
    /// the main loop comes back for the rest while [`Master::unparks`].
    fn unpark(&mut self) {
        let room = self.return_counts.room();
        if room == 0 || self.parked.is_empty() {
            return;
        }
        let batch = self.parked.take(
            room.min(crate::read_bound::TURN_BYTES),
            crate::read_bound::TURN_MESSAGES,
        );
        self.handle_batch(batch);
    }

    fn handle_batch(&mut self, batch: Vec<Inbound>) {
        let mut returns: Vec<(u64, Received)> = Vec::new();
        for Inbound {
            routing,
            payload,
            arrived,
            ..
        } in batch
        {
            let msg: ToMaster = match decode(&payload) {
                Ok(m) => m,
                Err(e) => {
                    tracing::debug!(error = %e, "dropped an undecodable frame");
                    continue;
                }
            };
            match msg {
                ToMaster::Hello(hello) => self.on_hello(routing, hello, false),
                ToMaster::CallerHello(hello) => self.on_hello(routing, hello, true),
                ToMaster::Confirm(confirm) => {
                    // Only the connection that sent the hello may finish (or spoil) its handshake.
                    let from_its_connection = match self.wire.handshakes.get(&confirm.session) {
                        Some((_, pending_routing, _)) => *pending_routing == routing,
                        None => {
                            self.send(
                                &routing,
                                &ToMinion::UnknownSession {
                                    session: confirm.session,
                                },
                            );
                            continue;
                        }
                    };
                    if !from_its_connection {
                        tracing::debug!("confirm from another connection dropped");
                        continue;
                    }
                    let Some((pending, _, _)) = self.wire.handshakes.remove(&confirm.session)
                    else {
                        continue;
                    };
                    let (id, key) = (pending.id.clone(), pending.minion_key);
                    let caller = self.wire.caller_handshakes.remove(&confirm.session);
                    match pending.confirm(&confirm) {
                        Ok(cipher) => self.open_session(routing, id, key, cipher, caller),
                        Err(e) => tracing::warn!(%id, error = %e, "handshake confirmation refused"),
                    }
                }
                ToMaster::Sealed(sealed) => {
                    let sid = sealed.session;
                    let Some(session) = self.wire.sessions.get_mut(&sid) else {
                        self.send(&routing, &ToMinion::UnknownSession { session: sid });
                        continue;
                    };
                    let plain = match session.cipher.open_owned(sealed) {
                        Ok(p) => p,
                        Err(e) => {
                            tracing::debug!(id = %session.id, error = %e, "sealed message refused");
                            continue;
                        }
                    };
                    // Authenticated: the minion may have reconnected from a new socket.
                    session.routing = routing;
                    // A batch of events is read in place (minion_events.rs).
                    if let Some(events) = crate::minion_events::read_batch(&plain) {
                        self.event_counts.messages += 1;
                        self.event_counts.events += events.len() as u64;
                        crate::minion_events::fire_batch(&self.bus, &session.id, events);
                        continue;
                    }
                    let request: MinionRequest = match decode(&plain) {
                        Ok(r) => r,
                        Err(e) => {
                            tracing::warn!(id = %session.id, error = %e, "undecodable request in a valid session dropped");
                            continue;
                        }
                    };
                    let Some(request) = crate::intake::bound_request(&session.id, request) else {
                        continue;
                    };
                    if let Some(ret) = self.on_request(sid, request) {
                        returns.push((sid, Received { arrived, ..ret }));
                    }
                }
            }
        }
        if !self.book.grains_to_store.is_empty() {
            let batch = std::mem::take(&mut self.book.grains_to_store);
            if let Err(e) = self.book.jobs.store_grains_many(&batch) {
                tracing::warn!(error = %e, "cannot cache grains");
            }
        }
        if returns.is_empty() && self.book.commits_pending == 0 {
            let started = std::mem::take(&mut self.book.started);
            self.redeliver(&started);
        } else if !returns.is_empty() || !self.book.started.is_empty() {
            // The redeliveries follow the commit.
            self.commit_returns(returns);
        }
        self.answer_held_hellos();
        self.flush_new_keys();
    }

    /// A Hello (`caller`: from `halite-call`, whose session lives beside
    /// the minion daemon's).
    fn on_hello(&mut self, routing: Bytes, hello: Hello, caller: bool) {
        // Unauthenticated work is bounded first (admission.rs).
        if !self.trust.admission.hello(&routing) {
            return;
        }
        self.admit_hello(routing, hello, caller, false);
    }

    /// Answers the Hellos held for `pending_key_rate`, as many as its
    /// tokens allow now (each one's key file is queued with the batch).
    fn answer_held_hellos(&mut self) {
        while let Some(held) = self.trust.admission.next_held() {
            self.admit_hello(held.routing, held.hello, held.caller, true);
        }
    }

    /// Holds a new id's Hello the key rate refused now; logged when the
    /// hold is full and it is dropped (the minion asks again after
    /// `auth_timeout`).
    fn hold_hello(&mut self, routing: Bytes, hello: Hello, caller: bool) {
        let id = hello.id.clone();
        if !self.trust.admission.hold(routing, hello, caller) {
            tracing::debug!(%id, "hello of a new id dropped: too many held for pending_key_rate");
        }
    }

    /// A Hello within the Hello rates (`key_token`: one key file of
    /// `pending_key_rate` is already granted to it).
    fn admit_hello(&mut self, routing: Bytes, hello: Hello, caller: bool, key_token: bool) {
        let id = hello.id.clone();
        let refuse = |status: Option<KeyStatus>, reason: String| ToMinion::Refused {
            id: id.clone(),
            status,
            reason,
        };
        if let Err(e) = validate_minion_id(&id) {
            // The reply and the log line quote at most the id's first bytes:
            // a peer that never reads must not have its megabyte id echoed.
            let reason = clip(&e.to_string());
            tracing::warn!(error = %reason, "hello with an invalid id refused");
            let reply = ToMinion::Refused {
                id: clip(&id),
                status: None,
                reason,
            };
            self.send(&routing, &reply);
            return;
        }
        let Ok(key) = PublicKey::from_slice(&hello.minion_key) else {
            self.send(&routing, &refuse(None, "malformed identity key".into()));
            return;
        };
        let pub_text = key.to_hex();
        // A key queued in this batch is pending already; an accepted key
        // known in memory (reread whenever the directory changes) needs no
        // disk read, so a fleet reconnecting at once costs no file I/O.
        let status = match self.trust.queued.get(&id) {
            Some(queued) => Some((KeyStatus::Pending, *queued)),
            None if self.trust.accepted.get(&id) == Some(&key) => Some((KeyStatus::Accepted, key)),
            None => match self.trust.keys.status(&id) {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(error = %e, "key lookup failed");
                    return;
                }
            },
        };
        let auth_event = |act: &str, result: bool| json!({"act": act, "id": id, "pub": pub_text, "result": result});
        let accepted = match status {
            Some((KeyStatus::Accepted, known)) if known == key => true,
            Some((KeyStatus::Accepted, _)) | Some((KeyStatus::Denied, _)) => {
                // A known id presenting a different key is denied (Salt's minions_denied).
                self.queue_key(
                    routing,
                    KeyStatus::Denied,
                    id.clone(),
                    key,
                    "key denied: this id is accepted with another key",
                );
                return;
            }
            Some((KeyStatus::Rejected, _)) => {
                self.bus.fire(tags::AUTH, auth_event("reject", false));
                self.send(
                    &routing,
                    &refuse(Some(KeyStatus::Rejected), "key rejected".into()),
                );
                return;
            }
            Some((KeyStatus::Pending, known)) => {
                if known != key {
                    self.queue_key(
                        routing,
                        KeyStatus::Denied,
                        id.clone(),
                        key,
                        "key denied: another key is pending for this id",
                    );
                    return;
                }
                if self.cfg.auto_accept && !self.trust.queued.contains_key(&id) {
                    let _ =
                        self.trust
                            .keys
                            .transition(&id, KeyStatus::Pending, KeyStatus::Accepted);
                    true
                } else {
                    false
                }
            }
            None if self.cfg.auto_accept => {
                // Being written already (this Hello is the minion's retry):
                // the newest Hello is the one welcomed.
                if let Some(entry) = self.trust.accepting.get_mut(&id) {
                    if entry.0 == key {
                        *entry = (key, routing, hello, caller);
                    }
                    return;
                }
                if !key_token && !self.trust.admission.new_key() {
                    self.hold_hello(routing, hello, caller);
                    return;
                }
                // Written with the batch (one sync for all, off this task);
                // welcomed when it is on disk (keys_written).
                self.trust
                    .accepting
                    .insert(id.clone(), (key, routing.clone(), hello, caller));
                self.trust.new_keys.push(NewKey {
                    routing,
                    status: KeyStatus::Accepted,
                    id,
                    key,
                    reason: "key accepted (auto_accept)",
                });
                return;
            }
            None => {
                let cap = self.cfg.max_pending_keys;
                if cap > 0 && self.trust.pending_keys >= cap {
                    self.trust.cap_refusals += 1;
                    if self
                        .trust
                        .cap_warned
                        .is_none_or(|at| at.elapsed() >= Duration::from_secs(10))
                    {
                        tracing::warn!(
                            %id,
                            refused = self.trust.cap_refusals,
                            "pending key cap reached (max_pending_keys = {cap}): Hellos from new ids are refused until pending keys are accepted, rejected or deleted with halite-key"
                        );
                        self.trust.cap_warned = Some(Instant::now());
                        self.trust.cap_refusals = 0;
                    }
                    self.send(
                        &routing,
                        &refuse(
                            None,
                            "the master holds too many pending keys (max_pending_keys); retrying later".into(),
                        ),
                    );
                    return;
                }
                if !key_token && !self.trust.admission.new_key() {
                    self.hold_hello(routing, hello, caller);
                    return;
                }
                self.trust.queued.insert(id.clone(), key);
                self.trust.pending_keys += 1;
                self.trust.new_keys.push(NewKey {
                    routing,
                    status: KeyStatus::Pending,
                    id,
                    key,
                    reason: "key pending acceptance",
                });
                return;
            }
        };
        if !accepted {
            self.bus.fire(tags::AUTH, auth_event("pend", true));
            self.send(
                &routing,
                &refuse(Some(KeyStatus::Pending), "key pending acceptance".into()),
            );
            return;
        }
        self.trust.accepted.insert(id.clone(), key);
        self.welcome(routing, &hello, caller);
    }

    /// Answers the Hello of an accepted key with the master's Welcome.
    fn welcome(&mut self, routing: Bytes, hello: &Hello, caller: bool) {
        let id = &hello.id;
        if self.wire.handshakes.len() >= MAX_PENDING_HANDSHAKES {
            self.wire
                .handshakes
                .retain(|_, (_, _, at)| at.elapsed() < Duration::from_secs(2));
            if self.wire.handshakes.len() >= MAX_PENDING_HANDSHAKES {
                tracing::warn!("too many unfinished handshakes; hello dropped");
                return;
            }
        }
        let Ok(sid) = random_u64() else { return };
        match PendingSession::respond(&self.signing.identity, hello, sid) {
            Ok((pending, welcome)) => {
                self.wire
                    .handshakes
                    .insert(sid, (pending, routing.clone(), Instant::now()));
                if caller {
                    self.wire.caller_handshakes.insert(sid);
                }
                self.send(&routing, &ToMinion::Welcome(welcome));
            }
            Err(e) => tracing::debug!(%id, error = %e, "hello refused"),
        }
    }

    /// Queues a denied key file to be written with the rest of this batch,
    /// within `pending_key_rate`; its refusal is sent once the file is on
    /// disk. Over the rate, the denial is still answered (without a file).
    fn queue_key(
        &mut self,
        routing: Bytes,
        status: KeyStatus,
        id: String,
        key: PublicKey,
        reason: &'static str,
    ) {
        if !self.trust.admission.new_key() {
            if status == KeyStatus::Denied {
                self.answer_key(&routing, status, &id, &key, reason);
            }
            return;
        }
        if status == KeyStatus::Pending {
            self.trust.queued.insert(id.clone(), key);
            self.trust.pending_keys += 1;
        }
        self.trust.new_keys.push(NewKey {
            routing,
            status,
            id,
            key,
            reason,
        });
    }

    /// Fires the auth event of a pending or denied key and refuses the Hello.
    fn answer_key(
        &mut self,
        routing: &Bytes,
        status: KeyStatus,
        id: &str,
        key: &PublicKey,
        reason: &str,
    ) {
        let (act, result) = match status {
            KeyStatus::Pending => ("pend", true),
            _ => ("denied", false),
        };
        self.bus.fire(
            tags::AUTH,
            json!({"act": act, "id": id, "pub": key.to_hex(), "result": result}),
        );
        self.send(
            routing,
            &ToMinion::Refused {
                id: id.to_string(),
                status: Some(status),
                reason: reason.to_string(),
            },
        );
    }

    /// Writes the queued key files on a blocking thread with one
    /// filesystem sync for all of them (never on this task: a slow disk
    /// must not delay real minions' sessions); one write at a time, the
    /// next batch waits for [`Internal::KeysWritten`].
    fn flush_new_keys(&mut self) {
        if self.trust.new_keys.is_empty() || self.trust.keys_in_flight {
            return;
        }
        self.trust.keys_in_flight = true;
        let batch = std::mem::take(&mut self.trust.new_keys);
        let files: Vec<(KeyStatus, String, PublicKey)> = batch
            .iter()
            .map(|k| (k.status, k.id.clone(), k.key))
            .collect();
        let keys = self.trust.keys.clone();
        let internal = self.compile.internal.clone();
        let work = self.compile.shutdown.work();
        tokio::task::spawn_blocking(move || {
            let _work = work;
            let results = keys
                .put_many(&files)
                .into_iter()
                .map(|r| r.map_err(|e| e.to_string()))
                .collect();
            let _ = internal.send(Internal::KeysWritten { batch, results });
        });
    }

    /// Answers the Hellos whose key files are now on disk.
    fn keys_written(&mut self, batch: Vec<NewKey>, results: Vec<Result<(), String>>) {
        self.trust.keys_in_flight = false;
        for (new, result) in batch.into_iter().zip(results) {
            if new.status == KeyStatus::Pending && self.trust.queued.get(&new.id) == Some(&new.key)
            {
                self.trust.queued.remove(&new.id);
            }
            if new.status == KeyStatus::Accepted {
                let Some((key, routing, hello, caller)) = self.trust.accepting.remove(&new.id)
                else {
                    continue;
                };
                match result {
                    Ok(()) => {
                        tracing::info!(id = %new.id, "new key accepted (auto_accept)");
                        self.trust.accepted.insert(new.id.clone(), key);
                        self.welcome(routing, &hello, caller);
                    }
                    Err(e) => tracing::error!(id = %new.id, error = %e, "cannot store a new key"),
                }
                continue;
            }
            match result {
                Ok(()) => self.answer_key(&new.routing, new.status, &new.id, &new.key, new.reason),
                Err(e) => {
                    tracing::error!(id = %new.id, error = %e, "cannot store a new key");
                    if new.status == KeyStatus::Pending {
                        self.trust.pending_keys = self.trust.pending_keys.saturating_sub(1);
                    }
                }
            }
        }
        self.flush_new_keys();
    }

    fn open_session(
        &mut self,
        routing: Bytes,
        id: String,
        key: PublicKey,
        cipher: SessionCipher,
        caller: bool,
    ) {
        // The key may have been removed between hello and confirm.
        if self.trust.accepted.get(&id) != Some(&key) {
            return;
        }
        let sid = cipher.session;
        if caller {
            // Beside the daemon's session, which keeps its jobs.
            let sids = self.wire.callers.entry(id.clone()).or_default();
            sids.push_back(sid);
            while sids.len() > MAX_CALLER_SESSIONS {
                if let Some(old) = sids.pop_front() {
                    self.wire.sessions.remove(&old);
                }
            }
        } else if let Some(old) = self.wire.by_id.insert(id.clone(), sid) {
            self.wire.sessions.remove(&old);
        }
        self.wire.sessions.insert(
            sid,
            Session {
                id: id.clone(),
                key,
                cipher,
                routing,
            },
        );
        let publish_key = self.signing.publisher.key_now();
        self.send_sealed(
            sid,
            &MasterMessage::Ready {
                publish_key,
                publish_port: Some(self.cfg.publish_port),
                batched_events: true,
                packed_events: true,
                packed_returns: true,
                zstd_returns: true,
            },
        );
        self.bus.fire(
            tags::AUTH,
            json!({"act": "accept", "id": id, "pub": key.to_hex(), "result": true}),
        );
        tracing::info!(%id, "minion authenticated");
    }

    fn on_request(&mut self, sid: u64, request: MinionRequest) -> Option<Received> {
        let id = self.wire.sessions.get(&sid)?.id.clone();
        match request {
            MinionRequest::Ping => self.send_sealed(sid, &MasterMessage::Pong),
            MinionRequest::Start { grains } => {
                if grains.is_object() {
                    // Written to the cache with the rest of the batch.
                    self.book.grains_to_store.push((id.clone(), grains.clone()));
                    self.book.grains.insert(id.clone(), grains);
                }
                let now = chrono::Local::now();
                let data = |tag: &str| {
                    json!({
                        "cmd": "_minion_event",
                        "data": format!("Minion {id} started at {}", now.format("%a %b %e %H:%M:%S %Y")),
                        "id": id, "pretag": null, "tag": tag, "ts": now.timestamp(),
                    })
                };
                self.bus.fire_with("minion_start", || data("minion_start"));
                let tag = tags::minion_start(&id);
                self.bus.fire_with(&tag, || data(&tag));
                self.send_sealed(sid, &MasterMessage::Pong);
                // After this batch's returns: a return the minion resent
                // with its Start means the job needs no redelivery.
                self.book.started.push(id.clone());
            }
            MinionRequest::Event { tag, data } => {
                self.event_counts.messages += 1;
                self.event_counts.events += 1;
                // A minion may speak for itself only (minion_events.rs).
                crate::minion_events::fire(&self.bus, &id, &tag, data);
            }
            MinionRequest::Events { events } => {
                self.event_counts.messages += 1;
                self.event_counts.events += events.len() as u64;
                for event in events {
                    crate::minion_events::fire_batched(&self.bus, &id, event);
                }
            }
            MinionRequest::Request { req, body } => self.on_minion_request(sid, &id, req, body),
            MinionRequest::RenderReply { call, result } => {
                // From any session of the minion asked: it may have
                // reconnected since the call was sent.
                match self.compile.render_calls.answer(call, &id, result) {
                    Answered::Taken => {}
                    Answered::WrongMinion => {
                        tracing::warn!(%id, call, "render-time answer from the wrong minion dropped")
                    }
                    Answered::Unknown => {
                        tracing::debug!(%id, call, "late or repeated render-time answer dropped")
                    }
                }
            }
            MinionRequest::Return(ret) => {
                self.return_counts.plain += 1;
                return self.on_return(&id, Received::plain(ret));
            }
            MinionRequest::PackedReturn(ret) => {
                self.return_counts.packed += 1;
                self.return_counts.zstd += u64::from(ret.zstd);
                return self.on_return(&id, Received::packed(ret));
            }
        }
        None
    }

    /// A return from minion `id` to commit (`None`: dropped, logged).
    fn on_return(&mut self, id: &str, mut received: Received) -> Option<Received> {
        let ret = &mut received.ret;
        if ret.id == id && ret.jid == halite_proto::jid::CALLER_JID {
            ret.jid = self.caller_job(ret)?;
        }
        if ret.id != id || !halite_proto::jid::is_jid(&ret.jid) {
            tracing::warn!(%id, claimed = %ret.id, "return for another minion or a malformed jid dropped");
            return None;
        }
        Some(received)
    }

    /// Gives the return of a minion's own call (`halite-call`, Salt's
    /// salt-call, jid `req`) a jid and stores its job as Salt's
    /// `store_job` does: target the minion's id, `glob`, the call's
    /// function and arguments. `None` (the return is dropped, the minion
    /// told nothing) when the job cache cannot store it.
    fn caller_job(&mut self, ret: &JobReturn) -> Option<String> {
        let jid = self.book.jids.next_jid();
        let job = Job {
            jid: jid.clone(),
            fun: ret.fun.clone(),
            arg: ret.fun_args.clone(),
            kwarg: Map::new(),
            tgt: ret.id.clone(),
            tgt_type: "glob".into(),
            user: "root".into(),
            minions: vec![ret.id.clone()],
            progress_unwatched: false,
        };
        match self.book.jobs.store_job(&job, &Map::new()) {
            Ok(()) => Some(jid),
            Err(e) => {
                tracing::error!(id = %ret.id, error = %e, "cannot store the job of a halite-call return");
                None
            }
        }
    }

    /// Commits the returns (on the writer thread), then acknowledges them,
    /// then fires their events ([`Master::returns_stored`]); the minions
    /// of the batch that announced themselves get their missed jobs after.
    ///
    /// What the job cache stores has the minion's gpg-decrypted secrets
    /// masked (`**********`); the event the CLI waits on carries the
    /// return as the minion sent it.
    fn commit_returns(&mut self, returns: Vec<(u64, Received)>) {
        let pillars = self.compile.compiler.pillar_cache();
        // Masked (decoded first when packed) on the writer thread.
        let secrets = returns
            .iter()
            .map(|(_, r)| pillars.and_then(|p| p.secrets(&r.ret.id)))
            .collect();
        let held_bytes = self.return_counts.hold(&returns);
        let batch = crate::return_writer::ToStore {
            returns,
            secrets,
            started: std::mem::take(&mut self.book.started),
            held_bytes,
        };
        let batch = match &self.book.writer {
            Some(writer) => match writer.store(batch) {
                Ok(()) => {
                    self.book.commits_pending += 1;
                    return;
                }
                Err(batch) => batch,
            },
            None => batch,
        };
        // No writer thread: committed here.
        let stored = crate::return_writer::store_here(&mut self.book.jobs, batch);
        self.returns_stored(stored);
    }

    /// Acknowledges the committed returns and fires their events (each
    /// once: a resent return is acknowledged again, its event not fired
    /// again), then redelivers the missed jobs of minions that started.
    fn returns_stored(&mut self, stored: crate::return_writer::Stored) {
        let crate::return_writer::Stored {
            returns,
            fresh,
            started,
            held_bytes,
            committed,
            ..
        } = stored;
        self.return_counts.release(returns.len(), held_bytes);
        match fresh {
            Ok(fresh) => self.acknowledge(returns, fresh, committed),
            // Not acknowledged: the minions keep them and resend.
            Err(e) => tracing::error!(error = %e, "cannot store returns; they will be resent"),
        }
        self.redeliver(&started);
    }

    /// Acknowledges committed returns and fires the events of the new ones.
    fn acknowledge(&mut self, returns: Vec<(u64, Received)>, fresh: Vec<bool>, committed: Instant) {
        for ((sid, received), fresh) in returns.into_iter().zip(fresh) {
            let Received {
                ret,
                packed,
                arrived,
                ..
            } = received;
            self.send_sealed(
                sid,
                &MasterMessage::Ack {
                    jid: ret.jid.clone(),
                },
            );
            let small = packed
                .as_ref()
                .is_some_and(|b| b.len() as u64 <= crate::return_writer::SMALL_RETURN_BYTES);
            self.return_counts.acked(arrived, committed, small);
            if !fresh {
                // A resend (the minion missed the first ack): acknowledged
                // again, its event already fired once.
                tracing::debug!(jid = %ret.jid, id = %ret.id, "return resent; its event is not fired again");
                continue;
            }
            let (user, finished, schedule) = match self.book.active.get_mut(&ret.jid) {
                Some(active) => {
                    active.returned.insert(ret.id.clone());
                    active.waiting.remove(&ret.id);
                    (
                        active.job.user.clone(),
                        active.waiting.is_empty(),
                        active.schedule.clone(),
                    )
                }
                None => ("root".to_string(), false, None),
            };
            if finished {
                self.book.active.remove(&ret.jid);
            }
            let tag = tags::job_ret(&ret.jid, &ret.id);
            // Built only when a subscriber wants it (a watching CLI, the
            // reactor, a state.event runner).
            // As stored unless masked: a masked return's event keeps its
            // bytes (the job cache holds the masked ones).
            let masked = self
                .compile
                .compiler
                .pillar_cache()
                .is_some_and(|p| p.secrets(&ret.id).is_some());
            let stored = (!masked).then(|| (ret.jid.clone(), ret.id.clone()));
            match packed {
                Some(bytes) => self.bus.fire_packed_return(
                    &tag,
                    stored.as_ref().map(|(j, i)| (j.as_str(), i.as_str())),
                    || (return_event(ret, user, schedule), bytes),
                ),
                None => self
                    .bus
                    .fire_with(&tag, || return_event(ret, user, schedule)),
            }
        }
    }

    fn handle_local(&mut self, body: LocalBody) -> LocalReply {
        match body {
            LocalBody::Publish {
                tgt,
                tgt_type,
                fun,
                arg,
                kwarg,
                user,
                ..
            } => self.publish(tgt, tgt_type, fun, arg, kwarg, user),
            LocalBody::KeysChanged { events } => {
                self.refresh_keys(true);
                for (tag, data) in events {
                    self.bus.fire(&tag, data);
                }
                LocalReply::Ok
            }
            LocalBody::FireEvent { tag, data } => crate::local_fire::fire(&self.bus, &tag, data),
            LocalBody::Active => {
                let mut out = Map::new();
                for (jid, a) in &self.book.active {
                    let running: Vec<&String> = a
                        .job
                        .minions
                        .iter()
                        .filter(|m| !a.returned.contains(*m))
                        .collect();
                    out.insert(
                        jid.clone(),
                        json!({
                            // Salt's `Arguments`: the job's `arg` as published,
                            // keyword arguments in their `__kwarg__` dict.
                            "Function": a.job.fun, "Arguments": a.job.salt_arg(), "Target": a.job.tgt,
                            "Target-type": a.job.tgt_type, "User": a.job.user,
                            "Returned": a.returned, "Running": running,
                            "StartTime": halite_proto::jid::jid_start_time(jid),
                        }),
                    );
                }
                LocalReply::Value(Value::Object(out))
            }
            LocalBody::Resolve { tgt, tgt_type } => match self.resolve(&tgt, &tgt_type) {
                Ok(ids) => LocalReply::Value(json!(ids)),
                Err(e) => LocalReply::Error(e),
            },
            LocalBody::Events { .. } => {
                LocalReply::Error("events are streamed by the connection task".into())
            }
            LocalBody::Stats => LocalReply::Value(json!({
                "bundles": self.compile.bundle_stats.snapshot(self.compile.in_flight.max()),
                "events": self.event_counts.snapshot(),
                "returns": self.return_counts.snapshot(),
                "bus": self.bus.snapshot(),
                "replies": self.reply_stats(),
                "redeliveries": self.redelivered.snapshot(),
                "requests": self.compile.requests,
                "id_form": id_form_value(&self.compile.compiler.id_form_stats()),
            })),
        }
    }

    /// The accepted minions `tgt` selects.
    fn resolve(&mut self, tgt: &str, tgt_type: &str) -> Result<Vec<String>, String> {
        self.refresh_keys(false);
        resolve_among(
            &self.trust.accepted,
            &self.book.grains,
            self.compile.compiler.pillar_cache(),
            &self.cfg.nodegroups,
            tgt,
            tgt_type,
        )
    }

    /// Answers minion `requester`'s mine request (crate::mine), targets
    /// resolved as jobs' are; `None` for a request that needs a compile.
    fn mine_answer(
        &mut self,
        requester: &str,
        request: MineRequest,
    ) -> Option<Result<Value, String>> {
        self.refresh_keys(false);
        let (accepted, grains, compiler, nodegroups) = (
            &self.trust.accepted,
            &self.book.grains,
            &self.compile.compiler,
            &self.cfg.nodegroups,
        );
        self.mine.answer(requester, request, |tgt, tgt_type| {
            resolve_among(
                accepted,
                grains,
                compiler.pillar_cache(),
                nodegroups,
                tgt,
                tgt_type,
            )
        })
    }

    fn publish(
        &mut self,
        tgt: String,
        tgt_type: String,
        fun: String,
        arg: Vec<Value>,
        kwarg: Map<String, Value>,
        user: String,
    ) -> LocalReply {
        let minions = match self.resolve(&tgt, &tgt_type) {
            Ok(m) => m,
            Err(e) => return LocalReply::Error(e),
        };
        if minions.is_empty() {
            // Salt: "No command was sent, no jid was assigned."
            return LocalReply::Started {
                jid: String::new(),
                minions,
            };
        }
        let jid = self.book.jids.next_jid();
        let progress_unwatched = !self.progress_watched(&jid, &minions);
        let job = Job {
            jid: jid.clone(),
            fun,
            arg,
            kwarg,
            tgt,
            tgt_type,
            user,
            minions: minions.clone(),
            progress_unwatched,
        };
        if let Err(e) = crate::job_load::store(&self.book.jobs, &job) {
            return LocalReply::Error(e.to_string());
        }
        self.bus.fire(
            &tags::job_new(&jid),
            json!({"arg": job.salt_arg(), "fun": job.fun, "jid": jid, "minions": minions, "missing": [], "tgt": job.tgt, "tgt_type": job.tgt_type, "user": job.user}),
        );
        if !minions.is_empty() {
            if let Err(e) = self.send_publication(&job) {
                return LocalReply::Error(e);
            }
            self.book
                .active
                .insert(jid.clone(), ActiveJob::new(job, None));
        }
        LocalReply::Started { jid, minions }
    }
}

impl Master {
    /// Whether a subscriber of the bus wants the progress events of job
    /// `jid` on any of `minions` now, as it is published (a `halite`
    /// drawing bars subscribes before it publishes; `state.event`, the
    /// API's stream and the reactor subscribe when they start). Each
    /// minion's first event, `salt/job/<jid>/prog/<id>/0`, stands for its
    /// job's: a subscription that wants only later run numbers of a job
    /// is not seen (docs/master-minion.md, "Live progress").
    fn progress_watched(&self, jid: &str, minions: &[String]) -> bool {
        minions
            .iter()
            .any(|id| self.bus.wants(&tags::job_prog(jid, id, 0)))
    }

    /// Encrypts, signs and publishes `job`.
    fn send_publication(&mut self, job: &Job) -> Result<(), String> {
        let bytes = encode(job)
            .map_err(|e| e.to_string())
            .and_then(|payload| {
                self.signing
                    .publisher
                    .seal(&self.signing.identity, &payload)
                    .map_err(|e| e.to_string())
            })
            .and_then(|publication| encode(&publication).map_err(|e| e.to_string()))?;
        self.wire
            .publications
            .publish_now(bytes)
            .map_err(|e| format!("publish failed: {e}"))
    }

    /// Minions (re)started (one batch's, `started`): the jobs published
    /// to them while they were away, still waiting for their return and
    /// younger than `timeout`, are published again for them alone (a
    /// minion skips jids it already ran), one publication per job for all
    /// of them, less the questions about the moment of publication that
    /// are not owed (crate::redelivery).
    fn redeliver(&mut self, started: &[String]) {
        let window = Duration::from_secs(self.cfg.timeout.max(1));
        let crate::redelivery::Missed { jobs, not_owed } = crate::redelivery::missed(
            self.book
                .active
                .values()
                .map(|a| crate::redelivery::Waiting {
                    job: &a.job,
                    waiting: &a.waiting,
                    started: a.started,
                }),
            started,
            window,
        );
        self.redelivered.not_owed += not_owed;
        for job in jobs {
            match self.send_publication(&job) {
                Ok(()) => {
                    self.redelivered.count(&job);
                    let what = if job.minions.len() == 1 {
                        "job redelivered to a minion that came back"
                    } else {
                        "job redelivered to minions that came back"
                    };
                    let first = job.minions.first().map_or("", String::as_str);
                    tracing::info!(jid = %job.jid, minions = job.minions.len(), first, "{what}")
                }
                Err(e) => {
                    tracing::warn!(jid = %job.jid, minions = job.minions.len(), error = %e, "cannot redeliver a job")
                }
            }
        }
    }
}

/// Local requests answered in-process, for the reactor's worker threads
/// (blocking: never called from the async runtime).
fn in_process(commands: mpsc::Sender<LocalCommand>) -> crate::reactor::LocalCall {
    Arc::new(move |body| {
        let (reply, answer) = oneshot::channel();
        commands.blocking_send(LocalCommand { body, reply }).ok()?;
        answer.blocking_recv().ok()
    })
}

/// The ids among `accepted` that `tgt` selects, from their cached grains
/// and pillars.
fn resolve_among(
    accepted: &HashMap<String, PublicKey>,
    grains: &HashMap<String, Value>,
    pillar_cache: Option<&crate::pillar_cache::PillarCache>,
    nodegroups: &std::collections::BTreeMap<String, Value>,
    tgt: &str,
    tgt_type: &str,
) -> Result<Vec<String>, String> {
    // A glob without a metacharacter names one minion (fnmatch of a
    // literal is equality): looked up, not matched against every accepted
    // id (issue 25, session 26: a `halite web1 test.ping` during a
    // 10,000-minion highstate sorted and scanned all of them, 13% of the
    // master's CPU).
    if tgt_type == "glob" && !halite_salt_rules::fnmatch::is_pattern(tgt) {
        return Ok(accepted
            .get_key_value(tgt)
            .map(|(id, _)| id.clone())
            .into_iter()
            .collect());
    }
    let mut ids: Vec<&String> = accepted.keys().collect();
    ids.sort();
    let pillars = pillar_cache.map(|c| c.read());
    let facts: Vec<MinionFacts> = ids
        .iter()
        .map(|id| MinionFacts {
            id,
            grains: grains.get(*id),
            pillar: pillars.as_ref().and_then(|p| p.get(*id)),
        })
        .collect();
    check_minions(tgt, tgt_type, &facts, nodegroups).map_err(|e| e.to_string())
}

/// The local socket's mode: root's alone (0600), or, with `publisher_acl`
/// configured, connectable by every local user (0666; each request is then
/// authorised by the peer's uid, `crate::publisher_acl`), with `sock_dir`
/// traversable by them (Salt opens `cachedir` likewise for its key files).
fn open_socket_to_publishers(
    cfg: &MasterConfig,
    socket: &Path,
    publishers: bool,
) -> anyhow::Result<()> {
    let mode = if publishers { 0o666 } else { 0o600 };
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot chmod {}", socket.display()))?;
    if publishers {
        let current = std::fs::metadata(&cfg.sock_dir)
            .with_context(|| format!("cannot stat {}", cfg.sock_dir.display()))?
            .permissions()
            .mode();
        if current & 0o001 == 0 {
            std::fs::set_permissions(
                &cfg.sock_dir,
                std::fs::Permissions::from_mode((current & 0o7777) | 0o001),
            )
            .with_context(|| {
                format!(
                    "cannot let publisher_acl users reach {}",
                    cfg.sock_dir.display()
                )
            })?;
        }
        tracing::info!(socket = %socket.display(), "publisher_acl is set: local users it names may publish");
    }
    Ok(())
}

/// Accepts CLI connections until the shutdown is triggered.
async fn accept_local(
    listener: UnixListener,
    root_key: Arc<String>,
    local_acl: Arc<crate::publisher_acl::LocalAcl>,
    commands: mpsc::Sender<LocalCommand>,
    bus: EventBus,
    shutdown: Shutdown,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.triggered() => return,
        };
        let Ok((stream, _)) = accepted else {
            continue;
        };
        // The kernel's word on who connected (SO_PEERCRED).
        let uid = stream.peer_cred().ok().map(|c| c.uid());
        tokio::spawn(serve_local(
            stream,
            uid,
            root_key.clone(),
            local_acl.clone(),
            commands.clone(),
            bus.clone(),
        ));
    }
}

async fn read_local(stream: &mut UnixStream) -> Option<LocalRequest> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await.ok()?;
    let len = u32::from_be_bytes(len) as usize;
    if len > halite_proto::MAX_FRAME_BYTES {
        return None;
    }
    let mut buf = vec![0u8; len];
    stream.read_exact(&mut buf).await.ok()?;
    decode(&buf).ok()
}

async fn write_local(stream: &mut UnixStream, reply: &LocalReply) -> bool {
    let Ok(bytes) = encode(reply) else {
        return false;
    };
    let mut framed = (bytes.len() as u32).to_be_bytes().to_vec();
    framed.extend_from_slice(&bytes);
    stream.write_all(&framed).await.is_ok()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Asks the master's state task for the ids `tgt` selects.
async fn resolve_local(
    commands: &mpsc::Sender<LocalCommand>,
    tgt: &str,
    tgt_type: &str,
) -> Result<BTreeSet<String>, String> {
    let (tx, reply) = oneshot::channel();
    commands
        .send(LocalCommand {
            body: LocalBody::Resolve {
                tgt: tgt.to_string(),
                tgt_type: tgt_type.to_string(),
            },
            reply: tx,
        })
        .await
        .map_err(|_| "the master is shutting down".to_string())?;
    match reply.await {
        Ok(LocalReply::Value(v)) => Ok(serde_json::from_value(v).unwrap_or_default()),
        Ok(LocalReply::Error(e)) => Err(e),
        _ => Err("the master is shutting down".into()),
    }
}

/// Authorises one request of `principal` (see `crate::publisher_acl`):
/// root passes; a publisher's publication must be granted by its list on
/// every minion it targets, and carries the publisher's own name as the
/// job's `user`.
async fn authorize_local(
    principal: &crate::publisher_acl::Principal,
    local_acl: &crate::publisher_acl::LocalAcl,
    commands: &mpsc::Sender<LocalCommand>,
    body: &mut LocalBody,
) -> Result<(), crate::publisher_acl::Refusal> {
    let crate::publisher_acl::Principal::Publisher { user, list, .. } = principal else {
        return Ok(());
    };
    local_acl.precheck(user, body)?;
    let LocalBody::Publish {
        tgt,
        tgt_type,
        fun,
        arg,
        kwarg,
        user: job_user,
        ..
    } = body
    else {
        return Ok(());
    };
    *job_user = user.clone();
    let failed = |e: String| crate::publisher_acl::Refusal {
        user: user.clone(),
        what: format!("{fun} on {tgt}"),
        reason: format!("the target could not be resolved: {e}"),
        message: e,
    };
    let named = halite_acl::targets_named(list);
    let (targeted, mut resolved) = (
        if named.is_empty() {
            BTreeSet::new()
        } else {
            resolve_local(commands, tgt, tgt_type)
                .await
                .map_err(failed)?
        },
        HashMap::new(),
    );
    for valid in named {
        let ids = resolve_local(commands, &valid, "compound")
            .await
            .map_err(failed)?;
        resolved.insert(valid, ids);
    }
    let call = halite_acl::Call {
        fun,
        args: arg,
        kwargs: Some(kwarg),
    };
    crate::publisher_acl::LocalAcl::authorize_publish(user, list, &call, tgt, &targeted, &resolved)
}

#[allow(clippy::too_many_arguments, reason = "one connection's context")]
async fn serve_local(
    mut stream: UnixStream,
    uid: Option<u32>,
    root_key: Arc<String>,
    local_acl: Arc<crate::publisher_acl::LocalAcl>,
    commands: mpsc::Sender<LocalCommand>,
    bus: EventBus,
) {
    while let Some(mut request) = read_local(&mut stream).await {
        // No key: a client that cannot read it (a publisher_acl user).
        let key = (!request.key.is_empty())
            .then(|| constant_time_eq(request.key.as_bytes(), root_key.as_bytes()));
        let checked = match local_acl.identify(key, uid) {
            Ok(principal) => {
                authorize_local(&principal, &local_acl, &commands, &mut request.body).await
            }
            Err(refusal) => Err(refusal),
        };
        if let Err(refusal) = checked {
            tracing::warn!(
                user = %refusal.user,
                uid,
                what = %refusal.what,
                reason = %refusal.reason,
                "refused a local client"
            );
            bus.fire(crate::publisher_acl::REFUSAL_TAG, refusal.event(uid));
            write_local(&mut stream, &LocalReply::Error(refusal.message)).await;
            return;
        }
        match request.body {
            LocalBody::Events { tagmatch } => {
                let mut rx = bus.subscribe(Interest::TagMatch(tagmatch));
                stream_events(&mut stream, &mut rx, false).await;
                return;
            }
            LocalBody::Publish {
                watch: true,
                progress,
                ..
            } => {
                // Subscribe before publishing so no return can be missed:
                // to every job's until the jid is known (over-wanting for
                // that moment builds a few events for nobody; never misses).
                let mut rx = bus.subscribe(watch_interest("*", progress));
                let (tx, reply) = oneshot::channel();
                if commands
                    .send(LocalCommand {
                        body: request.body,
                        reply: tx,
                    })
                    .await
                    .is_err()
                {
                    return;
                }
                let Ok(reply) = reply.await else { return };
                let jid = match &reply {
                    LocalReply::Started { jid, .. } => jid.clone(),
                    _ => String::new(),
                };
                if !write_local(&mut stream, &reply).await || jid.is_empty() {
                    return;
                }
                // The returns, and the prog events a CLI that draws
                // progress asked for.
                rx.set_interest(watch_interest(&jid, progress));
                stream_events(&mut stream, &mut rx, true).await;
                return;
            }
            body => {
                let (tx, reply) = oneshot::channel();
                if commands
                    .send(LocalCommand { body, reply: tx })
                    .await
                    .is_err()
                {
                    return;
                }
                let Ok(reply) = reply.await else { return };
                if !write_local(&mut stream, &reply).await {
                    return;
                }
            }
        }
    }
}

/// How many bytes of events a local subscriber is sent in one write at
/// most (the events ready at once go together: a fleet's progress is
/// thousands of events a second).
const STREAM_WRITE_BYTES: usize = 256 * 1024;

/// A bus event as the [`LocalReply`] a local client reads, encoded from
/// the shared event without copying its data (a 1,000-state return).
/// Its encoding is [`LocalReply::Return`]'s or [`LocalReply::Event`]'s
/// (tested below).
/// `D` is the data ([`crate::events::WireData`]), or `()` for the head of
/// a frame whose data is spliced after it ([`write_streamed_frame`]).
#[derive(serde::Serialize)]
enum StreamedReply<'a, D> {
    Return { id: &'a str, data: D },
    Event { tag: &'a str, data: D },
}

impl<'a> StreamedReply<'a, ()> {
    /// The same reply with `data` in place of the unit.
    fn with<D>(&self, data: D) -> StreamedReply<'a, D> {
        match *self {
            StreamedReply::Return { id, .. } => StreamedReply::Return { id, data },
            StreamedReply::Event { tag, .. } => StreamedReply::Event { tag, data },
        }
    }
}

/// The frame of `head` carrying `event`'s data: encoded whole, or, for a
/// packed return (issue 25), the head encoded with its data left as nil
/// (the data is the last thing encoded, so it is the last byte), then the
/// data with the return's checked bytes spliced in
/// ([`crate::events::BusEvent::write_msgpack`]). The same bytes either way
/// (tested below). Appended to `out` (left as it was on an error): the
/// watching CLI's stream encodes each return in place, not in a buffer of
/// its own copied after (issue 25: a 1,000-state return per minion).
fn write_streamed_frame(
    out: &mut Vec<u8>,
    head: StreamedReply<'_, ()>,
    event: &crate::events::BusEvent,
) -> Result<(), halite_proto::FrameError> {
    let start = out.len();
    let written = write_frame_body(out, head, event);
    let size = out.len() - start;
    match written {
        Ok(()) if size > halite_proto::MAX_FRAME_BYTES => {
            out.truncate(start);
            Err(halite_proto::FrameError::TooLarge {
                size,
                max: halite_proto::MAX_FRAME_BYTES,
            })
        }
        Ok(()) => Ok(()),
        Err(e) => {
            out.truncate(start);
            Err(halite_proto::FrameError::Encode(e.to_string()))
        }
    }
}

/// [`write_streamed_frame`] without its size's check.
fn write_frame_body(
    out: &mut Vec<u8>,
    head: StreamedReply<'_, ()>,
    event: &crate::events::BusEvent,
) -> Result<(), rmp_serde::encode::Error> {
    if !event.has_packed_return() {
        return rmp_serde::encode::write_named(out, &head.with(event.wire()));
    }
    let start = out.len();
    rmp_serde::encode::write_named(out, &head)?;
    if out.pop() != Some(0xc0) {
        // Not the layout spliced frames rely on: encode it whole.
        out.truncate(start);
        return rmp_serde::encode::write_named(out, &head.with(event.wire()));
    }
    event.write_msgpack(out)
}

/// Appends `event`, framed as [`write_local`] frames it, to `out` when
/// `wanted`; `as_returns`: `salt/job/<jid>/ret/<id>` events go out as
/// [`LocalReply::Return`].
fn frame_event(
    out: &mut Vec<u8>,
    event: &crate::events::BusEvent,
    wanted: &impl Fn(&str) -> bool,
    as_returns: bool,
) {
    if !wanted(&event.tag) {
        return;
    }
    // The id comes from the tag's own segment (only the master fires returns).
    let ret_of = match tags::parse(&event.tag) {
        tags::Tag::JobRet { minion, .. } if as_returns => Some(minion),
        _ => None,
    };
    let head = match ret_of {
        Some(id) => StreamedReply::Return { id, data: () },
        None => StreamedReply::Event {
            tag: &event.tag,
            data: (),
        },
    };
    // The length first, filled in once the frame is written.
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    match write_streamed_frame(out, head, event) {
        Ok(()) => {
            let len = (out.len() - at - 4) as u32;
            out[at..at + 4].copy_from_slice(&len.to_be_bytes());
        }
        Err(e) => {
            out.truncate(at);
            tracing::warn!(tag = %event.tag, error = %e, "an event could not be sent to a local client")
        }
    }
}

/// [`frame_event`] for a local client's stream; an event whose return is
/// read back from the job cache (crate::spill: a SQLite read and a zstd
/// frame of some hundred KB) is framed on the blocking pool, so that
/// a slow watcher's read-backs never hold one of the runtime's workers,
/// which the master's sockets need (issue 25, session 20).
async fn frame_event_off_worker(
    out: &mut Vec<u8>,
    event: Arc<crate::events::BusEvent>,
    interest: &Arc<Interest>,
    as_returns: bool,
) {
    if !event.is_spilled() || !interest.matches(&event.tag) {
        frame_event(out, &event, &|tag| interest.matches(tag), as_returns);
        return;
    }
    let interest = interest.clone();
    let framed = tokio::task::spawn_blocking(move || {
        let mut framed = Vec::new();
        frame_event(
            &mut framed,
            &event,
            &|tag| interest.matches(tag),
            as_returns,
        );
        framed
    })
    .await;
    match framed {
        Ok(framed) => out.extend_from_slice(&framed),
        Err(e) => {
            tracing::warn!(error = %e, "a spilled return could not be read back for a local client")
        }
    }
}

/// What a CLI watching job `jid` wants: its returns, and its progress
/// events when it draws progress. `jid` `*`: every job's, before the jid
/// is known.
fn watch_interest(jid: &str, progress: bool) -> Interest {
    if jid == "*" {
        let mut globs = vec![tags::job_ret("*", "*")];
        if progress {
            globs.push("salt/job/*/prog/*".to_string());
        }
        return Interest::Globs(globs);
    }
    let mut prefixes = vec![format!("salt/job/{jid}/ret/")];
    if progress {
        prefixes.push(format!("salt/job/{jid}/prog/"));
    }
    Interest::Prefixes(prefixes)
}

/// Streams the events `rx` wants to a local client until it closes its end.
async fn stream_events(
    stream: &mut UnixStream,
    rx: &mut Subscription,
    // Whether `salt/job/<jid>/ret/<id>` events go out as `LocalReply::Return`.
    as_returns: bool,
) {
    use tokio::sync::broadcast::error::{RecvError, TryRecvError};
    // The bus delivers what any subscriber wanted; this one keeps its own.
    let interest = Arc::new(rx.interest().clone());
    let mut probe = [0u8; 1];
    let mut out = Vec::new();
    loop {
        tokio::select! {
            event = rx.recv() => {
                let mut closed = false;
                match event {
                    Ok(event) => frame_event_off_worker(&mut out, event, &interest, as_returns).await,
                    Err(RecvError::Lagged(n)) => tracing::warn!(missed = n, "a local subscriber fell behind"),
                    Err(RecvError::Closed) => return,
                }
                // The events already waiting go in the same write.
                while out.len() < STREAM_WRITE_BYTES {
                    match rx.try_recv() {
                        Ok(event) => frame_event_off_worker(&mut out, event, &interest, as_returns).await,
                        Err(TryRecvError::Lagged(n)) => tracing::warn!(missed = n, "a local subscriber fell behind"),
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Closed) => {
                            closed = true;
                            break;
                        }
                    }
                }
                if !out.is_empty() {
                    if stream.write_all(&out).await.is_err() {
                        return;
                    }
                    out.clear();
                }
                if closed {
                    return;
                }
            },
            // The client closing its end ends the stream.
            read = stream.read(&mut probe) => if matches!(read, Ok(0) | Err(_)) { return },
        }
    }
}

/// The compile per id form's counters as `master.stats` shows them.
fn id_form_value(s: &halite_state::id_memo::IdFormStats) -> Value {
    json!({
        "hits": s.hits,
        "compared": s.compared,
        "through_render": s.through_render,
        "compiled": s.compiled,
        "first_seen": s.first_seen,
        "refused": s.refused,
    })
}

/// Queues `msg` for the peer `routing`. A reply the send queue has no room
/// for is dropped and counted, not logged here: the router reports the
/// drops at most every ten seconds (a slow or hostile peer, or a flood of
/// replies, must not fill the log with a line per reply).
fn queue_reply(to_router: &RouterSender, routing: &Bytes, msg: &ToMinion) {
    match encode(msg) {
        Ok(bytes) => {
            if !to_router.try_send(routing.clone(), bytes) {
                tracing::trace!("send queue full; a reply was dropped");
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot encode a reply"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A glob without a metacharacter is looked up among the accepted
    /// minions, and selects exactly what matching it against every id
    /// selects (`check_minions`' scan): case, whitespace and dots included.
    #[test]
    fn a_literal_glob_target_selects_what_the_scan_selects() {
        let key = PublicKey::from_slice(&[7u8; 32]).unwrap();
        let ids = ["web1", "web10", "db1", "a]b", "x.y", "probe-0"];
        let accepted: HashMap<String, PublicKey> =
            ids.iter().map(|id| (id.to_string(), key)).collect();
        let grains = HashMap::new();
        let nodegroups = BTreeMap::new();
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        let facts: Vec<crate::targeting::MinionFacts> = sorted
            .iter()
            .map(|id| crate::targeting::MinionFacts {
                id,
                grains: None,
                pillar: None,
            })
            .collect();
        for tgt in [
            "web1", "web", "nope", "", "x.y", "X.Y", "xay", "web1 ", "a]b", "probe-0", "web*",
            "web?", "web[0-9]", "*",
        ] {
            let looked_up = resolve_among(&accepted, &grains, None, &nodegroups, tgt, "glob");
            let scanned = crate::targeting::check_minions(tgt, "glob", &facts, &nodegroups)
                .map_err(|e| e.to_string());
            assert_eq!(looked_up, scanned, "target {tgt:?}");
        }
        assert_eq!(
            resolve_among(&accepted, &grains, None, &nodegroups, "web1", "glob").unwrap(),
            ["web1"]
        );
    }

    #[test]
    fn a_flood_of_replies_the_send_queue_cannot_hold_logs_one_summary_not_a_line_each() {
        let log = halite_test_support::SharedBuffer::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tracing::subscriber::with_default(subscriber, || {
            let router = rt
                .block_on(Router::bind("tcp://127.0.0.1:0"))
                .expect("a ROUTER on loopback");
            let to_router = router.sender();
            // One thread: the router's send task does not run while this
            // loop floods its queue, so every reply past its room is dropped.
            let peer = Bytes::from_static(b"a-peer-that-never-reads");
            let reply = ToMinion::UnknownSession { session: 7 };
            for _ in 0..100_000 {
                queue_reply(&to_router, &peer, &reply);
            }
            let dropped = to_router
                .counts()
                .dropped
                .load(std::sync::atomic::Ordering::Relaxed);
            assert!(
                dropped > 30_000,
                "the flood must overflow the queue: {dropped}"
            );
            assert_eq!(
                log.lines_with(" WARN ").len(),
                0,
                "no line per dropped reply"
            );
            // The router reports them, once, as soon as its task runs.
            let summary = "replies to minions dropped";
            rt.block_on(async {
                for _ in 0..3000 {
                    if !log.lines_with(summary).is_empty() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            });
            let lines = log.lines_with(" WARN ");
            assert_eq!(lines.len(), 1, "{lines:?}");
            assert!(
                lines[0].contains(summary) && lines[0].contains(&format!("dropped={dropped}")),
                "{lines:?}"
            );
            drop(router);
        });
    }

    #[test]
    fn a_reply_too_large_for_a_frame_becomes_an_error_the_minion_reads() {
        // Under the frame limit, but without the room sealing needs.
        let huge = ReplyBody::Error("x".repeat(halite_proto::MAX_FRAME_BYTES - 2000));
        let plain = reply_frame(7, huge).unwrap();
        let MasterMessage::Reply { req, body } = decode(&plain).unwrap() else {
            panic!("not a reply");
        };
        assert_eq!(req, 7);
        let ReplyBody::Error(why) = body else {
            panic!("not an error");
        };
        assert!(why.contains("message limit"), "{why}");
        let small = reply_frame(8, ReplyBody::Error("fine".into())).unwrap();
        assert!(matches!(
            decode(&small).unwrap(),
            MasterMessage::Reply { req: 8, body: ReplyBody::Error(ref e) } if e == "fine"
        ));
    }

    #[test]
    fn streamed_events_read_as_the_local_replies_they_stand_for() {
        let data = json!({"return": {"a": [1, 2.5, "x", null]}, "retcode": 0});
        let jid = "20260101000000000001";
        let wanted = |_: &str| true;
        let mut out = Vec::new();
        for tag in [
            format!("salt/job/{jid}/ret/web1"),
            format!("salt/job/{jid}/prog/web1/3"),
        ] {
            let event = crate::events::BusEvent::new(tag.clone(), data.clone());
            frame_event(&mut out, &event, &wanted, true);
        }
        frame_event(
            &mut out,
            &crate::events::BusEvent::new("unwanted".into(), data.clone()),
            &|tag: &str| tag != "unwanted",
            true,
        );
        let mut frames = Vec::new();
        let mut rest = &out[..];
        while !rest.is_empty() {
            let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            frames.push(decode::<LocalReply>(&rest[4..4 + len]).expect("a LocalReply"));
            rest = &rest[4 + len..];
        }
        assert_eq!(frames.len(), 2, "the unwanted event is not sent");
        assert!(
            matches!(&frames[0], LocalReply::Return { id, data: d } if id == "web1" && *d == data),
            "{:?}",
            frames[0]
        );
        assert!(
            matches!(&frames[1], LocalReply::Event { tag, data: d } if tag.ends_with("/prog/web1/3") && *d == data),
            "{:?}",
            frames[1]
        );
    }

    #[test]
    fn a_spliced_return_frame_is_the_transcoded_one_byte_for_byte() {
        let bus = crate::events::EventBus::new(8);
        let mut rx = bus.subscribe(Interest::All);
        let jid = "20260101000000000001";
        let value = json!({"test_|-a_|-/tmp/x_|-managed": {
            "duration": 0.1 + 0.2, "tiny": 1.5e-300, "big": u64::MAX, "neg": i64::MIN,
            "comment": "Succès ✓ \u{1F600}", "changes": {"diff": {"nested": [{"k": null}, true, "x".repeat(300)]}},
            "__run_num__": 65_536}});
        let head = json!({"cmd": "_return", "id": "web1", "jid": jid, "return": null,
            "retcode": 0, "success": true, "fun_args": ["é", 2.5, {"a": [1]}]});
        let bytes = Arc::new(halite_proto::packed::pack(&value).unwrap());
        bus.fire_packed_return(&tags::job_ret(jid, "web1"), None, || (head.clone(), bytes));
        bus.fire_packed_return(&tags::job_prog(jid, "web1", 3), None, || {
            (
                head.clone(),
                Arc::new(halite_proto::packed::pack(&json!("a string return")).unwrap()),
            )
        });
        for event in [rx.try_recv().unwrap(), rx.try_recv().unwrap()] {
            assert!(event.has_packed_return());
            for as_returns in [true, false] {
                let mut spliced = Vec::new();
                frame_event(&mut spliced, &event, &|_: &str| true, as_returns);
                // The frame as it was written before: the whole reply
                // encoded, its return transcoded.
                let head = match tags::parse(&event.tag) {
                    tags::Tag::JobRet { minion, .. } if as_returns => StreamedReply::Return {
                        id: minion,
                        data: event.wire(),
                    },
                    _ => StreamedReply::Event {
                        tag: &event.tag,
                        data: event.wire(),
                    },
                };
                let transcoded = encode(&head).unwrap();
                assert_eq!(spliced[4..], transcoded[..], "{} {as_returns}", event.tag);
                assert_eq!(
                    u32::from_be_bytes(spliced[..4].try_into().unwrap()) as usize,
                    transcoded.len()
                );
                match decode::<LocalReply>(&spliced[4..]).unwrap() {
                    LocalReply::Return { id, data } => {
                        assert!(as_returns);
                        assert_eq!(id, "web1");
                        assert_eq!(data["return"], value);
                        assert_eq!(data["fun_args"], head_args());
                    }
                    LocalReply::Event { tag, data } => {
                        assert_eq!(tag, event.tag);
                        assert_eq!(data["retcode"], 0);
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
    }

    fn head_args() -> Value {
        json!(["é", 2.5, {"a": [1]}])
    }

    #[test]
    fn a_return_event_has_salts_keys() {
        let ret = JobReturn {
            jid: "20260101000000000001".into(),
            id: "web1".into(),
            fun: "test.arg".into(),
            fun_args: vec![json!("a")],
            ret: json!({"k": 1}),
            retcode: 0,
            success: true,
        };
        let data = return_event(ret, "root".into(), Some("nightly".into()));
        let mut keys: Vec<&str> = data
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "cmd", "fun", "fun_args", "id", "jid", "retcode", "return", "schedule", "success",
                "ts", "user"
            ]
        );
        assert_eq!(data["return"], json!({"k": 1}));
        assert_eq!(data["cmd"], "_return");
    }
}
