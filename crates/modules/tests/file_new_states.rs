//! The issue-19 `file` states (keyvalue, rename, hardlink, tidied,
//! accumulated, cached/not_cached, decode, patch) on real files in temp
//! dirs; expected strings are what Salt 3008.5 returned for the same input.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::Arc;

use halite_modules::host::LogEvents;
use halite_modules::states::file::MODULE as FILE;
use halite_modules::{table, Host, LocalFileClient};
use halite_state::{LowChunk, Map, StateCall, StateModule, StateResult, Value};
use serde_json::json;

fn host(root: &Path) -> Host {
    let mut roots = BTreeMap::new();
    roots.insert("base".to_string(), vec![root.join("srv")]);
    Host {
        opts: json!({"cachedir": root.join("cache").display().to_string()}),
        grains: json!({"os": "Linux"}),
        pillar: json!({}),
        files: Arc::new(LocalFileClient::new(roots)),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    }
}

fn chunk(fun: &str, name: &str, args: Value) -> LowChunk {
    let mut m = Map::new();
    m.insert("state".into(), json!("file"));
    m.insert("name".into(), json!(name));
    m.insert("__env__".into(), json!("base"));
    m.insert("__id__".into(), json!("t"));
    m.insert("__sls__".into(), json!("t"));
    if let Value::Object(a) = args {
        m.extend(a);
    }
    m.insert("fun".into(), json!(fun));
    LowChunk::from(m)
}

fn run(host: &Host, fun: &str, name: &str, args: Value, test: bool) -> StateResult {
    let chunk = chunk(fun, name, args);
    let call = StateCall {
        chunk: &chunk,
        test,
        env: host,
        sfun: None,
        reqs: None,
    };
    match FILE.call(fun, &call) {
        Ok(r) => r,
        Err(e) => panic!("file.{fun} returned an error: {e}"),
    }
}

fn setup() -> (tempfile::TempDir, Host) {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("srv")).unwrap();
    let h = host(dir.path());
    (dir, h)
}

fn p(dir: &tempfile::TempDir, rel: &str) -> String {
    dir.path().join(rel).display().to_string()
}

#[test]
fn keyvalue_replaces_uncomments_and_appends_as_salt_does() {
    let (dir, h) = setup();
    let conf = p(&dir, "sshd_config");
    fs::write(&conf, "Port 22\n#PermitRootLogin yes\nUseDNS yes\n").unwrap();
    let args = json!({"separator": " ", "uncomment": "#", "append_if_not_found": true,
        "key_values": {"Port": 2222, "PermitRootLogin": "no", "X11Forwarding": "no"}});
    let t = run(&h, "keyvalue", &conf, args.clone(), true);
    assert_eq!(t.result, None);
    assert!(t.comment.starts_with(&format!(
        "File {conf} is set to be changed (3 lines modified, 0 deleted)\nPredicted diff:"
    )));
    assert_eq!(
        fs::read_to_string(&conf).unwrap(),
        "Port 22\n#PermitRootLogin yes\nUseDNS yes\n"
    );
    let r = run(&h, "keyvalue", &conf, args.clone(), false);
    assert_eq!(r.result, Some(true));
    assert_eq!(r.comment, "Changed 3, deleted 0 lines");
    assert_eq!(
        r.changes["diff"],
        json!("- Port 22\n+ Port 2222 (from int type)\n- #PermitRootLogin yes\n+ PermitRootLogin no\n- <EOF>\n+ X11Forwarding no\n+ <EOF>\n")
    );
    assert_eq!(
        fs::read_to_string(&conf).unwrap(),
        "Port 2222\nPermitRootLogin no\nUseDNS yes\nX11Forwarding no\n"
    );
    let again = run(&h, "keyvalue", &conf, args, false);
    assert_eq!((again.result, again.changes.len()), (Some(true), 0));
}

#[test]
fn keyvalue_prune_and_bad_arguments() {
    let (dir, h) = setup();
    let conf = p(&dir, "kv");
    fs::write(&conf, "a=1\nb=2\nc=3\n").unwrap();
    let r = run(
        &h,
        "keyvalue",
        &conf,
        json!({"key_values": {"a": "1"}, "prune": true}),
        false,
    );
    assert_eq!(r.comment, "Changed 0, deleted 2 lines");
    assert_eq!(fs::read_to_string(&conf).unwrap(), "a=1\n");
    let r = run(&h, "keyvalue", &conf, json!({}), false);
    assert_eq!(r.result, Some(false));
    assert_eq!(
        r.comment,
        "file.keyvalue key and value not supplied and key_values is empty"
    );
    let missing = p(&dir, "nope");
    let r = run(
        &h,
        "keyvalue",
        &missing,
        json!({"key": "a", "value": 1}),
        false,
    );
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(false), &*format!("unable to open {missing}"))
    );
    let r = run(
        &h,
        "keyvalue",
        &missing,
        json!({"key": "a", "value": 1, "create_if_missing": true}),
        false,
    );
    assert_eq!(r.result, Some(true));
    assert_eq!(fs::read_to_string(&missing).unwrap(), "a=1\n");
}
