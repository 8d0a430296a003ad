//! Issue 22's scheduler and the minion side of saltutil, with a real
//! master and minion on loopback: scheduled jobs land in the master's job
//! cache under their own jid, `schedule.*` edits the running minion's
//! scheduler, pillar schedules and `refresh_pillar` reach the minion and
//! the master's pillar cache, a scheduled `state.apply` meets the
//! state-run lock, and `kill_job` stops a running job and its commands.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};

fn run_json(fleet: &Fleet, args: &[&str]) -> Value {
    let mut full = args.to_vec();
    full.extend(["--out", "json"]);
    let out = fleet.cli("halite-run", &full);
    serde_json::from_slice(&out.stdout).unwrap_or_default()
}

/// The jobs of the job cache that ran `fun` on target `tgt`: jid -> listing.
fn jobs_of(fleet: &Fleet, fun: &str, tgt: &str) -> Vec<(String, Value)> {
    let jobs = run_json(fleet, &["jobs.list_jobs"]);
    jobs.as_object()
        .map(|m| {
            m.iter()
                .filter(|(_, j)| j["Function"] == fun && j["Target"] == tgt)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_scheduled_job_lands_in_the_job_cache_with_its_own_jid() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let marker = fleet.path("ticks");
    let _master = fleet.start_master("auto_accept: True");
    let minion = fleet.start_minion(
        "sched",
        &format!(
            "schedule:\n  tick:\n    function: cmd.run\n    args: ['echo tick >> {}']\n    seconds: 1\n  quiet:\n    function: test.arg\n    args: [quiet]\n    seconds: 1\n    return_job: False\n",
            marker.display()
        ),
    );
    fleet.wait_responding("sched");
    assert!(
        wait_for(Duration::from_secs(30), || std::fs::read_to_string(&marker)
            .is_ok_and(|t| t.lines().count() >= 2)),
        "the scheduled cmd.run never ran twice:\n{}",
        minion.log_text()
    );
    let mut found = Vec::new();
    assert!(
        wait_for(Duration::from_secs(20), || {
            found = jobs_of(&fleet, "cmd.run", "sched");
            found.len() >= 2
        }),
        "no scheduled job in the job cache: {}",
        run_json(&fleet, &["jobs.list_jobs"])
    );
    // Each run has a jid of its own, targeted at the minion, with its args.
    let (jid, listing) = &found[0];
    assert_ne!(found[0].0, found[1].0);
    assert_eq!(
        listing["Arguments"],
        json!([format!("echo tick >> {}", marker.display())])
    );
    assert!(
        wait_for(Duration::from_secs(10), || run_json(
            &fleet,
            &["jobs.lookup_jid", jid]
        ) == json!({"sched": ""})),
        "{}",
        run_json(&fleet, &["jobs.lookup_jid", jid])
    );
    // return_job: False keeps the return on the minion: nothing in the cache.
    assert!(jobs_of(&fleet, "test.arg", "sched").is_empty());
}

#[test]
fn schedule_functions_edit_the_running_minions_scheduler() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let marker = fleet.path("added");
    let _master = fleet.start_master("auto_accept: True");
    let minion = fleet.start_minion("edit", "");
    fleet.wait_responding("edit");

    let (rets, code) = fleet.halite_json(&[
        "edit",
        "schedule.add",
        "job1",
        "function=cmd.run",
        &format!("job_args=['touch {}']", marker.display()),
        "seconds=1",
    ]);
    assert_eq!(
        (rets["edit"].clone(), code),
        (
            json!({"comment": "Added job: job1 to schedule.", "result": true, "changes": {"job1": "added"}}),
            0
        )
    );
    assert!(
        wait_for(Duration::from_secs(20), || marker.exists()),
        "the added job never ran:\n{}",
        minion.log_text()
    );
    let (rets, _) = fleet.halite_json(&["edit", "schedule.list"]);
    let listed = rets["edit"].as_str().unwrap_or_default().to_string();
    assert!(listed.starts_with("schedule:\n  job1:\n"), "{listed}");
    assert!(listed.contains("    function: cmd.run\n"), "{listed}");
    assert!(listed.contains("    saved: true\n"), "{listed}");
    // Added jobs persist, as Salt's, to minion.d/_schedule.conf.
    let saved = std::fs::read_to_string(fleet.path("minion-edit/minion.d/_schedule.conf")).unwrap();
    assert!(saved.contains("job1"), "{saved}");

    let (rets, _) = fleet.halite_json(&["edit", "schedule.is_enabled", "job1"]);
    assert_eq!(rets["edit"]["function"], "cmd.run");
    let (rets, _) = fleet.halite_json(&["edit", "schedule.show_next_fire_time", "job1"]);
    assert!(rets["edit"]["next_fire_time"].is_string(), "{rets:?}");
    // skip_job and postpone_job reach the running scheduler (its
    // skip_explicit/run_explicit), reload merges the saved file.
    let (rets, _) =
        fleet.halite_json(&["edit", "schedule.skip_job", "job1", "2030-01-01T10:00:00"]);
    assert_eq!(
        rets["edit"],
        json!({"comment": "Added Skip Job job1 in schedule.", "result": true})
    );
    let (rets, _) = fleet.halite_json(&[
        "edit",
        "schedule.postpone_job",
        "job1",
        "2030-01-01T11:00:00",
        "2030-01-01T12:00:00",
    ]);
    assert_eq!(
        rets["edit"],
        json!({"comment": "Postponed Job job1 in schedule.", "result": true})
    );
    let (rets, _) = fleet.halite_json(&["edit", "schedule.reload"]);
    assert_eq!(
        rets["edit"],
        json!({"comment": ["Reloaded schedule on minion from schedule.conf."], "result": true})
    );
    let (rets, _) = fleet.halite_json(&["edit", "schedule.disable_job", "job1"]);
    assert_eq!(rets["edit"]["comment"], "Disabled Job job1 in schedule.");
    let (rets, _) = fleet.halite_json(&["edit", "schedule.list", "show_disabled=False"]);
    assert_eq!(rets["edit"], "schedule: {}\n");
    let (rets, _) = fleet.halite_json(&["edit", "schedule.delete", "job1"]);
    assert_eq!(rets["edit"]["comment"], "Deleted Job job1 from schedule.");
    let (rets, _) = fleet.halite_json(&["edit", "schedule.list"]);
    assert_eq!(rets["edit"], "schedule: {}\n");
    let (rets, _) = fleet.halite_json(&["edit", "schedule.delete", "job1"]);
    assert_eq!(rets["edit"]["comment"], "Job job1 does not exist.");
}

#[test]
fn pillar_schedules_and_refresh_pillar_reach_the_minion_and_the_master() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let pillar = fleet.path("pillar");
    std::fs::create_dir_all(&pillar).unwrap();
    let marker = fleet.path("from-pillar");
    std::fs::write(pillar.join("top.sls"), "base:\n  '*':\n    - data\n").unwrap();
    let data = |role: &str| {
        format!(
            "role: {role}\nschedule:\n  touch:\n    function: file.touch\n    args: ['{}']\n    seconds: 1\n",
            marker.display()
        )
    };
    std::fs::write(pillar.join("data.sls"), data("old")).unwrap();
    let _master = fleet.start_master(&format!(
        "auto_accept: True\npillar_roots:\n  base:\n    - {}",
        pillar.display()
    ));
    let minion = fleet.start_minion("pil", "");
    fleet.wait_responding("pil");
    // The minion asked for its pillar when it connected: its schedule runs
    // and -I targets it with no job having compiled its pillar.
    assert!(
        wait_for(Duration::from_secs(20), || marker.exists()),
        "the pillar's schedule item never ran:\n{}",
        minion.log_text()
    );
    let (rets, _) = fleet.halite_json(&["-I", "role:old", "test.ping"]);
    assert_eq!(rets.get("pil"), Some(&json!(true)));

    std::fs::write(pillar.join("data.sls"), data("new")).unwrap();
    let (rets, _) = fleet.halite_json(&["pil", "saltutil.refresh_pillar"]);
    assert_eq!(rets.get("pil"), Some(&json!(true)));
    let (rets, _) = fleet.halite_json(&["pil", "pillar.get", "role", "unmask=True"]);
    assert_eq!(rets.get("pil"), Some(&json!("new")));
    let (rets, _) = fleet.halite_json(&["-I", "role:new", "test.ping"]);
    assert_eq!(rets.get("pil"), Some(&json!(true)));
    let (rets, _) = fleet.halite_json(&["-I", "role:old", "test.ping"]);
    assert!(rets.is_empty(), "{rets:?}");
}

#[test]
fn a_scheduled_state_apply_is_refused_while_another_state_run_holds_the_lock() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let roots = fleet.path("roots");
    std::fs::create_dir_all(&roots).unwrap();
    std::fs::write(
        roots.join("slow.sls"),
        "slow:\n  cmd.run:\n    - name: sleep 6\n",
    )
    .unwrap();
    std::fs::write(
        roots.join("quick.sls"),
        "quick:\n  test.succeed_without_changes\n",
    )
    .unwrap();
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base:\n    - {}",
        roots.display()
    ));
    let minion = fleet.start_minion(
        "lock",
        "schedule:\n  hs:\n    function: state.apply\n    args: [quick]\n    seconds: 1\n",
    );
    fleet.wait_responding("lock");
    let (text, code) = fleet.halite(&["lock", "state.sls", "slow", "--async"]);
    assert_eq!(code, 0, "{text}");
    let refused = |fleet: &Fleet| {
        jobs_of(fleet, "state.apply", "lock")
            .iter()
            .any(|(jid, _)| {
                run_json(fleet, &["jobs.lookup_jid", jid])["lock"]
                    .to_string()
                    .contains("is running as PID")
            })
    };
    assert!(
        wait_for(Duration::from_secs(30), || refused(&fleet)),
        "no scheduled state.apply was refused by the state-run lock:\n{}",
        minion.log_text()
    );
    // And one ran through the master's compile: its state's result.
    assert!(wait_for(Duration::from_secs(30), || {
        jobs_of(&fleet, "state.apply", "lock")
            .iter()
            .any(|(jid, _)| {
                run_json(&fleet, &["jobs.lookup_jid", jid])["lock"]
                    .to_string()
                    .contains("test_|-quick_|-quick_|-succeed_without_changes")
            })
    }));
}

/// Whether a process runs with exactly this command line.
fn process_running(cmdline: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").trim() == cmdline)
    })
}

#[test]
fn kill_job_stops_a_running_job_and_its_commands() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let _master = fleet.start_master("auto_accept: True");
    let minion = fleet.start_minion("victim", "");
    fleet.wait_responding("victim");

    for (fun, arg, child) in [
        ("test.sleep", "300", None),
        ("cmd.run", "sleep 313", Some("sleep 313")),
    ] {
        let (text, code) = fleet.halite(&["victim", fun, arg, "--async"]);
        assert_eq!(code, 0, "{text}");
        let jid = text.trim().rsplit(' ').next().unwrap().to_string();
        let listed = |fleet: &Fleet| {
            let (rets, _) = fleet.halite_json(&["victim", "saltutil.running"]);
            rets["victim"]
                .as_array()
                .is_some_and(|jobs| jobs.iter().any(|j| j["jid"] == jid.as_str()))
        };
        assert!(
            wait_for(Duration::from_secs(20), || listed(&fleet)),
            "{fun} never listed as running:\n{}",
            minion.log_text()
        );
        let (rets, _) = fleet.halite_json(&["victim", "saltutil.find_job", &jid]);
        assert_eq!(rets["victim"]["fun"], fun);
        if let Some(child) = child {
            assert!(wait_for(Duration::from_secs(10), || process_running(child)));
        }
        let (rets, _) = fleet.halite_json(&["victim", "saltutil.kill_job", &jid]);
        let said = rets["victim"].as_str().unwrap_or_default().to_string();
        assert!(
            said.starts_with(&format!("Signal 9 sent to job {jid} at pid ")),
            "{said}"
        );
        // The job's return is the kill; it runs no more, nor does its command.
        assert!(
            wait_for(Duration::from_secs(20), || run_json(
                &fleet,
                &["jobs.lookup_jid", &jid]
            )["victim"]
                .as_str()
                .is_some_and(|r| r.contains("stopped by signal 9"))),
            "{}",
            run_json(&fleet, &["jobs.lookup_jid", &jid])
        );
        assert!(!listed(&fleet));
        if let Some(child) = child {
            assert!(!process_running(child), "{child} still runs");
        }
    }
    // term_all_jobs: every job but itself; is_running finds by function.
    let (text, _) = fleet.halite(&["victim", "test.sleep", "300", "--async"]);
    let jid = text.trim().rsplit(' ').next().unwrap().to_string();
    assert!(wait_for(Duration::from_secs(20), || {
        let (rets, _) = fleet.halite_json(&["victim", "saltutil.is_running", "test.sl*"]);
        rets["victim"]
            .as_array()
            .is_some_and(|j| j.len() == 1 && j[0]["jid"] == jid.as_str())
    }));
    let (rets, _) = fleet.halite_json(&["victim", "saltutil.term_all_jobs"]);
    let said = rets["victim"].as_array().cloned().unwrap_or_default();
    assert_eq!(said.len(), 1, "{rets:?}");
    assert!(said[0]
        .as_str()
        .unwrap()
        .starts_with(&format!("Signal 15 sent to job {jid} at pid ")));
    assert!(wait_for(Duration::from_secs(20), || run_json(
        &fleet,
        &["jobs.lookup_jid", &jid]
    )["victim"]
        .as_str()
        .is_some_and(|r| r.contains("stopped by signal 15"))));
    // A job that does not run: Salt's empty answer.
    let (rets, _) = fleet.halite_json(&["victim", "saltutil.kill_job", "20200101000000000000"]);
    assert_eq!(rets["victim"], "");
}
