//! The `file` states on real files in temp dirs, compared with what Salt
//! 3008.5 returned for the same input (expected strings captured from
//! `salt-call --local state.apply`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use halite_modules::host::LogEvents;
use halite_modules::states::file::MODULE as FILE;
use halite_modules::{table, Host, LocalFileClient};
use halite_state::{LowChunk, Map, StateCall, StateModule, StateResult, Value};
use serde_json::json;

fn host(root: &Path) -> Host {
    let mut roots = BTreeMap::new();
    roots.insert("base".to_string(), vec![root.to_path_buf()]);
    Host {
        opts: json!({"cachedir": root.join("cache").display().to_string()}),
        grains: json!({"os": "Linux", "nested": {"motd": "from grains"}}),
        pillar: json!({"app": {"conf": "from pillar"}}),
        files: Arc::new(LocalFileClient::new(roots)),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    }
}

fn try_run(
    host: &Host,
    fun: &str,
    name: &str,
    args: Value,
    test: bool,
) -> Result<StateResult, String> {
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
    FILE.call(fun, &call).map_err(|e| e.to_string())
}

fn run(host: &Host, fun: &str, name: &str, args: Value, test: bool) -> StateResult {
    match try_run(host, fun, name, args, test) {
        Ok(r) => r,
        Err(e) => panic!("file.{fun} returned an error: {e}"),
    }
}

fn mode_of(p: &Path) -> u32 {
    fs::metadata(p)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0)
}

struct Fixture {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    work: std::path::PathBuf,
    host: Host,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("root");
    let work = dir.path().join("work");
    fs::create_dir_all(root.join("tree/sub")).expect("mkdir");
    fs::create_dir_all(&work).expect("mkdir");
    fs::write(root.join("src.txt"), "hello\nworld\n").expect("write");
    fs::write(root.join("tree/a.txt"), "alpha\n").expect("write");
    fs::write(root.join("tree/sub/b.txt"), "beta {{ x }}\n").expect("write");
    let host = host(&root);
    Fixture {
        root,
        work,
        host,
        _dir: dir,
    }
}

const TEN: &str = "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n";

#[test]
fn managed_update_reports_salts_two_hunk_diff_and_mode() {
    let f = fixture();
    let p = f.work.join("m.txt");
    fs::write(&p, TEN).expect("write");
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).expect("chmod");
    let contents = "one\ntwo\nTHREE\nfour\nfive\nsix\nseven\neight\nnine\nten\neleven\n";
    let name = p.display().to_string();
    // Test mode first: predicted, disk untouched.
    let r = run(
        &f.host,
        "managed",
        &name,
        json!({"contents": contents, "mode": 600}),
        true,
    );
    assert_eq!(r.result, None);
    assert_eq!(
        r.comment,
        format!("The file {name} is set to be changed\nNote: No changes made, actual changes may\nbe different due to other states.")
    );
    assert_eq!(fs::read_to_string(&p).expect("read"), TEN);
    // Real run: Salt's exact diff and the mode change (YAML 600 is an int).
    let r = run(
        &f.host,
        "managed",
        &name,
        json!({"contents": contents, "mode": 600}),
        false,
    );
    assert_eq!(r.result, Some(true));
    assert_eq!(r.comment, format!("File {name} updated"));
    assert_eq!(
        r.changes["diff"],
        json!("--- \n+++ \n@@ -1,6 +1,6 @@\n one\n two\n-three\n+THREE\n four\n five\n six\n@@ -8,3 +8,4 @@\n eight\n nine\n ten\n+eleven\n")
    );
    assert_eq!(r.changes["mode"], json!("0600"));
    assert_eq!(mode_of(&p), 0o600);
    assert_eq!(fs::read_to_string(&p).expect("read"), contents);
    // Already correct.
    let r = run(
        &f.host,
        "managed",
        &name,
        json!({"contents": contents, "mode": "0600"}),
        false,
    );
    assert_eq!(
        (r.result, r.comment.clone()),
        (Some(true), format!("File {name} is in the correct state"))
    );
    assert!(r.changes.is_empty());
    let r = run(
        &f.host,
        "managed",
        &name,
        json!({"contents": contents, "mode": "0600"}),
        true,
    );
    assert_eq!(
        (r.result, r.comment),
        (
            Some(true),
            format!("The file {name} is in the correct state")
        )
    );
}

#[test]
fn managed_new_files_from_source_contents_and_nothing() {
    let f = fixture();
    let src = f.work.join("new/src.txt");
    let name = src.display().to_string();
    let r = run(
        &f.host,
        "managed",
        &name,
        json!({"source": "salt://src.txt", "makedirs": true}),
        true,
    );
    assert_eq!(r.result, None);
    assert_eq!(
        r.changes,
        json!({"newfile": name})
            .as_object()
            .cloned()
            .unwrap_or_default()
    );
    assert!(!src.exists());
    let r = run(
        &f.host,
        "managed",
        &name,
        json!({"source": "salt://src.txt", "makedirs": true}),
        false,
    );
    assert_eq!(r.result, Some(true));
    assert_eq!(
        Value::Object(r.changes),
        json!({"diff": "New file", "mode": "0644"})
    );
    assert_eq!(fs::read_to_string(&src).expect("read"), "hello\nworld\n");

    let c = f.work.join("c.txt");
    let r = run(
        &f.host,
        "managed",
        &c.display().to_string(),
        json!({"contents": "hi", "mode": "0640"}),
        false,
    );
    assert_eq!(
        Value::Object(r.changes),
        json!({"diff": "New file", "mode": "0640"})
    );
    assert_eq!(fs::read_to_string(&c).expect("read"), "hi\n");
    assert_eq!(mode_of(&c), 0o640);

    let e = f.work.join("empty.txt");
    let r = run(
        &f.host,
        "managed",
        &e.display().to_string(),
        json!({}),
        false,
    );
    assert_eq!(r.comment, "Empty file");
    assert_eq!(
        Value::Object(r.changes),
        json!({"new": format!("file {} created", e.display())})
    );

    let missing_parent = f.work.join("no/such/x");
    let r = run(
        &f.host,
        "managed",
        &missing_parent.display().to_string(),
        json!({"contents": "x"}),
        false,
    );
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(false), "Parent directory not present")
    );

    let r = run(
        &f.host,
        "managed",
        &f.work.join("y").display().to_string(),
        json!({"source": "salt://nope.txt"}),
        false,
    );
    assert_eq!(r.result, Some(false));
    assert_eq!(
        r.comment,
        "Unable to manage file: Source file salt://nope.txt not found in saltenv 'base'"
    );
}

#[test]
fn managed_pillar_grains_list_sources_and_replace_false() {
    let f = fixture();
    let p = f.work.join("p.txt");
    let name = p.display().to_string();
    run(
        &f.host,
        "managed",
        &name,
        json!({"contents_pillar": "app:conf"}),
        false,
    );
    assert_eq!(fs::read_to_string(&p).expect("read"), "from pillar\n");
    run(
        &f.host,
        "managed",
        &name,
        json!({"contents_grains": "nested:motd"}),
        false,
    );
    assert_eq!(fs::read_to_string(&p).expect("read"), "from grains\n");
    let r = run(
        &f.host,
        "managed",
        &name,
        json!({"contents_pillar": "no:such"}),
        false,
    );
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(false), "Pillar no:such does not exist")
    );
    run(
        &f.host,
        "managed",
        &name,
        json!({"source": ["salt://absent.txt", "salt://src.txt"]}),
        false,
    );
    assert_eq!(fs::read_to_string(&p).expect("read"), "hello\nworld\n");
    let r = run(
        &f.host,
        "managed",
        &name,
        json!({"contents": "other", "replace": false}),
        false,
    );
    assert_eq!(
        r.comment,
        format!("File {name} exists with proper permissions. No changes made.")
    );
    assert_eq!(fs::read_to_string(&p).expect("read"), "hello\nworld\n");
    let r = run(
        &f.host,
        "managed",
        &name,
        json!({"contents": ["a", "b"], "show_changes": false}),
        false,
    );
    assert_eq!(r.changes["diff"], json!("<show_changes=False>"));
    assert_eq!(fs::read_to_string(&p).expect("read"), "a\nb\n");
    let r = run(
        &f.host,
        "managed",
        &name,
        json!({"source": "salt://src.txt", "contents": "x"}),
        false,
    );
    assert_eq!(r.result, Some(false));
    let r = run(
        &f.host,
        "managed",
        "relative/path",
        json!({"contents": "x"}),
        false,
    );
    assert_eq!(
        r.comment,
        "Specified file relative/path is not an absolute path"
    );
}

#[test]
fn managed_verifies_source_hash_of_local_sources() {
    let f = fixture();
    let src = f.root.join("src.txt");
    let dest = f.work.join("h.txt").display().to_string();
    let good = "sha256=".to_string()
        + &halite_modules::exec::file::meta::HashType::Sha256.digest(b"hello\nworld\n");
    let r = run(
        &f.host,
        "managed",
        &dest,
        json!({"source": src.display().to_string(), "source_hash": good}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    let bad = "0".repeat(64);
    let other = f.work.join("h2.txt").display().to_string();
    let r = run(
        &f.host,
        "managed",
        &other,
        json!({"source": src.display().to_string(), "source_hash": bad}),
        false,
    );
    assert_eq!(r.result, Some(false));
    assert!(
        r.comment.starts_with("Specified sha256 checksum for"),
        "{}",
        r.comment
    );
}

#[test]
fn replace_matches_salt_diff_backup_and_append() {
    let f = fixture();
    let p = f.work.join("e.txt");
    fs::write(&p, "a=1\n#b=2\nc=3\n").expect("write");
    let name = p.display().to_string();
    let args = json!({"pattern": r"^c=(\d)$", "repl": r"c=\1\1", "append_if_not_found": true});
    let r = run(&f.host, "replace", &name, args.clone(), true);
    assert_eq!(
        (r.result, r.comment.as_str()),
        (None, "Changes would have been made")
    );
    assert_eq!(fs::read_to_string(&p).expect("read"), "a=1\n#b=2\nc=3\n");
    let r = run(&f.host, "replace", &name, args.clone(), false);
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(true), "Changes were made")
    );
    assert_eq!(
        r.changes["diff"],
        json!("--- \n+++ \n@@ -1,3 +1,3 @@\n a=1\n #b=2\n-c=3\n+c=33\n")
    );
    assert_eq!(
        fs::read_to_string(f.work.join("e.txt.bak")).expect("backup"),
        "a=1\n#b=2\nc=3\n"
    );
    let r = run(
        &f.host,
        "replace",
        &name,
        json!({"pattern": "^z=.*$", "repl": "z=9", "append_if_not_found": true}),
        false,
    );
    assert_eq!(
        r.changes["diff"],
        json!("--- \n+++ \n@@ -1,3 +1,4 @@\n a=1\n #b=2\n c=33\n+z=9\n")
    );
    let r = run(
        &f.host,
        "replace",
        &name,
        json!({"pattern": "^z=.*$", "repl": "z=9", "append_if_not_found": true}),
        false,
    );
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(true), "No changes needed to be made")
    );
    let missing = f.work.join("nope.ini").display().to_string();
    let r = run(
        &f.host,
        "replace",
        &missing,
        json!({"pattern": "a", "repl": "b"}),
        false,
    );
    assert_eq!(
        (r.result, r.comment),
        (Some(false), format!("{missing}: file not found"))
    );
}

#[test]
fn comment_uncomment_blockreplace_line_match_salt() {
    let f = fixture();
    let e = f.work.join("e.txt");
    fs::write(&e, "a=1\n#b=2\nc=33\nz=9\n").expect("write");
    let name = e.display().to_string();
    let r = run(&f.host, "uncomment", &name, json!({"regex": "b=2"}), true);
    assert_eq!(
        (r.result, r.comment.clone()),
        (None, format!("File {name} is set to be updated"))
    );
    let r = run(&f.host, "uncomment", &name, json!({"regex": "b=2"}), false);
    assert_eq!(r.comment, "Uncommented lines successfully");
    assert_eq!(
        r.changes["diff"],
        json!("--- \n+++ \n@@ -1,4 +1,4 @@\n a=1\n-#b=2\n+b=2\n c=33\n z=9\n")
    );
    let r = run(&f.host, "uncomment", &name, json!({"regex": "b=2"}), false);
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(true), "Pattern already uncommented")
    );
    let r = run(&f.host, "comment", &name, json!({"regex": "^a=1"}), false);
    assert_eq!(r.comment, "Commented lines successfully");
    assert_eq!(
        r.changes["diff"],
        json!("--- \n+++ \n@@ -1,4 +1,4 @@\n-a=1\n+#a=1\n b=2\n c=33\n z=9\n")
    );
    let r = run(&f.host, "comment", &name, json!({"regex": "^a=1"}), false);
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(true), "Pattern already commented")
    );

    let b = f.work.join("blk.txt");
    fs::write(&b, "head\n# BEGIN\nold\n# END\ntail\n").expect("write");
    let args = json!({"marker_start": "# BEGIN", "marker_end": "# END", "content": "new1\nnew2\n"});
    let r = run(
        &f.host,
        "blockreplace",
        &b.display().to_string(),
        args.clone(),
        true,
    );
    assert_eq!(
        (r.result, r.comment.as_str()),
        (None, "Changes would be made")
    );
    let r = run(
        &f.host,
        "blockreplace",
        &b.display().to_string(),
        args.clone(),
        false,
    );
    assert_eq!(
        r.changes["diff"],
        json!("--- \n+++ \n@@ -1,5 +1,6 @@\n head\n # BEGIN\n-old\n+new1\n+new2\n # END\n tail\n")
    );
    assert_eq!(
        fs::read_to_string(&b).expect("read"),
        "head\n# BEGIN\nnew1\nnew2\n# END\ntail\n"
    );
    let r = run(
        &f.host,
        "blockreplace",
        &b.display().to_string(),
        args,
        false,
    );
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(true), "No changes needed to be made")
    );

    let l = f.work.join("ln.txt");
    fs::write(&l, "k1\nk2\n").expect("write");
    let ln = l.display().to_string();
    let r = run(
        &f.host,
        "line",
        &ln,
        json!({"content": "inserted", "mode": "ensure", "after": "k1"}),
        false,
    );
    assert_eq!(
        r.changes["diff"],
        json!("--- \n+++ \n@@ -1,2 +1,3 @@\n k1\n+inserted\n k2\n")
    );
    let r = run(
        &f.host,
        "line",
        &ln,
        json!({"content": "k2", "mode": "delete"}),
        false,
    );
    assert_eq!(
        r.changes["diff"],
        json!("--- \n+++ \n@@ -1,3 +1,2 @@\n k1\n inserted\n-k2\n")
    );
    let r = run(
        &f.host,
        "line",
        &ln,
        json!({"content": "k2", "mode": "delete"}),
        false,
    );
    assert_eq!(r.comment, "No changes needed to be made");
    assert_eq!(fs::read_to_string(&l).expect("read"), "k1\ninserted\n");
}

#[test]
fn append_and_prepend_match_salt() {
    let f = fixture();
    let p = f.work.join("ap.txt");
    fs::write(&p, "x\ny\n").expect("write");
    let name = p.display().to_string();
    let r = run(&f.host, "append", &name, json!({"text": ["y", "z"]}), true);
    assert_eq!(r.result, None);
    assert_eq!(fs::read_to_string(&p).expect("read"), "x\ny\n");
    let r = run(&f.host, "append", &name, json!({"text": ["y", "z"]}), false);
    assert_eq!(r.comment, "Appended 1 lines");
    assert_eq!(
        r.changes["diff"],
        json!("--- \n\n+++ \n\n@@ -1,2 +1,3 @@\n\n x\n y\n+z")
    );
    let r = run(&f.host, "append", &name, json!({"text": ["y", "z"]}), false);
    assert_eq!(r.comment, format!("File {name} is in correct state"));
    let r = run(&f.host, "prepend", &name, json!({"text": "first"}), false);
    assert_eq!(r.comment, "Prepended 1 lines");
    assert_eq!(
        r.changes["diff"],
        json!("--- \n+++ \n@@ -1,3 +1,4 @@\n+first\n x\n y\n z\n")
    );
    assert_eq!(fs::read_to_string(&p).expect("read"), "first\nx\ny\nz\n");
}

#[test]
fn directory_absent_exists_missing_touch() {
    let f = fixture();
    let d = f.work.join("d1/d2");
    let name = d.display().to_string();
    let r = run(
        &f.host,
        "directory",
        &name,
        json!({"makedirs": true, "dir_mode": 750}),
        true,
    );
    assert_eq!(r.result, None);
    assert!(!d.exists());
    let r = run(
        &f.host,
        "directory",
        &name,
        json!({"makedirs": true, "dir_mode": 750}),
        false,
    );
    assert_eq!((r.result, r.comment.as_str()), (Some(true), ""));
    assert_eq!(
        Value::Object(r.changes),
        json!({name.clone(): {"directory": "new"}})
    );
    assert_eq!(mode_of(&d), 0o750);
    assert_eq!(mode_of(&f.work.join("d1")), 0o750);
    let r = run(
        &f.host,
        "directory",
        &name,
        json!({"dir_mode": "0750"}),
        false,
    );
    assert_eq!(
        r.comment,
        format!("The directory {name} is in the correct state")
    );
    let r = run(
        &f.host,
        "directory",
        &f.work.join("x/y/z").display().to_string(),
        json!({}),
        false,
    );
    assert_eq!(r.result, Some(false));
    assert!(r.comment.starts_with("No directory to create"));
    // clean removes what is not kept.
    fs::write(d.join("junk"), "j").expect("write");
    let r = run(&f.host, "directory", &name, json!({"clean": true}), false);
    assert_eq!(r.comment, format!("Files cleaned from directory {name}"));
    assert!(!d.join("junk").exists());
    // recurse mode on files.
    fs::write(d.join("f"), "x").expect("write");
    let r = run(
        &f.host,
        "directory",
        &name,
        json!({"recurse": ["mode"], "dir_mode": "0755", "file_mode": "0600"}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(mode_of(&d.join("f")), 0o600);
    assert_eq!(mode_of(&d), 0o755);

    let r = run(&f.host, "absent", &name, json!({}), true);
    assert_eq!(
        (r.result, r.comment.clone()),
        (None, format!("Directory {name} is set for removal"))
    );
    let r = run(&f.host, "absent", &name, json!({}), false);
    assert_eq!(r.comment, format!("Removed directory {name}"));
    assert!(!d.exists());
    let r = run(&f.host, "absent", &name, json!({}), false);
    assert_eq!(r.comment, format!("File {name} is not present"));
    let r = run(&f.host, "absent", "/", json!({}), false);
    assert_eq!(r.comment, "Refusing to make \"/\" absent");

    let t = f.work.join("t.txt").display().to_string();
    let r = run(&f.host, "exists", &t, json!({}), false);
    assert_eq!(
        (r.result, r.comment.clone()),
        (Some(false), format!("Specified path {t} does not exist"))
    );
    let r = run(&f.host, "missing", &t, json!({}), false);
    assert_eq!(r.comment, format!("Path {t} is missing"));
    let r = run(&f.host, "touch", &t, json!({}), true);
    assert_eq!(
        (r.result, r.comment.clone()),
        (None, format!("File {t} is set to be created"))
    );
    let r = run(&f.host, "touch", &t, json!({}), false);
    assert_eq!(r.comment, format!("Created empty file {t}"));
    let r = run(&f.host, "touch", &t, json!({}), false);
    assert_eq!(r.comment, format!("Updated times on file {t}"));
    let r = run(&f.host, "exists", &t, json!({}), false);
    assert_eq!(r.result, Some(true));
}

#[test]
fn symlink_copy_recurse_serialize() {
    let f = fixture();
    let target = f.work.join("m.txt");
    fs::write(&target, TEN).expect("write");
    let link = f.work.join("lnk").display().to_string();
    let t = target.display().to_string();
    let r = run(&f.host, "symlink", &link, json!({"target": t}), true);
    assert_eq!(
        (r.result, r.comment.clone()),
        (None, format!("Symlink {link} to {t} is set for creation"))
    );
    let r = run(&f.host, "symlink", &link, json!({"target": t}), false);
    assert_eq!(r.comment, format!("Created new symlink {link} -> {t}"));
    assert_eq!(fs::read_link(&link).expect("link").display().to_string(), t);
    let r = run(&f.host, "symlink", &link, json!({"target": t}), false);
    assert!(
        r.comment
            .starts_with(&format!("Symlink {link} is present and owned by")),
        "{}",
        r.comment
    );
    let plain = f.work.join("plain");
    fs::write(&plain, "p").expect("write");
    let r = run(
        &f.host,
        "symlink",
        &plain.display().to_string(),
        json!({"target": t}),
        false,
    );
    assert_eq!(
        r.comment,
        format!(
            "File exists where the symlink {} should be",
            plain.display()
        )
    );

    let cp = f.work.join("copy.txt").display().to_string();
    let r = run(&f.host, "copy", &cp, json!({"source": t}), false);
    assert_eq!(r.comment, format!("Copied \"{t}\" to \"{cp}\""));
    assert_eq!(r.changes[&cp], json!(t));
    let r = run(&f.host, "copy", &cp, json!({"source": t}), false);
    assert_eq!(
        r.comment,
        format!("The target file \"{cp}\" exists and will not be overwritten")
    );

    let rec = f.work.join("rec");
    let rn = rec.display().to_string();
    let args = json!({"source": "salt://tree", "template": "jinja", "context": {"x": 42}});
    let r = run(&f.host, "recurse", &rn, args.clone(), false);
    assert_eq!(r.comment, format!("Recursively updated {rn}"), "{:?}", r);
    assert_eq!(
        r.changes[&format!("{rn}/a.txt")],
        json!({"diff": "New file", "mode": "0644"})
    );
    assert_eq!(
        r.changes[&format!("{rn}/sub")],
        json!({format!("{rn}/sub"): {"directory": "new"}})
    );
    assert!(rec.join("sub/b.txt").is_file());
    let r = run(&f.host, "recurse", &rn, args, false);
    assert_eq!(
        r.comment,
        format!("The directory {rn} is in the correct state")
    );
    assert!(r.changes.is_empty());

    let s = f.work.join("s.json");
    let r = run(
        &f.host,
        "serialize",
        &s.display().to_string(),
        json!({"formatter": "json", "dataset": {"b": [1, "two"], "a": {"c": null}}}),
        false,
    );
    assert_eq!(Value::Object(r.changes), json!({"diff": "New file"}));
    assert_eq!(
        fs::read_to_string(&s).expect("read"),
        "{\n  \"a\": {\n    \"c\": null\n  },\n  \"b\": [\n    1,\n    \"two\"\n  ]\n}\n"
    );
    let y = f.work.join("s.yaml");
    run(
        &f.host,
        "serialize",
        &y.display().to_string(),
        json!({"dataset": {"b": [1, "two"], "a": {"c": null, "m": "0644"}}}),
        false,
    );
    assert_eq!(
        fs::read_to_string(&y).expect("read"),
        "a:\n  c: null\n  m: '0644'\nb:\n- 1\n- two\n"
    );
    let r = run(
        &f.host,
        "serialize",
        &s.display().to_string(),
        json!({"formatter": "json", "dataset": {"b": [1, "two"], "a": {"c": null}}}),
        true,
    );
    assert_eq!(r.result, Some(true));
}

#[test]
fn ownership_changes_as_root() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping: changing file ownership needs root");
        return;
    }
    let f = fixture();
    let p = f.work.join("own.txt");
    let name = p.display().to_string();
    let r = run(
        &f.host,
        "managed",
        &name,
        json!({"contents": "x", "user": "nobody", "group": "daemon"}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.changes["user"], json!("nobody"));
    assert_eq!(r.changes["group"], json!("daemon"));
    use std::os::unix::fs::MetadataExt;
    let md = fs::metadata(&p).expect("stat");
    assert_eq!(
        halite_modules::exec::file::meta::uid_to_user(md.uid()),
        "nobody"
    );
    let r = run(
        &f.host,
        "managed",
        &name,
        json!({"contents": "x", "user": "nobody", "group": "daemon"}),
        false,
    );
    assert!(r.changes.is_empty());
    let r = run(
        &f.host,
        "managed",
        &name,
        json!({"contents": "x", "user": "no-such-user-xyz"}),
        false,
    );
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(false), "User no-such-user-xyz is not available ")
    );
}

#[test]
fn salt_shapes_for_merge_recursion_and_test_mode() {
    let f = fixture();
    // serialize with merge_if_exists reports the structural difference.
    let m = f.work.join("m.json");
    fs::write(&m, "{\"x\": {\"y\": 1}, \"z\": 2}\n").expect("write");
    let args = json!({"formatter": "json", "merge_if_exists": true, "dataset": {"x": {"w": 3}}});
    let r = run(
        &f.host,
        "serialize",
        &m.display().to_string(),
        args.clone(),
        false,
    );
    assert_eq!(
        r.changes["diff"],
        json!({"x": {"w": {"new": 3, "old": "<_null_>"}}})
    );
    assert_eq!(
        fs::read_to_string(&m).expect("read"),
        "{\n  \"x\": {\n    \"w\": 3,\n    \"y\": 1\n  },\n  \"z\": 2\n}\n"
    );
    let r = run(&f.host, "serialize", &m.display().to_string(), args, false);
    assert_eq!(
        r.comment,
        format!("The file {} is in the correct state", m.display())
    );

    // directory recurse: per-path predictions stay, check_perms adds a top-level key.
    let d = f.work.join("dd");
    fs::create_dir_all(d.join("sub")).expect("mkdir");
    fs::write(d.join("f1"), "x").expect("write");
    fs::set_permissions(d.join("f1"), fs::Permissions::from_mode(0o600)).expect("chmod");
    fs::set_permissions(d.join("sub"), fs::Permissions::from_mode(0o700)).expect("chmod");
    fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).expect("chmod");
    let dn = d.display().to_string();
    let args = json!({"dir_mode": 755, "file_mode": 644, "recurse": ["mode"]});
    let r = run(&f.host, "directory", &dn, args.clone(), true);
    assert_eq!(r.result, None);
    assert_eq!(
        r.comment,
        format!(
            "The following files will be changed:\n{dn}/f1: mode - 0644\n{dn}/sub: mode - 0755\n"
        )
    );
    let r = run(&f.host, "directory", &dn, args, false);
    assert_eq!(r.changes[&format!("{dn}/f1")], json!({"mode": "0644"}));
    assert_eq!(r.changes[&format!("{dn}/sub")], json!({"mode": "0755"}));
    assert_eq!(r.comment, format!("Directory {dn} updated"));
    assert_eq!(mode_of(&d.join("f1")), 0o644);

    // recurse in test mode names the target directory itself first.
    let rec = f.work.join("rec").display().to_string();
    let r = run(
        &f.host,
        "recurse",
        &rec,
        json!({"source": "salt://tree"}),
        true,
    );
    assert_eq!(r.result, None);
    assert_eq!(
        r.changes.keys().next().map(String::as_str),
        Some(rec.as_str())
    );
    assert_eq!(
        r.changes[&format!("{rec}/a.txt")],
        json!({"newfile": format!("{rec}/a.txt")})
    );
    assert!(!Path::new(&rec).exists());

    // touch in test mode on an existing file keeps Salt's `new` change.
    let t = f.work.join("m.json").display().to_string();
    let r = run(&f.host, "touch", &t, json!({}), true);
    assert_eq!((r.result, r.changes["new"].clone()), (Some(true), json!(t)));
}

#[test]
fn clean_keeps_what_required_file_states_manage() {
    let f = fixture();
    let d = f.work.join("d");
    for dir in ["keepdir/inner", "junkdir/x"] {
        fs::create_dir_all(d.join(dir)).expect("mkdir");
    }
    for file in ["a.conf", "junk", "keepdir/inner/f", "junkdir/x/y"] {
        fs::write(d.join(file), "x").expect("write");
    }
    let dn = d.display().to_string();
    let args = json!({"clean": true, "require": [{"file": format!("{dn}/a.conf")}, {"file": format!("{dn}/keepdir")}]});
    let r = run(&f.host, "directory", &dn, args.clone(), true);
    assert_eq!(r.result, None);
    assert_eq!(r.changes.len(), 4, "{:?}", r.changes);
    assert!(d.join("junk").exists());
    let r = run(&f.host, "directory", &dn, args, false);
    let mut removed: Vec<String> = r.changes["removed"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    removed.sort();
    assert_eq!(removed, vec![format!("{dn}/junk"), format!("{dn}/junkdir")]);
    assert!(d.join("a.conf").exists() && d.join("keepdir/inner/f").exists());
    assert!(!d.join("junk").exists() && !d.join("junkdir").exists());
}

#[test]
fn check_cmd_vets_new_content_before_it_lands() {
    let f = fixture();
    let p = f.work.join("sudoers");
    fs::write(&p, "good old\n").expect("write");
    let name = p.display().to_string();
    let r = run(
        &f.host,
        "managed",
        &name,
        json!({"contents": "bad new", "check_cmd": "grep -q good"}),
        false,
    );
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(false), "check_cmd execution failed")
    );
    assert_eq!(r.extra["skip_watch"], json!(true));
    assert!(r.changes.is_empty());
    assert_eq!(fs::read_to_string(&p).expect("read"), "good old\n");
    let r = run(
        &f.host,
        "managed",
        &name,
        json!({"contents": "good new", "check_cmd": "grep -q good"}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(fs::read_to_string(&p).expect("read"), "good new\n");
    assert!(FILE.runs_own_check_cmd("managed") && FILE.runs_own_check_cmd("serialize"));
    assert!(!FILE.runs_own_check_cmd("directory") && !FILE.runs_own_check_cmd("absent"));
}

#[test]
fn recursive_ownership_as_root() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping: changing file ownership needs root");
        return;
    }
    let f = fixture();
    let d = f.work.join("own");
    fs::create_dir_all(d.join("a/b")).expect("mkdir");
    fs::write(d.join("a/f"), "x").expect("write");
    let dn = d.display().to_string();
    let args = json!({"user": "nobody", "group": "daemon", "recurse": ["user", "group"]});
    let r = run(&f.host, "directory", &dn, args.clone(), true);
    assert_eq!(r.result, None);
    assert_eq!(
        r.changes[&format!("{dn}/a/f")],
        json!({"user": "nobody", "group": "daemon"})
    );
    let r = run(&f.host, "directory", &dn, args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, format!("Directory {dn} updated"));
    use std::os::unix::fs::MetadataExt;
    for p in ["", "a", "a/b", "a/f"] {
        let md = fs::metadata(d.join(p)).expect("stat");
        assert_eq!(
            halite_modules::exec::file::meta::uid_to_user(md.uid()),
            "nobody",
            "{p}"
        );
        assert_eq!(
            halite_modules::exec::file::meta::gid_to_group(md.gid()),
            "daemon",
            "{p}"
        );
    }
    let r = run(&f.host, "directory", &dn, args, false);
    assert_eq!(
        r.comment,
        format!("The directory {dn} is in the correct state")
    );

    // A symlink's own ownership is set without touching its target.
    let target = d.join("a/f");
    let link = f.work.join("l2").display().to_string();
    let largs =
        json!({"target": target.display().to_string(), "user": "daemon", "group": "daemon"});
    run(&f.host, "symlink", &link, largs.clone(), false);
    let lmd = fs::symlink_metadata(&link).expect("lstat");
    assert_eq!(
        halite_modules::exec::file::meta::uid_to_user(lmd.uid()),
        "daemon"
    );
    let tmd = fs::metadata(&target).expect("stat");
    assert_eq!(
        halite_modules::exec::file::meta::uid_to_user(tmd.uid()),
        "nobody"
    );
    let r = run(&f.host, "symlink", &link, largs, false);
    assert_eq!(
        r.comment,
        format!("Symlink {link} is present and owned by daemon:daemon")
    );
}

#[test]
fn backupname_moves_a_file_out_of_the_way() {
    let f = fixture();
    let file = f.work.join("was-file");
    fs::write(&file, "f").expect("write");
    let name = file.display().to_string();
    let bak = format!("{name}.orig");
    let r = run(
        &f.host,
        "directory",
        &name,
        json!({"backupname": bak}),
        true,
    );
    assert_eq!(r.result, None);
    assert_eq!(
        r.comment,
        format!("{name} would be backed up and replaced with a new directory")
    );
    assert!(file.is_file());
    let r = run(
        &f.host,
        "directory",
        &name,
        json!({"backupname": bak}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert!(file.is_dir());
    assert_eq!(fs::read_to_string(&bak).expect("backup"), "f");

    let l = f.work.join("l3");
    fs::write(&l, "i").expect("write");
    let ln = l.display().to_string();
    let r = run(
        &f.host,
        "symlink",
        &ln,
        json!({"target": "/etc/hosts", "backupname": "l3.bak"}),
        false,
    );
    assert_eq!(r.comment, format!("Created new symlink {ln} -> /etc/hosts"));
    assert_eq!(
        fs::read_to_string(f.work.join("l3.bak")).expect("backup"),
        "i"
    );
    let r = run(
        &f.host,
        "symlink",
        &ln,
        json!({"target": "/etc/hostname", "backupname": "a/b"}),
        false,
    );
    assert_eq!(
        r.result,
        Some(true),
        "a link is replaced, not backed up: {}",
        r.comment
    );
}

#[test]
fn mode_keep_copies_the_source_mode() {
    let f = fixture();
    let script = f.root.join("run.sh");
    fs::write(&script, "#!/bin/sh\n").expect("write");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).expect("chmod");
    let dest = f.work.join("run.sh");
    let r = run(
        &f.host,
        "managed",
        &dest.display().to_string(),
        json!({"source": "salt://run.sh", "mode": "keep"}),
        false,
    );
    assert_eq!(
        Value::Object(r.changes),
        json!({"diff": "New file", "mode": "0755"})
    );
    assert_eq!(mode_of(&dest), 0o755);
}

#[test]
fn bad_input_fails_cleanly() {
    let f = fixture();
    let p = f.work.join("odd").display().to_string();
    let r = run(&f.host, "managed", &p, json!({"contents": {"a": 1}}), false);
    assert_eq!(r.result, Some(false));
    assert!(r.comment.starts_with(
        "Contents specified by contents/contents_pillar/contents_grains is not a string"
    ));
    let err = try_run(
        &f.host,
        "managed",
        &p,
        json!({"contents": "x", "mode": "rwx"}),
        false,
    );
    assert_eq!(
        err.err().as_deref(),
        Some("Invalid mode '0rwx': give an octal mode such as 0644")
    );
    assert!(
        !Path::new(&p).exists(),
        "nothing is written when the mode is invalid"
    );
    let r = run(
        &f.host,
        "managed",
        &p,
        json!({"contents": "x", "context": [1]}),
        false,
    );
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(false), "Context must be formed as a dict")
    );
    let d = f.work.join("dir").display().to_string();
    let r = run(&f.host, "directory", &d, json!({"recurse": "user"}), false);
    assert_eq!(r.comment, "\"recurse\" must be formed as a list of strings");
    let r = run(
        &f.host,
        "directory",
        &d,
        json!({"recurse": ["bogus"]}),
        true,
    );
    assert!(
        r.comment.starts_with("Types for \"recurse\" limited to"),
        "{}",
        r.comment
    );
    let r = run(
        &f.host,
        "replace",
        &p,
        json!({"pattern": "(", "repl": "x"}),
        false,
    );
    assert_eq!(r.result, Some(false));
    let r = run(
        &f.host,
        "replace",
        "",
        json!({"pattern": "a", "repl": "x"}),
        false,
    );
    assert_eq!(r.comment, "Must provide name to file.replace");
    fs::write(&p, "x\n").expect("write");
    let r = run(&f.host, "line", &p, json!({"content": "x"}), false);
    assert_eq!(
        (r.result, r.comment.as_str()),
        (
            Some(false),
            "Mode was not defined. How to process the file?"
        )
    );
    let r = run(
        &f.host,
        "serialize",
        &p,
        json!({"formatter": "toml", "dataset": {}}),
        false,
    );
    assert!(r
        .comment
        .starts_with("The toml serializer could not be found"));
}

/// The real host plus the run's low chunks, as the executor provides them.
struct RunEnv {
    host: Host,
    low: Vec<LowChunk>,
}

impl halite_state::StateEnv for RunEnv {
    fn opts(&self) -> &Value {
        self.host.opts()
    }
    fn grains(&self) -> &Value {
        self.host.grains()
    }
    fn pillar(&self) -> &Value {
        self.host.pillar()
    }
    fn run_cmd(
        &self,
        cmd: &str,
        opts: &halite_state::CmdOptions,
    ) -> std::io::Result<halite_state::CmdOutput> {
        self.host.run_cmd(cmd, opts)
    }
    fn call_function(&self, fun: &str, args: &[Value], kwargs: &Map) -> Result<Value, String> {
        self.host.call_function(fun, args, kwargs)
    }
    fn file_client(&self) -> &dyn halite_state::FileClient {
        self.host.file_client()
    }
    fn render_template(
        &self,
        text: &str,
        engine: &str,
        context: &Map,
        saltenv: &str,
    ) -> Result<String, String> {
        self.host.render_template(text, engine, context, saltenv)
    }
    fn fire_event(&self, tag: &str, data: &Value) {
        self.host.fire_event(tag, data)
    }
    fn lowstate(&self) -> &[LowChunk] {
        &self.low
    }
}

#[test]
fn clean_resolves_required_ids_through_the_lowstate() {
    let f = fixture();
    let d = f.work.join("d");
    fs::create_dir_all(&d).expect("mkdir");
    fs::write(d.join("a.conf"), "a").expect("write");
    fs::write(d.join("junk"), "j").expect("write");
    let conf = d.join("a.conf").display().to_string();
    let managed = json!({"state": "file", "name": conf, "__id__": "conf_a", "fun": "managed"});
    let env = RunEnv {
        host: f.host.clone(),
        low: vec![LowChunk::from(
            managed.as_object().cloned().unwrap_or_default(),
        )],
    };
    let mut m = Map::new();
    m.insert("state".into(), json!("file"));
    m.insert("name".into(), json!(d.display().to_string()));
    m.insert("__id__".into(), json!("cleaned"));
    m.insert("clean".into(), json!(true));
    m.insert("require".into(), json!([{"file": "conf_a"}]));
    m.insert("fun".into(), json!("directory"));
    let chunk = LowChunk::from(m);
    let call = StateCall {
        chunk: &chunk,
        test: false,
        env: &env,
        sfun: None,
        reqs: None,
    };
    let r = FILE.call("directory", &call).expect("directory");
    assert_eq!(
        r.changes["removed"],
        json!([d.join("junk").display().to_string()])
    );
    assert!(d.join("a.conf").exists());
}
