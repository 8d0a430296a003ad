//! The master's event bus: every event fired on the master (auth, key,
//! job new/ret, minion start, forwarded minion events) goes to every local
//! subscriber (`halite-run state.event`, a watching `halite` run).

use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::broadcast;

/// One event: Salt's tag and data (with `_stamp`).
#[derive(Debug, Clone)]
pub struct BusEvent {
    /// The event's tag.
    pub tag: String,
    /// The event's data.
    pub data: Value,
}

/// Fires events to whoever listens; nobody listening costs nothing.
#[derive(Clone)]
pub struct EventBus {
    sender: broadcast::Sender<Arc<BusEvent>>,
}

/// Salt's `_stamp`: UTC ISO-8601 with microseconds.
pub fn stamp() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.6f+00:00")
        .to_string()
}

impl EventBus {
    /// A bus that buffers `capacity` events per slow subscriber.
    pub fn new(capacity: usize) -> Self {
        let (sender, _) = broadcast::channel(capacity);
        Self { sender }
    }

    /// Fires `tag` with `data` (an object gets `_stamp` added).
    pub fn fire(&self, tag: &str, data: Value) {
        let data = match data {
            Value::Object(mut map) => {
                map.insert("_stamp".into(), Value::String(stamp()));
                Value::Object(map)
            }
            other => {
                let mut map = Map::new();
                map.insert("data".into(), other);
                map.insert("_stamp".into(), Value::String(stamp()));
                Value::Object(map)
            }
        };
        tracing::debug!(tag, "event");
        let _ = self.sender.send(Arc::new(BusEvent {
            tag: tag.to_string(),
            data,
        }));
    }

    /// A new subscription, receiving events fired from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<BusEvent>> {
        self.sender.subscribe()
    }
}
