//! One connection to one master (a DEALER for requests, a SUB for
//! publications) carrying one or more minion identities: one for a real
//! minion, many for the swarm. Each identity authenticates on its own and
//! has its own session; publications are verified (master signature) and
//! decrypted once per link.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use halite_modules::host::EventSink;
use halite_proto::crypto::{MinionHandshake, PublicationOpener, SessionCipher};
use halite_proto::msg::{
    Job, JobReturn, KeyStatus, MasterMessage, MinionRequest, PackedReturn, Publication, ToMaster,
    ToMinion,
};
use halite_proto::{decode, encode, Identity, PublicKey};
use halite_transport::{Dealer, Shutdown, Subscriber};
use serde_json::Value;
use tokio::sync::{mpsc, Semaphore};

use crate::channel::{JobRequest, MasterChannel};
use crate::replay::ReplayGuard;
use crate::runner::JobRunner;
use crate::running::{LocalJob, RunningJob, RunningJobs};
use crate::store::ReturnStore;

pub mod call;
mod events;
mod handshake;
mod jobs;
mod kept_calls;
pub mod returns;
mod waiting;

pub use waiting::resend_after;

/// One minion identity: who it is, its grains, its unacknowledged returns.
pub struct Agent {
    /// This minion's id.
    pub id: String,
    /// Its identity key pair.
    pub identity: Identity,
    /// Its grains, sent when a session opens.
    pub grains: Value,
    /// Returns kept until the master acknowledges them.
    pub store: ReturnStore,
    phase: Phase,
    seen_jids: VecDeque<String>,
    /// Jobs this identity runs now, for `saltutil.find_job`/`running`/`kill_job`.
    running: RunningJobs,
    /// Jobs the minion started by itself while this identity had no
    /// session; they start once it has one.
    deferred: VecDeque<LocalJob>,
    /// Whether this identity has a session now, for the minion's own
    /// jobs to pick a link that can take them (hot multi-master).
    ready_flag: Arc<AtomicBool>,
    /// When this identity's next `mine.update` is due (crate::mine).
    mine_due: Option<Instant>,
    /// Whether its first `mine.update` has run: that one waits for the
    /// start-up pillar (crate::mine::FIRST_UPDATE_WAIT).
    mine_started: bool,
    /// Whether the master of its session reads batched events
    /// (`Ready`'s `batched_events`; link/events.rs).
    batched_events: bool,
    /// Whether it reads batched events' data packed (`Ready`'s
    /// `packed_events`; link/events.rs).
    packed_events: bool,
    /// Whether it reads returns packed (`Ready`'s `packed_returns`;
    /// link/returns.rs).
    packed_returns: bool,
    /// Whether it reads a packed return's value as a zstd frame and
    /// stores it so (`Ready`'s `zstd_returns`; link/returns.rs).
    zstd_returns: bool,
    /// Its answers to the master's render-time calls, so a repeated call
    /// is not run twice (link/kept_calls.rs); kept across reconnections.
    kept_calls: kept_calls::KeptCalls,
    /// When each return waiting for its acknowledgement was last sent on
    /// this session (link/returns.rs): the periodic resend skips a return
    /// sent less than `request_channel_timeout` ago.
    returns_sent: returns::SentReturns,
}

/// Jobs started by the minion itself wait this many at most for a session.
const DEFERRED_LOCAL_JOBS: usize = 64;

enum Phase {
    Idle {
        next_try: Instant,
    },
    Handshaking {
        state: Option<MinionHandshake>,
        since: Instant,
    },
    Confirming {
        cipher: SessionCipher,
        since: Instant,
    },
    Ready {
        cipher: SessionCipher,
        last_heard: Instant,
        last_ping: Instant,
        last_resend: Instant,
    },
}

impl Agent {
    /// An identity that will authenticate on the next link.
    pub fn new(id: String, identity: Identity, grains: Value, store: ReturnStore) -> Self {
        Self {
            id,
            identity,
            grains,
            store,
            phase: Phase::Idle {
                next_try: Instant::now(),
            },
            seen_jids: VecDeque::new(),
            running: RunningJobs::default(),
            deferred: VecDeque::new(),
            ready_flag: Arc::new(AtomicBool::new(false)),
            mine_due: None,
            mine_started: false,
            batched_events: false,
            packed_events: false,
            packed_returns: false,
            zstd_returns: false,
            kept_calls: Default::default(),
            returns_sent: Default::default(),
        }
    }

    /// The same identity recording its jobs in `running`: a hot
    /// multi-master minion's links share one list, as Salt's proc
    /// directory is one per minion whichever master sent the job.
    pub fn with_running(mut self, running: RunningJobs) -> Self {
        self.running = running;
        self
    }

    /// Remembers `jid` as run by this process (the last 256 jids): a job
    /// delivered again is not run twice.
    fn mark_seen(&mut self, jid: &str) {
        if self.seen_jids.iter().any(|j| j == jid) {
            return;
        }
        self.seen_jids.push_back(jid.to_string());
        if self.seen_jids.len() > 256 {
            self.seen_jids.pop_front();
        }
    }

    /// The jobs this identity runs (shared: the minion's control reads it).
    pub fn running_jobs(&self) -> RunningJobs {
        self.running.clone()
    }

    /// Records whether this identity has a session (read by [`JobStarter`]).
    fn set_ready(&mut self, ready: bool) {
        self.ready_flag.store(ready, Ordering::Relaxed);
    }

    /// Whether this identity has an open session.
    pub fn is_ready(&self) -> bool {
        matches!(self.phase, Phase::Ready { .. })
    }

    fn seal(&mut self, request: &MinionRequest) -> Option<Vec<u8>> {
        self.seal_request(request).ok().flatten()
    }

    /// A request already encoded (a packed return, a batch of events:
    /// [`crate::packing`]) sealed in this identity's session, ready to
    /// send; `None` without a session; an error when it does not fit a
    /// frame. Sealed in `plain`'s own buffer and framed in one of the
    /// frame's size: the message is copied once, into the frame.
    fn seal_plain(&mut self, plain: Vec<u8>) -> Result<Option<Vec<u8>>, halite_proto::FrameError> {
        let cipher = match &mut self.phase {
            Phase::Ready { cipher, .. } => cipher,
            _ => return Ok(None),
        };
        if plain.len() > halite_proto::MAX_FRAME_BYTES {
            return Err(halite_proto::FrameError::TooLarge {
                size: plain.len(),
                max: halite_proto::MAX_FRAME_BYTES,
            });
        }
        let sealed = cipher
            .seal_owned(plain)
            .map_err(|e| halite_proto::FrameError::Encode(e.to_string()))?;
        // The frame: the ciphertext and a few bytes of header around it.
        let size = sealed.ciphertext.len() + 64;
        halite_proto::frame::encode_sized(&ToMaster::Sealed(sealed), size).map(Some)
    }

    /// `request` sealed in this identity's session, ready to send; `None`
    /// without a session; an error when it does not fit a frame.
    fn seal_request<T: serde::Serialize>(
        &mut self,
        request: &T,
    ) -> Result<Option<Vec<u8>>, halite_proto::FrameError> {
        if !self.is_ready() {
            return Ok(None);
        }
        self.seal_plain(encode(request)?)
    }

    fn session(&self) -> Option<u64> {
        match &self.phase {
            Phase::Confirming { cipher, .. } | Phase::Ready { cipher, .. } => Some(cipher.session),
            _ => None,
        }
    }
}

/// How a link reaches its master and how patient it is.
#[derive(Clone)]
pub struct LinkSettings {
    /// The master's address (`master`).
    pub master: String,
    /// The master's request port (`master_port`).
    pub master_port: u16,
    /// The master's publish port (`publish_port`).
    pub publish_port: u16,
    /// `publish_port` was changed from Salt's default: it wins over the
    /// port the master names (Salt's rule: a changed value is intentional,
    /// say a relay in between).
    pub publish_port_fixed: bool,
    /// `master_finger`: when set, only a master with this fingerprint is trusted.
    pub master_finger: String,
    /// Where the master key is pinned on first contact (`minion_master.pub`).
    pub pinned_master_path: Option<PathBuf>,
    /// Where the highest publication counter run per epoch is kept
    /// (`cachedir/publications`), so a replay after a restart is refused.
    pub replay_path: Option<PathBuf>,
    /// How long to wait for the master during a handshake (`auth_timeout`).
    pub auth_timeout: Duration,
    /// How long to wait before asking again while the key is pending (`acceptance_wait_time`).
    pub acceptance_wait_time: Duration,
    /// How often to check the master is alive.
    pub alive_interval: Duration,
    /// Jobs run at once (0: no limit), when `job_slots` is not given.
    pub max_concurrent_jobs: usize,
    /// The slots jobs take, shared by every link of the process (a minion
    /// serving several masters at once runs `process_count_max` jobs in
    /// all, not per master).
    pub job_slots: Option<Arc<Semaphore>>,
    /// A `halite-call` link: it authenticates with a `CallerHello`, does
    /// not subscribe to publications, does not announce itself (no
    /// `Start`) and runs only the call it is given.
    pub caller: bool,
    /// How long a stopping minion waits for its running jobs
    /// (`shutdown_grace`) before it abandons them.
    pub shutdown_grace: Duration,
    /// How often `mine.update` runs, first once authenticated
    /// (`mine_interval`; `None`: never).
    pub mine_interval: Option<Duration>,
    /// When a job's idempotent request with no answer is sent again
    /// (`request_channel_timeout`; link/waiting.rs).
    pub resend_after: Duration,
}

/// Why a link ended.
#[derive(Debug, PartialEq, Eq)]
pub enum LinkEnd {
    /// The daemon is stopping.
    Shutdown,
    /// The master stopped answering (the text says how).
    MasterLost(String),
}

/// A job's result or an event, coming back from a blocking job thread;
/// or a job the minion starts by itself.
enum FromJob {
    /// Identity `usize`'s job ended: its return, encoded on the job's thread.
    Done(usize, PackedReturn),
    /// A job of identity `usize` started by the minion (its scheduler).
    Start(usize, LocalJob),
    /// Identity `usize`'s job fired events: take what waits there.
    Events(usize, Arc<jobs::JobEvents>),
    /// Identity `usize`'s grains, computed again by a job
    /// (`saltutil.refresh_grains`, `sync_grains`, `sync_all`): the link
    /// keeps them and tells the master.
    Grains(usize, Value),
    /// The answer to the master's render-time call `call` of job `String`.
    RenderReply(usize, String, u64, Result<Value, String>),
}

/// Where job threads send their returns, events and render replies.
///
/// It outlives the links: a job that finishes while the minion is between
/// two connections leaves its return here, and the next link keeps it on
/// disk and sends it once authenticated. (With a channel per link, such a
/// return went into a channel nobody read any more and was lost.)
pub struct JobOutputs {
    tx: mpsc::UnboundedSender<FromJob>,
    rx: mpsc::UnboundedReceiver<FromJob>,
    /// Job threads' requests to the master, and those waiting for their
    /// answer: they outlive a link too, so a job whose connection was cut
    /// (its bundle being compiled, a render-time call in flight) asks
    /// again on the identity's next session instead of failing.
    requests_tx: mpsc::UnboundedSender<JobRequest>,
    requests_rx: mpsc::UnboundedReceiver<JobRequest>,
    /// Between two links: the requests still waiting (link/waiting.rs).
    waiting: Option<waiting::Waiting>,
    /// The number of the next request (unique across links).
    next_request: u64,
}

impl JobOutputs {
    /// An empty channel, made once per minion process.
    pub fn new() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let (requests_tx, requests_rx) = mpsc::unbounded_channel();
        JobOutputs {
            tx,
            rx,
            requests_tx,
            requests_rx,
            waiting: None,
            next_request: 1,
        }
    }

    /// Where the minion starts jobs of identity `agent` (of `agents`) by itself.
    pub fn starter(&self, agents: &[Agent], agent: usize) -> JobStarter {
        JobStarter {
            routes: vec![Route {
                agent,
                tx: self.tx.clone(),
                ready: agents
                    .get(agent)
                    .map(|a| a.ready_flag.clone())
                    .unwrap_or_default(),
            }],
        }
    }
}

/// One link a [`JobStarter`] can start jobs on.
#[derive(Clone)]
struct Route {
    agent: usize,
    tx: mpsc::UnboundedSender<FromJob>,
    ready: Arc<AtomicBool>,
}

/// Starts jobs of one identity on whatever link serves it (the
/// scheduler's handle): the job runs as a published one would, once the
/// identity has a session with a master. With several masters at once
/// (hot multi-master) it goes to the first link with a session, else to
/// the first link, which keeps it until its session opens.
#[derive(Clone)]
pub struct JobStarter {
    routes: Vec<Route>,
}

impl JobStarter {
    /// One starter over this one's links and then `other`'s.
    pub fn or_else(mut self, other: JobStarter) -> JobStarter {
        self.routes.extend(other.routes);
        self
    }

    /// Queues a job made by `make` on every link (each master hears of
    /// its own: the start-up `refresh_pillar` fills each master's pillar
    /// cache); false when the minion is stopping.
    pub fn start_on_each(&self, mut make: impl FnMut() -> LocalJob) -> bool {
        let mut sent = false;
        for r in &self.routes {
            sent |= r.tx.send(FromJob::Start(r.agent, make())).is_ok();
        }
        sent
    }

    /// Queues `job`; false when the minion is stopping.
    pub fn start(&self, job: LocalJob) -> bool {
        let route = self
            .routes
            .iter()
            .find(|r| r.ready.load(Ordering::Relaxed))
            .or_else(|| self.routes.first());
        match route {
            Some(r) => r.tx.send(FromJob::Start(r.agent, job)).is_ok(),
            None => false,
        }
    }
}

impl Default for JobOutputs {
    fn default() -> Self {
        Self::new()
    }
}

/// How long a job waits for the master to answer one request (a compile
/// of a big tree, a file chunk); a lost link answers at once.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// Publications held until the key of their epoch arrives (the new key
/// travels on the DEALER, the publication on the SUB: either may win).
const HELD_PUBLICATIONS: usize = 64;

/// Handshakes one link runs at once.
const MAX_HANDSHAKES_IN_FLIGHT: usize = 256;

struct Link<'a> {
    settings: &'a LinkSettings,
    agents: &'a mut [Agent],
    by_id: HashMap<String, usize>,
    /// Session id -> agent (entries are checked against the agent on use).
    sessions: HashMap<u64, usize>,
    dealer: Dealer,
    trusted_master: Option<PublicKey>,
    openers: Vec<PublicationOpener>,
    replay: ReplayGuard,
    held: VecDeque<(Instant, Publication)>,
    runner: Arc<dyn JobRunner>,
    jobs_tx: mpsc::UnboundedSender<FromJob>,
    requests_tx: mpsc::UnboundedSender<JobRequest>,
    /// Requests of job threads waiting for the master, by number.
    waiting: waiting::Waiting,
    next_request: u64,
    slots: Option<Arc<Semaphore>>,
    last_heard_any: Instant,
    /// The daemon's shutdown: each job holds one of its work guards.
    shutdown: Shutdown,
    /// Stopping: no new job starts, the running ones finish.
    draining: bool,
    /// Returns of jobs that ended while stopping, not yet acknowledged.
    unacked: HashSet<(usize, String)>,
    /// Publications from the master, subscribed once the first identity
    /// is authenticated, on the publish port the master names.
    publications: Option<Subscriber>,
    /// The port `publications` is connected to.
    subscribed_port: Option<u16>,
    /// A caller link: the jids the master acknowledged.
    acked: Vec<String>,
    /// A caller link: why the master refused the session.
    refused: Option<String>,
    /// Events of job threads waiting to go in one message (events.rs).
    events: events::PendingEvents,
}

/// The next publication, or never when not subscribed yet.
async fn next_publication(sub: &mut Option<Subscriber>) -> Option<Vec<u8>> {
    match sub {
        Some(sub) => sub.recv().await.map(|b| b.to_vec()),
        None => std::future::pending().await,
    }
}

fn pinned_key(settings: &LinkSettings) -> Option<PublicKey> {
    let path = settings.pinned_master_path.as_ref()?;
    halite_proto::keyfile::read_public(path).ok()
}

/// Connects to the master and serves every agent until the master is lost
/// or `shutdown` flips.
pub async fn run_link(
    settings: &LinkSettings,
    agents: &mut [Agent],
    runner: Arc<dyn JobRunner>,
    outputs: &mut JobOutputs,
    shutdown: &Shutdown,
) -> LinkEnd {
    outputs.keep_finished_returns(agents);
    let (mut link, mut watch) =
        match Link::connect(settings, agents, runner, outputs, shutdown).await {
            Ok(parts) => parts,
            Err(end) => return end,
        };
    if let Some(waiting) = outputs.waiting.take() {
        link.waiting = waiting;
    }
    // Once stopping: the running jobs end and their returns are
    // acknowledged, or this deadline passes (the returns stay on disk).
    let mut stop_by: Option<tokio::time::Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let stop = shutdown.triggered();
    tokio::pin!(stop);
    let end = 'serve: loop {
        tokio::select! {
            _ = &mut stop, if stop_by.is_none() => {
                tracing::info!(running = shutdown.running(), grace_s = settings.shutdown_grace.as_secs(), "stopping: no new jobs; waiting for the running ones");
                link.draining = true;
                stop_by = Some(tokio::time::Instant::now() + settings.shutdown_grace);
            }
            _ = shutdown.drained(), if link.draining && link.unacked.is_empty() => {
                // Outputs sent before the last guard dropped are still queued.
                while let Ok(done) = outputs.rx.try_recv() {
                    link.on_job_output(done).await;
                }
                if link.unacked.is_empty() {
                    break LinkEnd::Shutdown;
                }
            }
            _ = tokio::time::sleep_until(stop_by.unwrap_or_else(tokio::time::Instant::now)), if stop_by.is_some() => {
                break LinkEnd::Shutdown;
            }
            msg = link.dealer.recv() => match msg {
                Ok(frames) => {
                    for frame in frames {
                        if let Err(end) = link.on_master_frame(&frame).await {
                            break 'serve end;
                        }
                    }
                }
                Err(e) => break LinkEnd::MasterLost(format!("receive failed: {e}")),
            },
            publication = next_publication(&mut link.publications) => match publication {
                Some(frame) => link.on_publication_frame(&frame),
                None => break LinkEnd::MasterLost("the publication stream ended".into()),
            },
            _ = watch.disconnected() => {
                break LinkEnd::MasterLost("the master closed the connection (restarted?)".into());
            }
            Some(done) = outputs.rx.recv() => link.on_job_output(done).await,
            _ = tokio::time::sleep_until(link.events.due().unwrap_or_else(tokio::time::Instant::now)), if link.events.due().is_some() => {
                link.flush_events().await;
            }
            Some(request) = outputs.requests_rx.recv() => link.on_job_request(request).await,
            _ = tick.tick() => {
                if let Err(end) = link.on_tick().await {
                    break end;
                }
            }
        }
    };
    // No session any more: the minion's own jobs go to another link.
    for agent in link.agents.iter_mut() {
        agent.set_ready(false);
    }
    // Requests that may be asked again wait for the next session.
    link.waiting.link_ended();
    outputs.next_request = link.next_request;
    outputs.waiting = Some(link.waiting);
    end
}

impl<'a> Link<'a> {
    /// Opens the DEALER to the master and makes a link serving `agents`
    /// (each idle, to authenticate at the next tick).
    async fn connect(
        settings: &'a LinkSettings,
        agents: &'a mut [Agent],
        runner: Arc<dyn JobRunner>,
        outputs: &JobOutputs,
        shutdown: &Shutdown,
    ) -> Result<(Link<'a>, halite_transport::ConnectionWatch), LinkEnd> {
        let ret_endpoint = format!("tcp://{}:{}", settings.master, settings.master_port);
        let mut dealer = Dealer::connect(&ret_endpoint, settings.auth_timeout)
            .await
            .map_err(|e| LinkEnd::MasterLost(e.to_string()))?;
        // The transport tells us at once when the master closes the connection
        // (a restart): the link ends and every identity authenticates again,
        // instead of waiting for a ping to go unanswered.
        let watch = dealer.watch();
        let jobs_tx = outputs.tx.clone();
        let requests_tx = outputs.requests_tx.clone();
        let by_id = agents
            .iter()
            .enumerate()
            .map(|(i, a)| (a.id.clone(), i))
            .collect();
        for agent in agents.iter_mut() {
            agent.phase = Phase::Idle {
                next_try: Instant::now(),
            };
            agent.set_ready(false);
        }
        let slots = settings.job_slots.clone().or_else(|| {
            (settings.max_concurrent_jobs > 0)
                .then(|| Arc::new(Semaphore::new(settings.max_concurrent_jobs)))
        });
        let mut link = Link {
            settings,
            by_id,
            sessions: HashMap::new(),
            agents,
            dealer,
            trusted_master: pinned_key(settings),
            openers: Vec::new(),
            replay: match &settings.replay_path {
                Some(path) => ReplayGuard::at(path.clone()),
                None => ReplayGuard::memory(),
            },
            held: VecDeque::new(),
            runner,
            jobs_tx,
            requests_tx,
            waiting: waiting::Waiting::new(settings.resend_after, REQUEST_TIMEOUT),
            next_request: outputs.next_request,
            slots,
            last_heard_any: Instant::now(),
            shutdown: shutdown.clone(),
            draining: false,
            unacked: HashSet::new(),
            publications: None,
            subscribed_port: None,
            acked: Vec::new(),
            refused: None,
            events: events::PendingEvents::default(),
        };
        // A publish_port set on purpose needs nothing from the master:
        // subscribed at once, as before any master named its port.
        if settings.publish_port_fixed {
            link.subscribe(None).await?;
        }
        Ok((link, watch))
    }

    /// Subscribes to the master's publications on `port` (the one its
    /// `Ready` named, unless `publish_port` was set), once per link: before the
    /// minion announces itself, so a job published after the master
    /// redelivers the missed ones reaches it.
    async fn subscribe(&mut self, port: Option<u16>) -> Result<(), LinkEnd> {
        let port = match port {
            Some(named) if !self.settings.publish_port_fixed => named,
            _ => self.settings.publish_port,
        };
        if self.settings.caller || self.subscribed_port == Some(port) {
            return Ok(());
        }
        let endpoint = format!("tcp://{}:{}", self.settings.master, port);
        // Publications arrive on their own task so a busy DEALER never delays them.
        let sub = Subscriber::connect(&endpoint, self.settings.auth_timeout)
            .await
            .map_err(|e| LinkEnd::MasterLost(format!("cannot subscribe to {endpoint}: {e}")))?;
        self.publications = Some(sub);
        self.subscribed_port = Some(port);
        Ok(())
    }

    async fn send(&mut self, bytes: Vec<u8>) {
        self.dealer.send(bytes).await;
    }

    async fn send_request(&mut self, idx: usize, request: &MinionRequest) {
        if let Some(bytes) = self.agents[idx].seal(request) {
            self.send(bytes).await;
        }
    }

    async fn on_master_message(
        &mut self,
        idx: usize,
        message: MasterMessage,
    ) -> Result<(), LinkEnd> {
        let now = Instant::now();
        match message {
            MasterMessage::Ready {
                publish_key,
                publish_port,
                batched_events,
                packed_events,
                packed_returns,
                zstd_returns,
            } => {
                let agent = &mut self.agents[idx];
                let Phase::Confirming { .. } = agent.phase else {
                    return Ok(());
                };
                let Phase::Confirming { cipher, .. } =
                    std::mem::replace(&mut agent.phase, Phase::Idle { next_try: now })
                else {
                    return Ok(());
                };
                agent.phase = Phase::Ready {
                    cipher,
                    last_heard: now,
                    last_ping: now,
                    last_resend: now,
                };
                agent.set_ready(true);
                agent.batched_events = batched_events;
                agent.packed_events = batched_events && packed_events;
                agent.packed_returns = packed_returns;
                agent.zstd_returns = packed_returns && zstd_returns;
                tracing::info!(id = %agent.id, "authenticated with the master");
                self.install_publish_key(&publish_key);
                if self.settings.caller {
                    // A call announces nothing and resends nothing: the
                    // minion daemon owns this id's jobs and returns.
                    return Ok(());
                }
                // Salt's run_on_start: the first authentication of this
                // process, not every reconnection.
                let agent = &mut self.agents[idx];
                if agent.mine_due.is_none() {
                    agent.mine_due = self.settings.mine_interval.map(|_| now);
                }
                self.subscribe(publish_port).await?;
                // Returns first: the master redelivers the jobs still
                // waiting for this minion when it starts, and a job whose
                // return is on its way (one abandoned at the last stop)
                // must not run twice.
                self.resend_returns(idx).await;
                let grains = self.agents[idx].grains.clone();
                self.send_request(idx, &MinionRequest::Start { grains })
                    .await;
                let deferred: Vec<LocalJob> = self.agents[idx].deferred.drain(..).collect();
                for local in deferred {
                    self.start_local(idx, local);
                }
                // Jobs' requests the last session left unanswered (the
                // connection was cut): asked again, same numbers.
                for (req, body) in self.waiting.for_new_session(idx, now) {
                    tracing::info!(req, id = %self.agents[idx].id, "asking the master again on the new session");
                    self.send_request(idx, &MinionRequest::Request { req, body })
                        .await;
                }
            }
            MasterMessage::PublishKey(key) => {
                self.touch(idx, now);
                self.install_publish_key(&key);
            }
            MasterMessage::Ack { jid } => {
                self.touch(idx, now);
                tracing::debug!(id = %self.agents[idx].id, %jid, "return acknowledged");
                if self.settings.caller {
                    self.acked.push(jid.clone());
                }
                self.unacked.remove(&(idx, jid.clone()));
                self.agents[idx].returns_sent.acknowledged(&jid);
                self.agents[idx].store.remove(&jid);
            }
            MasterMessage::Pong => self.touch(idx, now),
            MasterMessage::Reply { req, body } => {
                self.touch(idx, now);
                if !self.waiting.answer(req, idx, body) {
                    tracing::debug!(req, "late or repeated answer from the master dropped");
                }
            }
            MasterMessage::RenderCall {
                jid,
                call,
                fun,
                args,
                kwargs,
                repeatable,
            } => {
                self.touch(idx, now);
                tracing::debug!(%jid, %fun, call, "render-time call");
                if repeatable {
                    match self.agents[idx].kept_calls.ask(&jid, call, &fun, now) {
                        kept_calls::Ask::Run => {}
                        kept_calls::Ask::Running => {
                            tracing::debug!(%jid, call, "render-time call asked again while it runs: answered when it ends");
                            return Ok(());
                        }
                        kept_calls::Ask::Answered(result) => {
                            tracing::info!(%jid, call, %fun, "render-time call asked again: answered from the kept answer");
                            self.send_request(idx, &MinionRequest::RenderReply { call, result })
                                .await;
                            return Ok(());
                        }
                    }
                }
                let agent = &self.agents[idx];
                let (id, grains) = (agent.id.clone(), agent.grains.clone());
                let runner = self.runner.clone();
                let tx = self.jobs_tx.clone();
                let master = MasterChannel::new(idx, self.requests_tx.clone(), REQUEST_TIMEOUT);
                tokio::task::spawn_blocking(move || {
                    let args = halite_modules::Args {
                        positional: args,
                        kwargs,
                    };
                    let result = runner.render_call(&id, &grains, &fun, args, master);
                    let _ = tx.send(FromJob::RenderReply(idx, jid, call, result));
                });
            }
        }
        Ok(())
    }

    /// Sends a job thread's request to the master and remembers where the
    /// answer goes.
    async fn on_job_request(&mut self, request: JobRequest) {
        let now = Instant::now();
        let req = self.next_request;
        self.next_request += 1;
        let idx = request.agent;
        if idx >= self.agents.len() {
            return;
        }
        if !self.agents[idx].is_ready() {
            // Asked on the identity's next session when it may be asked
            // again; otherwise dropping the answer's sender tells the job
            // the link is down.
            if waiting::Waiting::keeps(&request.body) {
                self.waiting
                    .insert(req, idx, request.reply, &request.body, now);
            }
            return;
        }
        self.waiting
            .insert(req, idx, request.reply, &request.body, now);
        self.send_request(
            idx,
            &MinionRequest::Request {
                req,
                body: request.body,
            },
        )
        .await;
    }

    /// Starts identity `idx`'s `mine.update` when it is due (crate::mine).
    fn mine_if_due(&mut self, idx: usize, now: Instant) {
        let (Some(interval), Some(due)) = (self.settings.mine_interval, self.agents[idx].mine_due)
        else {
            return;
        };
        if due > now || self.draining || !self.agents[idx].is_ready() {
            return;
        }
        // The first update reads the pillar's mine_functions from the
        // pillar the start-up refresh_pillar brings (one compile serves
        // both, as Salt's minion reads its own __pillar__); it asks the
        // master only if that pillar is late.
        if !self.agents[idx].mine_started
            && self.runner.pillar(&self.agents[idx].id).is_none()
            && now.duration_since(due) < crate::mine::FIRST_UPDATE_WAIT
        {
            return;
        }
        let agent = &mut self.agents[idx];
        agent.mine_started = true;
        agent.mine_due = Some(now + interval);
        let master = MasterChannel::new(idx, self.requests_tx.clone(), REQUEST_TIMEOUT);
        let (runner, id, grains) = (self.runner.clone(), agent.id.clone(), agent.grains.clone());
        crate::mine::spawn_update(id.clone(), move || {
            let args = halite_modules::Args::default();
            runner.render_call(&id, &grains, "mine.update", args, master)
        });
    }

    fn touch(&mut self, idx: usize, now: Instant) {
        if let Phase::Ready { last_heard, .. } = &mut self.agents[idx].phase {
            *last_heard = now;
        }
    }

    async fn on_tick(&mut self) -> Result<(), LinkEnd> {
        let now = Instant::now();
        // Requests whose job gave up waiting (its thread timed out) are
        // forgotten; idempotent ones with no answer yet are asked again,
        // under the same number (the first answer wins).
        for (req, idx, body) in self.waiting.due(now) {
            if !self.agents[idx].is_ready() {
                // Asked on its next session (Ready).
                continue;
            }
            tracing::info!(req, id = %self.agents[idx].id, "no answer from the master yet; asking again");
            self.send_request(idx, &MinionRequest::Request { req, body })
                .await;
        }
        let alive = self.settings.alive_interval;
        let mut waiting_on_master = false;
        // Handshakes in flight are capped so a swarm (or a fleet behind one
        // link) does not flood the master and time out its own retries.
        let mut in_flight = self
            .agents
            .iter()
            .filter(|a| {
                matches!(
                    a.phase,
                    Phase::Handshaking { .. } | Phase::Confirming { .. }
                )
            })
            .count();
        for idx in 0..self.agents.len() {
            enum Step {
                Nothing,
                Hello,
                Ping,
                Resend,
            }
            let step = match &mut self.agents[idx].phase {
                Phase::Idle { next_try }
                    if *next_try <= now && in_flight < MAX_HANDSHAKES_IN_FLIGHT =>
                {
                    in_flight += 1;
                    Step::Hello
                }
                Phase::Idle { .. } => Step::Nothing,
                Phase::Handshaking { since, .. } | Phase::Confirming { since, .. } => {
                    waiting_on_master = true;
                    if now.duration_since(*since) > self.settings.auth_timeout {
                        Step::Hello
                    } else {
                        Step::Nothing
                    }
                }
                Phase::Ready {
                    last_heard,
                    last_ping,
                    last_resend,
                    ..
                } => {
                    if now.duration_since(*last_heard) > alive * 3 {
                        return Err(LinkEnd::MasterLost("the master stopped answering".into()));
                    }
                    if now.duration_since(*last_resend) > alive {
                        *last_resend = now;
                        Step::Resend
                    } else if now.duration_since(*last_ping) > alive {
                        *last_ping = now;
                        Step::Ping
                    } else {
                        Step::Nothing
                    }
                }
            };
            match step {
                Step::Nothing => {}
                Step::Hello => self.start_handshake(idx).await,
                Step::Ping => self.send_request(idx, &MinionRequest::Ping).await,
                Step::Resend => {
                    self.send_request(idx, &MinionRequest::Ping).await;
                    self.resend_unacknowledged(idx, now).await;
                }
            }
            self.mine_if_due(idx, now);
        }
        if waiting_on_master
            && now.duration_since(self.last_heard_any) > self.settings.auth_timeout * 3
        {
            return Err(LinkEnd::MasterLost("no answer to authentication".into()));
        }
        Ok(())
    }
}
