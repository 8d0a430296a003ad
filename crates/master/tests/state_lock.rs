//! The state-run lock holds across processes on one host: while the
//! minion runs a `state.sls` job from its master, a `halite-call --local`
//! on the same host (same cachedir) is refused with Salt's line naming the
//! minion's pid and the job's jid.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

#[test]
fn halite_call_is_refused_while_the_minion_runs_a_state_job() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let roots = fleet.path("roots");
    std::fs::create_dir_all(&roots).unwrap();
    std::fs::write(
        roots.join("slow.sls"),
        format!(
            "slow:\n  cmd.run:\n    - name: sleep 3 && touch {}/first.done\n",
            roots.display()
        ),
    )
    .unwrap();
    std::fs::write(
        roots.join("after.sls"),
        "after:\n  test.succeed_without_changes\n",
    )
    .unwrap();
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base:\n    - {}",
        roots.display()
    ));
    let minion = fleet.start_minion("locked", "");
    fleet.wait_responding("locked");

    let (text, code) = fleet.halite(&["locked", "state.sls", "slow", "--async"]);
    assert_eq!(code, 0, "{text}");
    let jid = text.trim().rsplit(' ').next().unwrap().to_string();
    let lock = fleet.path("minion-locked/cache/state_run.lock");
    assert!(
        wait_for(Duration::from_secs(20), || std::fs::read_to_string(&lock)
            .is_ok_and(|t| t.contains(&jid))),
        "the minion's job never took the lock:\n{}",
        minion.log_text()
    );

    let out = Command::new(bin("halite-call"))
        .arg("--local")
        .arg("-c")
        .arg(fleet.path("minion-locked"))
        .arg("--file-root")
        .arg(&roots)
        .args(["--out", "json", "state.sls", "after"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    // salt-call --local names its output `local`, whatever the id.
    let line = v["local"][0].as_str().unwrap_or_default();
    assert!(
        line.starts_with(&format!(
            "The function \"state.sls\" is running as PID {} and was started at ",
            minion.child.id()
        )) && line.ends_with(&format!(" with jid {jid}")),
        "{v}"
    );
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert!(!roots.join("first.done").exists());
}
