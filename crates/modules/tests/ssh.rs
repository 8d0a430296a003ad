//! `ssh_auth` and `ssh_known_hosts` states and the `ssh` execution
//! functions on real `authorized_keys`/`known_hosts` files in temp dirs,
//! with keys made by the real `ssh-keygen`. The expected comments are
//! what Salt 3008.5 answered for the same calls on this host.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::path::Path;
use std::process::Command;

use halite_modules::{Args, Host};
use halite_state::{LowChunk, StateCall, StateResult};
use serde_json::{json, Value};

fn ready() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: the states run as user=root, which needs root");
        return false;
    }
    if Command::new("ssh-keygen").arg("-?").output().is_err() {
        println!("skipped: ssh-keygen is not installed (apt-get install openssh-client)");
        return false;
    }
    true
}

/// A new ed25519 public key line `ssh-ed25519 <key> <comment>`.
fn keypair(dir: &Path, name: &str, comment: &str) -> (String, String) {
    let path = dir.join(name);
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(&path)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "ssh-keygen");
    let line = std::fs::read_to_string(path.with_extension("pub"))
        .expect("public key")
        .trim()
        .to_string();
    let key = line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    (line, key)
}

fn host() -> Host {
    common::host()
}

fn state(host: &Host, module: &str, fun: &str, name: &str, args: Value, test: bool) -> StateResult {
    let mut chunk = serde_json::Map::new();
    chunk.insert("state".into(), json!(module));
    chunk.insert("name".into(), json!(name));
    chunk.insert("__id__".into(), json!(name));
    if let Value::Object(extra) = args {
        chunk.extend(extra);
    }
    chunk.insert("fun".into(), json!(fun));
    let chunk = LowChunk::from(chunk);
    let call = StateCall {
        chunk: &chunk,
        test,
        env: host,
        sfun: None,
        reqs: None,
    };
    match host.states.get(module).expect("module").call(fun, &call) {
        Ok(r) => r,
        Err(e) => StateResult::fail(name, e.to_string()),
    }
}

fn exec(host: &Host, fun: &str, kwargs: Value) -> Value {
    let kwargs = match kwargs {
        Value::Object(m) => m,
        _ => Default::default(),
    };
    host.call(
        fun,
        &Args {
            positional: vec![],
            kwargs,
        },
    )
    .unwrap_or_else(|e| panic!("{fun}: {e}"))
}

#[test]
fn ssh_auth_present_absent_manage_as_salt() {
    if !ready() {
        return;
    }
    let host = host();
    let dir = tempfile::tempdir().expect("tempdir");
    let (line1, k1) = keypair(dir.path(), "k1", "me@box");
    let (line2, k2) = keypair(dir.path(), "k2", "other");
    let config = dir.path().join("sub/authorized_keys");
    let cfg = json!(config.to_string_lossy());
    let args = json!({"user": "root", "config": cfg});

    let t = state(&host, "ssh_auth", "present", &line1, args.clone(), true);
    assert_eq!(t.result, None);
    assert_eq!(
        t.comment,
        format!("Key {k1} for user root is set to be added")
    );
    assert!(!config.exists());

    let r = state(&host, "ssh_auth", "present", &line1, args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.name, line1);
    assert_eq!(
        r.comment,
        format!("The authorized host key {k1} for user root was added")
    );
    assert_eq!(r.changes.get(&k1), Some(&json!("New")));
    assert_eq!(
        std::fs::read_to_string(&config).ok(),
        Some(format!("{line1}\n"))
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.permissions().mode() & 0o777)
            .ok()
    };
    assert_eq!(mode(&config), Some(0o600));
    assert_eq!(mode(config.parent().expect("dir")), Some(0o700));

    let bare = state(
        &host,
        "ssh_auth",
        "present",
        &k1,
        json!({"user": "root", "config": cfg, "enc": "ed25519", "comment": "me@box"}),
        false,
    );
    assert_eq!(
        bare.comment,
        format!("The authorized host key {k1} is already present for user root")
    );
    assert!(bare.changes.is_empty());

    let with_opts = format!("no-pty {line1}");
    let t = state(&host, "ssh_auth", "present", &with_opts, args.clone(), true);
    assert_eq!(
        t.comment,
        format!("Key {k1} for user root is set to be updated")
    );
    let r = state(
        &host,
        "ssh_auth",
        "present",
        &with_opts,
        args.clone(),
        false,
    );
    assert_eq!(
        r.comment,
        format!("The authorized host key {k1} for user root was updated")
    );
    assert_eq!(r.changes.get(&k1), Some(&json!("Updated")));
    assert_eq!(
        std::fs::read_to_string(&config).ok(),
        Some(format!("{with_opts}\n"))
    );

    let keys = exec(
        &host,
        "ssh.auth_keys",
        json!({"user": "root", "config": cfg}),
    );
    assert_eq!(keys[&k1]["options"], json!(["no-pty"]));
    assert_eq!(keys[&k1]["comment"], json!("me@box"));

    for bad in ["bad key", "AAAA@@"] {
        let r = state(&host, "ssh_auth", "present", bad, args.clone(), false);
        assert_eq!(r.result, Some(false));
        assert_eq!(
            r.comment,
            "Invalid public ssh key, most likely has spaces or invalid syntax"
        );
    }

    let r = state(&host, "ssh_auth", "absent", &line2, args.clone(), false);
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(true), "Key not present")
    );
    let t = state(&host, "ssh_auth", "absent", &line1, args.clone(), true);
    assert_eq!(
        t.comment,
        format!("Key {k1} for user root is set for removal")
    );

    let manage = json!({"user": "root", "config": cfg, "ssh_keys": [line2]});
    let t = state(&host, "ssh_auth", "manage", "x", manage.clone(), true);
    assert_eq!(t.result, None);
    assert_eq!(
        t.comment,
        format!("{k1} Key set for removal\nKey {k2} for user root is set to be added")
    );
    let r = state(&host, "ssh_auth", "manage", "x", manage.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.name, "");
    assert_eq!(r.changes.get(&k1), Some(&json!("Key removed")));
    assert_eq!(r.changes.get(&k2), Some(&json!("New")));
    assert_eq!(
        std::fs::read_to_string(&config).ok(),
        Some(format!("{line2}\n"))
    );

    let missing = state(
        &host,
        "ssh_auth",
        "present",
        &line1,
        json!({"config": cfg}),
        false,
    );
    assert_eq!(
        missing.comment,
        "Missing parameter user for state ssh_auth.present"
    );
}

#[test]
fn ssh_auth_source_file_adds_every_key() {
    if !ready() {
        return;
    }
    let host = host();
    let dir = tempfile::tempdir().expect("tempdir");
    let (line1, k1) = keypair(dir.path(), "k1", "a");
    let (line2, k2) = keypair(dir.path(), "k2", "b");
    let src = dir.path().join("keys.pub");
    std::fs::write(&src, format!("# team\n{line1}\n{line2}\n")).expect("write");
    let config = dir.path().join("ak");
    let args = json!({"user": "root", "config": config.to_string_lossy(), "source": src.to_string_lossy()});
    let t = state(&host, "ssh_auth", "present", "team", args.clone(), true);
    assert_eq!(t.comment, format!("Set to add: {k1}\nSet to add: {k2}\n"));
    let r = state(&host, "ssh_auth", "present", "team", args.clone(), false);
    assert_eq!(
        r.comment,
        "The authorized host key team for user root was added"
    );
    let t = state(&host, "ssh_auth", "present", "team", args.clone(), true);
    assert_eq!(t.result, Some(true));
    assert_eq!(
        t.comment,
        format!(
            "All host keys in file {} are already present",
            src.display()
        )
    );
    let r = state(&host, "ssh_auth", "absent", "team", args, false);
    assert_eq!(r.comment, "Key removed");
    assert_eq!(std::fs::read_to_string(&config).ok(), Some(String::new()));
}

#[test]
fn ssh_known_hosts_key_form_add_update_remove() {
    if !ready() {
        return;
    }
    let host = host();
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, k1) = keypair(dir.path(), "k1", "a");
    let (_, k2) = keypair(dir.path(), "k2", "b");
    let config = dir.path().join("kh/known_hosts");
    let c = config.to_string_lossy().into_owned();
    let args = |key: &str, extra: Value| {
        let mut m = json!({"key": key, "enc": "ssh-ed25519", "config": c});
        if let (Some(m), Value::Object(e)) = (m.as_object_mut(), extra) {
            m.extend(e);
        }
        m
    };
    let kh = "ssh_known_hosts";
    let t = state(
        &host,
        kh,
        "present",
        "example.test",
        args(&k1, json!({})),
        true,
    );
    assert_eq!(
        t.comment,
        format!("Key for example.test is set to be added to {c}")
    );
    let r = state(
        &host,
        kh,
        "present",
        "example.test",
        args(&k1, json!({"hash_known_hosts": false})),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        r.comment,
        format!("example.test's key saved to {c} (key: {k1})")
    );
    assert_eq!(r.changes.get("old"), Some(&Value::Null));
    assert_eq!(
        r.changes.get("new"),
        Some(&json!([{"hostname": "example.test", "enc": "ssh-ed25519", "key": k1}]))
    );
    assert_eq!(
        std::fs::read_to_string(&config).ok(),
        Some(format!("example.test ssh-ed25519 {k1}\n"))
    );
    let again = state(
        &host,
        kh,
        "present",
        "example.test",
        args(&k1, json!({"hash_known_hosts": false})),
        false,
    );
    assert_eq!(again.comment, format!("example.test already exists in {c}"));
    let t = state(
        &host,
        kh,
        "present",
        "example.test",
        args(&k1, json!({})),
        true,
    );
    assert_eq!(
        (t.result, t.comment.clone()),
        (Some(true), format!("Host example.test is already in {c}"))
    );
    let t = state(
        &host,
        kh,
        "present",
        "example.test",
        args(&k2, json!({})),
        true,
    );
    assert_eq!(
        t.comment,
        format!("Key for example.test is set to be updated in {c}")
    );

    // Hashed by default, and found again through ssh-keygen -F.
    let r = state(
        &host,
        kh,
        "present",
        "other.test",
        args(&k2, json!({})),
        false,
    );
    assert_eq!(
        r.comment,
        format!("other.test's key saved to {c} (key: {k2})")
    );
    let text = std::fs::read_to_string(&config).unwrap_or_default();
    assert!(
        !text.contains("other.test") && text.starts_with("|1|"),
        "{text}"
    );
    let found = exec(
        &host,
        "ssh.get_known_host_entries",
        json!({"user": null, "hostname": "other.test", "config": c}),
    );
    assert_eq!(found[0]["key"], json!(k2));

    let t = state(
        &host,
        kh,
        "present",
        "example.test",
        json!({"key": k1, "config": c}),
        true,
    );
    assert_eq!(
        t.comment,
        "Required argument \"enc\" if using \"key\" argument."
    );
    let bad = state(
        &host,
        kh,
        "present",
        "example.test",
        json!({"key": k1, "config": "relative"}),
        false,
    );
    assert_eq!(
        bad.comment,
        "If not specifying a \"user\", specify an absolute \"config\"."
    );

    let t = state(
        &host,
        kh,
        "absent",
        "example.test",
        json!({"config": c}),
        true,
    );
    assert_eq!(
        t.comment,
        format!("Key for example.test is set to be removed from {c}")
    );
    let r = state(
        &host,
        kh,
        "absent",
        "example.test",
        json!({"config": c}),
        false,
    );
    assert_eq!(r.result, Some(true));
    assert!(
        r.comment.starts_with("# Host example.test found: line 1\n"),
        "{}",
        r.comment
    );
    assert_eq!(r.changes.get("new"), Some(&Value::Null));
    assert_eq!(r.changes["old"][0]["key"], json!(k1));
    let r = state(
        &host,
        kh,
        "absent",
        "example.test",
        json!({"config": c}),
        false,
    );
    assert_eq!(r.comment, "Host is already absent");
}

#[test]
fn ssh_known_hosts_unreachable_host_is_an_error() {
    if !ready() {
        return;
    }
    let host = host();
    let dir = tempfile::tempdir().expect("tempdir");
    let c = dir
        .path()
        .join("known_hosts")
        .to_string_lossy()
        .into_owned();
    // Port 1 on loopback: nothing listens, ssh-keyscan gets no key.
    let r = state(
        &host,
        "ssh_known_hosts",
        "present",
        "127.0.0.1",
        json!({"port": 1, "hash_known_hosts": false, "config": c, "timeout": 1}),
        false,
    );
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(false), "Unable to receive remote host keys")
    );
    let r = state(
        &host,
        "ssh_known_hosts",
        "present",
        "127.0.0.1",
        json!({"port": 2222, "config": c}),
        false,
    );
    assert_eq!(
        r.comment,
        "argument port can not be used in conjunction with argument hash_known_hosts"
    );
}

/// A user with its home in a temp dir, removed afterwards.
struct TestUser(String);

impl Drop for TestUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").args(["-f", &self.0]).output();
    }
}

#[test]
fn ssh_auth_default_config_lands_in_the_users_home_owned_by_them() {
    if !ready() {
        return;
    }
    let host = host();
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let name = format!("hssh{}", std::process::id() % 100000);
    let ok = Command::new("useradd")
        .args(["-m", "-d"])
        .arg(&home)
        .arg(&name)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "useradd {name}");
    let _user = TestUser(name.clone());
    let (line, key) = keypair(dir.path(), "k", "me@box");
    let r = state(
        &host,
        "ssh_auth",
        "present",
        &line,
        json!({"user": name}),
        false,
    );
    assert_eq!(
        r.comment,
        format!("The authorized host key {key} for user {name} was added")
    );
    let file = home.join(".ssh/authorized_keys");
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(&file).expect("authorized_keys in the home");
    let uid = nix::unistd::User::from_name(&name)
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw());
    assert_eq!(Some(meta.uid()), uid, "owned by the user");
    assert_eq!(meta.mode() & 0o777, 0o600);
    let dmeta = std::fs::metadata(home.join(".ssh")).expect(".ssh");
    assert_eq!((Some(dmeta.uid()), dmeta.mode() & 0o777), (uid, 0o700));
    let keys = exec(&host, "ssh.auth_keys", json!({"user": name}));
    assert_eq!(keys[&key]["enc"], json!("ssh-ed25519"));
    let gone = state(
        &host,
        "ssh_auth",
        "absent",
        &line,
        json!({"user": name}),
        false,
    );
    assert_eq!(gone.comment, "Key removed");
    let nouser = state(
        &host,
        "ssh_auth",
        "present",
        &line,
        json!({"user": "halite-no-such-user"}),
        false,
    );
    assert_eq!(nouser.result, Some(false));
    assert_eq!(
        nouser.comment,
        "Failed to add the ssh key. Is the home directory available, and/or does the key file exist?"
    );
}
