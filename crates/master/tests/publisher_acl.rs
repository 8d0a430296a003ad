//! `publisher_acl`: real local users the test creates run the real `halite`
//! CLI (through `setpriv`) against a real master and minion. A user named
//! in `publisher_acl` runs exactly what it grants; anything else, a user
//! in `publisher_acl_blacklist` and a user it does not name are refused
//! with Salt's messages, logged and fired as events; root is unaffected.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use common::*;
use serde_json::Value;

/// A local user made for the test, removed when dropped.
struct LocalUser {
    name: String,
    uid: String,
    gid: String,
}

impl LocalUser {
    fn create(prefix: &str) -> Option<Self> {
        let name = format!("{prefix}{}", std::process::id() % 100000);
        let made = Command::new("useradd")
            .args(["-M", "-s", "/bin/false", &name])
            .status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("skipping: useradd {name} failed");
            return None;
        }
        let id = |flag: &str| {
            let out = Command::new("id").args([flag, &name]).output().unwrap();
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        let (uid, gid) = (id("-u"), id("-g"));
        Some(Self { name, uid, gid })
    }

    /// Runs CLI `tool ARGS` against `fleet`'s master as this user. The
    /// environment claims root, which must change nothing.
    fn run(&self, fleet: &Fleet, tool: &str, args: &[&str]) -> std::process::Output {
        Command::new("setpriv")
            .args([
                &format!("--reuid={}", self.uid),
                &format!("--regid={}", self.gid),
                "--clear-groups",
            ])
            .arg(bin(tool))
            .arg("-c")
            .arg(fleet.master_dir())
            .args(args)
            .env("USER", "root")
            .env("SUDO_USER", "root")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// `halite ARGS` as this user: (stdout, stderr, exit code).
    fn halite(&self, fleet: &Fleet, args: &[&str]) -> (String, String, i32) {
        let out = self.run(fleet, "halite", args);
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            out.status.code().unwrap_or(-1),
        )
    }
}

impl Drop for LocalUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).output();
    }
}

fn open_to_others(path: &std::path::Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn local_users_run_exactly_what_publisher_acl_grants() {
    if !can_run() {
        return;
    }
    let (Some(fred), Some(mallory), Some(eve)) = (
        LocalUser::create("hpacl"),
        LocalUser::create("hpblk"),
        LocalUser::create("hpnon"),
    ) else {
        return;
    };
    let f = Fleet::new();
    let mut master = f.start_master(&format!(
        "publisher_acl:\n  {fred}: ['test.ping', {{'m1': ['grains.item']}}, 'cmd.run']\n  {mallory}: ['.*']\npublisher_acl_blacklist:\n  users: ['{mallory}']\n  modules: ['cmd.*']\n",
        fred = fred.name,
        mallory = mallory.name,
    ));
    // The users read the master's config (as /etc/halite/master is 0644).
    open_to_others(f.root.path(), 0o755);
    open_to_others(&f.master_dir(), 0o755);
    open_to_others(&f.master_dir().join("master"), 0o644);
    let _m1 = f.start_minion("m1", "");
    f.accept("m1");
    let events = f.watch_events();

    // Granted: runs, and the job is the user's whatever the environment says.
    let (out, err, code) = fred.halite(&f, &["*", "test.ping", "--out", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["m1"], Value::Bool(true), "{out}");
    let (out, err, code) = fred.halite(&f, &["m1", "grains.item", "id", "--out", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("\"m1\""), "{out}");
    let jobs = f.cli("halite-run", &["jobs.list_jobs", "--out", "json"]);
    let jobs: Value = serde_json::from_slice(&jobs.stdout).unwrap();
    let users: Vec<&str> = jobs
        .as_object()
        .unwrap()
        .values()
        .filter(|j| j["Function"] == "test.ping" || j["Function"] == "grains.item")
        .filter_map(|j| j["User"].as_str())
        .collect();
    assert!(
        users.iter().filter(|u| **u == fred.name).count() >= 2,
        "the jobs are not fred's: {jobs}"
    );

    // Not granted, and granted but blacklisted: Salt's refusal.
    for args in [
        vec!["*", "test.echo", "hi"],
        vec!["*", "cmd.run", "id"],
        vec!["*", "state.apply"],
    ] {
        let (out, err, code) = fred.halite(&f, &args);
        assert_eq!(
            (out.trim(), code),
            ("Authorization error occurred.", 1),
            "{args:?}: {out}{err}"
        );
    }
    // Nothing but publishing: the bus stays root's.
    let watch = fred.run(&f, "halite-run", &["state.event", "count=1"]);
    assert!(!watch.status.success());
    assert!(
        String::from_utf8_lossy(&watch.stderr).contains("Authorization error occurred."),
        "{}",
        String::from_utf8_lossy(&watch.stderr)
    );

    // A blacklisted user, and a user publisher_acl does not name.
    let (out, err, code) = mallory.halite(&f, &["*", "test.ping"]);
    assert_eq!(
        (out.trim(), code),
        ("Authorization error occurred.", 1),
        "{out}{err}"
    );
    let (out, err, code) = eve.halite(&f, &["*", "test.ping"]);
    assert_eq!(
        (out.trim(), code),
        ("Authentication failure of type \"user\" occurred.", 1),
        "{out}{err}"
    );

    // Root is unaffected.
    let (rets, code) = f.halite_json(&["*", "test.echo", "root"]);
    assert_eq!(code, 0);
    assert_eq!(rets["m1"], Value::from("root"));

    // Every refusal logged (who, what, why) and fired as an event.
    let seen = events.stop();
    let refusals: Vec<Value> = seen
        .lines()
        .filter_map(|l| l.strip_prefix("salt/auth/publisher_acl\t"))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    for (user, what) in [
        (&fred.name, "test.echo on *"),
        (&fred.name, "cmd.run"),
        (&fred.name, "event stream"),
        (&mallory.name, "test.ping"),
        (&eve.name, "connect"),
    ] {
        assert!(
            refusals
                .iter()
                .any(|r| r["user"] == user.as_str() && r["what"] == what && r["act"] == "refused"),
            "no refusal event for {user} {what}: {seen}"
        );
    }
    let log = master.log_text();
    assert!(
        log.contains("refused a local client") && log.contains(&eve.name),
        "{log}"
    );
    assert!(master.alive());
}

#[test]
fn without_publisher_acl_the_socket_stays_roots() {
    if !can_run() {
        return;
    }
    let f = Fleet::new();
    let _master = f.start_master("");
    assert_eq!(mode(&f.path("master-sock/master.sock")), 0o600);
    open_to_others(f.root.path(), 0o755);
    open_to_others(&f.master_dir(), 0o755);
    open_to_others(&f.master_dir().join("master"), 0o644);
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(bin("halite"))
        .arg("-c")
        .arg(f.master_dir())
        .args(["*", "test.ping"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot read the master's root key") && err.contains("run as root"),
        "{err}"
    );
}
