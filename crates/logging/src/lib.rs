//! One logging setup for every halite binary: Salt's `log_level` names
//! mapped onto tracing, written to `log_file` or stderr with the secrets
//! the process knows masked ([`redact`]).

use std::os::fd::IntoRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

use tracing_subscriber::EnvFilter;

pub mod redact;

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
/// empty or not writable. `RUST_LOG` overrides the level. Panics and
/// failed allocations (which abort) are written to `log_file` as well as
/// stderr.
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
            // Logs name minions, jobs and errors: not for every local user.
            use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(log_file)
                .ok()?;
            if let Ok(meta) = file.metadata() {
                let mode = meta.permissions().mode();
                if mode & 0o077 != 0 {
                    let _ = file.set_permissions(std::fs::Permissions::from_mode(mode & 0o700));
                }
            }
            Some(file)
        })
        .flatten();
    if let Some(crash) = file.as_ref().and_then(|f| f.try_clone().ok()) {
        // Kept open for the life of the process: an abort may come at any time.
        CRASH_FD.store(crash.into_raw_fd(), Ordering::Release);
    }
    let _ = match file {
        // Every line is masked of the secrets this process knows (redact.rs).
        Some(f) => builder
            .with_writer(redact::Masking(std::sync::Mutex::new(f)))
            .try_init(),
        None => builder
            .with_writer(redact::Masking(std::io::stderr))
            .try_init(),
    };
    install_panic_hook();
    halite_perf::alloc::set_failure_hook(report_alloc_failure);
}

/// The descriptor of `log_file` for crash reports (-1: none, stderr only).
/// A raw descriptor, written with `write(2)`, so a report needs no lock
/// (the panic may come from inside the logger) and, for a failed
/// allocation, no memory.
static CRASH_FD: AtomicI32 = AtomicI32::new(-1);

/// Writes `bytes` to the crash descriptor, if any; best effort.
fn write_crash(bytes: &[u8]) {
    let fd = CRASH_FD.load(Ordering::Acquire);
    if fd < 0 {
        return;
    }
    let mut rest = bytes;
    while !rest.is_empty() {
        // SAFETY: `fd` is a descriptor this process opened and never closes;
        // `rest` is a valid buffer of `rest.len()` bytes.
        let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
        let Ok(n) = usize::try_from(n) else { return };
        if n == 0 {
            return;
        }
        rest = &rest[n..];
    }
}

/// Sends every panic's message and place to `log_file` too (a daemon's
/// stderr is often nowhere), then lets the default hook print it.
fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("unnamed");
        write_crash(
            format!(
                "CRITICAL {} halite: thread '{name}' panicked: {info}; the daemon may abort (please report this)\n",
                unix_time()
            )
            .as_bytes(),
        );
        default(info);
    }));
}

/// Seconds since the epoch, for crash lines (no time crate here).
fn unix_time() -> String {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| format!("unix time {}", d.as_secs()))
        .unwrap_or_default()
}

/// A failed allocation of `size` bytes is about to abort the process:
/// says so in `log_file`, without allocating.
#[cold]
#[inline(never)]
fn report_alloc_failure(size: usize) {
    let mut buf = [0u8; 96];
    let prefix = b"CRITICAL halite: memory allocation of ";
    let suffix = b" bytes failed; aborting\n";
    let mut digits = [0u8; 20];
    let mut n = size;
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let parts: [&[u8]; 3] = [prefix, &digits[i..], suffix];
    let mut len = 0;
    for part in parts {
        buf[len..len + part.len()].copy_from_slice(part);
        len += part.len();
    }
    write_crash(&buf[..len]);
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
