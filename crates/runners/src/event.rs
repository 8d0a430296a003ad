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
