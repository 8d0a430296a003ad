//! The vendored serde_json (`vendor/serde_json`, docs/compact-map.md) is
//! upstream serde_json 1.0.154 plus the recorded patch, nothing else:
//! undoing `vendor/serde_json.patch` on a copy of it must give back, file
//! for file and byte for byte, the published crate as recorded in
//! `vendor/serde_json-1.0.154.sha256`. A change to the vendored code that
//! is not in the patch (or a patch that no longer applies) fails here.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `relative path -> sha256` of every file below `root`.
fn hashes(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                let digest = Sha256::digest(std::fs::read(&path).unwrap());
                out.insert(rel, hex::encode(digest));
            }
        }
    }
    out
}

/// The recorded list: `sha256  path` per line, as `sha256sum` writes it.
fn recorded() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(repo().join("vendor/serde_json-1.0.154.sha256")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (sum, path) = l.split_once("  ").expect("sha256sum format");
            (path.to_string(), sum.to_string())
        })
        .collect()
}

fn copy_tree(from: &Path, to: &Path) {
    for (rel, _) in hashes(from) {
        let dest = to.join(&rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(from.join(&rel), dest).unwrap();
    }
}

#[test]
fn vendored_serde_json_is_upstream_plus_the_recorded_patch() {
    let vendored = repo().join("vendor/serde_json");
    let scratch = tempfile::tempdir().unwrap();
    copy_tree(&vendored, scratch.path());
    let patch = std::fs::File::open(repo().join("vendor/serde_json.patch")).unwrap();
    let undo = Command::new("patch")
        .args(["-R", "-E", "-p1", "-s", "--no-backup-if-mismatch", "-d"])
        .arg(scratch.path())
        .stdin(patch)
        .output()
        .expect("the `patch` program (scripts/install-deps.sh installs it)");
    assert!(
        undo.status.success(),
        "vendor/serde_json.patch does not undo cleanly on vendor/serde_json: the vendored code \
         changed outside the patch; regenerate the patch (docs/compact-map.md)\n{}{}",
        String::from_utf8_lossy(&undo.stdout),
        String::from_utf8_lossy(&undo.stderr)
    );
    let got = hashes(scratch.path());
    let want = recorded();
    let differ: BTreeSet<_> = want
        .keys()
        .chain(got.keys())
        .filter(|k| got.get(*k) != want.get(*k))
        .collect();
    assert!(
        differ.is_empty(),
        "after undoing the patch these files differ from serde_json 1.0.154: {differ:?}"
    );
}

/// The recorded list is the published crate's: checked against cargo's
/// copy of serde_json 1.0.154 when this machine has one.
#[test]
fn recorded_checksums_are_the_published_crates() {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")));
    let upstream = home.and_then(|home| {
        std::fs::read_dir(home.join("registry/src"))
            .ok()?
            .filter_map(Result::ok)
            .map(|index| index.path().join("serde_json-1.0.154"))
            .find(|dir| dir.is_dir())
    });
    let Some(upstream) = upstream else {
        eprintln!("skipped: no serde_json-1.0.154 in cargo's registry here (`cargo fetch` of it would bring one)");
        return;
    };
    let published = hashes(&upstream);
    for (path, sum) in recorded() {
        assert_eq!(
            published.get(&path),
            Some(&sum),
            "{path} in vendor/serde_json-1.0.154.sha256 is not the published file"
        );
    }
}
