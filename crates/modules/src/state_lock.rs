//! Salt's one state run at a time on a host: `state.apply`, `state.sls`,
//! `state.highstate` (and `state.test`) refuse to start while another runs,
//! with Salt's message and retcode 1, unless `queue=True` (or the
//! `state_queue` option), which waits its turn, or `concurrent=True`.
//!
//! The rule holds across processes: the minion's jobs and any
//! `halite-call --local` share one lock file, `<cachedir>/state_run.lock`,
//! locked with `flock` for the length of the run and holding the holder's
//! function, pid and jid for the message. A holder that dies releases the
//! lock with its last file descriptor, so a stale file never blocks a run
//! (Salt reads its proc files and skips those whose pid is gone).
//!
//! A swarm (`halite-minion --swarm N`, many minion identities in one
//! process for benchmarks) stands for N hosts: each identity's options
//! name its own lock directory ([`LOCK_DIR_OPT`]), so two identities'
//! runs never refuse each other, while one identity's runs still do.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use halite_state::Value;
use serde_json::json;

/// The lock file's name under the cachedir.
pub const LOCK_FILE: &str = "state_run.lock";

/// The option naming the directory of the state-run lock when it is not
/// the cachedir: set per identity by a swarm, where every identity is a
/// host of its own but all share one cachedir.
pub const LOCK_DIR_OPT: &str = "state_run_lock_dir";

/// The directory whose [`LOCK_FILE`] guards state runs for a host with
/// options `opts`: [`LOCK_DIR_OPT`] when set, else the cachedir; `None`
/// (the run goes unlocked) when neither is set.
pub fn lock_dir(opts: &Value) -> Option<&Path> {
    [LOCK_DIR_OPT, "cachedir"]
        .iter()
        .filter_map(|key| opts.get(*key).and_then(Value::as_str))
        .find(|d| !d.is_empty())
        .map(Path::new)
}

/// A state run holding the host's lock until it is dropped.
#[derive(Debug)]
pub struct StateRunLock {
    /// The locked file (closing it releases the lock); `None` when the run
    /// goes unlocked (no cachedir, or nested in a run of the same jid).
    file: Option<File>,
}

thread_local! {
    /// Whether this thread holds the host's lock: a state run started from
    /// inside one (`module.run: state.sls`, `salt['state.apply']` in a
    /// template) is part of it, whatever jid it computes.
    static HELD_HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Drop for StateRunLock {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            HELD_HERE.with(|h| h.set(false));
        }
    }
}

/// What the caller asked for when another run holds the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenBusy {
    /// Refuse with Salt's message (the default).
    Refuse,
    /// Wait for the other run to end (`queue=True`).
    Queue,
}

/// Who holds the lock, as the holder wrote it.
#[derive(Debug, Clone, PartialEq)]
struct Holder {
    fun: String,
    pid: u64,
    jid: String,
}

impl Holder {
    fn read(file: &mut File) -> Option<Holder> {
        let mut text = String::new();
        file.seek(SeekFrom::Start(0)).ok()?;
        file.read_to_string(&mut text).ok()?;
        let v: Value = serde_json::from_str(&text).ok()?;
        Some(Holder {
            fun: v.get("fun")?.as_str()?.to_string(),
            pid: v.get("pid")?.as_u64()?,
            jid: v.get("jid")?.as_str()?.to_string(),
        })
    }

    /// Salt's `state.running` line for this run.
    fn message(&self) -> String {
        format!(
            "The function \"{}\" is running as PID {} and was started at {} with jid {}",
            self.fun,
            self.pid,
            halite_salt_rules::jid::jid_to_time(&self.jid),
            self.jid
        )
    }
}

/// The lock file of the host whose cachedir is `cachedir`.
pub fn lock_path(cachedir: &Path) -> PathBuf {
    cachedir.join(LOCK_FILE)
}

/// Takes the host's state-run lock for `fun` (`state.sls`...) of job
/// `jid`. `Err` holds Salt's refusal (a list of one line per running
/// state job) when another run holds it and `when_busy` is
/// [`WhenBusy::Refuse`]. Without a usable cachedir the run goes unlocked
/// (logged): the lock must never stop a run it cannot see.
pub fn acquire(
    cachedir: Option<&Path>,
    fun: &str,
    jid: &str,
    when_busy: WhenBusy,
) -> Result<StateRunLock, Vec<String>> {
    let unlocked = StateRunLock { file: None };
    let Some(cachedir) = cachedir else {
        return Ok(unlocked);
    };
    if HELD_HERE.with(std::cell::Cell::get) {
        return Ok(unlocked);
    }
    let path = lock_path(cachedir);
    let opened = std::fs::create_dir_all(cachedir).and_then(|()| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
    });
    let mut file = match opened {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot open the state-run lock; this run is not guarded against a concurrent one");
            return Ok(unlocked);
        }
    };
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let holder = read_holder(&mut file);
            // Salt skips its own jid: a run nested in this one (a state
            // calling state.sls) is not a second run.
            if holder.as_ref().is_some_and(|h| h.jid == jid) {
                return Ok(unlocked);
            }
            match when_busy {
                WhenBusy::Refuse => {
                    let line = holder.map(|h| h.message()).unwrap_or_else(|| {
                        "Another state run is in progress on this host (its lock file is being written)"
                            .to_string()
                    });
                    return Err(vec![line]);
                }
                WhenBusy::Queue => {
                    tracing::info!(%fun, %jid, "another state run is in progress; queued");
                    if let Err(e) = file.lock() {
                        tracing::warn!(error = %e, "cannot wait for the state-run lock; running unguarded");
                        return Ok(unlocked);
                    }
                }
            }
        }
        Err(TryLockError::Error(e)) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot lock the state-run lock; this run is not guarded against a concurrent one");
            return Ok(unlocked);
        }
    }
    let written = write_record(
        &file,
        &json!({"fun": fun, "pid": std::process::id(), "jid": jid}).to_string(),
    );
    if let Err(e) = written {
        tracing::warn!(path = %path.display(), error = %e, "cannot record this run in the state-run lock");
    }
    HELD_HERE.with(|h| h.set(true));
    Ok(StateRunLock { file: Some(file) })
}

/// Writes the holder's `record` over the file's start, padded with
/// spaces (which JSON ignores) to the length the file already has: the
/// file is never cut, so a minion's job does not pay, on ext4, a
/// truncation and the flush to disk it forces when the file is closed
/// (issue 25: 3% of a fleet of minions' CPU in a settled highstate, a
/// record rewritten per job at the same length). A reader racing this
/// write may read the previous holder's record, as it could before, or
/// a mixture of the two: only the refusal's message can be wrong then;
/// the refusal itself is decided by the lock, never by the record.
fn write_record(file: &File, record: &str) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let had = file.metadata()?.len();
    let mut bytes = record.as_bytes().to_vec();
    match usize::try_from(had) {
        // Not this function's writing (a record is ~100 bytes): cut.
        Ok(had) if had <= RECORD_PAD_MAX => bytes.resize(had.max(bytes.len()), b' '),
        _ => file.set_len(0)?,
    }
    file.write_all_at(&bytes, 0)
}

/// The longest file [`write_record`] pads to rather than cuts.
const RECORD_PAD_MAX: usize = 4096;

/// The holder's record; the holder writes it just after locking, so an
/// empty file is read again a few times.
fn read_holder(file: &mut File) -> Option<Holder> {
    for _ in 0..20 {
        if let Some(h) = Holder::read(file) {
            return Some(h);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_run_is_refused_with_salts_line_until_the_first_ends() {
        let dir = tempfile::tempdir().unwrap();
        let jid = "20261125235740294873";
        let first = acquire(Some(dir.path()), "state.sls", jid, WhenBusy::Refuse).unwrap();
        // Another job of the minion runs on another thread.
        let path = dir.path().to_path_buf();
        let refused = std::thread::spawn(move || {
            acquire(
                Some(&path),
                "state.apply",
                "20261125235741000000",
                WhenBusy::Refuse,
            )
            .err()
        })
        .join()
        .unwrap()
        .expect("the second run was not refused");
        assert_eq!(
            refused,
            vec![format!(
                "The function \"state.sls\" is running as PID {} and was started at 2026, Nov 25 23:57:40.294873 with jid {jid}",
                std::process::id()
            )]
        );
        // A run nested in this one on its thread is part of it, any jid.
        assert!(acquire(
            Some(dir.path()),
            "state.sls",
            "20261125235749000000",
            WhenBusy::Refuse
        )
        .is_ok());
        drop(first);
        // Another thread (another job of the minion) is a second run.
        let held = acquire(Some(dir.path()), "state.sls", jid, WhenBusy::Refuse).unwrap();
        let path = dir.path().to_path_buf();
        let other = std::thread::spawn(move || {
            acquire(
                Some(&path),
                "state.sls",
                "20261125235750000000",
                WhenBusy::Refuse,
            )
            .is_err()
        });
        assert!(
            other.join().unwrap(),
            "a second thread's run was not refused"
        );
        // The same jid from another thread (Salt skips its own jid) is not.
        let path = dir.path().to_path_buf();
        let same = std::thread::spawn(move || {
            acquire(
                Some(&path),
                "state.sls",
                "20261125235740294873",
                WhenBusy::Refuse,
            )
            .is_ok()
        });
        assert!(same.join().unwrap());
        drop(held);
        assert!(acquire(
            Some(dir.path()),
            "state.apply",
            "20261125235742000000",
            WhenBusy::Refuse
        )
        .is_ok());
    }

    /// The refusal a thread other than the holder's gets now.
    fn refusal(dir: &Path) -> Vec<String> {
        let dir = dir.to_path_buf();
        std::thread::spawn(move || {
            acquire(
                Some(&dir),
                "state.sls",
                "20261128000000000000",
                WhenBusy::Refuse,
            )
            .err()
        })
        .join()
        .unwrap()
        .expect("a second run was not refused")
    }

    #[test]
    fn a_shorter_record_over_a_longer_one_names_the_new_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = lock_path(dir.path());
        // A longer record left by an earlier holder (another function).
        let old = json!({"fun": "state.highstate_with_a_long_name", "pid": 4_000_000_000u64, "jid": "20261125235740294873"}).to_string();
        std::fs::write(&path, &old).unwrap();
        let held = acquire(
            Some(dir.path()),
            "state.sls",
            "20261128120000000000",
            WhenBusy::Refuse,
        )
        .unwrap();
        // Padded, not cut: the file keeps its length.
        assert_eq!(std::fs::metadata(&path).unwrap().len(), old.len() as u64);
        assert_eq!(
            refusal(dir.path()),
            vec![format!(
                "The function \"state.sls\" is running as PID {} and was started at 2026, Nov 28 12:00:00.000000 with jid 20261128120000000000",
                std::process::id()
            )]
        );
        drop(held);
        // A file far longer than any record (not one this wrote) is cut.
        std::fs::write(&path, vec![b'x'; RECORD_PAD_MAX + 1]).unwrap();
        let held = acquire(
            Some(dir.path()),
            "state.apply",
            "20261128130000000000",
            WhenBusy::Refuse,
        )
        .unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() < 200);
        assert!(refusal(dir.path())[0].contains("\"state.apply\""));
        drop(held);
    }
}
