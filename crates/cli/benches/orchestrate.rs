//! Orchestration at fleet scale: `state.orchestrate` of three `salt.state`
//! steps (db, then app, then web, each requiring the one before) over one
//! `halite-minion --swarm N`, beside Salt 3008.5's `salt-run
//! state.orchestrate` of the same SLS over a `salt-master` and M
//! `salt-minion` processes on the same machine.
//!
//! `cargo bench -p halite-cli --bench orchestrate [-- --minions 1000
//! --salt-minions 10 --rounds 3 --bin-dir target/release]`; with a debug
//! tree only: `cargo test -p halite-cli --bench orchestrate -- --bin-dir
//! target/debug ...` (the harness is this `main`, either way). Salt comes
//! from `~/.venvs/salt/bin` (or `--salt-bin-dir`); `--salt-minions 0`
//! measures halite only, `--minions 0` Salt only; a round that fails is
//! reported and not timed. Every daemon runs in its own process group,
//! killed when the bench ends, fails or panics. Figures:
//! docs/benchmarks.md, "Orchestration over a swarm".
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a bench's helpers may panic: a panic is a failed run"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

mod common;
use common::{
    arg, loadavg, port_pair, salt_master_conf, start_halite_fleet, start_salt_fleet, wait_all,
    write, Group, HaliteFleet, SWARM_PREFIX,
};

/// States each tier's SLS applies.
const TIER_STATES: usize = 10;

/// The state tree: `tier.sls` and `orch/three.sls` whose steps target
/// `<prefix>*[0-2]`, `[3-5]` and `[6-9]` (the ids' last digit: 30/30/40%).
/// No `queue: True`: each swarm identity has its own state-run lock, as
/// each real minion has its host's.
fn tree(root: &Path, prefix: &str) -> Result<()> {
    let mut tier = String::new();
    for i in 0..TIER_STATES {
        tier.push_str(&format!("s{i}:\n  test.succeed_without_changes\n"));
    }
    write(&root.join("tier.sls"), tier.as_bytes())?;
    write(
        &root.join("orch/three.sls"),
        format!(
            "db:\n  salt.state:\n    - tgt: '{prefix}*[0-2]'\n    - sls: tier\n    - timeout: 600\n\
             app:\n  salt.state:\n    - tgt: '{prefix}*[3-5]'\n    - sls: tier\n    - timeout: 600\n    - require:\n      - salt: db\n\
             web:\n  salt.state:\n    - tgt: '{prefix}*[6-9]'\n    - sls: tier\n    - timeout: 600\n    - require:\n      - salt: app\n"
        )
        .as_bytes(),
    )
}

/// How many minions answered a `test.ping` printed as JSON documents.
fn pings(cli: &mut Command) -> usize {
    let Ok(out) = cli.stdin(Stdio::null()).stderr(Stdio::null()).output() else {
        return 0;
    };
    serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter::<Value>()
        .filter_map(Result::ok)
        .filter_map(|v| v.as_object().cloned())
        .flat_map(|m| m.into_iter())
        .filter(|(_, v)| *v == Value::Bool(true))
        .count()
}

/// Runs the orchestration once: its wall time, after checking every step
/// succeeded on every minion it targeted (`n` in all).
fn timed_orchestrate(cmd: &mut Command, n: usize) -> Result<f64> {
    let start = Instant::now();
    let out = cmd.stdin(Stdio::null()).output()?;
    let secs = start.elapsed().as_secs_f64();
    let v: Value = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "the orchestration printed no JSON: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let run = v["data"]
        .as_object()
        .and_then(|d| d.values().next())
        .and_then(Value::as_object)
        .context("no run in the return")?;
    let mut minions = 0;
    for (tag, step) in run {
        if step["result"] != Value::Bool(true) {
            bail!("step {tag} failed: {}", step["comment"]);
        }
        let comment = step["comment"].as_str().unwrap_or_default();
        // "States ran successfully. No changes made to a, b." / "Updating a, b."
        minions += comment
            .split_once(". ")
            .map(|(_, rest)| rest.split(", ").count())
            .unwrap_or(0);
    }
    if run.len() != 3 || minions != n {
        bail!(
            "{} steps over {minions} minions, expected 3 over {n}",
            run.len()
        );
    }
    Ok(secs)
}

/// The median, or NaN when every round failed.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn run_halite(bin: &Path, dir: &Path, n: usize, rounds: usize) -> Result<(f64, Vec<f64>)> {
    tree(&dir.join("salt"), SWARM_PREFIX)?;
    let HaliteFleet {
        mut master,
        mut swarm,
        mconf,
        swarm_started,
        ..
    } = start_halite_fleet(
        bin,
        dir,
        n,
        &format!(
            "timeout: 120\nfile_roots:\n  base: [{}]\n",
            dir.join("salt").display()
        ),
    )?;
    wait_all(
        &format!("halite {n}"),
        n,
        Duration::from_secs(1800),
        Duration::from_secs(1),
        &mut [&mut master, &mut swarm],
        || {
            pings(
                Command::new(bin.join("halite"))
                    .arg("-c")
                    .arg(&mconf)
                    .args(["*", "test.ping", "-t", "20", "--out", "json"]),
            )
        },
    )?;
    let ready = swarm_started.elapsed().as_secs_f64();
    eprintln!("  halite {n}: all answering after {ready:.1} s");
    let mut times = Vec::new();
    for r in 0..rounds {
        match timed_orchestrate(
            Command::new(bin.join("halite-run"))
                .arg("-c")
                .arg(&mconf)
                .args(["state.orchestrate", "orch.three", "--out", "json"]),
            n,
        ) {
            Ok(t) => {
                eprintln!("  halite {n}: round {r}: {t:.2} s");
                times.push(t);
            }
            Err(e) => eprintln!("  halite {n}: round {r} FAILED: {e:#}"),
        }
    }
    Ok((ready, times))
}

fn run_salt(sbin: &Path, dir: &Path, n: usize, rounds: usize) -> Result<(f64, Vec<f64>)> {
    let (publish, ret) = port_pair()?;
    tree(&dir.join("salt"), "sb-")?;
    let mconf = salt_master_conf(
        dir,
        publish,
        ret,
        &format!("file_roots:\n  base: [{}/salt]\n", dir.display()),
    )?;
    let ids: Vec<String> = (0..n).map(|i| format!("sb-{i}")).collect();
    let (mut master, mut minions) = start_salt_fleet(sbin, dir, &mconf, (publish, ret), &ids)?;
    let ready = {
        let mut daemons: Vec<&mut Group> = vec![&mut master];
        daemons.extend(minions.iter_mut());
        wait_all(
            &format!("salt {n}"),
            n,
            Duration::from_secs(1800),
            Duration::from_secs(1),
            &mut daemons,
            || {
                pings(Command::new(sbin.join("salt")).arg("-c").arg(&mconf).args([
                    "*",
                    "test.ping",
                    "-t",
                    "10",
                    "--out",
                    "json",
                    "--static",
                ]))
            },
        )?
    };
    eprintln!("  salt {n}: all answering after {ready:.1} s");
    let mut times = Vec::new();
    for r in 0..rounds {
        match timed_orchestrate(
            Command::new(sbin.join("salt-run"))
                .arg("-c")
                .arg(&mconf)
                .args(["state.orchestrate", "orch.three", "--out", "json"]),
            n,
        ) {
            Ok(t) => {
                eprintln!("  salt {n}: round {r}: {t:.2} s");
                times.push(t);
            }
            // A failed round is reported, not timed (Salt under load
            // sometimes fails a minion's pillar fetch).
            Err(e) => eprintln!("  salt {n}: round {r} FAILED: {e:#}"),
        }
    }
    Ok((ready, times))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = arg(&args, "--minions").map_or(Ok(1000), |s| s.parse())?;
    let salt_n: usize = arg(&args, "--salt-minions").map_or(Ok(10), |s| s.parse())?;
    let rounds: usize = arg(&args, "--rounds").map_or(Ok(3), |s| s.parse())?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin = arg(&args, "--bin-dir")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/release"));
    let sbin = arg(&args, "--salt-bin-dir")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".venvs/salt/bin")
        });
    let work = tempfile::tempdir()?;
    eprintln!("orchestrate bench: load average before {}", loadavg());
    if n > 0 {
        let (ready, times) = run_halite(&bin, &work.path().join("halite"), n, rounds)?;
        println!(
        "halite ({}) {n} swarm minions: ready {ready:.1} s; orchestration of 3 steps: median {:.2} s, runs {:?}; load average {}",
        bin.display(),
        median(times.clone()),
        times.iter().map(|t| format!("{t:.2}")).collect::<Vec<_>>(),
        loadavg()
        );
    }
    if salt_n > 0 {
        if !sbin.join("salt-master").exists() {
            bail!("no salt-master in {}: install Salt (../shared/bench/install-salt.sh) or pass --salt-minions 0", sbin.display());
        }
        let (ready, times) = run_salt(&sbin, &work.path().join("salt"), salt_n, rounds)?;
        println!(
            "Salt 3008.5 {salt_n} salt-minion processes: ready {ready:.1} s; orchestration of 3 steps: median {:.2} s, runs {:?}; load average {}",
            median(times.clone()),
            times.iter().map(|t| format!("{t:.2}")).collect::<Vec<_>>(),
            loadavg()
        );
    }
    Ok(())
}
