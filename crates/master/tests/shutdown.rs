//! SIGTERM drains both daemons (halite_transport::Shutdown): a stopping
//! minion finishes the job it runs and its return reaches the job cache,
//! or past its grace abandons it with a failed return kept on disk for
//! the next start; a master stopped while returns arrive loses none.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::time::Duration;

use common::*;
use halite_master::jobcache::JobCache;
use serde_json::{json, Value};

fn jid_of_async(text: &str) -> String {
    text.trim()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_string()
}

fn sigterm(daemon: &Daemon) {
    let pid = daemon.child.id() as libc::pid_t;
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
}

/// The returns of `jid` in the stopped master's job cache, by minion id.
fn cached_returns(fleet: &Fleet, jid: &str) -> serde_json::Map<String, Value> {
    let cache = JobCache::open(&fleet.path("master-cache/jobs.sqlite")).expect("job cache");
    cache.returns(jid).expect("returns").into_iter().collect()
}

/// Unacknowledged returns `id` keeps on disk.
fn returns_on_disk(fleet: &Fleet, id: &str) -> usize {
    std::fs::read_dir(fleet.path(&format!("minion-{id}/cache/returns")))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// `test.sleep secs` started on `id` (its jid, once the minion runs it).
fn start_sleep(fleet: &Fleet, minion: &Daemon, id: &str, secs: &str) -> String {
    let (text, code) = fleet.halite(&[id, "test.sleep", secs, "--async"]);
    assert_eq!(code, 0, "{text}");
    let jid = jid_of_async(&text);
    assert!(
        wait_for(Duration::from_secs(10), || minion.log_text().contains(&jid)),
        "the job never started"
    );
    jid
}

#[test]
fn a_minion_given_sigterm_mid_job_finishes_it_and_the_return_reaches_the_job_cache() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let mut master = fleet.start_master("auto_accept: True");
    let mut minion = fleet.start_minion("steady", "");
    fleet.wait_responding("steady");
    let jid = start_sleep(&fleet, &minion, "steady", "3");
    sigterm(&minion);
    let exited = wait_for(Duration::from_secs(30), || !minion.alive());
    assert!(exited, "the stopping minion never exited");
    let status = minion.child.wait().expect("exit status");
    assert!(status.success(), "{status:?}\n{}", minion.log_text());
    assert!(
        minion.log_text().contains("stopping: no new jobs"),
        "{}",
        minion.log_text()
    );
    // Sent and acknowledged before the minion exited.
    assert_eq!(
        returns_on_disk(&fleet, "steady"),
        0,
        "{}",
        minion.log_text()
    );
    master.kill();
    assert_eq!(
        cached_returns(&fleet, &jid)
            .get("steady")
            .map(|r| &r["return"]),
        Some(&json!(true)),
        "{}",
        minion.log_text()
    );
}

#[test]
fn a_minion_past_its_grace_abandons_the_job_and_the_master_learns_it_after_the_restart() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let mut master = fleet.start_master("auto_accept: True");
    let mut minion = fleet.start_minion("brief", "shutdown_grace: 1");
    fleet.wait_responding("brief");
    let jid = start_sleep(&fleet, &minion, "brief", "60");
    sigterm(&minion);
    let exited = wait_for(Duration::from_secs(20), || !minion.alive());
    assert!(exited, "the minion waited past its grace");
    assert!(minion.child.wait().expect("exit status").success());
    assert_eq!(
        returns_on_disk(&fleet, "brief"),
        1,
        "the abandoned job left no return on disk:\n{}",
        minion.log_text()
    );

    // The next start sends it; the job is not run again.
    let restarted = fleet.start_minion("brief", "shutdown_grace: 1");
    assert!(
        wait_for(Duration::from_secs(30), || returns_on_disk(&fleet, "brief")
            == 0),
        "the abandoned job's return was never acknowledged:\n{}",
        restarted.log_text()
    );
    master.kill();
    let rets = cached_returns(&fleet, &jid);
    let ret = rets.get("brief").expect("the abandoned job's return");
    assert_eq!(ret["retcode"], json!(1), "{ret}");
    assert!(
        ret["return"]
            .as_str()
            .is_some_and(|t| t.contains("shutdown_grace of 1 s and was abandoned")),
        "{ret}"
    );
    // One log for both runs of the minion: the job started once.
    let runs = restarted
        .log_text()
        .lines()
        .filter(|l| l.contains("running job") && l.contains(&jid))
        .count();
    assert_eq!(runs, 1, "the restarted minion ran the job again");
}

#[test]
fn a_master_given_sigterm_while_returns_arrive_loses_none() {
    if !can_run() {
        return;
    }
    const N: usize = 60;
    let fleet = Fleet::new();
    let mut master = fleet.start_master("auto_accept: True");
    let _swarm = fleet.start_swarm(
        N,
        "acceptance_wait_time: 1\nauth_timeout: 2\nmaster_alive_interval: 1\nrecon_default: 200\nrecon_max: 1000",
    );
    let (text, code) = fleet.halite(&["*", "test.sleep", "1", "--async"]);
    assert_eq!(code, 0, "{text}");
    let jid = jid_of_async(&text);
    // The returns come in from about now on.
    std::thread::sleep(Duration::from_secs(1));
    sigterm(&master);
    assert!(
        wait_for(Duration::from_secs(20), || !master.alive()),
        "the master did not stop"
    );
    assert!(master.child.wait().expect("exit status").success());
    assert!(
        master.log_text().contains("draining the work in flight"),
        "{}",
        master.log_text()
    );
    let before = cached_returns(&fleet, &jid).len();

    // Returns the stopped master did not acknowledge are resent to the next one.
    let _master = fleet.start_master("auto_accept: True");
    let all = wait_for(Duration::from_secs(40), || {
        let out = fleet.cli("halite-run", &["jobs.lookup_jid", &jid, "--out", "json"]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        v.as_object().map_or(0, |m| m.len()) == N
    });
    eprintln!("{before} of {N} returns were in the job cache when the master stopped");
    assert!(all, "returns were lost across the master's shutdown");
}
