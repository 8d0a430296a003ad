//! Targeting by data the master caches, against real minions on loopback:
//! ipcidr (`-S`, `S@`) from the minions' `ipv4` grains, pillar (`-I`,
//! `-J`, `I@`, `J@`) from the pillar the master compiled for them, which
//! must survive a master restart; range (`-R`, `R@`) refused by name.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;

/// id, role its pillar top gives it, the extra address in its ipv4 grain.
const FLEET: [(&str, &str, &str); 3] = [
    ("web1", "web", "10.20.1.5"),
    ("web2", "web", "10.20.2.5"),
    ("db1", "db", "192.168.50.9"),
];

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

fn master_extra(fleet: &Fleet) -> String {
    let pillar = fleet.path("pillar");
    std::fs::create_dir_all(&pillar).unwrap();
    std::fs::write(
        pillar.join("top.sls"),
        "base:\n  'web*':\n    - web\n  'db*':\n    - db\n",
    )
    .unwrap();
    std::fs::write(pillar.join("web.sls"), "role: web\ntier: front-canary\n").unwrap();
    std::fs::write(pillar.join("db.sls"), "role: db\ntier: back\n").unwrap();
    format!(
        "auto_accept: True\npillar_roots:\n  base:\n    - {}\n",
        pillar.display()
    )
}

#[test]
fn ipcidr_pillar_and_range_targets_on_real_minions() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let extra = master_extra(&fleet);
    let mut master = fleet.start_master(&extra);
    let mut minions = Vec::new();
    for (id, _, ip) in FLEET {
        minions.push(fleet.start_minion(
            id,
            &format!("grains:\n  ipv4: ['127.0.0.1', '{ip}']\n  os: Debian\n"),
        ));
    }
    for (id, ..) in FLEET {
        fleet.wait_responding(id);
    }
    let check = |args: &[&str], want: &[&str]| {
        let mut full = args.to_vec();
        full.extend(["-t", "5"]);
        let (rets, _) = fleet.halite_json(&full);
        let got: BTreeSet<String> = rets.keys().cloned().collect();
        assert_eq!(got, set(want), "target {args:?}");
    };

    // ipcidr, from the ipv4 grains.
    check(
        &["-S", "127.0.0.0/8", "test.ping"],
        &["web1", "web2", "db1"],
    );
    check(&["-S", "10.20.0.0/16", "test.ping"], &["web1", "web2"]);
    check(&["-S", "10.20.2.5", "test.ping"], &["web2"]);
    check(&["-S", "172.16.0.0/12", "test.ping"], &[]);
    check(
        &[
            "-C",
            "S@10.20.0.0/16 and not G@os:RedHat and not web2",
            "test.ping",
        ],
        &["web1"],
    );
    check(
        &["-C", "S@192.168.0.0/16 or web2", "test.ping"],
        &["web2", "db1"],
    );
    let out = fleet.cli("halite", &["-S", "10.20.1.5/16", "test.ping"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a bad CIDR must fail");
    assert!(err.contains("host bits set"), "{err}");

    // Range: refused, naming range.
    for args in [
        &["-R", "%cluster", "test.ping"][..],
        &["-C", "R@%cluster or web1", "test.ping"][..],
    ] {
        let out = fleet.cli("halite", args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} must fail");
        assert!(
            err.contains("range targeting (-R, R@) is not supported"),
            "{err}"
        );
    }

    // Pillar: each minion asked for its pillar when it connected (Salt's
    // minion compiles it at start), so -I matches before any job needed it.
    assert!(
        wait_for(Duration::from_secs(20), || {
            let (rets, _) = fleet.halite_json(&["-I", "role:web", "test.ping", "-t", "5"]);
            rets.keys().cloned().collect::<BTreeSet<String>>() == set(&["web1", "web2"])
        }),
        "the minions' pillars never reached the master's cache"
    );
    let (rets, _) = fleet.halite_json(&["*", "pillar.items", "unmask=True", "-t", "10"]);
    assert_eq!(rets["web1"]["role"], "web", "{rets:?}");
    assert_eq!(rets["db1"]["role"], "db", "{rets:?}");
    let pillar_checks = || {
        check(&["-I", "role:web", "test.ping"], &["web1", "web2"]);
        check(&["-I", "tier:*canary", "test.ping"], &["web1", "web2"]);
        check(&["-J", "tier:b.ck", "test.ping"], &["db1"]);
        check(
            &["-C", "I@role:web and S@10.20.2.0/24", "test.ping"],
            &["web2"],
        );
        check(&["-C", "J@role:^d or web1", "test.ping"], &["web1", "db1"]);
        check(&["-C", "not I@role:web", "test.ping"], &["db1"]);
    };
    pillar_checks();

    // After a restart the cache is read back from the job cache database:
    // test.ping compiles no pillar, so only the stored one can match.
    master.kill();
    let _master = fleet.start_master(&extra);
    for (id, ..) in FLEET {
        fleet.wait_responding(id);
    }
    pillar_checks();
}
