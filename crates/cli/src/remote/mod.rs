//! The fleet-side CLI tools' shared code: `halite-key` (keys on disk),
//! `halite` (publish and collect) and `halite-run` (job cache, manage,
//! event bus). They read the master's config and talk to the master over
//! its local socket.

pub mod cmd;
pub mod key;
pub mod orch;
pub mod progress;
pub mod run;
pub mod runner_call;

use std::path::Path;

use halite_client::local::{LocalClient, LocalError};
use halite_client::MasterConfig;

/// Loads the master config of `config_dir` (as `-c` gives it).
pub fn master_config(config_dir: &Path) -> anyhow::Result<MasterConfig> {
    Ok(MasterConfig::load(config_dir, &serde_json::Map::new())?)
}

/// Connects to the running master of `cfg`.
pub fn connect(cfg: &MasterConfig) -> Result<LocalClient, LocalError> {
    LocalClient::connect(&cfg.local_socket(), &cfg.root_key_path())
}
