//! Highstate through the master: a release `halite-master` and one
//! `halite-minion --swarm N` process against Salt 3008.5's `salt-master`
//! and `salt-minion`, the same generated state and pillar trees, timing
//! `'*' state.apply` cold (files fetched) and warm (cache hit, no changes).
//!
//! `cargo bench -p halite-cli --bench highstate [-- --minions 1,100,1000
//! --salt-minions 1 --bin-dir target/release --write docs/benchmarks.md
//! --note TEXT --keep --gitfs --ready-only]`.
//! With `--ready-only`, each halite fleet is stopped once all its minions
//! answer `test.ping`: the readiness rounds, the master's RSS after each,
//! and its peak then (issue 25: at 10,000 the readiness pings, not the
//! apply, were the master's peak). Each size's row is printed as soon as
//! it is measured, and the files its states wrote are removed in the
//! background at the lowest priority (`nice`, `ionice -c 3`).
//! With `--warm-runs K`, halite's cold apply is followed by K warm ones
//! (default 1): the first is the table's "warm", right after the cold
//! run wrote every file; the others, a table of their own, are a fleet's
//! steady state, where those files have settled (a settled
//! `file.managed` target is not read again, docs/file.md; the first warm
//! run reads and records them).
//! With `--gitfs`, halite is measured twice per size: the state tree from
//! `file_roots`, then the same tree committed to a git repository served
//! by gitfs (`fileserver_backend: [gitfs]`, fetched in the background
//! every 2 s while the runs go on: a fetch must never be on a compile's path).
//! Each run's output (`--out json`, ~223 KB a minion) is written into a
//! memory file and checked once the CLI has exited (every minion, every
//! state `true`, the changes counted): the wall ends at the CLI's exit,
//! and the check is outside it (`timed_apply` says why). The CLI runs on
//! the same cores as the daemons; its CPU and the check's are printed
//! beside each run's.
//! The halite binaries come from `target/release` (`cargo build --release
//! --bins`); Salt from `~/.venvs/salt/bin` (install it with
//! `../shared/bench/install-salt.sh`), or `--salt-bin-dir`; without it only
//! halite is measured. Every daemon runs in its own process group, killed
//! when the bench ends, fails or panics.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use halite_test_support::return_scan::{Counted, ReturnScan};
use serde_json::Value;

mod common;
use common::{
    arg, loadavg, minion_conf, port_pair, salt_master_conf, start_halite_fleet, start_salt_fleet,
    status_field, wait_all, write, Group, HaliteFleet,
};

/// States in the generated tree.
const STATES: usize = 1000;
/// `file.managed` states among them (each with its own `salt://` source).
const FILES: usize = 50;
/// Sources of about 1 MB (the last ones); the others are a few KB.
const BIG_FILES: usize = 2;
/// The heading of this bench's section in the results file.
const SECTION: &str = "## Highstate through the master";

// ---------------------------------------------------------------------------
// The generated trees

/// The deterministic content of source file `k`: text lines, ~1 MB for the
/// big ones, 2-6 KB for the others.
fn source_text(k: usize) -> String {
    let size = if k >= FILES - BIG_FILES {
        1 << 20
    } else {
        2048 + (k * 997) % 4096
    };
    let mut s = String::with_capacity(size + 80);
    let mut i = 0usize;
    while s.len() < size {
        let _ = writeln!(
            s,
            "file {k:02} line {i:06}: {:016x} the quick brown fox jumps over the lazy dog",
            (i as u64 ^ k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        );
        i += 1;
    }
    s
}

/// The state tree (`<root>/salt`) and pillar tree (`<root>/pillar`); the
/// states write under `out/<minion id>/`.
fn generate_trees(root: &Path, out: &Path) -> Result<()> {
    let salt = root.join("salt");
    write(&salt.join("top.sls"), b"base:\n  '*':\n    - bench\n")?;
    let mut sls = String::from(
        "{% set out = pillar['bench_out'] ~ '/' ~ grains['id'] %}\n\
         bench_motd:\n  test.succeed_without_changes:\n    - name: \"motd {{ pillar['bench']['motd'] }}\"\n\n",
    );
    for k in 0..FILES {
        write(
            &salt.join(format!("files/f{k:02}.txt")),
            source_text(k).as_bytes(),
        )?;
        let _ = write!(
            sls,
            "bench_file_{k:02}:\n  file.managed:\n    - name: {{{{ out }}}}/f{k:02}.txt\n    - source: salt://files/f{k:02}.txt\n    - makedirs: True\n\n"
        );
    }
    // The rest: independent states, every 10th requiring its predecessor,
    // every 50th requiring one of the files.
    for i in 1..(STATES - FILES) {
        let _ = writeln!(sls, "bench_test_{i:03}:\n  test.succeed_without_changes:");
        let mut reqs = Vec::new();
        if i % 10 == 9 {
            reqs.push(format!("test: bench_test_{:03}", i - 1));
        }
        if i % 50 == 0 {
            reqs.push(format!("file: bench_file_{:02}", (i / 50) % FILES));
        }
        if reqs.is_empty() {
            sls.push_str("    []\n");
        } else {
            sls.push_str("    - require:\n");
            for r in reqs {
                let _ = writeln!(sls, "      - {r}");
            }
        }
        sls.push('\n');
    }
    write(&salt.join("bench.sls"), sls.as_bytes())?;

    let pillar = root.join("pillar");
    write(&pillar.join("top.sls"), b"base:\n  '*':\n    - bench\n")?;
    write(
        &pillar.join("bench.sls"),
        format!(
            "bench_out: {}\nbench:\n  motd: hello from the pillar\n  users: [alice, bob, carol]\n  limits:\n    nofile: 4096\n",
            out.display()
        )
        .as_bytes(),
    )?;
    Ok(())
}

// ---------------------------------------------------------------------------
// Processes

/// The pids of the processes in process group `pgid`.
fn group_pids(pgid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    // Fields after the `(comm)`: state ppid pgrp ...
                    let rest = &s[s.rfind(')')? + 1..];
                    rest.split_whitespace().nth(2)?.parse::<i32>().ok()
                })
                == Some(pgid)
        })
        .collect()
}

/// Summed `VmRSS` (kB) of a process group.
fn group_rss_kb(pgid: i32) -> u64 {
    group_pids(pgid)
        .into_iter()
        .map(|p| status_field(p, "VmRSS:"))
        .sum()
}

/// Samples the summed RSS of some process groups every 100 ms and keeps
/// the peak of each: Salt's job processes exit after each job, so their
/// own `VmHWM` is gone by the end.
struct Sampler {
    stop: Arc<AtomicBool>,
    peaks: Arc<Mutex<Vec<u64>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    fn start(pgids: Vec<i32>) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peaks = Arc::new(Mutex::new(vec![0; pgids.len()]));
        let (s, p) = (stop.clone(), peaks.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                for (i, g) in pgids.iter().enumerate() {
                    let rss = group_rss_kb(*g);
                    if let Ok(mut v) = p.lock() {
                        v[i] = v[i].max(rss);
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Sampler {
            stop,
            peaks,
            thread: Some(thread),
        }
    }

    /// Stops sampling; the peak (kB) of each group.
    fn finish(mut self) -> Vec<u64> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peaks.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

/// All JSON documents printed by a CLI, merged into `{id: return}`.
fn merged_returns(path: &Path) -> Result<BTreeMap<String, Value>> {
    let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut merged = BTreeMap::new();
    for doc in serde_json::Deserializer::from_reader(BufReader::new(file)).into_iter::<Value>() {
        match doc {
            Ok(Value::Object(map)) => merged.extend(map),
            Ok(_) => {}
            Err(e) => bail!("{} is not a stream of JSON objects: {e}", path.display()),
        }
    }
    Ok(merged)
}

/// How many of `ids` answered `test.ping` with `true`.
fn count_pings(cli: &mut Command, out: &Path, ids: &HashSet<String>) -> usize {
    let Ok(f) = File::create(out) else { return 0 };
    let ran = cli
        .stdin(Stdio::null())
        .stdout(f)
        .stderr(Stdio::null())
        .status();
    if ran.is_err() {
        return 0;
    }
    merged_returns(out)
        .map(|m| {
            m.iter()
                .filter(|(id, v)| ids.contains(*id) && **v == Value::Bool(true))
                .count()
        })
        .unwrap_or(0)
}

/// What the states of one `state.apply` returned.
#[derive(Default)]
struct Check {
    /// Minions whose every expected state returned `result: true`.
    minions_ok: usize,
    /// States that reported changes, over all minions.
    changed: usize,
    /// The first few problems found.
    problems: Vec<String>,
}

impl Check {
    fn problem(&mut self, p: String) {
        if self.problems.len() < 5 {
            self.problems.push(p);
        }
    }
}

/// Checks that every one of `ids` returned all `STATES` states, all true,
/// from the CLI's JSON output read from `input`, counted as it streams
/// by ([`ReturnScan`]): nothing is held, though one run prints ~2.2 GB at
/// 10,000 minions. Its CPU is printed with each run (`the harness's
/// check`) so that what the harness costs is seen, not guessed.
fn check_returns(mut input: impl std::io::Read, ids: &HashSet<String>) -> Check {
    let mut c = Check::default();
    let mut seen = HashSet::new();
    let mut scan = ReturnScan::default();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                c.problem(format!("cannot read the CLI's output: {e}"));
                break;
            }
        };
        scan.feed(&buf[..n], &mut |counted: Counted| {
            if ids.contains(&counted.id) && seen.insert(counted.id.clone()) {
                check_minion(&mut c, &counted);
            }
        });
    }
    if !scan.finished() {
        c.problem("the CLI's output ended inside a document".into());
    }
    let mut missing: Vec<&String> = ids.difference(&seen).collect();
    missing.sort();
    for id in missing {
        c.problem(format!("{id}: no return"));
    }
    c
}

/// A reader that also writes what it reads into a file (`--keep`: the
/// CLI's output kept for a look after the run).
struct Tee<R> {
    inner: R,
    copy: Option<File>,
}

impl<R: std::io::Read> std::io::Read for Tee<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(f) = self.copy.as_mut() {
            std::io::Write::write_all(f, &buf[..n])?;
        }
        Ok(n)
    }
}

/// Checks one minion's state return, as counted.
fn check_minion(c: &mut Check, counted: &Counted) {
    let id = &counted.id;
    c.changed += counted.changed;
    if !counted.mapping {
        c.problem(format!(
            "{id}: not a state return (run with --keep to see it)"
        ));
    } else if counted.states != STATES {
        c.problem(format!(
            "{id}: {} states returned, not {STATES}",
            counted.states
        ));
    } else if counted.true_results != STATES {
        c.problem(format!(
            "{id}: {} states failed (run with --keep to see them)",
            STATES - counted.true_results
        ));
    } else {
        c.minions_ok += 1;
    }
}

/// One timed `state.apply`.
struct Timed {
    secs: f64,
    /// Peak RSS of the CLI process itself (kB, polled `VmHWM`).
    cli_kb: u64,
    check: Check,
    /// CPU seconds (user + system) the master spent during the run.
    master_cpu: f64,
    /// CPU seconds the swarm minion process spent during the run: what the
    /// minions' side costs on this same machine (a real fleet spreads it).
    swarm_cpu: f64,
    /// Round trips (seconds) of the `test.ping`s sent to a minion outside
    /// the highstate while it ran: how responsive the master stayed.
    pings: Vec<f64>,
    /// CPU seconds (user + system) of the CLI process (its `wait4` usage).
    cli_cpu: f64,
    /// CPU seconds of this harness's thread that checked the CLI's
    /// output: the harness's, not halite's, on the same two cores.
    check_cpu: f64,
}

/// CPU seconds the calling thread has used.
fn thread_cpu_secs() -> f64 {
    // SAFETY: timespec is plain data; clock_gettime fills it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// CPU seconds (user + system) in a `wait4` usage.
fn usage_secs(u: &libc::rusage) -> f64 {
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// CPU seconds (user + system, all threads) process `pid` has used, from
/// `/proc/<pid>/stat` (0 when gone).
fn cpu_secs(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) in parentheses.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5): 12 and 13 here.
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|v| v.parse::<u64>().ok()))
        .sum();
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1);
    ticks as f64 / hz as f64
}

/// Sends `probe` (a `test.ping` of a minion outside the highstate) again
/// and again until stopped, 250 ms apart; the round trips that answered.
struct Prober {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<f64>>,
}

impl Prober {
    fn start(mut probe: impl FnMut() -> Command + Send + 'static) -> Prober {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut times = Vec::new();
            // The apply's publication goes first.
            std::thread::sleep(Duration::from_millis(500));
            while !flag.load(Ordering::Relaxed) {
                let start = Instant::now();
                let out = probe().stdin(Stdio::null()).stderr(Stdio::null()).output();
                let secs = start.elapsed().as_secs_f64();
                if out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("true")) {
                    times.push(secs);
                }
                std::thread::sleep(Duration::from_millis(250));
            }
            times
        });
        Prober { stop, thread }
    }

    fn finish(self) -> Vec<f64> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// Bytes of the CLI's output a minion's return takes, rounded up (~223
/// KB of `--out json` for the tree's 1,000 states).
const OUTPUT_PER_MINION: u64 = 256 << 10;

/// An anonymous file in memory (`memfd_create`), for the CLI's stdout:
/// written as a file is, read back from its start after the run. Its
/// pages for `expected` bytes are taken before the run (`fallocate`,
/// the file's size unchanged): a pipe's writer copies into the same few
/// pages again and again, and the CLI writing into this file must not
/// pay, inside the wall, for 2.2 GB of pages a pipe would not have
/// needed (+2 CPU seconds at 10,000 minions, issue 25, session 28). What
/// is left is the CLI's: its transcoding, its writes and their copies.
fn memory_file(name: &str, expected: u64) -> Result<File> {
    use std::os::fd::FromRawFd;
    let name = std::ffi::CString::new(name)?;
    // SAFETY: `name` is a valid C string; the flags are memfd_create's own.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        bail!(
            "cannot make a memory file for the CLI's output: {}",
            std::io::Error::last_os_error()
        );
    }
    // SAFETY: `fd` was just opened and nothing else owns it.
    let file = unsafe { File::from_raw_fd(fd) };
    let len = libc::off_t::try_from(expected).unwrap_or(libc::off_t::MAX);
    // SAFETY: `fd` is open (owned by `file`); the range is within off_t.
    if unsafe { libc::fallocate(fd, libc::FALLOC_FL_KEEP_SIZE, 0, len) } != 0 {
        // Only slower: the pages are then taken as the CLI writes.
        eprintln!(
            "  cannot set aside {expected} bytes for the CLI's output: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(file)
}

/// The check of what the CLI wrote into `sink`, read from its start
/// (copied into `out` too when `keep`), and the CPU seconds it took.
fn check_output(
    mut sink: File,
    out: &Path,
    keep: bool,
    ids: &HashSet<String>,
) -> Result<(Check, f64)> {
    use std::io::Seek;
    sink.seek(std::io::SeekFrom::Start(0))?;
    let copy = if keep { Some(File::create(out)?) } else { None };
    let before = thread_cpu_secs();
    let check = check_returns(Tee { inner: sink, copy }, ids);
    Ok((check, thread_cpu_secs() - before))
}

/// Runs the CLI, timing it until it exits, its stdout written into a
/// memory file and checked after the timer stops (and kept in `out` when
/// `keep`); `daemons` the master's and the swarm's pids (their CPU time is
/// read around the run), `probe` the ping sent while it runs.
///
/// The check runs after the wall, not beside it (issue 25, session 28):
/// reading the CLI's pipe as it wrote, the check's scan took 9.3 of the
/// 129.5 CPU seconds a settled 10,000-minion run spent on these 2 cores,
/// work of the harness that a user's `halite '*' state.apply > out.json`
/// does not do. The CLI now writes as it would into a file (a `memfd`:
/// ~2.2 GB at 10,000 minions, in memory, not on the disk the minions
/// write to), and the same strict check reads it afterwards; its CPU is
/// still printed (`the harness's check`), outside the wall.
fn timed_apply(
    cmd: &mut Command,
    out: &Path,
    keep: bool,
    ids: &HashSet<String>,
    daemons: Option<(u32, u32)>,
    probe: Option<Box<dyn FnMut() -> Command + Send>>,
) -> Result<Timed> {
    let sink = memory_file(
        "halite-bench-cli-stdout",
        ids.len() as u64 * OUTPUT_PER_MINION,
    )?;
    let cpu = |pick: fn((u32, u32)) -> u32| daemons.map(|d| cpu_secs(pick(d))).unwrap_or(0.0);
    let master_before = cpu(|d| d.0);
    let swarm_before = cpu(|d| d.1);
    let prober = probe.map(Prober::start);
    let err = File::create(out.with_extension("err"))?;
    let start = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(sink.try_clone().context("the CLI's stdout")?)
        .stderr(err)
        .spawn()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    let pid = child.id() as libc::pid_t;
    // The CLI's own VmHWM, polled while it runs: wait4's ru_maxrss would
    // also count this process's high-water mark (the spawn shares our
    // address space until exec).
    let stop = Arc::new(AtomicBool::new(false));
    let poller = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !stop.load(Ordering::Relaxed) {
                peak = peak.max(status_field(pid, "VmHWM:"));
                std::thread::sleep(Duration::from_millis(20));
            }
            peak
        })
    };
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let secs = start.elapsed().as_secs_f64();
    let master_cpu = cpu(|d| d.0) - master_before;
    let swarm_cpu = cpu(|d| d.1) - swarm_before;
    let pings = prober.map(Prober::finish).unwrap_or_default();
    std::mem::forget(child);
    stop.store(true, Ordering::Relaxed);
    let cli_kb = poller.join().unwrap_or(0);
    if r != pid {
        bail!("lost the CLI process {pid}");
    }
    let (check, check_cpu) = check_output(sink, out, keep, ids)?;
    Ok(Timed {
        secs,
        cli_kb,
        check,
        master_cpu,
        swarm_cpu,
        pings,
        cli_cpu: usage_secs(&usage),
        check_cpu,
    })
}

// ---------------------------------------------------------------------------
// The two fleets

/// The figures of one fleet size (halite or Salt).
struct Measured {
    minions: usize,
    ready_secs: f64,
    cold: Timed,
    warm: Timed,
    /// Peak RSS of the master (kB).
    master_kb: u64,
    /// Peak RSS of the minion side (kB): the one swarm process, or all
    /// Salt minion processes summed.
    minion_kb: u64,
    /// The halite master's bundle counters after both runs (`master.stats`).
    bundles: Option<Value>,
    /// RSS of the swarm process (kB) once all its identities answered:
    /// what the identities cost before any job.
    ready_kb: u64,
    /// The master's peak RSS (kB, `VmHWM`) when all answered: what
    /// bringing the fleet up cost it (handshakes, readiness pings).
    master_ready_kb: u64,
}

/// How a halite fleet came up: each readiness round (`test.ping -t 20`
/// of every identity) and the master's memory then.
struct Readiness {
    /// Seconds from the swarm's start until all answered.
    secs: f64,
    /// Each round: when it ended (seconds from the swarm's start), how
    /// many answered, the master's RSS and peak RSS (kB) then.
    rounds: Vec<(f64, usize, u64, u64)>,
    /// The master's peak RSS (kB) when all answered.
    master_peak_kb: u64,
    /// The master's RSS (kB) when all answered.
    master_kb: u64,
    /// The swarm's RSS (kB) when all answered.
    swarm_kb: u64,
    /// `master.stats` then.
    stats: Option<Value>,
}

impl Readiness {
    /// One line per round, for the log and the report.
    fn report(&self, n: usize) -> String {
        let mut out = format!(
            "{n} minions ready after {:.1} s: master peak RSS {} (now {}), swarm RSS {}\n",
            self.secs,
            mb(self.master_peak_kb),
            mb(self.master_kb),
            mb(self.swarm_kb)
        );
        for (i, (at, got, rss, peak)) in self.rounds.iter().enumerate() {
            let _ = writeln!(
                out,
                "  round {}: ended at {at:.1} s, {got} of {n} answered; master RSS {} (peak {})",
                i + 1,
                mb(*rss),
                mb(*peak)
            );
        }
        if let Some(stats) = &self.stats {
            let _ = writeln!(out, "  master.stats: {stats}");
        }
        out
    }
}

/// What one halite fleet size gave: everything, or (`--ready-only`) how
/// it came up.
enum HaliteRun {
    /// Boxed: a `Measured` is five times a `Readiness`.
    Full(Box<Measured>),
    ReadyOnly(Readiness),
}

/// The master's counters (`halite-run master.stats`), if it answers.
fn master_stats(bin: &Path, mconf: &Path) -> Option<Value> {
    Command::new(bin.join("halite-run"))
        .arg("-c")
        .arg(mconf)
        .args(["master.stats", "--out", "json"])
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice::<Value>(&o.stdout).ok())
}

/// Removes `path` in the background at the lowest CPU and I/O priority,
/// after renaming it out of the way (a next run may make it again): on
/// this machine's file system (mounted with `discard`) removing 10,000
/// minions' files takes ~25 minutes, which must not hold up the report
/// or compete with a measurement.
fn remove_in_background(path: &Path) {
    if !path.exists() {
        return;
    }
    let mut doomed = path.as_os_str().to_owned();
    doomed.push(format!(".removing-{}", std::process::id()));
    let doomed = PathBuf::from(doomed);
    let target = match std::fs::rename(path, &doomed) {
        Ok(()) => doomed,
        Err(_) => path.to_path_buf(),
    };
    let spawned = {
        use std::os::unix::process::CommandExt;
        Command::new("nice")
            .args(["-n", "19", "ionice", "-c", "3", "rm", "-rf"])
            .arg(&target)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own group: not killed with the bench's daemons.
            .process_group(0)
            .spawn()
    };
    match spawned {
        Ok(_) => eprintln!("  removing {} in the background", target.display()),
        Err(e) => {
            eprintln!(
                "  cannot remove {} in the background ({e}); removing it now",
                target.display()
            );
            let _ = std::fs::remove_dir_all(&target);
        }
    }
}

/// A release halite master and one swarm minion with `n` identities.
/// Commits the state tree `salt` to a bare repository `git_dir` (once)
/// and returns its file:// URL.
fn states_repo(salt: &Path, git_dir: &Path) -> Result<String> {
    if !git_dir.join("HEAD").exists() {
        let git = |args: &[&str]| -> Result<()> {
            let status = Command::new("git")
                .args([
                    "-c",
                    "user.name=bench",
                    "-c",
                    "user.email=bench@example.invalid",
                ])
                .arg(format!("--git-dir={}", git_dir.display()))
                .arg(format!("--work-tree={}", salt.display()))
                .args(args)
                .status()
                .context("git")?;
            if !status.success() {
                bail!("git {args:?} failed");
            }
            Ok(())
        };
        let status = Command::new("git")
            .args(["init", "-q", "--bare", "-b", "master"])
            .arg(git_dir)
            .status()?;
        if !status.success() {
            bail!("git init failed");
        }
        git(&["add", "-A"])?;
        git(&["commit", "-q", "-m", "bench tree"])?;
    }
    Ok(format!("file://{}", git_dir.display()))
}

/// Disk a halite fleet run of one minion needs, measured at 3,000 (session
/// 17): the files its states write (`out/<id>/`, 2.3 MB: two of the 50
/// sources are 1 MB) and its two returns in the master's job cache
/// (~0.3 MB each). A 10,000-minion run needs ~30 GB.
const DISK_PER_MINION: u64 = 2_900_000;

/// Fails before a fleet of `n` starts when the file system of `dir` has
/// less room than the run will write (plus 2 GB for everyone else): a
/// disk filled in the middle of a 20-minute run fails every daemon on
/// the machine, not just this bench.
fn check_disk(dir: &Path, n: usize) -> Result<()> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())?;
    // SAFETY: statvfs fills one plain struct we own from a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Ok(());
    }
    let free = st.f_bavail as u64 * st.f_frsize as u64;
    let need = n as u64 * DISK_PER_MINION + (2 << 30);
    if free < need {
        bail!(
            "{n} minions need ~{:.1} GB on {} ({:.1} MB per minion: the files the states write and the job cache), {:.1} GB are free: free some space or run fewer minions",
            need as f64 / 1e9,
            dir.display(),
            DISK_PER_MINION as f64 / 1e6,
            free as f64 / 1e9
        );
    }
    Ok(())
}

/// How one halite fleet is run.
#[derive(Clone, Copy)]
struct RunHow {
    /// The state tree served by gitfs rather than file_roots.
    gitfs: bool,
    /// The CLI's output kept (`--keep`).
    keep: bool,
    /// Stopped once all minions answer (`--ready-only`).
    ready_only: bool,
    /// Warm applies after the cold one (`--warm-runs`, at least 1): the
    /// first is the table's "warm"; the others, printed in a table of
    /// their own, are a fleet's steady state, where the files every
    /// state wrote in the cold run have long settled (a settled
    /// `file.managed` target is not read again: docs/file.md).
    warm_runs: usize,
}

fn run_halite(
    bin: &Path,
    trees: &Path,
    out: &Path,
    dir: &Path,
    n: usize,
    RunHow {
        gitfs,
        keep,
        ready_only,
        warm_runs,
    }: RunHow,
) -> Result<HaliteRun> {
    if !ready_only {
        check_disk(dir.parent().unwrap_or(dir), n)?;
    }
    let states = if gitfs {
        let url = states_repo(&trees.join("salt"), &trees.join("states.git"))?;
        format!("fileserver_backend: [gitfs]\ngitfs_remotes: [{url}]\ngitfs_update_interval: 2\n")
    } else {
        format!("file_roots:\n  base: [{}]\n", trees.join("salt").display())
    };
    let HaliteFleet {
        mut master,
        mut swarm,
        mconf,
        publish_port: publish,
        ret_port: ret,
        swarm_started,
    } = start_halite_fleet(
        bin,
        dir,
        n,
        &format!(
            "timeout: 60\n{states}pillar_roots:\n  base: [{}]\n",
            trees.join("pillar").display()
        ),
    )?;
    // One identity outside the highstate: the master's responsiveness
    // during the apply is the round trip of pings to it.
    let pconf = minion_conf(dir, "probe", publish, ret)?;
    let mut probe = Group::spawn(
        Command::new(bin.join("halite-minion"))
            .arg("-c")
            .arg(&pconf)
            .args(["--swarm", "1", "--swarm-prefix", "probe-"]),
        "halite-minion --swarm 1 (probe)",
        &dir.join("probe.out"),
    )?;
    let ids: HashSet<String> = (0..n).map(|i| format!("bench-{i}")).collect();
    let halite = |args: &[&str]| {
        let mut c = Command::new(bin.join("halite"));
        c.arg("-c").arg(&mconf).args(args);
        c
    };
    let ping_out = dir.join("ping.json");
    let master_pid = master.pgid();
    let mut rounds = Vec::new();
    wait_all(
        &format!("halite {n}"),
        n,
        Duration::from_secs(1800),
        Duration::from_millis(500),
        &mut [&mut master, &mut swarm],
        || {
            let got = count_pings(
                &mut halite(&["bench-*", "test.ping", "-t", "20", "--out", "json"]),
                &ping_out,
                &ids,
            );
            let round = (
                swarm_started.elapsed().as_secs_f64(),
                got,
                status_field(master_pid, "VmRSS:"),
                status_field(master_pid, "VmHWM:"),
            );
            eprintln!(
                "  halite {n}: readiness round {} ended at {:.1} s: {got} answered, master RSS {} (peak {})",
                rounds.len() + 1,
                round.0,
                mb(round.2),
                mb(round.3)
            );
            rounds.push(round);
            got
        },
    )?;
    let ready_secs = swarm_started.elapsed().as_secs_f64();
    let swarm_ready_kb = status_field(swarm.pgid(), "VmRSS:");
    let readiness = Readiness {
        secs: ready_secs,
        rounds,
        master_peak_kb: master.leader_hwm_kb(),
        master_kb: status_field(master_pid, "VmRSS:"),
        swarm_kb: swarm_ready_kb,
        stats: master_stats(bin, &mconf),
    };
    eprint!("  halite {}", readiness.report(n));
    if ready_only {
        return Ok(HaliteRun::ReadyOnly(readiness));
    }
    let probe_ids: HashSet<String> = HashSet::from(["probe-0".to_string()]);
    wait_all(
        "the probe minion",
        1,
        Duration::from_secs(120),
        Duration::from_millis(500),
        &mut [&mut master, &mut probe],
        || {
            count_pings(
                &mut halite(&["probe-0", "test.ping", "-t", "20", "--out", "json"]),
                &ping_out,
                &probe_ids,
            )
        },
    )?;
    eprintln!("  halite {n}: all answering after {ready_secs:.1} s");
    if gitfs {
        // The first fetch done before timing (the background one may still run).
        let status = Command::new(bin.join("halite-run"))
            .arg("-c")
            .arg(&mconf)
            .args(["fileserver.update"])
            .stdout(Stdio::null())
            .status()?;
        if !status.success() {
            bail!("halite-run fileserver.update failed");
        }
    }
    let apply = ["bench-*", "state.apply", "-t", "600", "--out", "json"];
    let daemons = Some((master.child.id(), swarm.pgid() as u32));
    let prober = || -> Option<Box<dyn FnMut() -> Command + Send>> {
        let cli = bin.join("halite");
        let mconf = mconf.clone();
        Some(Box::new(move || {
            let mut c = Command::new(&cli);
            c.arg("-c")
                .arg(&mconf)
                .args(["probe-0", "test.ping", "-t", "60", "--out", "json"]);
            c
        }))
    };
    let cold = timed_apply(
        &mut halite(&apply),
        &dir.join("cold.json"),
        keep,
        &ids,
        daemons,
        prober(),
    )?;
    eprintln!("  halite {n}: {}", run_summary("cold", &cold));
    let warm = timed_apply(
        &mut halite(&apply),
        &dir.join("warm.json"),
        keep,
        &ids,
        daemons,
        prober(),
    )?;
    eprintln!("  halite {n}: {}", run_summary("warm", &warm));
    // The later warm runs: each checked as strictly as the first.
    let mut again = Vec::new();
    for k in 2..=warm_runs {
        let t = timed_apply(
            &mut halite(&apply),
            &dir.join(format!("warm{k}.json")),
            keep,
            &ids,
            daemons,
            prober(),
        )?;
        eprintln!(
            "  halite {n}: {}",
            run_summary(&format!("warm run {k}"), &t)
        );
        again.push(t);
    }
    master.check_alive()?;
    swarm.check_alive()?;
    probe.check_alive()?;
    drop(probe);
    let stats = master_stats(bin, &mconf);
    if let Some(stats) = &stats {
        eprintln!("  halite {n}: master.stats after both runs: {stats}");
    }
    let bundles = stats.map(|v| v["bundles"].clone());
    let measured = Measured {
        minions: n,
        ready_secs,
        cold,
        warm,
        master_kb: master.leader_hwm_kb(),
        minion_kb: swarm.leader_hwm_kb(),
        bundles,
        ready_kb: swarm_ready_kb,
        master_ready_kb: readiness.master_peak_kb,
    };
    // The row before anything else: the clean-up of 10,000 minions'
    // files takes longer than the run.
    println!("{}", halite_row(&measured));
    if !again.is_empty() {
        println!("{}", later_warm_table(n, &again));
    }
    drop(swarm);
    drop(master);
    remove_in_background(out);
    Ok(HaliteRun::Full(Box::new(measured)))
}

/// A salt-master and `n` salt-minion processes.
fn run_salt(
    sbin: &Path,
    trees: &Path,
    out: &Path,
    dir: &Path,
    n: usize,
    keep: bool,
) -> Result<Measured> {
    std::fs::create_dir_all(dir)?;
    let (publish, ret) = port_pair()?;
    let mconf = salt_master_conf(
        dir,
        publish,
        ret,
        &format!(
            "file_roots:\n  base: [{}]\npillar_roots:\n  base: [{}]\n",
            trees.join("salt").display(),
            trees.join("pillar").display()
        ),
    )?;
    let id_list: Vec<String> = (0..n).map(|i| format!("salt-bench-{i}")).collect();
    let (mut master, mut minions) = start_salt_fleet(sbin, dir, &mconf, (publish, ret), &id_list)?;
    let ids: HashSet<String> = id_list.into_iter().collect();
    let salt = |args: &[&str]| {
        let mut c = Command::new(sbin.join("salt"));
        c.arg("-c").arg(&mconf).args(args);
        c
    };
    let ping_out = dir.join("ping.json");
    let ready_secs = {
        let mut daemons: Vec<&mut Group> = vec![&mut master];
        daemons.extend(minions.iter_mut());
        wait_all(
            &format!("salt {n}"),
            n,
            Duration::from_secs(900),
            Duration::from_millis(500),
            &mut daemons,
            || {
                count_pings(
                    &mut salt(&["*", "test.ping", "-t", "10", "--out", "json"]),
                    &ping_out,
                    &ids,
                )
            },
        )?
    };
    eprintln!("  salt {n}: all answering after {ready_secs:.1} s");
    let mut pgids = vec![master.pgid()];
    pgids.extend(minions.iter().map(Group::pgid));
    let sampler = Sampler::start(pgids);
    let apply = ["*", "state.apply", "--out", "json", "-t", "600"];
    let cold = timed_apply(
        &mut salt(&apply),
        &dir.join("cold.json"),
        keep,
        &ids,
        None,
        None,
    );
    let warm = cold.as_ref().ok().map(|_| {
        timed_apply(
            &mut salt(&apply),
            &dir.join("warm.json"),
            keep,
            &ids,
            None,
            None,
        )
    });
    let peaks = sampler.finish();
    let cold = cold?;
    eprintln!("  salt {n}: cold {:.2} s", cold.secs);
    let warm = warm.context("no warm run")??;
    eprintln!("  salt {n}: warm {:.2} s", warm.secs);
    let measured = Measured {
        minions: n,
        ready_secs,
        cold,
        warm,
        master_kb: peaks.first().copied().unwrap_or(0),
        minion_kb: peaks.iter().skip(1).sum(),
        bundles: None,
        ready_kb: 0,
        master_ready_kb: 0,
    };
    drop(minions);
    drop(master);
    let _ = std::fs::remove_dir_all(out);
    Ok(measured)
}

// ---------------------------------------------------------------------------
// Report

fn counts(s: &str) -> Vec<usize> {
    s.split(',').filter_map(|x| x.trim().parse().ok()).collect()
}

fn mb(kb: u64) -> String {
    format!("{:.1} MB", kb as f64 / 1024.0)
}

/// "ok" or the first problem of a run.
fn verdict(m: &Measured) -> String {
    let mut v = Vec::new();
    for (what, t) in [("cold", &m.cold), ("warm", &m.warm)] {
        if t.check.minions_ok != m.minions {
            v.push(format!(
                "{what}: {}/{} minions all true ({})",
                t.check.minions_ok,
                m.minions,
                t.check.problems.first().cloned().unwrap_or_default()
            ));
        }
    }
    if v.is_empty() {
        format!(
            "all {} states true on every minion; changes cold {} / warm {}",
            STATES, m.cold.check.changed, m.warm.check.changed
        )
    } else {
        v.join("; ")
    }
}

/// "p50 / max (count)" of ping round trips, in ms.
fn ping_summary(pings: &[f64]) -> String {
    if pings.is_empty() {
        return "none answered".into();
    }
    let mut sorted = pings.to_vec();
    sorted.sort_by(f64::total_cmp);
    format!(
        "{:.0} / {:.0} ms ({})",
        sorted[sorted.len() / 2] * 1000.0,
        sorted[sorted.len() - 1] * 1000.0,
        sorted.len()
    )
}

/// Master CPU milliseconds per minion of a run.
fn per_minion_ms(t: &Timed, n: usize) -> f64 {
    t.master_cpu * 1000.0 / n.max(1) as f64
}

/// Swarm CPU milliseconds per minion of a run.
fn swarm_per_minion_ms(t: &Timed, n: usize) -> f64 {
    t.swarm_cpu * 1000.0 / n.max(1) as f64
}

/// One run's figures for the progress lines on stderr.
fn run_summary(what: &str, t: &Timed) -> String {
    format!(
        "{what} {:.2} s, master CPU {:.2} s, swarm CPU {:.2} s, CLI CPU {:.2} s, the harness's check {:.2} s, pings {}",
        t.secs,
        t.master_cpu,
        t.swarm_cpu,
        t.cli_cpu,
        t.check_cpu,
        ping_summary(&t.pings)
    )
}

/// The warm runs after the first (`--warm-runs`), a row each: the
/// fleet's steady state.
fn later_warm_table(n: usize, runs: &[Timed]) -> String {
    let mut t = String::from(
        "| minions | warm run | wall | master CPU per minion | swarm CPU per minion | CLI CPU | `test.ping` during the apply | check |\n\
         |---:|---:|---:|---:|---:|---:|---|---|",
    );
    for (i, r) in runs.iter().enumerate() {
        let check = if r.check.minions_ok == n && r.check.problems.is_empty() {
            format!(
                "all {STATES} states true on every minion; changes {}",
                r.check.changed
            )
        } else {
            format!(
                "{} of {n} minions all true; {}",
                r.check.minions_ok,
                r.check.problems.join("; ")
            )
        };
        let _ = write!(
            t,
            "\n| {n} | {} | {:.2} s | {:.1} ms | {:.1} ms | {:.2} s | {} | {check} |",
            i + 2,
            r.secs,
            per_minion_ms(r, n),
            swarm_per_minion_ms(r, n),
            r.cli_cpu,
            ping_summary(&r.pings),
        );
    }
    t
}

fn halite_row(m: &Measured) -> String {
    format!(
        "| {} | {:.2} s | {:.2} s | {:.1} / {:.1} ms | {:.1} / {:.1} ms | {} / {} | {} ({} at ready) | {} | {} | {:.1} s | {} ({:.1} KB per identity) | {} |",
        m.minions,
        m.cold.secs,
        m.warm.secs,
        per_minion_ms(&m.cold, m.minions),
        per_minion_ms(&m.warm, m.minions),
        swarm_per_minion_ms(&m.cold, m.minions),
        swarm_per_minion_ms(&m.warm, m.minions),
        ping_summary(&m.cold.pings),
        ping_summary(&m.warm.pings),
        mb(m.master_kb),
        mb(m.master_ready_kb),
        mb(m.minion_kb),
        mb(m.cold.cli_kb.max(m.warm.cli_kb)),
        m.ready_secs,
        mb(m.ready_kb),
        m.ready_kb as f64 / m.minions.max(1) as f64,
        verdict(m)
    )
}

fn salt_row(m: &Measured) -> String {
    format!(
        "| {} | {:.2} s | {:.2} s | {} | {} | {:.1} s | {} |",
        m.minions,
        m.cold.secs,
        m.warm.secs,
        mb(m.master_kb),
        mb(m.minion_kb),
        m.ready_secs,
        verdict(m)
    )
}

/// `text` with its words rewrapped at `width` columns.
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    for word in text.split_whitespace() {
        if line > 0 && line + 1 + word.len() > width {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += word.len();
    }
    out
}

fn shell(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn machine() -> String {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let ram_kb: u64 = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0);
    format!(
        "{cores} cores, {:.0} GB RAM",
        ram_kb as f64 / 1024.0 / 1024.0
    )
}

/// Replaces (or appends) this bench's section of a markdown file.
fn write_section(path: &Path, section: &str) -> Result<()> {
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let new = match old.find(SECTION) {
        Some(start) => {
            let after = start + SECTION.len();
            let end = old[after..]
                .find("\n## ")
                .map(|i| after + i + 1)
                .unwrap_or(old.len());
            format!("{}{section}{}", &old[..start], &old[end..])
        }
        None => {
            let sep = if old.is_empty() || old.ends_with("\n\n") {
                ""
            } else if old.ends_with('\n') {
                "\n"
            } else {
                "\n\n"
            };
            format!("{old}{sep}{section}")
        }
    };
    std::fs::write(path, new).with_context(|| format!("cannot write {}", path.display()))
}

/// What `--help` prints: the options, so that asking costs no fleet run.
const USAGE: &str = "cargo bench -p halite-cli --bench highstate -- [options]
  --minions 1,100,1000     swarm sizes for halite (default 1,100,1000)
  --salt-minions 1         Salt minion counts ('' for none; default 1)
  --bin-dir DIR            halite binaries (default target/release)
  --salt-bin-dir DIR       Salt's binaries (default ~/.venvs/salt/bin)
  --gitfs                  also measure the tree served by gitfs
  --write FILE             append the results as a section of FILE
  --note TEXT              a note for the section's heading
  --keep                   keep the bench's directory (and the CLI's output)
  --ready-only             stop each halite fleet once all its minions answer
                           (the readiness rounds and the master's memory)
  --warm-runs K            K warm applies after the cold one (default 1); the
                           later ones, a fleet's steady state, in a table of
                           their own (halite only)";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return Ok(());
    }
    let sizes = counts(&arg(&args, "--minions").unwrap_or_else(|| "1,100,1000".into()));
    let salt_sizes = counts(&arg(&args, "--salt-minions").unwrap_or_else(|| "1".into()));
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin = arg(&args, "--bin-dir")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("target/release"));
    for b in ["halite-master", "halite-minion", "halite", "halite-run"] {
        if !bin.join(b).exists() {
            bail!(
                "{} is missing: run `cargo build --release --bins` first (or pass --bin-dir)",
                bin.join(b).display()
            );
        }
    }
    let salt_bin = arg(&args, "--salt-bin-dir").map(PathBuf::from).or_else(|| {
        let p = PathBuf::from(std::env::var("HOME").ok()?).join(".venvs/salt/bin");
        p.join("salt-master").exists().then_some(p)
    });
    let write_to = arg(&args, "--write");
    let note = arg(&args, "--note");
    let keep = args.iter().any(|a| a == "--keep");
    let ready_only = args.iter().any(|a| a == "--ready-only");
    let warm_runs = match arg(&args, "--warm-runs") {
        Some(k) => match k.parse::<usize>() {
            Ok(k) if k >= 1 => k,
            _ => bail!("--warm-runs wants a whole number of 1 or more, not {k:?}"),
        },
        None => 1,
    };

    let work = tempfile::Builder::new()
        .prefix("halite-highstate-")
        .tempdir()?;
    let trees = work.path().join("trees");
    let out = work.path().join("out");
    generate_trees(&trees, &out)?;
    let load_before = loadavg();
    eprintln!("tree in {}; load {load_before}", trees.display());

    let mut halite = Vec::new();
    let mut failures = Vec::new();
    let backends: &[bool] = if args.iter().any(|a| a == "--gitfs") {
        &[false, true]
    } else {
        &[false]
    };
    for &n in &sizes {
        for &gitfs in backends {
            let name = if gitfs { "gitfs" } else { "roots" };
            eprintln!("halite, {n} minions, {name}");
            let dir = work.path().join(format!("halite-{n}-{name}"));
            match run_halite(
                &bin,
                &trees,
                &out,
                &dir,
                n,
                RunHow {
                    gitfs,
                    keep,
                    ready_only,
                    warm_runs,
                },
            ) {
                Ok(HaliteRun::Full(m)) => {
                    println!("{} ({name})", halite_row(&m));
                    // The document's table keeps the roots figures.
                    if !gitfs {
                        halite.push(*m);
                    }
                }
                Ok(HaliteRun::ReadyOnly(r)) => {
                    print!("halite ({name}) {}", r.report(n));
                }
                Err(e) => {
                    eprintln!("halite {n} {name}: {e:#}");
                    failures.push(format!("halite with {n} minions ({name}): {e:#}"));
                }
            }
        }
    }
    if ready_only {
        // No runs, no section: the rounds are printed above.
        for f in &failures {
            println!("not measured: {f}");
        }
        return Ok(());
    }
    let mut salt = Vec::new();
    if let Some(sbin) = &salt_bin {
        for &n in &salt_sizes {
            eprintln!("salt, {n} minions");
            let dir = work.path().join(format!("salt-{n}"));
            match run_salt(sbin, &trees, &out, &dir, n, keep) {
                Ok(m) => {
                    println!("{}", salt_row(&m));
                    salt.push(m);
                }
                Err(e) => {
                    eprintln!("salt {n}: {e:#}");
                    failures.push(format!("Salt with {n} minions: {e:#}"));
                }
            }
        }
    } else {
        eprintln!("Salt not found (~/.venvs/salt/bin/salt-master): only halite measured");
    }
    let load_after = loadavg();

    let mut doc = format!("{SECTION}\n\n");
    let _ = writeln!(
        doc,
        "`cargo bench -p halite-cli --bench highstate -- --minions {} --salt-minions {} --write FILE`\n\
         generates one state tree and pillar tree: {STATES} states in `bench.sls` ({FILES}\n\
         `file.managed` with distinct `salt://` sources, {} of ~2-6 KB and {BIG_FILES} of 1 MB,\n\
         written to `<out>/<minion id>/`; the rest `test.succeed_without_changes`, every\n\
         10th requiring its predecessor and every 50th a file), `top.sls` `'*': [bench]`,\n\
         a small pillar used by the SLS's Jinja. halite: a release `halite-master`\n\
         (`auto_accept`, file_roots/pillar_roots in its config) and ONE\n\
         `halite-minion --swarm N` process; Salt 3008.5: a `salt-master` (2 workers) and\n\
         one `salt-minion` process per minion. Once all minions answer `test.ping`, it\n\
         times `state.apply -t 600 --out json` on every minion (halite: `'bench-*'`, which\n\
         leaves out the probe minion pinged during the apply; Salt: `'*'`) from the\n\
         CLI's start until it exited\n\
         with every return printed: cold (the minions' file caches empty, every file\n\
         written) then warm (cache hit, nothing changes), and checks that every minion\n\
         returned all {STATES} states with `result: true`.\n",
        sizes.iter().map(usize::to_string).collect::<Vec<_>>().join(","),
        salt_sizes.iter().map(usize::to_string).collect::<Vec<_>>().join(","),
        FILES - BIG_FILES,
    );
    let measured = format!(
        "Measured {} on {} (load average {load_before} before, {load_after} after; the \
         machine is shared with other builds, so read ratios rather than absolutes).{}",
        shell("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        machine(),
        note.map(|n| format!(" {n}")).unwrap_or_default()
    );
    let _ = writeln!(doc, "{}\n", wrap(&measured, 80));
    doc.push_str(
        "halite: master/minion RSS is `VmHWM` (peak) of each daemon over its life\n\
         (key generation, handshakes and both runs), the master's in brackets when all\n\
         minions answered (handshakes and readiness pings); CLI is the `halite` process's own\n\
         peak (`VmHWM`, polled every 20 ms); \"ready\" is the swarm's start until all N answer\n\
         `test.ping` (the swarm's identities are known to the master, their keys kept in\n\
         `target/bench-swarm` across runs), and the swarm's RSS then.\n\
         Master CPU is user + system time of the master process (all threads,\n\
         `/proc/<pid>/stat`) over each run, divided by the minions; swarm CPU the\n\
         same for the one swarm process that runs every minion's states. `test.ping`\n\
         during the apply: a second minion process (`probe-0`, not targeted by\n\
         the apply, `bench-*`) is pinged every 250 ms while the apply runs; the\n\
         CLI's round trip, p50 / max (answers), cold / warm.\n\n\
         | minions | cold | warm | master CPU per minion cold / warm | swarm CPU per minion cold / warm | `test.ping` during the apply, cold / warm | master peak RSS (at ready) | swarm minion peak RSS | CLI peak RSS | ready | swarm RSS at ready | check |\n\
         |---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|\n",
    );
    for m in &halite {
        let _ = writeln!(doc, "{}", halite_row(m));
    }
    if halite.iter().any(|m| m.bundles.is_some()) {
        doc.push_str(
            "\nBundles over both runs (`halite-run master.stats`): sent in full, not sent\n\
             because the minion held the same (\"you have it\"), zstd-compressed, and\n\
             the bytes of the packed bundles sent before and after compression.\n\n\
             | minions | sent | not sent | compressed | encoded | on the wire | peak in flight / bound |\n\
             |---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for m in &halite {
            if let Some(b) = &m.bundles {
                let n = |k: &str| b[k].as_u64().unwrap_or(0);
                let _ = writeln!(
                    doc,
                    "| {} | {} | {} | {} | {} | {} | {} / {} |",
                    m.minions,
                    n("sent"),
                    n("unchanged"),
                    n("compressed"),
                    mb(n("plain_bytes") / 1024),
                    mb(n("wire_bytes") / 1024),
                    n("peak_in_flight"),
                    n("max_in_flight")
                );
            }
        }
    }
    if !salt.is_empty() {
        doc.push_str(
            "\nSalt: RSS is the peak, sampled every 100 ms during the two runs, of the\n\
             summed RSS of the master's processes and of all minion processes (with\n\
             their job processes).\n\n\
             | minions | cold | warm | master peak RSS | minions peak RSS | ready | check |\n\
             |---:|---:|---:|---:|---:|---:|---|\n",
        );
        for m in &salt {
            let _ = writeln!(doc, "{}", salt_row(m));
        }
        for s in &salt {
            if let Some(h) = halite.iter().find(|h| h.minions == s.minions) {
                let _ = writeln!(
                    doc,
                    "\nSalt / halite with {} minion{}: cold **{:.0}x** ({:.2} s / {:.2} s), warm **{:.0}x** ({:.2} s / {:.2} s) (target: >= 20x).",
                    s.minions,
                    if s.minions == 1 { "" } else { "s" },
                    s.cold.secs / h.cold.secs,
                    s.cold.secs,
                    h.cold.secs,
                    s.warm.secs / h.warm.secs,
                    s.warm.secs,
                    h.warm.secs
                );
            }
        }
    }
    if !failures.is_empty() {
        doc.push_str("\nNot measured:\n\n");
        for f in &failures {
            let _ = writeln!(doc, "- {f}");
        }
    }
    doc.push('\n');
    println!("\n{doc}");
    if let Some(path) = write_to {
        // cargo runs benches in the package directory: relative paths are
        // taken from the workspace root.
        let path = repo.join(path);
        write_section(&path, &doc)?;
        eprintln!("wrote the section to {}", path.display());
    }
    let kept = work.keep();
    if keep {
        eprintln!("kept {}", kept.display());
    } else {
        remove_in_background(&kept);
    }
    Ok(())
}
