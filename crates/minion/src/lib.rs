//! halite-minion: authenticates to its master (to every listed master at
//! once, or the next one of a failover list), runs the jobs published to it through halite-modules,
//! and returns results that survive a master restart. Also the swarm: many
//! minion identities in one process, for tests and benchmarks.

pub mod bundles;
pub mod caller;
pub mod channel;
pub mod config;
pub mod daemon;
pub mod decoded;
pub mod link;
pub mod mine;
pub mod orders;
mod packing;
pub mod remote_files;
pub mod replay;
pub mod runner;
pub mod running;
pub mod schedule;
pub mod store;
pub mod swarm;

pub use config::MinionConfig;
