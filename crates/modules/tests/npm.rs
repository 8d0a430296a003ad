//! `npm` states and execution functions against the real `npm`, offline:
//! the test packs its own package with `npm pack` into a temp dir and
//! installs it from there into a temp project (`npm_config_offline`
//! through the state's `env`, so nothing is fetched from a registry).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::path::{Path, PathBuf};

use halite_modules::{Args, Host};
use halite_state::StateResult;
use serde_json::{json, Value};

fn has_npm() -> bool {
    std::process::Command::new("npm")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn host() -> Host {
    common::host()
}

fn state(host: &Host, fun: &str, name: &str, args: Value, test: bool) -> StateResult {
    common::state_or_fail(host, "npm", fun, name, args, test)
}

/// `npm pack` of a package named `name` at `version`, into `out`: the
/// tarball's path.
fn pack(root: &Path, name: &str, version: &str, out: &Path) -> PathBuf {
    let src = root.join(format!("src-{name}-{version}"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("package.json"),
        json!({"name": name, "version": version, "main": "index.js", "license": "MIT"}).to_string(),
    )
    .unwrap();
    std::fs::write(src.join("index.js"), "module.exports = 42;\n").unwrap();
    let status = std::process::Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(out)
        .current_dir(&src)
        .status()
        .unwrap();
    assert!(status.success(), "npm pack failed");
    out.join(format!("{name}-{version}.tgz"))
}

fn outcome(r: &StateResult) -> (Option<bool>, String, Value) {
    (
        r.result,
        r.comment.clone(),
        serde_json::to_value(&r.changes).unwrap(),
    )
}

#[test]
fn packages_are_installed_removed_and_bootstrapped_offline() {
    if !has_npm() {
        println!("skipped: npm is not installed (scripts/install-deps.sh installs it)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let pkgs = tmp.path().join("pkgs");
    std::fs::create_dir_all(&pkgs).unwrap();
    let tarball = pack(tmp.path(), "halite-t-pkg", "1.0.0", &pkgs);
    let project = tmp.path().join("proj");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("package.json"),
        r#"{"name": "proj", "version": "1.0.0"}"#,
    )
    .unwrap();
    let host = host();
    let env = json!([{"npm_config_offline": "true"}, {"npm_config_cache": tmp.path().join("cache").display().to_string()}]);
    let tar = tarball.display().to_string();
    let args = json!({"dir": project.display().to_string(), "env": env});

    let t = state(&host, "installed", &tar, args.clone(), true);
    assert_eq!(
        outcome(&t),
        (
            None,
            format!("NPM package(s) '{tar}' are set to be installed"),
            json!({"old": [], "new": [tar]})
        )
    );
    assert!(!project.join("node_modules/halite-t-pkg").exists());

    let r = state(&host, "installed", &tar, args.clone(), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            format!("Package(s) '{tar}' successfully installed"),
            json!({"old": [], "new": [tar]})
        )
    );
    assert!(project.join("node_modules/halite-t-pkg/index.js").exists());

    // Applied twice: satisfied, no changes (and test=True agrees).
    let again = state(&host, "installed", &tar, args.clone(), false);
    assert_eq!(
        outcome(&again),
        (
            Some(true),
            format!("Package(s) '{tar}' satisfied by halite-t-pkg@1.0.0"),
            json!({})
        )
    );
    let t = state(&host, "installed", &tar, args.clone(), true);
    assert_eq!(t.result, Some(true));
    assert_eq!(t.changes.len(), 0);

    // By name, once installed: satisfied; a pinned other version is not.
    let by_name = state(&host, "installed", "halite-t-pkg", args.clone(), true);
    assert_eq!(
        by_name.comment,
        "Package(s) 'halite-t-pkg' satisfied by halite-t-pkg@1.0.0"
    );
    let pinned = state(&host, "installed", "halite-t-pkg@2.0.0", args.clone(), true);
    assert_eq!(
        pinned.comment,
        "NPM package(s) 'halite-t-pkg@2.0.0' are set to be installed"
    );

    // The execution functions.
    let listed = host
        .call(
            "npm.list",
            &Args {
                positional: vec![],
                kwargs: serde_json::from_value(args.clone()).unwrap(),
            },
        )
        .unwrap();
    assert_eq!(listed["halite-t-pkg"]["version"], "1.0.0");

    // removed, twice.
    let rm_args = json!({"dir": project.display().to_string()});
    let t = state(&host, "removed", "halite-t-pkg", rm_args.clone(), true);
    assert_eq!(
        (t.result, t.comment.as_str()),
        (None, "Package 'halite-t-pkg' is set to be removed")
    );
    let r = state(&host, "removed", "halite-t-pkg", rm_args.clone(), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            "Package 'halite-t-pkg' was successfully removed".into(),
            json!({"halite-t-pkg": "Removed"})
        )
    );
    assert!(!project.join("node_modules/halite-t-pkg").exists());
    let again = state(&host, "removed", "halite-t-pkg", rm_args, false);
    assert_eq!(
        outcome(&again),
        (
            Some(true),
            "Package 'halite-t-pkg' is not installed".into(),
            json!({})
        )
    );

    // bootstrap: a project whose package.json names the tarball.
    let app = tmp.path().join("app");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::write(
        app.join("package.json"),
        json!({"name": "app", "version": "1.0.0",
               "dependencies": {"halite-t-pkg": format!("file:{tar}")}})
        .to_string(),
    )
    .unwrap();
    let app_name = app.display().to_string();
    let benv = json!({"env": env});
    let t = state(&host, "bootstrap", &app_name, benv.clone(), true);
    assert_eq!(
        (t.result, t.comment.clone()),
        (None, format!("{app_name} is set to be bootstrapped"))
    );
    assert!(!app.join("node_modules").exists());
    let r = state(&host, "bootstrap", &app_name, benv.clone(), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            "Directory was successfully bootstrapped".into(),
            json!({app_name.clone(): "Bootstrapped"})
        )
    );
    assert!(app.join("node_modules/halite-t-pkg/index.js").exists());
    let again = state(&host, "bootstrap", &app_name, benv.clone(), false);
    assert_eq!(
        outcome(&again),
        (
            Some(true),
            "Directory is already bootstrapped".into(),
            json!({})
        )
    );
    let t = state(&host, "bootstrap", &app_name, benv, true);
    assert_eq!(
        (t.result, t.comment.clone()),
        (Some(true), format!("{app_name} is already bootstrapped"))
    );
}
