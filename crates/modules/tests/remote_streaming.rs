//! A large remote file is streamed to disk, never held in memory: a
//! 256 MiB download through `cp.get_url` must not raise this process's
//! peak resident memory (VmHWM) by more than a small fraction of its size.
//! (Its own test binary, so no other test's allocations count.)
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod support;

use std::collections::BTreeMap;
use std::fs;
use std::sync::Arc;

use halite_modules::exec::Args;
use halite_modules::host::LogEvents;
use halite_modules::{table, Host, LocalFileClient};
use halite_state::Map;
use serde_json::json;

/// Peak resident set size of this process, in KiB.
fn vm_hwm_kib() -> u64 {
    let status = fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status")
}

#[test]
fn a_large_download_is_streamed_to_disk() {
    const SIZE: u64 = 256 * 1024 * 1024;
    let dir = tempfile::tempdir().expect("tempdir");
    let www = dir.path().join("www");
    fs::create_dir_all(&www).expect("mkdir");
    // A sparse file: the server reads zeros without the disk holding them.
    fs::File::create(www.join("big.bin"))
        .and_then(|f| f.set_len(SIZE))
        .expect("sparse file");
    let srv = support::Server::start(&www, None);
    let host = Host {
        opts: json!({"cachedir": dir.path().join("cache").display().to_string()}),
        grains: json!({}),
        pillar: json!({}),
        files: Arc::new(LocalFileClient::new(BTreeMap::new())),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    };
    let dest = dir.path().join("big.bin");
    let before = vm_hwm_kib();
    host.call(
        "cp.get_url",
        &Args {
            positional: vec![
                json!(format!("http://127.0.0.1:{}/big.bin", srv.port)),
                json!(dest.display().to_string()),
            ],
            kwargs: Map::new(),
        },
    )
    .expect("cp.get_url");
    let grown_kib = vm_hwm_kib().saturating_sub(before);
    eprintln!("peak resident memory grew by {grown_kib} KiB for the download");
    assert_eq!(fs::metadata(&dest).expect("dest").len(), SIZE);
    assert!(
        grown_kib < 32 * 1024,
        "peak memory grew by {grown_kib} KiB for a {} MiB download",
        SIZE / 1024 / 1024
    );
}
