//! State modules: each is one file here declaring `pub const MODULE:
//! StateTable`, registered by its name in [`modules`].

use std::sync::Arc;

use halite_state::StateModule;

crate::module_list! {
    /// Every state module of this directory, in name order.
    modules: Arc<dyn StateModule> = [
        alternatives, archive, cmd, debconf, file, grains, group, host, locale, module, pkg, pkgrepo, service, test, timezone,
        user,
    ]
}
