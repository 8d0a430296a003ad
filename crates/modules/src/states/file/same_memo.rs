//! The verified-same memo (issue 25): which `file.managed` targets were
//! last found, by reading both, to hold exactly what their source file
//! holds, and under which stamps of the two files. A warm `file.managed`
//! whose target and source both still have those stamps is the same
//! without reading either (on a minion managing a 100 MB file, 200 MB
//! read on every highstate where nothing changed). Salt hashes the target
//! on every run; this departs from it only in speed: every answer is the
//! one a read would give.
//!
//! **What a stamp proves.** A [`FileStamp`] is the device, inode, size,
//! mtime and ctime (to the nanosecond). No process can set a ctime back:
//! any write, truncation, `chmod`, rename or `utimes` gives the file the
//! kernel's time of that moment, so a file changed after it was stamped
//! has another stamp, even with its size and mtime put back; a file
//! replaced (renamed over, a source fetched again) has another inode and
//! ctime.
//!
//! **Racy stamps** (git's racy-index problem). The kernel stamps files
//! with a coarse clock (one tick, 1-10 ms; whole seconds on ext3 or HFS+,
//! two seconds on FAT), so a file written again within the tick of its
//! stamp, to the same size, keeps its stamp. A pair is therefore recorded
//! only when both files' mtime and ctime are strictly older than
//! [`SETTLE`] before the moment the compare began reading: every write
//! after that moment is stamped at least that late, never with the
//! recorded time, even on a two-second filesystem. A file written since
//! (among them every target `file.managed` has just written) is simply
//! read again at its next check and recorded then. What the margin does
//! not cover: a clock stepped back by more than [`SETTLE`], a network
//! filesystem whose server clock lags this host's by more than it, and a
//! process writing the file through a shared `mmap` (a page already dirty
//! does not move the stamps again until it is written back).
//!
//! **Entries** are 24 bytes: a 64-bit hash of the target path (the key)
//! and a 128-bit hash of the path with both stamps (the check), both
//! SipHash under keys drawn at random for each process. A lookup is the
//! same only when the key finds an entry whose check is equal: a stamp
//! that changed gives another check unless 128 bits collide (2^-128 per
//! check; no one outside the process knows the keys to aim at it).
//!
//! **Bounded**, for the swarm's 10,000 identities × 50 targets: at most
//! 917,504 entries over the process ([`SHARDS`] × [`SHARD_ENTRIES`], each
//! shard a table of 65,536 slots of 25 bytes: 26 MB at most; a minion
//! managing 50 files holds a few KB).
//! Entries are admitted while there is room and never evicted for another
//! path (a cyclic pattern of one use per job, the swarm's, would make an
//! LRU evict every entry before its use); a path that is already there is
//! refreshed in place, and one found different or unreadable is dropped.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::exec::file::meta::FileStamp;

/// How much older than the start of a compare both files' mtime and
/// ctime must be for the pair to be recorded: more than a coarse clock's
/// tick, and the two seconds of FAT's timestamps.
pub(crate) const SETTLE: Duration = Duration::from_secs(2);

/// Shards of the table (each behind its own lock: the swarm's job
/// threads check their targets at once).
const SHARDS: usize = 16;

/// The entries one shard admits: 7/8 of 65,536, what a table of 65,536
/// slots holds before it would grow to twice that.
const SHARD_ENTRIES: usize = 57_344;

/// The moment a compare begins, taken before either file is opened.
#[derive(Clone, Copy)]
pub(crate) struct ReadStart(SystemTime);

impl ReadStart {
    /// Now.
    pub(crate) fn now() -> Self {
        ReadStart(SystemTime::now())
    }

    /// The moment a stamp must be older than to be recorded (seconds and
    /// nanoseconds since the epoch); `None` before the epoch plus
    /// [`SETTLE`] (a clock that wrong records nothing).
    fn settled_before(self) -> Option<(i64, i64)> {
        let d = self
            .0
            .checked_sub(SETTLE)?
            .duration_since(UNIX_EPOCH)
            .ok()?;
        Some((
            i64::try_from(d.as_secs()).ok()?,
            i64::from(d.subsec_nanos()),
        ))
    }
}

/// A key that is already a hash: the table uses it as it is.
#[derive(Default)]
struct KeyIsHash(u64);

impl Hasher for KeyIsHash {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type Table = HashMap<u64, [u64; 2], BuildHasherDefault<KeyIsHash>>;

/// A memo: the process has one ([`MEMO`]); tests make their own.
struct SameMemo {
    key: RandomState,
    check: [RandomState; 2],
    /// The entries one shard admits.
    per_shard: usize,
    shards: [Mutex<Table>; SHARDS],
}

/// The process's memo.
static MEMO: LazyLock<SameMemo> = LazyLock::new(|| SameMemo::new(SHARD_ENTRIES));

impl SameMemo {
    fn new(per_shard: usize) -> Self {
        SameMemo {
            key: RandomState::new(),
            check: [RandomState::new(), RandomState::new()],
            per_shard,
            shards: std::array::from_fn(|_| Mutex::new(Table::default())),
        }
    }

    /// The key of a target.
    fn key(&self, target: &Path) -> u64 {
        self.key.hash_one(target.as_os_str().as_bytes())
    }

    /// A target with its stamp and its source's, hashed once for both a
    /// lookup and a record.
    fn pair(&self, target: &Path, t: &FileStamp, s: &FileStamp) -> Pair<'_> {
        let path = target.as_os_str().as_bytes();
        Pair {
            memo: self,
            key: self.key(target),
            check: self.check.each_ref().map(|h| h.hash_one((path, t, s))),
            settled: (*t, *s),
        }
    }

    /// The shard of a key: bits the table uses neither for its slot (the
    /// low 16) nor for its tag (the top 7).
    fn shard(&self, key: u64) -> &Mutex<Table> {
        &self.shards[(key >> 32) as usize % SHARDS]
    }

    fn forget_key(&self, key: u64) {
        if let Ok(mut table) = self.shard(key).lock() {
            table.remove(&key);
        }
    }
}

/// A target, its stamp and its source's, as the memo looks them up.
pub(crate) struct Pair<'m> {
    memo: &'m SameMemo,
    key: u64,
    check: [u64; 2],
    /// The two stamps, whose times [`Pair::record`] checks.
    settled: (FileStamp, FileStamp),
}

impl Pair<'_> {
    /// Whether the target was found to hold what the source holds, and
    /// neither stamp changed since: the same, no read needed.
    pub(crate) fn holds(&self) -> bool {
        self.memo
            .shard(self.key)
            .lock()
            .is_ok_and(|table| table.get(&self.key) == Some(&self.check))
    }

    /// Records that the target was just read and found to hold what the
    /// source holds, in a compare that began at `start`: kept only when
    /// both stamps are settled (see the module's doc) and there is room;
    /// otherwise whatever was kept for the target is dropped. Whether it
    /// was kept.
    pub(crate) fn record(&self, start: ReadStart) -> bool {
        let (t, s) = &self.settled;
        let settled = start
            .settled_before()
            .is_some_and(|moment| t.changed_before(moment) && s.changed_before(moment));
        if !settled {
            self.forget();
            return false;
        }
        let Ok(mut table) = self.memo.shard(self.key).lock() else {
            return false;
        };
        if let Some(kept) = table.get_mut(&self.key) {
            *kept = self.check;
            return true;
        }
        if table.len() >= self.memo.per_shard {
            return false;
        }
        table.insert(self.key, self.check);
        true
    }

    /// Drops what is kept for the target (found different).
    pub(crate) fn forget(&self) {
        self.memo.forget_key(self.key);
    }
}

/// The process's memo's view of `target` (stamped `t`) and its source
/// (stamped `s`).
pub(crate) fn pair(target: &Path, t: &FileStamp, s: &FileStamp) -> Pair<'static> {
    MEMO.pair(target, t, s)
}

/// Drops what the process's memo keeps for `target` (not read, or one of
/// the two files is gone).
pub(crate) fn forget(target: &Path) {
    MEMO.forget_key(MEMO.key(target));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A moment after which the files of a test count as settled (the
    /// test moves the moment, not the clock).
    fn settled_start() -> ReadStart {
        ReadStart(SystemTime::now() + SETTLE + Duration::from_secs(1))
    }

    fn stamp(p: &Path) -> FileStamp {
        FileStamp::of(p).expect("stamp")
    }

    #[test]
    fn a_pair_is_kept_only_when_settled_and_only_for_its_stamps() {
        let memo = SameMemo::new(SHARD_ENTRIES);
        let dir = tempfile::tempdir().expect("tempdir");
        let (target, source, other) = (
            dir.path().join("t"),
            dir.path().join("s"),
            dir.path().join("o"),
        );
        for p in [&target, &source, &other] {
            std::fs::write(p, "x").expect("write");
        }
        let (t, s, o) = (stamp(&target), stamp(&source), stamp(&other));
        // Just written: inside the margin, not kept.
        assert!(!memo.pair(&target, &t, &s).record(ReadStart::now()));
        assert!(!memo.pair(&target, &t, &s).holds());
        assert!(memo.pair(&target, &t, &s).record(settled_start()));
        assert!(memo.pair(&target, &t, &s).holds());
        // Another stamp on either side, or another path: not the same.
        assert!(!memo.pair(&target, &o, &s).holds());
        assert!(!memo.pair(&target, &t, &o).holds());
        assert!(!memo.pair(&other, &t, &s).holds());
        // A young stamp recorded later drops the old pair.
        assert!(!memo.pair(&target, &t, &s).record(ReadStart::now()));
        assert!(!memo.pair(&target, &t, &s).holds());
        assert!(memo.pair(&target, &t, &s).record(settled_start()));
        memo.forget_key(memo.key(&target));
        assert!(!memo.pair(&target, &t, &s).holds());
    }

    /// A full shard admits no new path but refreshes the ones it holds.
    #[test]
    fn a_full_memo_admits_no_new_path() {
        let memo = SameMemo::new(1);
        let dir = tempfile::tempdir().expect("tempdir");
        let source = dir.path().join("s");
        std::fs::write(&source, "x").expect("write");
        let s = stamp(&source);
        let targets: Vec<_> = (0..4 * SHARDS)
            .map(|i| dir.path().join(format!("t{i}")))
            .collect();
        let kept: Vec<_> = targets
            .iter()
            .filter(|t| memo.pair(t, &s, &s).record(settled_start()))
            .collect();
        assert!(kept.len() <= SHARDS, "{} kept", kept.len());
        assert!(kept.len() < targets.len());
        for t in &targets {
            assert_eq!(
                memo.pair(t, &s, &s).holds(),
                kept.contains(&t),
                "{}",
                t.display()
            );
        }
        assert!(memo.pair(kept[0], &s, &s).record(settled_start()));
    }

    /// The bound's memory is figured on a table of 65,536 slots per shard:
    /// a shard full to its bound does not grow past it.
    #[test]
    fn a_full_shard_stays_in_its_table() {
        let mut table = Table::default();
        for key in 0..SHARD_ENTRIES as u64 {
            table.insert(key.wrapping_mul(0x9E37_79B9_7F4A_7C15), [key, key]);
        }
        assert!(
            table.capacity() < 2 * SHARD_ENTRIES,
            "{SHARD_ENTRIES} entries took a table of capacity {}",
            table.capacity()
        );
    }
}
