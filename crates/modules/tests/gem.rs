//! `gem` states and execution functions against the real RubyGems,
//! offline: the test builds its own gem with `gem build`, and runs `gem`
//! through a `gem_bin` wrapper whose `GEM_HOME` is a temp dir, so the
//! host's gems are never touched.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use halite_modules::{Args, Host};
use halite_state::StateResult;
use serde_json::{json, Value};

fn has_gem() -> bool {
    std::process::Command::new("gem")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn host() -> Host {
    common::host()
}

fn state(host: &Host, fun: &str, name: &str, args: Value, test: bool) -> StateResult {
    common::state_or_fail(host, "gem", fun, name, args, test)
}

/// `gem build` of a gem `name` at `version` under `root`: the `.gem` path.
fn build(root: &Path, name: &str, version: &str) -> PathBuf {
    let src = root.join(format!("src-{version}"));
    std::fs::create_dir_all(src.join("lib")).unwrap();
    std::fs::write(src.join("lib/halite_t_gem.rb"), "module HaliteTGem; end\n").unwrap();
    std::fs::write(
        src.join(format!("{name}.gemspec")),
        format!(
            "Gem::Specification.new do |s|\n  s.name = {name:?}\n  s.version = {version:?}\n  \
             s.summary = 'halite test gem'\n  s.authors = ['halite']\n  \
             s.files = ['lib/halite_t_gem.rb']\n  s.license = 'MIT'\nend\n"
        ),
    )
    .unwrap();
    let out = std::process::Command::new("gem")
        .args(["build", &format!("{name}.gemspec")])
        .current_dir(&src)
        .output()
        .unwrap();
    assert!(out.status.success(), "gem build: {out:?}");
    src.join(format!("{name}-{version}.gem"))
}

fn outcome(r: &StateResult) -> (Option<bool>, String, Value) {
    (
        r.result,
        r.comment.clone(),
        serde_json::to_value(&r.changes).unwrap(),
    )
}

#[test]
fn a_local_gem_is_installed_and_removed_once() {
    if !has_gem() {
        println!("skipped: gem is not installed (scripts/install-deps.sh installs ruby)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("gems");
    let wrapper = tmp.path().join("gem");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nGEM_HOME={h} GEM_PATH={h} exec gem \"$@\"\n",
            h = home.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = build(tmp.path(), "halite-t-gem", "1.0.0");
    let host = host();
    let bin = json!({"gem_bin": wrapper.display().to_string()});
    let path = file.display().to_string();
    let installed_dir = home.join("gems/halite-t-gem-1.0.0");

    let t = state(&host, "installed", &path, bin.clone(), true);
    assert_eq!(
        outcome(&t),
        (
            None,
            format!("The gem {path} would have been installed"),
            json!({})
        )
    );
    assert!(!installed_dir.exists());

    let r = state(&host, "installed", &path, bin.clone(), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            "Gem was successfully installed".into(),
            json!({path.clone(): "Installed"})
        )
    );
    assert!(installed_dir.join("lib/halite_t_gem.rb").exists());

    // Applied twice: already there, by file and by name.
    let again = state(&host, "installed", &path, bin.clone(), false);
    assert_eq!(
        outcome(&again),
        (Some(true), "Gem is already installed.".into(), json!({}))
    );
    let by_name = state(&host, "installed", "halite-t-gem", bin.clone(), true);
    assert_eq!(
        outcome(&by_name),
        (Some(true), "Gem is already installed.".into(), json!({}))
    );
    let mut ranged = bin.clone();
    ranged["version"] = json!(">= 0.9");
    let r = state(&host, "installed", "halite-t-gem", ranged, true);
    assert_eq!(r.comment, "Installed Gem meets version requirements.");
    let mut newer = bin.clone();
    newer["version"] = json!("2.0.0");
    let r = state(&host, "installed", "halite-t-gem", newer, true);
    assert_eq!(
        (r.result, r.comment.as_str()),
        (None, "The gem halite-t-gem would have been installed")
    );

    // The execution functions see it; the host's gem does not.
    let mut kwargs = serde_json::Map::new();
    kwargs.insert("gem_bin".into(), json!(wrapper.display().to_string()));
    let listed = host
        .call(
            "gem.list",
            &Args {
                positional: vec![json!("halite-t-gem")],
                kwargs,
            },
        )
        .unwrap();
    assert_eq!(listed, json!({"halite-t-gem": ["1.0.0"]}));
    let host_gems = std::process::Command::new("gem")
        .args(["list", "halite-t-gem"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&host_gems.stdout).contains("halite-t-gem"));

    // removed, twice.
    let t = state(&host, "removed", "halite-t-gem", bin.clone(), true);
    assert_eq!(
        (t.result, t.comment.as_str()),
        (None, "The gem halite-t-gem would have been removed")
    );
    let r = state(&host, "removed", "halite-t-gem", bin.clone(), false);
    assert_eq!(
        outcome(&r),
        (
            Some(true),
            "Gem was successfully removed.".into(),
            json!({"halite-t-gem": "Removed"})
        )
    );
    assert!(!installed_dir.exists());
    let again = state(&host, "removed", "halite-t-gem", bin, false);
    assert_eq!(
        outcome(&again),
        (Some(true), "Gem is not installed.".into(), json!({}))
    );
}

#[test]
fn a_gem_that_cannot_be_installed_fails_with_gems_reason() {
    if !has_gem() {
        println!("skipped: gem is not installed (scripts/install-deps.sh installs ruby)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope-1.0.0.gem").display().to_string();
    let r = state(&host(), "installed", &missing, json!({}), false);
    assert_eq!(r.result, Some(false));
    assert!(r.comment.contains("Cannot read"), "{}", r.comment);
}
