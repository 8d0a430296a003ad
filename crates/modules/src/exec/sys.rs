//! Salt's `sys` execution module: what functions exist.

use halite_state::Value;

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "sys",
    functions: &[
        ExecFunction::new("list_functions", list_functions),
        ExecFunction::new("list_modules", list_modules),
        ExecFunction::new("list_state_modules", list_state_modules),
        ExecFunction::new("list_state_functions", list_state_functions),
        ExecFunction::new("doc", doc),
    ],
};

/// Whether `f` (`mod.fun`) passes the `module` argument: all without one,
/// a glob when it has `*`, else the functions of that module.
fn keep(filter: &Option<String>, f: &str) -> bool {
    match filter {
        None => true,
        Some(m) if m.contains('*') => halite_salt_rules::fnmatch(f, m),
        Some(m) => f.starts_with(&format!("{m}.")) || f == m,
    }
}

/// `sys.list_functions [module]`: every execution function, filtered.
fn list_functions(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let filter = args.get_str(0, "module");
    Ok(Value::Array(
        host.exec
            .list_functions()
            .into_iter()
            .filter(|f| keep(&filter, f))
            .map(Value::from)
            .collect(),
    ))
}

/// `sys.list_modules`: every execution module.
fn list_modules(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    let mut mods: Vec<String> = host
        .exec
        .list_functions()
        .iter()
        .filter_map(|f| f.split('.').next().map(String::from))
        .collect();
    mods.dedup();
    Ok(Value::Array(mods.into_iter().map(Value::from).collect()))
}

/// `sys.list_state_modules`: every state module.
fn list_state_modules(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Array(host.states.names().map(Value::from).collect()))
}

/// `sys.list_state_functions [module]`: every state function, filtered.
fn list_state_functions(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let filter = args.get_str(0, "module");
    let mut out = Vec::new();
    for m in host.states.names() {
        if let Some(module) = host.states.get(m) {
            for f in module.functions() {
                let full = format!("{m}.{f}");
                if keep(&filter, &full) {
                    out.push(Value::from(full));
                }
            }
        }
    }
    Ok(Value::Array(out))
}

/// `sys.doc`: halite ships no docstrings; an empty mapping as Salt gives
/// for a function without one.
fn doc(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Object(Default::default()))
}
