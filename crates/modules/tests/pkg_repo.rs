//! apt repo functions and `pkgrepo` states on a temp basedir: real files,
//! no root, no apt run (`refresh: False`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use halite_modules::exec::Args;
use halite_modules::host::LogEvents;
use halite_modules::{table, Host, LocalFileClient};
use halite_state::{LowChunk, Map, StateCall, StateResult, Value};
use serde_json::json;

fn host() -> Host {
    host_with_root(None)
}

fn host_with_root(root: Option<&Path>) -> Host {
    let mut roots = BTreeMap::new();
    if let Some(r) = root {
        roots.insert("base".to_string(), vec![r.to_path_buf()]);
    }
    Host {
        opts: json!({}),
        grains: json!({"os_family": "Debian"}),
        pillar: json!({}),
        files: Arc::new(LocalFileClient::new(roots)),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    }
}

fn call(host: &Host, fun: &str, args: Value, kwargs: Value) -> Result<Value, String> {
    let args = Args {
        positional: args.as_array().cloned().unwrap_or_default(),
        kwargs: kwargs.as_object().cloned().unwrap_or_default(),
    };
    host.call(fun, &args).map_err(|e| e.to_string())
}

fn state(host: &Host, fun: &str, name: &str, args: Value, test: bool) -> StateResult {
    let mut chunk = Map::new();
    chunk.insert("state".into(), json!("pkgrepo"));
    chunk.insert("name".into(), json!(name));
    chunk.insert("__sls__".into(), json!("repos"));
    chunk.insert("__env__".into(), json!("base"));
    chunk.insert("__id__".into(), json!(name));
    chunk.extend(args.as_object().cloned().unwrap_or_default());
    chunk.insert("fun".into(), json!(fun));
    let chunk = LowChunk::from(chunk);
    let call = StateCall {
        chunk: &chunk,
        test,
        env: host,
        sfun: None,
        reqs: None,
    };
    let module = host
        .states
        .get("pkgrepo")
        .unwrap_or_else(|| panic!("pkgrepo not registered"));
    module
        .call(fun, &call)
        .unwrap_or_else(|e| panic!("{fun}: {e}"))
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

#[test]
fn list_get_mod_del_repo_on_a_temp_basedir() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let base = tmp.path().display().to_string();
    let h = host();
    std::fs::write(
        tmp.path().join("sources.list"),
        "# comment\ndeb http://deb.example/debian bookworm main\n",
    )
    .unwrap_or_else(|e| panic!("write: {e}"));
    let kw = json!({"basedir": base});

    let repos = call(&h, "pkg.list_repos", json!([]), kw.clone()).unwrap_or_else(|e| panic!("{e}"));
    let entry = &repos["http://deb.example/debian"][0];
    assert_eq!(entry["dist"], json!("bookworm"));
    assert_eq!(entry["comps"], json!(["main"]));
    assert_eq!(entry["disabled"], json!(false));
    assert_eq!(
        entry["line"],
        json!("deb http://deb.example/debian bookworm main")
    );

    let line = "deb [signed-by=/usr/share/keyrings/x.gpg] http://other.example/apt stable main";
    let file = tmp.path().join("sources.list.d/other.list");
    let mut kw_file = kw.clone();
    kw_file["file"] = json!(file.display().to_string());
    let ret = call(&h, "pkg.mod_repo", json!([line]), kw_file).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ret[line]["signedby"], json!("/usr/share/keyrings/x.gpg"));
    assert_eq!(read(&file), format!("{line}\n"));

    let got = call(
        &h,
        "pkg.get_repo",
        json!(["deb http://other.example/apt stable"]),
        kw.clone(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got["file"], json!(file.display().to_string()));
    let none = call(
        &h,
        "pkg.get_repo",
        json!(["deb http://nowhere.example/ x"]),
        kw.clone(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(none, json!({}));

    // Modify in place: disable it.
    let mut disable = kw.clone();
    disable["disabled"] = json!(true);
    call(&h, "pkg.mod_repo", json!([line]), disable).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(read(&file), format!("# {line}\n"));

    let msg = call(&h, "pkg.del_repo", json!([line]), kw.clone()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        msg,
        json!(format!(
            "File {} containing repo '{line}' has been removed.\n",
            file.display()
        ))
    );
    assert!(!file.exists());
    let msg = call(
        &h,
        "pkg.del_repo",
        json!(["deb http://deb.example/debian bookworm main"]),
        kw.clone(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(msg.as_str().is_some_and(|m| m
        .starts_with("Repo 'deb http://deb.example/debian bookworm main' has been removed from")));
    assert_eq!(
        read(&tmp.path().join("sources.list")),
        "# comment\n",
        "sources.list itself is kept"
    );
    let err = call(
        &h,
        "pkg.del_repo",
        json!(["deb http://deb.example/debian bookworm main"]),
        kw.clone(),
    );
    assert!(err.is_err_and(|e| e.contains("doesn't exist")));
    let bad = call(&h, "pkg.get_repo", json!(["not a repo"]), kw);
    assert!(bad.is_err_and(|e| e.contains("not a well formatted definition")));
}

#[test]
fn pkgrepo_states_with_fields_signed_by_and_test_mode() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let h = host();
    let file = tmp.path().join("sources.list.d/halite.list");
    let args = json!({
        "uri": "https://pkgs.example/apt", "dist": "bookworm", "comps": "main,extra",
        "architectures": "amd64", "signedby": "/etc/apt/keyrings/halite.gpg",
        "file": file.display().to_string(), "basedir": tmp.path().display().to_string(), "refresh": false,
    });
    let line = "deb [arch=amd64 signed-by=/etc/apt/keyrings/halite.gpg] https://pkgs.example/apt bookworm main extra";

    let r = state(&h, "managed", "halite-repo", args.clone(), true);
    assert_eq!(r.result, None);
    assert!(
        r.comment
            .starts_with("Package repo 'halite-repo' would be configured."),
        "{}",
        r.comment
    );
    assert!(!file.exists());

    let r = state(&h, "managed", "halite-repo", args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, "Configured package repo 'halite-repo'");
    assert_eq!(
        r.changes,
        json!({"repo": line})
            .as_object()
            .cloned()
            .unwrap_or_default()
    );
    assert_eq!(read(&file), format!("{line}\n"));

    let r = state(&h, "managed", "halite-repo", args.clone(), false);
    assert_eq!(r.comment, "Package repo 'halite-repo' already configured");
    assert!(r.changes.is_empty());

    // A changed setting is a change of the line.
    let mut other = args.clone();
    other["architectures"] = json!("arm64");
    let r = state(&h, "managed", "halite-repo", other, true);
    assert_eq!(r.result, None);
    assert!(
        r.changes["line"]["new"]
            .as_str()
            .is_some_and(|l| l.contains("arch=arm64")),
        "{:?}",
        r.changes
    );

    let absent_args = json!({"uri": "https://pkgs.example/apt", "dist": "bookworm", "architectures": "amd64",
                             "basedir": tmp.path().display().to_string()});
    let r = state(&h, "absent", "halite-repo", absent_args.clone(), true);
    assert_eq!(r.result, None);
    assert!(file.exists());
    let absent_line = "deb [arch=amd64] https://pkgs.example/apt bookworm".to_string();
    let r = state(
        &h,
        "absent",
        &absent_line,
        json!({"basedir": tmp.path().display().to_string()}),
        false,
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, format!("Removed repo {absent_line}"));
    assert!(!file.exists());
    let r = state(
        &h,
        "absent",
        &absent_line,
        json!({"basedir": tmp.path().display().to_string()}),
        false,
    );
    assert_eq!(r.comment, format!("Package repo {absent_line} is absent"));
}

#[test]
fn deb822_sources_are_listed_matched_and_never_rewritten() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let parts = tmp.path().join("sources.list.d");
    std::fs::create_dir_all(&parts).unwrap_or_else(|e| panic!("mkdir: {e}"));
    let sources = parts.join("debian.sources");
    let text = "Types: deb deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\n\
                Components: main contrib\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n\
                Types: deb\nURIs: http://security.debian.org/debian-security\nSuites: bookworm-security\n\
                Components: main\nEnabled: no\n";
    std::fs::write(&sources, text).unwrap_or_else(|e| panic!("write: {e}"));
    let h = host();
    let kw = json!({"basedir": tmp.path().display().to_string()});

    let repos = call(&h, "pkg.list_repos", json!([]), kw.clone()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        repos["http://deb.debian.org/debian"]
            .as_array()
            .map(Vec::len),
        Some(4),
        "types x suites"
    );
    assert_eq!(
        repos["http://security.debian.org/debian-security"][0]["disabled"],
        json!(true)
    );

    let line = "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-updates main contrib";
    let got = call(&h, "pkg.get_repo", json!([line]), kw.clone()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got["file"], json!(sources.display().to_string()));
    assert_eq!(
        got["signedby"],
        json!("/usr/share/keyrings/debian-archive-keyring.gpg")
    );

    let args = json!({"basedir": tmp.path().display().to_string(), "refresh": false});
    let r = state(&h, "managed", line, args, false);
    assert_eq!(
        r.comment,
        format!("Package repo '{line}' already configured"),
        "{:?}",
        r
    );

    let err = call(&h, "pkg.del_repo", json!([line]), kw.clone())
        .err()
        .unwrap_or_default();
    assert!(err.contains("deb822"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&sources).unwrap_or_default(),
        text,
        "the file is untouched"
    );
}

#[test]
fn signing_key_from_key_url_and_key_text() {
    let have_gpg = std::process::Command::new("gpg")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_gpg {
        eprintln!("skipped: gpg is not installed (gnupg de-armors keys for .gpg keyrings)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let srv = tmp.path().join("srv");
    std::fs::create_dir_all(srv.join("keys")).unwrap_or_else(|e| panic!("mkdir: {e}"));
    let raw: Vec<u8> = (0u8..=255).collect();
    std::fs::write(tmp.path().join("raw.bin"), &raw).unwrap_or_else(|e| panic!("write: {e}"));
    let armored = std::process::Command::new("gpg")
        .args(["--batch", "--enarmor", "-o", "-"])
        .arg(tmp.path().join("raw.bin"))
        .output()
        .unwrap_or_else(|e| panic!("gpg --enarmor: {e}"));
    assert!(armored.status.success());
    std::fs::write(srv.join("keys/repo.asc"), &armored.stdout)
        .unwrap_or_else(|e| panic!("write: {e}"));

    let h = host_with_root(Some(&srv));
    let keyring = tmp.path().join("keyrings/repo.gpg");
    let args = json!({
        "uri": "https://pkgs.example/apt", "dist": "stable", "comps": "main",
        "signedby": keyring.display().to_string(), "key_url": "salt://keys/repo.asc",
        "file": tmp.path().join("sources.list.d/repo.list").display().to_string(),
        "basedir": tmp.path().display().to_string(), "refresh": false,
    });
    let r = state(&h, "managed", "repo", args.clone(), true);
    assert_eq!(r.result, None);
    assert_eq!(r.changes["key"], json!(keyring.display().to_string()));
    assert!(!keyring.exists(), "test=True writes no key");

    let r = state(&h, "managed", "repo", args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.changes["key"], json!(keyring.display().to_string()));
    assert_eq!(
        std::fs::read(&keyring).unwrap_or_default(),
        raw,
        "de-armored for apt"
    );
    let r = state(&h, "managed", "repo", args.clone(), false);
    assert_eq!(r.comment, "Package repo 'repo' already configured");

    std::fs::write(&keyring, b"stale").unwrap_or_else(|e| panic!("write: {e}"));
    let r = state(&h, "managed", "repo", args.clone(), false);
    assert_eq!(
        r.changes,
        json!({"key": keyring.display().to_string()})
            .as_object()
            .cloned()
            .unwrap_or_default()
    );
    assert_eq!(std::fs::read(&keyring).unwrap_or_default(), raw);

    let asc = tmp.path().join("keyrings/text.asc");
    let mut text_args = args.clone();
    text_args["signedby"] = json!(asc.display().to_string());
    text_args["key_text"] = json!(String::from_utf8_lossy(&armored.stdout));
    let r = state(&h, "managed", "repo", text_args, false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(
        std::fs::read(&asc).unwrap_or_default(),
        armored.stdout,
        ".asc keys are kept armored"
    );

    // key_url over http from a loopback server, cached under cachedir.
    let web = support::Server::start(&srv, None);
    let mut h_web = h.clone();
    h_web.opts = json!({"cachedir": tmp.path().join("cache").display().to_string()});
    let web_ring = tmp.path().join("keyrings/web.gpg");
    let mut web_args = args.clone();
    web_args["signedby"] = json!(web_ring.display().to_string());
    web_args["key_url"] = json!(format!("http://127.0.0.1:{}/keys/repo.asc", web.port));
    let r = state(&h_web, "managed", "repo", web_args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(std::fs::read(&web_ring).unwrap_or_default(), raw);
    web_args["key_url"] = json!(format!("http://127.0.0.1:{}/keys/nope.asc", web.port));
    web_args["signedby"] = json!(tmp.path().join("keyrings/nope.gpg").display().to_string());
    let r = state(&h_web, "managed", "repo", web_args, false);
    assert_eq!(r.result, Some(false));
    assert!(r.comment.contains("nope.asc"), "{}", r.comment);

    let mut no_path = args;
    no_path.as_object_mut().map(|m| m.remove("signedby"));
    let r = state(&h, "managed", "repo", no_path, false);
    assert_eq!(r.result, Some(false));
    assert!(r.comment.contains("need signedby"), "{}", r.comment);
}

#[test]
fn pkg_states_refuse_bad_arguments_without_touching_the_system() {
    let h = host();
    let run = |fun: &str, args: Value| {
        let mut chunk = Map::new();
        chunk.insert("state".into(), json!("pkg"));
        chunk.insert("name".into(), json!("x"));
        chunk.insert("__id__".into(), json!("x"));
        chunk.extend(args.as_object().cloned().unwrap_or_default());
        chunk.insert("fun".into(), json!(fun));
        let chunk = LowChunk::from(chunk);
        let call = StateCall {
            chunk: &chunk,
            test: false,
            env: &h,
            sfun: None,
            reqs: None,
        };
        let module = h
            .states
            .get("pkg")
            .unwrap_or_else(|| panic!("pkg not registered"));
        module
            .call(fun, &call)
            .unwrap_or_else(|e| panic!("{fun}: {e}"))
    };
    let r = run("installed", json!({"pkgs": []}));
    assert_eq!(
        (r.result, r.comment.as_str()),
        (Some(true), "No packages to install provided")
    );
    let r = run(
        "installed",
        json!({"pkgs": ["a"], "sources": [{"a": "/a.deb"}]}),
    );
    assert_eq!(
        (r.result, r.comment.as_str()),
        (
            Some(false),
            "Only one of \"pkgs\" and \"sources\" is permitted."
        )
    );
    let r = run("installed", json!({"pkgs": {"a": 1}}));
    assert_eq!(
        (r.result, r.comment.as_str()),
        (
            Some(false),
            "Invalidly formatted 'pkgs' parameter. See minion log."
        )
    );
    let r = run(
        "installed",
        json!({"sources": [{"a": "gopher://example.invalid/a.deb"}]}),
    );
    assert_eq!(r.result, Some(false));
    assert!(r.comment.contains("must be a salt://"), "{}", r.comment);
    let unsupported = Host {
        grains: json!({"os_family": "Windows"}),
        ..host()
    };
    let chunk = LowChunk::from(
        json!({"state": "pkg", "name": "x", "__id__": "x", "fun": "installed"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    let call = StateCall {
        chunk: &chunk,
        test: false,
        env: &unsupported,
        sfun: None,
        reqs: None,
    };
    let r = unsupported
        .states
        .get("pkg")
        .map(|m| m.call("installed", &call));
    let r = r
        .unwrap_or_else(|| panic!("pkg not registered"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.result, Some(false));
    assert!(
        r.comment
            .contains("No package provider for os_family 'Windows'"),
        "{}",
        r.comment
    );
}

#[test]
fn pkgrepo_clean_file_leaves_only_the_managed_repo() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let file = tmp.path().join("sources.list.d/vendor.list");
    std::fs::create_dir_all(file.parent().unwrap_or(tmp.path()))
        .unwrap_or_else(|e| panic!("mkdir: {e}"));
    std::fs::write(
        &file,
        "# vendor repo\ndeb http://old.example/apt stable main\n",
    )
    .unwrap_or_else(|e| panic!("write: {e}"));
    let h = host();
    let line = "deb http://new.example/apt stable main";
    let args = json!({"file": file.display().to_string(), "clean_file": true,
                      "basedir": tmp.path().display().to_string(), "refresh": false});
    let r = state(&h, "managed", line, args.clone(), false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(read(&file), format!("{line}\n"));
    let r = state(&h, "managed", line, args.clone(), false);
    assert_eq!(
        r.comment,
        format!("Package repo '{line}' already configured")
    );

    // A stray line makes it out of sync again.
    std::fs::write(
        &file,
        format!("{line}\ndeb http://stray.example/apt stable main\n"),
    )
    .unwrap_or_else(|e| panic!("write: {e}"));
    let r = state(&h, "managed", line, args, false);
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(read(&file), format!("{line}\n"));
}
