//! The master's git sources (issue 23): gitfs among the fileserver
//! backends and git_pillar among the pillar sources, and the background
//! task that fetches them every `gitfs_update_interval` /
//! `git_pillar_update_interval` seconds (default 60). Fetches happen only
//! there and in `halite-run fileserver.update` / `git_pillar.update`:
//! never on a compile's path, which reads the trees of the last good fetch.

use std::sync::Arc;
use std::time::Duration;

use halite_gitfs::pillar::GitPillar;
use halite_gitfs::{Fileserver, GitFs};
use halite_modules::pillar_source::PillarSource;
use halite_transport::Shutdown;

use crate::config::MasterConfig;

/// The fileserver backends and the git_pillar sources of a master config.
pub struct GitSources {
    /// `fileserver_backend` in order (roots alone when unset).
    pub fileserver: Fileserver,
    /// One source per `git` entry of `ext_pillar`.
    pub pillars: Vec<Arc<GitPillar>>,
}

impl GitSources {
    /// Reads `fileserver_backend`, `gitfs_*` and `ext_pillar`'s `git` entries.
    pub fn load(cfg: &MasterConfig) -> Self {
        let opts = cfg.opts();
        Self {
            fileserver: Fileserver::from_opts(&opts, cfg.file_roots.clone(), &cfg.cachedir),
            pillars: GitPillar::from_opts(&opts, &cfg.cachedir)
                .into_iter()
                .map(Arc::new)
                .collect(),
        }
    }

    /// The git_pillar sources as the compiler's pillar sources.
    pub fn pillar_sources(&self) -> Vec<Arc<dyn PillarSource>> {
        self.pillars
            .iter()
            .map(|p| p.clone() as Arc<dyn PillarSource>)
            .collect()
    }

    /// Starts one background task per git source that fetches it now and
    /// then every update interval, until `shutdown`.
    pub fn spawn_updaters(&self, shutdown: &Shutdown) {
        if let Some(gitfs) = self.fileserver.gitfs() {
            let gitfs: Arc<GitFs> = gitfs.clone();
            let every = gitfs.update_interval().unwrap_or(60);
            spawn_every("gitfs", every, shutdown.clone(), move || {
                gitfs.update(None);
            });
        }
        for pillar in &self.pillars {
            let pillar = pillar.clone();
            let every = pillar.update_interval().unwrap_or(60);
            spawn_every("git_pillar", every, shutdown.clone(), move || {
                pillar.update();
            });
        }
    }
}

/// Runs `work` on a blocking thread now and every `seconds` (at least 1)
/// until `shutdown`; a run still going when the next is due delays it.
fn spawn_every(
    what: &'static str,
    seconds: u64,
    shutdown: Shutdown,
    work: impl Fn() + Send + Sync + 'static,
) {
    let work = Arc::new(work);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(seconds.max(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.triggered() => return,
                _ = tick.tick() => {}
            }
            let work = work.clone();
            if let Err(e) = tokio::task::spawn_blocking(move || work()).await {
                tracing::error!(source = what, error = %e, "background git update failed");
            }
        }
    });
    tracing::info!(
        source = what,
        every = seconds,
        "background git updates started"
    );
}
