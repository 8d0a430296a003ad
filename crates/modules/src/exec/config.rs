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

/// The option a master sets in the options of a host it compiles for a
/// minion with: that host's `opts` are the master's, so `config.get` asks
/// the minion for its own ([`minion_opts`]).
pub const COMPILED_ON_MASTER: &str = "__compiled_on_master";

/// The options `config.get`/`config.option` read on `host`: its own, or,
/// on a master compiling for a minion, the minion's (`config.items` run
/// there, as Salt renders on the minion and reads its `__opts__`). When
/// the minion cannot answer, the host's own options, with a warning.
pub fn minion_opts(host: &Host) -> Option<Value> {
    let compiled = host
        .opts
        .get(COMPILED_ON_MASTER)
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if !compiled {
        return None;
    }
    match host.call("config.items", &Args::default()) {
        Ok(opts @ Value::Object(_)) => Some(opts),
        Ok(other) => {
            tracing::warn!(answer = %other, "the minion's config.items is not a mapping: config.get reads the master's options");
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "the minion did not give its options: config.get reads the master's options");
            None
        }
    }
}

fn lookup(fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let remote = minion_opts(host);
    halite_render::config_call(
        fun,
        remote.as_ref().unwrap_or(&host.opts),
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
