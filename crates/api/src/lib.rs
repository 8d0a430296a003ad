//! halite-api: salt-api's `rest_cherrypy` REST interface for halite, so
//! pepper and the other clients of salt-api work unchanged. A process of
//! its own that reaches the master through its local socket (as the
//! `halite` CLI does); docs/api.md says why.
//!
//! - [`config`]: `rest_cherrypy` and the eauth keys of the master config;
//! - [`eauth`]: `pam`, `file` and `auto` authentication;
//! - [`acl`]: Salt's ACL grammar (the `halite-acl` crate, shared with
//!   the master's `publisher_acl`);
//! - [`tokens`]: the token store (SQLite in the master's cachedir);
//! - [`service`]: login, token checks, the lowstate clients;
//! - [`wheel`]: the wheel `key.*` functions (the runners, `jobs.*` among
//!   them, are halite-runners');
//! - [`format`]: JSON/YAML/form bodies and `Accept` negotiation;
//! - [`ratelimit`]: failed-login throttling;
//! - [`server`]: the URLs, on axum;
//! - [`console`]: the web console under `/console`.

pub use halite_acl as acl;
pub mod config;
pub mod console;
pub mod eauth;
pub mod error;
pub mod format;
pub mod ratelimit;
pub mod server;
pub mod service;
pub mod tokens;
pub use halite_runners::wheel;
