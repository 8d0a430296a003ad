//! The registries a run starts from: every state and execution module
//! halite ships. Modules are listed where they live ([`crate::states`],
//! [`crate::exec`]); nothing is added here.

use halite_state::StateModules;

use crate::exec::ExecModules;

/// Every state module halite ships.
pub fn state_modules() -> StateModules {
    let mut t = StateModules::new();
    for m in crate::states::modules() {
        t.register(m);
    }
    t
}

/// Every execution module halite ships.
pub fn exec_modules() -> ExecModules {
    let mut t = ExecModules::default();
    for m in crate::exec::modules() {
        t.register(m);
    }
    t
}
