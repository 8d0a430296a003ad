//! What the integration tests of several crates share, so each setup
//! exists once, when they drive real processes on loopback: whether they
//! can run (root), a free port, waiting for a condition, a daemon process
//! that is killed when the test ends (also when it fails); [`fleet`] (a
//! real master and minions started from the workspace's binaries); [`git`] (the
//! `git` binary with fixed identities, a work repository and its bare
//! remote, a `git daemon` on 127.0.0.1), [`gpg`] (a GnuPG key of the test's
//! own and text encrypted to it) and [`sshd`] (an ssh server of the
//! test's own on 127.0.0.1); [`return_scan`] (the fleet benches' count of
//! a `state.apply --out json` stream); [`relay`] (a TCP relay to the
//! master that a test cuts or holds back). A dev-dependency only.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test support: a helper that cannot set up panics, and a panic is a failed test"
)]

pub mod fleet;
pub mod git;
pub mod gpg;
pub mod relay;
pub mod return_scan;
pub mod sshd;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// Whether tests that start the daemons can run (they bind sockets and
/// write key files as root); prints why not.
pub fn can_run() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping: the daemons' key and cache directories need root");
        return false;
    }
    true
}

/// Writes `text` to `path`, creating its parent directories (trees and
/// configs the tests lay out).
pub fn write_file(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a path with a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// A free TCP port on loopback (127.0.0.1 only), never one this test
/// process handed out before.
///
/// The port is free when it is picked, not reserved: tests of one binary
/// run in parallel, and the kernel may offer a port again once its picker
/// closed it, so two fleets could be given the same port (the likely
/// cause of an API test's "invalid HTTP version" in a CI run: its HTTP
/// answered by something that is not the API). Remembering what was
/// handed out keeps a process's own tests apart.
///
/// # Panics
/// When the system has no free port: the test cannot run then.
pub fn free_port() -> u16 {
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        #[allow(clippy::expect_used, reason = "test support: no port is a failed test")]
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        if !handed_out.contains(&port) {
            handed_out.push(port);
            return port;
        }
    }
}

/// Waits until `check` holds, up to `limit`; whether it did.
pub fn wait_for(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A daemon process with its log file, killed when dropped.
pub struct Daemon {
    /// The process.
    pub child: Child,
    /// Its log file.
    pub log: PathBuf,
}

impl Daemon {
    /// SIGKILL now, and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
    /// Whether the process still runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
    /// The daemon's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A `Write` into memory that the test keeps a clone of, to read what a
/// terminal drawer or a log subscriber wrote there.
#[derive(Clone, Default)]
pub struct SharedBuffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SharedBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SharedBuffer {
    /// Everything written so far, as text.
    pub fn text(&self) -> String {
        let bytes = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The lines written so far that contain `text`.
    pub fn lines_with(&self, text: &str) -> Vec<String> {
        self.text()
            .lines()
            .filter(|l| l.contains(text))
            .map(str::to_string)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::free_port;

    #[test]
    fn free_port_never_hands_out_a_port_twice_in_one_process() {
        // The kernel's picks for port 0 repeat within a few thousand
        // (a birthday draw over the ephemeral range): 3,000 picks
        // collide without the memory of what was handed out.
        let mut ports: Vec<u16> = (0..3000).map(|_| free_port()).collect();
        let picked = ports.len();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), picked, "a port was handed out twice");
    }
}
