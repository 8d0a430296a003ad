//! `kmod` states and execution functions with the real `modprobe`,
//! `rmmod` and `lsmod`. Loading a real module is tested only where this
//! kernel has loadable modules; the error paths run everywhere.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use halite_modules::{Args, Host};
use halite_state::StateResult;
use serde_json::{json, Value};

const MISSING: &str = "halite_no_such_module";

fn tools() -> bool {
    for tool in ["modprobe", "lsmod", "rmmod"] {
        if std::process::Command::new(tool)
            .arg("--version")
            .output()
            .is_err()
        {
            println!("skipped: {tool} is not installed (apt-get install kmod)");
            return false;
        }
    }
    true
}

fn host() -> Host {
    common::host()
}

fn state(host: &Host, fun: &str, name: &str, args: Value, test: bool) -> StateResult {
    common::state_or_fail(host, "kmod", fun, name, args, test)
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
fn a_missing_module_is_reported_as_salt_does() {
    if !tools() {
        return;
    }
    let host = host();
    let r = state(&host, "present", MISSING, json!({}), false);
    assert_eq!(r.result, Some(false));
    assert_eq!(r.comment, format!("Kernel module {MISSING} is unavailable"));
    let t = state(&host, "present", MISSING, json!({}), true);
    assert_eq!(
        (t.result, t.comment.as_str()),
        (
            None,
            format!("Kernel module {MISSING} is set to be loaded").as_str()
        )
    );
    let two = state(
        &host,
        "present",
        "x",
        json!({"mods": [MISSING, "halite_other"]}),
        true,
    );
    assert_eq!(
        two.comment,
        format!("Kernel modules {MISSING}, halite_other are set to be loaded")
    );
    let a = state(&host, "absent", MISSING, json!({}), false);
    assert_eq!(
        (a.result, a.comment.as_str()),
        (
            Some(true),
            format!("Kernel module {MISSING} is already removed").as_str()
        )
    );

    let typo = state(
        &host,
        "absent",
        MISSING,
        json!({"persit": true, "require": []}),
        false,
    );
    assert_eq!(typo.result, Some(false));
    assert_eq!(
        typo.comment,
        "'persit' is an invalid keyword argument for 'kmod.absent'"
    );

    let load = exec(&host, "kmod.load", vec![json!(MISSING)]);
    let text = load.as_str().unwrap_or_default();
    assert!(
        text.starts_with(&format!(
            "Error loading module {MISSING}: modprobe: FATAL: Module {MISSING} not found"
        )),
        "{load}"
    );
    assert_eq!(
        exec(&host, "kmod.is_loaded", vec![json!(MISSING)]),
        json!(false)
    );
    assert_eq!(
        exec(&host, "kmod.check_available", vec![json!(MISSING)]),
        json!(false)
    );
    assert!(exec(&host, "kmod.lsmod", vec![]).is_array());
}

#[test]
fn loads_and_removes_a_real_module_where_the_kernel_allows() {
    if !tools() {
        return;
    }
    if !std::path::Path::new("/proc/modules").exists() {
        println!("skipped: this kernel has no loadable modules (/proc/modules is missing)");
        return;
    }
    let host = host();
    let available = exec(&host, "kmod.available", vec![]);
    let Some(m) = ["dummy", "loop", "bonding"]
        .into_iter()
        .find(|m| available.as_array().is_some_and(|a| a.contains(&json!(m))))
    else {
        println!("skipped: none of dummy/loop/bonding is available as a module here");
        return;
    };
    if exec(&host, "kmod.is_loaded", vec![json!(m)]) == json!(true) {
        println!("skipped: {m} is already loaded; not unloading what the host uses");
        return;
    }
    let r = state(&host, "present", m, json!({}), false);
    assert_eq!(r.comment, format!("Loaded kernel module {m}"));
    assert_eq!(r.changes.get(m), Some(&json!("loaded")));
    let r = state(&host, "absent", m, json!({}), false);
    assert_eq!(r.comment, format!("Removed kernel module {m}"));
}
