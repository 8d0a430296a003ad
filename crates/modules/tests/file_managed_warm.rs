//! A warm `file.managed` stats its target once and carries that stat
//! through its phases (issue 25, session 22): what it decides must still
//! be what Salt 3008.5 decides when the target differs only in its mode or
//! owner, only in bytes of the same length, or was changed by the state's
//! own `check_cmd` between the check and the write. Real files in temp
//! dirs.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use halite_modules::Host;
use halite_state::{StateResult, Value};
use serde_json::json;

fn managed(host: &Host, name: &Path, args: Value) -> StateResult {
    common::state(host, "file", "managed", name.to_str().unwrap(), args, false)
}

fn mode_of(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

struct Fixture {
    _dir: tempfile::TempDir,
    /// The source, as the state's `source` argument (a local path: the
    /// same comparison and write as a cached `salt://` copy).
    source: String,
    target: std::path::PathBuf,
    host: Host,
}

/// A source file holding `source`, and a target path beside it.
fn fixture(source: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.txt");
    fs::write(&src, source).unwrap();
    Fixture {
        source: src.display().to_string(),
        target: dir.path().join("target.txt"),
        host: common::host(),
        _dir: dir,
    }
}

/// Same content, another mode (and, as root, another owner and group):
/// only the metadata is fixed, reported as Salt reports it; the next run
/// finds nothing to do.
#[test]
fn a_target_whose_mode_or_owner_differs_is_still_fixed() {
    let f = fixture("same bytes\n");
    fs::write(&f.target, "same bytes\n").unwrap();
    fs::set_permissions(&f.target, fs::Permissions::from_mode(0o600)).unwrap();
    let mut args = json!({"source": f.source, "mode": "0644"});
    if is_root() {
        std::os::unix::fs::chown(&f.target, Some(0), Some(0)).unwrap();
        args["user"] = json!("nobody");
        args["group"] = json!("daemon");
    }
    let r = managed(&f.host, &f.target, args.clone());
    let name = f.target.display();
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, format!("File {name} updated"));
    let mut want = json!({"mode": "0644"});
    if is_root() {
        want["user"] = json!("nobody");
        want["group"] = json!("daemon");
    }
    assert_eq!(Value::Object(r.changes.clone()), want);
    assert_eq!(mode_of(&f.target), 0o644);
    if is_root() {
        let md = fs::metadata(&f.target).unwrap();
        let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
        let daemon = nix::unistd::Group::from_name("daemon").unwrap().unwrap();
        assert_eq!(
            (md.uid(), md.gid()),
            (nobody.uid.as_raw(), daemon.gid.as_raw())
        );
    }
    let again = managed(&f.host, &f.target, args);
    assert_eq!(again.result, Some(true), "{}", again.comment);
    assert!(again.changes.is_empty(), "{:?}", again.changes);
    assert_eq!(
        again.comment,
        format!("File {name} is in the correct state")
    );
}

/// A target of the source's length with other bytes is rewritten (the
/// size carried from the stat tells nothing there: the bytes are read),
/// and one of another length too.
#[test]
fn a_target_of_the_same_length_with_other_bytes_is_rewritten() {
    let f = fixture("new line\n");
    for old in ["old line\n", "an older, longer line\n"] {
        fs::write(&f.target, old).unwrap();
        let r = managed(&f.host, &f.target, json!({"source": f.source}));
        assert_eq!(r.result, Some(true), "{}", r.comment);
        let diff = r.changes.get("diff").and_then(Value::as_str).unwrap_or("");
        assert!(diff.contains("+new line"), "{old:?}: {:?}", r.changes);
        assert_eq!(fs::read_to_string(&f.target).unwrap(), "new line\n");
    }
    let inline = managed(&f.host, &f.target, json!({"contents": "new lime"}));
    assert!(inline.changes.contains_key("diff"), "{:?}", inline.changes);
    assert_eq!(fs::read_to_string(&f.target).unwrap(), "new lime\n");
}

/// The state's `check_cmd` runs between the check and the write; here it
/// puts the new content in place itself and narrows the mode. What the
/// state decides after it is read from the disk again: the content is
/// already right (no diff, no second write), the mode is fixed.
#[test]
fn a_target_changed_between_check_and_act_is_read_again() {
    let f = fixture("checked and placed\n");
    fs::write(&f.target, "before\n").unwrap();
    fs::set_permissions(&f.target, fs::Permissions::from_mode(0o644)).unwrap();
    let name = f.target.display().to_string();
    // `check_cmd` is run as `<cmd> <temp file with the new content>`.
    let cmd = format!("sh -c 'cat \"$0\" > {name} && chmod 0600 {name}'");
    let r = managed(
        &f.host,
        &f.target,
        json!({"source": f.source, "mode": "0644", "check_cmd": cmd}),
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(Value::Object(r.changes.clone()), json!({"mode": "0644"}));
    assert_eq!(r.comment, format!("File {name} updated"));
    assert_eq!(
        fs::read_to_string(&f.target).unwrap(),
        "checked and placed\n"
    );
    assert_eq!(mode_of(&f.target), 0o644);
}
