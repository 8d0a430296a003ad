//! Real git for tests: the binary with fixed identities and dates, a
//! work repository with its bare remote ([`Upstream`]), and a `git daemon`
//! serving a directory on 127.0.0.1 ([`Daemon`], stopped when dropped).
//! Used by `halite-modules`' git tests and `halite-gitfs`' tests.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Whether git is installed; prints the skip reason when it is not.
pub fn ready() -> bool {
    if Command::new("git").arg("--version").output().is_err() {
        println!("skipped: git is not installed (scripts/install-deps.sh installs it)");
        return false;
    }
    true
}

/// Runs git in `dir` with fixed identities and dates (so SHAs are stable)
/// and returns its trimmed stdout; panics with git's stderr on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env("GIT_AUTHOR_DATE", "2020-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2020-01-01T00:00:00Z")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A work repository (`work/`, branch `master`) and its bare remote
/// (`remote.git`), in a temp dir of their own.
pub struct Upstream {
    /// The temp dir holding both.
    pub dir: tempfile::TempDir,
}

impl Upstream {
    /// An empty work repository and an empty bare remote.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let u = Upstream { dir };
        std::fs::create_dir_all(u.work()).unwrap();
        git(&u.work(), &["init", "-q", "-b", "master"]);
        git(u.dir.path(), &["init", "-q", "--bare", "remote.git"]);
        u
    }
    /// The work repository.
    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }
    /// The bare remote.
    pub fn bare(&self) -> PathBuf {
        self.dir.path().join("remote.git")
    }
    /// The bare remote's `file://` URL.
    pub fn url(&self) -> String {
        format!("file://{}", self.bare().display())
    }
    /// Writes `path` (directories made) in the work repository.
    pub fn write(&self, path: &str, text: &str) {
        let p = self.work().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    /// Commits everything in the work repository; the new HEAD.
    pub fn commit(&self, msg: &str) -> String {
        git(&self.work(), &["add", "-A"]);
        git(&self.work(), &["commit", "-q", "-m", msg]);
        git(&self.work(), &["rev-parse", "HEAD"])
    }
    /// Force-pushes every branch and tag to the bare remote.
    pub fn push(&self) {
        let bare = self.bare().display().to_string();
        git(&self.work(), &["push", "-q", "--force", &bare, "--all"]);
        git(&self.work(), &["push", "-q", "--force", &bare, "--tags"]);
    }
}

impl Default for Upstream {
    fn default() -> Self {
        Self::new()
    }
}

/// A `git daemon` serving a directory on 127.0.0.1 (pushes allowed),
/// stopped on drop.
pub struct Daemon {
    child: Child,
    port: u16,
}

impl Daemon {
    /// Serves the repositories under `base`; returns once `probe` (a
    /// repository under it) answers `git ls-remote` (a bounded retry, no
    /// timing assertion).
    pub fn start(base: &Path, probe: &str) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("git")
            .args([
                "daemon",
                "--reuseaddr",
                "--export-all",
                "--enable=receive-pack",
                "--listen=127.0.0.1",
                &format!("--port={port}"),
                &format!("--base-path={}", base.display()),
                &base.display().to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("git daemon starts");
        let d = Daemon { child, port };
        for _ in 0..200 {
            let ok = Command::new("git")
                .args(["ls-remote", &d.url(probe)])
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
            if ok {
                return d;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("git daemon on 127.0.0.1:{port} never answered");
    }
    /// The `git://` URL of repository `repo` under the served directory.
    pub fn url(&self, repo: &str) -> String {
        format!("git://127.0.0.1:{}/{repo}", self.port)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
