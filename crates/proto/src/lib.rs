//! halite's wire: everything a master and a minion must agree on, and
//! nothing that touches a socket.
//!
//! - [`msg`]: the messages (msgpack via rmp-serde) and their envelopes;
//! - [`frame`]: encoding with a size bound, so garbage or oversized frames
//!   become errors, never allocations or panics;
//! - [`packed`]: a value kept as its msgpack bytes, checked and
//!   transcoded without being built;
//! - [`bundle`]: a compiled bundle packed for the wire (digest, zstd);
//! - [`crypto`]: Ed25519 identities, the X25519 handshake signed by both
//!   identities, HKDF-SHA256 session keys, AES-256-GCM with counter nonces,
//!   and publications encrypted with the publish key and signed by the master;
//! - [`jid`], [`tags`], [`id`]: Salt's job ids, event tags and the minion-id
//!   rules applied before an id ever touches a path.

pub mod bundle;
pub mod crypto;
pub mod cursor;
pub mod frame;
pub mod id;
pub mod jid;
pub mod keyfile;
pub mod mine;
pub mod msg;
pub mod packed;
pub mod tags;
pub mod testing;

pub use crypto::{CryptoError, Identity, PublicKey};
pub use frame::{
    decode, encode, value_depth, FrameError, MAX_DECODE_DEPTH, MAX_FRAME_BYTES, MAX_VALUE_DEPTH,
};
pub use id::{validate_minion_id, InvalidMinionId};
pub use jid::JidGenerator;
