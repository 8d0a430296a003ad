//! An sshd of a test's own, shared by the test crates that need an ssh
//! server (`crates/modules/tests/git.rs`, `crates/gitfs/tests/gitfs.rs`):
//! its config, host key and authorized_keys in the test's temp dir,
//! listening on a free 127.0.0.1 port, killed when dropped.

use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Where Debian's openssh-server puts the daemon (scripts/install-deps.sh).
pub const SSHD: &str = "/usr/sbin/sshd";

/// A running sshd; killed on drop.
pub struct Sshd {
    child: Child,
    /// The loopback port it listens on.
    pub port: u16,
}

impl Sshd {
    /// Starts sshd in `dir` accepting exactly the key pair at `key` (its
    /// `.pub` is copied to `dir/authorized_keys`): the shape every ssh test
    /// shares; `None` when sshd is not installed.
    pub fn authorizing(dir: &Path, key: &Path) -> Option<Self> {
        let authorized = dir.join("authorized_keys");
        let mut public = key.as_os_str().to_owned();
        public.push(".pub");
        std::fs::copy(&public, &authorized).unwrap();
        Self::start(dir, &authorized)
    }

    /// The `ssh://root@127.0.0.1:<port><path>` url of a repository at
    /// `path` on this server.
    pub fn url(&self, path: &Path) -> String {
        format!("ssh://root@127.0.0.1:{}{}", self.port, path.display())
    }

    /// Starts sshd with a new host key in `dir`, accepting the keys of
    /// `authorized` (an authorized_keys file); `None` when sshd is not
    /// installed (the caller prints why it skips).
    fn start(dir: &Path, authorized: &Path) -> Option<Self> {
        if !Path::new(SSHD).exists() {
            return None;
        }
        let host_key = dir.join("host_key");
        keygen(&host_key);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let conf = dir.join("sshd_config");
        std::fs::write(
            &conf,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\n\
                 PidFile none\nUsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\n",
                host_key.display(),
                authorized.display()
            ),
        )
        .unwrap();
        // Debian's sshd refuses to start without its privilege separation dir.
        std::fs::create_dir_all("/run/sshd").unwrap();
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut sshd = Sshd { child, port };
        let up = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        if !up {
            let _ = sshd.child.kill();
            panic!("sshd did not listen on 127.0.0.1:{port}");
        }
        Some(sshd)
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An ed25519 key pair without a passphrase at `path` (and `.pub`).
pub fn keygen(path: &Path) {
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "ssh-keygen {}", path.display());
}
