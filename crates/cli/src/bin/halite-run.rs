//! `halite-run`: Salt's `salt-run` for the runners halite has
//! (docs/orchestration.md lists them).

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use halite_cli::remote::{self, run};

/// Run a master-side function: state.orchestrate, jobs.*, manage.*,
/// fileserver.*, cache.*, event.send, salt.cmd, state.event.
#[derive(Parser, Debug)]
#[command(name = "halite-run", version, allow_negative_numbers = true)]
struct Cli {
    /// Configuration directory of the master.
    #[arg(short = 'c', long = "config-dir", default_value = "/etc/halite")]
    config_dir: PathBuf,
    /// Outputter: nested, json, yaml, txt.
    #[arg(long = "out", visible_alias = "output")]
    out: Option<String>,
    /// Seconds to wait for minions (manage.*).
    #[arg(short = 't', long = "timeout")]
    timeout: Option<u64>,
    /// state.event: indent and sort the JSON (same as `pretty=True`).
    #[arg(long = "pretty")]
    pretty: bool,
    /// state.event: stop after N events (same as `count=N`).
    #[arg(long = "count")]
    count: Option<u64>,
    /// The runner function.
    fun: String,
    /// Its arguments: positional, then `key=value`.
    args: Vec<String>,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let mut args = cli.args.clone();
    if cli.pretty {
        args.push("pretty=True".into());
    }
    if let Some(n) = cli.count {
        args.push(format!("count={n}"));
    }
    let result = remote::master_config(&cli.config_dir).and_then(|cfg| {
        let call = run::RunnerCall {
            fun: cli.fun.clone(),
            args,
            out: cli.out.clone(),
            timeout: Duration::from_secs(cli.timeout.unwrap_or(cfg.timeout)),
        };
        run::run(&cfg, &call, &mut std::io::stdout().lock())
    });
    match result {
        Ok(code) => std::process::ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("ERROR: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
