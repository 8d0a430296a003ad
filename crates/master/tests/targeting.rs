//! Targeting against real minions: ten minions with varied ids and
//! grains; every target form selects exactly the right set.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::collections::BTreeSet;

use common::*;

const FLEET: [(&str, &str, &str, &str); 10] = [
    ("web1", "Ubuntu", "web", "prod"),
    ("web2", "Ubuntu", "web", "dev"),
    ("web3.example.com", "Debian", "web", "prod"),
    ("db1", "Debian", "db", "prod"),
    ("db2", "CentOS", "db", "dev"),
    ("cache-a", "Ubuntu", "cache", "prod"),
    ("cache-b", "CentOS", "cache", "dev"),
    ("lb.prod", "Ubuntu", "lb", "prod"),
    ("mail", "Fedora", "mail", "prod"),
    ("Web4", "Fedora", "web", "dev"),
];

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

#[test]
fn every_target_form_selects_exactly_its_set() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let _master = fleet.start_master(
        "auto_accept: True\nnodegroups:\n  webs: 'web*'\n  prod_db: 'G@role:db and G@env:prod'\n  mixed:\n    - N@webs\n    - or\n    - L@mail\n",
    );
    let mut minions = Vec::new();
    for (id, os, role, env) in FLEET {
        minions.push(fleet.start_minion(
            id,
            &format!(
                "grains:\n  os: {os}\n  role: {role}\n  env: {env}\n  tags: [t-{role}, t-{env}]\n"
            ),
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
    check(
        &["web*", "test.ping"],
        &["web1", "web2", "web3.example.com"],
    );
    check(
        &["*[0-9]", "test.ping"],
        &["web1", "web2", "db1", "db2", "Web4"],
    );
    check(&["cache-[!a]", "test.ping"], &["cache-b"]);
    check(&["*.example.*", "test.ping"], &["web3.example.com"]);
    check(
        &["*", "test.ping"],
        &[
            "web1",
            "web2",
            "web3.example.com",
            "db1",
            "db2",
            "cache-a",
            "cache-b",
            "lb.prod",
            "mail",
            "Web4",
        ],
    );
    check(&["-E", "(web|db)1", "test.ping"], &["web1", "db1"]);
    check(
        &["-E", "[wW]eb[0-9]$", "test.ping"],
        &["web1", "web2", "Web4"],
    );
    check(&["-L", "mail,db2,nosuch", "test.ping"], &["mail", "db2"]);
    check(
        &["-G", "os:ubuntu", "test.ping"],
        &["web1", "web2", "cache-a", "lb.prod"],
    );
    check(
        &["-G", "tags:t-dev", "test.ping"],
        &["web2", "db2", "cache-b", "Web4"],
    );
    check(&["-G", "role:ca*", "test.ping"], &["cache-a", "cache-b"]);
    check(
        &["-P", "os:(cent|fed).*", "test.ping"],
        &["db2", "cache-b", "mail", "Web4"],
    );
    check(
        &["-C", "G@env:prod and not G@os:Ubuntu", "test.ping"],
        &["web3.example.com", "db1", "mail"],
    );
    check(
        &["-C", "not G@os:Ubuntu and not G@os:Fedora", "test.ping"],
        &["web3.example.com", "db1", "db2", "cache-b"],
    );
    check(
        &["-C", "( web* or E@^db ) and G@env:dev", "test.ping"],
        &["web2", "db2"],
    );
    check(
        &["-C", "L@mail,Web4 or cache-a", "test.ping"],
        &["mail", "Web4", "cache-a"],
    );
    check(
        &["-N", "webs", "test.ping"],
        &["web1", "web2", "web3.example.com"],
    );
    check(&["-N", "prod_db", "test.ping"], &["db1"]);
    check(
        &["-N", "mixed", "test.ping"],
        &["web1", "web2", "web3.example.com", "mail"],
    );
    check(&["nothing-matches", "test.ping"], &[]);
}
