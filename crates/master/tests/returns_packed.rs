//! A minion's return sent packed (issue 25: its value as msgpack bytes,
//! never built on the master) through a real master and minion: the CLI,
//! a `state.event` watcher, the reactor and the job cache all see the same
//! whole value, floats (`duration`) and unicode included.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::time::Duration;

use std::path::PathBuf;

use common::{async_jid, can_run, wait_for, write_file as write, Fleet};
use halite_test_support::Daemon;
use serde_json::Value;

/// A comment with accents, a symbol and an astral-plane emoji.
const COMMENT: &str = "Succès ✓ 😀 \"quoted\"";

/// The `(tag, data)` of each line `halite-run state.event` printed.
fn bus_events(printed: &str) -> Vec<(String, Value)> {
    printed
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(tag, json)| (tag.to_string(), serde_json::from_str(json).expect("json")))
        .collect()
}

#[test]
fn a_packed_return_reaches_the_cli_watchers_the_reactor_and_the_job_cache_unchanged() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let mut sls = String::new();
    for n in 0..40 {
        sls.push_str(&format!(
            "state_{n:02}:\n  test.configurable_test_state:\n    - changes: True\n    - comment: '{COMMENT} {n}'\n"
        ));
    }
    write(&fleet.path("salt/top.sls"), "base:\n  '*':\n    - many\n");
    write(&fleet.path("salt/many.sls"), &sls);
    // The reactor hands what it read of the return to a test.arg job of
    // its own (a whole return through YAML would test the YAML).
    write(
        &fleet.path("reactor/echo.sls"),
        "{% if data['fun'] == 'state.apply' %}{% set first = data['return']['test_|-state_00_|-state_00_|-configurable_test_state'] %}\necho:\n  local.test.arg:\n    - tgt: web1\n    - args:\n      - states: {{ data['return'] | length }}\n      - comment: '{{ first['comment'] }}'\n      - duration: {{ first['duration'] }}\n{% endif %}\n",
    );
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base: [{}]\nreactor:\n  - 'salt/job/*/ret/web1':\n    - {}\n",
        fleet.path("salt").display(),
        fleet.path("reactor/echo.sls").display()
    ));
    let _minion = fleet.start_minion("web1", "");
    fleet.wait_responding("web1");
    let returns_before = fleet.master_stats()["returns"].clone();
    let watcher = fleet.watch_events();
    let (rets, code) = fleet.halite_json(&["web1", "state.apply", "-t", "60"]);
    assert_eq!(code, 0, "{rets:?}");
    // It came packed (this minion's master says it reads them): no plain
    // return arrived. The packed count may have grown by more than this one
    // return: the reactor's own test.arg job, or a readiness ping that
    // outlived its `-t 2`, can return before the stats are read.
    let returns_after = fleet.master_stats()["returns"].clone();
    let count = |v: &Value, k: &str| v[k].as_u64().expect("a counter");
    assert!(
        count(&returns_after, "packed") > count(&returns_before, "packed"),
        "{returns_before} -> {returns_after}"
    );
    assert_eq!(
        count(&returns_after, "plain"),
        count(&returns_before, "plain"),
        "{returns_before} -> {returns_after}"
    );
    // Its value came as the minion's zstd frame (40 states are well past
    // the few KB below which a minion sends the bytes as they are), and
    // everything below reads it as the same return (issue 25, session 24).
    assert!(
        count(&returns_after, "zstd") > count(&returns_before, "zstd"),
        "{returns_before} -> {returns_after}"
    );
    let from_cli = rets.get("web1").expect("web1's return").clone();
    let states = from_cli.as_object().expect("a state run");
    assert_eq!(states.len(), 40, "{from_cli}");
    let first = &from_cli["test_|-state_00_|-state_00_|-configurable_test_state"];
    assert_eq!(first["comment"], format!("{COMMENT} 0"));
    assert!(first["duration"].is_f64(), "{first}");

    // The reaction's job returns what the reactor's template saw.
    let mut reaction = None;
    let seen = wait_for(Duration::from_secs(60), || {
        reaction = bus_events(&watcher.peek()).into_iter().find(|(t, d)| {
            t.contains("/ret/web1") && d["fun"] == "test.arg" && d["user"] == "Reactor"
        });
        reaction.is_some()
    });
    let text = watcher.stop();
    let others: Vec<&str> = text.lines().filter(|l| !l.contains("/prog/")).collect();
    assert!(seen, "no reaction to the return: {others:#?}");
    let (_, reaction) = reaction.expect("reaction");

    // The watcher's return event carries the very value the CLI printed.
    let events = bus_events(&text);
    let (tag, ret_event) = events
        .iter()
        .find(|(t, d)| t.contains("/ret/web1") && d["fun"] == "state.apply")
        .unwrap_or_else(|| panic!("no return event in {text}"));
    assert_eq!(
        ret_event["return"], from_cli,
        "the watcher's return differs"
    );
    assert_eq!(ret_event["id"], "web1");
    assert_eq!(ret_event["success"], true);
    let kwargs = &reaction["return"]["kwargs"];
    assert_eq!(kwargs["states"], 40, "{reaction}");
    assert_eq!(kwargs["comment"], first["comment"], "{reaction}");
    assert_eq!(kwargs["duration"], first["duration"], "{reaction}");

    // The job cache holds it too.
    let jid = tag.split('/').nth(2).expect("jid");
    let lookup = fleet.cli("halite-run", &["jobs.lookup_jid", jid, "--out", "json"]);
    assert!(lookup.status.success(), "{lookup:?}");
    let cached: Value = serde_json::from_slice(&lookup.stdout).expect("json");
    assert_eq!(cached["web1"], from_cli, "the job cache's return differs");
}

/// Issue 25, session 19: a watching CLI that reads more slowly than the
/// fleet returns (its output is a pipe nobody reads yet) does not make
/// the master hold every return: past `event_return_bytes` the bus holds
/// where a return is, and the CLI gets it read back from the job cache,
/// whole, when it gets there.
#[test]
fn a_slow_watcher_holds_at_most_event_return_bytes_in_the_master_and_misses_nothing() {
    if !can_run() {
        return;
    }
    const N: usize = 16;
    // Room for two ~100 KB returns.
    const BUDGET: u64 = 250_000;
    let fleet = Fleet::new();
    let _daemons = fleet.start_with_return_budget(BUDGET, N);
    let big = "x".repeat(100_000);
    // Nobody reads the CLI's output until every return is committed and
    // its event fired.
    let (out, stats) = fleet.halite_read_late(
        &["*", "test.arg", &big, "-t", "60", "--out", "json"],
        N as u64,
    );
    let mut returned = 0;
    for value in serde_json::Deserializer::from_slice(&out).into_iter::<Value>() {
        if let Ok(Value::Object(map)) = value {
            for (id, ret) in map {
                assert_eq!(ret["args"][0], big.as_str(), "{id}'s return");
                returned += 1;
            }
        }
    }
    eprintln!(
        "bus after {N} returns of ~100 KB to a slow CLI: {}",
        stats["bus"]
    );
    assert_eq!(returned, N, "every return reached the slow CLI whole");
    let peak = stats["bus"]["peak_held_bytes"].as_u64().unwrap();
    assert!(
        peak <= BUDGET,
        "the bus held {peak} bytes of returns for a slow reader, past event_return_bytes ({BUDGET}): {stats}"
    );
    assert!(stats["bus"]["spilled"].as_u64().unwrap() > 0, "{stats}");
}

/// Issue 25, session 20: returns received faster than the job cache's
/// writer commits them are not all held by the master: past
/// `return_commit_bytes` it stops reading from its minions (they wait on
/// TCP, each keeping its return until it is acknowledged) and reads again
/// as the commits catch up. Every return still arrives, whole, once.
#[test]
fn returns_waiting_for_their_commit_hold_at_most_return_commit_bytes_and_none_is_lost() {
    if !can_run() {
        return;
    }
    const N: usize = 48;
    // Room for two ~100 KB returns.
    const BOUND: u64 = 250_000;
    let fleet = Fleet::new();
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nreturn_commit_bytes: {BOUND}\n"
    ));
    let _swarm = fleet.start_swarm(N, "");
    let (pings, _) = fleet.halite_json(&["*", "test.ping", "-t", "30"]);
    assert_eq!(pings.len(), N, "{pings:?}");
    let before = fleet.master_stats();
    let big = "x".repeat(100_000);
    let (rets, code) = fleet.halite_json(&["*", "test.arg", &big, "-t", "60"]);
    let stats = fleet.master_stats();
    eprintln!("returns after {N} of ~100 KB at once: {}", stats["returns"]);
    assert_eq!(code, 0, "{stats}");
    assert_eq!(rets.len(), N, "every minion's return arrived: {stats}");
    for (id, ret) in &rets {
        assert_eq!(ret["args"][0], big.as_str(), "{id}'s return");
    }
    let packed = |stats: &Value| stats["returns"]["packed"].as_u64().unwrap_or(0);
    assert!(packed(&stats) >= packed(&before) + N as u64, "{stats}");
    assert_eq!(stats["returns"]["bound"], BOUND, "{stats}");
    // One message past the bound at most.
    let peak = stats["returns"]["peak_held_bytes"].as_u64().unwrap();
    assert!(
        peak <= BOUND + 110_000,
        "the master held {peak} bytes of returns waiting for their commit, past return_commit_bytes ({BOUND}): {stats}"
    );
}

/// Below one large return: once one is received the master is past
/// `return_commit_bytes`.
const HELD_BOUND: u64 = 50_000;

/// A master past `return_commit_bytes` (`HELD_BOUND`) with its large
/// commits held: `web1`'s and `web2`'s ~100 KB `test.arg` returns (job
/// `jid`, argument `big`) received and not committed, and a third minion,
/// idle.
struct PastTheBound {
    _daemons: Vec<Daemon>,
    /// While this file exists a test build's writer commits no large
    /// return (nor acknowledges, nor fires it).
    hold: PathBuf,
    jid: String,
    big: String,
    fleet: Fleet,
}

fn past_the_bound(third: &str) -> PastTheBound {
    let fleet = Fleet::new();
    let ids = ["web1", "web2", third];
    let mut daemons = vec![fleet.start_master(&format!(
        "auto_accept: True\nreturn_commit_bytes: {HELD_BOUND}\n"
    ))];
    daemons.extend(ids.iter().map(|id| fleet.start_minion(id, "")));
    for id in ids {
        fleet.wait_responding(id);
    }
    let hold = halite_master::return_writer::hold_path(&fleet.path("master-cache/jobs.sqlite"));
    std::fs::write(&hold, b"").unwrap();
    // Large: past `SMALL_RETURN_BYTES` (64 KiB).
    let big = "x".repeat(100_000);
    let jid = async_jid(&fleet, &["web*", "test.arg", &big]);
    assert!(
        wait_for(Duration::from_secs(30), || {
            returns(&fleet.master_stats(), "held_bytes") >= HELD_BOUND
        }),
        "the large returns never reached the master: {}",
        fleet.master_stats()
    );
    PastTheBound {
        _daemons: daemons,
        hold,
        jid,
        big,
        fleet,
    }
}

/// The master's `returns` counter `key`.
fn returns(stats: &Value, key: &str) -> u64 {
    stats["returns"][key].as_u64().unwrap_or(0)
}

#[test]
fn a_pings_return_is_read_and_acknowledged_while_large_returns_hold_the_bound_and_the_writer() {
    if !can_run() {
        return;
    }
    let past = past_the_bound("probe");
    let (fleet, hold, jid, big) = (&past.fleet, &past.hold, &past.jid, &past.big);
    // Read past the bound, committed ahead of the held large returns,
    // acknowledged and its event fired: the CLI prints it.
    let (pings, code) = fleet.halite_json(&["probe", "test.ping", "-t", "60"]);
    let stats = fleet.master_stats();
    assert_eq!(code, 0, "{pings:?} {stats}");
    assert_eq!(pings.get("probe"), Some(&Value::Bool(true)), "{stats}");
    assert!(returns(&stats, "held_bytes") >= HELD_BOUND, "{stats}");
    assert!(returns(&stats, "read_past_bound") >= 1, "{stats}");
    assert!(returns(&stats, "small_acked") >= 1, "{stats}");
    let lookup = |jid: &str| -> Value {
        let out = fleet.cli("halite-run", &["jobs.lookup_jid", jid, "--out", "json"]);
        serde_json::from_slice(&out.stdout).unwrap_or_default()
    };
    assert_eq!(
        lookup(jid),
        serde_json::json!({}),
        "nothing large committed"
    );
    // Let go: both large returns are committed, none lost, nothing held.
    std::fs::remove_file(hold).unwrap();
    assert!(
        wait_for(Duration::from_secs(60), || {
            let found = lookup(jid);
            ["web1", "web2"]
                .iter()
                .all(|id| found[id]["args"][0] == big.as_str())
        }),
        "the large returns never landed: {}",
        fleet.master_stats()
    );
    assert!(
        wait_for(Duration::from_secs(30), || {
            returns(&fleet.master_stats(), "held") == 0
        }),
        "{}",
        fleet.master_stats()
    );
}

#[test]
fn a_large_event_parked_at_the_bound_is_fired_once_the_commits_make_room() {
    if !can_run() {
        return;
    }
    let past = past_the_bound("sender");
    let (fleet, hold) = (&past.fleet, &past.hold);
    let watcher = fleet.watch_events();
    // An event of ~100 KB (past the small messages' 68 KiB) from a third
    // minion: parked, not fired, while the bound holds.
    let parked_before = returns(&fleet.master_stats(), "parked");
    let tag = "myco/large/event";
    // Not waited for: the return of event.send may come behind the
    // event on the minion's connection, parked with it.
    let payload = format!("{{\"payload\": \"{}\"}}", "y".repeat(100_000));
    let _sent = async_jid(fleet, &["sender", "event.send", tag, &payload]);
    let fired = |printed: &str| {
        bus_events(printed)
            .iter()
            .any(|(t, d)| t == tag && d["data"]["payload"].as_str().map(str::len) == Some(100_000))
    };
    assert!(
        wait_for(Duration::from_secs(30), || {
            returns(&fleet.master_stats(), "parked") > parked_before
        }),
        "the event was not parked: {}",
        fleet.master_stats()
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !fired(&watcher.peek()),
        "fired while the bound held: {}",
        fleet.master_stats()
    );
    // Let go: the large returns are committed, the room comes back, and
    // the parked event is handled.
    std::fs::remove_file(hold).unwrap();
    assert!(
        wait_for(Duration::from_secs(60), || fired(&watcher.peek())),
        "the parked event was never fired: {}",
        fleet.master_stats()
    );
    watcher.stop();
}
