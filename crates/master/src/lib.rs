//! halite-master: trusts minion keys, resolves targets, publishes jobs
//! (encrypted and signed), stores returns in the job cache before
//! acknowledging them, and serves the CLI and the event bus on a local socket.

pub mod admission;
pub mod answering;
pub mod bundles;
pub mod compile_record;
pub mod compiler;
pub mod events;
pub mod fileserver;
pub mod git_sources;
pub mod id_form_bundle;
pub mod intake;
pub mod job_load;
pub mod local_fire;
pub mod mine;
pub mod minion_events;
pub mod minion_records;
pub mod pillar_cache;
pub mod pillar_record;
pub mod publisher_acl;
pub mod reactor;
pub mod read_bound;
pub mod redelivery;
pub mod render_calls;
pub mod reply_limits;
pub mod return_writer;
pub mod server;
pub mod spill;
pub mod targeting;
mod test_hold;
pub mod wal_checkpoint;
pub mod workers;

/// The master's config, key store, job cache and local socket protocol
/// live in `halite-client`, shared with the CLI tools.
pub use halite_client::{config, jobcache, keys, local, MasterConfig};
