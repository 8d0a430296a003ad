//! How halite uses the machine, in one place.
//!
//! The business logic (compiling states, reading YAML, printing a run's
//! JSON) says *what* may be done in pieces; this crate decides *how*: the
//! global allocator and its settings ([`fast_allocator!`]), the named
//! sizes and thread counts ([`options`]), and the helpers that spread
//! pieces over threads while keeping their order ([`pipeline`],
//! [`ordered`], [`scoped`]). The vendored serde_json (`vendor/`, see
//! docs/compact-map.md) is the one piece of this machinery that lives
//! outside: it replaces a crate rather than calling one.
//!
//! Every helper gives the same result on one core as on many: pieces are
//! always taken in order.

pub mod alloc;
pub mod options;
pub mod ordered;
pub mod pipeline;
pub mod scoped;

#[doc(hidden)]
pub use alloc::FastAllocator;

use std::sync::OnceLock;

/// The threads this process may run at once (the CPU affinity counts, so
/// `taskset -c 0` says 1), looked up once.
fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Whether the machine has a second core for a helper thread.
pub fn second_core() -> bool {
    cores() > 1
}

/// How many threads to use for work that scales up to `max` threads: the
/// machine's cores, at most `max`, at least one.
pub fn threads_up_to(max: usize) -> usize {
    cores().min(max).max(1)
}
