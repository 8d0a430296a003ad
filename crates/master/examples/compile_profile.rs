//! Profiles the master's per-minion compile without sockets: generates the
//! highstate benchmark's tree shape (1000 states, 50 `salt://` files, paths
//! from `grains['id']` and pillar) in a temp dir and compiles
//! `state.apply` for N minion ids, as the master does for a fleet job,
//! then encodes each bundle as the reply frame does. Prints the time of
//! each phase; run it under `perf record` for the functions.
//!
//! `cargo run -p halite-master --example compile_profile -- 200 [fresh]`
//! (`fresh`: with the render cache off, every text parsed, every template
//! compiled and every SLS rendered for every minion: the compile before
//! issue 25's caches)
//! `[noid]` (`noid`: the SLS's paths from `grains['os']` instead of the
//! id, so every minion renders the same text: a homogeneous fleet)
//! `[noreuse]` (the pillar record of issue 25's session 16 off: every
//! pillar compiled)
//! `[gitfs]` (the state tree committed to a bare repository and served by
//! gitfs, a file:// remote fetched once before the compiles: what a gitfs
//! lookup costs beside a `file_roots` one; needs `git`)
//!
//! `[noidform]` (the compile per id form of issue 25, sessions 19 and 21, off:
//! every minion's high data compiled to chunks in full)
//!
//! `[nohighform]` (the plans served from their renders' id forms of issue
//! 25, session 24, off: every minion's high data built and compared)
//!
//! `[stamp]` (also times the per-job tree stamp, `compile_record::tree_stamp`:
//! the bench tree's, and a generated tree of 10,000 files)
//!
//! Then a warm job as the compile threads answer it (`Compiler::answer`):
//! every minion holds the bundle of the job before, and nothing changed,
//! so the compile is skipped (issue 25's compile record) and the pillar's
//! `pillar_roots` compile reused (the pillar record): what is left per
//! minion is the `ext_pillar` sources, the inputs' digest and the checks.

// The master's own allocator (mimalloc, with its settings), so that a
// profile of this example weighs allocations as the daemon does (glibc's
// malloc was a third of session 16's flat profile here, not of the
// master's). `MIMALLOC_PURGE_DELAY=0` in the environment gives the
// daemon's setting before issue 25's session 17.
halite_perf::fast_allocator!(bursty);

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use halite_master::bundles::{BundleAnswer, BundleStats};
use halite_master::compiler::Compiler;
use halite_master::fileserver::FileServer;
use halite_modules::exec::RemoteExec;
use halite_modules::Args;
use halite_proto::msg::{Job, ReplyBody};
use halite_proto::testing::highstate_job;
use serde_json::{json, Value};

/// This thread's CPU time so far (`/proc/thread-self/schedstat`, in ns):
/// what a phase cost, whatever other processes load the machine with
/// (the wall times printed beside it are not, on a shared machine).
fn cpu() -> Duration {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .map(Duration::from_nanos)
        .unwrap_or_default()
}

/// Render-time calls the tree never makes.
struct NoRemote;

impl RemoteExec for NoRemote {
    fn call(&self, fun: &str, _args: &Args) -> Result<Value, String> {
        Err(format!("{fun}: no minion in the profile"))
    }
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)?;
    Ok(())
}

/// The benchmark's tree (crates/cli/benches/highstate.rs, same shape).
fn generate(root: &Path, by: &str) -> anyhow::Result<()> {
    let salt = root.join("salt");
    write(&salt.join("top.sls"), "base:\n  '*':\n    - bench\n")?;
    let sls = String::from(
        "{% set out = pillar['bench_out'] ~ '/' ~ grains['BY'] %}\n\
         bench_motd:\n  test.succeed_without_changes:\n    - name: \"motd {{ pillar['bench']['motd'] }}\"\n\n",
    );
    let mut sls = sls.replace("BY", by);
    for k in 0..50 {
        write(
            &salt.join(format!("files/f{k:02}.txt")),
            &"x".repeat(2048 + k * 64),
        )?;
        let _ = write!(
            sls,
            "bench_file_{k:02}:\n  file.managed:\n    - name: {{{{ out }}}}/f{k:02}.txt\n    - source: salt://files/f{k:02}.txt\n    - makedirs: True\n\n"
        );
    }
    for i in 1..950 {
        let _ = writeln!(sls, "bench_test_{i:03}:\n  test.succeed_without_changes:");
        let mut reqs = Vec::new();
        if i % 10 == 9 {
            reqs.push(format!("test: bench_test_{:03}", i - 1));
        }
        if i % 50 == 0 {
            reqs.push(format!("file: bench_file_{:02}", (i / 50) % 50));
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
    write(&salt.join("bench.sls"), &sls)?;
    let pillar = root.join("pillar");
    write(&pillar.join("top.sls"), "base:\n  '*':\n    - bench\n")?;
    write(
        &pillar.join("bench.sls"),
        "bench_out: /tmp/out\nbench:\n  motd: hello from the pillar\n  users: [alice, bob, carol]\n  limits:\n    nofile: 4096\n",
    )?;
    Ok(())
}

/// Commits `tree` to a new bare repository `bare` (branch `master`) and
/// returns its file:// URL.
fn commit_tree(tree: &Path, bare: &Path) -> anyhow::Result<String> {
    let git = |dir: &Path, args: &[&str]| -> anyhow::Result<()> {
        let status = std::process::Command::new("git")
            .current_dir(dir)
            .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
            .args(args)
            .status()?;
        anyhow::ensure!(status.success(), "git {args:?} failed in {}", dir.display());
        Ok(())
    };
    let bare_path = bare.display().to_string();
    git(tree, &["init", "-q", "-b", "master"])?;
    git(tree, &["add", "-A"])?;
    git(tree, &["commit", "-q", "-m", "profile tree"])?;
    git(tree, &["init", "-q", "--bare", &bare_path])?;
    git(tree, &["push", "-q", &bare_path, "master"])?;
    Ok(format!("file://{bare_path}"))
}

/// The same job twice more through `Compiler::answer`: the first (the
/// minions hold nothing) records each compile, the second (each minion
/// holds its bundle) is timed.
fn warm(
    compiler: &Compiler,
    job: &Job,
    n: usize,
    remote: Arc<dyn RemoteExec>,
) -> anyhow::Result<()> {
    let stats = BundleStats::default();
    let mut held = Vec::with_capacity(n);
    let t = Instant::now();
    let c = cpu();
    for m in 0..n {
        let id = format!("swarm-{m:05}");
        let grains = json!({"id": id, "os": "Debian", "os_family": "Debian"});
        let answer = BundleAnswer {
            have: None,
            packed: true,
            compress_above: 32 << 10,
        };
        let job = Job {
            jid: "20261126000000000001".into(),
            ..job.clone()
        };
        match compiler.answer(&id, &grains, &job, remote.clone(), &answer, &stats) {
            ReplyBody::PackedBundle { digest, .. } => held.push(digest),
            other => anyhow::bail!("{id}: not a bundle: {other:?}"),
        }
    }
    let (cold, cold_cpu) = (t.elapsed(), cpu() - c);
    let t = Instant::now();
    let c = cpu();
    for (m, digest) in held.into_iter().enumerate() {
        let id = format!("swarm-{m:05}");
        let grains = json!({"id": id, "os": "Debian", "os_family": "Debian"});
        let answer = BundleAnswer {
            have: Some(digest),
            packed: true,
            compress_above: 32 << 10,
        };
        let job = Job {
            jid: "20261126000000000002".into(),
            ..job.clone()
        };
        compiler.answer(&id, &grains, &job, remote.clone(), &answer, &stats);
    }
    let (warm, warm_cpu) = (t.elapsed(), cpu() - c);
    let per = |d: Duration| d.as_secs_f64() * 1000.0 / n as f64;
    println!(
        "answer: cold (compile, pack, zstd) {:.3} ms/minion (CPU {:.3}), warm {:.3} ms/minion (CPU {:.3}); {}",
        per(cold),
        per(cold_cpu),
        per(warm),
        per(warm_cpu),
        stats.snapshot(0)
    );
    Ok(())
}

/// The CPU time of one tree stamp (the walk each job makes of
/// `file_roots`), for the bench tree and for a generated tree of 10,000
/// files in 100 directories: whether the walk matters at fleet scale.
fn stamp_cost(bench_root: &Path) -> anyhow::Result<()> {
    let time = |files: &halite_gitfs::Fileserver| {
        // The first walk fills the kernel's caches, as the jobs before do.
        halite_master::compile_record::tree_stamp(files);
        let runs = 20;
        let (t, c) = (Instant::now(), cpu());
        for _ in 0..runs {
            halite_master::compile_record::tree_stamp(files);
        }
        (t.elapsed() / runs, (cpu() - c) / runs)
    };
    let roots = |dir: &Path| {
        halite_gitfs::Fileserver::roots_only(BTreeMap::from([(
            "base".to_string(),
            vec![dir.to_path_buf()],
        )]))
    };
    let (wall, cpu_time) = time(&roots(bench_root));
    println!(
        "tree stamp, bench tree: {:.3} ms (CPU {:.3})",
        wall.as_secs_f64() * 1000.0,
        cpu_time.as_secs_f64() * 1000.0
    );
    let big = tempfile::tempdir()?;
    for d in 0..100 {
        for f in 0..100 {
            write(&big.path().join(format!("d{d:03}/f{f:03}.sls")), "x: {}\n")?;
        }
    }
    let (wall, cpu_time) = time(&roots(big.path()));
    println!(
        "tree stamp, 10,000 files: {:.3} ms (CPU {:.3})",
        wall.as_secs_f64() * 1000.0,
        cpu_time.as_secs_f64() * 1000.0
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(100);
    if std::env::args().nth(2).as_deref() == Some("fresh") {
        halite_render::cache::RenderCache::global().set_enabled(false);
    }
    let dir = tempfile::tempdir()?;
    let by = if std::env::args().nth(3).as_deref() == Some("noid") {
        "os"
    } else {
        "id"
    };
    generate(dir.path(), by)?;
    if std::env::args().any(|a| a == "stamp") {
        stamp_cost(&dir.path().join("salt"))?;
    }
    let roots = BTreeMap::from([("base".to_string(), vec![dir.path().join("salt")])]);
    let pillar_roots = BTreeMap::from([("base".to_string(), vec![dir.path().join("pillar")])]);
    let gitfs = std::env::args().any(|a| a == "gitfs");
    let opts = if gitfs {
        let url = commit_tree(&dir.path().join("salt"), &dir.path().join("states.git"))?;
        json!({"fileserver_backend": ["gitfs"], "gitfs_remotes": [url], "renderer": "jinja|yaml"})
    } else {
        json!({"file_roots": {"base": [dir.path().join("salt")]}, "renderer": "jinja|yaml"})
    };
    let backends = halite_gitfs::Fileserver::from_opts(&opts, roots, &dir.path().join("cache"));
    if let Some(git) = backends.gitfs() {
        for (remote, error) in git.update(None) {
            if let Some(e) = error {
                anyhow::bail!("gitfs remote {remote} not fetched: {e}");
            }
        }
    }
    // `noreuse`: the pillar record off (issue 25, session 16: the before
    // row in the same binary).
    let reuse = !std::env::args().any(|a| a == "noreuse");
    let compiler = Compiler::new(
        opts,
        Arc::new(FileServer::with_backends(backends, 1 << 20)),
        pillar_roots,
    )
    .with_reuse(reuse)
    // `noidform`: the compile per id form off (issue 25, sessions 19, 21:
    // the before row in the same binary).
    .with_id_forms(!std::env::args().any(|a| a == "noidform"))
    // `nohighform`: every minion's high data built (issue 25, session 24:
    // the before row in the same binary).
    .with_high_forms(!std::env::args().any(|a| a == "nohighform"));
    let job = highstate_job("20261126000000000000");
    let remote: Arc<dyn RemoteExec> = Arc::new(NoRemote);
    let (mut compile, mut encode) = (Duration::ZERO, Duration::ZERO);
    let (mut compile_cpu, mut encode_cpu) = (Duration::ZERO, Duration::ZERO);
    let mut bytes = 0;
    for m in 0..n {
        let id = format!("swarm-{m:05}");
        let grains = json!({"id": id, "os": "Debian", "os_family": "Debian"});
        let (t, c) = (Instant::now(), cpu());
        let bundle = compiler.bundle(&id, &grains, &job, remote.clone());
        compile += t.elapsed();
        compile_cpu += cpu() - c;
        let (t, c) = (Instant::now(), cpu());
        bytes += halite_proto::frame::encode(&bundle)?.len();
        encode += t.elapsed();
        encode_cpu += cpu() - c;
    }
    let per = |d: Duration| d.as_secs_f64() * 1000.0 / n as f64;
    println!(
        "{n} minions: compile {:.2} ms/minion (CPU {:.2}), encode {:.2} ms/minion (CPU {:.2}), {} bytes/bundle",
        per(compile),
        per(compile_cpu),
        per(encode),
        per(encode_cpu),
        bytes / n.max(1)
    );
    warm(&compiler, &job, n, remote)?;
    println!(
        "render cache: {:?}",
        halite_render::cache::RenderCache::global().stats()
    );
    println!(
        "render memo: {:?}",
        halite_render::memo::RenderMemo::global().stats()
    );
    println!(
        "pillar compiles reused: {}",
        compiler.pillar_records().reused()
    );
    println!("compile per id form: {:?}", compiler.id_form_stats());
    println!("plans from forms: {:?}", compiler.high_form_stats());
    Ok(())
}
