//! A real master and real minions on loopback, each in its own temp
//! config dir, driven through the real binaries: the one fleet the master's
//! and the API's integration tests start from. What differs between them
//! goes in as YAML: [`Fleet::master_base`] (written into every master
//! config of the fleet) and the `extra` of each start.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::{free_port, wait_for, Daemon};

/// The minion settings that make a test minion notice a lost master and
/// reconnect within a second or two (Salt's defaults take 30 s and more).
pub const QUICK_KEEPALIVE: &str =
    "auth_timeout: 2\nmaster_alive_interval: 1\nrecon_default: 200\nrecon_max: 1000";

/// The path of a workspace binary: the test executable runs from
/// `target/<profile>/deps/`, the binaries are in `target/<profile>/`.
///
/// # Panics
/// When the binary was not built: the message says what to build.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test executable is in target/<profile>/deps");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` before these tests",
        path.display()
    );
    path
}

/// Starts workspace daemon `name` with config dir `dir` and `args`, its
/// output discarded (it logs to `log`, which its config names).
fn spawn(name: &str, dir: &Path, args: &[&str], log: PathBuf) -> Daemon {
    let child = Command::new(bin(name))
        .arg("-c")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {name}: {e}"));
    Daemon { child, log }
}

/// How many times a minion's log says it authenticated with the master:
/// one more after each reconnection, so a test waits for `n + 1` to know
/// the minion is back.
pub fn sessions(minion: &Daemon) -> usize {
    minion
        .log_text()
        .matches("authenticated with the master")
        .count()
}

/// One test fleet: a temp root, the master's config dir and its ports.
pub struct Fleet {
    /// Everything of the fleet lives below it; removed when dropped.
    pub root: tempfile::TempDir,
    /// The master's publish port (127.0.0.1).
    pub publish_port: u16,
    /// The master's request port (127.0.0.1).
    pub ret_port: u16,
    /// YAML written into every master config of this fleet, before the
    /// `extra` of [`Fleet::start_master`] (the API's tests put their
    /// `api_logfile` here).
    pub master_base: String,
}

impl Default for Fleet {
    fn default() -> Self {
        Self::new()
    }
}

impl Fleet {
    /// A fleet in a new temp dir with free ports; nothing started yet.
    pub fn new() -> Self {
        Self {
            root: tempfile::tempdir().expect("tempdir"),
            publish_port: free_port(),
            ret_port: free_port(),
            master_base: String::new(),
        }
    }

    /// `rel` below the fleet's root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    /// The master's config dir (what `-c` takes).
    pub fn master_dir(&self) -> PathBuf {
        self.path("master-conf")
    }

    /// Writes the master config ([`Fleet::master_base`], then `extra`
    /// YAML) and starts the master; waits for its socket.
    pub fn start_master(&self, extra: &str) -> Daemon {
        let dir = self.master_dir();
        std::fs::create_dir_all(&dir).expect("master conf dir");
        let root = self.root.path().display();
        let log = self.path("master.log");
        std::fs::write(
            dir.join("master"),
            format!(
                "interface: 127.0.0.1\npublish_port: {}\nret_port: {}\npki_dir: {root}/master-pki\ncachedir: {root}/master-cache\nsock_dir: {root}/master-sock\nlog_file: {}\nlog_level: debug\ntimeout: 10\ngather_job_timeout: 2\n{}\n{extra}\n",
                self.publish_port,
                self.ret_port,
                log.display(),
                self.master_base,
            ),
        )
        .expect("master config");
        let daemon = spawn("halite-master", &dir, &[], log);
        let sock = self.path("master-sock/master.sock");
        assert!(
            wait_for(Duration::from_secs(20), || sock.exists()),
            "the master did not start: {}",
            daemon.log_text()
        );
        daemon
    }

    /// Kills `master` and starts it again with `extra` (the socket of the
    /// killed one removed first, as a crash would leave it).
    pub fn restart_master(&self, master: &mut Daemon, extra: &str) -> Daemon {
        master.kill();
        let _ = std::fs::remove_file(self.path("master-sock/master.sock"));
        self.start_master(extra)
    }

    /// Starts minion `id` with the [`QUICK_KEEPALIVE`] and `extra` YAML.
    pub fn start_minion(&self, id: &str, extra: &str) -> Daemon {
        self.start_minion_via(
            id,
            self.publish_port,
            &format!("{QUICK_KEEPALIVE}\n{extra}"),
        )
    }

    /// Starts minion `id` whose publications come through `publish_port`
    /// (a relay the test controls, or the master's own port) with `extra`
    /// settings only: keepalive and reconnection are Salt's defaults unless
    /// `extra` sets them.
    pub fn start_minion_via(&self, id: &str, publish_port: u16, extra: &str) -> Daemon {
        self.start_minion_at(id, self.ret_port, publish_port, extra)
    }

    /// Starts minion `id` whose requests go through `master_port` (a
    /// relay the test controls, say to cut its connection), with the
    /// [`QUICK_KEEPALIVE`] and `extra` YAML.
    pub fn start_minion_through(&self, id: &str, master_port: u16, extra: &str) -> Daemon {
        self.start_minion_at(
            id,
            master_port,
            self.publish_port,
            &format!("{QUICK_KEEPALIVE}\n{extra}"),
        )
    }

    /// Starts minion `id` whose requests go through `master_port` and
    /// publications through `publish_port`, with `extra` settings only
    /// (Salt's keepalive unless `extra` sets it): a test that relays the
    /// master and chooses its own keepalive.
    pub fn start_minion_at(
        &self,
        id: &str,
        master_port: u16,
        publish_port: u16,
        extra: &str,
    ) -> Daemon {
        let dir = self.path(&format!("minion-{id}"));
        std::fs::create_dir_all(&dir).expect("minion dir");
        let log = dir.join("minion.log");
        std::fs::write(
            dir.join("minion"),
            format!(
                "master: 127.0.0.1\nmaster_port: {master_port}\npublish_port: {publish_port}\nid: {id}\npki_dir: {d}/pki\ncachedir: {d}/cache\nsock_dir: {d}/sock\nlog_file: {}\nlog_level: debug\nacceptance_wait_time: 1\n{extra}\n",
                log.display(),
                d = dir.display()
            ),
        )
        .expect("minion config");
        spawn("halite-minion", &dir, &[], log)
    }

    /// Starts one `halite-minion --swarm n` (ids `swarm-*`, plus `extra`
    /// YAML in its config) and waits until the master has authenticated
    /// all `n`: the fleet tests of restarts and shutdowns start from here.
    pub fn start_swarm(&self, n: usize, extra: &str) -> Daemon {
        self.start_swarm_named("swarm", n, extra)
    }

    /// [`Fleet::start_swarm`] with ids `<prefix>-0..<n - 1>` (its config
    /// dir is `<prefix>/`), for a test whose targets name its identities;
    /// waits until the master has authenticated `n` minions in all.
    pub fn start_swarm_named(&self, prefix: &str, n: usize, extra: &str) -> Daemon {
        let dir = self.path(prefix);
        std::fs::create_dir_all(&dir).expect("swarm dir");
        std::fs::write(
            dir.join("minion"),
            format!(
                "master: 127.0.0.1\nmaster_port: {}\npublish_port: {}\nid: {prefix}\npki_dir: {d}/pki\ncachedir: {d}/cache\nsock_dir: {d}/sock\nlog_file: {d}/swarm.log\nlog_level: info\n{extra}\n",
                self.ret_port,
                self.publish_port,
                d = dir.display()
            ),
        )
        .expect("swarm config");
        let swarm = spawn(
            "halite-minion",
            &dir,
            &[
                "--swarm",
                &n.to_string(),
                "--swarm-prefix",
                &format!("{prefix}-"),
            ],
            dir.join("swarm.log"),
        );
        assert!(
            self.wait_authenticated(n, Duration::from_secs(40)),
            "the swarm never came up: {} of {n} authenticated",
            self.authenticated()
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

    /// Waits up to `limit` until the master has logged `n` minion
    /// authentications in all; whether it did.
    pub fn wait_authenticated(&self, n: usize, limit: Duration) -> bool {
        wait_for(limit, || self.authenticated() >= n)
    }

    /// Starts `halite-run state.event`: every bus event from now on, for
    /// [`EventWatch::stop`] to collect. Returns once the watcher has
    /// printed a marker event fired after it started (it is subscribed:
    /// nothing the test does next is missed, however loaded the machine).
    pub fn watch_events(&self) -> EventWatch {
        let mut child = Command::new(bin("halite-run"))
            .arg("-c")
            .arg(self.master_dir())
            .args(["state.event"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("state.event");
        let printed = Arc::new(Mutex::new(String::new()));
        if let Some(out) = child.stdout.take() {
            let printed = printed.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if let Ok(mut text) = printed.lock() {
                        text.push_str(&line);
                        text.push('\n');
                    }
                }
            });
        }
        let watch = EventWatch {
            child,
            printed,
            master_dir: self.master_dir(),
        };
        watch.sync("subscribed");
        watch
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

    /// The master's counters (`halite-run master.stats`): what tests
    /// count instead of timing (bundles compiled and sent, events).
    pub fn master_stats(&self) -> Value {
        let out = self.cli("halite-run", &["master.stats", "--out", "json"]);
        assert!(
            out.status.success(),
            "master.stats failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("master.stats prints JSON")
    }

    /// A master whose bus holds at most `budget` bytes of returns for a
    /// slow reader (`event_return_bytes`), and a swarm of `n` minions,
    /// all answering `test.ping`: the master and the swarm.
    ///
    /// # Panics
    /// When not every minion answers.
    pub fn start_with_return_budget(&self, budget: u64, n: usize) -> (Daemon, Daemon) {
        let master = self.start_master(&format!(
            "auto_accept: True\nevent_return_bytes: {budget}\n"
        ));
        let swarm = self.start_swarm(n, "");
        let (pings, _) = self.halite_json(&["*", "test.ping", "-t", "30"]);
        assert_eq!(pings.len(), n, "{pings:?}");
        (master, swarm)
    }

    /// `halite ARGS` as a watcher slower than the fleet (issue 25): its
    /// output is read only once the master has committed `returns` more
    /// packed returns and holds none waiting for their commit; then its
    /// output, whole, and the master's counters of that moment.
    ///
    /// # Panics
    /// When the returns do not come within 60 s, or the CLI fails.
    pub fn halite_read_late(&self, args: &[&str], returns: u64) -> (Vec<u8>, Value) {
        let packed = |stats: &Value| stats["returns"]["packed"].as_u64().unwrap_or(0);
        let before = packed(&self.master_stats());
        let mut cli = Command::new(bin("halite"))
            .arg("-c")
            .arg(self.master_dir())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("halite");
        let done = wait_for(Duration::from_secs(60), || {
            let stats = self.master_stats();
            packed(&stats) >= before + returns && stats["returns"]["held"] == 0
        });
        let stats = self.master_stats();
        assert!(done, "the fleet did not return: {stats}");
        let mut out = Vec::new();
        cli.stdout
            .take()
            .expect("stdout")
            .read_to_end(&mut out)
            .expect("read");
        assert!(
            cli.wait().expect("halite").success(),
            "halite {args:?} failed"
        );
        (out, stats)
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
    pub fn halite_json(&self, args: &[&str]) -> (Map<String, Value>, i32) {
        let mut full = args.to_vec();
        full.extend(["--out", "json"]);
        let (text, code) = self.halite(&full);
        let mut merged = Map::new();
        for value in serde_json::Deserializer::from_str(&text).into_iter::<Value>() {
            if let Ok(Value::Object(map)) = value {
                merged.extend(map);
            }
        }
        (merged, code)
    }

    /// Whether `id` is listed under `status` (minions, minions_pre...).
    pub fn key_listed(&self, status: &str, id: &str) -> bool {
        let out = self.cli("halite-key", &["-L", "--out", "json"]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
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
            rets.get(id) == Some(&Value::Bool(true))
        });
        assert!(ok, "{id} never answered test.ping");
    }
}

/// A running `halite-run state.event`.
pub struct EventWatch {
    child: Child,
    /// What it printed so far (read on a thread of its own).
    printed: Arc<Mutex<String>>,
    master_dir: PathBuf,
}

/// The tag prefix of the marker events [`EventWatch`] fires to know where
/// the watcher is (left out of what [`EventWatch::stop`] returns).
const MARKER: &str = "halite-test/watch/";

impl EventWatch {
    fn printed(&self) -> String {
        self.printed.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Fires marker events (`halite-run event.send`) until the watcher has
    /// printed one: every event the bus fired before it has been printed.
    fn sync(&self, what: &str) {
        let tag = format!("{MARKER}{what}/{}", self.child.id());
        let seen = wait_for(Duration::from_secs(60), || {
            let _ = Command::new(bin("halite-run"))
                .arg("-c")
                .arg(&self.master_dir)
                .args(["event.send", &tag])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            wait_for(Duration::from_secs(2), || {
                self.printed().contains(&format!("{tag}\t"))
            })
        });
        assert!(
            seen,
            "halite-run state.event never printed the marker event {tag}:\n{}",
            self.printed()
        );
    }

    /// What the watcher printed so far (markers included), to wait for an
    /// event that comes later than the test's own commands.
    pub fn peek(&self) -> String {
        self.printed()
    }

    /// Stops the watcher once it has printed every event fired so far (a
    /// marker fired now has come through) and returns what it printed: one
    /// `tag<TAB>json` line per event, the markers left out.
    pub fn stop(mut self) -> String {
        self.sync("stop");
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.printed()
            .lines()
            .filter(|l| !l.starts_with(MARKER))
            .map(|l| format!("{l}\n"))
            .collect()
    }
}

impl Drop for EventWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
