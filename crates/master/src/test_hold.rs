//! The master's test holds, in one place: a file a test creates beside
//! the job cache (`jobs.sqlite.hold-large-commits`,
//! `jobs.sqlite.hold-checkpoint`) holds one step of the daemon while it
//! exists, so a test checks an order with real daemons without timing
//! anything. Only with debug assertions: a release master never looks.

use std::path::Path;

/// Whether the test hold `hold` is in place.
#[cfg(debug_assertions)]
pub(crate) fn held(hold: &Path) -> bool {
    hold.exists()
}

/// Never: a release master has no test holds.
#[cfg(not(debug_assertions))]
pub(crate) fn held(_hold: &Path) -> bool {
    false
}

/// Waits while the test hold `hold` is in place.
pub(crate) fn wait_while_held(hold: &Path) {
    while held(hold) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
