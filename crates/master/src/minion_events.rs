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

/// One event of a minion's [`MinionRequest::Events`] batch read in place
/// from the decrypted message: its tag and packed data borrow the
/// message's bytes (issue 25: a fleet highstate's two million progress
/// events, most of which nobody wants, were a `String` and a copy each).
/// The same fields and rules as [`MinionEvent`], so the same messages
/// decode, and the same are refused (tested below).
///
/// [`MinionRequest::Events`]: halite_proto::msg::MinionRequest::Events
#[derive(Debug, serde::Deserialize)]
pub struct BatchedEvent<'a> {
    /// The event's tag.
    pub tag: &'a str,
    /// The event's data (`null` when it is packed).
    pub data: Value,
    /// The event's data encoded (msgpack), from a minion that packs.
    #[serde(default, borrow)]
    pub packed: Option<&'a [u8]>,
}

/// [`halite_proto::msg::MinionRequest`] with only the variant read in place.
#[derive(serde::Deserialize)]
enum BatchRequest<'a> {
    Events {
        #[serde(borrow)]
        events: Vec<BatchedEvent<'a>>,
    },
}

/// The events of `plain` (a decrypted [`MinionRequest`]) when it is an
/// `Events` batch, borrowed from its bytes; `None` for any other request,
/// and for a batch that does not decode (the caller's full decode then
/// refuses it as it refuses any undecodable request).
///
/// [`MinionRequest`]: halite_proto::msg::MinionRequest
pub fn read_batch(plain: &[u8]) -> Option<Vec<BatchedEvent<'_>>> {
    if plain.len() > halite_proto::MAX_FRAME_BYTES {
        return None;
    }
    let mut de = rmp_serde::Deserializer::from_read_ref(plain);
    de.set_max_depth(halite_proto::MAX_DECODE_DEPTH);
    match serde::Deserialize::deserialize(&mut de) {
        Ok(BatchRequest::Events { events }) => Some(events),
        Err(_) => None,
    }
}

/// Fires minion `id`'s `events` (one batch, oldest first) on `bus` as
/// [`fire_batched`] fires each: the subscribers' interests are read once
/// for the batch, and an event's data (plain data held to the depth
/// limit, as intake.rs holds a decoded batch's) is decoded and wrapped
/// only when some subscriber wants its tag.
pub fn fire_batch(bus: &EventBus, id: &str, events: Vec<BatchedEvent<'_>>) {
    let mut batch = bus.batch();
    for event in events {
        let tag = event.tag;
        if let Err(e) = halite_proto::tags::check_minion_tag(tag, id) {
            tracing::warn!(%id, error = %e, "minion event dropped: a minion may not fire this tag");
            continue;
        }
        let data = match event.packed {
            Some(bytes) => Err(bytes),
            None if value_depth(&event.data) > MAX_VALUE_DEPTH => {
                // (The tag is checked: at most MAX_MINION_TAG_BYTES.)
                tracing::warn!(%id, %tag, max = MAX_VALUE_DEPTH, "event data nested too deeply; event dropped");
                continue;
            }
            None => Ok(event.data),
        };
        batch.fire_built(tag, || {
            let data = match data {
                Ok(data) => data,
                Err(bytes) => match halite_proto::decode::<Value>(bytes) {
                    Ok(data) if value_depth(&data) > MAX_VALUE_DEPTH => {
                        tracing::warn!(%id, %tag, max = MAX_VALUE_DEPTH, "event data nested too deeply; event dropped");
                        return None;
                    }
                    Ok(data) => data,
                    Err(e) => {
                        tracing::warn!(%id, %tag, error = %e, "event data cannot be decoded; event dropped");
                        return None;
                    }
                },
            };
            Some(envelope(id, tag, data))
        });
    }
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
    /// The bus's events as (tag, data without the times), in order.
    fn drain(rx: &mut crate::events::Subscription) -> Vec<(String, Value)> {
        let mut seen = Vec::new();
        while let Ok(ev) = rx.try_recv() {
            let mut data = ev.data().into_owned();
            if let Some(map) = data.as_object_mut() {
                map.shift_remove("_stamp");
                map.shift_remove("ts");
            }
            seen.push((ev.tag.clone(), data));
        }
        seen
    }

    #[test]
    fn a_batch_read_in_place_fires_what_the_decoded_batch_fired() {
        use halite_proto::msg::MinionRequest;
        let tag = |n: usize| format!("salt/job/20260101000000000001/prog/web1/{n}");
        let data = |n: usize| json!({"len": 4, "ret": {"name": format!("ü {n}"), "result": true}});
        let mut deep = json!(1);
        for _ in 0..100 {
            deep = json!([deep]);
        }
        let events = vec![
            MinionEvent::packed(tag(0), &data(0)).unwrap(),
            MinionEvent::plain(tag(1), data(1)),
            // Refused: another minion's tag, Salt's own.
            MinionEvent::packed(tag(2).replace("web1", "web2"), &data(2)).unwrap(),
            MinionEvent::plain("salt/auth".into(), json!({"act": "accept"})),
            // Dropped: data too deep (plain or packed), undecodable.
            MinionEvent::plain(tag(3), deep.clone()),
            MinionEvent::packed(tag(4), &deep).unwrap(),
            MinionEvent {
                tag: tag(5),
                data: Value::Null,
                packed: Some(vec![0xc1].into()),
            },
            MinionEvent::packed("myco/deploy".into(), &json!({"v": [1, "x"]})).unwrap(),
            MinionEvent::plain(tag(6), data(6)),
        ];
        let bytes = halite_proto::encode(&MinionRequest::Events {
            events: events.clone(),
        })
        .unwrap();

        // As before: decoded whole, held to the depth limit, fired one by one.
        let bus = EventBus::new(64);
        let mut rx = bus.subscribe(crate::events::Interest::All);
        let Some(MinionRequest::Events { events: decoded }) =
            crate::intake::bound_request("web1", halite_proto::decode(&bytes).unwrap())
        else {
            panic!("not a batch");
        };
        for event in decoded {
            fire_batched(&bus, "web1", event);
        }
        let before = drain(&mut rx);

        // Now: read in place.
        let read = read_batch(&bytes).expect("a batch");
        assert_eq!(read.len(), events.len());
        fire_batch(&bus, "web1", read);
        let now = drain(&mut rx);
        assert_eq!(now, before);
        let tags: Vec<&str> = now.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(tags, [tag(0).as_str(), &tag(1), "myco/deploy", &tag(6)]);
        assert_eq!(now[0].1["data"], data(0));
        assert_eq!(now[0].1["cmd"], "_minion_event");

        // Nobody wants them: none is built (nor its packed data read),
        // and each allowed one is counted (all but the refused two and
        // the plain one too deep).
        drop(rx);
        let not_built = bus.snapshot()["not_built"].as_u64().unwrap();
        fire_batch(&bus, "web1", read_batch(&bytes).unwrap());
        assert_eq!(bus.snapshot()["not_built"].as_u64().unwrap(), not_built + 6);
    }

    #[test]
    fn only_a_well_formed_batch_is_read_in_place() {
        use halite_proto::msg::MinionRequest;
        let other = [
            MinionRequest::Ping,
            MinionRequest::Event {
                tag: "myco/x".into(),
                data: json!(1),
            },
        ];
        for request in other {
            let bytes = halite_proto::encode(&request).unwrap();
            assert!(read_batch(&bytes).is_none(), "{request:?}");
        }
        assert!(read_batch(b"").is_none());
        assert!(read_batch(b"\xff\x00garbage").is_none());
        // A tag that is not a string, a missing data: refused here as the
        // full decode refuses them (no event of the batch fires).
        #[derive(serde::Serialize)]
        enum Forged {
            Events { events: Vec<Value> },
        }
        for event in [json!({"tag": 7, "data": null}), json!({"tag": "myco/x"})] {
            let bytes = halite_proto::encode(&Forged::Events {
                events: vec![json!({"tag": "myco/ok", "data": 1}), event.clone()],
            })
            .unwrap();
            assert!(read_batch(&bytes).is_none(), "{event}");
            assert!(
                halite_proto::decode::<MinionRequest>(&bytes).is_err(),
                "{event}"
            );
        }
        // An empty batch is a batch.
        let bytes = halite_proto::encode(&MinionRequest::Events { events: vec![] }).unwrap();
        assert_eq!(read_batch(&bytes).map(|e| e.len()), Some(0));
    }
}
