//! Returns not yet acknowledged: kept on disk between links, resent
//! after each authentication, and the end of a stopping minion's jobs.

use super::*;
use crate::packing::pack_return;

/// Puts on disk the returns of jobs that finished while no link was up
/// (before a new one tries to connect, which may fail for a while), and
/// keeps the jobs the minion started meanwhile for the next session, and
/// the answers to render-time calls for the master's repeat; the events
/// they sent were for a session that is gone.
impl JobOutputs {
    pub(super) fn keep_finished_returns(&mut self, agents: &mut [Agent]) {
        while let Ok(output) = self.rx.try_recv() {
            if let FromJob::Start(idx, local) = output {
                // Started by the minion itself: it runs once a master answers.
                if let Some(agent) = agents.get_mut(idx) {
                    if agent.deferred.len() < DEFERRED_LOCAL_JOBS {
                        agent.deferred.push_back(local);
                    } else {
                        tracing::warn!(jid = %local.job.jid, fun = %local.job.fun, "scheduled job dropped: no session with a master and too many waiting");
                    }
                }
                continue;
            }
            if let FromJob::RenderReply(idx, jid, call, result) = output {
                // Kept: the master asks again on the next session.
                if let Some(agent) = agents.get_mut(idx) {
                    agent.kept_calls.done(&jid, call, &result);
                }
                continue;
            }
            if let FromJob::Done(idx, ret) = output {
                let Some(agent) = agents.get_mut(idx) else {
                    continue;
                };
                if let Err(not_kept) = agent.job_ended(ret) {
                    let NotKept { error, ret } = *not_kept;
                    tracing::error!(%error, jid = %ret.jid, "cannot keep the return on disk; it is lost");
                }
            }
        }
    }
}

impl Agent {
    /// A job of this identity ended: it is no longer running, and its
    /// return goes on disk until the master acknowledges it. `None` when
    /// the return is not for the master (a scheduled job with
    /// `return_job: False`); a signalled job's return says so.
    /// Taken as encoded by the job's thread: a 1,000-state return is not
    /// copied on its way, and the same bytes are kept and sent (shared by
    /// the store and the link: [`Arc`]).
    pub(super) fn job_ended(
        &mut self,
        ret: PackedReturn,
    ) -> Result<Option<Arc<PackedReturn>>, Box<NotKept>> {
        let ended = self.running.remove(&ret.jid);
        if ended.as_ref().is_some_and(|r| !r.return_job) {
            return Ok(None);
        }
        let ret = match ended.and_then(|r| r.signalled) {
            Some(signal) => pack_return(signalled_return(ret, signal)),
            None => ret,
        };
        let ret = Arc::new(ret);
        match self.store.put(&ret) {
            Ok(()) => Ok(Some(ret)),
            Err(error) => Err(Box::new(NotKept { error, ret })),
        }
    }
}

/// A return the minion could not keep on disk (it is still in hand).
pub(super) struct NotKept {
    /// Why it could not be written.
    pub error: std::io::Error,
    /// The return, to send anyway.
    pub ret: Arc<PackedReturn>,
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
    outputs.keep_finished_returns(agents);
    if left == 0 {
        return;
    }
    for agent in agents.iter_mut() {
        let abandoned: Vec<Arc<Job>> = agent.running.all().into_iter().map(|r| r.job).collect();
        for job in abandoned {
            tracing::warn!(id = %agent.id, jid = %job.jid, fun = %job.fun, "job abandoned at shutdown");
            let ret = abandoned_return(&agent.id, &job, grace);
            if let Err(not_kept) = agent.job_ended(pack_return(ret)) {
                let e = &not_kept.error;
                tracing::error!(error = %e, jid = %job.jid, "cannot keep the abandoned job's return on disk");
            }
        }
    }
}

/// The return of a job `saltutil.signal_job` stopped: Salt's job dies of
/// the signal and its return never comes; halite's job thread ends early
/// and its return says why, so the job cache tells what happened.
fn signalled_return(ret: PackedReturn, signal: i32) -> JobReturn {
    JobReturn {
        ret: Value::String(format!(
            "The job {} was stopped by signal {signal} (saltutil.signal_job)",
            ret.jid
        )),
        retcode: 1,
        success: false,
        jid: ret.jid,
        id: ret.id,
        fun: ret.fun,
        fun_args: ret.fun_args,
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

/// When each of an identity's returns waiting for its acknowledgement
/// was last sent on its session, so the periodic resend (every
/// `master_alive_interval`) sends again only a return that waited
/// `request_channel_timeout` for its acknowledgement, as a job's request
/// is (link/waiting.rs).
///
/// Issue 25, session 20: the resend used to send every unacknowledged
/// return each `master_alive_interval`, however recently it went out. A
/// swarm's identities authenticate within moments of each other, so 30 s
/// later, in the middle of a fleet run, every identity resent the return
/// it had just sent and whose acknowledgement was on its way (the master
/// acknowledges once the job cache commits): 45 returns of ~0.2 MB, sent,
/// decoded and checked twice at one instant of a 1,000-minion run.
#[derive(Default)]
pub(super) struct SentReturns(HashMap<String, Instant>);

impl SentReturns {
    /// Return `jid` was sent `now`.
    fn sent(&mut self, jid: &str, now: Instant) {
        self.0.insert(jid.to_string(), now);
    }

    /// The master acknowledged `jid`: nothing more to time.
    pub(super) fn acknowledged(&mut self, jid: &str) {
        self.0.remove(jid);
    }

    /// Whether return `jid` waited `after` for its acknowledgement since
    /// it was last sent (or was never sent on this session).
    fn due(&self, jid: &str, now: Instant, after: Duration) -> bool {
        self.0
            .get(jid)
            .is_none_or(|sent| now.duration_since(*sent) >= after)
    }
}

impl Link<'_> {
    /// Sends the returns kept on disk again (a new session). Their jids
    /// count as seen: once the master acknowledges one, the file goes,
    /// and a redelivery of that job arriving after the acknowledgement
    /// (publications and acknowledgements travel on different sockets)
    /// must not run it again.
    pub(super) async fn resend_returns(&mut self, idx: usize) {
        for ret in self.agents[idx].store.pending() {
            self.agents[idx].mark_seen(&ret.jid);
            self.send_return(idx, ret).await;
        }
    }

    /// The periodic resend on a live session: the returns of identity
    /// `idx` still unacknowledged `request_channel_timeout` after they
    /// were last sent (a return or its acknowledgement lost on the way,
    /// or a master that could not store it). One sent moments ago waits:
    /// its acknowledgement follows the job cache's commit.
    pub(super) async fn resend_unacknowledged(&mut self, idx: usize, now: Instant) {
        let after = self.settings.resend_after;
        for ret in self.agents[idx].store.pending() {
            if !self.agents[idx].returns_sent.due(&ret.jid, now, after) {
                continue;
            }
            tracing::debug!(jid = %ret.jid, id = %self.agents[idx].id, "return still unacknowledged; sending it again");
            self.agents[idx].mark_seen(&ret.jid);
            self.send_return(idx, ret).await;
        }
    }

    /// Sends a return as its bytes to a master whose `Ready` says
    /// `packed_returns` (encoded from the kept return, which is not
    /// copied: [`PackedReturnRequest`]), as a zstd frame when it says
    /// `zstd_returns` too and the return is large
    /// ([`crate::packing::framed_return`]); decoded, as before, to an
    /// older master.
    pub(super) async fn send_return(&mut self, idx: usize, ret: Arc<PackedReturn>) {
        self.agents[idx].returns_sent.sent(&ret.jid, Instant::now());
        if self.agents[idx].packed_returns {
            let agent = &mut self.agents[idx];
            let framed = if agent.zstd_returns {
                crate::packing::framed_return(&ret)
            } else {
                None
            };
            let ret: &PackedReturn = framed.as_ref().unwrap_or(&ret);
            let sealed = crate::packing::return_request(&PackedReturnRequest(ret), ret.ret.len())
                .and_then(|plain| agent.seal_plain(plain));
            if let Ok(Some(bytes)) = sealed {
                self.send(bytes).await;
            }
            return;
        }
        let jid = ret.jid.clone();
        match Arc::unwrap_or_clone(ret).unpack() {
            Ok(ret) => self.send_request(idx, &MinionRequest::Return(ret)).await,
            Err(e) => {
                tracing::error!(%jid, error = %e, "a kept return cannot be read; not sent");
            }
        }
    }
}

/// [`MinionRequest::PackedReturn`] of a borrowed return: serializes to
/// the same bytes (a test checks it), so a kept return is sent, and sent
/// again, without a copy of its value's bytes.
pub(super) struct PackedReturnRequest<'a>(pub &'a PackedReturn);

/// `MinionRequest::PackedReturn`'s place among the enum's variants (what
/// a format that writes variants by number would write).
const PACKED_RETURN_VARIANT: u32 = 2;

impl serde::Serialize for PackedReturnRequest<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_newtype_variant(
            "MinionRequest",
            PACKED_RETURN_VARIANT,
            "PackedReturn",
            self.0,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_borrowed_packed_return_encodes_as_the_request() {
        let ret = JobReturn {
            jid: "20261126181500000001".into(),
            id: "web1".into(),
            fun: "state.apply".into(),
            fun_args: vec![
                serde_json::json!("bench"),
                serde_json::json!({"test": true}),
            ],
            ret: serde_json::json!({"a": {"result": true, "comment": "é", "changes": {}}}),
            retcode: 0,
            success: true,
        };
        let packed = PackedReturn::pack(ret).unwrap();
        let owned = encode(&MinionRequest::PackedReturn(packed.clone())).unwrap();
        let borrowed = encode(&PackedReturnRequest(&packed)).unwrap();
        assert_eq!(borrowed, owned);
        let back: MinionRequest = decode(&borrowed).unwrap();
        assert_eq!(back, MinionRequest::PackedReturn(packed));
    }

    fn state_return(jid: &str) -> Arc<PackedReturn> {
        let states: serde_json::Map<String, Value> = (0..200)
            .map(|i| {
                let key = format!("test_|-s{i}_|-s{i}_|-succeed_without_changes");
                (
                    key,
                    serde_json::json!({"result": true, "comment": "Success!", "__run_num__": i}),
                )
            })
            .collect();
        Arc::new(
            PackedReturn::pack(JobReturn {
                jid: jid.into(),
                id: "web1".into(),
                fun: "state.apply".into(),
                fun_args: vec![],
                ret: Value::Object(states),
                retcode: 0,
                success: true,
            })
            .unwrap(),
        )
    }

    #[test]
    fn a_return_is_due_again_only_once_unacknowledged_for_the_resend_interval() {
        let after = Duration::from_secs(60);
        let t0 = Instant::now();
        let mut sent = SentReturns::default();
        // Never sent on this session (kept from before it): due.
        assert!(sent.due("20261127040000000001", t0, after));
        sent.sent("20261127040000000001", t0);
        assert!(!sent.due("20261127040000000001", t0 + Duration::from_secs(30), after));
        assert!(sent.due("20261127040000000001", t0 + after, after));
        // Sent again: the interval starts over.
        sent.sent("20261127040000000001", t0 + after);
        assert!(!sent.due("20261127040000000001", t0 + Duration::from_secs(90), after));
        sent.acknowledged("20261127040000000001");
        assert!(sent.0.is_empty());
    }

    /// What a resend (after a master restart, or a minion restart with
    /// its returns on disk) puts on the wire is what the first send did.
    #[test]
    fn a_resent_return_is_the_first_sends_bytes() {
        let sent = |r: &PackedReturn| encode(&PackedReturnRequest(r)).unwrap();
        // Swarm identities: the kept return is the one sent, not a copy.
        let memory = ReturnStore::memory();
        let ret = state_return("20261126181500000002");
        memory.put(&ret).unwrap();
        let pending = memory.pending();
        assert!(Arc::ptr_eq(&pending[0], &ret));
        assert_eq!(sent(&pending[0]), sent(&ret));
        memory.remove(&ret.jid);
        assert!(memory.pending().is_empty());
        // A real minion: the file read back after a restart.
        let dir = tempfile::tempdir().unwrap();
        let disk = ReturnStore::disk(dir.path().join("returns")).unwrap();
        disk.put(&ret).unwrap();
        drop(disk);
        let restarted = ReturnStore::disk(dir.path().join("returns")).unwrap();
        let pending = restarted.pending();
        assert_eq!(pending.len(), 1);
        assert_eq!(sent(&pending[0]), sent(&ret));
        restarted.remove(&ret.jid);
        assert!(restarted.pending().is_empty());
    }
}
