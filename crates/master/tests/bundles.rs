//! Issue 25, bundles on the wire: a real master and real minions on
//! loopback. A minion that holds the bundle its job compiles to is not
//! sent it again; a changed tree sends a new one; large bundles travel
//! zstd-compressed and still run exactly; the master never prepares more
//! replies at once than `max_bundles_in_flight`. What was sent is read
//! from the master's counters (`halite-run master.stats`), not from timing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::path::Path;

use common::{can_run, Fleet};
use serde_json::Value;

use common::write_file as write;

/// A state tree of `n` test states named after the minion and `version`
/// (large enough, at a few hundred states, to be compressed), and a pillar.
fn tree(root: &Path, n: usize, version: &str) {
    write(&root.join("salt/top.sls"), "base:\n  '*':\n    - many\n");
    write(
        &root.join("salt/many.sls"),
        &format!(
            "{{% for i in range({n}) %}}\n{version}_{{{{ i }}}}:\n  test.succeed_without_changes:\n    - name: {{{{ grains['id'] }}}} {{{{ pillar['role'] }}}} {version} {{{{ i }}}}\n{{% endfor %}}\n"
        ),
    );
    write(&root.join("pillar/top.sls"), "base:\n  '*':\n    - data\n");
    write(&root.join("pillar/data.sls"), "role: web\n");
}

fn master_extra(fleet: &Fleet, extra: &str) -> String {
    let root = fleet.root.path().display();
    format!(
        "auto_accept: True\nfile_roots:\n  base:\n    - {root}/salt\npillar_roots:\n  base:\n    - {root}/pillar\n{extra}"
    )
}

/// The master's bundle counters.
fn stats(fleet: &Fleet) -> Value {
    fleet.master_stats()["bundles"].clone()
}

/// The counters once the start-up pillar bundle has been sent (at most 10 s).
fn stats_after_startup_pillar(fleet: &Fleet) -> Value {
    for _ in 0..100 {
        let now = stats(fleet);
        if count(&now, "sent") >= 1 {
            return now;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    stats(fleet)
}

fn count(stats: &Value, key: &str) -> u64 {
    stats[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no {key} in {stats}"))
}

/// Runs `state.apply` on every minion; each must return `n` states, all
/// true, with `version` in their names (so the bundle run is this tree's).
fn apply_all(fleet: &Fleet, ids: &[String], n: usize, version: &str) {
    // No queue=True: each swarm identity takes its own state-run lock.
    let (rets, code) = fleet.halite_json(&["*", "state.apply", "-t", "120"]);
    assert_eq!(code, 0, "{rets:?}");
    for id in ids {
        let ret = rets[id]
            .as_object()
            .unwrap_or_else(|| panic!("{id}: {rets:?}"));
        assert_eq!(ret.len(), n, "{id} ran {} states", ret.len());
        for (key, state) in ret {
            assert_eq!(state["result"], Value::Bool(true), "{key}: {state}");
            assert!(key.contains(&format!("{version}_")), "{key}");
            let name = state["name"].as_str().unwrap_or_default();
            assert!(
                name.starts_with(&format!("{id} web {version} ")),
                "{key}: {name}"
            );
        }
    }
}

#[test]
fn an_unchanged_bundle_is_not_sent_again_and_a_changed_tree_sends_a_new_one() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    tree(fleet.root.path(), 300, "v1");
    // Bundles over 1 KiB are compressed: all of these (300 chunks).
    let _master = fleet.start_master(&master_extra(&fleet, "bundle_compress_threshold: 1024\n"));
    let swarm = fleet.start_swarm(3, "");
    let ids: Vec<String> = (0..3).map(|i| format!("swarm-{i}")).collect();

    apply_all(&fleet, &ids, 300, "v1");
    let first = stats(&fleet);
    assert_eq!(count(&first, "sent"), 3, "{first}");
    assert_eq!(count(&first, "unchanged"), 0, "{first}");
    assert_eq!(count(&first, "compile_skipped"), 0, "{first}");
    // Compressed on the wire, and the states above ran from it exactly.
    assert_eq!(count(&first, "compressed"), 3, "{first}");
    assert!(
        count(&first, "wire_bytes") * 3 < count(&first, "plain_bytes"),
        "{first}"
    );
    // The three minions' high data differ only by their id (issue 25,
    // session 21): the first compiles its own, the other two got bundles
    // written from the id form's bytes, and ran them (apply_all above).
    let id_form = &fleet.master_stats()["id_form"];
    assert_eq!(id_form["first_seen"], 1, "{id_form}");
    assert_eq!(
        count(id_form, "hits") + count(id_form, "compiled"),
        2,
        "{id_form}"
    );
    // Of the hits, those found by comparison with a kept form (session
    // 23), without the key's walk: shown, and never more than the hits.
    assert!(
        count(id_form, "compared") <= count(id_form, "hits"),
        "{id_form}"
    );
    // And those served from a recorded plan's render forms without their
    // high data (session 24): shown, and hits too, never both ways.
    assert!(
        count(id_form, "compared") + count(id_form, "through_render") <= count(id_form, "hits"),
        "{id_form}"
    );
    // Each identity keeps its bundle for the next job.
    let kept = fleet.path("swarm/cache/bundles");
    for id in &ids {
        assert!(
            kept.join(format!("{id}.bundle")).is_file(),
            "{id}'s bundle not kept"
        );
    }

    // The same tree again: every minion holds its bundle, none is sent.
    apply_all(&fleet, &ids, 300, "v1");
    let second = stats(&fleet);
    assert_eq!(count(&second, "sent"), 3, "{second}");
    assert_eq!(count(&second, "unchanged"), 3, "{second}");
    assert_eq!(count(&second, "wire_bytes"), count(&first, "wire_bytes"));
    // Nor compiled: the compile records show no input changed.
    assert_eq!(count(&second, "compile_skipped"), 3, "{second}");

    // A changed tree compiles to new bundles: sent again, and what runs is new.
    tree(fleet.root.path(), 300, "v2");
    apply_all(&fleet, &ids, 300, "v2");
    let third = stats(&fleet);
    assert_eq!(count(&third, "sent"), 6, "{third}");
    assert_eq!(count(&third, "unchanged"), 3, "{third}");
    assert_eq!(count(&third, "compile_skipped"), 3, "{third}");

    // A held bundle that is gone (the cache wiped under the running
    // minion, which still names it) is asked for again in full: three
    // "you have it" answers, one of them followed by the bundle itself.
    std::fs::remove_file(kept.join("swarm-1.bundle")).unwrap();
    apply_all(&fleet, &ids, 300, "v2");
    let fourth = stats(&fleet);
    assert_eq!(count(&fourth, "sent"), 7, "{fourth}");
    assert_eq!(count(&fourth, "unchanged"), 6, "{fourth}");
    assert_eq!(count(&fourth, "compile_skipped"), 6, "{fourth}");
    assert!(kept.join("swarm-1.bundle").is_file());
    drop(swarm);
}

#[test]
fn a_held_bundle_damaged_on_disk_is_fetched_again_not_run() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    tree(fleet.root.path(), 20, "v1");
    let _master = fleet.start_master(&master_extra(&fleet, ""));
    let _minion = fleet.start_minion("web1", "");
    fleet.wait_responding("web1");
    let ids = vec!["web1".to_string()];
    // The minion asks for its pillar at start, and the answer may still be
    // on its way when it first answers a ping (seen under load): counted
    // from once it has been sent.
    let before = stats_after_startup_pillar(&fleet);
    apply_all(&fleet, &ids, 20, "v1");
    // Small bundles travel plain, and are kept all the same.
    let first = stats(&fleet);
    let delta = |now: &Value, key: &str| count(now, key) - count(&before, key);
    assert_eq!(
        (delta(&first, "sent"), delta(&first, "compressed")),
        (1, 0),
        "{first}"
    );
    let kept = fleet.path("minion-web1/cache/bundles/web1.bundle");
    assert!(kept.is_file());
    // Kept sealed (it holds the pillar): not a zstd frame anyone can read.
    assert!(halite_proto::bundle::decompress(&std::fs::read(&kept).unwrap()).is_err());
    // Replaced by another valid zstd file: its digest no longer matches
    // what the minion remembers, so it asks in full and runs the real one.
    std::fs::write(&kept, halite_proto::bundle::compress(b"another").unwrap()).unwrap();
    apply_all(&fleet, &ids, 20, "v1");
    let second = stats(&fleet);
    assert_eq!(delta(&second, "sent"), 2, "{second}");
    assert_eq!(delta(&second, "unchanged"), 1, "{second}");
}

#[test]
fn the_master_prepares_no_more_bundles_at_once_than_its_bound() {
    if !can_run() {
        return;
    }
    for (bound, expect_bounded) in [(1usize, true), (64, false)] {
        let fleet = Fleet::new();
        tree(fleet.root.path(), 100, "v1");
        let _master = fleet.start_master(&master_extra(
            &fleet,
            &format!("max_bundles_in_flight: {bound}\n"),
        ));
        let _swarm = fleet.start_swarm(20, "");
        let ids: Vec<String> = (0..20).map(|i| format!("swarm-{i}")).collect();
        apply_all(&fleet, &ids, 100, "v1");
        let s = stats(&fleet);
        assert_eq!(count(&s, "max_in_flight"), bound as u64, "{s}");
        assert_eq!(count(&s, "sent"), 20, "{s}");
        assert_eq!(count(&s, "in_flight"), 0, "{s}");
        let peak = count(&s, "peak_in_flight");
        if expect_bounded {
            assert_eq!(peak, 1, "the bound of 1 was not held: {s}");
        } else {
            // The same fleet unbounded prepares several at once: the
            // counter above can see a breach.
            assert!(peak > 1, "{s}");
        }
    }
}
