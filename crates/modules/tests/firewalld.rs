//! `firewalld.present` and `firewalld.service` against a real firewalld
//! the test starts: in a network namespace of its own (`unshare -n`), on a
//! private D-Bus system bus (a `dbus-daemon` with the test's config on a
//! unix socket in a temp dir, `DBUS_SYSTEM_BUS_ADDRESS` exported), with
//! its own configuration directory (`--system-config`). Nothing of the
//! host's firewall or bus is touched; both daemons are stopped by a Drop
//! guard.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::json;

/// One firewalld at a time: each test's daemon gets its own bus, and the
/// bus address is the process's environment.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A dbus-daemon and a firewalld of the test's own; killed when dropped.
struct Firewalld {
    bus: Child,
    daemon: Child,
    dir: tempfile::TempDir,
}

impl Firewalld {
    /// Starts both daemons, or says why it cannot (not root, a missing
    /// program).
    fn start() -> Result<Self, String> {
        if !nix::unistd::geteuid().is_root() {
            return Err("needs root for a network namespace".into());
        }
        for prog in ["firewalld", "firewall-cmd", "dbus-daemon", "unshare"] {
            if halite_modules::exec::cmd::which(prog).is_none() {
                return Err(format!("{prog} is missing (scripts/install-deps.sh)"));
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("bus");
        let conf = dir.path().join("bus.conf");
        std::fs::write(&conf, bus_config(&socket)).unwrap();
        let etc = dir.path().join("etc");
        std::fs::create_dir(&etc).unwrap();
        if Path::new("/usr/lib/firewalld").is_dir() {
            // firewalld.conf as the package ships it, so firewalld reads
            // its defaults instead of warning about a missing file.
            let _ = std::fs::copy("/etc/firewalld/firewalld.conf", etc.join("firewalld.conf"));
        }
        let bus = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", conf.display()))
            .arg("--nofork")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let address = format!("unix:path={}", socket.display());
        // Every firewall-cmd of this test process (and of halite's calls)
        // reaches the private bus.
        std::env::set_var("DBUS_SYSTEM_BUS_ADDRESS", &address);
        let log = std::fs::File::create(dir.path().join("firewalld.log")).unwrap();
        let daemon = Command::new("unshare")
            .args(["-n", "sh", "-c"])
            .arg("ip link set lo up 2>/dev/null; exec firewalld --nofork --nopid --system-config \"$1\" --log-target console")
            .arg("sh")
            .arg(&etc)
            .env("DBUS_SYSTEM_BUS_ADDRESS", &address)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut me = Self { bus, daemon, dir };
        me.wait_running()?;
        Ok(me)
    }

    /// Waits until `firewall-cmd --state` says running (firewalld takes a
    /// few seconds to set up its tables); fails with its log when it died.
    fn wait_running(&mut self) -> Result<(), String> {
        for _ in 0..600 {
            if let Ok(Some(status)) = self.daemon.try_wait() {
                let log = std::fs::read_to_string(self.dir.path().join("firewalld.log"))
                    .unwrap_or_default();
                return Err(format!("firewalld exited ({status}): {log}"));
            }
            let out = Command::new("firewall-cmd")
                .arg("--state")
                .output()
                .unwrap();
            if String::from_utf8_lossy(&out.stdout).trim() == "running" {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Err("firewalld did not come up in 60 s".into())
    }

    /// `firewall-cmd <args>`'s stdout, words split.
    fn cmd(&self, args: &[&str]) -> Vec<String> {
        let out = Command::new("firewall-cmd").args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(String::from)
            .collect()
    }
}

impl Drop for Firewalld {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
        let _ = self.bus.kill();
        let _ = self.bus.wait();
    }
}

/// A system bus that lets anyone own and call anything: it only serves
/// this test's firewalld.
fn bus_config(socket: &Path) -> String {
    format!(
        r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"#,
        socket.display()
    )
}

fn present(
    host: &halite_modules::Host,
    zone: &str,
    args: serde_json::Value,
    test: bool,
) -> halite_state::StateResult {
    common::state(host, "firewalld", "present", zone, args, test)
}

/// This test's firewalld, started once the previous test's is gone; `None`
/// (with the reason printed) when it cannot run here.
fn daemon() -> Option<(std::sync::MutexGuard<'static, ()>, Firewalld)> {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    match Firewalld::start() {
        Ok(fw) => Some((serial, fw)),
        Err(why) => {
            println!("skipped: {why}");
            None
        }
    }
}

const ZONE: &str = "halite-t-z";

#[test]
fn firewalld_present_and_service_against_a_real_daemon() {
    let Some((_serial, fw)) = daemon() else {
        return;
    };
    let host = common::host();
    let _keep: PathBuf = fw.dir.path().to_path_buf();
    let args = json!({
        "ports": ["8080/tcp"],
        "services": ["http"],
        "masquerade": true,
        "port_fwd": ["2222:22:tcp"],
        "block_icmp": ["echo-reply", "no-such-type"],
        "sources": ["10.9.0.0/16"],
        "rich_rules": ["rule family=ipv4 source address=192.168.0.0/16 port port=22 protocol=tcp accept"],
    });

    // test=True on a zone that does not exist: predicted, nothing made.
    let ret = present(&host, ZONE, args.clone(), true);
    assert_eq!(ret.result, None, "{ret:?}");
    assert!(
        ret.changes.is_empty(),
        "Salt returns the changes in the comment only"
    );
    assert!(
        ret.comment
            .starts_with(&format!("Configuration for '{ZONE}' will change:\n")),
        "{}",
        ret.comment
    );
    assert!(
        ret.comment
            .contains("ports:\n    ----------\n    new:\n        - 8080/tcp\n    old:"),
        "{}",
        ret.comment
    );
    assert!(!fw
        .cmd(&["--get-zones", "--permanent"])
        .contains(&ZONE.to_string()));

    // The first run creates the zone and everything in it, then reloads.
    let ret = present(&host, ZONE, args.clone(), false);
    assert_eq!(ret.result, Some(true), "{ret:?}");
    assert_eq!(ret.comment, format!("'{ZONE}' was configured."));
    assert_eq!(ret.changes[ZONE]["new"], json!(ZONE));
    assert_eq!(
        ret.changes["ports"],
        json!({"old": [], "new": ["8080/tcp"]})
    );
    assert_eq!(ret.changes["services"], json!({"old": [], "new": ["http"]}));
    assert_eq!(
        ret.changes["sources"],
        json!({"old": [], "new": ["10.9.0.0/16"]})
    );
    assert_eq!(
        ret.changes["icmp_types"],
        json!({"old": [], "new": ["echo-reply"]})
    );
    assert_eq!(
        ret.changes["masquerade"],
        json!({"old": false, "new": "Masquerading successfully set."})
    );
    assert_eq!(
        ret.changes["port_fwd"],
        json!({"old": [], "new": [{"Source port": "2222", "Destination port": "22", "Protocol": "tcp", "Destination address": ""}]})
    );
    assert_eq!(
        ret.changes["rich_rules"]["new"],
        json!(["rule family=\"ipv4\" source address=\"192.168.0.0/16\" port port=\"22\" protocol=\"tcp\" accept"])
    );
    // Permanent, and (after the reload) runtime too.
    assert_eq!(
        fw.cmd(&["--zone", ZONE, "--list-ports", "--permanent"]),
        ["8080/tcp"]
    );
    assert_eq!(fw.cmd(&["--zone", ZONE, "--list-ports"]), ["8080/tcp"]);
    assert_eq!(
        fw.cmd(&["--zone", ZONE, "--list-icmp-blocks"]),
        ["echo-reply"]
    );
    assert_eq!(fw.cmd(&["--zone", ZONE, "--query-masquerade"]), ["yes"]);

    // The second run finds everything in place.
    let ret = present(&host, ZONE, args.clone(), false);
    assert_eq!(ret.result, Some(true), "{ret:?}");
    assert!(ret.changes.is_empty(), "{ret:?}");
    assert_eq!(
        ret.comment,
        format!("'{ZONE}' is already in the desired state.")
    );
    let ret = present(&host, ZONE, args, true);
    assert_eq!(ret.result, Some(true), "{ret:?}");

    // prune_* removes what is not listed; without it, "new" keeps it.
    let prune = json!({"ports": ["9090/tcp"], "prune_ports": true, "services": ["https"], "masquerade": false, "default": true});
    let ret = present(&host, ZONE, prune.clone(), true);
    assert_eq!(ret.result, None, "{ret:?}");
    assert_eq!(
        fw.cmd(&["--zone", ZONE, "--list-ports", "--permanent"]),
        ["8080/tcp"],
        "test=True changed nothing"
    );
    let ret = present(&host, ZONE, prune.clone(), false);
    assert_eq!(ret.result, Some(true), "{ret:?}");
    assert_eq!(
        ret.changes["ports"],
        json!({"old": ["8080/tcp"], "new": ["9090/tcp"]})
    );
    assert_eq!(
        ret.changes["services"],
        json!({"old": ["http"], "new": ["http", "https"]})
    );
    assert_eq!(
        ret.changes["masquerade"],
        json!({"old": true, "new": "Masquerading successfully disabled."})
    );
    assert_eq!(
        ret.changes["default"],
        json!({"old": "public", "new": ZONE})
    );
    assert_eq!(fw.cmd(&["--get-default-zone"]), [ZONE]);
    assert!(present(&host, ZONE, prune, false).changes.is_empty());

    // firewall-cmd's refusal is Salt's "Error: firewall-cmd failed: ...".
    let ret = present(&host, ZONE, json!({"ports": ["not-a-port"]}), false);
    assert_eq!(ret.result, Some(false), "{ret:?}");
    assert!(
        ret.comment
            .starts_with("Error: firewall-cmd failed: Error: INVALID_PORT"),
        "{}",
        ret.comment
    );

    // firewalld.service: created with exactly these ports and protocols.
    let svc = json!({"ports": ["1234/tcp"], "protocols": ["igmp"]});
    let ret = common::state(
        &host,
        "firewalld",
        "service",
        "halite-t-svc",
        svc.clone(),
        true,
    );
    assert_eq!(ret.result, None, "{ret:?}");
    assert_eq!(ret.comment, "Configuration for 'halite-t-svc' will change.");
    assert!(!fw
        .cmd(&["--get-services", "--permanent"])
        .contains(&"halite-t-svc".to_string()));
    let ret = common::state(
        &host,
        "firewalld",
        "service",
        "halite-t-svc",
        svc.clone(),
        false,
    );
    assert_eq!(ret.result, Some(true), "{ret:?}");
    assert_eq!(ret.comment, "'halite-t-svc' was configured.");
    assert_eq!(
        ret.changes["ports"],
        json!({"old": [], "new": ["1234/tcp"]})
    );
    assert_eq!(
        ret.changes["protocols"],
        json!({"old": [], "new": ["igmp"]})
    );
    assert_eq!(
        fw.cmd(&["--permanent", "--service=halite-t-svc", "--get-ports"]),
        ["1234/tcp"]
    );
    let ret = common::state(&host, "firewalld", "service", "halite-t-svc", svc, false);
    assert_eq!(
        ret.comment,
        "'halite-t-svc' is already in the desired state."
    );
    assert!(ret.changes.is_empty());
}

/// The arguments of the recorded Salt run's `zone.sls` (zone `work`).
fn salt_zone_args() -> serde_json::Value {
    json!({
        "ports": ["8080/tcp"],
        "services": ["http"],
        "prune_services": true,
        "masquerade": true,
        "port_fwd": ["2222:22:tcp"],
        "block_icmp": ["echo-reply"],
        "sources": ["10.9.0.0/16"],
        "rich_rules": ["rule family=ipv4 source address=192.168.0.0/16 port port=22 protocol=tcp accept"],
    })
}

/// The arguments of the recorded Salt run's `svc.sls`.
fn salt_service_args() -> serde_json::Value {
    json!({"ports": ["1234/tcp"], "protocols": ["igmp"]})
}

/// Runs the same five states as the recorded Salt 3008.5 run, on a fresh
/// firewalld like the one it ran against, and compares result, changes
/// and comment (the conformance runner cannot start firewalld for a case,
/// so the expected output lives in tests/fixtures/firewalld).
#[test]
fn the_same_states_answer_as_salt_3008_5_did_against_the_same_daemon() {
    let Some((_serial, _fw)) = daemon() else {
        return;
    };
    let host = common::host();
    let recorded: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/firewalld/salt-3008.5.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let runs = [
        ("present", "work", salt_zone_args(), true),
        ("present", "work", salt_zone_args(), false),
        ("present", "work", salt_zone_args(), false),
        ("service", "halite-t-svc", salt_service_args(), false),
        ("service", "halite-t-svc", salt_service_args(), false),
    ];
    for (i, (fun, name, args, test)) in runs.into_iter().enumerate() {
        let want = &recorded["runs"][i];
        let ret = common::state(&host, "firewalld", fun, name, args, test);
        let got = json!({
            "name": ret.name,
            "result": ret.result,
            "changes": ret.changes,
            "comment": ret.comment,
        });
        assert_eq!(&got, want, "run {i} ({fun} {name} test={test})");
    }
}

/// The execution functions through the registry, as `halite-call` and
/// Jinja reach them: reading, changing, Salt's error, and `test=True`.
#[test]
fn exec_functions_read_and_change_the_real_daemon() {
    let Some((_serial, fw)) = daemon() else {
        return;
    };
    let host = common::host();
    let call = |host: &halite_modules::Host, fun: &str, positional: Vec<serde_json::Value>| {
        let args = halite_modules::exec::Args {
            positional,
            kwargs: serde_json::Map::new(),
        };
        host.call(fun, &args)
    };
    assert_eq!(
        call(&host, "firewalld.default_zone", vec![]).unwrap(),
        json!("public")
    );
    assert!(call(&host, "firewalld.get_zones", vec![])
        .unwrap()
        .as_array()
        .unwrap()
        .contains(&json!("work")));
    assert_eq!(
        call(
            &host,
            "firewalld.add_port",
            vec![json!("work"), json!("8443/tcp")]
        )
        .unwrap(),
        json!("success")
    );
    assert_eq!(
        call(&host, "firewalld.list_ports", vec![json!("work")]).unwrap(),
        json!(["8443/tcp"])
    );
    assert_eq!(
        fw.cmd(&["--zone", "work", "--list-ports", "--permanent"]),
        ["8443/tcp"]
    );
    assert_eq!(
        call(
            &host,
            "firewalld.add_port_fwd",
            vec![json!("work"), json!("2222"), json!("22")]
        )
        .unwrap(),
        json!("success")
    );
    assert_eq!(
        call(&host, "firewalld.list_port_fwd", vec![json!("work")]).unwrap(),
        json!([{"Source port": "2222", "Destination port": "22", "Protocol": "tcp", "Destination address": ""}])
    );
    assert_eq!(
        call(
            &host,
            "firewalld.block_icmp",
            vec![json!("work"), json!("nope")]
        )
        .unwrap(),
        json!(false)
    );
    assert_eq!(
        call(&host, "firewalld.get_masquerade", vec![json!("work")]).unwrap(),
        json!(false)
    );
    let err = call(&host, "firewalld.list_ports", vec![json!("halite-t-none")]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "firewall-cmd failed: Error: INVALID_ZONE: halite-t-none"
    );

    // test=True: a changing function says what it would do, and does not.
    let dry = common::host_with(json!({"test": true}), json!({}));
    assert_eq!(
        call(
            &dry,
            "firewalld.remove_port",
            vec![json!("work"), json!("8443/tcp")]
        )
        .unwrap(),
        json!("test=True: would run firewalld.remove_port")
    );
    assert_eq!(
        fw.cmd(&["--zone", "work", "--list-ports", "--permanent"]),
        ["8443/tcp"]
    );
}
