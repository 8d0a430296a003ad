//! State-engine benchmark: `halite-call --local` against `salt-call
//! --local` on the shared generator's shapes (indep, chain, fanin), wall
//! time and peak RSS of `state.apply` and `state.show_lowstate`, both
//! measured in the same run.
//!
//! `cargo bench -p halite-cli --bench state_engine [-- --sizes 1000,10000,100000
//! --salt-max 10000 --runs 3 --write docs/benchmarks.md]`.
//! Salt is found at `$SALT_CALL` or `~/.venvs/salt/bin/salt-call`
//! (install it with `../shared/bench/install-salt.sh`); without it only
//! halite is measured.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

struct Sample {
    wall_ms: f64,
    rss_kb: i64,
    ok: bool,
}

/// Runs a command, returning wall time and the child's peak RSS (wait4).
fn measure(cmd: &mut Command) -> Sample {
    let start = Instant::now();
    let child = match cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cannot start {cmd:?}: {e}");
            return Sample {
                wall_ms: f64::NAN,
                rss_kb: 0,
                ok: false,
            };
        }
    };
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall_ms = start.elapsed().as_secs_f64() * 1000.0;
    std::mem::forget(child);
    let exited_ok = r == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    Sample {
        wall_ms,
        rss_kb: usage.ru_maxrss,
        ok: exited_ok,
    }
}

fn median(mut v: Vec<Sample>) -> Sample {
    v.sort_by(|a, b| a.wall_ms.total_cmp(&b.wall_ms));
    let ok = v.iter().all(|s| s.ok);
    let m = v.swap_remove(v.len() / 2);
    Sample { ok, ..m }
}

fn salt_call() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("SALT_CALL") {
        return Some(PathBuf::from(p));
    }
    let home = std::env::var("HOME").ok()?;
    let p = Path::new(&home).join(".venvs/salt/bin/salt-call");
    p.exists().then_some(p)
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sizes: Vec<usize> = arg(&args, "--sizes")
        .unwrap_or_else(|| "1000,10000,100000".into())
        .split(',')
        .filter_map(|s| s.parse().ok())
        .collect();
    let salt_max: usize = arg(&args, "--salt-max")
        .and_then(|s| s.parse().ok())
        .unwrap_or(10000);
    let runs: usize = arg(&args, "--runs")
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let write = arg(&args, "--write");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let gen = root.join("../shared/bench/gen_sls.py");
    if !gen.exists() {
        eprintln!(
            "{} not found: run with shared/ beside the repo",
            gen.display()
        );
        return;
    }
    let halite = PathBuf::from(env!("CARGO_BIN_EXE_halite-call"));
    let salt = salt_call();
    let work = tempfile::tempdir().expect("temp dir");
    let cfg = work.path().join("cfg");
    std::fs::create_dir_all(&cfg).expect("cfg dir");
    let var = work.path().join("var");
    std::fs::write(
        cfg.join("minion"),
        format!(
            "id: bench\nfile_client: local\ncachedir: {0}/cache\npki_dir: {0}/pki\nsock_dir: {0}/sock\nlog_file: {0}/log\nlog_level_logfile: warning\n",
            var.display()
        ),
    )
    .expect("minion config");

    let mut rows = Vec::new();
    let mut cases: Vec<(String, usize)> = vec![("indep".into(), 1)];
    for shape in ["indep", "chain", "fanin"] {
        for &n in &sizes {
            cases.push((shape.into(), n));
        }
    }
    for (shape, n) in cases {
        let tree = work.path().join(format!("{shape}-{n}"));
        let status = Command::new("python3")
            .arg(&gen)
            .arg(&tree)
            .arg(&shape)
            .arg(n.to_string())
            .status();
        if !status.map(|s| s.success()).unwrap_or(false) {
            eprintln!("generator failed for {shape} {n}");
            continue;
        }
        for fun in ["state.apply", "state.show_lowstate"] {
            let run = |bin: &Path| {
                let mut c = Command::new(bin);
                c.arg("--local")
                    .arg("--config-dir")
                    .arg(&cfg)
                    .arg("--file-root")
                    .arg(&tree)
                    .arg("--out")
                    .arg("json");
                if fun == "state.apply" {
                    c.arg(fun).arg("bench");
                } else {
                    c.arg(fun);
                }
                c
            };
            let h = median((0..runs).map(|_| measure(&mut run(&halite))).collect());
            let s = match &salt {
                Some(bin) if n <= salt_max => {
                    let salt_runs = if n >= 10000 { 1 } else { runs };
                    Some(median(
                        (0..salt_runs).map(|_| measure(&mut run(bin))).collect(),
                    ))
                }
                _ => None,
            };
            let line = format!(
                "| {shape} | {n} | {fun} | {:.1} | {:.1} | {} | {} | {} |",
                h.wall_ms,
                h.rss_kb as f64 / 1024.0,
                s.as_ref()
                    .map(|s| format!("{:.0}", s.wall_ms))
                    .unwrap_or_else(|| "-".into()),
                s.as_ref()
                    .map(|s| format!("{:.1}", s.rss_kb as f64 / 1024.0))
                    .unwrap_or_else(|| "-".into()),
                s.as_ref()
                    .map(|s| format!("{:.0}x", s.wall_ms / h.wall_ms))
                    .unwrap_or_else(|| "-".into()),
            );
            if !h.ok {
                eprintln!("warning: halite exited non-zero for {shape} {n} {fun}");
            }
            println!("{line}");
            rows.push(line);
        }
    }
    let table = format!(
        "| shape | N | function | halite ms | halite MB | salt ms | salt MB | speedup |\n|---|---|---|---|---|---|---|---|\n{}\n",
        rows.join("\n")
    );
    if let Some(path) = write {
        let header = format!(
            "<!-- state_engine bench: {} runs (median), salt at {} -->\n",
            runs,
            salt.as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "not installed".into())
        );
        if let Err(e) = std::fs::write(&path, format!("{header}{table}")) {
            eprintln!("cannot write {path}: {e}");
        }
    }
}
