//! gitfs and git_pillar end to end: a real master and minion on loopback,
//! the state tree and the pillar in git repositories the test creates
//! (file:// remotes), `fileserver_backend: [gitfs, roots]`.
//! `state.apply` runs the top file, SLS and a `salt://` file from gitfs
//! with pillar from git_pillar; a commit pushed while the master runs is
//! not fetched by a compile but is served after `halite-run
//! fileserver.update`; a pillar commit arrives after
//! `git_pillar_update_interval`; a remote gone keeps its last fetch served.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::process::Command;
use std::time::Duration;

use common::{can_run, wait_for, Daemon, Fleet};
use halite_test_support::git::{ready, Upstream};
use serde_json::Value;

/// Starts an `auto_accept` master with `config` (its fileserver and
/// pillar settings) and minion web1, and waits until web1 answers:
/// (master, web1).
fn start_with_web1(fleet: &Fleet, config: &str) -> (Daemon, Daemon) {
    let master = fleet.start_master(&format!("auto_accept: true\n{config}"));
    let minion = fleet.start_minion("web1", "");
    fleet.wait_responding("web1");
    (master, minion)
}

/// `halite-run ARGS --out json`: (the printed value, stderr, success).
fn run_json(fleet: &Fleet, args: &[&str]) -> (Value, String, bool) {
    let mut full = args.to_vec();
    full.extend(["--out", "json"]);
    let out = fleet.cli("halite-run", &full);
    let value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        value,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

#[test]
fn state_apply_from_gitfs_with_git_pillar() {
    if !can_run() {
        return;
    }
    if !ready() {
        return;
    }
    let fleet = Fleet::new();
    let out = fleet.path("out");
    std::fs::create_dir_all(&out).unwrap();
    let states = Upstream::new();
    states.write("top.sls", "base:\n  '*':\n    - web\n");
    states.write(
        "web.sls",
        &format!(
            "motd:\n  file.managed:\n    - name: {}/motd\n    - source: salt://files/motd\n    - template: jinja\n",
            out.display()
        ),
    );
    states.write("files/motd", "one {{ pillar['greeting'] }}\n");
    states.commit("one");
    states.push();
    let pillar = Upstream::new();
    pillar.write("top.sls", "base:\n  '*':\n    - common\n");
    pillar.write("common.sls", "greeting: hello\n");
    pillar.commit("pillar one");
    pillar.push();
    let roots = fleet.path("roots");
    std::fs::create_dir_all(&roots).unwrap();
    std::fs::write(roots.join("extra.sls"), "from roots\n").unwrap();
    let (_master, minion) = start_with_web1(
        &fleet,
        &format!(
        "fileserver_backend: [gitfs, roots]\nfile_roots:\n  base: [{}]\npillar_roots: {{}}\ngitfs_remotes:\n  - {}\ngitfs_update_interval: 3600\ngit_pillar_update_interval: 1\next_pillar:\n  - git:\n    - master {}\n",
        roots.display(),
        states.url(),
        pillar.url()
        ),
    );
    // The first background fetch at start-up.
    assert!(
        wait_for(Duration::from_secs(60), || {
            run_json(&fleet, &["fileserver.file_list"]).0
                == serde_json::json!(["extra.sls", "files/motd", "top.sls", "web.sls"])
        }),
        "gitfs never served the repository: {:?}",
        run_json(&fleet, &["fileserver.file_list"])
    );
    assert_eq!(
        run_json(&fleet, &["fileserver.envs"]).0,
        serde_json::json!(["base"])
    );
    let apply = |expect: &str| {
        let (rets, code) = fleet.halite_json(&["web1", "state.apply", "-t", "60"]);
        assert_eq!(code, 0, "{rets:?}");
        assert_eq!(
            std::fs::read_to_string(out.join("motd")).unwrap_or_default(),
            expect,
            "{rets:?}"
        );
    };
    assert!(
        wait_for(Duration::from_secs(30), || {
            let (rets, _) = fleet.halite_json(&["web1", "pillar.get", "greeting", "unmask=True"]);
            rets.get("web1") == Some(&Value::from("hello"))
        }),
        "git_pillar never gave the pillar"
    );
    // Pillar targets see git_pillar's data.
    for target in [["-I", "greeting:hello"], ["-C", "J@greeting:^hel+o$"]] {
        let (hit, _) = fleet.halite_json(&[target[0], target[1], "test.ping", "-t", "30"]);
        assert_eq!(
            hit.get("web1"),
            Some(&Value::Bool(true)),
            "{target:?} {hit:?}"
        );
    }
    apply("one hello\n");

    // A commit pushed while the master runs: a compile does not fetch it...
    states.write("files/motd", "two {{ pillar['greeting'] }}\n");
    let head = states.commit("two");
    states.push();
    apply("one hello\n");
    // ...fileserver.update does, and the master serves it at once.
    let (ret, err, ok) = run_json(&fleet, &["fileserver.update", "backend=gitfs"]);
    assert!(ok && ret == Value::Bool(true), "{ret} {err}");
    apply("two hello\n");
    // The bundle named the commit it was compiled from.
    assert!(
        minion.log_text().contains(&head),
        "the minion never logged commit {head}"
    );

    // The pillar repository is fetched every git_pillar_update_interval.
    pillar.write("common.sls", "greeting: bonjour\n");
    pillar.commit("pillar two");
    pillar.push();
    assert!(
        wait_for(Duration::from_secs(60), || {
            let (rets, _) = fleet.halite_json(&["web1", "pillar.get", "greeting", "unmask=True"]);
            rets.get("web1") == Some(&Value::from("bonjour"))
        }),
        "the pillar commit was never fetched"
    );
    apply("two bonjour\n");

    // The remotes go away: updates fail naming them, the master logs why
    // and keeps serving the last good fetch.
    std::fs::rename(states.bare(), fleet.path("states-gone.git")).unwrap();
    std::fs::rename(pillar.bare(), fleet.path("pillar-gone.git")).unwrap();
    let (_, err, ok) = run_json(&fleet, &["fileserver.update"]);
    assert!(!ok && err.contains(&states.url()), "{err}");
    assert!(
        wait_for(Duration::from_secs(30), || _master
            .log_text()
            .contains("git_pillar remote not updated")),
        "the master never logged the failed pillar fetch"
    );
    std::fs::remove_file(out.join("motd")).unwrap();
    apply("two bonjour\n");
}

#[test]
fn a_remote_never_fetched_is_named_to_the_minion_and_its_password_is_nowhere() {
    if !can_run() {
        return;
    }
    if !ready() {
        return;
    }
    let fleet = Fleet::new();
    // Nothing listens on port 9 of the loopback.
    let url = "http://127.0.0.1:9/states.git";
    let (master, minion) = start_with_web1(
        &fleet,
        &format!(
            "fileserver_backend: [gitfs]\npillar_roots: {{}}\ngitfs_remotes:\n  - {url}\ngitfs_user: alice\ngitfs_password: pw-never-shown-31\ngitfs_insecure_auth: true\n"
        ),
    );
    assert!(
        wait_for(Duration::from_secs(60), || master
            .log_text()
            .contains("gitfs remote not updated")),
        "the master never logged the failed fetch"
    );
    let (rets, _) = fleet.halite_json(&["web1", "state.apply", "-t", "60"]);
    let text = rets.get("web1").map(Value::to_string).unwrap_or_default();
    assert!(
        text.contains(url) && text.contains("never been fetched"),
        "{rets:?}"
    );
    let (listed, err, ok) = run_json(&fleet, &["fileserver.file_list"]);
    assert!(!ok && err.contains(url), "{listed} {err}");
    let out = Command::new("grep")
        .args(["-r", "-l", "pw-never-shown-31"])
        .arg(fleet.path("master-cache"))
        .arg(fleet.path("minion-web1"))
        .arg(fleet.path("master.log"))
        .output()
        .unwrap();
    assert!(
        out.stdout.is_empty(),
        "the password is in {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!minion.log_text().contains("pw-never-shown-31"));
}

/// `gitfs_update_interval`: the master's background task fetches the
/// remote every interval, so a commit pushed while it runs is served
/// without `halite-run fileserver.update`.
#[test]
fn gitfs_update_interval_serves_a_pushed_commit_without_an_update() {
    if !can_run() {
        return;
    }
    if !ready() {
        return;
    }
    let fleet = Fleet::new();
    let states = Upstream::new();
    states.write("top.sls", "base:\n  '*':\n    - web\n");
    states.write("web.sls", "one:\n  test.succeed_without_changes\n");
    states.commit("one");
    states.push();
    let _master = fleet.start_master(&format!(
        "auto_accept: true\nfileserver_backend: [gitfs]\npillar_roots: {{}}\ngitfs_remotes:\n  - {}\ngitfs_update_interval: 1\n",
        states.url()
    ));
    let listed = || run_json(&fleet, &["fileserver.file_list"]).0;
    assert!(
        wait_for(Duration::from_secs(60), || listed()
            == serde_json::json!(["top.sls", "web.sls"])),
        "gitfs never served the repository: {:?}",
        listed()
    );
    states.write("extra.sls", "two:\n  test.succeed_without_changes\n");
    states.commit("two");
    states.push();
    assert!(
        wait_for(Duration::from_secs(60), || listed()
            == serde_json::json!(["extra.sls", "top.sls", "web.sls"])),
        "the pushed commit was never fetched: {:?}",
        listed()
    );
}
