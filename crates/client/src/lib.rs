//! The client side of halite-master: what `halite`, `halite-key` and
//! `halite-run` need to talk to a running master or read its state on
//! disk, without linking the daemon (its ZeroMQ loops, compiler and file
//! server).
//!
//! - [`config`]: the master's config file, for the socket, key and cache
//!   paths;
//! - [`local`]: the local socket protocol (requests, replies, framing) and
//!   a blocking [`local::LocalClient`];
//! - [`keys`]: the minion key store under `pki_dir` that `halite-key`
//!   manages;
//! - [`jobcache`]: the job cache that `halite-run jobs.*` reads;
//! - [`job`]: publish one job and wait for its returns (runners,
//!   orchestration).
//!
//! The master uses the same modules, so both sides agree by construction.

pub mod config;
pub mod job;
pub mod jobcache;
pub mod keys;
pub mod local;

pub use config::MasterConfig;
