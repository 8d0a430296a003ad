//! The CLI's shapes against real daemons: outputters, `-v`, `--async`,
//! batches, jobs.* and failover to the second master of a list.
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
fn outputs_batches_and_job_runners() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let _master = fleet.start_master("auto_accept: True");
    let _a = fleet.start_minion("alpha", "");
    let _b = fleet.start_minion("beta", "");
    fleet.wait_responding("alpha");
    fleet.wait_responding("beta");

    let (text, code) = fleet.halite(&["alpha", "test.echo", "hi", "--out", "txt"]);
    assert_eq!((text.as_str(), code), ("alpha: hi\n", 0));
    let (text, _) = fleet.halite(&["alpha", "test.ping", "--out", "yaml"]);
    assert_eq!(text, "alpha: true\n");
    let (text, _) = fleet.halite(&["-v", "alpha", "test.ping"]);
    let first = text.lines().next().unwrap_or_default().to_string();
    assert!(first.starts_with("Executing job with jid "), "{text}");
    assert_eq!(
        text.lines().nth(1).map(str::len),
        Some(first.len()),
        "{text}"
    );
    assert!(text.ends_with("alpha:\n    True\n"), "{text}");

    let (text, code) = fleet.halite(&["-b", "1", "*", "test.ping"]);
    assert_eq!(code, 0);
    assert!(
        text.contains("\nExecuting run on ['alpha']\n")
            && text.contains("\nExecuting run on ['beta']\n"),
        "{text}"
    );

    let jid = async_jid(&fleet, &["*", "test.sleep", "3"]);
    // A job with keyword arguments: Salt 3008.5's jobs.active shows them
    // in the job's `arg` as published, one `{"__kwarg__": true, ...}` dict.
    let kw_jid = async_jid(&fleet, &["alpha", "cmd.run", "sleep 3", "timeout=30"]);
    let out = fleet.cli("halite-run", &["jobs.active", "--out", "json"]);
    let active: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(active[&jid]["Function"], "test.sleep", "{active}");
    assert_eq!(active[&jid]["Arguments"], json!([3]), "{active}");
    assert_eq!(
        active[&kw_jid]["Arguments"],
        json!(["sleep 3", {"__kwarg__": true, "timeout": 30}]),
        "{active}"
    );
    assert!(wait_for(Duration::from_secs(15), || {
        let out = fleet.cli("halite-run", &["jobs.lookup_jid", &kw_jid, "--out", "json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        v == json!({"alpha": ""})
    }));
    assert!(wait_for(Duration::from_secs(15), || {
        let out = fleet.cli("halite-run", &["jobs.lookup_jid", &jid, "--out", "json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        v == json!({"alpha": true, "beta": true})
    }));
    let out = fleet.cli("halite-run", &["jobs.list_jobs", "--out", "json"]);
    let jobs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(jobs[&jid]["Arguments"], json!([3]));
    assert_eq!(jobs[&jid]["Target"], "*");

    // An unknown function fails the run the way Salt does.
    let (rets, code) = fleet.halite_json(&["alpha", "nosuch.fun"]);
    assert_eq!(
        (rets.get("alpha"), code),
        (Some(&json!("'nosuch.fun' is not available.")), 1)
    );
    let out = fleet.cli("halite-run", &["manage.up", "--out", "json"]);
    let up: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(up, json!(["alpha", "beta"]));

    // Batches slide: with -b 2 over three minions, the third starts as
    // soon as the fast one returns, before the slow one has.
    let _g = fleet.start_minion("gamma", "");
    fleet.wait_responding("gamma");
    let slow_unless_alpha = r#"case "$(tr '\0' ' ' < /proc/$PPID/cmdline)" in *minion-alpha*) echo fast;; *) sleep 2; echo slow;; esac"#;
    let (text, code) = fleet.halite(&[
        "-b",
        "2",
        "-L",
        "alpha,beta,gamma",
        "cmd.run",
        slow_unless_alpha,
    ]);
    assert_eq!(code, 0, "{text}");
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle} in {text}"))
    };
    assert!(
        at("Executing run on ['alpha', 'beta']") < at("alpha:"),
        "{text}"
    );
    assert!(at("alpha:") < at("Executing run on ['gamma']"), "{text}");
    assert!(at("Executing run on ['gamma']") < at("beta:"), "{text}");
}

#[test]
fn a_minion_fails_over_to_the_next_master() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let _master = fleet.start_master("auto_accept: True");
    // 127.0.0.2 has nothing listening on the fleet's ports: the minion must move on.
    let minion = fleet.start_minion(
        "roamer",
        "master: [127.0.0.2, 127.0.0.1]\nmaster_type: failover\nauth_timeout: 1\n",
    );
    fleet.wait_responding("roamer");
    assert!(
        minion.log_text().contains("master=127.0.0.2"),
        "{}",
        minion.log_text()
    );
}

#[test]
fn state_apply_runs_on_the_minion_and_fails_the_run_when_a_state_fails() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let srv = fleet.path("srv");
    std::fs::create_dir_all(&srv).expect("srv");
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base: [{}]\n",
        srv.display()
    ));
    std::fs::write(
        srv.join("demo.sls"),
        "ok:\n  test.succeed_with_changes:\n    - name: fine\nbad:\n  test.fail_without_changes:\n    - name: broken\n",
    )
    .expect("sls");
    let _m = fleet.start_minion("stater", "");
    fleet.wait_responding("stater");

    let out = fleet.cli("halite", &["stater", "state.apply", "demo"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("Summary for stater") && text.contains("Failed:    1"),
        "{text}"
    );

    let (rets, code) = fleet.halite_json(&["stater", "state.apply", "demo"]);
    assert_eq!(code, 1);
    let states = rets["stater"].as_object().cloned().unwrap_or_default();
    assert_eq!(
        states["test_|-ok_|-fine_|-succeed_with_changes"]["result"],
        json!(true)
    );
    assert_eq!(
        states["test_|-bad_|-broken_|-fail_without_changes"]["result"],
        json!(false)
    );
}
