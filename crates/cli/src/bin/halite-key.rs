//! `halite-key`: Salt's `salt-key` for halite's minion keys.

use std::path::PathBuf;

use clap::Parser;
use halite_cli::remote::{self, key};

/// Manage minion keys: list, accept, reject, delete, fingerprints.
#[derive(Parser, Debug)]
#[command(name = "halite-key", version)]
struct Cli {
    /// Configuration directory of the master.
    #[arg(short = 'c', long = "config-dir", default_value = "/etc/halite")]
    config_dir: PathBuf,
    /// List every key.
    #[arg(short = 'L', long = "list-all")]
    list_all: bool,
    /// List the keys of one status: acc, pre (un), rej, den, all.
    #[arg(short = 'l', long = "list")]
    list: Option<String>,
    /// Accept the pending keys matching this glob.
    #[arg(short = 'a', long = "accept")]
    accept: Option<String>,
    /// Accept every pending key.
    #[arg(short = 'A', long = "accept-all")]
    accept_all: bool,
    /// Reject the pending keys matching this glob.
    #[arg(short = 'r', long = "reject")]
    reject: Option<String>,
    /// Reject every pending key.
    #[arg(short = 'R', long = "reject-all")]
    reject_all: bool,
    /// Delete the keys matching this glob.
    #[arg(short = 'd', long = "delete")]
    delete: Option<String>,
    /// Delete every key.
    #[arg(short = 'D', long = "delete-all")]
    delete_all: bool,
    /// Print the fingerprints of the keys matching this glob.
    #[arg(short = 'f', long = "finger")]
    finger: Option<String>,
    /// Print every fingerprint, the master's included.
    #[arg(short = 'F', long = "finger-all")]
    finger_all: bool,
    /// Answer yes to every question.
    #[arg(short = 'y', long = "yes")]
    yes: bool,
    /// Also act on accepted keys (reject).
    #[arg(long = "include-accepted")]
    include_accepted: bool,
    /// Also act on rejected keys (accept).
    #[arg(long = "include-rejected")]
    include_rejected: bool,
    /// Also act on denied keys.
    #[arg(long = "include-denied")]
    include_denied: bool,
    /// Act on keys of every status.
    #[arg(long = "include-all")]
    include_all: bool,
    /// Outputter: json, or Salt's key listing by default.
    #[arg(long = "out", visible_alias = "output")]
    out: Option<String>,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let action = if let Some(id) = cli.accept.clone() {
        key::KeyAction::Accept(id)
    } else if cli.accept_all {
        key::KeyAction::Accept("*".into())
    } else if let Some(id) = cli.reject.clone() {
        key::KeyAction::Reject(id)
    } else if cli.reject_all {
        key::KeyAction::Reject("*".into())
    } else if let Some(id) = cli.delete.clone() {
        key::KeyAction::Delete(id)
    } else if cli.delete_all {
        key::KeyAction::Delete("*".into())
    } else if let Some(id) = cli.finger.clone() {
        key::KeyAction::Finger(id)
    } else if cli.finger_all {
        key::KeyAction::Finger("*".into())
    } else if let Some(which) = cli.list.clone() {
        key::KeyAction::List(which)
    } else {
        key::KeyAction::List("all".into())
    };
    let opts = key::KeyOptions {
        yes: cli.yes,
        json: cli.out.as_deref() == Some("json"),
        include_accepted: cli.include_accepted || cli.include_all,
        include_rejected: cli.include_rejected || cli.include_all,
        include_denied: cli.include_denied || cli.include_all,
    };
    let _ = cli.list_all;
    let result = remote::master_config(&cli.config_dir).and_then(|cfg| {
        key::run(
            &cfg,
            &action,
            &opts,
            &mut std::io::stdin().lock(),
            &mut std::io::stdout().lock(),
        )
    });
    match result {
        Ok(code) => std::process::ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("ERROR: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
