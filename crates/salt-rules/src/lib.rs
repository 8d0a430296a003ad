//! Salt's small rules, written once for all of halite.
//!
//! Salt is Python: its globs are `fnmatch`, its messages print values with
//! `repr()`/`str()`, its flags follow Python truthiness, its commands are
//! quoted with `shlex`. halite reproduces each rule in exactly one place,
//! here, so every crate (the wire, the renderer, the state engine, the
//! modules, the CLI) gives the same answer. This crate depends on nothing
//! of halite's, so any crate may use it without pulling in an engine.

pub mod archive_path;
pub mod colors;
pub mod fnmatch;
pub mod jid;
pub mod mine;
pub mod nested;
pub mod pyfmt;
pub mod pyyaml;
pub mod secret;
pub mod shell;
pub mod truth;

pub use fnmatch::{fnmatch, is_pattern, Glob};
pub use truth::truthy;

/// Salt data: JSON-like values whose maps keep insertion order.
pub type Value = serde_json::Value;
/// An insertion-ordered map of Salt data.
pub type Map = serde_json::Map<String, Value>;
