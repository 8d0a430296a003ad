//! `sysctl` state and execution functions against the real kernel: each
//! test moves its thread into a network namespace of its own, so setting
//! `net.ipv4.ip_forward` there changes nothing on the host.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use halite_modules::{Args, Host};
use halite_state::{LowChunk, StateCall, StateResult};
use serde_json::{json, Value};

const KEY: &str = "net.ipv4.ip_forward";

/// Moves this test's thread into a new network namespace; false (with
/// the reason printed) when that is not possible here.
fn private_netns() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: needs root to create a network namespace");
        return false;
    }
    // SAFETY: unshare affects only the calling thread's namespaces; the
    // commands this thread spawns inherit them.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        println!(
            "skipped: unshare(CLONE_NEWNET) is not permitted here: {}",
            std::io::Error::last_os_error()
        );
        return false;
    }
    true
}

fn host() -> Host {
    common::host()
}

fn present(host: &Host, name: &str, args: Value, test: bool) -> StateResult {
    let mut chunk = serde_json::Map::new();
    chunk.insert("state".into(), json!("sysctl"));
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
    match host
        .states
        .get("sysctl")
        .expect("sysctl")
        .call("present", &call)
    {
        Ok(r) => r,
        Err(e) => StateResult::fail(name, e.to_string()),
    }
}

fn exec(host: &Host, fun: &str, positional: Vec<Value>) -> Result<Value, String> {
    host.call(
        fun,
        &Args {
            positional,
            kwargs: Default::default(),
        },
    )
    .map_err(|e| e.to_string())
}

fn running() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward")
        .expect("read /proc/sys")
        .trim()
        .to_string()
}

#[test]
fn present_sets_persists_and_then_is_already_set() {
    if !private_netns() {
        return;
    }
    let host = host();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("sub/99-salt.conf");
    let cfg = json!(config.to_string_lossy());
    assert_eq!(running(), "0", "a fresh namespace does not forward");

    let t = present(&host, KEY, json!({"value": 1, "config": cfg}), true);
    assert_eq!(t.result, None);
    assert_eq!(
        t.comment,
        format!("Sysctl option {KEY} set to be changed to 1")
    );
    assert_eq!(running(), "0");
    assert!(!config.exists());

    let r = present(&host, KEY, json!({"value": 1, "config": cfg}), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, format!("Updated sysctl value {KEY} = 1"));
    assert_eq!(r.changes.get(KEY), Some(&json!(1)));
    assert_eq!(running(), "1");
    assert_eq!(
        std::fs::read_to_string(&config).expect("config written"),
        format!("#\n# Kernel sysctl configuration\n#\n{KEY} = 1\n")
    );

    let again = present(&host, KEY, json!({"value": 1, "config": cfg}), false);
    assert_eq!(
        again.comment,
        format!("Sysctl value {KEY} = 1 is already set")
    );
    assert!(again.changes.is_empty());
    let t = present(&host, KEY, json!({"value": 1, "config": cfg}), true);
    assert_eq!(t.result, Some(true));

    // The file says 1 but the kernel was reset: persist sets it again.
    std::fs::write("/proc/sys/net/ipv4/ip_forward", "0").expect("reset");
    let r = present(&host, KEY, json!({"value": 1, "config": cfg}), false);
    assert_eq!(r.comment, format!("Updated sysctl value {KEY} = 1"));
    assert_eq!(running(), "1");

    assert_eq!(exec(&host, "sysctl.get", vec![json!(KEY)]), Ok(json!("1")));
    let shown = exec(&host, "sysctl.show", vec![cfg.clone()]).expect("show");
    assert_eq!(shown, json!({KEY: "1"}));
    let all = exec(&host, "sysctl.show", vec![]).expect("show -a");
    assert_eq!(all[KEY], json!("1"));
    assert_eq!(
        exec(&host, "sysctl.assign", vec![json!(KEY), json!(0)]),
        Ok(json!({KEY: "0"}))
    );
    assert_eq!(running(), "0");
}

#[test]
fn bad_keys_and_values_fail_with_salts_messages() {
    if !private_netns() {
        return;
    }
    let host = host();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("sysctl.conf");
    let cfg = json!(config.to_string_lossy());
    let r = present(
        &host,
        "net.no.such",
        json!({"value": 1, "config": cfg}),
        false,
    );
    assert_eq!(r.result, Some(false));
    assert_eq!(
        r.comment,
        "Failed to set net.no.such to 1: sysctl net.no.such does not exist"
    );
    // As in Salt, the failed key stays in the file, and sysctl's error
    // text is what `get` answers for it.
    let t = present(
        &host,
        "net.no.such",
        json!({"value": 1, "config": cfg}),
        true,
    );
    assert_eq!(t.comment, "Sysctl option net.no.such would be changed to 1");
    let t = present(
        &host,
        "net.no.other",
        json!({"value": 1, "config": cfg}),
        true,
    );
    assert_eq!(
        t.comment,
        "Sysctl option net.no.other set to be changed to 1"
    );
    let r = present(&host, KEY, json!({"value": "abc", "config": cfg}), false);
    assert_eq!(
        r.comment,
        format!("Failed to set {KEY} to abc: sysctl -w failed: sysctl: setting key \"{KEY}\": Invalid argument")
    );
    assert_eq!(running(), "0");
    let r = present(&host, KEY, json!({"config": cfg}), false);
    assert_eq!(r.result, Some(false));
    assert_eq!(
        r.comment,
        "Missing parameter value for state sysctl.present"
    );
    assert_eq!(
        exec(&host, "sysctl.assign", vec![json!(KEY)]),
        Err("assign() missing 1 required positional argument: 'value'".into())
    );
}
