//! Orchestration end to end: a real master and three real minions (db1,
//! app1, web1) on loopback, `halite-run state.orchestrate` running SLS
//! from the master's file_roots with `salt.state`, `salt.function` and
//! `salt.wait_for_event` steps and requisites between them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{bin, can_run, wait_for, Fleet};
use serde_json::Value;

use common::write_file as write;

/// The state tree: each tier's SLS writes a marker file under `out`
/// (one line per run, so a second run shows), and the orchestrations.
fn tree(salt: &Path, out: &Path) {
    let out = out.display();
    for tier in ["db", "app", "web"] {
        write(
            &salt.join(format!("{tier}.sls")),
            &format!(
                "mark:\n  cmd.run:\n    - name: echo ran >> {out}/{{{{ grains['id'] }}}}-{tier}\n"
            ),
        );
    }
    write(
        &salt.join("broken.sls"),
        "broken:\n  test.fail_without_changes:\n    - comment: this step is broken\n",
    );
    write(
        &salt.join("orch/deploy.sls"),
        r#"db:
  salt.state:
    - tgt: db1
    - sls: db

app:
  salt.state:
    - tgt: 'app*'
    - sls: app
    - require:
      - salt: db

web:
  salt.state:
    - tgt: web1
    - tgt_type: list
    - sls: web
    - require:
      - salt: app

batched:
  salt.state:
    - tgt: 'app1,web1'
    - tgt_type: list
    - sls: db
    - batch: 1
    - require:
      - salt: web

echo:
  salt.function:
    - name: test.echo
    - tgt: '*'
    - arg:
      - {{ pillar.get('word', 'hello') }}
    - require:
      - salt: web
"#,
    );
    write(
        &salt.join("orch/failing.sls"),
        r#"db:
  salt.state:
    - tgt: db1
    - sls: broken

app:
  salt.state:
    - tgt: app1
    - sls: app
    - require:
      - salt: db

tolerated:
  salt.state:
    - tgt: db1
    - sls: broken
    - fail_minions: db1

allowed:
  salt.state:
    - tgt: db1
    - sls: broken
    - allow_fail: 1

notify:
  salt.function:
    - name: test.echo
    - tgt: web1
    - arg: [db failed]
    - onfail:
      - salt: db
"#,
    );
    write(
        &salt.join("orch/wait.sls"),
        r#"wait:
  salt.wait_for_event:
    - name: halite/test/ready/*
    - id_list:
      - web1
    - timeout: 60

after:
  salt.function:
    - name: test.ping
    - tgt: web1
    - require:
      - salt: wait
"#,
    );
    write(
        &salt.join("orch/ssh.sls"),
        "nope:\n  salt.state:\n    - tgt: web1\n    - sls: web\n    - ssh: True\n",
    );
}

/// `halite-run ARGS --out json` as (the runner's return, exit code).
fn orch_json(fleet: &Fleet, args: &[&str]) -> (Value, i32) {
    let mut full = args.to_vec();
    full.extend(["--out", "json"]);
    let out = fleet.cli("halite-run", &full);
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.code().unwrap_or(-1))
}

/// The step whose id is `id` in the orchestration return `v`.
fn step<'a>(v: &'a Value, id: &str) -> &'a Value {
    let data = v["data"].as_object().expect("data");
    assert_eq!(data.len(), 1, "{v}");
    let (master, run) = data.iter().next().expect("the master's run");
    assert!(master.ends_with("_master"), "{master}");
    run.as_object()
        .expect("states")
        .iter()
        .find(|(tag, _)| tag.split("_|-").nth(1) == Some(id))
        .map(|(_, ret)| ret)
        .unwrap_or_else(|| panic!("no step {id} in {v}"))
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[test]
fn three_tiers_with_requisites_failures_test_mode_and_events() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let salt = fleet.path("salt");
    let out = fleet.path("out");
    tree(&salt, &out);
    std::fs::create_dir_all(&out).expect("out dir");
    let _master = fleet.start_master(&format!("file_roots:\n  base:\n    - {}\n", salt.display()));
    let ids = ["db1", "app1", "web1"];
    let _minions: Vec<_> = ids.iter().map(|id| fleet.start_minion(id, "")).collect();
    for id in ids {
        fleet.accept(id);
    }

    // test=True: the jobs are published with test=True, nothing changes,
    // steps that would change say so with result None.
    let (v, code) = orch_json(&fleet, &["state.orchestrate", "orch.deploy", "test=True"]);
    assert_eq!(code, 0, "{v}");
    let db = step(&v, "db");
    assert_eq!(db["result"], Value::Null, "{db}");
    assert_eq!(
        db["comment"], "States ran successfully. Updating db1.",
        "{db}"
    );
    let minion_states = db["changes"]["ret"]["db1"]
        .as_object()
        .expect("db1's states");
    assert!(
        minion_states.values().all(|s| s["result"].is_null()),
        "db1 ran without test=True: {db}"
    );
    assert_eq!(
        step(&v, "echo")["comment"],
        "Function test.echo would be executed on target *"
    );
    assert_eq!(lines(&out.join("db1-db")), 0, "test=True changed db1");

    // The real run: db, then app, then web, then the function on all.
    let events = fleet.watch_events();
    let (v, code) = orch_json(
        &fleet,
        &[
            "state.orch",
            "orch.deploy",
            r#"pillar={"word": "deployed"}"#,
        ],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["outputter"], "highstate");
    assert_eq!(v["retcode"], 0);
    let (db, app, web, echo) = (
        step(&v, "db"),
        step(&v, "app"),
        step(&v, "web"),
        step(&v, "echo"),
    );
    assert_eq!(db["result"], true, "{db}");
    assert_eq!(db["comment"], "States ran successfully. Updating db1.");
    assert_eq!(db["changes"]["out"], "highstate");
    assert_eq!(app["comment"], "States ran successfully. Updating app1.");
    assert_eq!(web["comment"], "States ran successfully. Updating web1.");
    let runs: Vec<u64> = [db, app, web, echo]
        .iter()
        .map(|s| s["__run_num__"].as_u64().unwrap())
        .collect();
    assert!(runs.windows(2).all(|w| w[0] < w[1]), "order {runs:?}");
    assert_eq!(echo["result"], true, "{echo}");
    assert_eq!(
        echo["comment"],
        "Function ran successfully. Function test.echo ran on app1, db1, web1."
    );
    assert_eq!(echo["changes"]["ret"]["web1"], "deployed");
    // batch: 1 ran the step on one minion at a time, each its own job.
    let batched = step(&v, "batched");
    assert_eq!(
        batched["comment"], "States ran successfully. Updating app1, web1.",
        "{batched}"
    );
    let jobs = fleet.cli("halite-run", &["jobs.list_jobs", "--out", "json"]);
    let jobs: Value = serde_json::from_slice(&jobs.stdout).expect("jobs JSON");
    let targets: Vec<&str> = jobs
        .as_object()
        .unwrap()
        .values()
        .filter(|j| {
            j["Function"] == "state.sls" && j["Arguments"][0] == "db" && j["Target-type"] == "list"
        })
        .filter_map(|j| j["Target"].as_str())
        .collect();
    assert!(
        targets.contains(&"app1") && targets.contains(&"web1"),
        "one job per minion: {targets:?}"
    );
    for (id, tier) in [
        ("db1", "db"),
        ("app1", "app"),
        ("web1", "web"),
        ("app1", "db"),
        ("web1", "db"),
    ] {
        assert_eq!(
            lines(&out.join(format!("{id}-{tier}"))),
            1,
            "{id} did not run {tier}"
        );
    }
    assert!(
        db["__jid__"].as_str().is_some_and(|j| j.len() == 20),
        "{db}"
    );
    // The run's events on the master's bus: new, one args per published
    // step, ret with the whole return.
    let events = events.stop();
    let tag_of = |suffix: &str| {
        events
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .filter(|(tag, _)| tag.starts_with("salt/run/") && tag.ends_with(suffix))
            .map(|(tag, data)| {
                (
                    tag.to_string(),
                    serde_json::from_str::<Value>(data).unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    let new = tag_of("/new");
    assert_eq!(new.len(), 1, "{events}");
    assert_eq!(new[0].1["fun"], "runner.state.orchestrate");
    let jid = new[0].1["jid"].as_str().unwrap().to_string();
    assert_eq!(tag_of("/args").len(), 5, "{events}");
    let ret = tag_of("/ret");
    assert_eq!(ret.len(), 1, "{events}");
    assert_eq!(ret[0].0, format!("salt/run/{jid}/ret"));
    assert_eq!(ret[0].1["success"], true);
    assert_eq!(ret[0].1["return"]["retcode"], 0);

    // The text output is Salt's orchestrate outputter: the master's run,
    // each step's minions indented under it.
    let text = fleet.cli("halite-run", &["state.orchestrate", "orch.deploy"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("_master:\n"), "{text}");
    assert!(text.contains("    Function: salt.state"), "{text}");
    assert!(
        text.contains("     Comment: States ran successfully. Updating db1."),
        "{text}"
    );
    assert!(text.contains("              db1:\n"), "{text}");
    assert!(text.contains("Summary for "), "{text}");

    // A failing step stops what requires it; fail_minions and allow_fail
    // tolerate it; onfail runs.
    let before = lines(&out.join("app1-app"));
    let (v, code) = orch_json(&fleet, &["state.orchestrate", "orch.failing"]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["retcode"], 1);
    let db = step(&v, "db");
    assert_eq!(db["result"], false, "{db}");
    assert_eq!(db["comment"], "Run failed on minions: db1", "{db}");
    let app = step(&v, "app");
    assert_eq!(app["result"], false, "{app}");
    assert!(
        app["comment"]
            .as_str()
            .unwrap()
            .starts_with("One or more requisite failed"),
        "{app}"
    );
    assert_eq!(
        lines(&out.join("app1-app")),
        before,
        "app ran after db failed"
    );
    let tolerated = step(&v, "tolerated");
    assert_eq!(tolerated["result"], true, "{tolerated}");
    assert_eq!(
        tolerated["comment"],
        "States ran successfully. Updating db1."
    );
    assert_eq!(step(&v, "allowed")["result"], true);
    assert_eq!(step(&v, "notify")["result"], true);
    assert_eq!(step(&v, "notify")["changes"]["ret"]["web1"], "db failed");

    // ssh is refused with a message saying what to do.
    let (v, code) = orch_json(&fleet, &["state.orchestrate", "orch.ssh"]);
    assert_eq!(code, 1);
    assert!(
        step(&v, "nope")["comment"]
            .as_str()
            .unwrap()
            .contains("no salt-ssh"),
        "{v}"
    );

    // wait_for_event: the run blocks until the test sends the event.
    let waiting = Command::new(bin("halite-run"))
        .arg("-c")
        .arg(fleet.master_dir())
        .args(["state.orchestrate", "orch.wait", "--out", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("halite-run");
    // Another id and another tag do not end the wait; web1's event does.
    // The first sends go until the orchestration listens (it subscribes
    // when the step starts, as Salt's does).
    let mut waiting = waiting;
    let sent = wait_for(Duration::from_secs(30), || {
        let o = fleet.cli(
            "halite-run",
            &["event.send", "halite/test/other", r#"data={"id": "web1"}"#],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let o = fleet.cli(
            "halite-run",
            &[
                "event.send",
                "halite/test/ready/db1",
                r#"data={"id": "db1"}"#,
            ],
        );
        assert!(o.status.success());
        let o = fleet.cli(
            "halite-run",
            &[
                "event.send",
                "halite/test/ready/web1",
                r#"data={"id": "web1"}"#,
            ],
        );
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "True");
        matches!(waiting.try_wait(), Ok(Some(_)))
    });
    assert!(sent, "the orchestration never saw the event");
    let output = waiting.wait_with_output().expect("output");
    let v: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let wait = step(&v, "wait");
    assert_eq!(wait["result"], true, "{wait}");
    assert_eq!(wait["changes"]["minions_seen"], serde_json::json!(["web1"]));
    assert!(wait["comment"]
        .as_str()
        .unwrap()
        .starts_with("All events seen in "));
    assert_eq!(step(&v, "after")["result"], true);
}

/// `halite-run <fun> ... --out json` as JSON.
fn run_json(fleet: &Fleet, args: &[&str]) -> Value {
    let mut full = args.to_vec();
    full.extend(["--out", "json"]);
    let out = fleet.cli("halite-run", &full);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[test]
fn runners_beside_orchestration() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let salt = fleet.path("salt");
    write(&salt.join("top.sls"), "base: {}\n");
    write(&salt.join("files/motd"), "hi\n");
    write(
        &salt.join("orch/runners.sls"),
        r#"files:
  salt.runner:
    - name: fileserver.file_list

both:
  salt.parallel_runners:
    - runners:
        up:
          name: manage.up
          timeout: 2
        dirs:
          name: fileserver.dir_list
    - require:
      - salt: files
"#,
    );
    let pillar = fleet.path("pillar");
    write(&pillar.join("top.sls"), "base:\n  web1:\n    - web\n");
    write(&pillar.join("web.sls"), "role: web\n");
    let _master = fleet.start_master(&format!(
        "file_roots:\n  base:\n    - {}\npillar_roots:\n  base:\n    - {}\n",
        salt.display(),
        pillar.display()
    ));
    let _web1 = fleet.start_minion("web1", "");
    fleet.accept("web1");
    // A key accepted for a minion that is not running.
    let _gone = {
        let mut d = fleet.start_minion("gone1", "");
        fleet.accept("gone1");
        d.kill();
        d
    };

    assert_eq!(
        run_json(&fleet, &["fileserver.file_list"]),
        serde_json::json!(["files/motd", "orch/runners.sls", "top.sls"])
    );
    assert_eq!(
        run_json(&fleet, &["fileserver.dir_list"]),
        serde_json::json!(["files", "orch"])
    );
    assert_eq!(
        run_json(&fleet, &["manage.present", "-t", "3"]),
        serde_json::json!(["web1"])
    );
    assert_eq!(
        run_json(&fleet, &["manage.not_present", "-t", "3"]),
        serde_json::json!(["gone1"])
    );
    let versions = run_json(&fleet, &["manage.versions", "-t", "3"]);
    assert_eq!(versions["Up to date"]["web1"], "3008.5", "{versions}");
    assert_eq!(versions["Master"], "3008.5");
    let grains = run_json(&fleet, &["cache.grains", "tgt=web1"]);
    assert_eq!(grains["web1"]["id"], "web1", "{grains}");
    // The master caches the pillar it compiles for a job.
    let (_, code) = fleet.halite_json(&["web1", "pillar.items"]);
    assert_eq!(code, 0);
    assert_eq!(
        run_json(&fleet, &["cache.pillar", "tgt=web1"]),
        serde_json::json!({"web1": {"role": "web"}})
    );
    assert_eq!(run_json(&fleet, &["cache.mine"]), serde_json::json!({}));
    assert_eq!(
        run_json(&fleet, &["salt.cmd", "test.echo", "from the master"]),
        "from the master"
    );

    // A job in the cache: print_job and exit_success read it.
    let (_, code) = fleet.halite(&["web1", "test.echo", "x"]);
    assert_eq!(code, 0);
    let jobs = run_json(&fleet, &["jobs.list_jobs"]);
    let jid = jobs
        .as_object()
        .unwrap()
        .iter()
        .find(|(_, j)| j["Function"] == "test.echo")
        .map(|(jid, _)| jid.clone())
        .expect("the test.echo job");
    let job = run_json(&fleet, &["jobs.print_job", &jid]);
    assert_eq!(job[&jid]["Function"], "test.echo", "{job}");
    assert_eq!(job[&jid]["Result"]["web1"]["return"], "x", "{job}");
    assert_eq!(
        run_json(&fleet, &["jobs.exit_success", &jid]),
        serde_json::json!({"web1": true})
    );

    // salt.runner and salt.parallel_runners in an orchestration.
    let (v, code) = orch_json(&fleet, &["state.orchestrate", "orch.runners"]);
    assert_eq!(code, 0, "{v}");
    let files = step(&v, "files");
    assert_eq!(
        files["comment"],
        "Runner function 'fileserver.file_list' executed."
    );
    assert_eq!(files["changes"]["return"][0], "files/motd");
    let both = step(&v, "both");
    assert_eq!(
        both["comment"], "All runner functions executed successfully.",
        "{both}"
    );
    assert_eq!(both["changes"]["up"]["return"], serde_json::json!(["web1"]));

    // Errors say what to do and exit non-zero.
    let out = fleet.cli("halite-run", &["event.send"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("event.send needs a tag"));
    let out = fleet.cli("halite-run", &["state.orchestrate", "orch.nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("No matching sls found for 'orch.nope'"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The events of an orchestration on the master's bus, as Salt 3008.5
/// fires them (recorded with a salt-master, `state_events: True` and a
/// state with `fire_event: True`; docs/orchestration.md): the run's
/// `new`, one `args` per published step (Salt's keys), each step's job
/// events (`new`, the minion's `prog` and `ret`), the run's `ret`; and no
/// `salt/state_result/<run jid>/...` nor `salt/job/<run jid>/prog/...`
/// for the orchestration's own states, which Salt's master never fires.
#[test]
fn orchestration_events_are_the_ones_salt_fires() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let salt = fleet.path("salt");
    write(
        &salt.join("orch/events.sls"),
        "db:\n  salt.function:\n    - name: test.echo\n    - tgt: web1\n    - arg:\n      - hi\n\
         app:\n  salt.state:\n    - tgt: web1\n    - sls: app\n    - require:\n      - salt: db\n\
         note:\n  test.succeed_with_changes:\n    - fire_event: True\n    - require:\n      - salt: app\n",
    );
    write(
        &salt.join("app.sls"),
        "a:\n  test.succeed_without_changes\n",
    );
    let _master = fleet.start_master(&format!(
        "file_roots:\n  base:\n    - {}\nstate_events: True\nauto_accept: True\n",
        salt.display()
    ));
    let _web = fleet.start_minion("web1", "");
    fleet.wait_responding("web1");
    let events = fleet.watch_events();
    let (v, code) = orch_json(&fleet, &["state.orchestrate", "orch.events"]);
    assert_eq!(code, 0, "{v}");
    let all: Vec<(String, Value)> = events
        .stop()
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(t, d)| (t.to_string(), serde_json::from_str(d).unwrap()))
        .filter(|(t, _)| t.starts_with("salt/run/") || t.starts_with("salt/job/"))
        .filter(|(t, _)| !t.ends_with("/publish"))
        .collect();
    // The orchestration's events: those of its run and of the jobs of its
    // steps. Other jobs' events may fall in the window (the minion's own
    // start-up `saltutil.refresh_pillar` returns when it returns).
    let jid = all
        .iter()
        .find(|(t, _)| t.starts_with("salt/run/") && t.ends_with("/new"))
        .and_then(|(_, d)| d["jid"].as_str())
        .unwrap_or_else(|| panic!("no salt/run/<jid>/new event: {all:?}"))
        .to_string();
    let db_jid = step(&v, "db")["__jid__"].as_str().unwrap().to_string();
    let app_jid = step(&v, "app")["__jid__"].as_str().unwrap().to_string();
    let seen: Vec<(String, Value)> = all
        .iter()
        .filter(|(t, _)| {
            [&jid, &db_jid, &app_jid]
                .iter()
                .any(|j| t.contains(j.as_str()))
        })
        .cloned()
        .collect();
    let (new_tag, new) = &seen[0];
    assert_eq!(new["jid"], jid);
    assert_eq!(new_tag, &format!("salt/run/{jid}/new"));
    assert_eq!(
        new["fun_args"],
        serde_json::json!(["orch.events", {"orchestration_jid": jid}])
    );
    assert_eq!(new["fun"], "runner.state.orchestrate");
    let tags: Vec<String> = seen
        .iter()
        .map(|(t, _)| {
            t.replace(&jid, "RUN")
                .replace(&db_jid, "DB")
                .replace(&app_jid, "APP")
        })
        .collect();
    assert_eq!(
        tags,
        [
            "salt/run/RUN/new",
            "salt/run/RUN/args",
            "salt/job/DB/new",
            "salt/job/DB/ret/web1",
            "salt/run/RUN/args",
            "salt/job/APP/new",
            "salt/job/APP/prog/web1/0",
            "salt/job/APP/ret/web1",
            "salt/run/RUN/ret",
        ],
        "{seen:?}"
    );
    let keys = |d: &Value| {
        let mut k: Vec<String> = d["args"].as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    let (function, state) = (&seen[1].1, &seen[4].1);
    assert_eq!(function["type"], "function");
    assert_eq!(function["name"], "test.echo");
    assert_eq!(function["tgt"], "web1");
    assert_eq!(
        keys(function),
        [
            "_cmd_meta",
            "arg",
            "expect_minions",
            "kwarg",
            "ret",
            "ssh",
            "tgt_type",
            "timeout"
        ]
    );
    assert_eq!(function["args"]["arg"], serde_json::json!(["hi"]));
    assert_eq!(function["args"]["expect_minions"], false);
    assert_eq!(state["type"], "state");
    assert_eq!(
        keys(state),
        [
            "arg",
            "expect_minions",
            "kwarg",
            "ret",
            "ssh",
            "tgt_type",
            "timeout"
        ]
    );
    assert_eq!(state["args"]["arg"], serde_json::json!(["app"]));
    assert_eq!(state["args"]["expect_minions"], true);
    assert_eq!(state["args"]["kwarg"]["queue"], false);
    assert_eq!(state["args"]["kwarg"]["concurrent"], false);
    let ret = &seen[8].1;
    assert_eq!(ret["success"], true);
    assert_eq!(ret["fun_args"], new["fun_args"]);
    assert_eq!(ret["return"]["retcode"], 0);
}
