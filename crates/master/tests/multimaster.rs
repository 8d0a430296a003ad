//! Hot multi-master (a minion serving two masters at once, Salt's
//! `master_type: str` with a list) and `halite-call` through the master
//! (Salt's salt-call without `--local`), with real daemons on loopback.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed expectation is the test's failure"
)]

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{async_jid, bin, can_run, sessions, wait_for, Daemon, Fleet};
use serde_json::{json, Value};

/// `halite-run ARGS --out json` against `fleet`'s master, parsed.
fn run_json(fleet: &Fleet, args: &[&str]) -> Value {
    let mut full = args.to_vec();
    full.extend(["--out", "json"]);
    let out = fleet.cli("halite-run", &full);
    serde_json::from_slice(&out.stdout).unwrap_or_default()
}

/// Starts minion `id` in `home`'s temp dir with both `masters` in its
/// `master` list (in that order), plus `extra` YAML.
fn minion_of_both(home: &Fleet, masters: [&Fleet; 2], id: &str, extra: &str) -> Daemon {
    home.start_minion(
        id,
        &format!(
            // Salt's default publish_port: each master names its own.
            "master: ['127.0.0.1:{}', '127.0.0.1:{}']\npublish_port: 4505\n{extra}",
            masters[0].ret_port, masters[1].ret_port
        ),
    )
}

#[test]
fn a_minion_serves_two_masters_at_once_and_returns_to_the_sender() {
    if !can_run() {
        return;
    }
    let a = Fleet::new();
    let b = Fleet::new();
    let _master_a = a.start_master("auto_accept: True");
    // B accepts keys by hand: each master accepts the minion on its own.
    let mut master_b = b.start_master("");
    let mut minion = minion_of_both(&a, [&a, &b], "twin", "");
    a.wait_responding("twin");
    b.accept("twin");

    // Each master runs its own job and hears the minion answer.
    let (rets, code) = a.halite_json(&["twin", "test.echo", "from-a"]);
    assert_eq!((rets.get("twin"), code), (Some(&json!("from-a")), 0));
    let (rets, code) = b.halite_json(&["twin", "test.echo", "from-b"]);
    assert_eq!((rets.get("twin"), code), (Some(&json!("from-b")), 0));

    // A job from A returns to A's job cache only.
    let jid = async_jid(&a, &["twin", "test.echo", "only-a"]);
    assert!(
        wait_for(Duration::from_secs(20), || run_json(
            &a,
            &["jobs.lookup_jid", &jid]
        ) == json!({"twin": "only-a"})),
        "A never stored its return"
    );
    assert_eq!(run_json(&b, &["jobs.lookup_jid", &jid]), json!({}));
    assert!(run_json(&b, &["jobs.list_jobs"]).get(&jid).is_none());

    // Each master's own key is pinned apart (the masters share nothing).
    let pki = a.path("minion-twin/pki/masters");
    let pin_a = pki.join(format!("127.0.0.1_{}/minion_master.pub", a.ret_port));
    let pin_b = pki.join(format!("127.0.0.1_{}/minion_master.pub", b.ret_port));
    let (pa, pb) = (
        std::fs::read_to_string(&pin_a).expect("A's pin"),
        std::fs::read_to_string(&pin_b).expect("B's pin"),
    );
    assert_ne!(pa, pb);

    // One master down does not stop the other's jobs.
    master_b.kill();
    let (rets, code) = a.halite_json(&["twin", "test.echo", "still-here"]);
    assert_eq!(
        (rets.get("twin"), code),
        (Some(&json!("still-here")), 0),
        "{}",
        minion.log_text()
    );

    // SIGTERM stops every link, the one reconnecting to B included.
    unsafe {
        libc::kill(minion.child.id() as libc::pid_t, libc::SIGTERM);
    }
    assert!(
        wait_for(Duration::from_secs(20), || !minion.alive()),
        "the minion did not stop: {}",
        minion.log_text()
    );
    assert!(minion.log_text().contains("halite-minion shutting down"));
}

/// A master with a state tree and a pillar, and a running minion `id`
/// accepted on it; the minion's config dir.
fn master_with_tree(fleet: &Fleet, id: &str) -> (common::Daemon, common::Daemon) {
    let srv = fleet.path("srv");
    let pillar = fleet.path("pillar");
    std::fs::create_dir_all(srv.join("files")).unwrap();
    std::fs::create_dir_all(&pillar).unwrap();
    let target = fleet.path("out/motd");
    std::fs::write(srv.join("top.sls"), "base:\n  '*':\n    - motd\n").unwrap();
    std::fs::write(
        srv.join("motd.sls"),
        format!(
            "motd:\n  file.managed:\n    - name: {}\n    - source: salt://files/motd\n    - template: jinja\n    - makedirs: True\n",
            target.display()
        ),
    )
    .unwrap();
    std::fs::write(srv.join("files/motd"), "{{ pillar['motd_text'] }}\n").unwrap();
    std::fs::write(pillar.join("top.sls"), "base:\n  '*':\n    - data\n").unwrap();
    std::fs::write(pillar.join("data.sls"), "motd_text: hello-from-pillar\n").unwrap();
    let master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base: [{}]\npillar_roots:\n  base: [{}]\n",
        srv.display(),
        pillar.display()
    ));
    let minion = fleet.start_minion(id, "");
    fleet.wait_responding(id);
    (master, minion)
}

/// `halite-call -c <minion dir> --out json ARGS` (no `--local`): the
/// parsed `local` value and the exit code.
fn call_json(fleet: &Fleet, id: &str, args: &[&str]) -> (Value, i32, String) {
    let out = Command::new(bin("halite-call"))
        .arg("-c")
        .arg(fleet.path(&format!("minion-{id}")))
        .args(["--out", "json"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run halite-call");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    (
        v["local"].clone(),
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn halite_call_applies_the_masters_tree_and_the_return_lands_in_its_job_cache() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let (_master, minion) = master_with_tree(&fleet, "caller");
    let before = sessions(&minion);

    let (ret, code, err) = call_json(&fleet, "caller", &["state.apply"]);
    assert_eq!(code, 0, "{ret} {err}");
    let state = ret
        .as_object()
        .and_then(|m| m.values().next())
        .cloned()
        .unwrap_or_default();
    assert_eq!(state["result"], json!(true), "{ret}");
    assert_eq!(
        std::fs::read_to_string(fleet.path("out/motd")).unwrap(),
        "hello-from-pillar\n"
    );

    // The master keeps the run as Salt keeps a salt-call return: a job of
    // its own, targeting the minion's id, with the minion's return.
    let jobs = run_json(&fleet, &["jobs.list_jobs"]);
    let (jid, job) = jobs
        .as_object()
        .and_then(|m| m.iter().find(|(_, j)| j["Function"] == "state.apply"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .expect("the call's job in the master's job cache");
    assert_eq!(job["Target"], "caller", "{job}");
    let stored = run_json(&fleet, &["jobs.lookup_jid", &jid]);
    assert_eq!(stored["caller"], ret, "{stored}");

    // The minion daemon beside it kept its session: over three of its
    // ping intervals it never had to authenticate again, and it answers.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(sessions(&minion), before, "{}", minion.log_text());
    let (rets, code) = fleet.halite_json(&["caller", "test.ping", "-t", "5"]);
    assert_eq!(
        (rets.get("caller"), code),
        (Some(&json!(true)), 0),
        "{}",
        minion.log_text()
    );
}

#[test]
fn halite_call_shows_the_masters_pillar_and_fetches_its_files() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let (_master, _minion) = master_with_tree(&fleet, "peeker");

    let (ret, code, err) = call_json(&fleet, "peeker", &["pillar.items", "unmask=True"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(ret["motd_text"], "hello-from-pillar", "{ret}");

    let dest = fleet.path("fetched/motd");
    let (ret, code, err) = call_json(
        &fleet,
        "peeker",
        &[
            "cp.get_file",
            "salt://files/motd",
            dest.to_str().unwrap(),
            "makedirs=True",
        ],
    );
    assert_eq!(code, 0, "{ret} {err}");
    assert_eq!(
        std::fs::read_to_string(&dest).unwrap(),
        "{{ pillar['motd_text'] }}\n"
    );
}

#[test]
fn halite_call_names_the_unaccepted_key() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let _master = fleet.start_master("");
    let dir = fleet.path("minion-stranger");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("minion"),
        format!(
            "master: 127.0.0.1\nmaster_port: {}\nid: stranger\npki_dir: {d}/pki\ncachedir: {d}/cache\nauth_timeout: 2\n",
            fleet.ret_port,
            d = dir.display()
        ),
    )
    .unwrap();
    let (_, code, err) = call_json(&fleet, "stranger", &["test.ping"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("halite-key -a stranger"), "{err}");
}

#[test]
fn a_failover_minion_fails_back_to_the_first_master_when_it_returns() {
    if !can_run() {
        return;
    }
    let first = Fleet::new();
    let second = Fleet::new();
    let _second_master = second.start_master("auto_accept: True");
    // The first master is not up yet: the minion fails over to the second.
    let minion = minion_of_both(
        &second,
        [&first, &second],
        "homing",
        "master_type: failover\nmaster_failback: True\nmaster_failback_interval: 1\nauth_timeout: 1",
    );
    let answers = |fleet: &Fleet| {
        wait_for(Duration::from_secs(30), || {
            let (rets, _) = fleet.halite_json(&["homing", "test.ping", "-t", "2"]);
            rets.get("homing") == Some(&json!(true))
        })
    };
    assert!(answers(&second), "{}", minion.log_text());
    // Failover masters share one key (Salt's rule; the minion pins one).
    std::fs::create_dir_all(first.path("master-pki")).unwrap();
    for file in std::fs::read_dir(second.path("master-pki")).unwrap() {
        let file = file.unwrap();
        if file.file_name().to_string_lossy().starts_with("master.") {
            std::fs::copy(file.path(), first.path("master-pki").join(file.file_name())).unwrap();
        }
    }
    let _first_master = first.start_master("auto_accept: True");
    assert!(answers(&first), "{}", minion.log_text());
    assert!(
        minion.log_text().contains("failing back"),
        "{}",
        minion.log_text()
    );
}

#[test]
fn two_masters_share_the_minions_job_limit() {
    if !can_run() {
        return;
    }
    let a = Fleet::new();
    let b = Fleet::new();
    let _master_a = a.start_master("auto_accept: True");
    let _master_b = b.start_master("auto_accept: True");
    let minion = minion_of_both(&a, [&a, &b], "single", "process_count_max: 1");
    a.wait_responding("single");
    b.wait_responding("single");
    // A's job holds the one slot and leaves a file when it ends; B's job
    // waits for the slot, so when it runs the file is there. (A's return
    // reaches A's job cache on its own path, maybe after B's return
    // reached B: it is waited for, not assumed.)
    let done = a.path("a-done");
    let a_job = format!("sleep 3; touch {}", done.display());
    let jid = async_jid(&a, &["single", "cmd.run", &a_job]);
    assert!(wait_for(Duration::from_secs(20), || minion
        .log_text()
        .contains(&jid)));
    let (rets, code) = b.halite_json(&[
        "single",
        "file.file_exists",
        &done.display().to_string(),
        "-t",
        "30",
    ]);
    assert_eq!(
        (rets.get("single"), code),
        (Some(&json!(true)), 0),
        "B's job ran beside A's (A had not finished): the limit is per master"
    );
    assert!(
        wait_for(Duration::from_secs(30), || run_json(
            &a,
            &["jobs.lookup_jid", &jid]
        )
        .get("single")
        .is_some()),
        "A's return never reached A's job cache"
    );
}

/// The scheduled jobs of `fleet`'s job cache that ran `fun`.
fn scheduled_jobs(fleet: &Fleet, fun: &str) -> usize {
    run_json(fleet, &["jobs.list_jobs"])
        .as_object()
        .map_or(0, |m| m.values().filter(|j| j["Function"] == fun).count())
}

#[test]
fn a_hot_multi_master_minion_runs_its_schedule_once_not_once_per_master() {
    if !can_run() {
        return;
    }
    let a = Fleet::new();
    let b = Fleet::new();
    let _master_a = a.start_master("auto_accept: True");
    let _master_b = b.start_master("auto_accept: True");
    let marker = a.path("started");
    let minion = minion_of_both(
        &a,
        [&a, &b],
        "sched2",
        &format!(
            "schedule:\n  boot:\n    function: cmd.run\n    args: ['echo boot >> {}']\n    seconds: 3600\n    run_on_start: True",
            marker.display()
        ),
    );
    a.wait_responding("sched2");
    b.wait_responding("sched2");
    // Both links have a session: a scheduler per link would have started
    // its run_on_start job on each by now.
    let (rets, _) = a.halite_json(&["sched2", "test.echo", "a"]);
    assert_eq!(rets.get("sched2"), Some(&json!("a")));
    let (rets, _) = b.halite_json(&["sched2", "test.echo", "b"]);
    assert_eq!(rets.get("sched2"), Some(&json!("b")));
    assert!(
        wait_for(Duration::from_secs(30), || scheduled_jobs(&a, "cmd.run")
            + scheduled_jobs(&b, "cmd.run")
            >= 1),
        "the scheduled job reached neither master:\n{}",
        minion.log_text()
    );
    // The minion's own job went to one master, and ran once.
    assert_eq!(
        scheduled_jobs(&a, "cmd.run") + scheduled_jobs(&b, "cmd.run"),
        1,
        "A: {} B: {}",
        run_json(&a, &["jobs.list_jobs"]),
        run_json(&b, &["jobs.list_jobs"])
    );
    let text = std::fs::read_to_string(&marker).unwrap_or_default();
    assert_eq!(text.lines().count(), 1, "{text}");
    // The start-up refresh_pillar goes to every master: each one's pillar
    // cache (-I targeting) has the minion's pillar from the start.
    for fleet in [&a, &b] {
        assert!(
            wait_for(Duration::from_secs(20), || scheduled_jobs(
                fleet,
                "saltutil.refresh_pillar"
            ) == 1),
            "{}",
            run_json(fleet, &["jobs.list_jobs"])
        );
    }
}
