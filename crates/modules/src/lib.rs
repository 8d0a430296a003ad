//! Execution modules, state modules, pkg providers and grains: everything
//! that touches the machine halite runs on.
//!
//! Each module is one file declaring one table of its functions
//! ([`exec::ExecTable`] here, [`halite_state::StateTable`] in the engine)
//! and is registered by its name in the list of its directory
//! ([`exec::modules`], [`states::modules`]). [`Host`] bundles what a run needs (opts, grains,
//! pillar, file client, the registries) and is the engine's
//! [`halite_state::StateEnv`].

/// Declares the module files of a directory and the function listing each
/// file's `MODULE`: adding a module is its file and its name in the list.
#[macro_export]
macro_rules! module_list {
    ($(#[$doc:meta])* $list:ident: $ty:ty = [$($m:ident),* $(,)?]) => {
        $(pub mod $m;)*
        $(#[$doc])*
        pub fn $list() -> Vec<$ty> {
            vec![$(::std::sync::Arc::new($m::MODULE)),*]
        }
    };
}

pub mod command;
pub mod datastore;
pub mod dynamic;
pub mod exec;
pub mod ext_pillar;
pub mod fetch;
pub mod fileclient;
pub mod gpg;
pub mod grains;
pub mod high_form;
pub mod host;
pub mod job_procs;
pub mod local;
pub mod mine_local;
pub mod minion_control;
pub mod pillar_merge;
pub mod pillar_render;
pub mod pillar_source;
pub mod pkg;
pub mod python;
pub mod render_context;
pub mod returners;
pub mod salt_fallback;
pub mod schedule_time;
pub mod sls;
pub mod state_env;
pub mod state_lock;
pub mod states;
pub mod table;

pub use exec::{Args, ExecError, ExecModule, ExecModules};
pub use fileclient::LocalFileClient;
pub use host::Host;
