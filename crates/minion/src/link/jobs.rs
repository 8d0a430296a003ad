//! Job intake: publications verified and opened, jobs started on
//! blocking threads (at most `max_concurrent_jobs` at once), their
//! returns and events sent back on the link, and `saltutil.find_job`.

use super::*;
use crate::packing::{pack_return, progress_event};

/// A job thread's events on their way to the link (issue 25). They wait
/// in the job's own buffer, and only the first event into an empty buffer
/// wakes the link, which then takes all that wait: one channel message per
/// wake-up instead of one per state. At 100 swarm identities firing 1,000
/// progress events each, pushing each event on the shared channel was a
/// fifth of the swarm's CPU (tokio's list channel walks its blocks when
/// many threads send at once). Nothing waits on a timer: a link that
/// keeps up takes each event as it comes.
struct ForwardEvents {
    agent: usize,
    tx: mpsc::UnboundedSender<FromJob>,
    waiting: Arc<JobEvents>,
}

/// The events one job fired that its link has not taken yet.
#[derive(Default)]
pub(super) struct JobEvents {
    queued: std::sync::Mutex<Vec<JobEvent>>,
}

/// One event of a job, as its link takes it.
#[derive(Debug, PartialEq)]
pub(super) enum JobEvent {
    /// An event a function fired: (tag, data).
    Value(String, Value),
    /// A state's progress event, encoded whole as one `MinionEvent` of a
    /// batch with its data packed ([`progress_event`]): on the job's own
    /// thread straight from the state's return, never copied into a
    /// `Value` nor encoded again by the link (issue 25: 1,000 per
    /// highstate, on every identity, and the link is one task for all).
    Progress(Vec<u8>),
}

impl JobEvents {
    /// The queue (a job thread that panicked holding it left it whole:
    /// events are only pushed or taken under the lock).
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<JobEvent>> {
        self.queued
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes every waiting event, oldest first.
    pub(super) fn take(&self) -> Vec<JobEvent> {
        std::mem::take(&mut *self.lock())
    }
}

impl ForwardEvents {
    fn push(&self, event: JobEvent) {
        let first = {
            let mut queued = self.waiting.lock();
            queued.push(event);
            queued.len() == 1
        };
        // Sent after the lock: the link takes what waits when it gets here,
        // which is at least this event (events before a job's `Done` are
        // always taken before it, as their wake-up is queued ahead of it).
        if first {
            let _ = self
                .tx
                .send(FromJob::Events(self.agent, self.waiting.clone()));
        }
    }
}

impl EventSink for ForwardEvents {
    fn fire(&self, tag: &str, data: &Value) {
        self.push(JobEvent::Value(tag.to_string(), data.clone()));
    }
    fn fire_owned(&self, tag: &str, data: Value) {
        self.push(JobEvent::Value(tag.to_string(), data));
    }
    fn fire_progress(&self, tag: &str, ret: &halite_state::SmallDict, len: usize) {
        let event = match progress_event(tag, ret, len) {
            Some(bytes) => JobEvent::Progress(bytes),
            // Too large for a frame: the link logs and drops it, as before.
            None => JobEvent::Value(tag.to_string(), halite_state::progress_data(ret, len)),
        };
        self.push(event);
    }
}

impl Link<'_> {
    pub(super) fn on_publication_frame(&mut self, frame: &[u8]) {
        match decode::<Publication>(frame) {
            Ok(publication) => self.open_publication(publication),
            Err(e) => tracing::debug!(error = %e, "undecodable publication dropped"),
        }
    }

    pub(super) fn open_publication(&mut self, publication: Publication) {
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
        // Recorded before the job runs (its file written by the guard's own
        // thread, never waited for here): a replay after a restart is refused.
        if let Err(e) = self.replay.record(publication.epoch, publication.counter) {
            tracing::error!(error = %e, jid = %job.jid, "cannot record the publication counter in cachedir; the job runs, but a replay of it after a restart would not be refused");
        }
        let job = Arc::new(job);
        for idx in idxs {
            self.start_job(idx, job.clone());
        }
    }

    pub(super) fn hold(&mut self, master: PublicKey, publication: Publication) {
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
    pub(super) fn start_local(&mut self, idx: usize, local: LocalJob) {
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

    pub(super) fn start_job(&mut self, idx: usize, job: Arc<Job>) {
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
        agent.mark_seen(&job.jid);
        let id = agent.id.clone();
        if job.fun == "saltutil.find_job" {
            // Answered at once from the running jobs, never queued behind them.
            let ret = pack_return(find_job(agent, &job));
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
                let _ = tx.send(FromJob::Grains(idx, fresh));
                let ret = JobReturn {
                    jid: job.jid.clone(),
                    id,
                    fun: job.fun.clone(),
                    fun_args: job.arg.clone(),
                    ret: Value::Bool(true),
                    retcode: 0,
                    success: true,
                };
                let _ = tx.send(FromJob::Done(idx, pack_return(ret)));
                return;
            }
            let events: Arc<dyn EventSink> = Arc::new(ForwardEvents {
                agent: idx,
                tx: tx.clone(),
                waiting: Arc::default(),
            });
            let job_for_thread = job.clone();
            let id_for_thread = id.clone();
            let runner_for_thread = runner.clone();
            let result = tokio::task::spawn_blocking(move || {
                if let Some(local) = local {
                    announce(&master, local);
                }
                runner_for_thread.run(&id_for_thread, &grains, &job_for_thread, events, master)
            })
            .await;
            // Salt's sync_grains/sync_all refresh the minion's modules and
            // grains: the master hears the new grains (custom `_grains`)
            // before the job's return, so `-G` targets see them at once.
            if refreshes_grains(&job) && result.as_ref().is_ok_and(|r| r.success) {
                let fresh = {
                    let runner = runner.clone();
                    let id = id.clone();
                    tokio::task::spawn_blocking(move || runner.grains(&id))
                        .await
                        .unwrap_or(Value::Null)
                };
                let _ = tx.send(FromJob::Grains(idx, fresh));
            }
            let ret = result.unwrap_or_else(|e| {
                pack_return(JobReturn {
                    jid: job.jid.clone(),
                    id,
                    fun: job.fun.clone(),
                    fun_args: job.arg.clone(),
                    ret: Value::String(format!("The minion function caused an exception: {e}")),
                    retcode: 1,
                    success: false,
                })
            });
            let _ = tx.send(FromJob::Done(idx, ret));
        });
    }

    pub(super) async fn on_job_output(&mut self, output: FromJob) {
        match output {
            FromJob::Done(idx, ret) => {
                if self.draining && self.agents[idx].is_ready() {
                    self.unacked.insert((idx, ret.jid.clone()));
                }
                // On disk before it is sent: an unacknowledged return survives anything.
                let ret = match self.agents[idx].job_ended(ret) {
                    Ok(Some(ret)) => ret,
                    // Not for the master (return_job: False).
                    Ok(None) => return,
                    Err(not_kept) => {
                        let returns::NotKept { error, ret } = *not_kept;
                        tracing::error!(%error, "cannot keep the return on disk; sending it anyway");
                        ret
                    }
                };
                // Its events first: the master fires them before the return.
                self.flush_events_of(idx).await;
                self.send_return(idx, ret).await;
            }
            FromJob::Start(idx, local) => self.start_local(idx, local),
            FromJob::Grains(idx, data) => {
                if data.is_object() {
                    self.agents[idx].grains = data.clone();
                    self.send_request(idx, &MinionRequest::Start { grains: data })
                        .await;
                }
            }
            FromJob::Events(idx, waiting) => {
                for event in waiting.take() {
                    self.queue_event(idx, event).await;
                }
            }
            FromJob::RenderReply(idx, jid, call, result) => {
                // Kept for a repeat of the call (not sent without a
                // session: the master asks again once there is one).
                self.agents[idx].kept_calls.done(&jid, call, &result);
                self.send_request(idx, &MinionRequest::RenderReply { call, result })
                    .await
            }
        }
    }
}

/// Whether `job` changes the minion's grains as Salt's module refresh
/// does: `saltutil.sync_grains`/`sync_all`, unless
/// called with `refresh=False`.
fn refreshes_grains(job: &Job) -> bool {
    matches!(
        job.fun.as_str(),
        "saltutil.sync_grains" | "saltutil.sync_all"
    ) && job.kwarg.get("refresh").is_none_or(halite_state::truthy)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A progress event encoded on the job's thread is, byte for byte,
    /// what the link sent when it encoded the event's `Value`.
    #[test]
    fn a_progress_event_packs_as_its_value_did() {
        let mut ret = halite_state::SmallDict::new();
        ret.insert("name", Value::from("/srv/out/web1/f1.conf"));
        ret.insert(
            "changes",
            serde_json::json!({"diff": "New file", "mode": "0644"}),
        );
        ret.insert("result", Value::Bool(true));
        ret.insert(
            "comment",
            Value::from("File /srv/out/web1/f1.conf updated ✓"),
        );
        ret.insert("__sls__", Value::from("bench"));
        ret.insert("__run_num__", Value::from(17));
        ret.insert("start_time", Value::from("18:24:01.123456"));
        ret.insert("duration", serde_json::json!(0.417));
        ret.insert("__id__", Value::from("f1"));
        for len in [1, 1000, 70_000] {
            let before = halite_proto::msg::MinionEvent::packed(
                "t".into(),
                &halite_state::progress_data(&ret, len),
            )
            .unwrap();
            let before = halite_proto::encode(&before).unwrap();
            assert_eq!(progress_event("t", &ret, len).unwrap(), before);
        }
        // And it reads back as the event and value the master fires.
        let event: halite_proto::msg::MinionEvent =
            decode(&progress_event("salt/job/1/prog/web1/17", &ret, 1000).unwrap()).unwrap();
        assert_eq!(event.tag, "salt/job/1/prog/web1/17");
        let back = event.into_data().unwrap();
        assert_eq!(back, halite_state::progress_data(&ret, 1000));
    }

    /// The sink queues a state's progress event packed, and any other
    /// event as its value, in the order fired, waking the link once.
    #[test]
    fn the_sink_queues_progress_packed_and_wakes_the_link_once() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let sink = ForwardEvents {
            agent: 3,
            tx,
            waiting: Arc::new(JobEvents::default()),
        };
        let mut ret = halite_state::SmallDict::new();
        ret.insert("result", Value::Bool(true));
        sink.fire_progress("salt/job/1/prog/web1/0", &ret, 2);
        sink.fire("custom/tag", &serde_json::json!({"a": 1}));
        let Ok(FromJob::Events(3, waiting)) = rx.try_recv() else {
            panic!("the link was not woken for agent 3");
        };
        assert!(rx.try_recv().is_err(), "woken once for both events");
        let events = waiting.take();
        assert_eq!(
            events,
            vec![
                JobEvent::Progress(progress_event("salt/job/1/prog/web1/0", &ret, 2).unwrap()),
                JobEvent::Value("custom/tag".into(), serde_json::json!({"a": 1})),
            ]
        );
    }
}
