//! What one `halite-run` invocation asks for, shared by the runner
//! dispatch (`run`) and orchestration (`orch`) without either importing
//! the other's file for it.

use std::time::Duration;

/// One `halite-run` invocation.
#[derive(Debug, Clone)]
pub struct RunnerCall {
    /// The runner function (`jobs.lookup_jid`, `manage.up`...).
    pub fun: String,
    /// Its arguments as typed.
    pub args: Vec<String>,
    /// `--out`: the outputter.
    pub out: Option<String>,
    /// `-t`: how long to wait for the minions (`manage.*`).
    pub timeout: Duration,
}
