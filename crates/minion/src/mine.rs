//! The minion's side of the Salt mine: the `mine` execution module's link
//! to the master ([`MinionMine`], mine requests over the job's
//! [`MasterChannel`]), and Salt's `__mine_interval` job: `mine.update` once
//! the minion is authenticated and every `mine_interval` minutes after
//! (`mine_enabled: False` turns it off).

use std::sync::Arc;
use std::time::Duration;

use halite_modules::exec::MineLink;
use halite_proto::mine::MineRequest;
use halite_proto::msg::{ReplyBody, RequestBody};
use serde_json::{Map, Value};

use crate::channel::MasterChannel;

/// The mine as a minion reaches it: requests to its master.
pub struct MinionMine {
    master: MasterChannel,
    /// The pillar the minion holds (its last refresh), when it has one.
    pillar: Option<Value>,
}

/// How long the first `mine.update` after start waits for the start-up
/// pillar before asking the master to compile the pillar for it.
pub const FIRST_UPDATE_WAIT: Duration = Duration::from_secs(30);

impl MinionMine {
    /// A link over `master`, the channel of the job (or render call)
    /// running; `pillar` is the pillar the minion holds (`None` before its
    /// first refresh: then the master compiles it for `mine_functions`).
    pub fn link(master: MasterChannel, pillar: Option<Value>) -> Arc<dyn MineLink> {
        Arc::new(Self { master, pillar })
    }

    fn ask(&self, request: MineRequest) -> Result<Value, String> {
        match self.master.request(RequestBody::Mine(request)) {
            Ok(ReplyBody::Value(v)) => Ok(v),
            Ok(other) => Err(format!("unexpected answer from the master: {other:?}")),
            Err(e) => Err(format!("the mine request failed: {e}")),
        }
    }
}

impl MineLink for MinionMine {
    fn store(&self, data: Map<String, Value>, clear: bool) -> Result<Value, String> {
        self.ask(MineRequest::Store { data, clear })
    }

    fn get(&self, tgt: &str, fun: &Value, tgt_type: &str) -> Result<Value, String> {
        self.ask(MineRequest::Get {
            tgt: tgt.to_string(),
            fun: fun.clone(),
            tgt_type: tgt_type.to_string(),
        })
    }

    fn delete(&self, fun: &str) -> Result<Value, String> {
        self.ask(MineRequest::Delete {
            fun: fun.to_string(),
        })
    }

    fn flush(&self) -> Result<Value, String> {
        self.ask(MineRequest::Flush)
    }

    fn pillar_functions(&self) -> Result<Map<String, Value>, String> {
        if let Some(pillar) = &self.pillar {
            return Ok(pillar
                .get("mine_functions")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default());
        }
        match self.ask(MineRequest::PillarFunctions)? {
            Value::Object(functions) => Ok(functions),
            _ => Ok(Map::new()),
        }
    }
}

/// Salt's default `mine_interval`, in minutes.
const DEFAULT_INTERVAL_MINUTES: f64 = 60.0;

/// How often `mine.update` runs for the minion of `opts` (`mine_interval`
/// minutes, default 60, at least one second), `None` with
/// `mine_enabled: False` or a `mine_interval` of 0 or less.
pub fn interval(opts: &Map<String, Value>) -> Option<Duration> {
    if opts
        .get("mine_enabled")
        .is_some_and(|v| !halite_salt_rules::truthy(v))
    {
        return None;
    }
    let minutes = match opts.get("mine_interval") {
        None | Some(Value::Null) => DEFAULT_INTERVAL_MINUTES,
        Some(Value::Number(n)) => n.as_f64().unwrap_or(DEFAULT_INTERVAL_MINUTES),
        Some(Value::String(s)) => match s.trim().parse::<f64>() {
            Ok(m) => m,
            Err(_) => {
                tracing::warn!(mine_interval = %s, "mine_interval is not a number of minutes; using 60");
                DEFAULT_INTERVAL_MINUTES
            }
        },
        Some(_) => DEFAULT_INTERVAL_MINUTES,
    };
    (minutes > 0.0).then(|| Duration::from_secs_f64((minutes * 60.0).max(1.0)))
}

/// Runs `update` (identity `id`'s `mine.update`) on a blocking thread
/// (Salt's `__mine_interval` job); the outcome is logged, never returned
/// to the master as a job (Salt's `mine_return_job` defaults to False).
pub fn spawn_update(id: String, update: impl FnOnce() -> Result<Value, String> + Send + 'static) {
    tokio::task::spawn_blocking(move || match update() {
        Ok(Value::Null) => tracing::debug!(%id, "mine.update: no mine_functions"),
        Ok(_) => tracing::debug!(%id, "mine data sent to the master"),
        Err(e) => tracing::warn!(%id, error = %e, "mine.update failed"),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn interval_follows_salt_defaults() {
        let opts = |v: Value| v.as_object().cloned().unwrap_or_default();
        assert_eq!(interval(&opts(json!({}))), Some(Duration::from_secs(3600)));
        assert_eq!(
            interval(&opts(json!({"mine_interval": 2}))),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            interval(&opts(json!({"mine_interval": "0.5"}))),
            Some(Duration::from_secs(30))
        );
        assert_eq!(interval(&opts(json!({"mine_interval": 0}))), None);
        assert_eq!(interval(&opts(json!({"mine_enabled": false}))), None);
    }
}
