//! The `alternatives` execution functions and states against the real
//! `update-alternatives`, with a throwaway link group (root only; removed
//! with `--remove-all` by a guard).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::process::Command;

use halite_modules::{Args, Host};
use halite_state::StateResult;
use serde_json::{json, Value};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

struct Group(String);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = Command::new("update-alternatives")
            .args(["--remove-all", &self.0])
            .output();
    }
}

fn host() -> Host {
    common::host_with(json!({}), json!({"os_family": "Debian"}))
}

fn state(host: &Host, fun: &str, name: &str, args: Value, test: bool) -> StateResult {
    common::state(host, "alternatives", fun, name, args, test)
}

fn exec(host: &Host, fun: &str, positional: Vec<Value>) -> Value {
    host.call(
        fun,
        &Args {
            positional,
            kwargs: Default::default(),
        },
    )
    .unwrap_or_else(|e| panic!("{fun}: {e}"))
}

#[test]
fn alternatives_states_drive_real_update_alternatives() {
    if !is_root() || halite_modules::grains::hw::which("update-alternatives").is_none() {
        println!("skipped: needs root and update-alternatives");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let name = format!("halite-t-alt{:x}", nanos & 0xfffff);
    let _guard = Group(name.clone());
    let link = dir.path().join("link").display().to_string();
    let a = dir.path().join("a").display().to_string();
    let b = dir.path().join("b").display().to_string();
    std::fs::write(&a, "a").expect("a");
    std::fs::write(&b, "b").expect("b");
    let host = host();
    let install = |path: &str, prio: i64, test: bool| {
        state(
            &host,
            "install",
            &name,
            json!({"link": link, "path": path, "priority": prio}),
            test,
        )
    };

    let r = install(&a, 10, true);
    assert_eq!(r.result, None);
    assert_eq!(
        r.comment,
        format!("Alternative will be set for {name} to {a} with priority 10")
    );
    let r = install(&a, 10, false);
    assert_eq!(r.result, Some(true), "{r:?}");
    assert_eq!(
        r.comment,
        format!("Alternative for {name} set to path {a} with priority 10")
    );
    assert_eq!(
        Value::Object(r.changes),
        json!({"name": name, "link": link, "path": a, "priority": 10})
    );
    assert_eq!(
        exec(&host, "alternatives.show_current", vec![json!(name)]),
        json!(a)
    );
    assert_eq!(
        exec(&host, "alternatives.show_link", vec![json!(name)]),
        json!(link)
    );
    let r = install(&b, 5, false);
    assert_eq!(
        r.comment,
        format!("Alternative {b} for {name} registered with priority 5 and not set to default")
    );
    let r = install(&b, 5, false);
    assert_eq!(
        r.comment,
        format!("Alternative {b} for {name} is already registered")
    );
    assert!(r.changes.is_empty());
    assert_eq!(
        exec(
            &host,
            "alternatives.check_exists",
            vec![json!(name), json!(b)]
        ),
        json!(true)
    );
    assert_eq!(
        exec(
            &host,
            "alternatives.check_installed",
            vec![json!(name), json!(b)]
        ),
        json!(false)
    );

    let r = state(&host, "set", &name, json!({"path": b}), false);
    assert_eq!(r.comment, format!("Alternative for {name} set to path {b}"));
    assert_eq!(Value::Object(r.changes), json!({"path": b}));
    let r = state(&host, "set", &name, json!({"path": b}), false);
    assert_eq!(
        r.comment,
        format!("Alternative for {name} already set to {b}")
    );
    let r = state(&host, "set", &name, json!({"path": "/nonexistent"}), false);
    assert_eq!(r.result, Some(false));
    assert_eq!(
        r.comment,
        format!("Alternative /nonexistent for {name} doesn't exist")
    );

    let r = state(&host, "auto", &name, json!({}), true);
    assert_eq!(r.comment, format!("{name} will be put in auto mode"));
    let r = state(&host, "auto", &name, json!({}), false);
    assert_eq!(r.result, Some(true));
    assert!(r.changes.contains_key("result"));
    assert_eq!(
        exec(&host, "alternatives.show_current", vec![json!(name)]),
        json!(a),
        "auto mode picks the highest priority"
    );
    let r = state(&host, "auto", &name, json!({}), false);
    assert_eq!(r.comment, format!("{name} already in auto mode"));

    let r = state(&host, "remove", &name, json!({"path": a}), false);
    assert_eq!(
        r.comment,
        format!("Alternative for {name} removed. Falling back to path {b}")
    );
    assert_eq!(Value::Object(r.changes), json!({"path": b}));
    let r = state(&host, "remove", &name, json!({"path": a}), false);
    assert_eq!(
        r.comment,
        format!("Alternative for {name} is set to it's default path {b}")
    );
    let r = state(&host, "remove", &name, json!({"path": b}), false);
    assert_eq!(r.comment, format!("Alternative for {name} removed"));
    let r = state(&host, "remove", &name, json!({"path": b}), false);
    assert_eq!(r.result, Some(false));
    assert_eq!(r.comment, format!("Alternative for {name} doesn't exist"));
}
