//! Issue 25, session 18: a render-time call that is lost is asked again.
//! While the master renders a minion's templates, `salt['cmd.run'](...)`
//! goes to the minion as a `RenderCall`; a lost call or answer used to
//! make the compile wait all of `render_call_timeout`, and a minion whose
//! connection was cut lost its job's bundle request at once. Here the
//! minion's connection to the master's request port goes through a relay
//! the test cuts while the call runs, and keeps down until the call has
//! ended, so its answer finds no session: the minion reconnects, asks for
//! its bundle again on its new session, the master sends the call again
//! there, and the minion answers it from what it kept. The highstate
//! renders, and the `cmd.run` (which appends a line to a file) ran once.
//! Without the master's repeat the compile waits `render_call_timeout`
//! and the highstate fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::time::Duration;

use common::{can_run, sessions, wait_for, write_file as write, Fleet};
use halite_test_support::relay::Relay;
use serde_json::Value;

#[test]
fn a_render_time_call_cut_off_by_a_reconnection_is_asked_again_and_runs_once() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let root = fleet.root.path();
    let (started, ran) = (root.join("started"), root.join("ran"));
    write(&root.join("salt/top.sls"), "base:\n  '*':\n    - call\n");
    // The call says it started, runs long enough for the cut, appends a
    // line and answers the count: run twice, it leaves two lines.
    write(
        &root.join("salt/call.sls"),
        &format!(
            "{{% set count = salt['cmd.run']('touch {s}; sleep 3; echo ran >> {r}; wc -l < {r}') %}}\n\
             called:\n  test.succeed_without_changes:\n    - name: \"ran {{{{ count | trim }}}}\"\n",
            s = started.display(),
            r = ran.display(),
        ),
    );
    // The repeats (2 s) well inside render_call_timeout, which is well
    // inside the CLI's wait: a call never asked again fails the compile.
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base:\n    - {}/salt\nrequest_channel_timeout: 2\nrender_call_timeout: 60\n",
        root.display()
    ));
    let relay = Relay::start(fleet.ret_port);
    let minion = fleet.start_minion_through("steady", relay.port, "request_channel_timeout: 2");
    fleet.wait_responding("steady");
    let before = sessions(&minion);
    let (rets, _) = std::thread::scope(|s| {
        let apply = s.spawn(|| fleet.halite_json(&["steady", "state.apply", "-t", "150"]));
        assert!(
            wait_for(Duration::from_secs(60), || started.exists()),
            "the render-time call never started: {}",
            minion.log_text()
        );
        relay.cut();
        // Down until the call has ended: its answer finds no session.
        assert!(
            wait_for(Duration::from_secs(30), || ran.exists()),
            "the render-time call never ended"
        );
        std::thread::sleep(Duration::from_millis(500));
        relay.restore();
        apply.join().unwrap()
    });
    assert!(
        sessions(&minion) > before,
        "the minion must reconnect for the test to mean anything: {}",
        minion.log_text()
    );
    let ret = rets.get("steady").expect("steady returns");
    let states = ret
        .as_object()
        .unwrap_or_else(|| panic!("not a state return: {ret}"));
    let called = states
        .iter()
        .find(|(k, _)| k.contains("_|-called_|-"))
        .map(|(_, s)| s.clone())
        .unwrap_or_else(|| panic!("no state `called`: {ret}"));
    assert_eq!(called["result"], Value::Bool(true), "{called}");
    assert_eq!(called["name"], Value::from("ran 1"), "{called}");
    let lines = std::fs::read_to_string(&ran).unwrap();
    assert_eq!(lines.lines().count(), 1, "the call ran more than once");
}
