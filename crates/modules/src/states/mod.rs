//! State modules: each is one file here declaring `pub const MODULE:
//! StateTable`, registered by its name in [`modules`].

pub mod signature;

use std::sync::Arc;

use halite_state::StateModule;

crate::module_list! {
    /// Every state module of this directory, in name order.
    modules: Arc<dyn StateModule> = [
        alternatives,
        archive,
        cmd,
        cron,
        debconf,
        file,
        grains,
        group,
        host,
        http,
        kmod,
        locale,
        module,
        mount,
        pip,
        pkg,
        pkgrepo,
        service,
        ssh_auth,
        ssh_known_hosts,
        sysctl,
        test,
        timezone,
        user,
        virtualenv,
    ]
}
