//! Execution modules, state modules, pkg providers and grains: everything
//! that touches the machine halite runs on.
//!
//! Each module is one file behind a trait ([`ExecModule`] here,
//! [`halite_state::StateModule`] in the engine) and is registered with one
//! line in [`table`]. [`Host`] bundles what a run needs (opts, grains,
//! pillar, file client, the registries) and is the engine's
//! [`halite_state::StateEnv`].

pub mod exec;
pub mod fileclient;
pub mod grains;
pub mod host;
pub mod local;
pub mod pillar_render;
pub mod pkg;
pub mod sls;
pub mod states;
pub mod table;

pub use exec::{Args, ExecError, ExecModule, ExecModules};
pub use fileclient::LocalFileClient;
pub use host::Host;
