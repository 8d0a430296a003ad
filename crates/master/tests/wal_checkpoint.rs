//! The job cache's WAL checkpointer (wal_checkpoint.rs, issue 25) on a
//! real job cache in a temp dir: the master's commits never checkpoint,
//! the checkpointer keeps the WAL bounded, and what was committed is read
//! back by a cache opened again.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use halite_master::jobcache::JobCache;
use halite_master::wal_checkpoint::{hold_path, Checkpointer};
use halite_proto::msg::JobReturn;

fn wal_len(path: &Path) -> u64 {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(PathBuf::from(wal)).map_or(0, |m| m.len())
}

/// `n` returns of job `jid` whose values are 256 KiB of text that does
/// compresses little (zstd: about 60%, so a commit adds ~600 KiB).
fn returns(jid: &str, n: usize) -> Vec<JobReturn> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|i| {
            let text: String = (0..256 * 1024)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    char::from(b'a' + (x % 26) as u8)
                })
                .collect();
            JobReturn {
                jid: jid.into(),
                id: format!("m{i}"),
                fun: "test.arg".into(),
                fun_args: Vec::new(),
                ret: serde_json::Value::String(text),
                retcode: 0,
                success: true,
            }
        })
        .collect()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The job cache as the master opens it: its commits never checkpoint,
/// its checkpointer does.
#[cfg(test)]
fn master_cache(path: &Path) -> (JobCache, Checkpointer) {
    let cache = JobCache::open(path)
        .and_then(JobCache::without_autocheckpoint)
        .expect("the job cache opens");
    let ckpt = Checkpointer::start(path).expect("the checkpointer starts");
    (cache, ckpt)
}

/// 48 commits of four returns (~30 MiB: seven times SQLite's own
/// checkpoint point), each told to the checkpointer as the writer does.
#[cfg(test)]
fn commit_48(cache: &mut JobCache, ckpt: &Checkpointer) {
    let signal = ckpt.signal();
    for i in 0..48 {
        let batch = returns(&format!("2026{i:016}"), 4);
        cache.store_returns(&batch).expect("the commit ends");
        signal.committed(1 << 20);
    }
}

#[test]
fn the_wal_is_checkpointed_off_the_writer_and_emptied_when_idle() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.sqlite");
    let (mut cache, ckpt) = master_cache(&path);
    commit_48(&mut cache, &ckpt);
    wait_until("the WAL emptied after the commits stopped", || {
        wal_len(&path) == 0
    });
    assert!(
        std::fs::metadata(&path).unwrap().len() > 16 << 20,
        "the returns are in the database file"
    );
    drop(cache);
    let cache = JobCache::open(&path).unwrap();
    assert_eq!(cache.returns(&format!("2026{:016}", 47)).unwrap().len(), 4);
}

#[test]
fn commits_go_on_while_a_checkpoint_is_held_and_a_reopened_cache_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.sqlite");
    let (mut cache, ckpt) = master_cache(&path);
    // The checkpointer is stuck (as in a long fsync) before its first
    // checkpoint: every commit ends all the same, and none of them
    // checkpoints on its own (SQLite's would start the WAL over at
    // 1,000 pages: the file would stay near 4 MiB).
    std::fs::write(hold_path(&path), b"").unwrap();
    commit_48(&mut cache, &ckpt);
    let held = wal_len(&path);
    assert!(
        held > 16 << 20,
        "the WAL grew past the bound while the checkpoint was held ({held} bytes)"
    );
    // A master started again now (its WAL not yet in the database)
    // reads every return.
    let reopened = JobCache::open(&path).unwrap();
    for i in 0..48 {
        assert_eq!(reopened.returns(&format!("2026{i:016}")).unwrap().len(), 4);
    }
    drop(reopened);
    // The hold gone, the checkpointer catches up and empties the WAL.
    std::fs::remove_file(hold_path(&path)).unwrap();
    wait_until("the WAL emptied once the hold was gone", || {
        wal_len(&path) == 0
    });
    assert_eq!(cache.returns(&format!("2026{:016}", 0)).unwrap().len(), 4);
}
