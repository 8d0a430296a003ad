//! Password ageing: the `shadow` execution module and `user.present`'s
//! `date`/`mindays`/`maxdays`/`inactdays`/`warndays`/`expire`, on a real
//! throwaway account through the real `chage` (root only). The expected
//! returns are what Salt 3008.5 gave for the same states on this host.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::process::Command;

use halite_modules::{Args, Host};
use halite_state::{LowChunk, StateCall, StateResult};
use serde_json::{json, Value};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

struct Account(String);

impl Drop for Account {
    fn drop(&mut self) {
        let _ = Command::new("userdel").args(["-f", &self.0]).output();
    }
}

fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("halite-t-{tag}{:x}", (nanos ^ std::process::id()) & 0xfffff)
}

fn host() -> Host {
    common::host()
}

fn present(host: &Host, name: &str, args: Value, test: bool) -> StateResult {
    let mut chunk = serde_json::Map::new();
    chunk.insert("state".into(), json!("user"));
    chunk.insert("name".into(), json!(name));
    chunk.insert("__id__".into(), json!(name));
    if let Value::Object(extra) = args {
        chunk.extend(extra);
    }
    chunk.insert("fun".into(), json!("present"));
    let chunk = LowChunk::from(chunk);
    let call = StateCall {
        chunk: &chunk,
        test,
        env: host,
        sfun: None,
        reqs: None,
    };
    host.states
        .get("user")
        .expect("user states")
        .call("present", &call)
        .unwrap_or_else(|e| panic!("user.present: {e}"))
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

fn shadow_line(name: &str) -> String {
    std::fs::read_to_string("/etc/shadow")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(&format!("{name}:")))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn user_present_applies_and_checks_password_ageing_like_salt() {
    if !is_root() {
        println!("skipped: needs root to create accounts and run chage");
        return;
    }
    let host = host();
    let name = unique("age");
    let _guard = Account(name.clone());
    let args = |mindays: i64, expire: i64| {
        json!({
            "createhome": false, "mindays": mindays, "maxdays": 90, "warndays": 5,
            "inactdays": 3, "expire": expire, "date": 19000,
        })
    };
    let r = present(&host, &name, args(1, 20000), false);
    assert_eq!(r.result, Some(true), "{r:?}");
    assert_eq!(r.comment, format!("New user {name} created"));
    for (key, value) in [
        ("date", 19000),
        ("mindays", 1),
        ("maxdays", 90),
        ("inactdays", 3),
        ("warndays", 5),
        ("expire", 20000),
    ] {
        assert_eq!(r.changes.get(key), Some(&json!(value)), "{key}");
    }
    assert!(shadow_line(&name).ends_with(":19000:1:90:5:3:20000:"));

    let r = present(&host, &name, args(1, 20000), false);
    assert_eq!(
        (r.result, r.comment.as_str()),
        (
            Some(true),
            format!("User {name} is present and up to date").as_str()
        )
    );
    assert!(r.changes.is_empty());

    let r = present(&host, &name, args(2, 21000), true);
    assert_eq!(r.result, None);
    assert_eq!(
        r.comment,
        "The following user attributes are set to be changed:\nmindays: 2\nexpire: 21000\n"
    );
    let r = present(&host, &name, args(2, 21000), false);
    assert_eq!(r.result, Some(true), "{r:?}");
    assert_eq!(r.comment, format!("Updated user {name}"));
    assert_eq!(Value::Object(r.changes), json!({"min": 2, "expire": 21000}));
    assert!(shadow_line(&name).ends_with(":19000:2:90:5:3:21000:"));

    // The exec functions beside it.
    let info = exec(&host, "shadow.info", vec![json!(name)]);
    assert_eq!(
        info,
        json!({"name": name, "passwd": "!", "lstchg": 19000, "min": 2, "max": 90,
               "warn": 5, "inact": 3, "expire": 21000})
    );
    assert_eq!(
        exec(&host, "shadow.set_maxdays", vec![json!(name), json!(30)]),
        json!(true)
    );
    assert_eq!(
        exec(&host, "shadow.set_expire", vec![json!(name), json!(-1)]),
        json!(true)
    );
    assert!(shadow_line(&name).ends_with(":19000:2:30:5:3::"));
    assert_eq!(
        exec(&host, "shadow.info", vec![json!(name)])["expire"],
        json!(-1)
    );
    assert_eq!(
        exec(
            &host,
            "shadow.set_mindays",
            vec![json!("halite-t-nosuchuser"), json!(1)]
        ),
        json!(false)
    );
    assert_eq!(
        exec(&host, "shadow.info", vec![json!("halite-t-nosuchuser")])["name"],
        json!("")
    );
}
