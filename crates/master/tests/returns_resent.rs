//! Issue 25, session 20: a return is sent again only when its
//! acknowledgement is overdue. The minion's periodic resend (every
//! `master_alive_interval`) used to send every unacknowledged return,
//! including one sent a moment before whose acknowledgement was on its
//! way (the master acknowledges after the job cache's commit): in a
//! 1,000-minion fleet run, 45 returns of ~0.2 MB went out twice at one
//! instant. Here the minion's requests go through a relay that holds
//! back what the master sends for a few seconds after the return went
//! out: the acknowledgement is late, the session stays up, and the return
//! must not be sent again before `request_channel_timeout`; with that
//! timeout short, the same late acknowledgement has it sent again (a lost
//! return is still recovered).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::time::Duration;

use common::{async_jid, can_run, sessions, wait_for, Fleet};
use halite_test_support::relay::Relay;
use serde_json::json;

/// Keepalive every 4 s (the resend's period), the master given up after
/// 12 s of silence: the hold below fits well inside.
const KEEPALIVE: &str =
    "auth_timeout: 2\nmaster_alive_interval: 4\nrecon_default: 200\nrecon_max: 1000\nacceptance_wait_time: 1";

/// The master's log lines about return `jid` sent again.
fn resends_of(fleet: &Fleet, jid: &str) -> usize {
    std::fs::read_to_string(fleet.path("master.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("return resent") && l.contains(jid))
        .count()
}

/// Runs `test.sleep 1` on minion `steady` (reached through a relay,
/// with `request_channel_timeout` `resend`) while what the master sends
/// is held back from just before the job until 4.5 s after its return
/// reached the job cache; then the return's resends the master logged.
fn resends_of_a_late_ack(resend: u64) -> usize {
    let fleet = Fleet::new();
    let _master = fleet.start_master("auto_accept: True");
    let relay = Relay::start(fleet.ret_port);
    let minion = fleet.start_minion_at(
        "steady",
        relay.port,
        fleet.publish_port,
        &format!("{KEEPALIVE}\nrequest_channel_timeout: {resend}"),
    );
    fleet.wait_responding("steady");
    let before = sessions(&minion);
    relay.hold_from_master(true);
    let jid = async_jid(&fleet, &["steady", "test.sleep", "1"]);
    let landed = wait_for(Duration::from_secs(20), || {
        let out = fleet.cli("halite-run", &["jobs.lookup_jid", &jid, "--out", "json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        v["steady"] == json!(true)
    });
    assert!(
        landed,
        "the return never reached the job cache: {}",
        minion.log_text()
    );
    // A resend step (every 4 s) falls inside the hold; the minion's last
    // word from the master was at most ~4 s before it: under 12 s in all.
    std::thread::sleep(Duration::from_millis(4500));
    relay.hold_from_master(false);
    // The acknowledgement arrives: the return leaves the minion's store.
    assert!(
        wait_for(Duration::from_secs(10), || std::fs::read_dir(
            fleet.path("minion-steady/cache/returns")
        )
        .is_ok_and(|d| d.count() == 0)),
        "the return was never acknowledged: {}",
        minion.log_text()
    );
    assert_eq!(
        sessions(&minion),
        before,
        "the minion reconnected (a new session resends its returns): the test means nothing: {}",
        minion.log_text()
    );
    resends_of(&fleet, &jid)
}

#[test]
fn a_return_whose_acknowledgement_is_late_is_not_sent_again() {
    if !can_run() {
        return;
    }
    assert_eq!(
        resends_of_a_late_ack(60),
        0,
        "a return sent again before request_channel_timeout"
    );
}

#[test]
fn a_return_unacknowledged_past_request_channel_timeout_is_sent_again() {
    if !can_run() {
        return;
    }
    assert!(
        resends_of_a_late_ack(1) >= 1,
        "a return unacknowledged for longer than request_channel_timeout was never sent again"
    );
}
