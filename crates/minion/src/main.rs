//! `halite-minion`: the managed-host daemon (Salt's salt-minion), and
//! `--swarm N` for many identities in one process.

use std::path::PathBuf;

use clap::Parser;
use halite_minion::{daemon, swarm, MinionConfig};

/// halite-minion: runs the jobs its master publishes.
#[derive(Parser, Debug)]
#[command(name = "halite-minion", version)]
struct Cli {
    /// Configuration directory (holds `minion` and `minion.d/`).
    #[arg(short = 'c', long = "config-dir", default_value = halite_minion::config::DEFAULT_CONFIG_DIR)]
    config_dir: PathBuf,
    /// Log level (Salt's names: debug, info, warning, error...).
    #[arg(short = 'l', long = "log-level")]
    log_level: Option<String>,
    /// Log file (empty: stderr).
    #[arg(long = "log-file")]
    log_file: Option<String>,
    /// Swarm mode: host this many minion identities (for tests and benchmarks).
    #[arg(long = "swarm")]
    swarm: Option<usize>,
    /// Id prefix of swarm identities.
    #[arg(long = "swarm-prefix", default_value = "swarm-")]
    swarm_prefix: String,
}

halite_perf::fast_allocator!();

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let mut flags = serde_json::Map::new();
    if let Some(l) = cli.log_level {
        flags.insert("log_level".into(), l.into());
    }
    if let Some(f) = cli.log_file {
        flags.insert("log_file".into(), f.into());
    }
    let cfg = match MinionConfig::load(&cli.config_dir, &flags) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("halite-minion: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    halite_logging::init(&cfg.log_level, &cfg.log_file);
    // Sockets and job files: the common soft limit of 1,024 is a fleet's first wall.
    halite_transport::apply_max_open_files(cfg.max_open_files);
    let threads = if cli.swarm.is_some() { 2 } else { 1 };
    if cli.swarm.is_some() {
        // A swarm's identities free and rebuild the same megabytes (a
        // bundle, its graph, a return) job after job: given back at once
        // and faulted in again, they were ~12% of a warm swarm's CPU
        // (issue 25, session 22). A real minion keeps giving them back at
        // once (its idle memory, session 18).
        halite_perf::alloc::set_purge_delay(halite_perf::alloc::BURSTY_PURGE_DELAY_MS);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("halite-minion: cannot start the async runtime: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async move {
        let shutdown = halite_transport::Shutdown::new();
        shutdown.trigger_on(halite_logging::shutdown_signal());
        match cli.swarm {
            Some(n) => swarm::run(cfg, cli.swarm_prefix, n, shutdown).await,
            None => daemon::run(cfg, shutdown).await,
        }
    });
    // A job abandoned at shutdown still holds a blocking thread: the
    // runtime does not wait for it (its return is on disk already).
    runtime.shutdown_background();
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("halite-minion: {e:#}");
            tracing::error!("{e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
