//! `service` states and execution functions against the real init tools:
//! SysV init scripts driven through `service`/`update-rc.d` (real
//! processes started and stopped), unit files enabled/disabled/masked by a
//! real `systemctl`, and, where systemd is PID 1, real units started and
//! stopped. Everything uses throwaway `halite-t-*` names removed by a guard.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use halite_modules::exec::service::Provider;
use halite_modules::host::LogEvents;
use halite_modules::{table, Args, Host, LocalFileClient};
use halite_state::{LowChunk, StateCall, StateResult};
use serde_json::{json, Value};

/// Salt's `salt-call`, from the one helper every comparison with Salt
/// uses (`halite-salt-oracle`); `None` after printing why it is absent.
fn salt_call_bin(test: &str) -> Option<std::path::PathBuf> {
    halite_salt_oracle::Salt::for_test(test).map(|s| s.salt_call())
}
const UNIT_DIR: &str = "/usr/lib/systemd/system";

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn has(prog: &str) -> bool {
    halite_modules::grains::hw::which(prog).is_some()
}

fn booted_with_systemd() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("halite-t-{tag}{:x}", (nanos ^ std::process::id()) & 0xfffff)
}

fn host(opts: Value) -> Host {
    Host {
        opts,
        grains: json!({}),
        pillar: json!({}),
        files: Arc::new(LocalFileClient::default()),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    }
}

fn state_with(
    host: &Host,
    fun: &str,
    name: &str,
    args: Value,
    test: bool,
    sfun: Option<&str>,
) -> StateResult {
    let mut chunk = serde_json::Map::new();
    chunk.insert("state".into(), json!("service"));
    chunk.insert("name".into(), json!(name));
    chunk.insert("__id__".into(), json!(name));
    if let Value::Object(extra) = args {
        chunk.extend(extra);
    }
    chunk.insert("fun".into(), json!(fun));
    let chunk = LowChunk::from(chunk);
    let call = StateCall {
        chunk: &chunk,
        test,
        env: host,
        sfun,
        reqs: None,
    };
    let module = host
        .states
        .get("service")
        .expect("the service state module is registered");
    module
        .call(fun, &call)
        .unwrap_or_else(|e| panic!("service.{fun}: {e}"))
}

fn state(host: &Host, fun: &str, name: &str, args: Value, test: bool) -> StateResult {
    state_with(host, fun, name, args, test, None)
}

fn exec(host: &Host, fun: &str, name: &str) -> Value {
    host.call(
        fun,
        &Args {
            positional: vec![json!(name)],
            kwargs: Default::default(),
        },
    )
    .unwrap_or_else(|e| panic!("{fun}: {e}"))
}

/// Whether `pid` runs (a zombie waiting for its reaper counts as dead).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

fn outcome(r: &StateResult) -> (Option<bool>, String, Value) {
    (
        r.result,
        r.comment.clone(),
        Value::Object(r.changes.clone()),
    )
}

/// A SysV init script that runs `sleep` in the background with a pid file.
struct InitScript {
    name: String,
    pidfile: PathBuf,
    /// The command line of its process, unique to this test run (for `sig`).
    sig: String,
}

impl InitScript {
    fn install(name: &str) -> InitScript {
        let pidfile = PathBuf::from(format!("/tmp/{name}.pid"));
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let sig = format!(
            "sleep {}",
            900_000_000 + (nanos ^ std::process::id()) % 1_000_000
        );
        let script = format!(
            r#"#!/bin/sh
### BEGIN INIT INFO
# Provides:          {name}
# Required-Start:
# Required-Stop:
# Default-Start:     2 3 4 5
# Default-Stop:      0 1 6
# Short-Description: halite test service
### END INIT INFO
PIDFILE={pid}
running() {{ [ -f $PIDFILE ] && kill -0 "$(cat $PIDFILE)" 2>/dev/null; }}
case "$1" in
  start) running && exit 0; {sig} >/dev/null 2>&1 & echo $! > $PIDFILE ;;
  stop) running && kill "$(cat $PIDFILE)"; rm -f $PIDFILE ;;
  restart|force-reload) "$0" stop; "$0" start ;;
  reload) running ;;
  status) running ;;
  *) echo "Usage: $0 start|stop|restart|reload|status"; exit 3 ;;
esac
"#,
            pid = pidfile.display(),
            sig = sig,
        );
        let path = format!("/etc/init.d/{name}");
        std::fs::write(&path, script).expect("write the init script");
        let _ = Command::new("chmod").args(["755", &path]).status();
        InitScript {
            name: name.to_string(),
            pidfile,
            sig,
        }
    }

    fn pid(&self) -> Option<i32> {
        std::fs::read_to_string(&self.pidfile)
            .ok()
            .and_then(|p| p.trim().parse().ok())
    }

    fn process_alive(&self) -> bool {
        self.pid().is_some_and(alive)
    }
}

impl Drop for InitScript {
    fn drop(&mut self) {
        let _ = Command::new(format!("/etc/init.d/{}", self.name))
            .arg("stop")
            .output();
        let _ = Command::new("update-rc.d")
            .args(["-f", &self.name, "remove"])
            .output();
        let _ = std::fs::remove_file(format!("/etc/init.d/{}", self.name));
        let _ = std::fs::remove_file(&self.pidfile);
    }
}

#[test]
fn sysv_init_scripts_start_stop_restart_and_enable_for_real() {
    if !is_root() || !has("service") || !has("update-rc.d") {
        println!("skipped: needs root, service and update-rc.d");
        return;
    }
    let host = host(json!({"providers": {"service": "debian"}}));
    let name = unique("sv");
    let script = InitScript::install(&name);

    assert_eq!(exec(&host, "service.available", &name), json!(true));
    assert_eq!(exec(&host, "service.missing", &name), json!(false));
    assert_eq!(exec(&host, "service.status", &name), json!(false));
    assert!(exec(&host, "service.get_all", "")
        .as_array()
        .is_some_and(|a| a.contains(&json!(name))));

    let r = state(&host, "running", &name, json!({}), true);
    assert_eq!(
        outcome(&r),
        (None, format!("Service {name} is set to start"), json!({}))
    );
    assert!(!script.process_alive(), "test mode started nothing");

    let r = state(&host, "running", &name, json!({"enable": true}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("Service {name} has been enabled, and is running"),
            json!({name.clone(): true})
        )
    );
    assert!(script.process_alive(), "the service's process runs");
    assert_eq!(exec(&host, "service.enabled", &name), json!(true));
    assert!(exec(&host, "service.get_enabled", "")
        .as_array()
        .is_some_and(|a| a.contains(&json!(name))));

    let r = state(&host, "running", &name, json!({"enable": true}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("The service {name} is already running"),
            json!({})
        )
    );

    let by_sig = |host: &Host| {
        host.call(
            "service.status",
            &Args {
                positional: vec![json!(name), json!(script.sig)],
                kwargs: Default::default(),
            },
        )
        .unwrap_or_else(|e| panic!("service.status with sig: {e}"))
    };
    assert_eq!(
        by_sig(&host),
        json!(true),
        "the process is found by its command line"
    );
    let r = state(&host, "running", &name, json!({"sig": script.sig}), false);
    assert_eq!(r.comment, format!("The service {name} is already running"));
    let first_pid = script.pid();
    let r = state_with(&host, "mod_watch", &name, json!({}), true, Some("running"));
    assert_eq!(
        outcome(&r),
        (None, "Service is set to be restarted".into(), json!({}))
    );
    let r = state_with(&host, "mod_watch", &name, json!({}), false, Some("running"));
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            "Service restarted".into(),
            json!({name.clone(): true})
        )
    );
    assert!(script.process_alive());
    assert_ne!(script.pid(), first_pid, "a restart runs a new process");
    let r = state_with(
        &host,
        "mod_watch",
        &name,
        json!({"reload": true}),
        false,
        Some("running"),
    );
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            "Service reloaded".into(),
            json!({name.clone(): true})
        )
    );
    let r = state_with(
        &host,
        "mod_watch",
        &name,
        json!({"full_restart": true}),
        false,
        Some("running"),
    );
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            "Service fully restarted".into(),
            json!({name.clone(): true})
        )
    );

    let r = state(&host, "dead", &name, json!({}), true);
    assert_eq!(
        outcome(&r),
        (
            None,
            format!("Service {name} is set to be killed"),
            json!({})
        )
    );
    assert!(script.process_alive());
    let pid = script.pid();
    let r = state(&host, "dead", &name, json!({"enable": false}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("Service {name} has been disabled, and is dead"),
            json!({name.clone(): true})
        )
    );
    assert!(pid.is_some_and(|p| !alive(p)), "the process was stopped");
    assert_eq!(by_sig(&host), json!(false));
    assert_eq!(exec(&host, "service.enabled", &name), json!(false));
    let r = state(&host, "dead", &name, json!({}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("The service {name} is already dead"),
            json!({})
        )
    );
    let r = state_with(&host, "mod_watch", &name, json!({}), false, Some("dead"));
    assert_eq!(
        outcome(&r),
        (Some(true), "Service is already stopped".into(), json!({}))
    );

    // A plain start without enable: changes report the new status.
    let r = state(&host, "running", &name, json!({"init_delay": 0.01}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("Started service {name}\nDelayed return for 0.01 seconds"),
            json!({name.clone(): true})
        )
    );
    let r = state(&host, "enabled", &name, json!({}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("Service {name} has been enabled, and is in the desired state"),
            json!({name.clone(): true})
        )
    );
    let r = state(&host, "disabled", &name, json!({}), true);
    assert_eq!(
        outcome(&r),
        (
            None,
            format!("Service {name} set to be disabled"),
            json!({})
        )
    );
    let r = state(&host, "masked", &name, json!({}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(false),
            "Service masking not available on this minion".into(),
            json!({})
        )
    );
    let r = state(&host, "running", &name, json!({"enabled": true}), false);
    assert_eq!(r.result, Some(false));
    assert!(
        r.comment.contains("uses non-existent option \"enabled\""),
        "{}",
        r.comment
    );
}

#[test]
fn missing_services_are_reported_as_salt_does() {
    let host = host(json!({"providers": {"service": "debian"}}));
    let name = "halite-t-does-not-exist";
    let r = state(&host, "running", name, json!({}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(false),
            format!("The named service {name} is not available"),
            json!({})
        )
    );
    let r = state(&host, "running", name, json!({}), true);
    assert_eq!(
        outcome(&r),
        (None, format!("Service {name} not present; if created in this state run, it would have been started"), json!({}))
    );
    let r = state(&host, "dead", name, json!({}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("The named service {name} is not available"),
            json!({})
        )
    );
    let r = state(&host, "enabled", name, json!({}), true);
    assert_eq!(
        outcome(&r),
        (None, format!("Service {name} not present; if created in this state run, it would have been enabled"), json!({}))
    );
    let r = state(&host, "disabled", name, json!({}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("The named service {name} is not available"),
            json!({})
        )
    );
    let bad = host.call(
        "service.start",
        &Args {
            positional: vec![json!("--help")],
            kwargs: Default::default(),
        },
    );
    assert!(bad.is_err(), "option-like names are refused");
}

/// A unit file in /usr/lib/systemd/system (where packages put theirs, so
/// that it can be masked from /etc), removed (disabled, unmasked) on drop.
struct UnitFile {
    name: String,
}

impl UnitFile {
    fn install(name: &str) -> UnitFile {
        let unit = "[Unit]\nDescription=halite test unit\n[Service]\nExecStart=/bin/sleep 100000\n[Install]\nWantedBy=multi-user.target\n";
        std::fs::write(format!("{UNIT_DIR}/{name}.service"), unit).expect("write the unit file");
        if booted_with_systemd() {
            let _ = Command::new("systemctl").arg("daemon-reload").status();
        }
        UnitFile {
            name: name.to_string(),
        }
    }
}

impl Drop for UnitFile {
    fn drop(&mut self) {
        let unit = format!("{}.service", self.name);
        if booted_with_systemd() {
            let _ = Command::new("systemctl").args(["stop", &unit]).output();
        }
        let _ = Command::new("systemctl").args(["unmask", &unit]).output();
        let _ = Command::new("systemctl").args(["disable", &unit]).output();
        let _ = std::fs::remove_file(format!("{UNIT_DIR}/{unit}"));
        if booted_with_systemd() {
            let _ = Command::new("systemctl").arg("daemon-reload").status();
        }
    }
}

#[test]
fn systemd_unit_files_are_enabled_disabled_and_masked_with_real_systemctl() {
    if !is_root() || !has("systemctl") {
        println!("skipped: needs root and systemctl");
        return;
    }
    let host = host(json!({"providers": {"service": "systemd"}}));
    let name = unique("un");
    let _unit = UnitFile::install(&name);
    let wants = PathBuf::from(format!(
        "/etc/systemd/system/multi-user.target.wants/{name}.service"
    ));
    assert_eq!(exec(&host, "service.available", &name), json!(true));
    assert_eq!(exec(&host, "service.enabled", &name), json!(false));

    let r = state(&host, "enabled", &name, json!({}), true);
    assert_eq!(
        outcome(&r),
        (None, format!("Service {name} set to be enabled"), json!({}))
    );
    assert!(!wants.exists());
    let r = state(&host, "enabled", &name, json!({}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("Service {name} has been enabled, and is in the desired state"),
            json!({name.clone(): true})
        )
    );
    assert!(
        wants.exists(),
        "systemctl enable linked the unit into its target"
    );
    let r = state(&host, "enabled", &name, json!({}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("Service {name} is already enabled, and is in the desired state"),
            json!({})
        )
    );
    assert!(exec(&host, "service.get_enabled", "")
        .as_array()
        .is_some_and(|a| a.contains(&json!(name))));

    let r = state(&host, "disabled", &name, json!({}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("Service {name} has been disabled, and is in the desired state"),
            json!({name.clone(): true})
        )
    );
    assert!(!wants.exists());
    let r = state(&host, "disabled", &name, json!({}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("Service {name} is already disabled, and is in the desired state"),
            json!({})
        )
    );

    let r = state(&host, "masked", &name, json!({}), true);
    assert_eq!(
        outcome(&r),
        (
            None,
            format!("Service {name} would be masked"),
            json!({"masked": {"old": false, "new": true}})
        )
    );
    let r = state(&host, "masked", &name, json!({}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("Service {name} was masked"),
            json!({"masked": {"old": false, "new": true}})
        )
    );
    assert_eq!(exec(&host, "service.masked", &name), json!(true));
    let r = state(&host, "masked", &name, json!({}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("Service {name} is already masked"),
            json!({})
        )
    );
    let r = state(&host, "unmasked", &name, json!({}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("Service {name} was unmasked"),
            json!({"masked": {"old": true, "new": false}})
        )
    );
    let r = state(&host, "unmasked", &name, json!({}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("Service {name} was already unmasked"),
            json!({})
        )
    );
}

#[test]
fn offline_systemd_leaves_running_and_dead_alone_like_salt() {
    if booted_with_systemd() || !has("systemctl") {
        println!("skipped: only meaningful where systemctl is installed but systemd is not PID 1");
        return;
    }
    let host = host(json!({}));
    assert_eq!(Provider::for_opts(&host.opts), Provider::SystemdOffline);
    assert_eq!(exec(&host, "service.offline", ""), json!(true));
    let name = "halite-t-offline";
    for fun in ["running", "dead"] {
        let r = state(&host, fun, name, json!({"enable": true}), false);
        assert_eq!(
            outcome(&r),
            (
                Some(true),
                "Running in OFFLINE mode. Nothing to do".into(),
                json!({})
            )
        );
    }
    // Without Salt: compared with the recorded Salt wording only.
    let Some(salt_call) = salt_call_bin("service running (live Salt comparison)") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let base = dir.path().display().to_string();
    std::fs::create_dir_all(format!("{base}/conf")).expect("conf");
    std::fs::create_dir_all(format!("{base}/files")).expect("files");
    std::fs::write(
        format!("{base}/conf/minion"),
        format!("cachedir: {base}/cache\npki_dir: {base}/pki\nsock_dir: {base}/sock\nlog_file: {base}/log\n"),
    )
    .expect("minion");
    std::fs::write(
        format!("{base}/files/s.sls"),
        format!("{name}:\n  service.running:\n    - enable: True\n"),
    )
    .expect("sls");
    let out = Command::new(&salt_call)
        .args([
            "--local",
            "--config-dir",
            &format!("{base}/conf"),
            "--file-root",
            &format!("{base}/files"),
        ])
        .args(["--out", "json", "state.apply", "s"])
        .output()
        .expect("salt-call runs");
    let salt: Value = serde_json::from_slice(&out.stdout).expect("salt-call prints JSON");
    let theirs = salt["local"]
        .as_object()
        .and_then(|m| m.values().next())
        .cloned()
        .unwrap_or_default();
    let ours = state(&host, "running", name, json!({"enable": true}), false);
    assert_eq!(
        (theirs["result"].clone(), theirs["comment"].clone()),
        (json!(ours.result), json!(ours.comment))
    );
}

#[test]
fn systemd_units_start_stop_and_restart_when_systemd_is_pid_1() {
    if !is_root() || !booted_with_systemd() {
        println!("skipped: systemd is not PID 1 here, units cannot be started (covered by the SysV and unit-file tests)");
        return;
    }
    let host = host(json!({}));
    let name = unique("sd");
    let _unit = UnitFile::install(&name);
    let r = state(&host, "running", &name, json!({}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("Started service {name}"),
            json!({name.clone(): true})
        )
    );
    assert_eq!(exec(&host, "service.status", &name), json!(true));
    let r = state(&host, "running", &name, json!({}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("The service {name} is already running"),
            json!({})
        )
    );
    let r = state_with(&host, "mod_watch", &name, json!({}), false, Some("running"));
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            "Service restarted".into(),
            json!({name.clone(): true})
        )
    );
    let shown = exec(&host, "service.show", &name);
    assert_eq!(shown["ActiveState"], "active");
    let r = state(&host, "dead", &name, json!({}), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("Service {name} was killed"),
            json!({name.clone(): false})
        )
    );
    assert_eq!(exec(&host, "service.status", &name), json!(false));
}

#[test]
fn offline_systemd_watch_starts_and_restarts_the_init_script_like_salt() {
    if booted_with_systemd() || !has("systemctl") || !is_root() || !has("service") {
        println!("skipped: needs root, service and systemctl installed with systemd not PID 1");
        return;
    }
    let host = host(json!({}));
    assert_eq!(Provider::for_opts(&host.opts), Provider::SystemdOffline);
    let script = InitScript::install(&unique("watch"));
    let name = script.name.clone();
    // Salt 3008.5 here: service.running says OFFLINE, then its mod_watch
    // runs `service <name> status`, `stop` and `start` (debian_service).
    let r = state(&host, "running", &name, json!({}), false);
    assert_eq!(r.comment, "Running in OFFLINE mode. Nothing to do");
    assert!(!script.process_alive());
    let r = state_with(&host, "mod_watch", &name, json!({}), true, Some("running"));
    assert_eq!(
        outcome(&r),
        (None, "Service is set to be started".into(), json!({}))
    );
    assert!(!script.process_alive());
    let r = state_with(&host, "mod_watch", &name, json!({}), false, Some("running"));
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            "Service started".into(),
            json!({name.clone(): true})
        )
    );
    assert!(script.process_alive(), "the init script's process runs");
    let first = script.pid();
    let r = state_with(&host, "mod_watch", &name, json!({}), false, Some("running"));
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            "Service restarted".into(),
            json!({name.clone(): true})
        )
    );
    assert!(script.process_alive());
    assert_ne!(script.pid(), first, "a restart made a new process");
    let r = state_with(&host, "mod_watch", &name, json!({}), false, Some("dead"));
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            "Service stopped".into(),
            json!({name.clone(): true})
        )
    );
    assert!(!script.process_alive());
}
