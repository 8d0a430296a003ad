//! yamlex pillar SLS (`#!yamlex`, `!aggregate`, `!reset`) compiled through
//! the masterless pillar compile (`pillar_render::compile_full`, as the
//! master runs it) from real files in a temp dir, with each merging
//! strategy. The expected pillars are what Salt 3008.5's `salt-call --local
//! pillar.items unmask=True` gave for the same files: with `aggregate`
//! the values both SLS mark `!aggregate` are joined across files; with
//! `smart` (the default renderer is yaml) and `recurse` they are merged as
//! plain data.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::sync::Arc;

use halite_modules::host::LogEvents;
use serde_json::{json, Value};

const ONE: &str = "#!yamlex\nusers: !aggregate [alice]\nroles: !aggregate {web: 1}\nplain: {x: 1, keep: 1}\nlst: [1]\ntag: !aggregate first\ntag: !aggregate second\n";
const TWO: &str = "#!yamlex\nusers: !aggregate [bob, alice]\nroles: !aggregate {db: 2}\nplain: {y: 2}\nlst: [2]\ntag: !aggregate third\n!reset dropped: {a: 1}\n";

fn pillar(strategy: &str) -> (Value, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pillar");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("top.sls"), "base:\n  '*':\n    - one\n    - two\n").unwrap();
    std::fs::write(p.join("one.sls"), ONE).unwrap();
    std::fs::write(p.join("two.sls"), TWO).unwrap();
    let opts = json!({
        "id": "oracle",
        "file_client": "local",
        "file_roots": {"base": [dir.path().join("srv")]},
        "pillar_roots": {"base": [p]},
        "cachedir": dir.path().join("cache"),
        "pillar_source_merging_strategy": strategy,
    });
    let (host, errors) = halite_modules::local::local_host(opts, Arc::new(LogEvents));
    (host.pillar, errors)
}

#[test]
fn yamlex_aggregates_across_pillar_sls_as_salt() {
    // (strategy, Salt 3008.5's pillar.items)
    let cases = [
        (
            "aggregate",
            json!({"users": ["alice", "bob"], "roles": {"web": 1, "db": 2}, "plain": {"y": 2},
                "lst": [2], "tag": ["first", "second", "third"], "dropped": {"a": 1}}),
        ),
        (
            "smart",
            json!({"users": ["bob", "alice"], "roles": {"web": 1, "db": 2},
                "plain": {"x": 1, "keep": 1, "y": 2}, "lst": [2], "tag": ["third"], "dropped": {"a": 1}}),
        ),
        (
            "recurse",
            json!({"users": ["bob", "alice"], "roles": {"web": 1, "db": 2},
                "plain": {"x": 1, "keep": 1, "y": 2}, "lst": [2], "tag": ["third"], "dropped": {"a": 1}}),
        ),
    ];
    for (strategy, salt) in cases {
        let (pillar, errors) = pillar(strategy);
        assert!(errors.is_empty(), "{strategy}: {errors:?}");
        assert_eq!(pillar, salt, "{strategy}");
        // No mark is left in what the minion gets.
        assert!(!pillar.to_string().contains("yamlex:aggregate"), "{pillar}");
    }
}
