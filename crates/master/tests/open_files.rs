//! The daemons raise their open-file limit at start (Salt's master's
//! `max_open_files`): a master started under the common soft limit of
//! 1,024 would run out of descriptors at ~500 minions (two connections
//! each). The test lowers its own soft limit before starting the real
//! daemons, which inherit it, and reads what they run with in
//! `/proc/<pid>/limits`. Its own test binary: the lowered limit must not
//! reach other tests.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use common::*;

/// The soft and hard open-file limits of process `pid`.
fn open_files(pid: u32) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let mut nums = line.split_whitespace().filter_map(|w| {
        w.parse::<u64>()
            .ok()
            .or((w == "unlimited").then_some(u64::MAX))
    });
    (nums.next().unwrap(), nums.next().unwrap())
}

#[test]
fn master_and_minion_raise_their_open_files_limit_to_max_open_files() {
    if !can_run() {
        return;
    }
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write one struct we own.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    let hard = lim.rlim_max;
    lim.rlim_cur = 256;
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);

    let fleet = Fleet::new();
    // The master with its own value, the minion with the default (Salt's
    // 100,000), each capped by the hard limit they inherited.
    let mut master = fleet.start_master("max_open_files: 4000\n");
    let mut minion = fleet.start_minion("m1", "");
    let (soft, master_hard) = open_files(master.child.id());
    assert_eq!(master_hard, hard, "the hard limit is never changed");
    assert_eq!(soft, 4000.min(hard), "{}", master.log_text());
    assert!(
        wait_for(std::time::Duration::from_secs(20), || open_files(
            minion.child.id()
        )
        .0 != 256),
        "the minion kept the soft limit of 256: {}",
        minion.log_text()
    );
    assert_eq!(open_files(minion.child.id()).0, 100_000.min(hard));
    minion.kill();
    master.kill();
}
