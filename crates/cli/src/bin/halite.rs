//! `halite '<target>' <fun> [args]`: Salt's `salt` command for halite.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use halite_cli::remote::{self, cmd};

halite_perf::fast_allocator!(short_lived);

/// Run a function on the minions a target selects.
#[derive(Parser, Debug)]
#[command(name = "halite", version, allow_negative_numbers = true)]
struct Cli {
    /// Configuration directory of the master.
    #[arg(short = 'c', long = "config-dir", default_value = "/etc/halite")]
    config_dir: PathBuf,
    /// Target is a regular expression (Python re.match) on minion ids.
    #[arg(short = 'E', long = "pcre")]
    pcre: bool,
    /// Target is a comma-separated list of ids.
    #[arg(short = 'L', long = "list")]
    list: bool,
    /// Target is a grain: `key:glob`.
    #[arg(short = 'G', long = "grain")]
    grain: bool,
    /// Target is a grain with a regular expression value.
    #[arg(short = 'P', long = "grain-pcre")]
    grain_pcre: bool,
    /// Target is a pillar value: `key:glob` (the master's cache of each
    /// minion's compiled pillar).
    #[arg(short = 'I', long = "pillar")]
    pillar: bool,
    /// Target is a pillar value with a regular expression: `key:regex`.
    #[arg(short = 'J', long = "pillar-pcre")]
    pillar_pcre: bool,
    /// Target is an IP address or a network in CIDR notation, matched
    /// against the minions' `ipv4`/`ipv6` grains.
    #[arg(short = 'S', long = "ipcidr")]
    ipcidr: bool,
    /// Range expression (seco.range): not supported, refused by the master.
    #[arg(short = 'R', long = "range")]
    range: bool,
    /// Target is a compound expression.
    #[arg(short = 'C', long = "compound")]
    compound: bool,
    /// Target is a nodegroup name.
    #[arg(short = 'N', long = "nodegroup")]
    nodegroup: bool,
    /// Outputter: nested, json, yaml, txt, highstate, raw.
    #[arg(long = "out", visible_alias = "output")]
    out: Option<String>,
    /// Seconds to wait for the returns (default: the master's `timeout`).
    #[arg(short = 't', long = "timeout")]
    timeout: Option<u64>,
    /// Publish and print the jid without waiting.
    #[arg(long = "async")]
    asynchronous: bool,
    /// Print the jid before the returns.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Run in batches of N minions or N% of them.
    #[arg(short = 'b', long = "batch", visible_alias = "batch-size")]
    batch: Option<String>,
    /// Draw live progress of a state run on stderr (default: when stderr
    /// and stdout are terminals).
    #[arg(long = "progress", overrides_with = "no_progress")]
    progress: bool,
    /// Never draw live progress.
    #[arg(long = "no-progress", overrides_with = "progress")]
    no_progress: bool,
    #[command(flatten)]
    returners: halite_cli::returner_args::ReturnerArgs,
    /// The target.
    target: String,
    /// The function (`test.ping`).
    fun: String,
    /// Arguments: positional, then `key=value`.
    args: Vec<String>,
}

/// The call's arguments plus the returner keys the minion reads
/// (`halite_modules::returners::RET_KEY`...), as Salt's load carries
/// `ret`, `ret_config` and `ret_kwargs`.
fn with_returners(cli: &Cli) -> Vec<String> {
    use halite_modules::returners::{RET_CONFIG_KEY, RET_KEY, RET_KWARGS_KEY};
    let mut args = cli.args.clone();
    if let Some(r) = &cli.returners.returner {
        args.push(format!("{RET_KEY}={r}"));
        if let Some(c) = &cli.returners.return_config {
            args.push(format!("{RET_CONFIG_KEY}={c}"));
        }
        if let Some(k) = &cli.returners.return_kwargs {
            args.push(format!("{RET_KWARGS_KEY}={k}"));
        }
    }
    args
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let tgt_type = if cli.pcre {
        "pcre"
    } else if cli.list {
        "list"
    } else if cli.grain {
        "grain"
    } else if cli.grain_pcre {
        "grain_pcre"
    } else if cli.pillar {
        "pillar"
    } else if cli.pillar_pcre {
        "pillar_pcre"
    } else if cli.ipcidr {
        "ipcidr"
    } else if cli.range {
        "range"
    } else if cli.compound {
        "compound"
    } else if cli.nodegroup {
        "nodegroup"
    } else {
        "glob"
    };
    let result = remote::master_config(&cli.config_dir).and_then(|cfg| {
        let command = cmd::Command {
            tgt: cli.target.clone(),
            tgt_type: tgt_type.to_string(),
            fun: cli.fun.clone(),
            args: with_returners(&cli),
            out: cli.out.clone(),
            timeout: Duration::from_secs(cli.timeout.unwrap_or(cfg.timeout)),
            gather_job_timeout: Duration::from_secs(cfg.gather_job_timeout),
            asynchronous: cli.asynchronous,
            verbose: cli.verbose,
            batch: cli.batch.clone(),
            progress: if cli.progress {
                Some(true)
            } else if cli.no_progress {
                Some(false)
            } else {
                None
            },
        };
        cmd::run(
            &cfg,
            &command,
            &mut std::io::stdout().lock(),
            &mut std::io::stderr().lock(),
        )
    });
    match result {
        Ok(code) => std::process::ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            if let Some(refused) = e.downcast_ref::<cmd::Refused>() {
                // Salt prints the refusal as the command's output.
                println!("{refused}");
                return std::process::ExitCode::from(1);
            }
            eprintln!("ERROR: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
