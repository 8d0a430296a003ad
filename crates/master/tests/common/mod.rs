//! A real master and real minions on loopback, each in its own temp
//! config dir, driven through the real CLI binaries.
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

pub use halite_test_support::{can_run, free_port, wait_for, Daemon};

/// The path of a workspace binary (built by `cargo build --workspace --bins`).
pub fn bin(name: &str) -> PathBuf {
    let master = PathBuf::from(env!("CARGO_BIN_EXE_halite-master"));
    let path = master.with_file_name(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` before these tests",
        path.display()
    );
    path
}

/// One test fleet: a temp root, the master's config dir and its ports.
pub struct Fleet {
    pub root: tempfile::TempDir,
    pub publish_port: u16,
    pub ret_port: u16,
}

impl Fleet {
    pub fn new() -> Self {
        Self {
            root: tempfile::tempdir().expect("tempdir"),
            publish_port: free_port(),
            ret_port: free_port(),
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    pub fn master_dir(&self) -> PathBuf {
        self.path("master-conf")
    }

    /// Writes the master config (plus `extra` YAML) and starts the master.
    pub fn start_master(&self, extra: &str) -> Daemon {
        let dir = self.master_dir();
        std::fs::create_dir_all(&dir).expect("master conf dir");
        let root = self.root.path().display();
        let log = self.path("master.log");
        std::fs::write(
            dir.join("master"),
            format!(
                "interface: 127.0.0.1\npublish_port: {}\nret_port: {}\npki_dir: {root}/master-pki\ncachedir: {root}/master-cache\nsock_dir: {root}/master-sock\nlog_file: {}\nlog_level: debug\ntimeout: 10\ngather_job_timeout: 2\n{extra}\n",
                self.publish_port,
                self.ret_port,
                log.display()
            ),
        )
        .expect("master config");
        let child = Command::new(bin("halite-master"))
            .arg("-c")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start halite-master");
        let daemon = Daemon { child, log };
        let sock = self.path("master-sock/master.sock");
        assert!(
            wait_for(Duration::from_secs(20), || sock.exists()),
            "the master did not start"
        );
        daemon
    }

    /// Writes a minion config for `id` (plus `extra` YAML) and starts it.
    pub fn start_minion(&self, id: &str, extra: &str) -> Daemon {
        let dir = self.path(&format!("minion-{id}"));
        std::fs::create_dir_all(&dir).expect("minion dir");
        let log = dir.join("minion.log");
        std::fs::write(
            dir.join("minion"),
            format!(
                "master: 127.0.0.1\nmaster_port: {}\npublish_port: {}\nid: {id}\npki_dir: {d}/pki\ncachedir: {d}/cache\nsock_dir: {d}/sock\nlog_file: {}\nlog_level: debug\nacceptance_wait_time: 1\nauth_timeout: 2\nmaster_alive_interval: 1\nrecon_default: 200\nrecon_max: 1000\n{extra}\n",
                self.ret_port,
                self.publish_port,
                log.display(),
                d = dir.display()
            ),
        )
        .expect("minion config");
        let child = Command::new(bin("halite-minion"))
            .arg("-c")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start halite-minion");
        Daemon { child, log }
    }

    /// Starts one `halite-minion --swarm n` (ids `swarm-*`, plus `extra`
    /// YAML in its config) and waits until the master has authenticated
    /// all `n`: the fleet tests of restarts and shutdowns start from here.
    pub fn start_swarm(&self, n: usize, extra: &str) -> Daemon {
        let dir = self.path("swarm");
        std::fs::create_dir_all(&dir).expect("swarm dir");
        std::fs::write(
            dir.join("minion"),
            format!(
                "master: 127.0.0.1\nmaster_port: {}\npublish_port: {}\nid: swarm\npki_dir: {d}/pki\ncachedir: {d}/cache\nsock_dir: {d}/sock\nlog_file: {d}/swarm.log\nlog_level: info\n{extra}\n",
                self.ret_port,
                self.publish_port,
                d = dir.display()
            ),
        )
        .expect("swarm config");
        let swarm = Daemon {
            child: Command::new(bin("halite-minion"))
                .arg("-c")
                .arg(&dir)
                .args(["--swarm", &n.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("swarm"),
            log: dir.join("swarm.log"),
        };
        assert!(
            wait_for(Duration::from_secs(40), || self.authenticated() >= n),
            "the swarm never came up"
        );
        swarm
    }

    /// How many minion authentications the master has logged so far.
    pub fn authenticated(&self) -> usize {
        std::fs::read_to_string(self.path("master.log"))
            .unwrap_or_default()
            .matches("minion authenticated")
            .count()
    }

    /// Kills `master` and starts it again with `extra` (the socket of the
    /// killed one removed first, as a crash would leave it).
    pub fn restart_master(&self, master: &mut Daemon, extra: &str) -> Daemon {
        master.kill();
        let _ = std::fs::remove_file(self.path("master-sock/master.sock"));
        self.start_master(extra)
    }

    /// Starts `halite-run state.event`: every bus event from now on, for
    /// [`EventWatch::stop`] to collect.
    pub fn watch_events(&self) -> EventWatch {
        let child = Command::new(bin("halite-run"))
            .arg("-c")
            .arg(self.master_dir())
            .args(["state.event"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("state.event");
        // Subscribed before anything the test does next.
        std::thread::sleep(Duration::from_millis(500));
        EventWatch { child }
    }

    /// Runs a CLI binary against this fleet's master.
    pub fn cli(&self, name: &str, args: &[&str]) -> Output {
        Command::new(bin(name))
            .arg("-c")
            .arg(self.master_dir())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run the CLI")
    }

    /// `halite ARGS` as (stdout, exit code).
    pub fn halite(&self, args: &[&str]) -> (String, i32) {
        let out = self.cli("halite", args);
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            out.status.code().unwrap_or(-1),
        )
    }

    /// The returns of a `--out json` run: `{id: return}` merged.
    pub fn halite_json(&self, args: &[&str]) -> (serde_json::Map<String, serde_json::Value>, i32) {
        let mut full = args.to_vec();
        full.extend(["--out", "json"]);
        let (text, code) = self.halite(&full);
        let mut merged = serde_json::Map::new();
        for value in serde_json::Deserializer::from_str(&text).into_iter::<serde_json::Value>() {
            if let Ok(serde_json::Value::Object(map)) = value {
                merged.extend(map);
            }
        }
        (merged, code)
    }

    /// Whether `id` is listed under `status` (minions, minions_pre...).
    pub fn key_listed(&self, status: &str, id: &str) -> bool {
        let out = self.cli("halite-key", &["-L", "--out", "json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        v[status]
            .as_array()
            .is_some_and(|ids| ids.iter().any(|x| x == id))
    }

    /// Waits for `id`'s key to be pending, accepts it, waits until it answers.
    pub fn accept(&self, id: &str) {
        assert!(
            wait_for(Duration::from_secs(20), || self
                .key_listed("minions_pre", id)),
            "{id} never became pending"
        );
        let out = self.cli("halite-key", &["-a", id, "-y"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.wait_responding(id);
    }

    /// Waits until `id` answers test.ping.
    pub fn wait_responding(&self, id: &str) {
        let ok = wait_for(Duration::from_secs(30), || {
            let (rets, _) = self.halite_json(&["-L", id, "test.ping", "-t", "2"]);
            rets.get(id) == Some(&serde_json::Value::Bool(true))
        });
        assert!(ok, "{id} never answered test.ping");
    }
}

/// A running `halite-run state.event`.
pub struct EventWatch {
    child: Child,
}

impl EventWatch {
    /// Waits a moment for late events, stops the watcher and returns what
    /// it printed: one `tag<TAB>json` line per event.
    pub fn stop(mut self) -> String {
        std::thread::sleep(Duration::from_millis(500));
        let _ = self.child.kill();
        let _ = self.child.wait();
        read_all(&mut self.child)
    }
}

/// Reads what a child wrote to its piped stdout so far (after it exited).
pub fn read_all(child: &mut Child) -> String {
    let mut s = String::new();
    if let Some(out) = child.stdout.as_mut() {
        let _ = out.read_to_string(&mut s);
    }
    s
}

/// The mode bits of `path`.
pub fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0)
}
