//! Execution functions real formulas call at render time: `cp.list_master_dirs`
//! (users-formula) and `status.time` (postgres-formula's pillar.example).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use halite_modules::host::LogEvents;
use halite_modules::{table, Args, Host, LocalFileClient};
use serde_json::{json, Value};

fn host(root: PathBuf) -> Host {
    let mut roots = BTreeMap::new();
    roots.insert("base".to_string(), vec![root]);
    Host {
        opts: json!({}),
        grains: json!({}),
        pillar: json!({}),
        files: Arc::new(LocalFileClient::new(roots)),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    }
}

fn kw(pairs: &[(&str, &str)]) -> Args {
    let mut a = Args::default();
    for (k, v) in pairs {
        a.kwargs.insert(k.to_string(), Value::from(*v));
    }
    a
}

#[test]
fn list_master_dirs_filters_by_string_prefix_as_salt() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    for d in ["users/files/user/alice", "users/files/bashrc", "other"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(root.join("users/files/bashrc/x"), "x").unwrap();
    let h = host(root);
    // Salt 3008.5: prefix 'users/files/user/' -> ['users/files/user', 'users/files/user/alice']
    let got = h
        .call(
            "cp.list_master_dirs",
            &kw(&[("prefix", "users/files/user/")]),
        )
        .unwrap();
    assert_eq!(got, json!(["users/files/user", "users/files/user/alice"]));
    let got = h
        .call("cp.list_master_dirs", &kw(&[("prefix", "users/files")]))
        .unwrap();
    assert_eq!(
        got,
        json!([
            "users/files",
            "users/files/bashrc",
            "users/files/user",
            "users/files/user/alice"
        ])
    );
    let got = h
        .call("cp.list_master_dirs", &kw(&[("prefix", "nope/")]))
        .unwrap();
    assert_eq!(got, json!([]));
    let got = h
        .call("cp.list_master", &kw(&[("prefix", "users")]))
        .unwrap();
    assert_eq!(got, json!(["users/files/bashrc/x"]));
}

#[test]
fn status_time_formats_like_strftime() {
    let dir = tempfile::tempdir().unwrap();
    let h = host(dir.path().to_path_buf());
    let mut a = Args::default();
    a.positional.push(json!("%y-%m-%d_%H:%M:%S"));
    let got = h.call("status.time", &a).unwrap();
    let s = got.as_str().unwrap();
    assert_eq!(s.len(), 17, "{s}");
    assert_eq!(&s[2..3], "-");
    assert_eq!(&s[8..9], "_");
    let year = h.call("status.time", &kw(&[("format", "%Y")])).unwrap();
    assert_eq!(year.as_str().unwrap().len(), 4);
    // A bad directive is an error, not a panic.
    let mut bad = Args::default();
    bad.positional.push(json!("%Q%"));
    let _ = h.call("status.time", &bad);
}

#[test]
fn list_states_names_every_sls_as_salt() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    std::fs::create_dir_all(root.join("php/ng/cli")).unwrap();
    for f in [
        "top.sls",
        "php/init.sls",
        "php/ng/cli/init.sls",
        "php/ng/curl.sls",
        "php/map.jinja",
    ] {
        std::fs::write(root.join(f), "").unwrap();
    }
    let h = host(root);
    let got = h.call("cp.list_states", &Args::default()).unwrap();
    assert_eq!(got, json!(["php", "php.ng.cli", "php.ng.curl", "top"]));
}

#[test]
fn alternatives_show_current_reads_the_link_or_gives_false() {
    use halite_modules::exec::alternatives::show_current;
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/usr/bin/php8.2", dir.path().join("php")).unwrap();
    std::fs::write(dir.path().join("plain"), "").unwrap();
    assert_eq!(show_current(dir.path(), "php"), json!("/usr/bin/php8.2"));
    assert_eq!(show_current(dir.path(), "plain"), json!(false));
    assert_eq!(show_current(dir.path(), "missing"), json!(false));
    assert_eq!(show_current(dir.path(), "../etc"), json!(false));
    assert_eq!(show_current(dir.path(), ""), json!(false));
}
