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

#[test]
fn rename_moves_once_and_respects_force() {
    let (dir, h) = setup();
    let (src, dst) = (p(&dir, "old.txt"), p(&dir, "sub/new.txt"));
    fs::write(&src, "moved").unwrap();
    let t = run(
        &h,
        "rename",
        &dst,
        json!({"source": src, "makedirs": true}),
        true,
    );
    assert_eq!(
        (t.result, t.comment.clone()),
        (
            None,
            format!("File \"{src}\" is set to be moved to \"{dst}\"")
        )
    );
    assert!(Path::new(&src).exists());
    let r = run(
        &h,
        "rename",
        &dst,
        json!({"source": src, "makedirs": true}),
        false,
    );
    assert_eq!(r.comment, format!("Moved \"{src}\" to \"{dst}\""));
    assert_eq!(r.changes[&dst], json!(src));
    assert_eq!(fs::read_to_string(&dst).unwrap(), "moved");
    assert!(!Path::new(&src).exists());
    let again = run(&h, "rename", &dst, json!({"source": src}), false);
    assert_eq!(
        again.comment,
        format!("Source file \"{src}\" has already been moved out of place")
    );
    let other = p(&dir, "other.txt");
    fs::write(&other, "other").unwrap();
    let r = run(&h, "rename", &dst, json!({"source": other}), false);
    assert_eq!(
        r.comment,
        format!("The target file \"{dst}\" exists and will not be overwritten")
    );
    assert_eq!(fs::read_to_string(&dst).unwrap(), "moved");
    let r = run(
        &h,
        "rename",
        &dst,
        json!({"source": other, "force": true}),
        false,
    );
    assert_eq!(r.result, Some(true));
    assert_eq!(fs::read_to_string(&dst).unwrap(), "other");
    let r = run(
        &h,
        "rename",
        &p(&dir, "nodir/x"),
        json!({"source": dst}),
        false,
    );
    assert_eq!(r.result, Some(false));
    assert_eq!(
        r.comment,
        format!("The target directory {} is not present", p(&dir, "nodir"))
    );
    assert!(Path::new(&dst).exists(), "a failed rename loses nothing");
}

#[test]
fn hardlink_creates_checks_and_forces() {
    use std::os::unix::fs::MetadataExt;
    let (dir, h) = setup();
    let (target, link, plain) = (p(&dir, "target"), p(&dir, "link"), p(&dir, "plain"));
    fs::write(&target, "data").unwrap();
    fs::write(&plain, "plain").unwrap();
    let t = run(&h, "hardlink", &link, json!({"target": target}), true);
    assert_eq!(t.result, None);
    assert_eq!(t.changes["new"], json!(link));
    let r = run(&h, "hardlink", &link, json!({"target": target}), false);
    assert_eq!(
        r.comment,
        format!("Created new hard link {link} -> {target}")
    );
    let ino = |p: &str| fs::metadata(p).unwrap().ino();
    assert_eq!(ino(&link), ino(&target));
    let again = run(&h, "hardlink", &link, json!({"target": target}), false);
    assert_eq!((again.result, again.changes.len()), (Some(true), 0));
    let r = run(&h, "hardlink", &plain, json!({"target": target}), false);
    assert_eq!(r.result, Some(false));
    assert_eq!(fs::read_to_string(&plain).unwrap(), "plain");
    let r = run(
        &h,
        "hardlink",
        &plain,
        json!({"target": target, "force": true}),
        false,
    );
    assert_eq!(
        r.changes["forced"],
        json!("File for hard link was forcibly replaced")
    );
    assert_eq!(ino(&plain), ino(&target));
    let r = run(
        &h,
        "hardlink",
        &p(&dir, "x"),
        json!({"target": p(&dir, "missing")}),
        false,
    );
    assert_eq!(
        r.comment,
        format!("Target {} for hard link does not exist", p(&dir, "missing"))
    );
}

#[test]
fn tidied_removes_matching_entries_bottom_up() {
    let (dir, h) = setup();
    let top = p(&dir, "logs");
    fs::create_dir_all(dir.path().join("logs/sub")).unwrap();
    fs::write(dir.path().join("logs/a.log"), "x").unwrap();
    fs::write(dir.path().join("logs/sub/b.log"), "x").unwrap();
    fs::write(dir.path().join("logs/keep.txt"), "x").unwrap();
    let args = json!({"matches": [r".*\.log$"]});
    let t = run(&h, "tidied", &top, args.clone(), true);
    assert_eq!(t.comment, format!("{top} is set for tidy"));
    assert_eq!(
        t.changes["removed"],
        json!([p(&dir, "logs/sub/b.log"), p(&dir, "logs/a.log")])
    );
    assert!(dir.path().join("logs/a.log").exists());
    let r = run(&h, "tidied", &top, args.clone(), false);
    assert_eq!(
        r.comment,
        format!("Removed 2 files or directories from directory {top}")
    );
    assert!(!dir.path().join("logs/a.log").exists());
    assert!(dir.path().join("logs/keep.txt").exists());
    assert!(
        dir.path().join("logs/sub").is_dir(),
        "rmdirs is off by default"
    );
    let r = run(
        &h,
        "tidied",
        &top,
        json!({"size": "1MB", "age_size_logical_operator": "and"}),
        false,
    );
    assert_eq!(r.comment, format!("Nothing to remove from directory {top}"));
    let r = run(
        &h,
        "tidied",
        &top,
        json!({"age_size_only": "size", "size": "1", "rmdirs": true, "exclude": ["keep"]}),
        false,
    );
    assert_eq!(r.comment, format!("Nothing to remove from directory {top}"));
    assert!(dir.path().join("logs/keep.txt").exists());
}

#[test]
fn accumulated_text_reaches_managed_template_and_blockreplace() {
    let (dir, h) = setup();
    fs::write(
        dir.path().join("srv/conf.j2"),
        "{% for n, lines in accumulator|dictsort %}{{ n }}:{{ lines|join(',') }}\n{% endfor %}",
    )
    .unwrap();
    let managed = p(&dir, "managed.conf");
    let block = p(&dir, "block.conf");
    fs::write(
        &block,
        "a\n#-- start managed zone --\n#-- end managed zone --\n",
    )
    .unwrap();
    let high = json!({
        "acc1": {"__sls__": "t", "__env__": "base", "file": ["accumulated",
            {"name": "hosts"}, {"filename": managed}, {"text": ["x", "y"]},
            {"require_in": [{"file": "target"}]}]},
        "acc2": {"__sls__": "t", "__env__": "base", "file": ["accumulated",
            {"name": "hosts"}, {"filename": managed}, {"text": "z"},
            {"require_in": [{"file": "target"}]}]},
        "target": {"__sls__": "t", "__env__": "base", "file": ["managed",
            {"name": managed}, {"source": "salt://conf.j2"}, {"template": "jinja"}]},
        "blk_acc": {"__sls__": "t", "__env__": "base", "file": ["accumulated",
            {"name": "lines"}, {"filename": block}, {"text": "from acc"},
            {"require_in": [{"file": "blk"}]}]},
        "blk": {"__sls__": "t", "__env__": "base", "file": ["blockreplace",
            {"name": block}, {"content": "first"}]},
        "orphan": {"__sls__": "t", "__env__": "base", "file": ["accumulated",
            {"name": "lost"}, {"filename": managed}, {"text": "q"}]},
    });
    let Value::Object(high) = high else {
        unreachable!()
    };
    let running = halite_state::call_high(
        high,
        Default::default(),
        &h.states,
        &h,
        halite_state::RunOptions::default(),
    )
    .expect("the high data compiles");
    assert_eq!(fs::read_to_string(&managed).unwrap(), "hosts:x,y,z\n");
    assert_eq!(
        fs::read_to_string(&block).unwrap(),
        "a\n#-- start managed zone --\nfirst\nfrom acc\n#-- end managed zone --\n"
    );
    let orphan = running
        .iter()
        .find(|(k, _)| k.contains("_|-orphan_|-"))
        .map(|(_, v)| v.get("comment").cloned())
        .unwrap();
    assert_eq!(orphan, Some(json!("Orphaned accumulator lost in t:orphan")));
}

#[test]
fn cached_copies_a_salt_file_into_the_cache_and_not_cached_removes_it() {
    let (dir, h) = setup();
    fs::write(dir.path().join("srv/payload.txt"), "cached content\n").unwrap();
    let cached = dir.path().join("cache/files/base/payload.txt");
    let t = run(&h, "cached", "salt://payload.txt", json!({}), true);
    assert_eq!(
        (t.result, t.comment.as_str()),
        (None, "File will be cached: salt://payload.txt")
    );
    assert!(!cached.exists());
    let r = run(&h, "cached", "salt://payload.txt", json!({}), false);
    assert_eq!(r.comment, format!("File is cached to {}", cached.display()));
    assert_eq!(fs::read_to_string(&cached).unwrap(), "cached content\n");
    let sum = "852390bf76068979d6e32161b89050a00431da9b76754134f1bbba34eee54e32";
    assert_eq!(r.changes["hash"], json!({"old": null, "new": sum}));
    let r = run(
        &h,
        "cached",
        "salt://payload.txt",
        json!({"source_hash": format!("sha256={sum}")}),
        false,
    );
    assert_eq!(
        r.comment,
        format!(
            "File is already cached to {} with hash {sum}",
            cached.display()
        )
    );
    let r = run(
        &h,
        "cached",
        "salt://payload.txt",
        json!({"source_hash": "0".repeat(64)}),
        false,
    );
    assert_eq!(r.result, Some(false));
    let t = run(&h, "not_cached", "salt://payload.txt", json!({}), true);
    assert_eq!(t.result, None);
    assert!(cached.exists(), "test mode deletes nothing");
    let r = run(&h, "not_cached", "salt://payload.txt", json!({}), false);
    assert_eq!(
        (r.result, r.changes["deleted"].clone()),
        (Some(true), json!(true))
    );
    assert!(!cached.exists());
    assert!(
        dir.path().join("srv/payload.txt").exists(),
        "the file server's copy stays"
    );
    let r = run(&h, "cached", "https://127.0.0.1:1/x.tgz", json!({}), false);
    assert_eq!(r.result, Some(false));
    assert!(r
        .comment
        .starts_with("Unable to verify upstream hash of source file"));
}

#[test]
fn decode_writes_base64_from_state_and_pillar() {
    let (dir, mut h) = setup();
    h.pillar = json!({"certs": {"key": "aGVsbG8gd29ybGQK"}});
    let out = p(&dir, "hello.txt");
    let t = run(
        &h,
        "decode",
        &out,
        json!({"encoded_data": "aGVsbG8g\nd29ybGQK\n"}),
        true,
    );
    assert_eq!(
        (t.result, t.comment.as_str()),
        (None, "File is set to be updated.")
    );
    assert!(!Path::new(&out).exists());
    let r = run(
        &h,
        "decode",
        &out,
        json!({"encoded_data": "aGVsbG8g\nd29ybGQK\n"}),
        false,
    );
    assert_eq!(r.changes["new"], json!("6f5902ac237024bdd0c176cb93063dc4"));
    assert_eq!(fs::read_to_string(&out).unwrap(), "hello world\n");
    let r = run(
        &h,
        "decode",
        &out,
        json!({"contents_pillar": "certs:key"}),
        false,
    );
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(true), "File is in the correct state.")
    );
    let c1 = chunk("decode", &out, json!({}));
    let call = StateCall {
        chunk: &c1,
        test: false,
        env: &h,
        sfun: None,
        reqs: None,
    };
    let err = FILE
        .call("decode", &call)
        .map(|r| r.comment)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "Specify either the 'encoded_data' or 'contents_pillar' argument."
    );
    let c2 = chunk("decode", &out, json!({"encoded_data": "!!!not base64"}));
    let call = StateCall {
        chunk: &c2,
        test: false,
        env: &h,
        sfun: None,
        reqs: None,
    };
    assert!(FILE.call("decode", &call).is_err());
    assert_eq!(
        fs::read_to_string(&out).unwrap(),
        "hello world\n",
        "bad input loses nothing"
    );
}

#[test]
fn patch_applies_with_the_patch_binary_once() {
    let (dir, h) = setup();
    if !Path::new("/usr/bin/patch").exists() {
        eprintln!("skipping: no patch binary");
        return;
    }
    fs::write(
        dir.path().join("srv/fix.patch"),
        "--- a/t\n+++ b/t\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n",
    )
    .unwrap();
    let target = p(&dir, "t.txt");
    fs::write(&target, "one\ntwo\nthree\n").unwrap();
    let args = json!({"source": "salt://fix.patch"});
    let t = run(&h, "patch", &target, args.clone(), true);
    assert_eq!(
        (t.result, t.comment.as_str()),
        (None, "The patch would be applied")
    );
    assert_eq!(fs::read_to_string(&target).unwrap(), "one\ntwo\nthree\n");
    let r = run(&h, "patch", &target, args.clone(), false);
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(true), "Patch successfully applied")
    );
    assert_eq!(
        r.changes["stdout"],
        json!(format!("patching file {target}"))
    );
    assert_eq!(fs::read_to_string(&target).unwrap(), "one\nTWO\nthree\n");
    let again = run(&h, "patch", &target, args, false);
    assert_eq!(
        (again.result, again.comment.as_str()),
        (Some(true), "Patch was already applied")
    );
    let other = p(&dir, "o.txt");
    fs::write(&other, "alpha\nbeta\n").unwrap();
    let r = run(
        &h,
        "patch",
        &other,
        json!({"source": "salt://fix.patch"}),
        false,
    );
    assert_eq!(r.result, Some(false));
    assert!(
        r.comment
            .starts_with("Patch would not apply cleanly, no changes made."),
        "{}",
        r.comment
    );
    assert_eq!(fs::read_to_string(&other).unwrap(), "alpha\nbeta\n");
    let r = run(
        &h,
        "patch",
        &target,
        json!({"source": "salt://fix.patch", "options": "-o /tmp/x"}),
        false,
    );
    assert_eq!(r.comment, "The following CLI options are not allowed: -o");
}

#[test]
fn patch_a_directory_with_strip() {
    let (dir, h) = setup();
    if !Path::new("/usr/bin/patch").exists() {
        eprintln!("skipping: no patch binary");
        return;
    }
    fs::write(
        dir.path().join("srv/tree.patch"),
        "--- a/sub/f.txt\n+++ b/sub/f.txt\n@@ -1 +1 @@\n-old\n+new\n",
    )
    .unwrap();
    fs::create_dir_all(dir.path().join("tree/sub")).unwrap();
    fs::write(dir.path().join("tree/sub/f.txt"), "old\n").unwrap();
    let tree = p(&dir, "tree");
    let r = run(
        &h,
        "patch",
        &tree,
        json!({"source": "salt://tree.patch", "strip": 1}),
        false,
    );
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(true), "Patch successfully applied"),
        "{:?}",
        r.changes
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("tree/sub/f.txt")).unwrap(),
        "new\n"
    );
    let r = run(
        &h,
        "patch",
        &tree,
        json!({"source": "salt://tree.patch", "options": "-p1"}),
        false,
    );
    assert_eq!(r.comment, "Patch was already applied");
}
