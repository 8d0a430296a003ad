//! `archive.extracted` on real tar.gz / tar.bz2 / tar.xz / zip archives
//! built in temp dirs, run through `state.single` / `state.sls` as
//! halite-call runs them: files on disk, Salt's comments and changes,
//! idempotence, test mode, hash checks and refusal of archives that try to
//! write outside the destination.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use halite_modules::host::LogEvents;
use halite_modules::{table, Args, Host, LocalFileClient};
use serde_json::{json, Value};
use sha2::Digest;

struct Fixture {
    _dir: tempfile::TempDir,
    /// The salt:// file root.
    root: PathBuf,
    /// Where archives are extracted.
    work: PathBuf,
    host: Host,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("root");
    let work = dir.path().join("work");
    fs::create_dir_all(&root).expect("mkdir");
    fs::create_dir_all(&work).expect("mkdir");
    let mut roots = BTreeMap::new();
    roots.insert("base".to_string(), vec![root.clone()]);
    let host = Host {
        opts: json!({"cachedir": dir.path().join("cache").display().to_string()}),
        grains: json!({"os": "Linux"}),
        pillar: json!({}),
        files: Arc::new(LocalFileClient::new(roots)),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    };
    Fixture {
        _dir: dir,
        root,
        work,
        host,
    }
}

/// What goes in a test archive.
enum Item<'a> {
    Dir(&'a str),
    File(&'a str, &'a str),
    Link(&'a str, &'a str),
}

/// The usual archive: one top-level `app/` dir.
const APP: &[Item<'static>] = &[
    Item::Dir("app/"),
    Item::File("app/README", "hello\n"),
    Item::Dir("app/bin/"),
    Item::File("app/bin/run.sh", "#!/bin/sh\necho run\n"),
    Item::Link("app/current", "bin"),
];

fn tar_bytes(items: &[Item<'_>]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for item in items {
        let mut h = tar::Header::new_gnu();
        h.set_mtime(1_700_000_000);
        match item {
            Item::Dir(p) => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                h.set_size(0);
                b.append_data(&mut h, p, &[][..]).expect("tar dir");
            }
            Item::File(p, text) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(if p.ends_with(".sh") { 0o755 } else { 0o644 });
                h.set_size(text.len() as u64);
                // `append_data` refuses `..`; write the raw name for the
                // malicious archives.
                let name = h.as_old_mut();
                name.name = [0; 100];
                name.name[..p.len()].copy_from_slice(p.as_bytes());
                h.set_cksum();
                b.append(&h, text.as_bytes()).expect("tar file");
            }
            Item::Link(p, target) => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_mode(0o777);
                h.set_size(0);
                b.append_link(&mut h, p, target).expect("tar link");
            }
        }
    }
    b.into_inner().expect("tar finish")
}

fn tar_gz(items: &[Item<'_>]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(&tar_bytes(items)).expect("gz");
    e.finish().expect("gz finish")
}

fn tar_bz2(items: &[Item<'_>]) -> Vec<u8> {
    let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
    e.write_all(&tar_bytes(items)).expect("bz2");
    e.finish().expect("bz2 finish")
}

fn tar_xz(items: &[Item<'_>]) -> Vec<u8> {
    let mut e =
        lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::with_preset(1)).expect("xz");
    e.write_all(&tar_bytes(items)).expect("xz");
    e.finish().expect("xz finish")
}

fn zip_bytes(items: &[Item<'_>]) -> Vec<u8> {
    use zip::write::SimpleFileOptions;
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for item in items {
        match item {
            Item::Dir(p) => z
                .add_directory(*p, SimpleFileOptions::default().unix_permissions(0o755))
                .expect("zip dir"),
            Item::File(p, text) => {
                z.start_file(*p, SimpleFileOptions::default().unix_permissions(0o640))
                    .expect("zip file");
                z.write_all(text.as_bytes()).expect("zip write");
            }
            Item::Link(p, target) => z
                .add_symlink(*p, *target, SimpleFileOptions::default())
                .expect("zip link"),
        }
    }
    z.finish().expect("zip finish").into_inner()
}

fn sha256(data: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(data))
}

/// Runs `archive.extracted` through `state.single`; the one state's return.
fn extracted(host: &Host, name: &Path, args: Value, test: bool) -> Value {
    let mut kwargs = args.as_object().cloned().unwrap_or_default();
    if test {
        kwargs.insert("test".into(), json!(true));
    }
    let args = Args {
        positional: vec![
            json!("archive.extracted"),
            json!(name.display().to_string()),
        ],
        kwargs,
    };
    let ret = host.call("state.single", &args).expect("state.single");
    let obj = ret.as_object().expect("a state return");
    assert_eq!(obj.len(), 1, "one state: {ret}");
    obj.values().next().cloned().expect("one state")
}

fn comment(r: &Value) -> &str {
    r["comment"].as_str().unwrap_or_default()
}

#[test]
fn tar_gz_from_salt_url_extracts_then_is_idempotent() {
    let f = fixture();
    fs::create_dir_all(f.root.join("archives")).expect("mkdir");
    let data = tar_gz(APP);
    fs::write(f.root.join("archives/app.tar.gz"), &data).expect("write");
    let dest = f.work.join("opt");
    let dest_s = format!("{}/", dest.display());
    let args = json!({"source": "salt://archives/app.tar.gz", "source_hash": format!("sha256={}", sha256(&data))});

    // test=True first: predicted, nothing written.
    let r = extracted(&f.host, &dest, args.clone(), true);
    assert_eq!(r["result"], Value::Null, "{r}");
    assert_eq!(
        comment(&r),
        format!("Archive salt://archives/app.tar.gz would be extracted to {dest_s}, due to absence of one or more files/dirs")
    );
    assert_eq!(r["changes"], json!({}));
    assert!(!dest.exists());

    let r = extracted(&f.host, &dest, args.clone(), false);
    assert_eq!(r["result"], json!(true), "{r}");
    assert_eq!(
        comment(&r),
        format!("salt://archives/app.tar.gz extracted to {dest_s}, due to absence of one or more files/dirs")
    );
    assert_eq!(r["changes"]["directories_created"], json!([dest_s]));
    assert_eq!(
        r["changes"]["extracted_files"],
        json!([
            "app",
            "app/README",
            "app/bin",
            "app/bin/run.sh",
            "app/current"
        ])
    );
    assert_eq!(
        fs::read_to_string(dest.join("app/README")).expect("read"),
        "hello\n"
    );
    let mode = fs::metadata(dest.join("app/bin/run.sh"))
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    assert_eq!(
        fs::read_link(dest.join("app/current")).expect("link"),
        Path::new("bin")
    );

    // Second run: nothing to do.
    let r = extracted(&f.host, &dest, args.clone(), false);
    assert_eq!(r["result"], json!(true), "{r}");
    assert_eq!(comment(&r), "All files in archive are already present");
    assert_eq!(r["changes"], json!({}));
    // test=True when already there: True too.
    let r = extracted(&f.host, &dest, args.clone(), true);
    assert_eq!(r["result"], json!(true), "{r}");
    assert_eq!(comment(&r), "All files in archive are already present");

    // A file removed: extracted again, with Salt's explanation.
    fs::remove_file(dest.join("app/README")).expect("rm");
    let r = extracted(&f.host, &dest, args, false);
    assert_eq!(r["result"], json!(true), "{r}");
    assert!(comment(&r).ends_with(", due to absence of one or more files/dirs"));
    assert!(r["changes"].get("directories_created").is_none());
    assert!(dest.join("app/README").is_file());
}

#[test]
fn tar_bz2_and_xz_local_sources_are_detected_by_extension_and_content() {
    let f = fixture();
    for (file, data) in [("app.tar.bz2", tar_bz2(APP)), ("app.txz", tar_xz(APP))] {
        let src = f.work.join(file);
        fs::write(&src, data).expect("write");
        let dest = f.work.join(format!("out-{file}"));
        let r = extracted(
            &f.host,
            &dest,
            json!({"source": src.display().to_string()}),
            false,
        );
        assert_eq!(r["result"], json!(true), "{r}");
        assert_eq!(
            comment(&r),
            format!(
                "{} extracted to {}/, due to absence of one or more files/dirs",
                src.display(),
                dest.display()
            )
        );
        assert_eq!(
            fs::read_to_string(dest.join("app/bin/run.sh")).expect("read"),
            "#!/bin/sh\necho run\n"
        );
    }
}

#[test]
fn zip_via_file_url_with_permissions_and_idempotence() {
    let f = fixture();
    let src = f.work.join("app.zip");
    fs::write(&src, zip_bytes(APP)).expect("write");
    let dest = f.work.join("z");
    let args = json!({"source": format!("file://{}", src.display())});
    let r = extracted(&f.host, &dest, args.clone(), false);
    assert_eq!(r["result"], json!(true), "{r}");
    assert_eq!(
        r["changes"]["extracted_files"],
        json!([
            "app/",
            "app/README",
            "app/bin/",
            "app/bin/run.sh",
            "app/current"
        ])
    );
    let mode = fs::metadata(dest.join("app/README"))
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o640);
    assert_eq!(
        fs::read_link(dest.join("app/current")).expect("link"),
        Path::new("bin")
    );
    let r = extracted(&f.host, &dest, args, false);
    assert_eq!(
        comment(&r),
        "All files in archive are already present",
        "{r}"
    );
}

#[test]
fn source_list_takes_the_first_that_exists() {
    let f = fixture();
    fs::write(f.root.join("app.tar.gz"), tar_gz(APP)).expect("write");
    let dest = f.work.join("list");
    let r = extracted(
        &f.host,
        &dest,
        json!({"source": ["salt://missing.tar.gz", "salt://app.tar.gz"]}),
        false,
    );
    assert_eq!(r["result"], json!(true), "{r}");
    assert!(comment(&r).starts_with("salt://app.tar.gz extracted to"));
    let r = extracted(
        &f.host,
        &dest,
        json!({"source": "salt://nope.tar.gz"}),
        false,
    );
    assert_eq!(r["result"], json!(false));
    assert_eq!(
        comment(&r),
        "Source file salt://nope.tar.gz not found in saltenv 'base'"
    );
}

#[test]
fn source_hash_mismatch_fails_and_writes_nothing() {
    let f = fixture();
    let src = f.work.join("app.tar.gz");
    fs::write(&src, tar_gz(APP)).expect("write");
    let dest = f.work.join("h");
    let bad = "0".repeat(64);
    let r = extracted(
        &f.host,
        &dest,
        json!({"source": src.display().to_string(), "source_hash": bad}),
        false,
    );
    assert_eq!(r["result"], json!(false), "{r}");
    assert_eq!(
        comment(&r),
        format!(
            "{} does not match the desired source_hash {bad}",
            src.display()
        )
    );
    assert!(!dest.exists());
    // skip_verify ignores the hash.
    let r = extracted(
        &f.host,
        &dest,
        json!({"source": src.display().to_string(), "source_hash": bad, "skip_verify": true}),
        false,
    );
    assert_eq!(r["result"], json!(true), "{r}");
}

#[test]
fn source_hash_from_a_salt_hash_file() {
    let f = fixture();
    let data = tar_gz(APP);
    fs::write(f.root.join("app.tar.gz"), &data).expect("write");
    fs::write(
        f.root.join("SHA256SUMS"),
        format!(
            "{}  other.tar.gz\n{}  app.tar.gz\n",
            "1".repeat(64),
            sha256(&data)
        ),
    )
    .expect("write");
    let dest = f.work.join("hf");
    let r = extracted(
        &f.host,
        &dest,
        json!({"source": "salt://app.tar.gz", "source_hash": "salt://SHA256SUMS"}),
        false,
    );
    assert_eq!(r["result"], json!(true), "{r}");
}

#[test]
fn enforce_toplevel_refuses_a_tarbomb_unless_disabled() {
    let f = fixture();
    let src = f.work.join("bomb.tar.gz");
    fs::write(
        &src,
        tar_gz(&[Item::File("a.txt", "a\n"), Item::File("b.txt", "b\n")]),
    )
    .expect("write");
    let dest = f.work.join("bomb");
    let dest_s = format!("{}/", dest.display());
    let args = json!({"source": src.display().to_string()});
    let r = extracted(&f.host, &dest, args, false);
    assert_eq!(r["result"], json!(false));
    assert_eq!(
        comment(&r),
        format!("Archive does not have a single top-level directory. To allow this archive to be extracted, set 'enforce_toplevel' to False. To avoid a 'tar-bomb' it may also be advisable to set a top-level directory by adding it to the 'name' value (for example, setting 'name' to {dest_s}some_dir instead of {dest_s}).")
    );
    assert!(!dest.exists());
    let r = extracted(
        &f.host,
        &dest,
        json!({"source": src.display().to_string(), "enforce_toplevel": false}),
        false,
    );
    assert_eq!(r["result"], json!(true), "{r}");
    assert_eq!(fs::read_to_string(dest.join("b.txt")).expect("read"), "b\n");
}

#[test]
fn dot_dot_member_is_refused_and_nothing_is_written_outside() {
    let f = fixture();
    let src = f.work.join("evil.tar.gz");
    fs::write(
        &src,
        tar_gz(&[
            Item::File("ok.txt", "fine\n"),
            Item::File("../evil", "pwned\n"),
        ]),
    )
    .expect("write");
    let dest = f.work.join("jail/inner");
    let r = extracted(
        &f.host,
        &dest,
        json!({"source": src.display().to_string(), "enforce_toplevel": false}),
        false,
    );
    assert_eq!(r["result"], json!(false), "{r}");
    assert!(
        comment(&r).contains("member '../evil' would be written outside"),
        "{r}"
    );
    assert_eq!(r["changes"], json!({}));
    assert!(!f.work.join("jail/evil").exists());
    assert!(!dest.exists(), "nothing extracted at all");
}

#[test]
fn absolute_member_and_escaping_symlinks_are_refused() {
    let f = fixture();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "abs.tar.gz",
            tar_gz(&[Item::File("/tmp/halite-evil", "x\n")]),
            "has an absolute path",
        ),
        (
            "link.tar.gz",
            tar_gz(&[Item::Dir("app/"), Item::Link("app/up", "../../etc")]),
            "is a symlink pointing outside",
        ),
        (
            "abslink.zip",
            zip_bytes(&[Item::Dir("app/"), Item::Link("app/passwd", "/etc/passwd")]),
            "is a symlink to an absolute path",
        ),
    ];
    for (file, data, why) in cases {
        let src = f.work.join(file);
        fs::write(&src, data).expect("write");
        let dest = f.work.join(format!("d-{file}"));
        let r = extracted(
            &f.host,
            &dest,
            json!({"source": src.display().to_string(), "enforce_toplevel": false}),
            false,
        );
        assert_eq!(r["result"], json!(false), "{file}: {r}");
        assert!(comment(&r).contains(why), "{file}: {r}");
        assert!(!dest.exists(), "{file}: nothing extracted");
    }
    assert!(!Path::new("/tmp/halite-evil").exists());
}

#[test]
fn a_symlink_already_in_the_destination_is_not_followed_out() {
    let f = fixture();
    let outside = f.work.join("outside");
    fs::create_dir_all(&outside).expect("mkdir");
    let dest = f.work.join("sym");
    fs::create_dir_all(&dest).expect("mkdir");
    std::os::unix::fs::symlink(&outside, dest.join("app")).expect("symlink");
    let src = f.work.join("app.tar.gz");
    fs::write(&src, tar_gz(APP)).expect("write");
    let r = extracted(
        &f.host,
        &dest,
        json!({"source": src.display().to_string(), "force": true}),
        false,
    );
    // `app` is a symlink where the archive has a directory: with force it
    // is replaced by the real directory, and `outside` stays empty.
    assert_eq!(r["result"], json!(true), "{r}");
    assert_eq!(
        r["changes"]["removed"],
        json!([format!("{}/app/", dest.display())])
    );
    assert!(dest.join("app/README").is_file());
    assert_eq!(fs::read_dir(&outside).expect("ls").count(), 0);
}

#[test]
fn if_missing_overwrite_clean_and_options() {
    let f = fixture();
    let src = f.work.join("app.tar.gz");
    fs::write(&src, tar_gz(APP)).expect("write");
    let dest = f.work.join("o");
    let s = src.display().to_string();
    let marker = f.work.join("marker");
    fs::write(&marker, "").expect("write");
    let r = extracted(
        &f.host,
        &dest,
        json!({"source": s, "if_missing": marker.display().to_string()}),
        false,
    );
    assert_eq!(r["result"], json!(true));
    assert_eq!(comment(&r), format!("Path {} exists", marker.display()));
    assert!(!dest.exists());

    let r = extracted(&f.host, &dest, json!({"source": s}), false);
    assert_eq!(r["result"], json!(true), "{r}");
    fs::write(dest.join("app/stray"), "left over\n").expect("write");
    // overwrite: extracted again although everything is present.
    let r = extracted(
        &f.host,
        &dest,
        json!({"source": s, "overwrite": true}),
        false,
    );
    assert_eq!(
        comment(&r),
        format!("{s} extracted to {}/", dest.display()),
        "{r}"
    );
    assert!(dest.join("app/stray").exists());
    // clean + overwrite: the top-level dir is removed first.
    let r = extracted(
        &f.host,
        &dest,
        json!({"source": s, "overwrite": true, "clean": true}),
        false,
    );
    assert_eq!(r["result"], json!(true), "{r}");
    assert_eq!(
        r["changes"]["removed"],
        json!([format!("{}/app/", dest.display())])
    );
    assert!(!dest.join("app/stray").exists());
    assert!(dest.join("app/README").exists());

    // --strip-components from options, with a warning that the rest is ignored.
    let flat = f.work.join("flat");
    let r = extracted(
        &f.host,
        &flat,
        json!({"source": s, "options": "--strip-components=1", "enforce_toplevel": false}),
        false,
    );
    assert_eq!(r["result"], json!(true), "{r}");
    assert!(flat.join("README").is_file());
    assert!(flat.join("bin/run.sh").is_file());
    assert!(r["warnings"].is_array(), "{r}");

    // trim_output.
    let t = f.work.join("trim");
    let r = extracted(&f.host, &t, json!({"source": s, "trim_output": 2}), false);
    assert_eq!(
        r["changes"]["extracted_files"],
        json!(["app", "app/README"])
    );
    assert!(
        comment(&r).ends_with(". Output was trimmed to 2 number of lines"),
        "{r}"
    );
}

#[test]
fn user_and_group_ownership_is_enforced() {
    let f = fixture();
    if nix::unistd::geteuid().as_raw() != 0
        || nix::unistd::User::from_name("nobody")
            .ok()
            .flatten()
            .is_none()
    {
        return;
    }
    let src = f.work.join("app.tar.gz");
    fs::write(&src, tar_gz(APP)).expect("write");
    let dest = f.work.join("own");
    let s = src.display().to_string();
    let r = extracted(&f.host, &dest, json!({"source": s}), false);
    assert_eq!(r["result"], json!(true));
    let r = extracted(&f.host, &dest, json!({"source": s, "user": "nobody"}), true);
    assert_eq!(r["result"], Value::Null, "{r}");
    assert_eq!(
        comment(&r),
        "All files in archive are already present. Ownership would be updated on one or more files/directories."
    );
    let r = extracted(
        &f.host,
        &dest,
        json!({"source": s, "user": "nobody"}),
        false,
    );
    assert_eq!(r["result"], json!(true), "{r}");
    assert_eq!(r["changes"], json!({"updated ownership": true}));
    use std::os::unix::fs::MetadataExt;
    let nobody = nix::unistd::User::from_name("nobody")
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw());
    assert_eq!(
        Some(
            fs::metadata(dest.join("app/bin/run.sh"))
                .expect("stat")
                .uid()
        ),
        nobody
    );
    let r = extracted(
        &f.host,
        &dest,
        json!({"source": s, "user": "no-such-user-xyz"}),
        false,
    );
    assert_eq!(comment(&r), "User no-such-user-xyz does not exist");
}

#[test]
fn argument_errors_use_salts_wording() {
    let f = fixture();
    let src = f.work.join("app.bin");
    fs::write(&src, tar_gz(APP)).expect("write");
    let s = src.display().to_string();
    let r = extracted(
        &f.host,
        Path::new("relative/dir"),
        json!({"source": s}),
        false,
    );
    assert_eq!(comment(&r), "relative/dir is not an absolute path");
    let dest = f.work.join("e");
    let r = extracted(&f.host, &dest, json!({"source": s}), false);
    assert_eq!(
        comment(&r),
        "Could not guess archive_format from the value of the 'source' argument. Please set this archive_format to one of the following: tar, rar, zip"
    );
    // An explicit format reads it (compression is detected from the content).
    let r = extracted(
        &f.host,
        &dest,
        json!({"source": s, "archive_format": "tar"}),
        false,
    );
    assert_eq!(r["result"], json!(true), "{r}");
    let r = extracted(
        &f.host,
        &dest,
        json!({"source": s, "archive_format": "7z"}),
        false,
    );
    assert!(
        comment(&r).starts_with("Invalid archive_format '7z'."),
        "{r}"
    );
    let r = extracted(&f.host, &dest, json!({"source": "/no/such.tar.gz"}), false);
    assert_eq!(comment(&r), "Source file '/no/such.tar.gz' does not exist");
    let file = f.work.join("plain");
    fs::write(&file, "").expect("write");
    let r = extracted(&f.host, &file, json!({"source": s}), false);
    assert_eq!(
        comment(&r),
        format!("{} exists and is not a directory", file.display())
    );
}

#[test]
fn state_sls_with_salt_source_runs_in_a_state_tree() {
    let f = fixture();
    fs::write(f.root.join("app.zip"), zip_bytes(APP)).expect("write");
    let dest = f.work.join("sls");
    fs::write(
        f.root.join("unpack.sls"),
        format!(
            "unpack:\n  archive.extracted:\n    - name: {}\n    - source: salt://app.zip\n",
            dest.display()
        ),
    )
    .expect("write");
    let args = Args {
        positional: vec![json!("unpack")],
        kwargs: Default::default(),
    };
    let ret = f.host.call("state.sls", &args).expect("state.sls");
    let r = &ret[format!("archive_|-unpack_|-{}_|-extracted", dest.display())];
    assert_eq!(r["result"], json!(true), "{ret}");
    assert!(dest.join("app/bin/run.sh").is_file());
}

#[test]
fn a_chain_of_links_leading_out_is_removed_and_fails() {
    let f = fixture();
    let src = f.work.join("chain.tar.gz");
    // Each link is inside lexically, but `app/s` resolves through `app/a/b`
    // (-> the destination root) to its parent.
    fs::write(
        &src,
        tar_gz(&[
            Item::Dir("app/"),
            Item::Dir("app/a/"),
            Item::Link("app/a/b", "../.."),
            Item::Link("app/s", "a/b/.."),
            Item::File("app/s/evil", "pwned\n"),
        ]),
    )
    .expect("write");
    let dest = f.work.join("chain/inner");
    // The destination exists already, so a failure does not remove it.
    fs::create_dir_all(&dest).expect("mkdir");
    let r = extracted(
        &f.host,
        &dest,
        json!({"source": src.display().to_string()}),
        false,
    );
    assert_eq!(r["result"], json!(false), "{r}");
    assert!(comment(&r).contains("outside"), "{r}");
    assert!(!f.work.join("chain/evil").exists());
    assert!(!f.work.join("evil").exists());
    assert!(
        fs::symlink_metadata(dest.join("app/s")).is_err(),
        "escaping link removed"
    );
}

#[test]
fn a_path_of_the_wrong_type_fails_without_force_and_is_only_predicted_in_test_mode() {
    let f = fixture();
    let dest = f.work.join("wrongtype");
    fs::create_dir_all(dest.join("app")).expect("mkdir");
    // A file where the archive has the directory `app/bin/`.
    fs::write(dest.join("app/bin"), "not a dir").expect("write");
    let src = f.work.join("app.tar.gz");
    fs::write(&src, tar_gz(APP)).expect("write");
    let source = src.display().to_string();

    let r = extracted(&f.host, &dest, json!({"source": source}), false);
    assert_eq!(r["result"], json!(false), "{r}");
    assert!(
        comment(&r).starts_with(&format!(
            "The below paths (relative to {}/) exist, but are the incorrect type",
            dest.display()
        )),
        "{r}"
    );
    assert!(
        comment(&r).contains("To proceed with extraction, set 'force' to True."),
        "{r}"
    );
    assert!(comment(&r).contains("\n- app/bin"), "{r}");

    let r = extracted(
        &f.host,
        &dest,
        json!({"source": source, "force": true}),
        true,
    );
    assert_eq!(r["result"], Value::Null, "{r}");
    assert!(
        comment(&r).contains(
            "Since 'force' is set, these paths would be removed and the archive would be extracted."
        ),
        "{r}"
    );
    // Neither run touched the file.
    assert_eq!(
        fs::read_to_string(dest.join("app/bin")).expect("read"),
        "not a dir"
    );
    assert!(!dest.join("app/README").exists());

    let r = extracted(
        &f.host,
        &dest,
        json!({"source": source, "force": true}),
        false,
    );
    assert_eq!(r["result"], json!(true), "{r}");
    assert!(dest.join("app/bin/run.sh").is_file());
}
