//! `halite-call` through the master (Salt's salt-call without `--local`):
//! one identity authenticates on a caller link (its session lives beside
//! the minion daemon's), runs the one call as a job would run (bundle and
//! `salt://` files from the master), and sends its return with jid `req`;
//! the master gives it a jid and keeps it in the job cache, as Salt's
//! `_return` of a salt-call run.

use super::*;

/// Why a call through the master could not run.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The master refused this minion (key pending, rejected...); the
    /// text says what to do.
    #[error("{0}")]
    Refused(String),
    /// The master could not be reached or stopped answering.
    #[error("cannot reach the master at {master}: {reason}; check `master` and `master_port` in the minion config and that halite-master runs there")]
    Unreachable {
        /// The master's address.
        master: String,
        /// What went wrong.
        reason: String,
    },
    /// The process was told to stop before the call finished.
    #[error("interrupted before the call finished")]
    Interrupted,
}

/// What a call through the master returned.
pub struct CallOutcome {
    /// The function's return, as the minion computed it.
    pub ret: JobReturn,
    /// The jid the master gave the call in its job cache; `None` when the
    /// return was not sent (`no_return_event`) or not acknowledged in time.
    pub jid: Option<String>,
}

/// Runs `job` (jid [`halite_proto::jid::CALLER_JID`]) as `agent` against
/// the master of `settings` (which must have `caller` set). With
/// `send_return`, the return goes to the master's job cache and the
/// master's acknowledgement is awaited for `auth_timeout`; the call's
/// return is answered either way once the function ran.
pub async fn call_master(
    settings: &LinkSettings,
    agent: &mut Agent,
    runner: Arc<dyn JobRunner>,
    job: Job,
    send_return: bool,
    shutdown: &Shutdown,
) -> Result<CallOutcome, CallError> {
    let lost = |reason: String| CallError::Unreachable {
        master: format!("{}:{}", settings.master, settings.master_port),
        reason,
    };
    let mut outputs = JobOutputs::new();
    let agents = std::slice::from_mut(agent);
    let (mut link, mut watch) =
        match Link::connect(settings, agents, runner, &outputs, shutdown).await {
            Ok(parts) => parts,
            Err(LinkEnd::MasterLost(reason)) => return Err(lost(reason)),
            Err(LinkEnd::Shutdown) => return Err(CallError::Interrupted),
        };
    let job = Arc::new(job);
    let mut started = false;
    let mut ret: Option<PackedReturn> = None;
    let mut ack_by: Option<Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let stop = shutdown.triggered();
    tokio::pin!(stop);
    loop {
        if let Some(reason) = link.refused.take() {
            return Err(CallError::Refused(reason));
        }
        if !started && link.agents[0].is_ready() {
            started = true;
            link.start_job(0, job.clone());
        }
        if let Some(ret) = &ret {
            let acked = link.acked.first().cloned();
            if acked.is_some() || ack_by.is_some_and(|by| Instant::now() >= by) {
                if send_return && acked.is_none() {
                    tracing::warn!(
                        "the master did not acknowledge the return; it is not in its job cache"
                    );
                }
                return Ok(CallOutcome {
                    ret: unpacked(ret),
                    jid: acked,
                });
            }
        }
        // Once the function ran, a lost master only loses the return.
        let finish = |ret: &Option<PackedReturn>, reason: String| match ret {
            Some(ret) => {
                tracing::warn!(%reason, "the return could not reach the master");
                Ok(CallOutcome {
                    ret: unpacked(ret),
                    jid: None,
                })
            }
            None => Err(lost(reason)),
        };
        tokio::select! {
            _ = &mut stop => return Err(CallError::Interrupted),
            msg = link.dealer.recv() => match msg {
                Ok(frames) => {
                    for frame in frames {
                        if let Err(LinkEnd::MasterLost(reason)) = link.on_master_frame(&frame).await {
                            return finish(&ret, reason);
                        }
                    }
                }
                Err(e) => return finish(&ret, format!("receive failed: {e}")),
            },
            _ = watch.disconnected() => {
                return finish(&ret, "the master closed the connection".into());
            }
            Some(output) = outputs.rx.recv() => {
                if let FromJob::Done(_, done) = &output {
                    ret = Some(done.clone());
                    ack_by = Some(Instant::now() + settings.auth_timeout);
                    if !send_return {
                        ack_by = Some(Instant::now());
                        continue;
                    }
                }
                link.on_job_output(output).await;
            }
            Some(request) = outputs.requests_rx.recv() => link.on_job_request(request).await,
            _ = tick.tick() => {
                if let Err(LinkEnd::MasterLost(reason)) = link.on_tick().await {
                    return finish(&ret, reason);
                }
            }
        }
    }
}

/// The call's return as data, for its caller to print (the job's thread
/// encoded it for the master; a value that does not read back, which
/// our own encoder never gives, is reported in its place).
fn unpacked(ret: &PackedReturn) -> JobReturn {
    ret.clone().unpack().unwrap_or_else(|e| JobReturn {
        jid: ret.jid.clone(),
        id: ret.id.clone(),
        fun: ret.fun.clone(),
        fun_args: ret.fun_args.clone(),
        ret: Value::String(format!("The return of {} cannot be read: {e}", ret.fun)),
        retcode: 1,
        success: false,
    })
}
