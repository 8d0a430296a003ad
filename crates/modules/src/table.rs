//! The one table of modules: adding a module is one file and one line here.

use std::sync::Arc;

use halite_state::StateModules;

use crate::exec::ExecModules;

/// Every state module halite ships.
pub fn state_modules() -> StateModules {
    let mut t = StateModules::new();
    t.register(Arc::new(crate::states::test::TestState));
    t
}

/// Every execution module halite ships.
pub fn exec_modules() -> ExecModules {
    #[allow(unused_mut)]
    let mut t = ExecModules::default();
    t.register(Arc::new(crate::grains::exec::GrainsExec));
    t
}
