//! The execution-module contract (`test.ping`, `cmd.run`, `pkg.install`...)
//! and the list of execution modules: a module is one file here declaring
//! `pub const MODULE: ExecTable`, registered by its name in [`modules`].

crate::module_list! {
    /// Every execution module of this directory, in name order.
    modules: Arc<dyn ExecModule> = [
        alternatives,
        cmd,
        config,
        cp,
        cron,
        debconf,
        dig,
        disk,
        environ,
        event,
        file,
        firewalld,
        gem,
        git,
        grains,
        group,
        hashutil,
        hosts,
        http,
        iptables,
        kmod,
        locale,
        lowpkg,
        mine,
        mount,
        mysql,
        network,
        nftables,
        npm,
        pillar,
        pip,
        pkg,
        postgres,
        saltutil,
        schedule,
        service,
        shadow,
        slsutil,
        ssh,
        state,
        status,
        supervisord,
        sys,
        sysctl,
        system,
        test,
        timezone,
        user,
        virtualenv,
    ]
}

pub mod signature;

use std::sync::Arc;

use halite_state::Value;

thread_local! {
    /// Salt's `__context__["retcode"]`: what the last function run on this
    /// thread asked its job's retcode to be (`cmd.run` of a failing command).
    static CONTEXT_RETCODE: std::cell::Cell<Option<i32>> = const { std::cell::Cell::new(None) };
}

/// Sets the retcode of the job running on this thread (Salt's
/// `__context__["retcode"] = n`).
pub fn set_retcode(code: i32) {
    CONTEXT_RETCODE.with(|c| c.set(Some(code)));
}

/// Forgets a retcode set on this thread; call before running a job's function.
pub fn clear_retcode() {
    CONTEXT_RETCODE.with(|c| c.set(None));
}

/// The process return code Salt gives `fun` returning `ret`, as its minion
/// and salt-call do: `state.*` by their own rule (1 for compile errors, 2
/// for failed states); else the retcode the function set, else 1 when a
/// dict return says `result` or `success` is false, else 0.
pub fn retcode(fun: &str, ret: &Value) -> i32 {
    let context = CONTEXT_RETCODE.with(|c| c.take());
    if fun.starts_with("state.") {
        return state::retcode(fun, ret);
    }
    if let Some(code) = context.filter(|c| *c != 0) {
        return code;
    }
    match ret {
        Value::Object(map)
            if ["result", "success"]
                .iter()
                .any(|k| map.get(*k).is_some_and(|v| !halite_state::truthy(v))) =>
        {
            1
        }
        _ => 0,
    }
}

/// The engine's `str()` of a value (strings bare), for messages and echoes.
pub use halite_salt_rules::pyfmt::quoted_str as py_str;

/// Python's `bool(value)` (Salt's module code writes `if expire:` and
/// `if grain:` with this meaning): the one in `halite-salt-rules`.
pub use halite_salt_rules::truth::python_bool as py_truth;

/// The calling convention of execution functions (arguments, errors, the
/// module table and the registry) lives in [`crate::host`] beside the
/// [`Host`] they are called on: the two refer to each other, and one file
/// keeps the import graph free of circles. These names stay here for the
/// module files and the crates that reach them through `exec`.
pub use crate::host::{
    Args, ExecError, ExecFunction, ExecHandler, ExecModule, ExecModules, ExecTable, MineLink,
    RemoteExec, ANSWERED_ON_MASTER,
};
