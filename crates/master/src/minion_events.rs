//! An event a minion fired (`event.send`, `event.fire_master`, a state's
//! `fire_event`, job progress) onto the master's bus: the tag is checked
//! against what a minion may fire for itself
//! ([`halite_proto::tags::check_minion_tag`]; refused ones are logged),
//! and the data goes on the bus in Salt's `_minion_event` envelope, as
//! Salt's master fires the load it received (`data['data']` in a reactor
//! SLS is what the minion sent, `data['id']` the minion).

use halite_proto::msg::MinionEvent;
use halite_proto::{value_depth, MAX_VALUE_DEPTH};
use serde_json::{json, Value};

use crate::events::EventBus;

/// Minions' events the master received, for `halite-run master.stats`
/// (and the tests that prove a minion batches them): the messages that
/// carried them and the events in those messages.
#[derive(Debug, Default)]
pub struct EventCounts {
    /// Messages with events (one [`MinionRequest::Event`] or one batch).
    ///
    /// [`MinionRequest::Event`]: halite_proto::msg::MinionRequest::Event
    pub messages: u64,
    /// Events in those messages.
    pub events: u64,
}

impl EventCounts {
    /// The counters as `master.stats` shows them.
    pub fn snapshot(&self) -> Value {
        json!({"messages": self.messages, "events": self.events})
    }
}

/// Salt's envelope of a minion's event: `cmd`, `data`, `id`, `pretag`,
/// `tag`, `ts`.
/// `data` is moved in, not copied (`json!` would serialise it into a new
/// value: a state's return, for every state of a run).
pub fn envelope(id: &str, tag: &str, data: Value) -> Value {
    let mut map = serde_json::Map::new();
    map.insert("cmd".into(), Value::from("_minion_event"));
    map.insert("data".into(), data);
    map.insert("id".into(), Value::from(id));
    map.insert("pretag".into(), Value::Null);
    map.insert("tag".into(), Value::from(tag));
    map.insert("ts".into(), Value::from(chrono::Utc::now().timestamp()));
    Value::Object(map)
}

/// Fires minion `id`'s event on `bus`, or logs why it was refused;
/// whether it was fired.
pub fn fire(bus: &EventBus, id: &str, tag: &str, data: Value) -> bool {
    match halite_proto::tags::check_minion_tag(tag, id) {
        Ok(()) => {
            // Built only when a subscriber wants the tag (most of a fleet
            // run's progress events have none).
            bus.fire_with(tag, || envelope(id, tag, data));
            true
        }
        Err(e) => {
            tracing::warn!(%id, error = %e, "minion event dropped: a minion may not fire this tag");
            false
        }
    }
}

/// Fires one event of minion `id`'s batch on `bus` as [`fire`] does; its
/// data, when the minion sent it packed, is decoded only when a subscriber
/// wants the tag (and held to the depth limit then: intake.rs cannot see
/// inside it). Whether its tag was allowed.
pub fn fire_batched(bus: &EventBus, id: &str, mut event: MinionEvent) -> bool {
    if let Err(e) = halite_proto::tags::check_minion_tag(&event.tag, id) {
        tracing::warn!(%id, error = %e, "minion event dropped: a minion may not fire this tag");
        return false;
    }
    // Moved out, not copied: a thousand per minion per highstate.
    let tag = std::mem::take(&mut event.tag);
    bus.fire_built(&tag, || match event.into_data() {
        Ok(data) if value_depth(&data) > MAX_VALUE_DEPTH => {
            tracing::warn!(%id, %tag, max = MAX_VALUE_DEPTH, "event data nested too deeply; event dropped");
            None
        }
        Ok(data) => Some(envelope(id, &tag, data)),
        Err(e) => {
            tracing::warn!(%id, %tag, error = %e, "event data cannot be decoded; event dropped");
            None
        }
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_tags_are_wrapped_and_salt_tags_refused() {
        let bus = EventBus::new(8);
        let mut rx = bus.subscribe(crate::events::Interest::All);
        assert!(fire(&bus, "web1", "myco/deploy", json!({"v": 1})));
        let ev = rx.try_recv().expect("fired");
        assert_eq!(ev.tag, "myco/deploy");
        assert_eq!(ev.data()["cmd"], "_minion_event");
        assert_eq!(ev.data()["id"], "web1");
        assert_eq!(ev.data()["data"], json!({"v": 1}));
        assert_eq!(ev.data()["tag"], "myco/deploy");
        assert!(!fire(&bus, "web1", "salt/auth", json!({"act": "accept"})));
        assert!(!fire(&bus, "web1", "salt/key", json!({})));
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn packed_events_fire_as_plain_ones_and_bad_ones_are_dropped() {
        let bus = EventBus::new(8);
        let mut rx = bus.subscribe(crate::events::Interest::All);
        let data = json!({"len": 1, "ret": {"name": "x", "result": true}});
        let tag = "salt/job/20260101000000000001/prog/web1/0";
        assert!(fire_batched(
            &bus,
            "web1",
            MinionEvent::plain(tag.into(), data.clone())
        ));
        let plain = rx.try_recv().expect("plain");
        let packed = MinionEvent::packed(tag.into(), &data).expect("packed");
        assert!(fire_batched(&bus, "web1", packed));
        let unpacked = rx.try_recv().expect("packed");
        assert_eq!(plain.data()["data"], data);
        assert_eq!(unpacked.data()["data"], data);
        assert_eq!(unpacked.data()["cmd"], "_minion_event");
        // Undecodable or too deep: dropped, the master goes on.
        let mut deep = json!(1);
        for _ in 0..100 {
            deep = json!([deep]);
        }
        let deep = MinionEvent::packed(tag.into(), &deep).expect("packed");
        assert!(fire_batched(&bus, "web1", deep));
        let bad = MinionEvent {
            tag: tag.into(),
            data: Value::Null,
            packed: Some(vec![0xc1].into()),
        };
        assert!(fire_batched(&bus, "web1", bad));
        assert!(rx.try_recv().is_err());
        // Another minion's tag is refused before anything is decoded.
        assert!(!fire_batched(
            &bus,
            "web2",
            MinionEvent::packed("salt/auth".into(), &data).expect("packed")
        ));
    }
}
