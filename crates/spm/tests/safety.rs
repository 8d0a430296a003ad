//! Hostile, corrupt and truncated packages are refused before anything is
//! written; a failure midway through an install leaves disk and db as they were.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{build_simple, no_states, simple_formula, Sandbox};
use halite_spm::{install_package, read_package, SpmError};

/// One raw tar member, written without the tar crate's path checks.
enum Raw<'a> {
    File(&'a str, &'a [u8]),
    Dir(&'a str),
    Symlink(&'a str, &'a str),
    HardLink(&'a str, &'a str),
    Fifo(&'a str),
}

fn raw_header(name: &str, kind: tar::EntryType, size: u64, link: &str) -> tar::Header {
    let mut header = tar::Header::new_old();
    header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
    header.set_entry_type(kind);
    header.set_size(size);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_cksum();
    header
}

/// A bzip2 tarball with a valid `evil/FORMULA` followed by `members`.
fn raw_spm(members: &[Raw<'_>]) -> Vec<u8> {
    raw_named_spm("evil", members)
}

/// A bzip2 tarball with a valid `<name>/FORMULA` followed by `members`.
fn raw_named_spm(name: &str, members: &[Raw<'_>]) -> Vec<u8> {
    let formula = simple_formula(name, "");
    let mut tar = tar::Builder::new(Vec::new());
    let header = raw_header(
        &format!("{name}/FORMULA"),
        tar::EntryType::Regular,
        formula.len() as u64,
        "",
    );
    tar.append(&header, formula.as_bytes()).expect("append");
    for member in members {
        let (header, data): (tar::Header, &[u8]) = match member {
            Raw::File(name, data) => (
                raw_header(name, tar::EntryType::Regular, data.len() as u64, ""),
                data,
            ),
            Raw::Dir(name) => (raw_header(name, tar::EntryType::Directory, 0, ""), b""),
            Raw::Symlink(name, target) => {
                (raw_header(name, tar::EntryType::Symlink, 0, target), b"")
            }
            Raw::HardLink(name, target) => (raw_header(name, tar::EntryType::Link, 0, target), b""),
            Raw::Fifo(name) => (raw_header(name, tar::EntryType::Fifo, 0, ""), b""),
        };
        tar.append(&header, data).expect("append");
    }
    let tar_bytes = tar.into_inner().expect("finish tar");
    let mut encoder = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best());
    encoder.write_all(&tar_bytes).expect("compress");
    encoder.finish().expect("finish bzip2")
}

/// Installs `bytes` as `evil-1-1.spm` with the real binary; returns stderr.
fn install_with_cli(sandbox: &Sandbox, bytes: &[u8]) -> String {
    let path = sandbox.root().join("evil-1-1.spm");
    fs::write(&path, bytes).expect("write spm");
    let output = Command::new(env!("CARGO_BIN_EXE_halite-spm"))
        .arg("-c")
        .arg(sandbox.config_dir())
        .args(["-y", "local", "install"])
        .arg(&path)
        .output()
        .expect("run halite-spm");
    assert!(
        !output.status.success(),
        "install of a bad package must fail"
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn assert_refused(members: &[Raw<'_>], reason: &str) {
    let sandbox = Sandbox::new();
    let before = sandbox.snapshot();
    let stderr = install_with_cli(&sandbox, &raw_spm(members));
    assert!(
        stderr.contains("refusing package") && stderr.contains(reason),
        "expected '{reason}' in: {stderr}"
    );
    assert_eq!(sandbox.snapshot(), before, "nothing written");
    assert!(sandbox.db().packages().expect("packages").is_empty());
}

#[test]
fn absolute_member_paths_are_refused() {
    assert_refused(&[Raw::File("/tmp/evil-absolute", b"x")], "absolute path");
}

#[test]
fn dotdot_member_paths_are_refused() {
    assert_refused(
        &[
            Raw::File("evil/evil/init.sls", b"ok"),
            Raw::File("evil/../../escape.sls", b"x"),
        ],
        "contains '..'",
    );
}

#[test]
fn links_to_absolute_targets_are_refused() {
    assert_refused(
        &[Raw::Symlink("evil/evil/passwd", "/etc/passwd")],
        "absolute path /etc/passwd",
    );
}

#[test]
fn links_that_climb_out_of_the_package_are_refused() {
    assert_refused(
        &[Raw::Symlink("evil/evil/up", "../../../../etc")],
        "outside the package",
    );
}

#[test]
fn members_written_through_a_link_are_refused() {
    assert_refused(
        &[
            Raw::Symlink("evil/evil/d", "."),
            Raw::File("evil/evil/d/x.sls", b"x"),
        ],
        "goes through the symbolic link",
    );
}

#[test]
fn special_files_and_dangling_hard_links_are_refused() {
    assert_refused(&[Raw::Fifo("evil/evil/fifo")], "special file");
    assert_refused(
        &[Raw::HardLink("evil/evil/shadow", "etc/shadow")],
        "not an earlier file",
    );
}

#[test]
fn a_link_that_would_leave_its_install_root_is_refused() {
    // Inside the package, but a -conf package's files lose their first
    // directory on install, so the link would point above conf_path.
    let sandbox = Sandbox::new();
    let formula = simple_formula("evil-conf", "");
    let mut tar = tar::Builder::new(Vec::new());
    for header_and_data in [
        (
            raw_header(
                "evil-conf/FORMULA",
                tar::EntryType::Regular,
                formula.len() as u64,
                "",
            ),
            formula.as_bytes(),
        ),
        (
            raw_header("evil-conf/evil-conf/minion", tar::EntryType::Regular, 3, ""),
            b"id\n".as_slice(),
        ),
        (
            raw_header(
                "evil-conf/evil-conf/up",
                tar::EntryType::Symlink,
                0,
                "../FORMULA",
            ),
            b"".as_slice(),
        ),
    ] {
        tar.append(&header_and_data.0, header_and_data.1)
            .expect("append");
    }
    let mut encoder = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best());
    encoder
        .write_all(&tar.into_inner().expect("tar"))
        .expect("compress");
    let path = sandbox.root().join("evil-conf-1-1.spm");
    fs::write(&path, encoder.finish().expect("bzip2")).expect("write");
    let before = sandbox.snapshot();
    let mut db = sandbox.db();
    let package = read_package(&path).expect("the archive itself is acceptable");
    let err = install_package(&sandbox.config, &mut db, &package, false, &no_states())
        .expect_err("refused");
    assert!(err.to_string().contains("would point outside"), "{err}");
    assert_eq!(sandbox.snapshot(), before);
}

#[test]
fn truncated_corrupt_and_foreign_files_are_refused() {
    let sandbox = Sandbox::new();
    let good = fs::read(build_simple(&sandbox, "evil", "")).expect("read good package");
    let before = sandbox.snapshot();

    let truncated = &good[..good.len() / 2];
    let stderr = install_with_cli(&sandbox, truncated);
    assert!(stderr.contains("refusing package"), "{stderr}");

    let mut corrupt = good.clone();
    let middle = corrupt.len() / 2;
    for byte in &mut corrupt[middle..middle + 16] {
        *byte ^= 0x5a;
    }
    let stderr = install_with_cli(&sandbox, &corrupt);
    assert!(stderr.contains("refusing package"), "{stderr}");

    let stderr = install_with_cli(&sandbox, b"name: evil\nthis is not a tarball\n");
    assert!(stderr.contains("refusing package"), "{stderr}");

    assert_eq!(sandbox.snapshot(), before);
    assert!(sandbox.db().packages().expect("packages").is_empty());
}

#[test]
fn a_formula_naming_another_package_is_refused() {
    let sandbox = Sandbox::new();
    let formula = simple_formula("other", "");
    let mut tar = tar::Builder::new(Vec::new());
    let header = raw_header(
        "evil/FORMULA",
        tar::EntryType::Regular,
        formula.len() as u64,
        "",
    );
    tar.append(&header, formula.as_bytes()).expect("append");
    let mut encoder = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best());
    encoder
        .write_all(&tar.into_inner().expect("tar"))
        .expect("compress");
    let stderr = install_with_cli(&sandbox, &encoder.finish().expect("bzip2"));
    assert!(stderr.contains("names 'other'"), "{stderr}");
}

#[test]
fn a_failure_midway_through_writing_undoes_everything() {
    let sandbox = Sandbox::new();
    // No directory member for half/files: the conflict check cannot see
    // that `half/files` is a regular file on disk, so a.sls, b.sls and the
    // pillar are staged before writing under files/ fails.
    let bytes = raw_named_spm(
        "half",
        &[
            Raw::Dir("half/half"),
            Raw::File("half/half/a.sls", b"a: 1\n"),
            Raw::File("half/half/b.sls", b"b: 1\n"),
            Raw::File("half/pillar.example", b"p: 1\n"),
            Raw::File("half/half/files/c.conf", b"c\n"),
        ],
    );
    let spm = sandbox.root().join("half-1-1.spm");
    fs::write(&spm, bytes).expect("write");
    common::write_tree(
        &sandbox.config.formula_path,
        &[("half/files", "in the way\n")],
    );
    let before = sandbox.snapshot();
    let mut db = sandbox.db();
    let err = install_package(
        &sandbox.config,
        &mut db,
        &read_package(&spm).expect("read"),
        false,
        &no_states(),
    )
    .expect_err("must fail midway");
    assert!(matches!(err, SpmError::Io { .. }), "{err}");
    assert_eq!(
        sandbox.snapshot(),
        before,
        "staged files and created dirs are gone"
    );
    assert!(
        !sandbox.config.pillar_path.exists(),
        "the pillar dir created for the package is gone"
    );
    let leftovers: Vec<PathBuf> = walk(sandbox.root());
    assert!(
        leftovers
            .iter()
            .all(|p| !p.to_string_lossy().contains(".halite-spm")),
        "{leftovers:?}"
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            out.push(entry.path());
            out.extend(walk(&entry.path()));
        }
    }
    out
}
