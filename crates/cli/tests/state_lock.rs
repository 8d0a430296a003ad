//! One state run at a time on a host, across processes (Salt's
//! `_check_queue`): a second `state.sls` while one runs is refused with
//! Salt's line and retcode 1; with `queue=True` it waits and runs after.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A tree whose `slow` state sleeps 3 s then leaves `first.done`, and
/// whose `after` state succeeds only once `first.done` exists.
fn tree() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().display();
    std::fs::write(
        d.path().join("slow.sls"),
        format!("slow:\n  cmd.run:\n    - name: sleep 3 && touch {root}/first.done\n"),
    )
    .unwrap();
    std::fs::write(
        d.path().join("after.sls"),
        format!("after:\n  cmd.run:\n    - name: test -e {root}/first.done\n"),
    )
    .unwrap();
    std::fs::write(
        d.path().join("minion"),
        format!("id: local\ncachedir: {root}/cache\n"),
    )
    .unwrap();
    d
}

fn halite_call(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_halite-call"));
    cmd.arg("--local")
        .arg("--config-dir")
        .arg(dir)
        .arg("--file-root")
        .arg(dir)
        .args(["--out", "json"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Starts `state.sls slow` and returns once it holds the host's lock
/// (the lock file names its pid).
fn start_slow(dir: &Path) -> Child {
    let child = halite_call(dir, &["state.sls", "slow"]).spawn().unwrap();
    let lock = dir.join("cache/state_run.lock");
    let pid = format!("\"pid\":{}", child.id());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&lock).is_ok_and(|t| t.contains(&pid)) {
        assert!(
            Instant::now() < deadline,
            "the first run never took the lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn json_of(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn a_second_state_run_is_refused_with_salts_message_while_one_runs() {
    let d = tree();
    let first = start_slow(d.path());
    let pid = first.id();
    let second = halite_call(d.path(), &["state.sls", "after"])
        .output()
        .unwrap();
    let refused = json_of(&second);
    let lines = refused["local"]
        .as_array()
        .expect("a list, as Salt returns");
    assert_eq!(lines.len(), 1, "{refused}");
    let line = lines[0].as_str().unwrap();
    let prefix = format!("The function \"state.sls\" is running as PID {pid} and was started at ");
    assert!(line.starts_with(&prefix), "{line}");
    // `... started at 2026, Nov 25 23:57:40.294873 with jid 20261125235740294873`
    let (when, jid) = line[prefix.len()..].split_once(" with jid ").expect(line);
    assert_eq!(jid.len(), 20, "{line}");
    assert_eq!(when, halite_salt_rules::jid::jid_to_time(jid), "{line}");
    assert_eq!(second.status.code(), Some(1), "{refused}");
    assert!(
        !d.path().join("first.done").exists(),
        "the refusal waited for the first run"
    );

    let first = first.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", json_of(&first));
    // Once the first run ended, the lock is free again.
    let again = halite_call(d.path(), &["state.sls", "after"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", json_of(&again));
}

#[test]
fn with_queue_true_the_second_state_run_waits_its_turn() {
    let d = tree();
    let first = start_slow(d.path());
    let second = halite_call(d.path(), &["state.sls", "after", "queue=True"])
        .output()
        .unwrap();
    let ran = json_of(&second);
    // It ran after the first had finished: `first.done` was there.
    let result = ran["local"]
        .as_object()
        .and_then(|m| m.values().next())
        .map(|r| r["result"].clone());
    assert_eq!(result, Some(serde_json::Value::Bool(true)), "{ran}");
    assert_eq!(second.status.code(), Some(0), "{ran}");
    assert_eq!(first.wait_with_output().unwrap().status.code(), Some(0));
}

#[test]
fn concurrent_true_runs_beside_a_state_run() {
    let d = tree();
    let first = start_slow(d.path());
    let second = halite_call(d.path(), &["state.sls", "after", "concurrent=True"])
        .output()
        .unwrap();
    let ran = json_of(&second);
    // Not refused: it ran at once, before the first run's file existed.
    let result = ran["local"]
        .as_object()
        .and_then(|m| m.values().next())
        .map(|r| r["result"].clone());
    assert_eq!(result, Some(serde_json::Value::Bool(false)), "{ran}");
    assert_eq!(first.wait_with_output().unwrap().status.code(), Some(0));
}
