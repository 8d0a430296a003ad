//! The new content `file.managed` compares, diffs and writes: bytes it
//! made (inline contents, a rendered template) or a source file on disk
//! (a downloaded or cached `source`) that is streamed, never read whole,
//! so a 1 GB download does not sit in the minion's memory.

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;

use sha2::digest::DynDigest;

use super::same_memo;
use crate::exec::file::diff::{binary_replace, file_diff, unified_diff};
use crate::exec::file::meta::{FileStamp, HashType};
use crate::fetch::source_hash::SourceSum;

/// How much of a file Salt's `is_binary` looks at.
const BINARY_PROBE: usize = 2048;

/// The content to put in place, borrowed from [`super::managed::NewContent`].
#[derive(Clone, Copy)]
pub(crate) enum Content<'a> {
    /// Bytes in memory.
    Bytes(&'a [u8]),
    /// A local file, with the hash it was checked to have (verified again
    /// while it is copied, so what lands is what was checked).
    File {
        path: &'a Path,
        verify: Option<&'a SourceSum>,
    },
}

impl Content<'_> {
    /// Whether the file at `target` holds something else (or cannot be
    /// read). `target_md`, the target's stat (following a final link) the
    /// caller holds, tells a file of another size apart without reading
    /// it, and a source file's target found the same before and unchanged
    /// since ([`same_memo`]); otherwise the target is read and compared.
    pub(crate) fn differs_from(&self, target: &Path, target_md: Option<&fs::Metadata>) -> bool {
        match self {
            Content::Bytes(data) => {
                target_md.is_some_and(|md| md.len() != data.len() as u64)
                    || fs::read(target).map(|old| old != *data).unwrap_or(true)
            }
            Content::File { path, .. } => !same_as_source(path, target, target_md),
        }
    }

    /// Salt's `file.get_diff` of `old` (a file) against this content:
    /// binary files are named, not diffed; `""` when equal. A source file
    /// is read whole only when both sides are text (a diff needs them).
    pub(crate) fn diff_from(&self, old: &Path) -> String {
        if let Content::File { path, .. } = self {
            if same_as_source(path, old, None) {
                return String::new();
            }
        }
        self.diff_from_differing(old)
    }

    /// [`Content::diff_from`] of a file [`Content::differs_from`] has just
    /// found different: a source file is not compared with it again.
    pub(crate) fn diff_from_differing(&self, old: &Path) -> String {
        match self {
            Content::Bytes(data) => file_diff(&fs::read(old).unwrap_or_default(), data),
            Content::File { path, .. } => {
                let (old_head, new_head) = (head(old), head(path));
                if let Some(msg) = binary_replace(&old_head, &new_head) {
                    return msg.to_string();
                }
                let old = fs::read(old).unwrap_or_default();
                let new = fs::read(path).unwrap_or_default();
                if let Some(msg) = binary_replace(&old, &new) {
                    return msg.to_string();
                }
                unified_diff(
                    &String::from_utf8_lossy(&old),
                    &String::from_utf8_lossy(&new),
                )
            }
        }
    }

    /// Copies the content into `out` (a temp file for `check_cmd` or the
    /// one renamed into place), hashing a source file as it goes; an error
    /// when the copy does not have the hash the source was checked to have.
    pub(crate) fn write_into(&self, out: &mut impl Write) -> io::Result<()> {
        match self {
            Content::Bytes(data) => out.write_all(data),
            Content::File { path, verify } => {
                let mut src = fs::File::open(path)?;
                match verify {
                    None => io::copy(&mut src, out).map(|_| ()),
                    Some(want) => {
                        let mut hashing = Hashing {
                            inner: out,
                            hasher: hasher(want.hash_type),
                        };
                        io::copy(&mut src, &mut hashing)?;
                        let got = hex::encode(hashing.hasher.finalize_reset());
                        if got == want.hsum {
                            Ok(())
                        } else {
                            Err(io::Error::other(format!(
                                "{} changed while it was copied: its {} is now {got}, not {}",
                                path.display(),
                                want.type_name(),
                                want.hsum
                            )))
                        }
                    }
                }
            }
        }
    }
}

/// A writer that hashes what passes through it.
struct Hashing<'w, W: Write> {
    inner: &'w mut W,
    hasher: Box<dyn DynDigest>,
}

impl<W: Write> Write for Hashing<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn hasher(kind: HashType) -> Box<dyn DynDigest> {
    match kind {
        HashType::Md5 => Box::new(md5::Md5::default()),
        HashType::Sha1 => Box::new(sha1::Sha1::default()),
        HashType::Sha224 => Box::new(sha2::Sha224::default()),
        HashType::Sha256 => Box::new(sha2::Sha256::default()),
        HashType::Sha384 => Box::new(sha2::Sha384::default()),
        HashType::Sha512 => Box::new(sha2::Sha512::default()),
    }
}

/// The first bytes of `path`, as Salt's `is_binary` reads them; a cut
/// multi-byte character at the end is dropped so it does not read as binary.
fn head(path: &Path) -> Vec<u8> {
    let mut buf = Vec::with_capacity(BINARY_PROBE);
    if let Ok(f) = fs::File::open(path) {
        let _ = f.take(BINARY_PROBE as u64).read_to_end(&mut buf);
    }
    if let Err(e) = std::str::from_utf8(&buf) {
        if e.error_len().is_none() {
            buf.truncate(e.valid_up_to());
        }
    }
    buf
}

/// The block two files are compared by.
const COMPARE_BLOCK: usize = 64 * 1024;

thread_local! {
    /// The two blocks [`same_files`] reads into, made once per thread
    /// (issue 25: two zeroed 64 KiB buffers and two `BufReader`s per warm
    /// `file.managed` were a fifth of its comparison's time).
    static COMPARE_BUFFERS: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether `target` holds what the file `source` holds: the same without
/// a read when [`same_memo`] found them so under the stamps they still
/// have; otherwise read and compared, and the memo told what was found.
/// `target_md`: the target's stat the caller holds (taken again if `None`).
fn same_as_source(source: &Path, target: &Path, target_md: Option<&fs::Metadata>) -> bool {
    // Before either stamp is taken or file read: a write after this
    // moment is stamped at least this late (`Pair::record` keeps only
    // stamps settled well before it).
    let start = same_memo::ReadStart::now();
    let t = match target_md {
        Some(md) => FileStamp::of_metadata(md),
        None => FileStamp::of(target),
    };
    let s = FileStamp::of(source);
    let (Some(t), Some(s)) = (t, s) else {
        same_memo::forget(target);
        return same_files(source, target, false).unwrap_or(false);
    };
    if t.size() != s.size() {
        same_memo::forget(target);
        return false;
    }
    let pair = same_memo::pair(target, &t, &s);
    if pair.holds() {
        return true;
    }
    let same = same_files(source, target, true).unwrap_or(false);
    if same {
        pair.record(start);
    } else {
        pair.forget();
    }
    same
}

/// Whether two files hold the same bytes, compared a block at a time
/// (each read straight into its block: no buffer in between) until both
/// end. `same_size`: the caller's stats found both of one size (neither
/// is stat again); otherwise files of two sizes are told apart first.
fn same_files(a: &Path, b: &Path, same_size: bool) -> io::Result<bool> {
    let mut fa = fs::File::open(a)?;
    let mut fb = fs::File::open(b)?;
    if !same_size && fa.metadata()?.len() != fb.metadata()?.len() {
        return Ok(false);
    }
    COMPARE_BUFFERS.with_borrow_mut(|buffers| {
        buffers.resize(2 * COMPARE_BLOCK, 0);
        let (ba, bb) = buffers.split_at_mut(COMPARE_BLOCK);
        loop {
            let n = read_full(&mut fa, ba)?;
            let m = read_full(&mut fb, bb)?;
            if n != m || ba[..n] != bb[..m] {
                return Ok(false);
            }
            // A block not filled: both files ended (`read_full` stops
            // short only at the end), so no further read is asked.
            if n < COMPARE_BLOCK {
                return Ok(true);
            }
        }
    })
}

/// Reads until `buf` is full or the end of the file.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_compare_and_diff_by_streaming() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b, c) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        fs::write(&a, "one\ntwo\n").expect("a");
        fs::write(&b, "one\ntwo\n").expect("b");
        fs::write(&c, "one\nthree\n").expect("c");
        let file = |p| Content::File {
            path: p,
            verify: None,
        };
        assert!(!file(&a).differs_from(&b, None));
        assert!(file(&a).differs_from(&c, None));
        assert!(file(&a).differs_from(&dir.path().join("missing"), None));
        assert_eq!(file(&a).diff_from(&b), "");
        assert_eq!(
            file(&c).diff_from(&a),
            "--- \n+++ \n@@ -1,2 +1,2 @@\n one\n-two\n+three\n"
        );
        let bin = dir.path().join("bin");
        fs::write(&bin, b"\0\x01\x02").expect("bin");
        assert_eq!(
            file(&bin).diff_from(&a),
            "Replace text file with binary file"
        );
    }

    #[test]
    fn a_copy_that_lost_its_hash_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = dir.path().join("src");
        fs::write(&src, "data\n").expect("src");
        let right = SourceSum {
            hash_type: HashType::Sha256,
            hsum: "6667b2d1aab6a00caa5aee5af8ad9f1465e567abf1c209d15727d57b3e8f6e5f".into(),
        };
        let mut out = Vec::new();
        Content::File {
            path: &src,
            verify: Some(&right),
        }
        .write_into(&mut out)
        .expect("the hash matches");
        assert_eq!(out, b"data\n");
        let wrong = SourceSum {
            hash_type: HashType::Sha256,
            hsum: "0".repeat(64),
        };
        let err = Content::File {
            path: &src,
            verify: Some(&wrong),
        }
        .write_into(&mut Vec::new())
        .expect_err("the hash differs");
        assert!(
            err.to_string().contains("changed while it was copied"),
            "{err}"
        );
    }
}
