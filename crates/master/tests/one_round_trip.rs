//! A warm highstate's sync of custom modules and its bundle in one round
//! trip (issue 25, session 21), through a real master and minion: the
//! minion's bundle request says what it last synced, the master checks it
//! against its file server and answers "unchanged" with the bundle, or
//! "sync first". Salt's behaviour stays: a module changed on the master is
//! synced before the next highstate's render and used by it, a module
//! removed there is removed from the minion, and an unchanged warm
//! highstate makes one request (`master.stats`' `requests`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::write_file as write;
use common::{can_run, wait_for, Fleet};
use serde_json::{json, Value};

/// Writes the custom module `<root>/_modules/<name>.py`, whose `answer()`
/// returns `value`.
fn answer_module(root: &Path, name: &str, value: &str) {
    write(
        &root.join(format!("_modules/{name}.py")),
        &format!("def answer():\n    return '{value}'\n"),
    );
}

/// `master.stats`' count of the minions' requests, all kinds together, and
/// of the bundle requests alone.
fn requests(stats: &Value) -> (u64, u64) {
    let by_kind = stats["requests"].as_object().cloned().unwrap_or_default();
    let total = by_kind.values().filter_map(Value::as_u64).sum();
    let bundles = by_kind.get("bundle").and_then(Value::as_u64).unwrap_or(0);
    (total, bundles)
}

/// A `bundles` counter of `master.stats`.
fn bundles(stats: &Value, key: &str) -> u64 {
    stats["bundles"][key].as_u64().unwrap_or(0)
}

/// What one highstate of `py1` cost: requests (all, bundle), compiles,
/// checks found unchanged, "sync first" answers.
#[derive(Debug, PartialEq)]
struct Cost {
    requests: u64,
    bundle_requests: u64,
    compiles: u64,
    unchanged: u64,
    sync_first: u64,
}

/// One `state.apply` of `py1`: it succeeds; what it cost the master.
fn highstate(fleet: &Fleet, step: &str) -> Cost {
    let before = fleet.master_stats();
    let (rets, code) = fleet.halite_json(&["py1", "state.apply"]);
    assert_eq!(code, 0, "{step}: {rets:?}");
    let after = fleet.master_stats();
    let (total0, bundle0) = requests(&before);
    let (total1, bundle1) = requests(&after);
    Cost {
        requests: total1 - total0,
        bundle_requests: bundle1 - bundle0,
        compiles: bundles(&after, "packed") - bundles(&before, "packed"),
        unchanged: bundles(&after, "modules_unchanged") - bundles(&before, "modules_unchanged"),
        sync_first: bundles(&after, "sync_first") - bundles(&before, "sync_first"),
    }
}

#[test]
fn a_warm_highstate_syncs_in_its_bundle_request() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let salt = fleet.path("salt");
    let out = fleet.path("out");
    std::fs::create_dir_all(&out).unwrap();
    answer_module(&salt, "gone", "here");
    answer_module(&salt, "kept", "kept");
    write(&salt.join("top.sls"), "base:\n  '*':\n    - hs\n");
    write(
        &salt.join("hs.sls"),
        &format!(
            "hs:\n  file.managed:\n    - name: {}/hs\n    - contents: {{{{ salt['gone.answer']() if 'gone.answer' in salt else 'absent' }}}}\n",
            out.display()
        ),
    );
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base: [{}]\n",
        salt.display()
    ));
    let _minion = fleet.start_minion("py1", "");
    fleet.wait_responding("py1");
    // The minion's start-up refresh_pillar, compiled about when it first
    // answers: counted before the first step, not in it.
    assert!(
        wait_for(Duration::from_secs(30), || bundles(
            &fleet.master_stats(),
            "packed"
        ) >= 1),
        "the start-up refresh_pillar was never compiled: {}",
        fleet.master_stats()
    );
    let synced = fleet.path("minion-py1/cache/extmods/modules/gone.py");
    let hs = || std::fs::read_to_string(out.join("hs")).unwrap();

    // The first highstate: its saltenvs are not known yet, so it syncs
    // before asking, with a listing per kind of module.
    let first = highstate(&fleet, "the first highstate");
    assert_eq!(hs().trim(), "here");
    assert!(synced.is_file());
    assert_eq!(first.compiles, 1, "{first:?}");
    assert!(first.requests > 6, "{first:?}");

    // Warm, nothing changed: one request, the bundle's, found unchanged.
    let warm = highstate(&fleet, "a warm highstate");
    assert_eq!(
        warm,
        Cost {
            requests: 1,
            bundle_requests: 1,
            compiles: 1,
            unchanged: 1,
            sync_first: 0,
        }
    );

    // A module changed on the master: "sync first", nothing compiled
    // before the sync; the sync, then one compile that uses the new module.
    answer_module(&salt, "gone", "changed");
    let changed = highstate(&fleet, "a changed module");
    assert_eq!(hs().trim(), "changed");
    assert_eq!(
        (
            changed.sync_first,
            changed.compiles,
            changed.bundle_requests
        ),
        (1, 1, 2),
        "{changed:?}"
    );
    assert!(
        std::fs::read_to_string(&synced)
            .unwrap()
            .contains("changed"),
        "the minion holds the new module"
    );
    // And the next warm one is one request again.
    let again = highstate(&fleet, "warm after the sync");
    assert_eq!((again.requests, again.unchanged), (1, 1), "{again:?}");

    // Removed from the master: synced away before the render, which no
    // longer sees it, and the function is gone from the minion.
    std::fs::remove_file(salt.join("_modules/gone.py")).unwrap();
    let removed = highstate(&fleet, "a removed module");
    assert_eq!(
        (removed.sync_first, removed.compiles),
        (1, 1),
        "{removed:?}"
    );
    assert!(!synced.exists());
    assert_eq!(hs().trim(), "absent");
    let (rets, _) = fleet.halite_json(&["py1", "gone.answer"]);
    assert_eq!(rets["py1"], json!("'gone.answer' is not available."));

    // A module changed on the minion by hand (not by a sync): the digest
    // of what it holds differs, so it syncs back the master's.
    let kept = fleet.path("minion-py1/cache/extmods/modules/kept.py");
    std::fs::write(&kept, "def answer():\n    return 'edited'\n").unwrap();
    let edited = highstate(&fleet, "a module edited on the minion");
    assert_eq!(edited.sync_first, 1, "{edited:?}");
    assert!(std::fs::read_to_string(&kept).unwrap().contains("'kept'"));
}
