//! How much the master queues for its minions' connections, from its
//! config: halite's own keys (Salt's ROUTER keeps libzmq's defaults and has
//! none). A connection's queue (`reply_queue_messages`,
//! `reply_queue_bytes`) and, past it, the overflow all connections share
//! (`reply_overflow_bytes`); docs/master-minion.md says when to change them.

use halite_transport::RouterLimits;
use serde_json::{Map, Value};

/// The ROUTER's limits from the master config's `extra` keys; an absent or
/// unreadable key keeps its default (logged).
pub fn router_limits(extra: &Map<String, Value>) -> RouterLimits {
    let mut limits = RouterLimits::default();
    let read = |key: &str, default: usize| -> usize {
        usize::try_from(whole_number(extra, key, default as u64)).unwrap_or(default)
    };
    limits.peer_messages = read("reply_queue_messages", limits.peer_messages).max(1);
    limits.peer_bytes = read("reply_queue_bytes", limits.peer_bytes);
    limits.overflow_bytes = read("reply_overflow_bytes", limits.overflow_bytes);
    limits
}

/// The whole number (of messages or bytes) at `key` of the master
/// config's `extra` keys, written as a number or a string; an absent or
/// unreadable value keeps `default` (logged).
pub fn whole_number(extra: &Map<String, Value>, key: &str, default: u64) -> u64 {
    let Some(v) = extra.get(key) else {
        return default;
    };
    match v
        .as_u64()
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
    {
        Some(n) => n,
        None => {
            tracing::warn!(key, value = %v, default, "not a whole number of messages or bytes; the default is used");
            default
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_override_the_defaults_and_bad_values_keep_them() {
        let extra = json!({"reply_queue_messages": 2, "reply_overflow_bytes": "0", "reply_queue_bytes": "lots"});
        let limits = router_limits(extra.as_object().unwrap_or(&Map::new()));
        let default = RouterLimits::default();
        assert_eq!(limits.peer_messages, 2);
        assert_eq!(limits.overflow_bytes, 0);
        assert_eq!(limits.peer_bytes, default.peer_bytes);
        let none = router_limits(&Map::new());
        assert_eq!(none.peer_messages, default.peer_messages);
        assert_eq!(none.overflow_bytes, default.overflow_bytes);
    }
}
