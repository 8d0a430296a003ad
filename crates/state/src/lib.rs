//! The state engine.
//!
//! It takes rendered SLS (high data), compiles it into low chunks, orders
//! them, resolves requisites and runs each chunk through a pluggable
//! [`StateModule`], then shapes the return exactly as `salt-call --out=json`
//! does. It does no I/O of its own beyond what the [`StateEnv`] it is handed
//! does, so it is tested without a network or a master.

pub mod accumulators;
pub mod chunk;
pub mod compile;
pub mod dict;
pub mod graph;
pub mod high;
pub mod id_bytes;
pub mod id_memo;
pub mod module;
pub mod origins;
pub mod pipeline;
pub mod requisite;
pub mod ret;
pub mod run;
pub mod target;
pub mod top;
pub mod value;

/// Salt's `fnmatch`, from the leaf crate of Salt's rules (re-exported for
/// the crates that reach it through the engine).
pub use halite_salt_rules::fnmatch;
/// Salt's truthiness, from the leaf crate of Salt's rules.
pub use halite_salt_rules::truthy;

pub use accumulators::Accumulators;
pub use chunk::LowChunk;
pub use dict::SmallDict;
pub use high::{HighBuilder, Matches, RenderedSls, SlsSource};
pub use module::{
    progress_data, strip_salt_url, type_name, CmdOptions, CmdOutput, CmdTimeout, FileClient,
    FileClientError, StateCall, StateEnv, StateError, StateFunction, StateHandler, StateModule,
    StateModules, StateTable,
};
pub use pipeline::{call_high, compile_chunks, prepare_high, Compiled};
pub use ret::{state_tag, StateResult};
pub use run::{RunOptions, Running};
pub use value::{Map, Value};
