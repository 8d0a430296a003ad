//! Salt's `config` execution module: `config.get`, `config.option` and
//! `config.items` from the CLI, jobs and `module.run`. The lookups are the
//! ones templates use (`halite_render::config_call`), so both answer alike.

use halite_state::Value;

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "config",
    functions: &[
        ExecFunction::new("get", get),
        ExecFunction::new("option", option),
        ExecFunction::new("items", items),
    ],
};

fn lookup(fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    halite_render::config_call(
        fun,
        &host.opts,
        &host.grains,
        &host.pillar,
        &args.positional,
        &args.kwargs,
    )
    .ok_or_else(|| ExecError::NotAvailable(fun.to_string()))
}

/// `config.get key [default] [delimiter=:]`: opts, then grains, then
/// pillar, then the master's config in pillar; nested keys with `:`.
fn get(args: &Args, host: &Host) -> Result<Value, ExecError> {
    args.require_str(0, "key", "get")?;
    lookup("config.get", args, host)
}

/// `config.option value [default]`: like `config.get` for top-level keys.
fn option(args: &Args, host: &Host) -> Result<Value, ExecError> {
    args.require_str(0, "value", "option")?;
    lookup("config.option", args, host)
}

/// `config.items`: the whole minion config (Salt's `__opts__`).
fn items(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    Ok(host.opts.clone())
}
