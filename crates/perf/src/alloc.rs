//! The global allocator every halite binary installs: mimalloc, with the
//! settings that suit a daemon or a short-lived command
//! ([`crate::fast_allocator!`]).

#[doc(hidden)]
pub use mimalloc;

extern "C" {
    // mimalloc's C API (in the library the `mimalloc` crate links).
    fn mi_malloc(size: usize) -> *mut std::ffi::c_void;
    fn mi_zalloc(size: usize) -> *mut std::ffi::c_void;
    fn mi_realloc(p: *mut std::ffi::c_void, newsize: usize) -> *mut std::ffi::c_void;
    fn mi_free(p: *mut std::ffi::c_void);
}

/// What runs when an allocation fails, just before the process aborts
/// (halite-logging sets it to write a line to `log_file`): a `fn(usize)`
/// stored as a pointer, null for none. It must not allocate.
static FAILURE_HOOK: std::sync::atomic::AtomicPtr<()> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// Sets what runs, without allocating, when an allocation of `size` bytes
/// fails: a daemon's abort is otherwise written only to stderr.
pub fn set_failure_hook(hook: fn(usize)) {
    FAILURE_HOOK.store(hook as *mut (), std::sync::atomic::Ordering::Release);
}

/// Calls the failure hook, if one is set.
#[cold]
#[inline(never)]
fn report_failure(size: usize) {
    let hook = FAILURE_HOOK.load(std::sync::atomic::Ordering::Acquire);
    if !hook.is_null() {
        // SAFETY: only `set_failure_hook` stores a non-null value, and it
        // stores a `fn(usize)`.
        let hook: fn(usize) = unsafe { std::mem::transmute::<*mut (), fn(usize)>(hook) };
        hook(size);
    }
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
        let p = if layout.align() <= WORD_ALIGN {
            mi_malloc(layout.size()).cast()
        } else {
            mimalloc::MiMalloc.alloc(layout)
        };
        if p.is_null() {
            report_failure(layout.size());
        }
        p
    }
    #[inline]
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = if layout.align() <= WORD_ALIGN {
            mi_zalloc(layout.size()).cast()
        } else {
            mimalloc::MiMalloc.alloc_zeroed(layout)
        };
        if p.is_null() {
            report_failure(layout.size());
        }
        p
    }
    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: std::alloc::Layout) {
        mi_free(ptr.cast());
    }
    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        let p = if layout.align() <= WORD_ALIGN {
            mi_realloc(ptr.cast(), new_size).cast()
        } else {
            mimalloc::MiMalloc.realloc(ptr, layout, new_size)
        };
        if p.is_null() {
            report_failure(new_size);
        }
        p
    }
}

/// mimalloc's option indices (`mi_option_t`, the same in mimalloc v2
/// and v3) that [`crate::fast_allocator!`] sets.
const MI_OPTION_ARENA_EAGER_COMMIT: std::os::raw::c_int = 4;
/// See [`MI_OPTION_ARENA_EAGER_COMMIT`].
const MI_OPTION_PURGE_DELAY: std::os::raw::c_int = 15;

extern "C" {
    /// mimalloc's `mi_option_set` (in the library the `mimalloc` crate links).
    fn mi_option_set(option: std::os::raw::c_int, value: std::os::raw::c_long);
    /// libc's `getenv`: reads the environment without allocating (this
    /// runs before the first allocation).
    fn getenv(name: *const std::os::raw::c_char) -> *const std::os::raw::c_char;
}

/// Sets one mimalloc option, unless the operator set it through its
/// `MIMALLOC_*` variable (mimalloc reads that itself when the option is
/// left unset): a deployment can retune the allocator without a rebuild,
/// and a benchmark can compare settings with one binary.
fn set_unless_in_env(
    option: std::os::raw::c_int,
    env: &std::ffi::CStr,
    value: std::os::raw::c_long,
) {
    // SAFETY: `env` is NUL-terminated; getenv only reads the environment
    // (nothing else writes it this early), and mi_option_set stores an
    // integer.
    unsafe {
        if getenv(env.as_ptr()).is_null() {
            mi_option_set(option, value);
        }
    }
}

/// How long a bursty daemon's freed pages stay committed before they go
/// back to the system, in ms (mimalloc v3's own default).
pub const BURSTY_PURGE_DELAY_MS: std::os::raw::c_long = 1000;

/// Sets mimalloc's options before the first allocation (called from the
/// ELF constructor [`crate::fast_allocator!`] installs): arenas committed
/// as they are used, and freed pages given back to the system after
/// `purge_delay_ms` milliseconds (0: at once; -1: never).
/// `MIMALLOC_ARENA_EAGER_COMMIT` and `MIMALLOC_PURGE_DELAY` in the
/// environment win over these.
#[doc(hidden)]
pub fn tune(purge_delay_ms: std::os::raw::c_long) {
    set_unless_in_env(
        MI_OPTION_ARENA_EAGER_COMMIT,
        c"MIMALLOC_ARENA_EAGER_COMMIT",
        0,
    );
    set_unless_in_env(
        MI_OPTION_PURGE_DELAY,
        c"MIMALLOC_PURGE_DELAY",
        purge_delay_ms,
    );
}

/// Sets how long freed pages stay committed before they go back to the
/// system, in ms, while the process runs (a `halite-minion --swarm`, whose
/// binary purges at once for a real minion), unless
/// `MIMALLOC_PURGE_DELAY` is in the environment: the operator's setting wins.
pub fn set_purge_delay(purge_delay_ms: std::os::raw::c_long) {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mi_option_set stores an integer that mimalloc reads
        // when it next decides to purge.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, purge_delay_ms) }
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
///   at once, so a daemon's resident memory follows what it holds (a
///   `halite-minion --swarm` sets [`BURSTY_PURGE_DELAY_MS`] when it starts,
///   [`set_purge_delay`]: its identities' jobs churn the same pages);
/// - `fast_allocator!(bursty)` (the master): freed pages are given back
///   once they have stayed unused for [`BURSTY_PURGE_DELAY_MS`]. Its
///   compile frees and rebuilds the same few megabytes for every minion
///   of a job; giving them back at once and faulting them in again was
///   ~10% of the master's CPU in a cold 1,000-minion highstate (issue 25,
///   session 17). After a job its resident memory falls back within
///   that delay, at the next allocation;
/// - `fast_allocator!(short_lived)` (`halite-call`, `halite`): freed pages
///   are kept for reuse until the process exits. Giving them back and
///   faulting them in again was a third of a 10 000-state `halite-call`
///   (`madvise` and page faults: 150 ms against 90 ms).
///
/// `MIMALLOC_PURGE_DELAY` / `MIMALLOC_ARENA_EAGER_COMMIT` in the
/// environment override these settings ([`tune`]).
///
/// Invoke once, at the top level of each binary.
#[macro_export]
macro_rules! fast_allocator {
    () => {
        $crate::fast_allocator!(@tuned 0);
    };
    (bursty) => {
        $crate::fast_allocator!(@tuned $crate::alloc::BURSTY_PURGE_DELAY_MS);
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
            extern "C" fn tune() {
                $crate::alloc::tune($purge_delay);
            }
            tune
        };
    };
}
