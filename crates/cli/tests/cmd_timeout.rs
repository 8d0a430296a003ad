//! `timeout=` of `cmd.*` functions and states is enforced: the command and
//! every process it started are killed, and the result is Salt 3008.5's
//! (stdout "<cmd> : Timed out after N seconds", retcode 1).
//!
//! Each test sleeps for a length no other process uses (`40.<pid><n>`
//! seconds), so it can tell whether its own `sleep` is still running.
//! Without the timeout the command would run for 40 seconds and return
//! empty output: the assertions on the output fail, not a clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn halite_call(dir: &Path, args: &[&str]) -> (Value, String, i32) {
    let out = Command::new(env!("CARGO_BIN_EXE_halite-call"))
        .arg("--local")
        .arg("--config-dir")
        .arg(dir)
        .arg("--file-root")
        .arg(dir)
        .args(args)
        .args(["--out", "json"])
        .output()
        .expect("run halite-call");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\nstderr: {stderr}"));
    (json, stderr, out.status.code().unwrap_or(-1))
}

fn tree() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    // Its own cachedir: the state-run lock lives there (tests run at once).
    std::fs::write(
        d.path().join("minion"),
        format!("id: local\ncachedir: {}/cache\n", d.path().display()),
    )
    .unwrap();
    d
}

/// A sleep length only this test uses.
fn marker(n: u32) -> String {
    format!("40.{}{n}", std::process::id())
}

/// The processes whose command line holds `marker` and that are still
/// running: not zombies, and not already sent SIGKILL.
fn running_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let dir = entry.path();
        let Ok(cmdline) = std::fs::read(dir.join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if !cmdline.contains(marker) || cmdline.contains("halite-call") {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
                .unwrap_or("")
                .to_string()
        };
        let zombie = field("State:").starts_with('Z') || field("State:").starts_with('X');
        let kill_pending = ["SigPnd:", "ShdPnd:"]
            .iter()
            .any(|f| u64::from_str_radix(&field(f), 16).is_ok_and(|mask| mask & (1 << 8) != 0));
        if !status.is_empty() && !zombie && !kill_pending {
            found.push(format!("{}: {cmdline}", dir.display()));
        }
    }
    found
}

#[test]
fn cmd_run_timeout_kills_the_shell_and_its_children() {
    let d = tree();
    let m = marker(1);
    // The shell forks `sleep`: the grandchild must die with it.
    let cmd = format!("sleep {m}; echo never");
    let (out, err, code) = halite_call(d.path(), &["cmd.run", &cmd, "timeout=1"]);
    assert_eq!(
        out["local"],
        format!("{cmd} : Timed out after 1 seconds"),
        "{err}"
    );
    // Salt returns before setting the job's retcode: salt-call exits 0.
    assert_eq!(code, 0, "{err}");
    assert_eq!(running_with(&m), Vec::<String>::new());
}

#[test]
fn cmd_run_all_retcode_and_script_time_out_like_salt() {
    let d = tree();
    let m = marker(2);
    let cmd = format!("sleep {m}");
    let (out, err, _) = halite_call(d.path(), &["cmd.run_all", &cmd, "timeout=1.5"]);
    let ret = &out["local"];
    assert_eq!(
        ret["stdout"],
        format!("{cmd} : Timed out after 1.5 seconds"),
        "{err}"
    );
    assert_eq!(ret["stderr"], "");
    assert_eq!(ret["retcode"], 1);
    assert!(ret["pid"].as_u64().is_some_and(|p| p > 0), "{ret}");
    let keys: Vec<&str> = ret
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["stdout", "stderr", "retcode", "pid"]);

    // Without the shell Salt shows the command as a Python list.
    let (out, err, _) = halite_call(
        d.path(),
        &["cmd.run_all", &cmd, "timeout=1", "python_shell=False"],
    );
    assert_eq!(
        out["local"]["stdout"],
        format!("['sleep', '{m}'] : Timed out after 1 seconds"),
        "{err}"
    );

    let (out, err, code) = halite_call(d.path(), &["cmd.retcode", &cmd, "timeout=1"]);
    assert_eq!(out["local"], 1, "{err}");
    assert_eq!(code, 0, "{err}");

    let script = d.path().join("hang.sh");
    std::fs::write(&script, format!("#!/bin/sh\necho started\nsleep {m}\n")).unwrap();
    let (out, err, _) = halite_call(
        d.path(),
        &["cmd.script", script.to_str().unwrap(), "timeout=1"],
    );
    let stdout = out["local"]["stdout"].as_str().unwrap_or_default();
    assert!(
        stdout.starts_with("['") && stdout.ends_with("'] : Timed out after 1 seconds"),
        "{stdout} / {err}"
    );
    assert_eq!(out["local"]["retcode"], 1);
    assert_eq!(running_with(&m), Vec::<String>::new());
}

#[test]
fn a_timeout_that_is_not_a_number_is_refused() {
    let d = tree();
    let out = Command::new(env!("CARGO_BIN_EXE_halite-call"))
        .arg("--local")
        .arg("--config-dir")
        .arg(d.path())
        .args(["cmd.run", "echo hi", "timeout=soon"])
        .output()
        .expect("run halite-call");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("Error: timeout soon must be a number"),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(1));

    // In a state, Salt 3008.5 fails it with the message as comment.
    std::fs::write(
        d.path().join("bad.sls"),
        "strto:\n  cmd.run:\n    - name: echo hi\n    - timeout: '5'\n",
    )
    .unwrap();
    let (out, err, _) = halite_call(d.path(), &["state.apply", "bad"]);
    let ret = &out["local"]["cmd_|-strto_|-echo hi_|-run"];
    assert_eq!(ret["result"], false, "{err}");
    assert_eq!(ret["comment"], "Error: timeout 5 must be a number");
    assert_eq!(ret["changes"], serde_json::json!({}));
}

#[test]
fn cmd_states_and_their_unless_onlyif_honour_timeout() {
    let d = tree();
    let m = marker(3);
    let sls = format!(
        "hang:\n  cmd.run:\n    - name: sleep {m}\n    - timeout: 1\n\
         guarded_unless:\n  cmd.run:\n    - name: echo ran\n    - unless: sleep {m}\n    - timeout: 1\n\
         guarded_onlyif:\n  cmd.run:\n    - name: echo ran\n    - onlyif: sleep {m}\n    - timeout: 1\n"
    );
    std::fs::write(d.path().join("hang.sls"), sls).unwrap();
    let (out, err, code) = halite_call(d.path(), &["state.apply", "hang"]);
    let ret = &out["local"];
    let hang = &ret[format!("cmd_|-hang_|-sleep {m}_|-run")];
    assert_eq!(hang["result"], false, "{err}");
    assert_eq!(hang["comment"], format!("Command \"sleep {m}\" run"));
    assert_eq!(
        hang["changes"]["stdout"],
        format!("sleep {m} : Timed out after 1 seconds")
    );
    assert_eq!(hang["changes"]["retcode"], 1);
    // A timed-out `unless` failed (retcode 1): the command runs.
    let unless = &ret["cmd_|-guarded_unless_|-echo ran_|-run"];
    assert_eq!(unless["result"], true);
    assert_eq!(unless["changes"]["stdout"], "ran");
    // A timed-out `onlyif` failed: the command is skipped.
    let onlyif = &ret["cmd_|-guarded_onlyif_|-echo ran_|-run"];
    assert_eq!(onlyif["result"], true);
    assert_eq!(onlyif["comment"], "onlyif condition is false");
    assert_eq!(code, 1);
    assert_eq!(running_with(&m), Vec::<String>::new());
}
