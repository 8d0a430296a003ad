//! Salt's `event` runner: `event.send <tag> [data]` fires an event on the
//! master's bus (what a reactor or a `salt.wait_for_event` step listens to).

use halite_client::local::{LocalBody, LocalClient, LocalReply};
use halite_client::MasterConfig;
use halite_state::Value;

use crate::RunnerError;

/// `event.send`: fires `tag` with `data` (a mapping, default empty);
/// `True` once the master took it, as Salt returns.
pub fn send(cfg: &MasterConfig, tag: &str, data: Option<&Value>) -> Result<Value, RunnerError> {
    let mut client = LocalClient::connect(&cfg.local_socket(), &cfg.root_key_path())?;
    match client.call(LocalBody::FireEvent {
        tag: tag.to_string(),
        data: data.cloned().unwrap_or(Value::Null),
    })? {
        LocalReply::Ok => Ok(Value::Bool(true)),
        other => Err(RunnerError::Failed(format!(
            "unexpected answer from the master: {other:?}"
        ))),
    }
}

/// An [`halite_modules::host::EventSink`] onto the master's bus through
/// its local socket: what an orchestration's events (`salt/run/<jid>/*`,
/// the states' own `fire_event`) go through.
#[derive(Debug, Clone)]
pub struct MasterBus {
    cfg: MasterConfig,
}

impl MasterBus {
    /// The bus of the master of `cfg`.
    pub fn new(cfg: &MasterConfig) -> Self {
        Self { cfg: cfg.clone() }
    }
}

impl halite_modules::host::EventSink for MasterBus {
    fn fire(&self, tag: &str, data: &Value) {
        // An event that cannot be fired must not stop the run: log it.
        if let Err(e) = send(&self.cfg, tag, Some(data)) {
            tracing::warn!(tag, "cannot fire the event on the master's bus: {e}");
        }
    }
}
