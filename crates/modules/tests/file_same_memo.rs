//! `file.managed`'s verified-same memo (issue 25): a target found to hold
//! its source's bytes, with both files unchanged since, is not read again;
//! anything that changed either file is read and found, and what the state
//! answers is what a read would give. Whether a run read a file is watched
//! with inotify (the kernel reports every open and read of the watched
//! inodes): no hook inside the state. Real files in temp dirs.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::ffi::CString;
use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use halite_modules::Host;
use halite_state::{StateResult, Value};
use serde_json::json;

/// A little more than the memo's margin: files written before it count as
/// settled (the memo records no pair younger than two seconds).
const SETTLED: Duration = Duration::from_millis(2200);

/// The opens and reads of some files, seen by the kernel.
struct Watch {
    fd: i32,
    /// Each watch descriptor with its file's name.
    names: Vec<(i32, String)>,
}

impl Watch {
    /// Watches `files` for opens and reads from now on.
    fn new(files: &[&Path]) -> Self {
        // SAFETY: no preconditions; the descriptor is closed on drop.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(
            fd >= 0,
            "inotify_init1: {}",
            std::io::Error::last_os_error()
        );
        let names = files
            .iter()
            .map(|f| {
                let c = CString::new(f.as_os_str().as_bytes()).unwrap();
                // SAFETY: `c` is a valid C string for the call's duration.
                let wd = unsafe {
                    libc::inotify_add_watch(fd, c.as_ptr(), libc::IN_OPEN | libc::IN_ACCESS)
                };
                assert!(wd >= 0, "inotify_add_watch {}", f.display());
                (wd, f.file_name().unwrap().to_string_lossy().into_owned())
            })
            .collect();
        Watch { fd, names }
    }

    /// What happened to the watched files since the last call: one
    /// `open <name>` or `read <name>` per event.
    fn seen(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: `buf` is valid for writes of its length.
            let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                return out;
            }
            let mut at = 0usize;
            while at + 16 <= n as usize {
                let field = |i: usize| {
                    u32::from_ne_bytes(buf[at + 4 * i..at + 4 * i + 4].try_into().unwrap())
                };
                let (wd, mask, len) = (field(0) as i32, field(1), field(3) as usize);
                let name = self
                    .names
                    .iter()
                    .find(|(w, _)| *w == wd)
                    .map_or("?", |(_, n)| n.as_str());
                if mask & libc::IN_OPEN != 0 {
                    out.push(format!("open {name}"));
                }
                if mask & libc::IN_ACCESS != 0 {
                    out.push(format!("read {name}"));
                }
                at += 16 + len;
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // SAFETY: `fd` is this watch's own descriptor.
        unsafe { libc::close(self.fd) };
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    source: PathBuf,
    target: PathBuf,
    host: Host,
}

impl Fixture {
    /// A source and a target holding `text`, written now.
    fn new(text: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (source, target) = (dir.path().join("source"), dir.path().join("target"));
        fs::write(&source, text).unwrap();
        fs::write(&target, text).unwrap();
        Fixture {
            _dir: dir,
            source,
            target,
            host: common::host(),
        }
    }

    /// A source and a target holding `text`, settled (older than the
    /// memo's margin), and their pair recorded by a run that read them.
    fn recorded(text: &str) -> Self {
        let f = Fixture::new(text);
        std::thread::sleep(SETTLED);
        let watch = f.watch();
        f.assert_same(f.run(json!({})));
        assert!(
            watch.seen().contains(&"read target".to_string()),
            "the first run reads the target"
        );
        f
    }

    /// [`Fixture::recorded`], then a run that finds the pair in the memo
    /// (it opens neither file): what the tests below change.
    fn in_memo(text: &str) -> Self {
        let f = Fixture::recorded(text);
        let watch = f.watch();
        f.assert_same(f.run(json!({})));
        assert_eq!(watch.seen(), Vec::<String>::new(), "the memo was not used");
        f
    }

    fn watch(&self) -> Watch {
        Watch::new(&[&self.target, &self.source])
    }

    fn run_as(&self, args: Value, test: bool) -> StateResult {
        let mut args = args;
        args["source"] = json!(self.source.display().to_string());
        common::state(
            &self.host,
            "file",
            "managed",
            self.target.to_str().unwrap(),
            args,
            test,
        )
    }

    fn run(&self, args: Value) -> StateResult {
        self.run_as(args, false)
    }

    /// The answer of a target that holds its source's bytes, mode aside.
    fn assert_same(&self, r: StateResult) {
        assert_eq!(r.result, Some(true), "{}", r.comment);
        assert!(r.changes.is_empty(), "{:?}", r.changes);
        assert_eq!(
            r.comment,
            format!("File {} is in the correct state", self.target.display())
        );
    }

    /// The answer of a target that held `old` and now holds the source.
    fn assert_fixed(&self, r: StateResult, old: &str) {
        assert_eq!(r.result, Some(true), "{}", r.comment);
        let diff = r.changes.get("diff").and_then(Value::as_str).unwrap_or("");
        assert!(diff.contains(&format!("-{old}")), "{:?}", r.changes);
        assert_eq!(
            fs::read(&self.target).unwrap(),
            fs::read(&self.source).unwrap()
        );
    }
}

/// Overwrites `path` in place with `text` (same inode), its mtime put back
/// to what it was: only its ctime, which no process can set, tells.
fn overwrite_keeping_mtime(path: &Path, text: &str) {
    let before = fs::metadata(path).unwrap();
    let mut f = fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
    drop(f);
    filetime::set_file_mtime(
        path,
        filetime::FileTime::from_last_modification_time(&before),
    )
    .unwrap();
    let after = fs::metadata(path).unwrap();
    assert_eq!(
        (after.len(), after.modified().unwrap()),
        (before.len(), before.modified().unwrap())
    );
}

/// Puts a new file holding `text`, its mtime set to `path`'s, in place of
/// `path` by a rename (another inode): what a fetch of a source again does.
fn replace_keeping_mtime(path: &Path, text: &str) {
    let before = fs::metadata(path).unwrap();
    let tmp = path.with_extension("new");
    fs::write(&tmp, text).unwrap();
    filetime::set_file_mtime(
        &tmp,
        filetime::FileTime::from_last_modification_time(&before),
    )
    .unwrap();
    fs::rename(&tmp, path).unwrap();
}

/// The second run of a settled, unchanged pair opens neither file and
/// answers as the first; the owner and mode are still checked (a mode now
/// wanted is set and reported), and test mode predicts the same without
/// reading either.
#[test]
fn a_settled_unchanged_pair_is_not_read_again() {
    let f = Fixture::in_memo("managed line\n");
    let watch = f.watch();
    let predicted = f.run_as(json!({}), true);
    assert_eq!(predicted.result, Some(true), "{}", predicted.comment);
    assert!(predicted.changes.is_empty(), "{:?}", predicted.changes);
    // Test mode opens the target to see it exists (as before), reads nothing.
    assert!(
        !watch.seen().iter().any(|e| e.starts_with("read")),
        "test mode read a file"
    );

    fs::set_permissions(&f.target, fs::Permissions::from_mode(0o644)).unwrap();
    // The chmod changed the target's ctime: read once more, recorded again.
    std::thread::sleep(SETTLED);
    f.assert_same(f.run(json!({})));
    assert!(watch.seen().contains(&"read target".to_string()));
    let r = f.run(json!({"mode": "0600"}));
    assert!(watch.seen().is_empty(), "the mode run read a file");
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(Value::Object(r.changes.clone()), json!({"mode": "0600"}));
    assert_eq!(
        fs::metadata(&f.target).unwrap().permissions().mode() & 0o7777,
        0o600
    );
}

/// Files written within the memo's margin are read on every run: a file
/// written again within its stamp's clock tick could keep that stamp, so a
/// young stamp is never recorded. (This kernel stamps a file written after
/// a stat with a finer time, so the same-stamp rewrite itself cannot be
/// staged here; what is tested is that the young pair is read each time.)
#[test]
fn a_young_pair_is_read_on_every_run() {
    let f = Fixture::new("young line\n");
    let watch = f.watch();
    for run in 0..3 {
        f.assert_same(f.run(json!({})));
        let seen = watch.seen();
        assert!(
            seen.contains(&"read target".to_string()) && seen.contains(&"read source".to_string()),
            "run {run}: {seen:?}"
        );
    }
    // Rewritten in place now, same size, the mtime put back: found.
    overwrite_keeping_mtime(&f.target, "yuung line\n");
    f.assert_fixed(f.run(json!({})), "yuung line");
}

/// A target overwritten in place with other bytes of the same size, its
/// mtime put back, is found changed (its ctime moved) and fixed.
#[test]
fn a_target_rewritten_with_its_size_and_mtime_put_back_is_found() {
    let f = Fixture::in_memo("right bytes\n");
    overwrite_keeping_mtime(&f.target, "wrong bytes\n");
    f.assert_fixed(f.run(json!({})), "wrong bytes");
}

/// A source fetched again (a new file renamed over the cached copy) with
/// new bytes of the same size and the old mtime is found, and the target
/// rewritten; so is a source edited in place the same way.
#[test]
fn a_source_fetched_again_with_new_content_is_found() {
    let f = Fixture::in_memo("version 1\n");
    replace_keeping_mtime(&f.source, "version 2\n");
    f.assert_fixed(f.run(json!({})), "version 1");
    let g = Fixture::in_memo("edition 1\n");
    overwrite_keeping_mtime(&g.source, "edition 2\n");
    g.assert_fixed(g.run(json!({})), "edition 1");
}

/// The target replaced by another file (another inode, renamed over it)
/// with other bytes of the same size and the old mtime is found.
#[test]
fn a_target_replaced_by_another_inode_is_found() {
    let f = Fixture::in_memo("the original\n");
    replace_keeping_mtime(&f.target, "the imposter\n");
    f.assert_fixed(f.run(json!({})), "the imposter");
}
