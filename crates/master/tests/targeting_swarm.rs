//! ipcidr targets over a swarm: 20 identities in one `halite-minion
//! --swarm` process, identity n reporting `ipv4: [127.0.0.1, 10.0.0.n]`
//! and `os` cycling Ubuntu, Debian, CentOS, Fedora.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;

const N: usize = 20;

#[test]
fn ipcidr_selects_swarm_identities_by_their_ipv4_grains() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let _master = fleet.start_master("auto_accept: True");
    let _swarm = fleet.start_swarm(N, "");
    let ids = |args: &[&str]| -> BTreeSet<String> {
        let mut full = args.to_vec();
        full.extend(["-t", "5"]);
        fleet.halite_json(&full).0.keys().cloned().collect()
    };
    let swarm =
        |ns: &[usize]| -> BTreeSet<String> { ns.iter().map(|n| format!("swarm-{n}")).collect() };
    let all: Vec<usize> = (0..N).collect();
    assert!(
        wait_for(Duration::from_secs(40), || ids(&["*", "test.ping"])
            == swarm(&all)),
        "the swarm never answered"
    );
    assert_eq!(ids(&["-S", "127.0.0.0/8", "test.ping"]), swarm(&all));
    assert_eq!(
        ids(&["-S", "10.0.0.0/29", "test.ping"]),
        swarm(&[0, 1, 2, 3, 4, 5, 6, 7])
    );
    assert_eq!(ids(&["-S", "10.0.0.13", "test.ping"]), swarm(&[13]));
    assert_eq!(
        ids(&["-C", "S@10.0.0.0/29 and G@os:Debian", "test.ping"]),
        swarm(&[1, 5])
    );
    assert_eq!(
        ids(&["-C", "S@10.0.0.16/30 or S@10.0.0.2", "test.ping"]),
        swarm(&[2, 16, 17, 18, 19])
    );
    assert!(ids(&["-S", "10.0.1.0/24", "test.ping"]).is_empty());
}
