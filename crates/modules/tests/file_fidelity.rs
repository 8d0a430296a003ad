//! Fidelity bugs of the `file` states found by applying public formulas
//! beside Salt 3008.5, on real files in temp dirs: each case here is what
//! Salt returned for the same input.
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
use halite_modules::{table, Host, LocalFileClient};
use halite_state::{LowChunk, Map, StateCall, StateModule, StateResult, Value};
use serde_json::json;

fn host(root: &Path) -> Host {
    let mut roots = BTreeMap::new();
    roots.insert("base".to_string(), vec![root.to_path_buf()]);
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

fn run(host: &Host, fun: &str, name: &str, args: Value, test: bool) -> StateResult {
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
    let chunk = LowChunk::from(m);
    let call = StateCall {
        chunk: &chunk,
        test,
        env: host,
        sfun: None,
        reqs: None,
    };
    match halite_modules::states::file::MODULE.call(fun, &call) {
        Ok(r) => r,
        Err(e) => panic!("file.{fun} returned an error: {e}"),
    }
}

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("mkdir");
    }
    fs::write(path, text).expect("write");
}

#[test]
fn managed_template_sees_the_variables_salt_passes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("srv");
    write(
        &root.join("t.j2"),
        "name={{ name }}\nsource={{ source }}\nuser={{ user }}\ngroup={{ group }}\nmode={{ mode }}\nattrs={{ attrs }}\nfoo={{ foo }}\n",
    );
    let host = host(&root);
    let target = dir.path().join("out.conf");
    let name = target.display().to_string();
    let r = run(
        &host,
        "managed",
        &name,
        json!({
            "source": ["salt://missing.j2", "salt://t.j2"],
            "template": "jinja",
            "mode": 644,
            "user": "root",
            "context": {"foo": "bar", "group": "from-context"},
        }),
        false,
    );
    assert_eq!(r.result, Some(true), "{r:?}");
    // As Salt 3008.5 wrote it: the source found, the mode normalized,
    // absent arguments None, and `context` winning over them.
    assert_eq!(
        fs::read_to_string(&target).expect("read"),
        format!("name={name}\nsource=salt://t.j2\nuser=root\ngroup=from-context\nmode=0644\nattrs=None\nfoo=bar\n")
    );
}

#[test]
fn recurse_in_test_mode_does_not_list_the_target_when_the_source_top_holds_only_directories() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("srv");
    write(&root.join("tree/sub/b.txt"), "b\n");
    write(&root.join("tree/sub2/deep/c.txt"), "c\n");
    let host = host(&root);
    let target = dir.path().join("rec");
    let t = target.display().to_string();
    let r = run(&host, "recurse", &t, json!({"source": "salt://tree"}), true);
    assert_eq!(r.result, None, "{r:?}");
    // Salt 3008.5: only the directory holding each file, not the target,
    // nor `sub2` above `sub2/deep`.
    let mut keys: Vec<&String> = r.changes.keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            &format!("{t}/sub"),
            &format!("{t}/sub/b.txt"),
            &format!("{t}/sub2/deep"),
            &format!("{t}/sub2/deep/c.txt"),
        ]
    );
    assert_eq!(
        r.changes[&format!("{t}/sub")],
        json!({format!("{t}/sub"): {"directory": "new"}})
    );
    assert!(!target.exists());

    // A file at the top of the source makes the target a managed directory.
    write(&root.join("tree/top.txt"), "top\n");
    let r = run(&host, "recurse", &t, json!({"source": "salt://tree"}), true);
    assert_eq!(
        r.changes.get(&t),
        Some(&json!({t.clone(): {"directory": "new"}}))
    );
}
