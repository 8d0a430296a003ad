//! `halite-master`: the control daemon (Salt's salt-master).

use std::path::PathBuf;

use clap::Parser;
use halite_master::{server, MasterConfig};

/// halite-master: publishes jobs to minions and collects their returns.
#[derive(Parser, Debug)]
#[command(name = "halite-master", version)]
struct Cli {
    /// Configuration directory (holds `master` and `master.d/`).
    #[arg(short = 'c', long = "config-dir", default_value = halite_master::config::DEFAULT_CONFIG_DIR)]
    config_dir: PathBuf,
    /// Log level (Salt's names: debug, info, warning, error...).
    #[arg(short = 'l', long = "log-level")]
    log_level: Option<String>,
    /// Log file (empty: stderr).
    #[arg(long = "log-file")]
    log_file: Option<String>,
}

halite_perf::fast_allocator!(bursty);

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let mut flags = serde_json::Map::new();
    if let Some(l) = cli.log_level {
        flags.insert("log_level".into(), l.into());
    }
    if let Some(f) = cli.log_file {
        flags.insert("log_file".into(), f.into());
    }
    let cfg = match MasterConfig::load(&cli.config_dir, &flags) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("halite-master: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    halite_logging::init(&cfg.log_level, &cfg.log_file);
    // Sockets and job files: the common soft limit of 1,024 is a fleet's first wall.
    halite_transport::apply_max_open_files(cfg.max_open_files);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.worker_threads.max(1))
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("halite-master: cannot start the async runtime: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async move {
        let shutdown = halite_transport::Shutdown::new();
        shutdown.trigger_on(halite_logging::shutdown_signal());
        server::run(cfg, shutdown).await
    });
    // A compile abandoned at the end of the grace still holds a blocking thread.
    runtime.shutdown_background();
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("halite-master: {e:#}");
            tracing::error!("{e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
