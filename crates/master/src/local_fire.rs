//! The local socket's `FireEvent` request: `halite-run event.send` and the
//! orchestration runner firing on the master's bus, with the checks Salt's
//! `SaltEvent.fire_event` makes (a tag, a mapping of data).

use halite_client::local::LocalReply;
use serde_json::Value;

use crate::events::EventBus;

/// Fires `tag` with `data` on `bus`, or says why not.
pub fn fire(bus: &EventBus, tag: &str, data: Value) -> LocalReply {
    if tag.trim().is_empty() {
        return LocalReply::Error("Empty tag: give the event a tag, e.g. my/app/deployed".into());
    }
    let data = match data {
        Value::Null => Value::Object(Default::default()),
        Value::Object(m) => Value::Object(m),
        other => {
            return LocalReply::Error(format!(
                "Dict object expected, not '{}': event data must be a mapping, e.g. data='{{\"id\": \"web1\"}}'",
                other
            ))
        }
    };
    bus.fire(tag, data);
    LocalReply::Ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_a_mapping_and_refuses_the_rest() {
        let bus = EventBus::new(8);
        let mut rx = bus.subscribe(crate::events::Interest::All);
        assert!(matches!(
            fire(&bus, "my/tag", serde_json::json!({"id": "web1"})),
            LocalReply::Ok
        ));
        let ev = rx.try_recv().expect("an event");
        assert_eq!(ev.tag, "my/tag");
        assert_eq!(ev.data()["id"], "web1");
        assert!(ev.data().get("_stamp").is_some());
        assert!(matches!(fire(&bus, "", Value::Null), LocalReply::Error(_)));
        assert!(matches!(
            fire(&bus, "t", serde_json::json!([1])),
            LocalReply::Error(_)
        ));
        assert!(rx.try_recv().is_err());
    }
}
