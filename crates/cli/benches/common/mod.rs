//! What the fleet benches (`highstate`, `orchestrate`) share: daemons in
//! their own process groups, a release `halite-master` with one
//! `halite-minion --swarm N` whose identities it already knows, and the
//! readiness poll ("all N answer `test.ping`").
#![allow(dead_code, reason = "each bench uses its own part of this module")]

use std::fs::File;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// The id prefix of the swarm's identities in every fleet bench.
pub const SWARM_PREFIX: &str = "bench-";

/// Writes `text` to `path`, creating its directory.
pub fn write(path: &Path, text: &[u8]) -> Result<()> {
    let dir = path.parent().context("a path with a parent")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// A daemon started in its own process group: the whole group (Salt's
/// forked workers included) is SIGKILLed when this is dropped, so no
/// daemon outlives the bench, even on error or panic.
pub struct Group {
    pub child: Child,
    name: String,
}

impl Group {
    pub fn spawn(cmd: &mut Command, name: &str, log: &Path) -> Result<Group> {
        let out = File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
        let err = out.try_clone()?;
        let child = cmd
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("cannot start {name} ({cmd:?}): build it first"))?;
        Ok(Group {
            child,
            name: name.into(),
        })
    }

    pub fn pgid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Fails if the daemon has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => bail!("{} exited early ({status}); see its log", self.name),
            Err(e) => bail!("cannot check on {}: {e}", self.name),
        }
    }

    /// `VmHWM` (peak RSS, kB) of the group leader.
    pub fn leader_hwm_kb(&self) -> u64 {
        status_field(self.child.id() as i32, "VmHWM:")
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: signalling our own child's process group.
        unsafe {
            libc::kill(-self.pgid(), libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// A `kB` field of `/proc/<pid>/status` (0 when gone).
pub fn status_field(pid: i32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Two distinct free ports on loopback.
pub fn port_pair() -> Result<(u16, u16)> {
    let a = TcpListener::bind("127.0.0.1:0")?;
    let b = TcpListener::bind("127.0.0.1:0")?;
    Ok((a.local_addr()?.port(), b.local_addr()?.port()))
}

/// The value after `name` on the command line.
pub fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// The 1, 5 and 15 minute load averages.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Repeats `ping` (how many of the `n` minions answered) until all do,
/// `every` apart; the seconds it took. Fails when a daemon exits or after
/// `limit`.
pub fn wait_all(
    what: &str,
    n: usize,
    limit: Duration,
    every: Duration,
    daemons: &mut [&mut Group],
    mut ping: impl FnMut() -> usize,
) -> Result<f64> {
    let start = Instant::now();
    let mut last = 0;
    loop {
        for d in daemons.iter_mut() {
            d.check_alive()?;
        }
        let got = ping();
        if got >= n {
            return Ok(start.elapsed().as_secs_f64());
        }
        if got != last {
            eprintln!("  {what}: {got} of {n} answering");
            last = got;
        }
        if start.elapsed() > limit {
            bail!("{what}: only {got} of {n} minions answered test.ping within {limit:?}");
        }
        std::thread::sleep(every);
    }
}

/// A running halite master and swarm.
pub struct HaliteFleet {
    pub master: Group,
    pub swarm: Group,
    /// The master's config directory (`-c` of the CLIs).
    pub mconf: PathBuf,
    pub publish_port: u16,
    pub ret_port: u16,
    /// When the swarm process was started.
    pub swarm_started: Instant,
}

/// Where the fleet benches keep their swarm's keys between runs
/// (`target/bench-swarm`): generated once, so no run pays for them.
pub fn swarm_keys_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-swarm")
}

/// Gives the swarm under `swarm_pki` (its `pki_dir`) the `n` identities
/// kept in [`swarm_keys_dir`] (made there the first time), and writes
/// their public keys as accepted under `master_pki`: the master knows
/// the fleet before it starts, as a fleet whose keys were accepted
/// earlier, so "ready" measures connecting, not key admission (a new key
/// is admitted at the master's `pending_key_rate`, 100 a second by default).
fn known_swarm(swarm_pki: &Path, master_pki: &Path, n: usize) -> Result<()> {
    let kept = swarm_keys_dir();
    let keys = halite_minion::swarm::load_or_create_keys(&kept, SWARM_PREFIX, n)?;
    let root = swarm_pki.join("swarm");
    std::fs::create_dir_all(&root)?;
    std::fs::copy(
        kept.join(halite_minion::swarm::KEYS_FILE),
        root.join(halite_minion::swarm::KEYS_FILE),
    )?;
    let accepted = master_pki.join("minions");
    std::fs::create_dir_all(&accepted)?;
    for (id, identity) in keys {
        std::fs::write(
            accepted.join(id),
            format!("{}\n", identity.public().to_hex()),
        )?;
    }
    Ok(())
}

/// Starts a `halite-master` from `bin` in `dir` (loopback ports, its
/// config `master_extra` added: file roots, timeouts) and, once its
/// socket is up, one `halite-minion --swarm n` of known identities
/// `bench-0..` ([`known_swarm`]).
/// Writes the config of a bench minion process `name` (`swarm`, `probe`)
/// into `<dir>/<name>-conf/minion`: the master on loopback at `publish` /
/// `ret`, its pki, cache, sockets and log under `dir`. Returns the config
/// directory (for `-c`).
pub fn minion_conf(dir: &Path, name: &str, publish: u16, ret: u16) -> Result<PathBuf> {
    let d = dir.display();
    let conf = dir.join(format!("{name}-conf"));
    write(
        &conf.join("minion"),
        format!(
            "master: 127.0.0.1\nmaster_port: {ret}\npublish_port: {publish}\nid: {name}\npki_dir: {d}/{name}-pki\ncachedir: {d}/{name}-cache\nsock_dir: {d}/{name}-sock\nlog_file: {d}/{name}.log\nlog_level: warning\nmaster_alive_interval: 30\nauth_timeout: 30\n"
        )
        .as_bytes(),
    )?;
    Ok(conf)
}

/// Writes `<m>/minion`, the config of one salt-minion `id` of a Salt
/// comparison fleet: the salt-master on loopback at `publish` / `ret`,
/// its root, pki, cache, sockets and log under `m` (for `-c m`).
pub fn salt_minion_conf(m: &Path, id: &str, publish: u16, ret: u16) -> Result<()> {
    let md = m.display();
    write(
        &m.join("minion"),
        format!(
            "master: 127.0.0.1\nmaster_port: {ret}\npublish_port: {publish}\nid: {id}\nroot_dir: {md}/root\npki_dir: {md}/root/pki\ncachedir: {md}/root/cache\nsock_dir: {md}/root/sock\nlog_file: {md}/minion.log\nlog_level: warning\nuser: root\nacceptance_wait_time: 1\npidfile: {md}/root/minion.pid\n"
        )
        .as_bytes(),
    )
}

/// Writes `<dir>/master-conf/master`, a master on loopback at `publish` /
/// `ret` with its own keys (`own`: where its pki, cache, sockets and log
/// live under `dir`, its settings), and returns the config directory (for
/// `-c`): the one shape of [`halite_master_conf`] and [`salt_master_conf`].
fn master_conf(dir: &Path, publish: u16, ret: u16, own: &str) -> Result<PathBuf> {
    let mconf = dir.join("master-conf");
    write(
        &mconf.join("master"),
        format!("interface: 127.0.0.1\npublish_port: {publish}\nret_port: {ret}\n{own}").as_bytes(),
    )?;
    Ok(mconf)
}

/// The config of a bench's `halite-master` ([`master_conf`]): everything
/// under `dir`, `auto_accept`, then `extra` (file roots, timeouts).
pub fn halite_master_conf(dir: &Path, publish: u16, ret: u16, extra: &str) -> Result<PathBuf> {
    let d = dir.display();
    master_conf(
        dir,
        publish,
        ret,
        &format!(
            "pki_dir: {d}/master-pki\ncachedir: {d}/master-cache\nsock_dir: {d}/master-sock\nlog_file: {d}/master.log\nlog_level: warning\nauto_accept: True\n{extra}"
        ),
    )
}

/// The config of a Salt comparison fleet's `salt-master` ([`master_conf`]):
/// its root under `dir/mroot`, `auto_accept`, as root, two workers, then
/// `extra` (file and pillar roots).
pub fn salt_master_conf(dir: &Path, publish: u16, ret: u16, extra: &str) -> Result<PathBuf> {
    let d = dir.display();
    master_conf(
        dir,
        publish,
        ret,
        &format!(
            "root_dir: {d}/mroot\npki_dir: {d}/mroot/pki\ncachedir: {d}/mroot/cache\nsock_dir: {d}/mroot/sock\nlog_file: {d}/master.log\nlog_level: warning\nauto_accept: True\nuser: root\nworker_threads: 2\npidfile: {d}/mroot/master.pid\n{extra}"
        ),
    )
}

/// Starts a Salt comparison fleet from `sbin`: a `salt-master` of config
/// `mconf` ([`salt_master_conf`]) and one `salt-minion` per id of `ids`,
/// each in `dir/minion<i>` ([`salt_minion_conf`]). Returns (master, minions).
pub fn start_salt_fleet(
    sbin: &Path,
    dir: &Path,
    mconf: &Path,
    (publish, ret): (u16, u16),
    ids: &[String],
) -> Result<(Group, Vec<Group>)> {
    let master = Group::spawn(
        Command::new(sbin.join("salt-master")).arg("-c").arg(mconf),
        "salt-master",
        &dir.join("master.out"),
    )?;
    let mut minions = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let m = dir.join(format!("minion{i}"));
        salt_minion_conf(&m, id, publish, ret)?;
        minions.push(Group::spawn(
            Command::new(sbin.join("salt-minion")).arg("-c").arg(&m),
            &format!("salt-minion {id}"),
            &m.join("minion.out"),
        )?);
    }
    Ok((master, minions))
}

pub fn start_halite_fleet(
    bin: &Path,
    dir: &Path,
    n: usize,
    master_extra: &str,
) -> Result<HaliteFleet> {
    std::fs::create_dir_all(dir)?;
    let (publish, ret) = port_pair()?;
    let mconf = halite_master_conf(dir, publish, ret, master_extra)?;
    let sconf = minion_conf(dir, "swarm", publish, ret)?;
    known_swarm(&dir.join("swarm-pki"), &dir.join("master-pki"), n)?;
    let mut master = Group::spawn(
        Command::new(bin.join("halite-master"))
            .arg("-c")
            .arg(&mconf),
        "halite-master",
        &dir.join("master.out"),
    )?;
    let sock = dir.join("master-sock/master.sock");
    let start = Instant::now();
    while !sock.exists() {
        master.check_alive()?;
        if start.elapsed() > Duration::from_secs(30) {
            bail!("halite-master did not open {} in 30 s", sock.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let swarm_started = Instant::now();
    let swarm = Group::spawn(
        Command::new(bin.join("halite-minion"))
            .arg("-c")
            .arg(&sconf)
            .args(["--swarm", &n.to_string(), "--swarm-prefix", SWARM_PREFIX]),
        "halite-minion --swarm",
        &dir.join("swarm.out"),
    )?;
    Ok(HaliteFleet {
        master,
        swarm,
        mconf,
        publish_port: publish,
        ret_port: ret,
        swarm_started,
    })
}
