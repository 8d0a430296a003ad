//! `halite-api`: salt-api's REST interface (`rest_cherrypy`) for halite.

use std::path::PathBuf;

use clap::Parser;
use halite_api::config::ApiConfig;
use halite_api::service::Service;
use halite_client::MasterConfig;

/// halite-api: Salt's REST API with external_auth, over the master's local socket.
#[derive(Parser, Debug)]
#[command(name = "halite-api", version)]
struct Cli {
    /// Configuration directory (holds `master` and `master.d/`).
    #[arg(short = 'c', long = "config-dir", default_value = halite_client::config::DEFAULT_CONFIG_DIR)]
    config_dir: PathBuf,
    /// Log level (Salt's names: debug, info, warning, error...).
    #[arg(short = 'l', long = "log-level")]
    log_level: Option<String>,
    /// Log file (empty: stderr); default the master config's `api_logfile`.
    #[arg(long = "log-file")]
    log_file: Option<String>,
    /// List the live tokens (user, eauth, start, expiry) and exit.
    #[arg(long = "list-tokens")]
    list_tokens: bool,
    /// Revoke every token of this user and exit.
    #[arg(long = "revoke-user", value_name = "USER")]
    revoke_user: Option<String>,
    /// Revoke this token and exit.
    #[arg(long = "revoke-token", value_name = "TOKEN")]
    revoke_token: Option<String>,
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("halite-api: {e:#}");
            tracing::error!("{e:#}");
            std::process::ExitCode::from(1)
        }
    }
}

fn run() -> anyhow::Result<std::process::ExitCode> {
    let cli = Cli::parse();
    let master = MasterConfig::load(&cli.config_dir, &serde_json::Map::new())?;
    let level = cli
        .log_level
        .clone()
        .or_else(|| {
            master
                .extra
                .get("api_log_level")
                .and_then(|v| v.as_str())
                .map(String::from)
        })
        .unwrap_or_else(|| master.log_level.clone());
    let file = cli
        .log_file
        .clone()
        .or_else(|| {
            master
                .extra
                .get("api_logfile")
                .and_then(|v| v.as_str())
                .map(String::from)
        })
        .unwrap_or_default();
    let admin = cli.list_tokens || cli.revoke_user.is_some() || cli.revoke_token.is_some();
    if !admin {
        halite_logging::init(&level, &file);
    }
    let cfg = ApiConfig::from_master(master)?;
    let svc = Service::new(cfg)?;
    if admin {
        if let Some(user) = &cli.revoke_user {
            println!(
                "revoked {} token(s) of {user}",
                svc.tokens.revoke_user(user)?
            );
        }
        if let Some(token) = &cli.revoke_token {
            let gone = svc.tokens.remove(token)?;
            println!(
                "{}",
                if gone {
                    "token revoked"
                } else {
                    "no such token"
                }
            );
        }
        if cli.list_tokens {
            for t in svc.tokens.list()? {
                println!(
                    "{}\t{}\tstart={:.0}\texpire={:.0}",
                    t.name, t.eauth, t.start, t.expire
                );
            }
        }
        return Ok(std::process::ExitCode::SUCCESS);
    }
    let purged = svc.tokens.purge_expired()?;
    tracing::info!(purged, "expired tokens dropped");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(1024)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        tokio::select! {
            r = halite_api::server::serve(svc) => r,
            _ = halite_logging::shutdown_signal() => Ok(()),
        }
    })?;
    Ok(std::process::ExitCode::SUCCESS)
}
