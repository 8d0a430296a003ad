//! One connection to one master (a DEALER for requests, a SUB for
//! publications) carrying one or more minion identities: one for a real
//! minion, many for the swarm. Each identity authenticates on its own and
//! has its own session; publications are verified (master signature) and
//! decrypted once per link.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use halite_modules::host::EventSink;
use halite_proto::crypto::{MinionHandshake, PublicationOpener, SessionCipher};
use halite_proto::msg::{
    Job, JobReturn, KeyStatus, MasterMessage, MinionRequest, Publication, ReplyBody, ToMaster,
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
        }
    }

    /// The jobs this identity runs (shared: the minion's control reads it).
    pub fn running_jobs(&self) -> RunningJobs {
        self.running.clone()
    }

    /// A job of this identity ended: it is no longer running, and its
    /// return goes on disk until the master acknowledges it. `None` when
    /// the return is not for the master (a scheduled job with
    /// `return_job: False`); a signalled job's return says so.
    fn job_ended(&mut self, ret: &JobReturn) -> std::io::Result<Option<JobReturn>> {
        let ended = self.running.remove(&ret.jid);
        if ended.as_ref().is_some_and(|r| !r.return_job) {
            return Ok(None);
        }
        let ret = match ended.and_then(|r| r.signalled) {
            Some(signal) => signalled_return(ret, signal),
            None => ret.clone(),
        };
        self.store.put(&ret)?;
        Ok(Some(ret))
    }

    /// Whether this identity has an open session.
    pub fn is_ready(&self) -> bool {
        matches!(self.phase, Phase::Ready { .. })
    }

    fn seal(&mut self, request: &MinionRequest) -> Option<Vec<u8>> {
        let cipher = match &mut self.phase {
            Phase::Ready { cipher, .. } => cipher,
            _ => return None,
        };
        let plain = encode(request).ok()?;
        let sealed = cipher.seal(&plain).ok()?;
        encode(&ToMaster::Sealed(sealed)).ok()
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
    /// Jobs run at once (0: no limit).
    pub max_concurrent_jobs: usize,
    /// How long a stopping minion waits for its running jobs
    /// (`shutdown_grace`) before it abandons them.
    pub shutdown_grace: Duration,
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
    Done(usize, JobReturn),
    /// A job of identity `usize` started by the minion (its scheduler).
    Start(usize, LocalJob),
    Event(usize, String, Value),
    /// The answer to the master's render-time call `call`.
    RenderReply(usize, u64, Result<Value, String>),
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
}

impl JobOutputs {
    /// An empty channel, made once per minion process.
    pub fn new() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        JobOutputs { tx, rx }
    }

    /// Where the minion starts jobs of identity `agent` by itself.
    pub fn starter(&self, agent: usize) -> JobStarter {
        JobStarter {
            agent,
            tx: self.tx.clone(),
        }
    }
}

/// Starts jobs of one identity on whatever link serves it (the
/// scheduler's handle): the job runs as a published one would, once the
/// identity has a session with a master.
#[derive(Clone)]
pub struct JobStarter {
    agent: usize,
    tx: mpsc::UnboundedSender<FromJob>,
}

impl JobStarter {
    /// Queues `job`; false when the minion is stopping.
    pub fn start(&self, job: LocalJob) -> bool {
        self.tx.send(FromJob::Start(self.agent, job)).is_ok()
    }
}

impl Default for JobOutputs {
    fn default() -> Self {
        Self::new()
    }
}

/// Puts on disk the returns of jobs that finished while no link was up
/// (before a new one tries to connect, which may fail for a while), and
/// keeps the jobs the minion started meanwhile for the next session; what
/// else they sent (events, render replies) was for a master that is gone.
fn keep_finished_returns(agents: &mut [Agent], outputs: &mut JobOutputs) {
    while let Ok(output) = outputs.rx.try_recv() {
        if let FromJob::Start(idx, local) = output {
            // Started by the minion itself: it runs once a master answers.
            if let Some(agent) = agents.get_mut(idx) {
                if agent.deferred.len() < DEFERRED_LOCAL_JOBS {
                    agent.deferred.push_back(local);
                }
            }
            continue;
        }
        if let FromJob::Done(idx, ret) = output {
            let Some(agent) = agents.get_mut(idx) else {
                continue;
            };
            if let Err(e) = agent.job_ended(&ret) {
                tracing::error!(error = %e, jid = %ret.jid, "cannot keep the return on disk; it is lost");
            }
        }
    }
}

/// The return of a job `saltutil.signal_job` stopped: Salt's job dies of
/// the signal and its return never comes; halite's job thread ends early
/// and its return says why, so the job cache tells what happened.
fn signalled_return(ret: &JobReturn, signal: i32) -> JobReturn {
    JobReturn {
        ret: Value::String(format!(
            "The job {} was stopped by signal {signal} (saltutil.signal_job)",
            ret.jid
        )),
        retcode: 1,
        success: false,
        ..ret.clone()
    }
}

/// The end of a stopping minion's jobs once no link serves them: waits up
/// to `grace` for the running ones, keeps every finished return on disk
/// (sent to the master after the next start), and abandons what still
/// runs with a failed return kept on disk too, so the master learns the
/// job's fate and the restarted minion does not run it again.
pub async fn stop_jobs(
    agents: &mut [Agent],
    outputs: &mut JobOutputs,
    shutdown: &Shutdown,
    grace: Duration,
) {
    let left = shutdown.drain(grace).await;
    keep_finished_returns(agents, outputs);
    if left == 0 {
        return;
    }
    for agent in agents.iter_mut() {
        let abandoned: Vec<Arc<Job>> = agent.running.all().into_iter().map(|r| r.job).collect();
        for job in abandoned {
            tracing::warn!(id = %agent.id, jid = %job.jid, fun = %job.fun, "job abandoned at shutdown");
            let ret = abandoned_return(&agent.id, &job, grace);
            if let Err(e) = agent.job_ended(&ret) {
                tracing::error!(error = %e, jid = %job.jid, "cannot keep the abandoned job's return on disk");
            }
        }
    }
}

/// The failed return of a job the minion stopped before it finished.
fn abandoned_return(id: &str, job: &Job, grace: Duration) -> JobReturn {
    JobReturn {
        jid: job.jid.clone(),
        id: id.to_string(),
        fun: job.fun.clone(),
        fun_args: job.arg.clone(),
        ret: Value::String(format!(
            "The minion was stopped before {} finished: the job ran past the minion's shutdown_grace of {} s and was abandoned",
            job.fun,
            grace.as_secs()
        )),
        retcode: 1,
        success: false,
    }
}

/// How long a job waits for the master to answer one request (a compile
/// of a big tree, a file chunk); a lost link answers at once.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

struct ForwardEvents {
    agent: usize,
    tx: mpsc::UnboundedSender<FromJob>,
}

impl EventSink for ForwardEvents {
    fn fire(&self, tag: &str, data: &Value) {
        let _ = self
            .tx
            .send(FromJob::Event(self.agent, tag.to_string(), data.clone()));
    }
}

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
    /// Requests of job threads waiting for the master: number -> (agent, answer).
    waiting: HashMap<u64, (usize, std::sync::mpsc::Sender<ReplyBody>, Instant)>,
    next_request: u64,
    slots: Option<Arc<Semaphore>>,
    last_heard_any: Instant,
    /// The daemon's shutdown: each job holds one of its work guards.
    shutdown: Shutdown,
    /// Stopping: no new job starts, the running ones finish.
    draining: bool,
    /// Returns of jobs that ended while stopping, not yet acknowledged.
    unacked: HashSet<(usize, String)>,
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
    keep_finished_returns(agents, outputs);
    let ret_endpoint = format!("tcp://{}:{}", settings.master, settings.master_port);
    let pub_endpoint = format!("tcp://{}:{}", settings.master, settings.publish_port);
    let mut dealer = match Dealer::connect(&ret_endpoint, settings.auth_timeout).await {
        Ok(dealer) => dealer,
        Err(e) => return LinkEnd::MasterLost(e.to_string()),
    };
    // The transport tells us at once when the master closes the connection
    // (a restart): the link ends and every identity authenticates again,
    // instead of waiting for a ping to go unanswered.
    let mut watch = dealer.watch();
    // Publications arrive on their own task so a busy DEALER never delays them.
    let mut publications = match Subscriber::connect(&pub_endpoint, settings.auth_timeout).await {
        Ok(sub) => sub,
        Err(e) => return LinkEnd::MasterLost(e.to_string()),
    };
    let jobs_tx = outputs.tx.clone();
    let (requests_tx, mut requests_rx) = mpsc::unbounded_channel();
    let by_id = agents
        .iter()
        .enumerate()
        .map(|(i, a)| (a.id.clone(), i))
        .collect();
    for agent in agents.iter_mut() {
        agent.phase = Phase::Idle {
            next_try: Instant::now(),
        };
    }
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
        waiting: HashMap::new(),
        next_request: 1,
        slots: (settings.max_concurrent_jobs > 0)
            .then(|| Arc::new(Semaphore::new(settings.max_concurrent_jobs))),
        last_heard_any: Instant::now(),
        shutdown: shutdown.clone(),
        draining: false,
        unacked: HashSet::new(),
    };
    // Once stopping: the running jobs end and their returns are
    // acknowledged, or this deadline passes (the returns stay on disk).
    let mut stop_by: Option<tokio::time::Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let stop = shutdown.triggered();
    tokio::pin!(stop);
    let end = loop {
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
                            return end;
                        }
                    }
                }
                Err(e) => break LinkEnd::MasterLost(format!("receive failed: {e}")),
            },
            publication = publications.recv() => match publication {
                Some(frame) => link.on_publication_frame(&frame),
                None => break LinkEnd::MasterLost("the publication stream ended".into()),
            },
            _ = watch.disconnected() => {
                break LinkEnd::MasterLost("the master closed the connection (restarted?)".into());
            }
            Some(done) = outputs.rx.recv() => link.on_job_output(done).await,
            Some(request) = requests_rx.recv() => link.on_job_request(request).await,
            _ = tick.tick() => {
                if let Err(end) = link.on_tick().await {
                    break end;
                }
            }
        }
    };
    end
}

impl Link<'_> {
    async fn send(&mut self, bytes: Vec<u8>) {
        self.dealer.send(bytes).await;
    }

    async fn send_request(&mut self, idx: usize, request: &MinionRequest) {
        if let Some(bytes) = self.agents[idx].seal(request) {
            self.send(bytes).await;
        }
    }

    async fn start_handshake(&mut self, idx: usize) {
        let agent = &mut self.agents[idx];
        let Ok((state, hello)) = MinionHandshake::start(&agent.identity, &agent.id) else {
            return;
        };
        agent.phase = Phase::Handshaking {
            state: Some(state),
            since: Instant::now(),
        };
        if let Ok(bytes) = encode(&ToMaster::Hello(hello)) {
            self.send(bytes).await;
        }
    }

    /// The agent holding `session` (indexed: a swarm gets 10 000 acks at once).
    fn agent_by_session(&self, session: u64) -> Option<usize> {
        self.sessions
            .get(&session)
            .copied()
            .filter(|&idx| self.agents[idx].session() == Some(session))
    }

    /// Checks the master key against `master_finger` and the pinned key;
    /// pins it on first contact.
    fn trust_master(&mut self, key: &PublicKey) -> bool {
        if !self.settings.master_finger.is_empty()
            && key.fingerprint() != self.settings.master_finger.to_lowercase()
        {
            tracing::error!(got = %key.fingerprint(), "master key does not match master_finger; refusing it");
            return false;
        }
        match self.trusted_master {
            Some(trusted) if trusted != *key => {
                tracing::error!("the master's key changed since it was first trusted; remove minion_master.pub to trust the new one");
                false
            }
            Some(_) => true,
            None => {
                if let Some(path) = &self.settings.pinned_master_path {
                    if let Err(e) = halite_proto::keyfile::write_private(
                        path,
                        format!("{}\n", key.to_hex()).as_bytes(),
                    ) {
                        tracing::warn!(error = %e, "cannot pin the master key");
                    }
                }
                self.trusted_master = Some(*key);
                true
            }
        }
    }

    async fn on_master_frame(&mut self, frame: &[u8]) -> Result<(), LinkEnd> {
        let msg: ToMinion = match decode(frame) {
            Ok(m) => m,
            Err(e) => {
                tracing::debug!(error = %e, "undecodable frame from the master dropped");
                return Ok(());
            }
        };
        match msg {
            ToMinion::Welcome(welcome) => {
                let Some(&idx) = self.by_id.get(&welcome.id) else {
                    return Ok(());
                };
                let Ok(master_key) = MinionHandshake::master_key(&welcome) else {
                    return Ok(());
                };
                if !self.trust_master(&master_key) {
                    return Err(LinkEnd::MasterLost("untrusted master key".into()));
                }
                let agent = &mut self.agents[idx];
                let Phase::Handshaking { state, .. } = &mut agent.phase else {
                    return Ok(());
                };
                // A welcome for an earlier hello (this one is a retry) is ignored.
                if state.as_ref().is_none_or(|st| st.verify(&welcome).is_err()) {
                    return Ok(());
                }
                let Some(state) = state.take() else {
                    return Ok(());
                };
                match state.finish(&agent.identity, &welcome) {
                    Ok((cipher, confirm)) => {
                        self.sessions.insert(cipher.session, idx);
                        agent.phase = Phase::Confirming {
                            cipher,
                            since: Instant::now(),
                        };
                        self.last_heard_any = Instant::now();
                        if let Ok(bytes) = encode(&ToMaster::Confirm(confirm)) {
                            self.send(bytes).await;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "master handshake failed verification");
                        agent.phase = Phase::Idle {
                            next_try: Instant::now() + self.settings.acceptance_wait_time,
                        };
                    }
                }
            }
            ToMinion::Refused { id, status, reason } => {
                let Some(&idx) = self.by_id.get(&id) else {
                    return Ok(());
                };
                // Only a minion waiting for an answer takes a refusal.
                if !matches!(self.agents[idx].phase, Phase::Handshaking { .. }) {
                    return Ok(());
                }
                self.last_heard_any = Instant::now();
                match status {
                    Some(KeyStatus::Pending) => {
                        tracing::info!(%id, "key pending acceptance on the master (halite-key -a {id})")
                    }
                    _ => tracing::error!(%id, ?status, %reason, "master refused authentication"),
                }
                self.agents[idx].phase = Phase::Idle {
                    next_try: Instant::now() + self.settings.acceptance_wait_time,
                };
            }
            ToMinion::UnknownSession { session } => {
                if self.agent_by_session(session).is_some() {
                    return Err(LinkEnd::MasterLost(
                        "master forgot the session (restarted?)".into(),
                    ));
                }
            }
            ToMinion::Sealed(sealed) => {
                let Some(idx) = self.agent_by_session(sealed.session) else {
                    return Ok(());
                };
                let agent = &mut self.agents[idx];
                let plain = match &mut agent.phase {
                    Phase::Confirming { cipher, .. } | Phase::Ready { cipher, .. } => {
                        cipher.open(&sealed)
                    }
                    _ => return Ok(()),
                };
                let Ok(plain) = plain else {
                    tracing::debug!("sealed message from the master refused");
                    return Ok(());
                };
                let Ok(message) = decode::<MasterMessage>(&plain) else {
                    return Ok(());
                };
                self.last_heard_any = Instant::now();
                self.on_master_message(idx, message).await;
            }
        }
        Ok(())
    }

    fn install_publish_key(&mut self, key: &halite_proto::msg::PublishKey) {
        let Some(master) = self.trusted_master else {
            return;
        };
        if self.openers.iter().any(|o| o.epoch() == key.epoch) {
            return;
        }
        // Counters this minion already ran under this epoch stay refused, and
        // so do publications sealed before it joined (a job it missed comes
        // again from the master, redelivered; an old frame is a replay).
        let seen = self.replay.floor(key.epoch).max(key.sealed);
        if let Ok(opener) = PublicationOpener::resume(master, key, seen) {
            // Only the newest key opens publications: a rotated-out key opens nothing.
            self.openers = vec![opener];
            let held: Vec<Publication> = self.held.drain(..).map(|(_, p)| p).collect();
            for publication in held {
                self.open_publication(publication);
            }
        }
    }

    async fn on_master_message(&mut self, idx: usize, message: MasterMessage) {
        let now = Instant::now();
        match message {
            MasterMessage::Ready { publish_key } => {
                let agent = &mut self.agents[idx];
                let Phase::Confirming { .. } = agent.phase else {
                    return;
                };
                let Phase::Confirming { cipher, .. } =
                    std::mem::replace(&mut agent.phase, Phase::Idle { next_try: now })
                else {
                    return;
                };
                agent.phase = Phase::Ready {
                    cipher,
                    last_heard: now,
                    last_ping: now,
                    last_resend: now,
                };
                tracing::info!(id = %agent.id, "authenticated with the master");
                self.install_publish_key(&publish_key);
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
            }
            MasterMessage::PublishKey(key) => {
                self.touch(idx, now);
                self.install_publish_key(&key);
            }
            MasterMessage::Ack { jid } => {
                self.touch(idx, now);
                self.unacked.remove(&(idx, jid.clone()));
                self.agents[idx].store.remove(&jid);
            }
            MasterMessage::Pong => self.touch(idx, now),
            MasterMessage::Reply { req, body } => {
                self.touch(idx, now);
                match self.waiting.remove(&req) {
                    Some((agent, reply, _)) if agent == idx => {
                        let _ = reply.send(body);
                    }
                    Some(entry) => {
                        self.waiting.insert(req, entry);
                    }
                    None => tracing::debug!(req, "late answer from the master dropped"),
                }
            }
            MasterMessage::RenderCall {
                jid,
                call,
                fun,
                args,
                kwargs,
            } => {
                self.touch(idx, now);
                tracing::debug!(%jid, %fun, "render-time call");
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
                    let _ = tx.send(FromJob::RenderReply(idx, call, result));
                });
            }
        }
    }

    /// Sends a job thread's request to the master and remembers where the
    /// answer goes.
    async fn on_job_request(&mut self, request: JobRequest) {
        let now = Instant::now();
        let req = self.next_request;
        self.next_request += 1;
        let idx = request.agent;
        if idx >= self.agents.len() || !self.agents[idx].is_ready() {
            // Dropping the answer's sender tells the job the link is down.
            return;
        }
        self.waiting.insert(req, (idx, request.reply, now));
        self.send_request(
            idx,
            &MinionRequest::Request {
                req,
                body: request.body,
            },
        )
        .await;
    }

    fn touch(&mut self, idx: usize, now: Instant) {
        if let Phase::Ready { last_heard, .. } = &mut self.agents[idx].phase {
            *last_heard = now;
        }
    }

    async fn resend_returns(&mut self, idx: usize) {
        for ret in self.agents[idx].store.pending() {
            self.send_request(idx, &MinionRequest::Return(ret)).await;
        }
    }

    fn on_publication_frame(&mut self, frame: &[u8]) {
        match decode::<Publication>(frame) {
            Ok(publication) => self.open_publication(publication),
            Err(e) => tracing::debug!(error = %e, "undecodable publication dropped"),
        }
    }

    fn open_publication(&mut self, publication: Publication) {
        let Some(master) = self.trusted_master else {
            return;
        };
        // The signature is checked before anything else, held or not.
        let Some(opener) = self.openers.first_mut() else {
            self.hold(master, publication);
            return;
        };
        let plain = match opener.open(&publication) {
            Ok(p) => p,
            Err(halite_proto::CryptoError::UnknownEpoch(_)) => {
                self.hold(master, publication);
                return;
            }
            Err(e) => {
                tracing::debug!(error = %e, "publication refused");
                return;
            }
        };
        let job: Job = match decode(&plain) {
            Ok(j) => j,
            Err(e) => {
                tracing::debug!(error = %e, "undecodable job dropped");
                return;
            }
        };
        if !halite_proto::jid::is_jid(&job.jid) {
            return;
        }
        let targeted: HashSet<&str> = job.minions.iter().map(String::as_str).collect();
        let idxs: Vec<usize> = (0..self.agents.len())
            .filter(|&i| targeted.contains(self.agents[i].id.as_str()) && self.agents[i].is_ready())
            .collect();
        if idxs.is_empty() {
            return;
        }
        // Kept on disk before the job runs: a replay after a restart is refused.
        if let Err(e) = self.replay.record(publication.epoch, publication.counter) {
            tracing::error!(error = %e, jid = %job.jid, "cannot record the publication counter in cachedir; the job runs, but a replay of it after a restart would not be refused");
        }
        let job = Arc::new(job);
        for idx in idxs {
            self.start_job(idx, job.clone());
        }
    }

    fn hold(&mut self, master: PublicKey, publication: Publication) {
        if halite_proto::crypto::verify_publication(&master, &publication).is_err() {
            return;
        }
        self.held
            .retain(|(at, _)| at.elapsed() < Duration::from_secs(30));
        if self.held.len() >= HELD_PUBLICATIONS {
            self.held.pop_front();
        }
        self.held.push_back((Instant::now(), publication));
    }

    /// Starts a job the minion started by itself, or keeps it until the
    /// identity has a session (it may need its bundle from the master).
    fn start_local(&mut self, idx: usize, local: LocalJob) {
        let Some(agent) = self.agents.get_mut(idx) else {
            return;
        };
        if !agent.is_ready() {
            if agent.deferred.len() >= DEFERRED_LOCAL_JOBS {
                tracing::warn!(jid = %local.job.jid, fun = %local.job.fun, "scheduled job dropped: no session with a master and too many waiting");
                return;
            }
            agent.deferred.push_back(local);
            return;
        }
        let job = Arc::new(local.job.clone());
        self.launch(idx, job, Some(local));
    }

    fn start_job(&mut self, idx: usize, job: Arc<Job>) {
        self.launch(idx, job, None);
    }

    /// Runs `job` for identity `idx`; `local` when the minion started it
    /// (the master learns of it first, so its return and bundle are known).
    fn launch(&mut self, idx: usize, job: Arc<Job>, local: Option<LocalJob>) {
        if self.draining {
            // Not marked seen: the master delivers it again after the restart.
            tracing::info!(jid = %job.jid, fun = %job.fun, "job not started: the minion is stopping");
            return;
        }
        let agent = &mut self.agents[idx];
        // Seen in this process, or run already and its return still unacknowledged
        // (a job the master delivers again after a reconnection).
        if agent.seen_jids.contains(&job.jid) || agent.store.has(&job.jid) {
            return;
        }
        agent.seen_jids.push_back(job.jid.clone());
        if agent.seen_jids.len() > 256 {
            agent.seen_jids.pop_front();
        }
        let id = agent.id.clone();
        if job.fun == "saltutil.find_job" {
            // Answered at once from the running jobs, never queued behind them.
            let ret = find_job(agent, &job);
            let _ = self.jobs_tx.send(FromJob::Done(idx, ret));
            return;
        }
        agent.running.insert(match &local {
            Some(l) => RunningJob {
                job: job.clone(),
                schedule: l.schedule.clone(),
                return_job: l.return_job,
                listed: l.listed,
                signalled: None,
            },
            None => RunningJob::published(job.clone()),
        });
        let grains = agent.grains.clone();
        let runner = self.runner.clone();
        let tx = self.jobs_tx.clone();
        let slots = self.slots.clone();
        let master = MasterChannel::new(idx, self.requests_tx.clone(), REQUEST_TIMEOUT);
        tracing::info!(%id, jid = %job.jid, fun = %job.fun, "running job");
        let work = self.shutdown.work();
        tokio::spawn(async move {
            // Dropped last, after the return is sent: a drain that sees no
            // work left finds every return in the outputs channel.
            let _work = work;
            let _permit = match &slots {
                Some(s) => s.clone().acquire_owned().await.ok(),
                None => None,
            };
            if job.fun == "saltutil.refresh_grains" {
                let fresh = {
                    let runner = runner.clone();
                    let id = id.clone();
                    tokio::task::spawn_blocking(move || runner.grains(&id))
                        .await
                        .unwrap_or(Value::Null)
                };
                let _ = tx.send(FromJob::Event(idx, "__grains__".into(), fresh));
                let ret = JobReturn {
                    jid: job.jid.clone(),
                    id,
                    fun: job.fun.clone(),
                    fun_args: job.arg.clone(),
                    ret: Value::Bool(true),
                    retcode: 0,
                    success: true,
                };
                let _ = tx.send(FromJob::Done(idx, ret));
                return;
            }
            let events: Arc<dyn EventSink> = Arc::new(ForwardEvents {
                agent: idx,
                tx: tx.clone(),
            });
            let job_for_thread = job.clone();
            let id_for_thread = id.clone();
            let result = tokio::task::spawn_blocking(move || {
                if let Some(local) = local {
                    announce(&master, local);
                }
                runner.run(&id_for_thread, &grains, &job_for_thread, events, master)
            })
            .await;
            let ret = result.unwrap_or_else(|e| JobReturn {
                jid: job.jid.clone(),
                id,
                fun: job.fun.clone(),
                fun_args: job.arg.clone(),
                ret: Value::String(format!("The minion function caused an exception: {e}")),
                retcode: 1,
                success: false,
            });
            let _ = tx.send(FromJob::Done(idx, ret));
        });
    }

    async fn on_job_output(&mut self, output: FromJob) {
        match output {
            FromJob::Done(idx, ret) => {
                if self.draining && self.agents[idx].is_ready() {
                    self.unacked.insert((idx, ret.jid.clone()));
                }
                // On disk before it is sent: an unacknowledged return survives anything.
                let ret = match self.agents[idx].job_ended(&ret) {
                    Ok(Some(ret)) => ret,
                    // Not for the master (return_job: False).
                    Ok(None) => return,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot keep the return on disk; sending it anyway");
                        ret
                    }
                };
                self.send_request(idx, &MinionRequest::Return(ret)).await;
            }
            FromJob::Start(idx, local) => self.start_local(idx, local),
            FromJob::Event(idx, tag, data) if tag == "__grains__" => {
                if data.is_object() {
                    self.agents[idx].grains = data.clone();
                    self.send_request(idx, &MinionRequest::Start { grains: data })
                        .await;
                }
            }
            FromJob::Event(idx, tag, data) => {
                self.send_request(idx, &MinionRequest::Event { tag, data })
                    .await
            }
            FromJob::RenderReply(idx, call, result) => {
                self.send_request(idx, &MinionRequest::RenderReply { call, result })
                    .await
            }
        }
    }

    async fn on_tick(&mut self) -> Result<(), LinkEnd> {
        let now = Instant::now();
        // Requests whose job gave up waiting (its thread timed out).
        self.waiting
            .retain(|_, (_, _, since)| now.duration_since(*since) < REQUEST_TIMEOUT);
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
                    self.resend_returns(idx).await;
                }
            }
        }
        if waiting_on_master
            && now.duration_since(self.last_heard_any) > self.settings.auth_timeout * 3
        {
            return Err(LinkEnd::MasterLost("no answer to authentication".into()));
        }
        Ok(())
    }
}

/// Salt's `saltutil.find_job JID`: the job's load while this identity
/// runs it, `{}` otherwise (the CLI keeps waiting for minions that answer).
fn find_job(agent: &Agent, job: &Job) -> JobReturn {
    let wanted = job.arg.first().and_then(Value::as_str).unwrap_or_default();
    let ret = match agent.running.get(wanted) {
        Some(running) => running.proc_data(),
        None => Value::Object(Default::default()),
    };
    JobReturn {
        jid: job.jid.clone(),
        id: agent.id.clone(),
        fun: job.fun.clone(),
        fun_args: job.arg.clone(),
        ret,
        retcode: 0,
        success: true,
    }
}

/// Tells the master of a job the minion started by itself, so the job
/// cache lists it, its return lands there and its bundle can be asked for.
/// A job whose return stays here and that needs nothing from the master
/// runs unannounced; a refusal is logged and the job runs anyway.
fn announce(master: &MasterChannel, local: LocalJob) {
    if !local.return_job && !crate::runner::needs_bundle(&local.job.fun) {
        return;
    }
    let jid = local.job.jid.clone();
    if let Err(e) = master.request(halite_proto::msg::RequestBody::OwnJob {
        job: local.job,
        schedule: local.schedule,
    }) {
        tracing::warn!(%jid, error = %e, "the master did not record the minion's own job");
    }
}
