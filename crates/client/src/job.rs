//! Publish one job through the master's local socket and wait for its
//! returns: what `halite-run manage.*` and the orchestration states
//! (`salt.state`, `salt.function`) need, where Salt calls
//! `LocalClient.cmd` / `saltutil.cmd`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::local::{LocalBody, LocalClient, LocalError, LocalReply};
use crate::MasterConfig;

/// One job to publish.
#[derive(Debug, Clone)]
pub struct JobRequest {
    /// The target expression.
    pub tgt: String,
    /// How the target is read (`glob`, `list`, `grain`, `compound`...).
    pub tgt_type: String,
    /// The function to run (`mod.fun`).
    pub fun: String,
    /// Its positional arguments.
    pub arg: Vec<Value>,
    /// Its keyword arguments.
    pub kwarg: Map<String, Value>,
    /// Who publishes (the job's `user`).
    pub user: String,
}

/// What came back from a job.
#[derive(Debug, Clone, Default)]
pub struct JobOutcome {
    /// The job id; `None` when no minion matched (nothing was published).
    pub jid: Option<String>,
    /// The minions the target selected.
    pub minions: Vec<String>,
    /// Each minion's return event data (`return`, `retcode`, `success`...),
    /// in the order the returns arrived.
    pub returns: Map<String, Value>,
    /// The minions that did not return within the timeout, sorted.
    pub missing: Vec<String>,
}

/// Publishes `req` on the master of `cfg` and waits up to `timeout` for
/// every selected minion's return.
pub fn run_job(
    cfg: &MasterConfig,
    req: &JobRequest,
    timeout: Duration,
) -> Result<JobOutcome, LocalError> {
    let mut client = LocalClient::connect(&cfg.local_socket(), &cfg.root_key_path())?;
    client.send(LocalBody::Publish {
        tgt: req.tgt.clone(),
        tgt_type: req.tgt_type.clone(),
        fun: req.fun.clone(),
        arg: req.arg.clone(),
        kwarg: req.kwarg.clone(),
        user: req.user.clone(),
        watch: true,
        progress: false,
    })?;
    let (jid, minions) = match client.next(None)? {
        Some(LocalReply::Started { jid, minions }) => (jid, minions),
        Some(LocalReply::Error(e)) => return Err(LocalError::Refused(e)),
        _ => {
            return Err(LocalError::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the master closed the connection without publishing",
            )))
        }
    };
    if minions.is_empty() {
        return Ok(JobOutcome::default());
    }
    let mut waiting: BTreeSet<String> = minions.iter().cloned().collect();
    let mut returns = Map::new();
    let mut deadline = Instant::now() + timeout;
    let mut last_round = false;
    while !waiting.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            if last_round {
                break;
            }
            // As Salt's LocalClient: minions still running the job (they
            // say so to saltutil.find_job) get another `timeout`; the
            // others a moment for a return already on its way.
            let gather = Duration::from_secs(cfg.gather_job_timeout.max(1));
            let busy = still_running(cfg, &jid, &waiting, gather)?;
            last_round = busy.is_empty();
            deadline = Instant::now()
                + if last_round {
                    Duration::from_millis(300)
                } else {
                    timeout
                };
            continue;
        }
        match client.next(Some(left))? {
            Some(LocalReply::Return { id, data }) if waiting.remove(&id) => {
                returns.insert(id, data);
            }
            Some(_) => {}
            // The master closed the stream before the deadline.
            None if Instant::now() < deadline => break,
            None => {}
        }
    }
    Ok(JobOutcome {
        jid: Some(jid),
        minions,
        returns,
        missing: waiting.into_iter().collect(),
    })
}

/// The minions of `ids` that say they still run job `jid`
/// (`saltutil.find_job`, answers awaited up to `wait`).
pub fn still_running(
    cfg: &MasterConfig,
    jid: &str,
    ids: &BTreeSet<String>,
    wait: Duration,
) -> Result<BTreeSet<String>, LocalError> {
    let mut client = LocalClient::connect(&cfg.local_socket(), &cfg.root_key_path())?;
    client.send(LocalBody::Publish {
        tgt: ids.iter().cloned().collect::<Vec<_>>().join(","),
        tgt_type: "list".into(),
        fun: "saltutil.find_job".into(),
        arg: vec![Value::from(jid)],
        kwarg: Map::new(),
        user: "root".into(),
        watch: true,
        progress: false,
    })?;
    let asked = match client.next(Some(wait))? {
        Some(LocalReply::Started { minions, .. }) => minions.len(),
        _ => return Ok(BTreeSet::new()),
    };
    let mut busy = BTreeSet::new();
    let mut answered = 0;
    let deadline = Instant::now() + wait;
    while answered < asked {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match client.next(Some(left))? {
            Some(LocalReply::Return { id, data }) => {
                answered += 1;
                let running = data
                    .get("return")
                    .and_then(Value::as_object)
                    .is_some_and(|m| !m.is_empty());
                if running {
                    busy.insert(id);
                }
            }
            Some(_) => {}
            None => break,
        }
    }
    Ok(busy)
}

/// The batch size for `-b N` or `-b N%` over `total` minions (at least 1),
/// or Salt's message for a bad one.
pub fn batch_size(spec: &str, total: usize) -> Result<usize, String> {
    let invalid =
        || format!("Invalid batch data sent: {spec}\nData must be in the form of %10, 10% or 3");
    let n = if let Some(pct) = spec.strip_suffix('%').or_else(|| spec.strip_prefix('%')) {
        let pct: f64 = pct.trim().parse().map_err(|_| invalid())?;
        (pct / 100.0 * total as f64).floor() as usize
    } else {
        spec.trim().parse().map_err(|_| invalid())?
    };
    Ok(n.max(1))
}

/// Salt's batch mode for one job: the minions `req` targets run it at most
/// `batch` (`N` or `N%`) at a time, the next starting as soon as one
/// returns (a sliding window), each with its own job; the outcomes merged
/// (the first job's jid).
pub fn run_batched(
    cfg: &MasterConfig,
    req: &JobRequest,
    batch: &str,
    timeout: Duration,
) -> Result<JobOutcome, LocalError> {
    let mut client = LocalClient::connect(&cfg.local_socket(), &cfg.root_key_path())?;
    let targets: Vec<String> = match client.call(LocalBody::Resolve {
        tgt: req.tgt.clone(),
        tgt_type: req.tgt_type.clone(),
    })? {
        LocalReply::Value(v) => serde_json::from_value(v).unwrap_or_default(),
        _ => Vec::new(),
    };
    let size = batch_size(batch, targets.len()).map_err(LocalError::Refused)?;
    let (tx, rx) = std::sync::mpsc::channel::<Result<JobOutcome, LocalError>>();
    let mut merged = JobOutcome {
        minions: targets.clone(),
        ..JobOutcome::default()
    };
    std::thread::scope(|s| -> Result<(), LocalError> {
        let mut queue = targets.iter();
        let mut running = 0usize;
        loop {
            while running < size {
                let Some(id) = queue.next() else { break };
                let one = JobRequest {
                    tgt: id.clone(),
                    tgt_type: "list".into(),
                    ..req.clone()
                };
                let tx = tx.clone();
                running += 1;
                s.spawn(move || {
                    let _ = tx.send(run_job(cfg, &one, timeout));
                });
            }
            if running == 0 {
                return Ok(());
            }
            let Ok(outcome) = rx.recv() else {
                return Ok(());
            };
            running -= 1;
            let outcome = outcome?;
            if merged.jid.is_none() {
                merged.jid = outcome.jid;
            }
            merged.returns.extend(outcome.returns);
            merged.missing.extend(outcome.missing);
        }
    })?;
    merged.missing.sort();
    Ok(merged)
}
