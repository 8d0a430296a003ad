//! The minion daemon's outer loop: connect to a master, serve until it is
//! lost, back off with jitter, try the next master of the list.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use halite_transport::Shutdown;

use crate::config::MinionConfig;
use crate::link::{run_link, stop_jobs, Agent, JobOutputs, LinkEnd, LinkSettings};
use crate::runner::{HostRunner, JobRunner};
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

/// Link settings for `master` from the config.
pub fn link_settings(cfg: &MinionConfig, master: &str) -> LinkSettings {
    LinkSettings {
        master: master.to_string(),
        master_port: cfg.master_port,
        publish_port: cfg.publish_port,
        master_finger: cfg.master_finger.clone(),
        pinned_master_path: Some(cfg.pki_dir.join("minion_master.pub")),
        replay_path: Some(cfg.cachedir.join("publications")),
        auth_timeout: Duration::from_secs(cfg.auth_timeout.max(1)),
        acceptance_wait_time: Duration::from_secs(cfg.acceptance_wait_time.max(1)),
        alive_interval: Duration::from_secs(cfg.master_alive_interval.max(1)),
        max_concurrent_jobs: usize::try_from(cfg.process_count_max).unwrap_or(0),
        shutdown_grace: Duration::from_secs(cfg.shutdown_grace),
    }
}

/// Runs the minion until `shutdown` is triggered, then lets its running
/// jobs finish (or abandons them after `shutdown_grace`, their returns
/// kept on disk for the next start).
pub async fn run(cfg: MinionConfig, shutdown: Shutdown) -> anyhow::Result<()> {
    halite_proto::validate_minion_id(&cfg.id).context("the minion id is not usable")?;
    let identity = halite_proto::keyfile::load_or_create_identity(&cfg.pki_dir, "minion")?;
    tracing::info!(id = %cfg.id, fingerprint = %identity.public().fingerprint(), "minion identity loaded");
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
    let store = ReturnStore::disk(cfg.cachedir.join("returns"))
        .context("cannot create cachedir/returns")?;
    let runner = Arc::new(HostRunner::new(cfg.opts()));
    let grains = {
        let runner = runner.clone();
        let id = cfg.id.clone();
        tokio::task::spawn_blocking(move || runner.grains(&id))
            .await
            .unwrap_or(serde_json::Value::Null)
    };
    let mut agents = vec![Agent::new(cfg.id.clone(), identity, grains, store)];
    let runner: Arc<dyn JobRunner> = runner;
    // Outlives each connection: a job finishing between two keeps its return.
    let mut outputs = JobOutputs::new();
    crate::schedule::start(
        &cfg.opts(),
        &agents[0],
        0,
        &outputs,
        runner.clone(),
        &shutdown,
    );
    let mut attempt = 0u32;
    let mut master_idx = 0usize;
    loop {
        let master = cfg
            .master
            .get(master_idx % cfg.master.len().max(1))
            .cloned()
            .unwrap_or_else(|| "salt".into());
        let settings = link_settings(&cfg, &master);
        tracing::info!(%master, "connecting to master");
        let started = std::time::Instant::now();
        match run_link(
            &settings,
            &mut agents,
            runner.clone(),
            &mut outputs,
            &shutdown,
        )
        .await
        {
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
    tracing::info!("halite-minion shutting down");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
