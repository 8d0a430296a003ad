//! The named options of halite's performance machinery: from what size
//! work is split, into how many pieces, on how many threads. Each was
//! measured (docs/benchmarks.md); none changes what a run prints.

/// From this many items (states, returns) work is split: below it,
/// starting a thread (~50 µs) costs more than it saves. The compile's
/// pipeline and the JSON printer split from the same size.
pub const SPLIT_MIN: usize = 2048;

/// How many pieces the compile's pipeline cuts a large run into: small
/// enough that the helper thread waits little for the first.
pub const COMPILE_PIECES: usize = 16;

/// How many items a piece of printed JSON holds (~110 KB of state
/// returns): small enough that neither thread waits long for the other
/// and that the text in memory stays small however long the run (32
/// pieces at 10 000 states, 313 at 100 000), large enough that the
/// hand-offs do not count.
pub const JSON_PIECE_ITEMS: usize = 320;

/// How far the JSON printer's helper thread may run ahead of what the
/// calling thread has written, in pieces: bounds the text held in memory.
pub const JSON_AHEAD: usize = 2;

/// Below this size a YAML text is read on one thread (a thread costs more
/// than reading this much).
pub const YAML_SPLIT_MIN_BYTES: usize = 64 * 1024;

/// The most threads a large YAML text is read on.
pub const YAML_MAX_THREADS: usize = 4;
