//! A daemon's panic or failed allocation reaches its `log_file`, not only
//! stderr (issue 17). Each case runs in a child process (this test binary
//! run again with an environment variable), which then dies for real.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::process::Command;

halite_perf::fast_allocator!();

const CHILD: &str = "HALITE_CRASH_LOG_CHILD";

/// In the child: logs to the file, then crashes as asked.
fn child(mode: &str, log: &str) {
    halite_logging::init("info", log);
    tracing::info!("started");
    match mode {
        "panic" => panic!("boom from the test"),
        _ => {
            // Far past any machine's memory: the allocator returns null.
            let size = std::hint::black_box(1usize << 52);
            let v: Vec<u8> = Vec::with_capacity(size);
            std::hint::black_box(v);
        }
    }
}

fn crash(mode: &str) -> (String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("daemon.log");
    let out = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "run_child", "--nocapture"])
        .env(CHILD, format!("{mode}:{}", log.display()))
        .output()
        .expect("run the child");
    assert!(!out.status.success(), "the child did not crash");
    (
        std::fs::read_to_string(&log).unwrap_or_default(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn run_child() {
    if let Ok(spec) = std::env::var(CHILD) {
        if let Some((mode, log)) = spec.split_once(':') {
            child(mode, log);
        }
    }
}

#[test]
fn a_panic_is_written_to_the_log_file() {
    let (log, stderr) = crash("panic");
    assert!(log.contains("started"), "{log}");
    assert!(
        log.contains("panicked") && log.contains("boom from the test"),
        "{log}"
    );
    assert!(stderr.contains("boom from the test"), "{stderr}");
}

#[test]
fn a_failed_allocation_is_written_to_the_log_file() {
    let (log, _) = crash("alloc");
    assert!(
        log.contains("memory allocation of 4503599627370496 bytes failed"),
        "{log}"
    );
}
