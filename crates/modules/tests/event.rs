//! `event.send`, `event.fire_master` and `event.fire` through the real
//! module table, into a sink that records what reached it (the minion's
//! link to the master in a daemon; the master-side wrapping and tag rules
//! are tested with real daemons in crates/master/tests/reactor.rs).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::sync::{Arc, Mutex};

use halite_modules::host::EventSink;
use halite_modules::{Args, Host};
use serde_json::{json, Value};

/// Records every fired event.
#[derive(Default)]
struct Recorder(Mutex<Vec<(String, Value)>>);

impl EventSink for Recorder {
    fn fire(&self, tag: &str, data: &Value) {
        self.0.lock().unwrap().push((tag.to_string(), data.clone()));
    }
}

fn recording_host(opts: Value) -> (Host, Arc<Recorder>) {
    let rec = Arc::new(Recorder::default());
    let mut host = common::host_with(opts, json!({"id": "web1", "os": "Debian", "num_cpus": 4}));
    host.pillar = json!({"role": "web", "secret": "s3"});
    host.events = rec.clone();
    (host, rec)
}

fn args(positional: Value, kwargs: Value) -> Args {
    Args {
        positional: positional.as_array().cloned().unwrap_or_default(),
        kwargs: kwargs.as_object().cloned().unwrap_or_default(),
    }
}

#[test]
fn send_builds_salts_payload_and_fires_it_to_the_master() {
    let (host, rec) = recording_host(json!({"id": "web1"}));
    let ret = host
        .call(
            "event.send",
            &args(
                json!(["myco/deploy/done", {"version": "1.2", "extra": "from data"}]),
                json!({"with_grains": ["os"], "with_pillar": true, "extra": "from kwargs", "build": 7}),
            ),
        )
        .unwrap();
    assert_eq!(ret, json!(true));
    let fired = rec.0.lock().unwrap().clone();
    assert_eq!(fired.len(), 1);
    let (tag, data) = &fired[0];
    assert_eq!(tag, "myco/deploy/done");
    assert_eq!(data["grains"], json!({"os": "Debian"}));
    assert_eq!(data["pillar"], json!({"role": "web", "secret": "s3"}));
    assert_eq!(data["build"], 7);
    assert_eq!(data["version"], "1.2");
    // The data mapping overrides the keywords, as in Salt.
    assert_eq!(data["extra"], "from data");
    assert!(data.get("with_grains").is_none(), "{data}");
    assert!(data.get("environ").is_none(), "{data}");
}

#[test]
fn send_with_env_opts_and_env_subset() {
    let (host, rec) = recording_host(json!({"id": "web1"}));
    std::env::set_var("HALITE_EVENT_TEST", "yes");
    host.call(
        "event.send",
        &args(
            json!(["t/x"]),
            json!({"with_env": ["HALITE_EVENT_TEST"], "with_env_opts": true}),
        ),
    )
    .unwrap();
    let (_, data) = rec.0.lock().unwrap()[0].clone();
    assert_eq!(data["environ"], json!({"HALITE_EVENT_TEST": "yes"}));
    assert_eq!(data["saltenv"], "base");
    assert_eq!(data["pillarenv"], Value::Null);
}

#[test]
fn fire_master_sends_data_as_given_and_refuses_masterless() {
    let (host, rec) = recording_host(json!({"id": "web1"}));
    let ret = host
        .call(
            "event.fire_master",
            &args(json!([{"a": 1}, "my/tag"]), json!({})),
        )
        .unwrap();
    assert_eq!(ret, json!(true));
    assert_eq!(
        rec.0.lock().unwrap()[0],
        ("my/tag".to_string(), json!({"a": 1}))
    );

    let (local, rec) = recording_host(json!({"id": "web1", "file_client": "local"}));
    let ret = local
        .call(
            "event.fire_master",
            &args(json!([{"a": 1}, "my/tag"]), json!({})),
        )
        .unwrap();
    assert_eq!(ret, json!(false), "Salt: Local mode detected, not sent");
    assert!(rec.0.lock().unwrap().is_empty());
}

/// No tag is the minion's own: refreshed grains reach the link on a
/// channel of their own, so `__grains__` is a tag like any other, as in Salt.
#[test]
fn any_non_empty_tag_fires_even_grains_like_ones() {
    let (host, rec) = recording_host(json!({"id": "web1"}));
    assert_eq!(
        host.call(
            "event.send",
            &args(json!(["__grains__"]), json!({"os": "x"}))
        )
        .unwrap(),
        json!(true)
    );
    let fired = rec.0.lock().unwrap().clone();
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].0, "__grains__");
    assert_eq!(fired[0].1["os"], "x");
}

#[test]
fn empty_or_missing_tags_fire_nothing() {
    let (host, rec) = recording_host(json!({"id": "web1"}));
    assert_eq!(
        host.call("event.send", &args(json!([""]), json!({})))
            .unwrap(),
        json!(false)
    );
    let err = host
        .call("event.send", &args(json!([]), json!({})))
        .unwrap_err();
    assert!(err.to_string().contains("'tag'"), "{err}");
    assert!(rec.0.lock().unwrap().is_empty());
}

#[test]
fn fire_goes_to_the_local_sink_only_when_masterless() {
    let (local, rec) = recording_host(json!({"id": "web1", "file_client": "local"}));
    assert_eq!(
        local
            .call(
                "event.fire",
                &args(json!([{"k": "v"}, "local/tag"]), json!({}))
            )
            .unwrap(),
        json!(true)
    );
    assert_eq!(rec.0.lock().unwrap().len(), 1);
    // Not a mapping: Salt's "Dict object expected", False.
    assert_eq!(
        local
            .call("event.fire", &args(json!(["text", "local/tag"]), json!({})))
            .unwrap(),
        json!(false)
    );
    let (minion, rec) = recording_host(json!({"id": "web1"}));
    minion
        .call(
            "event.fire",
            &args(json!([{"k": "v"}, "local/tag"]), json!({})),
        )
        .unwrap();
    assert!(
        rec.0.lock().unwrap().is_empty(),
        "a minion's local bus is not the master's"
    );
}
