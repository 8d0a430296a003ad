//! A state run's progress events through a real master and minion (issue
//! 25): the minion sends them in batches, and the master still fires one
//! `salt/job/<jid>/prog/<id>/<n>` event per state on its bus, in order,
//! in Salt's envelope, before the return.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::time::Duration;

use common::{can_run, Fleet};
use serde_json::Value;

/// States in the run: more than one batch holds.
const STATES: usize = 300;

/// The text of an SLS of `states` test states, `number 0` to `number <states - 1>`.
fn many_states(states: usize) -> String {
    (0..states)
        .map(|n| {
            format!("state_{n:03}:\n  test.succeed_without_changes:\n    - name: number {n}\n")
        })
        .collect()
}

/// Starts an `auto_accept` master whose tree gives every minion (`top.sls`
/// `'*'`) the one SLS `sls_text`.
fn start_master(fleet: &Fleet, sls_text: &str) -> common::Daemon {
    let salt = fleet.path("salt");
    common::write_file(&salt.join("top.sls"), "base:\n  '*':\n    - tree\n");
    common::write_file(&salt.join("tree.sls"), sls_text);
    fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base: [{}]\n",
        salt.display()
    ))
}

/// The `(tag, data)` of each `tag<TAB>json` line a watcher printed.
fn fired(text: &str) -> Vec<(String, Value)> {
    text.lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(tag, json)| (tag.to_string(), serde_json::from_str(json).expect("json")))
        .collect()
}

/// Whether event `tag` with `data` is web1's return of a `state.apply`:
/// not a late return of the pings that waited for it to answer, which a
/// watcher subscribed just after may see first (1 run in 6 under load).
fn is_apply_return(tag: &str, data: &Value) -> bool {
    tag.starts_with("salt/job/") && tag.ends_with("/ret/web1") && data["fun"] == "state.apply"
}

/// `master.stats`' counters of minions' events: (messages, events).
fn event_counts(fleet: &Fleet) -> (u64, u64) {
    let stats = fleet.master_stats();
    (
        stats["events"]["messages"].as_u64().expect("messages"),
        stats["events"]["events"].as_u64().expect("events"),
    )
}

#[test]
fn progress_events_come_in_batches_and_fire_one_by_one_in_order() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let _master = start_master(&fleet, &many_states(STATES));
    let _minion = fleet.start_minion("web1", "");
    fleet.wait_responding("web1");
    let (messages_before, events_before) = event_counts(&fleet);
    // Subscribed before the job (a marker event came through), and read
    // on its own thread: 300 events never fill its pipe.
    let watcher = fleet.watch_events();
    let (rets, code) = fleet.halite_json(&["web1", "state.apply", "-t", "60"]);
    assert_eq!(code, 0, "{rets:?}");
    // Every event fired before a marker fired now is printed.
    let text = watcher.stop();
    let (messages_after, events_after) = event_counts(&fleet);

    // Every state's event, in run order, before the return.
    let fired = fired(&text);
    let ret_at = fired
        .iter()
        .position(|(t, data)| is_apply_return(t, data))
        .unwrap_or_else(|| panic!("no return event in {text}"));
    let jid = fired[ret_at].0.split('/').nth(2).expect("jid").to_string();
    let prefix = format!("salt/job/{jid}/prog/web1/");
    let prog: Vec<(usize, &(String, Value))> = fired
        .iter()
        .enumerate()
        .filter(|(_, (t, _))| t.starts_with(&prefix))
        .collect();
    assert_eq!(prog.len(), STATES, "{text}");
    for (n, (at, (tag, data))) in prog.iter().enumerate() {
        assert!(*at < ret_at, "prog event {n} after the return");
        assert_eq!(tag, &format!("{prefix}{n}"));
        // Salt's envelope of a minion's event, around what the minion sent.
        assert_eq!(data["cmd"], "_minion_event", "{data}");
        assert_eq!(data["id"], "web1");
        assert_eq!(data["tag"], tag.as_str());
        assert_eq!(data["data"]["len"], STATES);
        assert_eq!(data["data"]["ret"]["__run_num__"], n);
        assert_eq!(data["data"]["ret"]["name"], format!("number {n}"));
        assert!(data["_stamp"].is_string(), "{data}");
    }

    // The master counted them all, carried by far fewer messages.
    let events_in_run = events_after - events_before;
    let messages_in_run = messages_after - messages_before;
    assert!(events_in_run >= STATES as u64, "{events_in_run}");
    assert!(
        messages_in_run * 10 <= events_in_run,
        "{events_in_run} events came in {messages_in_run} messages: not batched"
    );
}

/// What a watching client of the local socket is streamed for one
/// `state.apply`: (progress events, returns).
fn streamed(fleet: &Fleet, progress: bool) -> (usize, usize) {
    use halite_master::local::{LocalBody, LocalClient, LocalReply};
    let mut client = LocalClient::connect(
        &fleet.path("master-sock/master.sock"),
        &fleet.path("master-cache/.root_key"),
    )
    .expect("connect");
    client
        .send(LocalBody::Publish {
            tgt: "web1".into(),
            tgt_type: "glob".into(),
            fun: "state.apply".into(),
            arg: vec![],
            kwarg: Default::default(),
            user: "root".into(),
            watch: true,
            progress,
        })
        .expect("publish");
    let (mut prog, mut returns) = (0, 0);
    while returns == 0 {
        match client.next(Some(Duration::from_secs(60))).expect("stream") {
            Some(LocalReply::Event { tag, .. }) if tag.contains("/prog/web1/") => prog += 1,
            Some(LocalReply::Return { id, .. }) if id == "web1" => returns += 1,
            Some(_) => {}
            None => panic!("the stream ended without web1's return"),
        }
    }
    (prog, returns)
}

#[test]
fn a_watching_client_is_streamed_progress_only_when_it_asks() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let _master = start_master(
        &fleet,
        "a:\n  test.succeed_without_changes: []\nb:\n  test.succeed_without_changes: []\nc:\n  test.succeed_without_changes: []\n",
    );
    let _minion = fleet.start_minion("web1", "");
    fleet.wait_responding("web1");
    // A client drawing progress (the CLI's bars) gets every state's event.
    assert_eq!(streamed(&fleet, true), (3, 1));
    // One that does not (`--out json` to a file, a runner) gets the return alone.
    assert_eq!(streamed(&fleet, false), (0, 1));
}

/// `salt/job/<jid>/new` carries the job's keyword arguments as Salt 3008.5
/// puts them in its `arg` (`condition_input`: the positional ones, then
/// one `{"__kwarg__": true, ...}` dict; captured from a real salt-master
/// in fixtures/orchestrate/salt-3008.5-events.txt), and a job without any
/// has no such dict.
#[test]
fn the_new_job_event_carries_keyword_arguments_as_salt_does() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let _master = fleet.start_master("auto_accept: True\n");
    let _minion = fleet.start_minion("web1", "");
    fleet.wait_responding("web1");
    let events = fleet.watch_events();
    let (_, code) = fleet.halite_json(&["web1", "test.arg", "one", "2", "size=big", "n=3"]);
    assert_eq!(code, 0);
    let (_, code) = fleet.halite_json(&["web1", "test.arg", "alone"]);
    assert_eq!(code, 0);
    let text = events.stop();
    let new: Vec<Value> = text
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .filter(|(tag, _)| tag.starts_with("salt/job/") && tag.ends_with("/new"))
        .map(|(_, json)| serde_json::from_str(json).expect("json"))
        .filter(|data: &Value| data["fun"] == "test.arg")
        .collect();
    assert_eq!(new.len(), 2, "{text}");
    assert_eq!(
        new[0]["arg"],
        serde_json::json!(["one", 2, {"__kwarg__": true, "size": "big", "n": 3}]),
        "{text}"
    );
    let kw = new[0]["arg"][2].as_object().expect("the keyword dict");
    assert_eq!(kw.keys().next().map(String::as_str), Some("__kwarg__"));
    assert_eq!(new[1]["arg"], serde_json::json!(["alone"]), "{text}");
}

/// `master.stats`' bus counters: (events built, events not built because
/// no subscriber wanted them).
fn bus_counts(fleet: &Fleet) -> (u64, u64) {
    let out = fleet.cli("halite-run", &["master.stats", "--out", "json"]);
    let stats: Value = serde_json::from_slice(&out.stdout).expect("master.stats json");
    (
        stats["bus"]["built"].as_u64().expect("built"),
        stats["bus"]["not_built"].as_u64().expect("not_built"),
    )
}

/// Minions in the fleet tests below (one swarm process).
const SWARM: usize = 8;
/// States each of them runs.
const FLEET_STATES: usize = 60;

#[test]
fn a_watcher_of_everything_sees_every_progress_event_of_a_fleet_job() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let _master = start_master(&fleet, &many_states(FLEET_STATES));
    let _swarm = fleet.start_swarm(SWARM, "");
    // Subscribed before the job (a marker came through), read on its own
    // thread: the events never fill its pipe.
    let watcher = fleet.watch_events();
    // The job's CLI does not draw progress (`--out json`): the watcher is
    // the only subscriber that wants the progress events.
    let (rets, code) = fleet.halite_json(&["swarm-*", "state.apply", "-t", "120"]);
    assert_eq!(code, 0, "{rets:?}");
    assert_eq!(rets.len(), SWARM, "{rets:?}");
    // Every event fired before a marker fired now is printed.
    let text = watcher.stop();
    let returns = text.lines().filter(|l| l.contains("/ret/swarm-")).count();
    assert!(
        returns >= SWARM,
        "the watcher saw {returns} returns:\n{text}"
    );
    let fired = fired(&text);
    for n in 0..SWARM {
        let id = format!("swarm-{n}");
        let ret_at = fired
            .iter()
            .position(|(t, _)| t.starts_with("salt/job/") && t.ends_with(&format!("/ret/{id}")))
            .unwrap_or_else(|| panic!("no return event of {id}"));
        let jid = fired[ret_at].0.split('/').nth(2).expect("jid").to_string();
        let prefix = format!("salt/job/{jid}/prog/{id}/");
        let prog: Vec<&(String, Value)> = fired
            .iter()
            .take(ret_at)
            .filter(|(t, _)| t.starts_with(&prefix))
            .collect();
        assert_eq!(prog.len(), FLEET_STATES, "{id}: {prog:?}");
        for (k, (tag, data)) in prog.iter().enumerate() {
            assert_eq!(tag, &format!("{prefix}{k}"));
            assert_eq!(data["cmd"], "_minion_event", "{data}");
            assert_eq!(data["id"], id.as_str());
            assert_eq!(data["data"]["ret"]["__run_num__"], k);
            assert!(data["_stamp"].is_string(), "{data}");
        }
    }
}

/// Starts a master and a swarm (its config `swarm_config`), runs the
/// fleet's job with `--out json` (its CLI wants the returns, no progress)
/// and nothing else watching; what the master's counters moved by:
/// (events received from minions, events built, events not built).
/// `None` where the daemons cannot run here.
fn unwatched_job(swarm_config: &str) -> Option<(u64, u64, u64)> {
    if !can_run() {
        return None;
    }
    let fleet = Fleet::new();
    let _master = start_master(&fleet, &many_states(FLEET_STATES));
    let _swarm = fleet.start_swarm(SWARM, swarm_config);
    let (built_before, skipped_before) = bus_counts(&fleet);
    let (_, received_before) = event_counts(&fleet);
    let (rets, code) = fleet.halite_json(&["swarm-*", "state.apply", "-t", "120"]);
    assert_eq!(code, 0, "{rets:?}");
    assert_eq!(rets.len(), SWARM, "{rets:?}");
    for (id, ret) in &rets {
        let states = ret.as_object().unwrap_or_else(|| panic!("{id}: {ret}"));
        assert_eq!(states.len(), FLEET_STATES, "{id}");
        assert!(states.values().all(|s| s["result"] == true), "{id}: {ret}");
    }
    let (built, skipped) = bus_counts(&fleet);
    let (_, received) = event_counts(&fleet);
    Some((
        received - received_before,
        built - built_before,
        skipped - skipped_before,
    ))
}

/// The progress events of the fleet's job.
const FLEET_PROGRESS: u64 = (SWARM * FLEET_STATES) as u64;

/// Issue 25, session 29: a job published while no subscriber of the bus
/// wants its progress events is published `progress_unwatched`, and its
/// minions fire none: not built on the master, and not sent either.
#[test]
fn progress_nobody_watches_is_not_sent() {
    let Some((received, built, _)) = unwatched_job("") else {
        return;
    };
    assert!(
        received < SWARM as u64,
        "the master received {received} events of a job of {FLEET_PROGRESS} states nobody watched"
    );
    // What was built is the job's returns and a few others (no more
    // than a handful per minion).
    assert!(
        built >= SWARM as u64 && built < 3 * SWARM as u64,
        "{built} events built for a job of {SWARM} minions"
    );
}

/// A minion whose config sets `state_events: True` (Salt's option) fires
/// every progress event whoever watches, as Salt's does; the master
/// builds none of them for a bus that does not want them.
#[test]
fn state_events_in_the_minions_config_fires_progress_unwatched() {
    let Some((received, _, skipped)) = unwatched_job("state_events: True\n") else {
        return;
    };
    assert!(
        received >= FLEET_PROGRESS,
        "the master received {received} events"
    );
    assert!(skipped >= FLEET_PROGRESS, "{skipped} events not built");
}

/// The text of an SLS of `states` test states that each fire their own
/// `salt/state_result/<jid>/<id>/<name>` event (`fire_event: True`).
fn firing_states(states: usize) -> String {
    (0..states)
        .map(|n| {
            format!("state_{n:03}:\n  test.succeed_without_changes:\n    - name: number {n}\n    - fire_event: True\n")
        })
        .collect()
}

/// Issue 25, session 24: a batch of a minion's events is read in place and
/// checked against the subscribers' interests once; every reader of the
/// bus (one of everything, one of a glob) still sees every state's
/// `salt/state_result` and progress event, with Salt's envelope, in run
/// order, before the return, and the same events as each other.
#[test]
fn every_reader_of_the_bus_sees_each_state_result_in_order() {
    use halite_master::local::{LocalBody, LocalClient, LocalReply};
    use std::sync::mpsc;
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let _master = start_master(&fleet, &firing_states(STATES));
    let _minion = fleet.start_minion("web1", "");
    fleet.wait_responding("web1");
    let watcher = fleet.watch_events();
    // `state.event tagmatch='*web1*'`, read on its own thread.
    let mut client = LocalClient::connect(
        &fleet.path("master-sock/master.sock"),
        &fleet.path("master-cache/.root_key"),
    )
    .expect("connect");
    client
        .send(LocalBody::Events {
            tagmatch: "*web1*".into(),
        })
        .expect("subscribe");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        while let Ok(Some(reply)) = client.next(None) {
            if let LocalReply::Event { tag, data } = reply {
                if tx.send((tag, data)).is_err() {
                    break;
                }
            }
        }
    });
    // Subscribed once a marker it wants comes through.
    let mut subscribed = false;
    for _ in 0..30 {
        fleet.cli("halite-run", &["event.send", "marker/web1"]);
        if rx.recv_timeout(Duration::from_secs(2)).is_ok() {
            subscribed = true;
            break;
        }
    }
    assert!(subscribed, "the glob's reader never saw its marker");
    let (rets, code) = fleet.halite_json(&["web1", "state.apply", "-t", "60"]);
    assert_eq!(code, 0, "{rets:?}");
    let everything = fired(&watcher.stop());
    let mut globbed = Vec::new();
    while !globbed
        .iter()
        .any(|(t, data): &(String, Value)| is_apply_return(t, data))
    {
        globbed.push(
            rx.recv_timeout(Duration::from_secs(60))
                .expect("the glob's reader never saw the return"),
        );
    }

    let ret_at = everything
        .iter()
        .position(|(t, data)| is_apply_return(t, data))
        .expect("the return");
    let jid = everything[ret_at]
        .0
        .split('/')
        .nth(2)
        .expect("jid")
        .to_string();
    let results: Vec<&(String, Value)> = everything[..ret_at]
        .iter()
        .filter(|(t, _)| t.starts_with(&format!("salt/state_result/{jid}/web1/")))
        .collect();
    assert_eq!(results.len(), STATES);
    for (n, (tag, data)) in results.iter().enumerate() {
        assert_eq!(tag, &format!("salt/state_result/{jid}/web1/number {n}"));
        assert_eq!(data["cmd"], "_minion_event", "{data}");
        assert_eq!(data["id"], "web1");
        assert_eq!(data["tag"], tag.as_str());
        assert_eq!(data["data"]["ret"]["name"], format!("number {n}"));
        assert_eq!(data["data"]["ret"]["__run_num__"], n);
        assert_eq!(data["data"]["ret"]["result"], true);
        assert!(data["_stamp"].is_string(), "{data}");
    }
    let progress = everything[..ret_at]
        .iter()
        .filter(|(t, _)| t.starts_with(&format!("salt/job/{jid}/prog/web1/")))
        .count();
    assert_eq!(progress, STATES);
    // The glob's reader: the very same events of the job, in the same order.
    let of_the_job = |events: &[(String, Value)]| -> Vec<(String, Value)> {
        events
            .iter()
            .filter(|(t, _)| t.contains(&jid) && t.contains("web1"))
            .cloned()
            .collect()
    };
    let all_of_the_job = of_the_job(&everything);
    assert_eq!(all_of_the_job.len(), 2 * STATES + 1);
    assert_eq!(of_the_job(&globbed), all_of_the_job);
}
