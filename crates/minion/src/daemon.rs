//! The minion daemon's outer loop: connect to its master (or, with several
//! and `master_type: str`, to every one at once), serve until it is lost,
//! back off with jitter, try again (the next master of a failover list).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use halite_transport::Shutdown;
use tokio::sync::Semaphore;

use crate::config::MinionConfig;
use crate::link::returns::stop_jobs;
use crate::link::{run_link, Agent, JobOutputs, JobStarter, LinkEnd, LinkSettings};
use crate::runner::{HostRunner, JobRunner};
use crate::running::RunningJobs;
use crate::store::ReturnStore;

/// Waits [`reconnect_delay`] before reconnection attempt `attempt`;
/// false when the minion is told to shut down first.
pub async fn wait_to_reconnect(cfg: &MinionConfig, attempt: u32, shutdown: &Shutdown) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(reconnect_delay(cfg, attempt)) => true,
        _ = shutdown.triggered() => false,
    }
}

/// The delay before reconnection attempt `attempt` (0-based): exponential
/// from `recon_default` up to `recon_max` ms, with up to 50% random jitter
/// so a fleet does not reconnect in lockstep.
pub fn reconnect_delay(cfg: &MinionConfig, attempt: u32) -> Duration {
    let base = cfg
        .recon_default
        .max(1)
        .saturating_mul(1u64 << attempt.min(16))
        .min(cfg.recon_max.max(cfg.recon_default));
    let jitter = if cfg.recon_randomize {
        halite_proto::crypto::random_u64().unwrap_or(0) % (base / 2 + 1)
    } else {
        0
    };
    Duration::from_millis(base / 2 + jitter + if cfg.recon_randomize { 0 } else { base / 2 })
}

/// `host[:port]` of a `master` entry as Salt's `parse_host_port` reads
/// it: `host`, `host:port`, `[v6]:port`; a bare IPv6 address has no
/// port. The port defaults to `default_port` (`master_port`).
pub fn split_master(entry: &str, default_port: u16) -> (String, u16) {
    let entry = entry.trim();
    if let Some(rest) = entry.strip_prefix('[') {
        if let Some((host, tail)) = rest.split_once(']') {
            let port = tail
                .strip_prefix(':')
                .and_then(|p| p.parse().ok())
                .unwrap_or(default_port);
            return (host.to_string(), port);
        }
    }
    match entry.split_once(':') {
        Some((host, port)) if !port.contains(':') => match port.parse() {
            Ok(port) => (host.to_string(), port),
            Err(_) => (entry.to_string(), default_port),
        },
        _ => (entry.to_string(), default_port),
    }
}

/// Link settings for the `master` entry `master` (`host` or `host:port`)
/// from the config, with the single master's pin and counters
/// (`pki_dir/minion_master.pub`, `cachedir/publications`).
pub fn link_settings(cfg: &MinionConfig, master: &str) -> LinkSettings {
    let (host, port) = split_master(master, cfg.master_port);
    LinkSettings {
        master: host,
        master_port: port,
        publish_port: cfg.publish_port,
        publish_port_fixed: cfg.publish_port != MinionConfig::default().publish_port,
        master_finger: cfg.master_finger.clone(),
        pinned_master_path: Some(cfg.pki_dir.join("minion_master.pub")),
        replay_path: Some(cfg.cachedir.join("publications")),
        auth_timeout: Duration::from_secs(cfg.auth_timeout.max(1)),
        acceptance_wait_time: Duration::from_secs(cfg.acceptance_wait_time.max(1)),
        alive_interval: Duration::from_secs(cfg.master_alive_interval.max(1)),
        max_concurrent_jobs: usize::try_from(cfg.process_count_max).unwrap_or(0),
        job_slots: None,
        caller: false,
        shutdown_grace: Duration::from_secs(cfg.shutdown_grace),
        mine_interval: crate::mine::interval(&cfg.extra),
        resend_after: crate::link::resend_after(&cfg.extra),
    }
}

/// How the minion uses its `master` list (`master_type`, Salt's key).
#[derive(Debug, PartialEq, Eq)]
pub enum MasterPlan {
    /// `master_type: str` (the default) with several masters: connect to
    /// every one at once and answer each (Salt's hot multi-master).
    Hot(Vec<String>),
    /// One master, or `master_type: failover`: one master at a time, the
    /// next of the list when it is lost (shuffled once with `random_master`).
    Failover(Vec<String>),
    /// `master_type: disable`: no master at all.
    Disabled,
}

impl MasterPlan {
    /// The plan for `cfg`, or why its `master_type` cannot be served.
    pub fn of(cfg: &MinionConfig) -> anyhow::Result<MasterPlan> {
        let mut masters: Vec<String> = cfg
            .master
            .iter()
            .map(|m| m.trim().to_string())
            .filter(|m| !m.is_empty())
            .collect();
        if masters.is_empty() {
            masters.push("salt".into());
        }
        match cfg.master_type.as_str() {
            "str" | "" if masters.len() > 1 => Ok(MasterPlan::Hot(masters)),
            "str" | "" => Ok(MasterPlan::Failover(masters)),
            "failover" => {
                if cfg.random_master {
                    shuffle(&mut masters);
                }
                Ok(MasterPlan::Failover(masters))
            }
            "disable" => Ok(MasterPlan::Disabled),
            "func" => anyhow::bail!(
                "master_type: func (the master's address from a Python function) is not supported by halite; list the masters in `master` with master_type: str or failover"
            ),
            other => anyhow::bail!(
                "unknown master_type '{other}': use str (every listed master at once), failover or disable"
            ),
        }
    }
}

/// Fisher-Yates with the system's random numbers (`random_master`).
fn shuffle(list: &mut [String]) {
    for i in (1..list.len()).rev() {
        let r = halite_proto::crypto::random_u64().unwrap_or(0);
        let j = usize::try_from(r % (i as u64 + 1)).unwrap_or(0);
        list.swap(i, j);
    }
}

/// Where one master of a hot multi-master minion keeps its state: its
/// pinned key, the publication counters of its publish keys and the
/// returns it has not acknowledged, each below a directory named after
/// `host_port` (masters need not share a key, and their epochs and
/// returns are their own).
pub struct MasterDirs {
    /// `pki_dir/masters/<host_port>/minion_master.pub`.
    pub pin: PathBuf,
    /// `cachedir/masters/<host_port>/publications`.
    pub replay: PathBuf,
    /// `cachedir/masters/<host_port>/returns`.
    pub returns: PathBuf,
}

impl MasterDirs {
    /// The single master's places (one master, or failover masters, which
    /// share one key as in Salt).
    pub fn shared(cfg: &MinionConfig) -> Self {
        MasterDirs {
            pin: cfg.pki_dir.join("minion_master.pub"),
            replay: cfg.cachedir.join("publications"),
            returns: cfg.cachedir.join("returns"),
        }
    }

    /// The places of master `entry` of a hot multi-master minion.
    pub fn of(cfg: &MinionConfig, entry: &str) -> Self {
        let (host, port) = split_master(entry, cfg.master_port);
        let name: String = format!("{host}_{port}")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let pki = cfg.pki_dir.join("masters").join(&name);
        let cache = cfg.cachedir.join("masters").join(&name);
        MasterDirs {
            pin: pki.join("minion_master.pub"),
            replay: cache.join("publications"),
            returns: cache.join("returns"),
        }
    }
}

/// What every master a minion serves shares: who it is, how it runs
/// jobs, how many at once, and when to stop.
#[derive(Clone)]
struct Shared {
    cfg: MinionConfig,
    grains: serde_json::Value,
    runner: Arc<dyn JobRunner>,
    job_slots: Option<Arc<Semaphore>>,
    shutdown: Shutdown,
}

/// Runs the minion until `shutdown` is triggered, then lets its running
/// jobs finish (or abandons them after `shutdown_grace`, their returns
/// kept on disk for the next start).
pub async fn run(cfg: MinionConfig, shutdown: Shutdown) -> anyhow::Result<()> {
    halite_proto::validate_minion_id(&cfg.id).context("the minion id is not usable")?;
    let plan = MasterPlan::of(&cfg)?;
    let identity = halite_proto::keyfile::load_or_create_identity(&cfg.pki_dir, "minion")?;
    tracing::info!(id = %cfg.id, fingerprint = %identity.public().fingerprint(), "minion identity loaded");
    drop(identity);
    // Returns and publication counters live here: readable by root alone.
    halite_proto::keyfile::ensure_private_dir(&cfg.cachedir)
        .context("cannot create the minion's cachedir")?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&cfg.cachedir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| {
                format!("cannot make {} private (mode 0700)", cfg.cachedir.display())
            })?;
    }
    let runner = Arc::new(HostRunner::new(cfg.opts()));
    let grains = {
        let runner = runner.clone();
        let id = cfg.id.clone();
        tokio::task::spawn_blocking(move || runner.grains(&id))
            .await
            .unwrap_or(serde_json::Value::Null)
    };
    // One limit for the whole process, whichever master sent the job.
    let max = usize::try_from(cfg.process_count_max).unwrap_or(0);
    let shared = Shared {
        grains,
        runner,
        job_slots: (max > 0).then(|| Arc::new(Semaphore::new(max))),
        shutdown: shutdown.clone(),
        cfg,
    };
    match plan {
        MasterPlan::Disabled => {
            tracing::warn!("master_type: disable: this minion connects to no master");
            shutdown.triggered().await;
        }
        MasterPlan::Failover(masters) => {
            let dirs = MasterDirs::shared(&shared.cfg);
            let running = RunningJobs::default();
            let (agents, outputs) = identity_for(&shared, &dirs, running.clone())?;
            start_scheduler(&shared, running, outputs.starter(&agents, 0));
            serve(shared, masters, dirs, agents, outputs).await?;
        }
        MasterPlan::Hot(masters) => {
            tracing::info!(
                ?masters,
                "hot multi-master: serving every listed master at once"
            );
            let mut links = tokio::task::JoinSet::new();
            let mut failed = None;
            // One list of running jobs and one scheduler for the minion:
            // its own jobs go to the first master with a session.
            let running = RunningJobs::default();
            let mut starter: Option<JobStarter> = None;
            for master in masters {
                let dirs = MasterDirs::of(&shared.cfg, &master);
                let (agents, outputs) = match identity_for(&shared, &dirs, running.clone()) {
                    Ok(parts) => parts,
                    Err(e) => {
                        tracing::error!(%master, error = %format!("{e:#}"), "a master's link could not start");
                        failed.get_or_insert(e);
                        continue;
                    }
                };
                let this = outputs.starter(&agents, 0);
                starter = Some(match starter {
                    Some(s) => s.or_else(this),
                    None => this,
                });
                links.spawn(serve(shared.clone(), vec![master], dirs, agents, outputs));
            }
            if let Some(starter) = starter {
                start_scheduler(&shared, running, starter);
            }
            while let Some(done) = links.join_next().await {
                match done {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        tracing::error!(error = %format!("{e:#}"), "a master's link could not start");
                        failed.get_or_insert(e);
                    }
                    Err(e) => tracing::error!(error = %e, "a master's link ended abnormally"),
                }
            }
            if let Some(e) = failed {
                return Err(e);
            }
        }
    }
    tracing::info!("halite-minion shutting down");
    Ok(())
}

/// Returns once the master `entry` accepts a connection again (checked
/// every `master_failback_interval` s, else `master_alive_interval`);
/// never while the minion is stopping, so a draining link is not cut.
async fn first_master_back(
    cfg: &MinionConfig,
    entry: &str,
    failed_before: u32,
    shutdown: &Shutdown,
) {
    let (host, port) = split_master(entry, cfg.master_port);
    let every = match cfg.master_failback_interval {
        0 => cfg.master_alive_interval.max(1),
        n => n,
    };
    // Each failback that did not hold (a first master that accepts
    // connections but not this minion) doubles the wait, up to an hour,
    // so a working link is not cut every interval.
    let every = every
        .saturating_mul(1u64 << failed_before.min(12))
        .min(3600);
    let patience = Duration::from_secs(cfg.auth_timeout.max(1));
    loop {
        tokio::time::sleep(Duration::from_secs(every)).await;
        if shutdown.is_triggered() {
            std::future::pending::<()>().await;
        }
        let probe = tokio::net::TcpStream::connect((host.as_str(), port));
        if let Ok(Ok(_)) = tokio::time::timeout(patience, probe).await {
            return;
        }
    }
}

/// The minion's identity as the link to one master (or one failover
/// list) serves it, with its own places (`dirs`) and the minion's shared
/// list of running jobs; and the outputs its jobs send back on, which
/// outlive each connection (a job finishing between two keeps its return).
fn identity_for(
    shared: &Shared,
    dirs: &MasterDirs,
    running: RunningJobs,
) -> anyhow::Result<(Vec<Agent>, JobOutputs)> {
    for dir in [dirs.pin.parent(), dirs.replay.parent()]
        .into_iter()
        .flatten()
    {
        halite_proto::keyfile::ensure_private_dir(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let identity = halite_proto::keyfile::load_or_create_identity(&shared.cfg.pki_dir, "minion")?;
    let store = ReturnStore::disk(dirs.returns.clone())
        .with_context(|| format!("cannot create {}", dirs.returns.display()))?;
    let agent = Agent::new(
        shared.cfg.id.clone(),
        identity,
        shared.grains.clone(),
        store,
    )
    .with_running(running);
    Ok((vec![agent], JobOutputs::new()))
}

/// Starts the minion's scheduler (once per process, whatever the number
/// of masters): its jobs start through `starter`.
fn start_scheduler(shared: &Shared, running: RunningJobs, starter: JobStarter) {
    crate::schedule::start(
        &shared.cfg.opts(),
        &shared.cfg.id,
        running,
        starter,
        shared.runner.clone(),
        &shared.shutdown,
    );
}

/// Serves `masters` one at a time (the next when one is lost, with
/// jittered backoff) until the shutdown, then ends this link's jobs.
async fn serve(
    shared: Shared,
    masters: Vec<String>,
    dirs: MasterDirs,
    mut agents: Vec<Agent>,
    mut outputs: JobOutputs,
) -> anyhow::Result<()> {
    let Shared {
        cfg,
        runner,
        job_slots,
        shutdown,
        ..
    } = shared;
    let mut attempt = 0u32;
    let mut master_idx = 0usize;
    // master_failback: whether this link is a failback, and how many did not hold.
    let mut failing_back = false;
    let mut failbacks_failed = 0u32;
    loop {
        let master = masters
            .get(master_idx % masters.len().max(1))
            .cloned()
            .unwrap_or_else(|| "salt".into());
        let mut settings = link_settings(&cfg, &master);
        settings.pinned_master_path = Some(dirs.pin.clone());
        settings.replay_path = Some(dirs.replay.clone());
        settings.job_slots = job_slots.clone();
        tracing::info!(%master, "connecting to master");
        let started = std::time::Instant::now();
        let link = run_link(
            &settings,
            &mut agents,
            runner.clone(),
            &mut outputs,
            &shutdown,
        );
        // On a later master of a failover list with master_failback: the
        // link ends as soon as the first master answers again.
        let failback_to = (cfg.master_failback && !master_idx.is_multiple_of(masters.len().max(1)))
            .then(|| masters.first().cloned())
            .flatten();
        let end = match failback_to {
            Some(first) => tokio::select! {
                end = link => end,
                () = first_master_back(&cfg, &first, failbacks_failed, &shutdown) => {
                    tracing::info!(%first, "the first master answers again; failing back to it (master_failback)");
                    master_idx = 0;
                    attempt = 0;
                    failing_back = true;
                    continue;
                }
            },
            None => link.await,
        };
        if std::mem::take(&mut failing_back) {
            if started.elapsed() > Duration::from_secs(60) {
                failbacks_failed = 0;
            } else {
                failbacks_failed = failbacks_failed.saturating_add(1);
            }
        }
        match end {
            LinkEnd::Shutdown => break,
            LinkEnd::MasterLost(reason) => {
                tracing::warn!(%master, %reason, "master lost");
                if started.elapsed() > Duration::from_secs(60) {
                    attempt = 0;
                }
                master_idx += 1;
                let waited = wait_to_reconnect(&cfg, attempt, &shutdown).await;
                attempt = attempt.saturating_add(1);
                if !waited {
                    break;
                }
            }
        }
    }
    // Jobs still running here had no master to return to (or outlived the grace).
    stop_jobs(
        &mut agents,
        &mut outputs,
        &shutdown,
        Duration::from_secs(cfg.shutdown_grace),
    )
    .await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn master_entries_read_like_salts_parse_host_port() {
        assert_eq!(split_master("m1", 4506), ("m1".into(), 4506));
        assert_eq!(split_master("m1:4606", 4506), ("m1".into(), 4606));
        assert_eq!(split_master("[::1]:4606", 4506), ("::1".into(), 4606));
        assert_eq!(split_master("::1", 4506), ("::1".into(), 4506));
        assert_eq!(split_master("m1:x", 4506), ("m1:x".into(), 4506));
    }

    #[test]
    fn a_master_list_is_hot_unless_failover_is_asked() {
        let cfg = |master: &[&str], master_type: &str| MinionConfig {
            master: master.iter().map(|m| m.to_string()).collect(),
            master_type: master_type.into(),
            ..MinionConfig::default()
        };
        assert_eq!(
            MasterPlan::of(&cfg(&["a", "b"], "str")).unwrap(),
            MasterPlan::Hot(vec!["a".into(), "b".into()])
        );
        assert_eq!(
            MasterPlan::of(&cfg(&["a"], "str")).unwrap(),
            MasterPlan::Failover(vec!["a".into()])
        );
        assert_eq!(
            MasterPlan::of(&cfg(&["a", "b"], "failover")).unwrap(),
            MasterPlan::Failover(vec!["a".into(), "b".into()])
        );
        assert_eq!(
            MasterPlan::of(&cfg(&["a"], "disable")).unwrap(),
            MasterPlan::Disabled
        );
        let err = MasterPlan::of(&cfg(&["a"], "func"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not supported"), "{err}");
        assert!(MasterPlan::of(&cfg(&["a"], "sideways")).is_err());
        // Two masters on one host keep apart.
        let c = cfg(&["127.0.0.1:4506", "127.0.0.1:4606"], "str");
        assert_ne!(
            MasterDirs::of(&c, "127.0.0.1:4506").pin,
            MasterDirs::of(&c, "127.0.0.1:4606").pin
        );
    }

    #[test]
    fn backoff_grows_to_the_cap_with_jitter() {
        let cfg = MinionConfig {
            recon_default: 100,
            recon_max: 1000,
            ..MinionConfig::default()
        };
        for attempt in 0..20 {
            let d = reconnect_delay(&cfg, attempt).as_millis() as u64;
            let base = (100u64 << attempt.min(16)).min(1000);
            assert!(
                d >= base / 2 && d <= base,
                "attempt {attempt}: {d} not in [{}, {base}]",
                base / 2
            );
        }
        let fixed = MinionConfig {
            recon_randomize: false,
            ..cfg
        };
        assert_eq!(reconnect_delay(&fixed, 0), Duration::from_millis(100));
    }
}
