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
    compiled(
        ONE,
        TWO,
        json!({"pillar_source_merging_strategy": strategy}),
    )
}

/// The pillar of SLS `one` then `two` (in that order in the top file)
/// compiled with the options `more`.
fn compiled(one: &str, two: &str, more: Value) -> (Value, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pillar");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("top.sls"), "base:\n  '*':\n    - one\n    - two\n").unwrap();
    std::fs::write(p.join("one.sls"), one).unwrap();
    std::fs::write(p.join("two.sls"), two).unwrap();
    let mut opts = json!({
        "id": "oracle",
        "file_client": "local",
        "file_roots": {"base": [dir.path().join("srv")]},
        "pillar_roots": {"base": [p]},
        "cachedir": dir.path().join("cache"),
    });
    for (k, v) in more.as_object().unwrap() {
        opts[k] = v.clone();
    }
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

/// Pillar SLS without a shebang, under the `renderer` option: `yamlex`
/// alone leaves Jinja as text, `jinja|yamlex` renders it; either way a
/// repeated key merges, and `smart` (the default) is `aggregate` because
/// the renderer ends in yamlex, so `!aggregate` values join across the
/// two SLS and the later SLS' plain mapping replaces the earlier one.
#[test]
fn the_renderer_option_makes_pillar_sls_yamlex_and_smart_aggregate_as_salt() {
    let one = "port: 80\nport: 8080\nlist: !aggregate [a, b]\nmap: !aggregate {x: 1}\nplain: {p: 1}\ntext: \"{{ 'jinja' }}\"\n";
    let two = "list: !aggregate [c, a]\nmap: !aggregate {y: 2}\nplain: {q: 2}\n";
    // (renderer, strategy, Salt 3008.5's `salt-call --local pillar.items
    // unmask=True` for the same files and options)
    let aggregated = |text: &str| {
        json!({"port": 8080, "list": ["a", "b", "c"], "map": {"x": 1, "y": 2},
            "plain": {"q": 2}, "text": text})
    };
    let recursed = |text: &str| {
        json!({"port": 8080, "list": ["c", "a"], "map": {"x": 1, "y": 2},
            "plain": {"p": 1, "q": 2}, "text": text})
    };
    let cases = [
        ("yamlex", "smart", aggregated("{{ 'jinja' }}")),
        ("yamlex", "aggregate", aggregated("{{ 'jinja' }}")),
        ("yamlex", "recurse", recursed("{{ 'jinja' }}")),
        ("jinja|yamlex", "smart", aggregated("jinja")),
        ("jinja|yamlex", "aggregate", aggregated("jinja")),
        ("jinja|yamlex", "recurse", recursed("jinja")),
    ];
    for (renderer, strategy, salt) in cases {
        let (pillar, errors) = compiled(
            one,
            two,
            json!({"renderer": renderer, "pillar_source_merging_strategy": strategy}),
        );
        assert!(errors.is_empty(), "{renderer} {strategy}: {errors:?}");
        assert_eq!(pillar, salt, "{renderer} {strategy}");
    }
}
