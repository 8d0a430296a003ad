//! Trust end to end: a new minion waits pending, `halite-key -a` accepts
//! it, it answers; `-d` deletes it and it runs nothing after; the bus
//! carries salt/auth, salt/key and salt/minion/<id>/start.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

#[test]
fn accept_ping_delete_and_the_event_bus() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let _master = fleet.start_master("");
    let events = fleet.watch_events();

    let web1 = fleet.start_minion("web1", "");
    assert!(wait_for(Duration::from_secs(20), || fleet
        .key_listed("minions_pre", "web1")));
    let (rets, code) = fleet.halite_json(&["*", "test.ping", "-t", "1"]);
    assert!(
        rets.is_empty() && code != 0,
        "a pending minion must not be targeted: {rets:?}"
    );

    fleet.accept("web1");
    assert!(fleet.key_listed("minions", "web1"));
    let key_file = fleet.path("master-pki/minions/web1");
    assert_eq!(mode(&key_file), 0o600);
    assert_eq!(mode(&fleet.path("master-pki/master.pem")), 0o600);
    assert_eq!(mode(&fleet.path("minion-web1/pki/minion.pem")), 0o600);

    let (rets, code) = fleet.halite_json(&["web1", "test.echo", "hello"]);
    assert_eq!((rets.get("web1"), code), (Some(&json!("hello")), 0));

    // The bus saw the authentication, the key change and the start.
    let text = events.stop();
    let tags: Vec<&str> = text.lines().filter_map(|l| l.split('\t').next()).collect();
    assert!(tags.contains(&"salt/auth"), "{text}");
    assert!(tags.contains(&"salt/key"), "{text}");
    assert!(tags.contains(&"salt/minion/web1/start"), "{text}");
    let key_event = text
        .lines()
        .find(|l| l.starts_with("salt/key\t"))
        .unwrap_or_default();
    let data: serde_json::Value =
        serde_json::from_str(key_event.split_once('\t').map(|x| x.1).unwrap_or("{}"))
            .unwrap_or_default();
    assert_eq!(
        (data["act"].as_str(), data["id"].as_str()),
        (Some("accept"), Some("web1"))
    );

    // A second minion stays; web1 is deleted and runs nothing afterwards.
    let _web2 = fleet.start_minion("web2", "");
    fleet.accept("web2");
    let out = fleet.cli("halite-key", &["-d", "web1", "-y"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Key for minion web1 deleted."));
    let (rets, _) = fleet.halite_json(&["*", "test.arg", "after-delete"]);
    assert!(rets.contains_key("web2"), "{rets:?}");
    assert!(!rets.contains_key("web1"));
    let (rets, code) = fleet.halite_json(&["web1", "test.ping", "-t", "1"]);
    assert!(
        rets.is_empty() && code == 2,
        "a deleted minion is no target: {rets:?}"
    );
    std::thread::sleep(Duration::from_millis(500));
    let log = web1.log_text();
    assert!(
        !log.contains("fun=test.arg"),
        "web1 ran a job after its key was deleted:\n{log}"
    );
    // It asked again, and waits pending like a new minion.
    assert!(wait_for(Duration::from_secs(20), || fleet
        .key_listed("minions_pre", "web1")));
}

#[test]
fn a_known_id_with_another_key_is_denied() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let _master = fleet.start_master("auto_accept: True");
    let mut first = fleet.start_minion("dup", "");
    fleet.wait_responding("dup");
    first.kill();
    // Same id, fresh key: the master denies it and keeps the accepted key.
    std::fs::remove_dir_all(fleet.path("minion-dup/pki")).expect("remove the pki dir");
    let _second = fleet.start_minion("dup", "");
    assert!(wait_for(Duration::from_secs(20), || fleet
        .key_listed("minions_denied", "dup")));
    assert!(fleet.key_listed("minions", "dup"));
    let (rets, _) = fleet.halite_json(&["dup", "test.ping", "-t", "2"]);
    assert_ne!(
        rets.get("dup"),
        Some(&json!(true)),
        "an impostor answered for dup"
    );
}

#[test]
fn master_finger_pins_the_master() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let _master = fleet.start_master("auto_accept: True");
    let minion = fleet.start_minion("pinned", "master_finger: '00:11'");
    assert!(wait_for(Duration::from_secs(20), || minion
        .log_text()
        .contains("master_finger")));
    let (rets, _) = fleet.halite_json(&["pinned", "test.ping", "-t", "1"]);
    assert!(
        rets.get("pinned").is_none_or(|v| v != &json!(true)),
        "a minion trusted a master that does not match master_finger"
    );
    // With the right fingerprint it works.
    let out = fleet.cli("halite-key", &["-F", "--out", "json"]);
    let fingers: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let finger = fingers["local"]["master.pub"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(finger.len(), 95, "{fingers}");
    let _ok = fleet.start_minion("pinned2", &format!("master_finger: '{finger}'"));
    fleet.wait_responding("pinned2");
}

/// A new fleet larger than `pending_key_rate` allows per second, with
/// `auto_accept`: the Hellos over the rate are held and answered as the
/// rate allows, not dropped. The swarm's `auth_timeout` is ten minutes, so
/// a dropped Hello would keep its identity out for the whole test (before
/// the hold, 180 of these 200 waited out their `auth_timeout`). Prints how
/// long the fleet took to come up; the rate's bound on key files holds.
#[test]
fn a_new_fleet_over_the_key_rate_is_accepted_without_waiting_for_auth_timeout() {
    if !can_run() {
        return;
    }
    const N: usize = 200;
    let fleet = Fleet::new();
    let _master = fleet.start_master("auto_accept: True\npending_key_rate: 20");
    let started = std::time::Instant::now();
    let dir = fleet.path("swarm");
    std::fs::create_dir_all(&dir).unwrap();
    write_file(
        &dir.join("minion"),
        &format!(
            "master: 127.0.0.1\nmaster_port: {}\npublish_port: {}\nid: swarm\npki_dir: {d}/pki\ncachedir: {d}/cache\nsock_dir: {d}/sock\nlog_file: {d}/swarm.log\nlog_level: info\nauth_timeout: 600\n",
            fleet.ret_port,
            fleet.publish_port,
            d = dir.display()
        ),
    );
    let _swarm = Daemon {
        child: std::process::Command::new(bin("halite-minion"))
            .arg("-c")
            .arg(&dir)
            .args(["--swarm", &N.to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the swarm"),
        log: dir.join("swarm.log"),
    };
    assert!(
        fleet.wait_authenticated(N, Duration::from_secs(300)),
        "{} of {N} new identities authenticated: Hellos over pending_key_rate were dropped",
        fleet.authenticated()
    );
    let up = started.elapsed().as_secs_f64();
    let (rets, _) = fleet.halite_json(&["swarm-*", "test.ping", "-t", "30"]);
    assert_eq!(rets.values().filter(|v| **v == json!(true)).count(), N);
    let accepted = std::fs::read_dir(fleet.path("master-pki/minions"))
        .unwrap()
        .count();
    assert_eq!(accepted, N);
    eprintln!(
        "{N} new identities, auto_accept, pending_key_rate 20: all authenticated after {up:.1} s (the rate alone needs {:.1} s)",
        N as f64 / 20.0
    );
}
