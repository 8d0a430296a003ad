//! `schedule.*` with no minion running (`halite-call --local`): with
//! `offline=True` the functions edit `<config_dir>/minion.d/_schedule.conf`
//! as Salt's do; without it they find nobody to take the change. And
//! `saltutil.clear_cache` empties the cachedir but what halite keeps.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use halite_modules::{Args, Host};
use serde_json::{json, Map, Value};

fn call(host: &Host, fun: &str, positional: Vec<Value>, kwargs: Value) -> Value {
    let kwargs: Map<String, Value> = kwargs.as_object().cloned().unwrap_or_default();
    host.call(fun, &Args { positional, kwargs }).unwrap()
}

#[test]
fn offline_edits_go_to_the_saved_schedule_file() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("minion");
    let host = common::host_with(
        json!({"id": "m1", "conf_file": conf.display().to_string()}),
        json!({}),
    );
    let added = call(
        &host,
        "schedule.add",
        vec![json!("job1")],
        json!({"function": "test.ping", "seconds": 3600, "offline": true}),
    );
    assert_eq!(
        added,
        json!({"comment": "Added job: job1 to schedule.", "result": true, "changes": {"job1": "added"}})
    );
    let saved = std::fs::read_to_string(dir.path().join("minion.d/_schedule.conf")).unwrap();
    assert!(saved.contains("function: test.ping"), "{saved}");
    // Salt 3008.5's listing of the same file.
    assert_eq!(
        call(&host, "schedule.list", vec![], json!({"offline": true})),
        json!("schedule:\n  job1:\n    enabled: true\n    function: test.ping\n    jid_include: true\n    maxrunning: 1\n    name: job1\n    saved: true\n    seconds: 3600\n")
    );
    let again = call(
        &host,
        "schedule.add",
        vec![json!("job1")],
        json!({"function": "test.ping", "seconds": 5, "offline": true}),
    );
    assert_eq!(again["comment"], "Job job1 already exists in schedule.");
    let modified = call(
        &host,
        "schedule.modify",
        vec![json!("job1")],
        json!({"seconds": 60, "offline": true}),
    );
    assert_eq!(modified["comment"], "Modified job: job1 in schedule.");
    assert_eq!(modified["changes"]["job1"]["new"]["seconds"], 60);
    assert_eq!(modified["changes"]["job1"]["old"]["seconds"], 3600);
    let bad = call(
        &host,
        "schedule.add",
        vec![json!("job2")],
        json!({"function": "test.ping", "seconds": 5, "cron": "* * * * *", "offline": true}),
    );
    assert_eq!(bad["result"], false);
    let deleted = call(
        &host,
        "schedule.delete",
        vec![json!("job1")],
        json!({"offline": true}),
    );
    assert_eq!(deleted["comment"], "Deleted Job job1 from schedule.");
    assert_eq!(
        call(&host, "schedule.list", vec![], json!({"offline": true})),
        json!("schedule: {}\n")
    );
    // No minion and not offline: nobody takes the change, as Salt's.
    let failed = call(
        &host,
        "schedule.add",
        vec![json!("job3")],
        json!({"function": "test.ping", "seconds": 5}),
    );
    assert_eq!(failed["comment"], "Failed to add job job3 to schedule.");
    assert_eq!(
        call(&host, "saltutil.running", vec![], json!({})),
        json!([])
    );
    assert_eq!(
        call(
            &host,
            "saltutil.kill_job",
            vec![json!("20260101000000000000")],
            json!({})
        ),
        json!("")
    );
}

#[test]
fn clear_cache_keeps_unacknowledged_returns_and_the_replay_guard() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path();
    for f in [
        "files/base/top.sls",
        "extmods/modules/x.py",
        "returns/20260101000000000000",
        "publications",
    ] {
        let path = cache.join(f);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "x").unwrap();
    }
    let host = common::host_with(
        json!({"id": "m1", "cachedir": cache.display().to_string()}),
        json!({}),
    );
    assert_eq!(
        call(&host, "saltutil.clear_cache", vec![], json!({})),
        json!(true)
    );
    assert!(!cache.join("files/base/top.sls").exists());
    assert!(!cache.join("extmods/modules/x.py").exists());
    assert!(cache.join("extmods/modules").is_dir());
    assert!(cache.join("returns/20260101000000000000").exists());
    assert!(cache.join("publications").exists());
}

/// The functions Salt 3008.5 answers without a minion, with its returns
/// (recorded with `salt-call --local schedule.*`).
#[test]
fn reload_postpone_skip_move_copy_answer_as_salt_without_a_minion() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("minion");
    let host = common::host_with(
        json!({"id": "m1", "conf_file": conf.display().to_string()}),
        json!({}),
    );
    let t = |s: &str| json!(s);
    assert_eq!(
        call(&host, "schedule.reload", vec![], json!({})),
        json!({"comment": [], "result": true})
    );
    assert_eq!(
        call(
            &host,
            "schedule.postpone_job",
            vec![
                t("job1"),
                t("2026-11-26T10:00:00"),
                t("2026-11-26T11:00:00")
            ],
            json!({})
        ),
        json!({"comment": "Job job1 does not exist.", "result": false})
    );
    assert_eq!(
        call(
            &host,
            "schedule.postpone_job",
            vec![t("job1"), t("bad"), t("2026-11-26T11:00:00")],
            json!({})
        ),
        json!({"comment": "Date string could not be parsed.", "result": false})
    );
    assert_eq!(
        call(
            &host,
            "schedule.skip_job",
            vec![t("job1"), t("2026-11-26T10:00:00")],
            json!({})
        ),
        json!({"comment": "Job job1 does not exist.", "result": false})
    );
    for (fun, past) in [("move", "moved"), ("copy", "copied")] {
        assert_eq!(
            call(
                &host,
                &format!("schedule.{fun}"),
                vec![t("job1"), t("other")],
                json!({})
            ),
            json!({"comment": "Job job1 does not exist.", "result": false})
        );
        assert_eq!(
            call(
                &host,
                &format!("schedule.{fun}"),
                vec![t("job1"), t("other")],
                json!({"test": true})
            ),
            json!({"comment": format!("Job: job1 would be {past} from schedule."), "result": true})
        );
    }
}
