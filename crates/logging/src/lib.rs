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

#[doc(hidden)]
pub use mimalloc;

extern "C" {
    // mimalloc's C API (in the library the `mimalloc` crate links).
    fn mi_malloc(size: usize) -> *mut std::ffi::c_void;
    fn mi_zalloc(size: usize) -> *mut std::ffi::c_void;
    fn mi_realloc(p: *mut std::ffi::c_void, newsize: usize) -> *mut std::ffi::c_void;
    fn mi_free(p: *mut std::ffi::c_void);
}

/// Every mimalloc block is aligned to at least a machine word.
const WORD_ALIGN: usize = std::mem::size_of::<usize>();

/// mimalloc as the global allocator, taking its plain (unaligned) entry
/// points for the word-aligned requests that are nearly all of a run's
/// allocations. The `mimalloc` crate sends every request through the
/// aligned ones, whose extra checks cost about as much again as the
/// allocation (~30 instructions each, ~450 000 allocations for a
/// 10 000-state run); larger alignments still go to them.
#[doc(hidden)]
pub struct FastAllocator;

// SAFETY: requests aligned to at most a word go to mi_malloc/mi_zalloc/
// mi_realloc, whose blocks are always word aligned; others go to the
// `mimalloc` crate's aligned calls. Every block is freed with mi_free,
// which frees both kinds.
unsafe impl std::alloc::GlobalAlloc for FastAllocator {
    #[inline]
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        if layout.align() <= WORD_ALIGN {
            mi_malloc(layout.size()).cast()
        } else {
            mimalloc::MiMalloc.alloc(layout)
        }
    }
    #[inline]
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        if layout.align() <= WORD_ALIGN {
            mi_zalloc(layout.size()).cast()
        } else {
            mimalloc::MiMalloc.alloc_zeroed(layout)
        }
    }
    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: std::alloc::Layout) {
        mi_free(ptr.cast());
    }
    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= WORD_ALIGN {
            mi_realloc(ptr.cast(), new_size).cast()
        } else {
            mimalloc::MiMalloc.realloc(ptr, layout, new_size)
        }
    }
}

/// Makes mimalloc the binary's global allocator. A state run builds and
/// frees a few small maps and strings per state (millions for a big tree;
/// glibc malloc/free were a quarter of a 10k-state run and ~40% of the
/// master's CPU when it compiled for 1000 minions), which mimalloc serves
/// in a fraction of the time.
///
/// Its arenas are committed as they are used (eagerly committed, they get
/// transparent huge pages: 67 MB instead of 48 MB peak RSS for 10 000
/// states). What happens to freed pages depends on the process:
/// - `fast_allocator!()` (the daemons): freed pages go back to the system
///   at once, so a daemon's resident memory follows what it holds;
/// - `fast_allocator!(short_lived)` (`halite-call`, `halite`): freed pages
///   are kept for reuse until the process exits. Giving them back and
///   faulting them in again was a third of a 10 000-state `halite-call`
///   (`madvise` and page faults: 150 ms against 90 ms).
///
/// Invoke once, at the top level of each binary.
#[macro_export]
macro_rules! fast_allocator {
    () => {
        $crate::fast_allocator!(@tuned 0);
    };
    (short_lived) => {
        $crate::fast_allocator!(@tuned -1);
    };
    (@tuned $purge_delay:expr) => {
        #[global_allocator]
        static GLOBAL: $crate::FastAllocator = $crate::FastAllocator;

        /// Runs before `main` (an ELF constructor), and so before the first
        /// allocation reserves mimalloc's arena.
        #[cfg(target_os = "linux")]
        #[used]
        #[link_section = ".init_array"]
        static TUNE_ALLOCATOR: extern "C" fn() = {
            extern "C" {
                /// mimalloc's `mi_option_set` (in the library the `mimalloc` crate links).
                fn mi_option_set(option: std::os::raw::c_int, value: std::os::raw::c_long);
            }
            /// `mi_option_arena_eager_commit` and `mi_option_purge_delay`
            /// (the same indices in mimalloc v2 and v3).
            extern "C" fn tune() {
                // SAFETY: sets two integer options; nothing is allocated yet.
                unsafe {
                    mi_option_set(4, 0);
                    mi_option_set(15, $purge_delay);
                }
            }
            tune
        };
    };
}
