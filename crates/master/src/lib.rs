//! halite-master: trusts minion keys, resolves targets, publishes jobs
//! (encrypted and signed), stores returns in the job cache before
//! acknowledging them, and serves the CLI and the event bus on a local socket.

pub mod admission;
pub mod compiler;
pub mod config;
pub mod events;
pub mod fileserver;
pub mod jobcache;
pub mod keys;
pub mod local;
pub mod server;
pub mod targeting;

pub use config::MasterConfig;
