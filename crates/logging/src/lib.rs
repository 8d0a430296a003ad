//! One logging setup for every halite binary: Salt's `log_level` names
//! mapped onto tracing, written to `log_file` or stderr.

use std::path::Path;

use tracing_subscriber::EnvFilter;

/// Salt's level names mapped onto tracing's.
pub fn tracing_level(salt_level: &str) -> &'static str {
    match salt_level.to_ascii_lowercase().as_str() {
        "all" | "garbage" | "trace" | "profile" => "trace",
        "debug" => "debug",
        "info" => "info",
        "warning" | "warn" => "warn",
        "error" | "critical" => "error",
        "quiet" => "off",
        _ => "warn",
    }
}

/// Installs the global subscriber: `log_file` (appended) or stderr when
/// empty or not writable. `RUST_LOG` overrides the level.
pub fn init(log_level: &str, log_file: &str) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(tracing_level(log_level)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false);
    let file = (!log_file.is_empty())
        .then(|| {
            if let Some(parent) = Path::new(log_file).parent() {
                let _ = std::fs::create_dir_all(parent);
            }
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log_file)
                .ok()
        })
        .flatten();
    let _ = match file {
        Some(f) => builder.with_writer(std::sync::Mutex::new(f)).try_init(),
        None => builder.with_writer(std::io::stderr).try_init(),
    };
}

/// Resolves on SIGTERM or SIGINT: the daemons' shutdown. SIGHUP (sent by
/// `systemctl reload` or a closing terminal) is logged and ignored rather
/// than killing the daemon; the configuration is read at start only.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        return std::future::pending().await;
    };
    let mut hup = signal(SignalKind::hangup()).ok();
    loop {
        tokio::select! {
            _ = term.recv() => return,
            _ = tokio::signal::ctrl_c() => return,
            Some(()) = async { match hup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => {
                tracing::warn!("SIGHUP ignored: restart the daemon to read its configuration again");
            }
        }
    }
}
