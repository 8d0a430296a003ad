//! `halite-call` without `--local` (Salt's salt-call against its master):
//! the minion's own config, key and pinned master key, one caller link to
//! the first master that answers, the call run as a job of this host
//! (states, pillar and `salt://` from the master), and its return kept in
//! the master's job cache under a jid the master gives it.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use halite_proto::msg::Job;
use halite_transport::Shutdown;
use serde_json::{Map, Value};

use crate::config::MinionConfig;
use crate::daemon::{link_settings, MasterDirs, MasterPlan};
use crate::link::call::{call_master, CallError, CallOutcome};
use crate::link::Agent;
use crate::runner::{HostRunner, JobRunner};
use crate::store::ReturnStore;

/// Runs `fun` with `arg`/`kwarg` on this host through its master, as
/// `salt-call fun ...` does; blocks until the return is printed-ready.
/// The return goes to the master's job cache unless `no_return_event`.
pub fn call(
    cfg: &MinionConfig,
    fun: &str,
    arg: Vec<Value>,
    kwarg: Map<String, Value>,
) -> anyhow::Result<CallOutcome> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(call_async(cfg, fun, arg, kwarg));
    // A job thread still blocked (a lost master) must not hold the exit.
    runtime.shutdown_timeout(Duration::from_millis(100));
    result
}

async fn call_async(
    cfg: &MinionConfig,
    fun: &str,
    arg: Vec<Value>,
    kwarg: Map<String, Value>,
) -> anyhow::Result<CallOutcome> {
    halite_proto::validate_minion_id(&cfg.id).context("the minion id is not usable")?;
    // Salt's salt-call takes the first master that answers, whatever the
    // master_type; each keeps the pin the daemon keeps for it.
    let (masters, hot) = match MasterPlan::of(cfg)? {
        MasterPlan::Hot(m) => (m, true),
        MasterPlan::Failover(m) => (m, false),
        MasterPlan::Disabled => anyhow::bail!(
            "master_type is disable: this minion has no master; run masterless with --local"
        ),
    };
    let identity = halite_proto::keyfile::load_or_create_identity(&cfg.pki_dir, "minion")
        .with_context(|| {
            format!(
                "cannot load the minion key from {} (run halite-call as the minion's user)",
                cfg.pki_dir.display()
            )
        })?;
    let runner = Arc::new(HostRunner::new(cfg.opts()));
    let grains = {
        let runner = runner.clone();
        let id = cfg.id.clone();
        tokio::task::spawn_blocking(move || runner.grains(&id))
            .await
            .unwrap_or(Value::Null)
    };
    let runner: Arc<dyn JobRunner> = runner;
    let job = Job {
        jid: halite_proto::jid::CALLER_JID.into(),
        fun: fun.to_string(),
        arg,
        kwarg,
        tgt: cfg.id.clone(),
        tgt_type: "glob".into(),
        user: "root".into(),
        minions: vec![cfg.id.clone()],
        progress_unwatched: false,
    };
    let send_return = !cfg
        .extra
        .get("no_return_event")
        .is_some_and(halite_state::truthy);
    let shutdown = Shutdown::new();
    let mut agent = Agent::new(cfg.id.clone(), identity, grains, ReturnStore::memory());
    let mut last = None;
    for master in &masters {
        let dirs = if hot {
            MasterDirs::of(cfg, master)
        } else {
            MasterDirs::shared(cfg)
        };
        let mut settings = link_settings(cfg, master);
        settings.pinned_master_path = Some(dirs.pin);
        // The daemon's publication counters are not the caller's to move.
        settings.replay_path = None;
        settings.caller = true;
        match call_master(
            &settings,
            &mut agent,
            runner.clone(),
            job.clone(),
            send_return,
            &shutdown,
        )
        .await
        {
            Ok(outcome) => return Ok(outcome),
            Err(e @ CallError::Unreachable { .. }) => {
                tracing::warn!(%master, error = %e, "master unreachable; trying the next");
                last = Some(e);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(last
        .map(anyhow::Error::from)
        .unwrap_or_else(|| anyhow::anyhow!("no master is configured")))
}
