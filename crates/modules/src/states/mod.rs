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
        firewalld,
        gem,
        git,
        grains,
        group,
        host,
        http,
        iptables,
        kmod,
        locale,
        module,
        mount,
        mysql_database,
        mysql_grants,
        mysql_query,
        mysql_user,
        nftables,
        npm,
        pip,
        pkg,
        pkgrepo,
        postgres_database,
        postgres_extension,
        postgres_group,
        postgres_language,
        postgres_privileges,
        postgres_schema,
        postgres_user,
        service,
        ssh_auth,
        ssh_known_hosts,
        supervisord,
        sysctl,
        test,
        timezone,
        user,
        virtualenv,
    ]
}
