//! Issue 25, session 20: the master answers a minion's fileserver
//! listings while every compile thread is busy. A highstate's sync of
//! custom modules (Salt's `autoload_dynamic_modules`) lists `_modules`,
//! `_states`... before the minion asks for its bundle; those listings
//! used to wait in the compile threads' queue behind the fleet's bundle
//! requests. Here every compile thread is held by a highstate whose
//! template waits on a render-time call (`cmd.run` of a `sleep` on the
//! swarm's identities), and another minion's warm `saltutil.sync_all`
//! (listings, and a stat of the module it keeps) must come back while
//! those compiles still wait.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::time::Duration;

use common::{can_run, wait_for, write_file as write, Fleet};
use serde_json::json;

#[test]
fn a_sync_is_answered_while_every_compile_thread_waits() {
    if !can_run() {
        return;
    }
    // The master runs one compile thread per core of this machine.
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let held = cores.min(16);
    let fleet = Fleet::new();
    let root = fleet.root.path();
    let done = root.join("done");
    write(
        &root.join("salt/top.sls"),
        "base:\n  'swarm-*':\n    - slow\n",
    );
    write(
        &root.join("salt/slow.sls"),
        &format!(
            "{{% set waited = salt['cmd.run']('touch {r}/started-' ~ grains['id'] ~ '; sleep 12; touch {d}') %}}\n\
             slow:\n  test.succeed_without_changes: []\n",
            r = root.display(),
            d = done.display(),
        ),
    );
    write(
        &root.join("salt/_modules/mine_of_mine.py"),
        "def hello():\n    return 'hello'\n",
    );
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base:\n    - {}/salt\nrender_call_timeout: 60\n",
        root.display()
    ));
    let _swarm = fleet.start_swarm(held, "");
    let _minion = fleet.start_minion("steady", "");
    fleet.wait_responding("steady");
    // The module is copied once: the sync during the compiles is a warm
    // one (listings, and a stat of the module kept), a highstate's own.
    let (rets, code) = fleet.halite_json(&["steady", "saltutil.sync_all", "-t", "60"]);
    assert_eq!(code, 0, "{rets:?}");
    assert_eq!(
        rets["steady"]["modules"],
        json!(["modules.mine_of_mine"]),
        "{rets:?}"
    );
    let (text, code) = fleet.halite(&["swarm-*", "state.apply", "--async"]);
    assert_eq!(code, 0, "{text}");
    let all_started = wait_for(Duration::from_secs(60), || {
        (0..held).all(|i| root.join(format!("started-swarm-{i}")).exists())
    });
    assert!(
        all_started,
        "the compiles' render-time calls never all started"
    );
    let (rets, code) = fleet.halite_json(&["steady", "saltutil.sync_all", "-t", "60"]);
    assert_eq!(code, 0, "{rets:?}");
    assert_eq!(rets["steady"]["modules"], json!([]), "{rets:?}");
    assert!(
        !done.exists(),
        "the sync's listings were answered only once a compile thread was free"
    );
}
