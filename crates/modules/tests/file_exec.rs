//! The `file` execution module on real files, through the registry as
//! templates and `unless: - fun:` call it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::BTreeMap;
use std::fs;
use std::sync::Arc;

use halite_modules::host::LogEvents;
use halite_modules::{table, Args, Host, LocalFileClient};
use halite_state::Value;
use serde_json::json;

fn host() -> Host {
    Host {
        opts: json!({}),
        grains: json!({}),
        pillar: json!({}),
        files: Arc::new(LocalFileClient::new(BTreeMap::new())),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    }
}

fn call(h: &Host, fun: &str, positional: Vec<Value>, kwargs: Value) -> Result<Value, String> {
    let kwargs = kwargs.as_object().cloned().unwrap_or_default();
    h.call(fun, &Args { positional, kwargs })
        .map_err(|e| e.to_string())
}

#[test]
fn existence_paths_and_io() {
    let h = host();
    let dir = tempfile::tempdir().expect("tmp");
    let f = dir.path().join("a.txt");
    let fs_ = f.display().to_string();
    let d = dir.path().display().to_string();
    assert_eq!(
        call(&h, "file.file_exists", vec![json!(fs_)], json!({})),
        Ok(json!(false))
    );
    assert_eq!(
        call(
            &h,
            "file.write",
            vec![json!(fs_), json!("l1"), json!("l2")],
            json!({})
        ),
        Ok(json!(format!("Wrote 2 lines to \"{fs_}\"")))
    );
    assert_eq!(
        call(&h, "file.read", vec![json!(fs_)], json!({})),
        Ok(json!("l1\nl2\n"))
    );
    assert_eq!(
        call(&h, "file.file_exists", vec![json!(fs_)], json!({})),
        Ok(json!(true))
    );
    assert_eq!(
        call(&h, "file.directory_exists", vec![json!(d)], json!({})),
        Ok(json!(true))
    );
    assert_eq!(
        call(&h, "file.exists", vec![json!(d)], json!({})),
        Ok(json!(true))
    );
    assert_eq!(
        call(
            &h,
            "file.join",
            vec![json!("/a"), json!("b"), json!("c")],
            json!({})
        ),
        Ok(json!("/a/b/c"))
    );
    assert_eq!(
        call(&h, "file.dirname", vec![json!("/a/b/c")], json!({})),
        Ok(json!("/a/b"))
    );
    assert_eq!(
        call(&h, "file.basename", vec![json!("/a/b/c")], json!({})),
        Ok(json!("c"))
    );
    assert_eq!(
        call(
            &h,
            "file.contains",
            vec![json!(fs_), json!("l2")],
            json!({})
        ),
        Ok(json!(true))
    );
    assert_eq!(
        call(
            &h,
            "file.search",
            vec![json!(fs_), json!("^l[0-9]$")],
            json!({})
        ),
        Ok(json!(true))
    );
    assert_eq!(
        call(&h, "file.get_hash", vec![json!(fs_)], json!({})),
        Ok(json!(
            "259ed5007f3fa40e74ea909523ceab9cb2a73dc251155f68d976955777dc79d3"
        ))
    );
    assert_eq!(
        call(
            &h,
            "file.get_hash",
            vec![json!(fs_), json!("md5")],
            json!({})
        ),
        Ok(json!("a8be9e797e0f7e75b498d90413d9a7ad"))
    );
    fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o640)).expect("chmod");
    assert_eq!(
        call(&h, "file.get_mode", vec![json!(fs_)], json!({})),
        Ok(json!("0640"))
    );
    let stats = call(&h, "file.stats", vec![json!(fs_)], json!({})).expect("stats");
    assert_eq!(stats["type"], json!("file"));
    assert_eq!(stats["size"], json!(6));
    assert_eq!(
        call(&h, "file.get_mode", vec![json!("/no/such/file")], json!({})),
        Err("Path not found: /no/such/file".to_string())
    );
}

#[test]
fn replace_symlink_find_remove() {
    let h = host();
    let dir = tempfile::tempdir().expect("tmp");
    let f = dir.path().join("s.ini");
    fs::write(&f, "enabled=0\ncolor=blue\n").expect("write");
    let fs_ = f.display().to_string();
    let diff = call(
        &h,
        "file.replace",
        vec![json!(fs_), json!("^enabled=0$"), json!("enabled=1")],
        json!({}),
    );
    assert_eq!(
        diff,
        Ok(json!(
            "--- \n+++ \n@@ -1,2 +1,2 @@\n-enabled=0\n+enabled=1\n color=blue\n"
        ))
    );
    assert_eq!(
        fs::read_to_string(&f).expect("read"),
        "enabled=1\ncolor=blue\n"
    );
    let err = call(
        &h,
        "file.replace",
        vec![json!("/no/such"), json!("a"), json!("b")],
        json!({}),
    );
    assert_eq!(err, Err("File not found: /no/such".to_string()));

    let link = dir.path().join("l").display().to_string();
    assert_eq!(
        call(&h, "file.symlink", vec![json!(fs_), json!(link)], json!({})),
        Ok(json!(true))
    );
    assert_eq!(
        call(&h, "file.readlink", vec![json!(link)], json!({})),
        Ok(json!(fs_))
    );
    assert!(call(&h, "file.readlink", vec![json!(fs_)], json!({})).is_err());

    let sub = dir.path().join("sub/deeper").display().to_string();
    assert_eq!(
        call(&h, "file.mkdir", vec![json!(sub)], json!({"mode": 700})),
        Ok(json!(true))
    );
    assert_eq!(
        call(&h, "file.get_mode", vec![json!(sub)], json!({})),
        Ok(json!("0700"))
    );
    assert_eq!(
        call(
            &h,
            "file.touch",
            vec![json!(format!("{sub}/x.ini"))],
            json!({})
        ),
        Ok(json!(true))
    );
    let found = call(
        &h,
        "file.find",
        vec![json!(dir.path().display().to_string())],
        json!({"name": "*.ini", "type": "f"}),
    )
    .expect("find");
    assert_eq!(found, json!([fs_.clone(), format!("{sub}/x.ini")]));
    assert_eq!(
        call(
            &h,
            "file.remove",
            vec![json!(dir.path().join("sub").display().to_string())],
            json!({})
        ),
        Ok(json!(true))
    );
    assert!(!dir.path().join("sub").exists());
    assert!(call(&h, "file.remove", vec![json!("relative")], json!({})).is_err());
}

#[test]
fn edits_match_salts_module_defaults() {
    let h = host();
    let dir = tempfile::tempdir().expect("tmp");
    let f = dir.path().join("b.txt");
    fs::write(&f, "h\n#S\nold\n#E\n").expect("write");
    let p = f.display().to_string();
    // The module's append_newline defaults to False: Salt glues the end marker on.
    let diff = call(
        &h,
        "file.blockreplace",
        vec![json!(p), json!("#S"), json!("#E")],
        json!({"content": "new"}),
    );
    assert_eq!(
        diff,
        Ok(json!(
            "--- \n+++ \n@@ -1,4 +1,3 @@\n h\n #S\n-old\n-#E\n+new#E\n"
        ))
    );
    assert_eq!(fs::read_to_string(&f).expect("read"), "h\n#S\nnew#E\n");
    assert_eq!(
        fs::read_to_string(dir.path().join("b.txt.bak")).expect("backup"),
        "h\n#S\nold\n#E\n"
    );
    // multiline adds MULTILINE, not DOTALL: `.` does not cross lines.
    fs::write(&f, "a=1\n#b:2\n").expect("write");
    let found = call(
        &h,
        "file.search",
        vec![json!(p), json!("a.1.#b")],
        json!({"multiline": true}),
    );
    assert_eq!(found, Ok(json!(false)));
    let found = call(
        &h,
        "file.search",
        vec![json!(p), json!("^#b:2$")],
        json!({"multiline": true}),
    );
    assert_eq!(found, Ok(json!(true)));
    // file.line returns the diff, or False when nothing changes.
    let diff = call(
        &h,
        "file.line",
        vec![json!(p), json!("new")],
        json!({"after": "a=1", "mode": "ensure"}),
    );
    assert_eq!(
        diff,
        Ok(json!("--- \n+++ \n@@ -1,2 +1,3 @@\n a=1\n+new\n #b:2\n"))
    );
    let again = call(
        &h,
        "file.line",
        vec![json!(p), json!("new")],
        json!({"after": "a=1", "mode": "ensure"}),
    );
    assert_eq!(again, Ok(json!(false)));
    // comment returns only the changed lines' diff, as Salt's comment_line.
    let diff = call(
        &h,
        "file.comment",
        vec![json!(p), json!("^a=1$")],
        json!({}),
    );
    assert_eq!(diff, Ok(json!("--- \n+++ \n@@ -1 +1 @@\n-a=1\n+#a=1\n")));
}
