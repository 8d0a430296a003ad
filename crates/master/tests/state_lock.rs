//! The state-run lock holds across processes on one host: while the
//! minion runs a `state.sls` job from its master, a `halite-call --local`
//! on the same host (same cachedir) is refused with Salt's line naming the
//! minion's pid and the job's jid. In a swarm every identity stands for
//! a host of its own: identities applying at once do not refuse each
//! other, while one identity's second run still is refused.
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

/// A state every identity runs at once: it marks itself started, then
/// waits until all `n` identities have started (at most a minute). Under
/// one shared host lock only one identity could be inside it: the others
/// would be refused before their states ran.
fn barrier_tree(roots: &std::path::Path, n: usize) {
    let marks = roots.join("started");
    std::fs::create_dir_all(&marks).unwrap();
    std::fs::write(
        roots.join("together.sls"),
        format!(
            "together:\n  cmd.run:\n    - name: touch {m}/{{{{ grains['id'] }}}} && for i in $(seq 600); do [ $(ls {m} | wc -l) -ge {n} ] && exit 0; sleep 0.1; done; exit 1\n",
            m = marks.display()
        ),
    )
    .unwrap();
    std::fs::write(
        roots.join("after.sls"),
        "after:\n  test.succeed_without_changes\n",
    )
    .unwrap();
}

#[test]
fn swarm_identities_apply_at_once_and_none_is_refused() {
    if !can_run() {
        return;
    }
    let n = 6;
    let fleet = Fleet::new();
    let roots = fleet.path("roots");
    barrier_tree(&roots, n);
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base:\n    - {}",
        roots.display()
    ));
    let swarm = fleet.start_swarm(n, "");
    for i in 0..n {
        fleet.wait_responding(&format!("swarm-{i}"));
    }

    // No queue=True: every identity's run starts while the others run.
    let (rets, code) = fleet.halite_json(&["swarm-*", "state.sls", "together", "-t", "90"]);
    assert_eq!(rets.len(), n, "{rets:?}\n{}", swarm.log_text());
    for (id, ret) in &rets {
        let states = ret
            .as_object()
            .unwrap_or_else(|| panic!("{id} did not run its states: {ret}"));
        assert!(states.values().all(|s| s["result"] == true), "{id}: {ret}");
    }
    assert_eq!(code, 0, "{rets:?}");
    // Each identity took its own lock, not the shared cachedir's.
    for i in 0..n {
        let lock = fleet.path(&format!("swarm/pki/swarm/swarm-{i}/state_run.lock"));
        assert!(lock.is_file(), "no lock file {}", lock.display());
    }
    assert!(!fleet.path("swarm/cache/state_run.lock").exists());
}

#[test]
fn a_swarm_identity_still_refuses_its_own_second_run() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let roots = fleet.path("roots");
    // Two identities must start before `together` ends: only swarm-0
    // runs it, so it waits its minute out unless swarm-1 joins.
    barrier_tree(&roots, 2);
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base:\n    - {}",
        roots.display()
    ));
    let swarm = fleet.start_swarm(2, "");
    fleet.wait_responding("swarm-0");
    fleet.wait_responding("swarm-1");

    let (text, code) = fleet.halite(&["swarm-0", "state.sls", "together", "--async"]);
    assert_eq!(code, 0, "{text}");
    let jid = text.trim().rsplit(' ').next().unwrap().to_string();
    let lock = fleet.path("swarm/pki/swarm/swarm-0/state_run.lock");
    assert!(
        wait_for(Duration::from_secs(20), || std::fs::read_to_string(&lock)
            .is_ok_and(|t| t.contains(&jid))),
        "swarm-0's job never took its lock:\n{}",
        swarm.log_text()
    );
    // swarm-0 again: refused with Salt's line, as a host running a state.
    let (rets, code) = fleet.halite_json(&["swarm-0", "state.sls", "after", "-t", "30"]);
    let line = rets["swarm-0"][0].as_str().unwrap_or_default();
    assert!(
        line.starts_with("The function \"state.sls\" is running as PID ")
            && line.ends_with(&format!(" with jid {jid}")),
        "{rets:?}"
    );
    assert_eq!(code, 1, "{rets:?}");
    // swarm-1 is another host: it runs while swarm-0's run holds its
    // lock (and, joining the barrier, lets that run end).
    let (rets, code) = fleet.halite_json(&["swarm-1", "state.sls", "together", "-t", "90"]);
    assert_eq!(code, 0, "{rets:?}");
}
