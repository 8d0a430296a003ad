//! A real master and real minions on loopback, each in its own temp
//! config dir, driven through the real CLI binaries: the fleet is
//! halite-test-support's, shared with the API's tests.
#![allow(dead_code, unused_imports)]

use std::path::Path;

pub mod compile_mine;

pub use halite_test_support::fleet::{bin, read_all, sessions, EventWatch, Fleet, QUICK_KEEPALIVE};
pub use halite_test_support::{can_run, free_port, wait_for, write_file, Daemon};

/// The mode bits of `path`.
pub fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0)
}
