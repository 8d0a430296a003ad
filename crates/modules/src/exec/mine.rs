//! Salt's `mine` execution module: a minion runs the functions of its
//! `mine_functions` (config and pillar) and stores their results on the
//! master (`mine.update`, `mine.send`), reads other minions' results
//! (`mine.get`), and forgets its own (`mine.delete`, `mine.flush`). The
//! master is reached through the host's [`MineLink`]; a masterless minion
//! (`file_client: local`) keeps its mine in its own datastore
//! ([`crate::mine_local`]), as Salt 3008 does. The data rules
//! (`allow_tgt` wrapping, definitions) are `halite_salt_rules::mine`.

use halite_salt_rules::mine::{parse_function_definition, wrap_acl, MineFunction};
use halite_state::{Map, Value};

use std::sync::Arc;

use crate::exec::{Args, ExecError, ExecFunction, ExecTable, MineLink};
use crate::mine_local::LocalMine;
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "mine",
    functions: &[
        ExecFunction::new("update", update),
        ExecFunction::new("send", send),
        ExecFunction::new("get", get),
        ExecFunction::new("delete", delete),
        ExecFunction::new("flush", flush),
        ExecFunction::new("valid", valid),
    ],
};

/// The host's mine: its master's (through the host's link), its own
/// datastore when masterless (`file_client: local`), or an error saying
/// why there is none.
fn link(host: &Host) -> Result<Arc<dyn MineLink>, ExecError> {
    if let Some(link) = host.exec.mine() {
        return Ok(link.clone());
    }
    match LocalMine::of(host) {
        Some(local) => Ok(Arc::new(local)),
        None => Err(ExecError::Execution(
            "this call reaches no master for the Salt mine; run it through halite-minion, halite '<target>' mine.<function>, or masterless with file_client: local".into(),
        )),
    }
}

fn failed(e: String) -> ExecError {
    ExecError::Execution(e)
}

/// `mine_functions` as Salt's `config.merge` gives them: the pillar's
/// entries (from the master when there is one), then the config's over them.
fn configured_functions(host: &Host) -> Result<Map, ExecError> {
    let pillar = match host.exec.mine() {
        Some(link) => link.pillar_functions().map_err(failed)?,
        None => host
            .pillar
            .get("mine_functions")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
    };
    let mut merged = pillar;
    if let Some(Value::Object(own)) = host.opts.get("mine_functions") {
        for (k, v) in own {
            merged.insert(k.clone(), v.clone());
        }
    }
    Ok(merged)
}

/// Calls one mine function; `None` (logged, as Salt logs and skips it)
/// when it is not available or fails.
fn run_one(host: &Host, alias: &str, def: &MineFunction, caller: &str) -> Option<Value> {
    let name = def.function.as_deref().unwrap_or(alias);
    if !host.exec.has(name) {
        tracing::error!(function = %name, "Function {name} in mine_functions not available");
        return None;
    }
    let args = Args {
        positional: def.args.clone(),
        kwargs: def.kwargs.clone(),
    };
    match host.call(name, &args) {
        Ok(v) => Some(match &def.allow_tgt {
            Some(allow) => wrap_acl(v, allow, def.allow_tgt_type.as_ref()),
            None => v,
        }),
        Err(e) => {
            tracing::error!(function = %name, error = %e, "Function {name} in {caller} failed to execute");
            None
        }
    }
}

/// `mine.update [clear=False] [mine_functions=...]`: runs every mine
/// function and stores the results on the master; `None` when no mine
/// function is configured (Salt returns nothing then).
fn update(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let clear = args.get_bool(0, "clear", false);
    let functions = match args.get(1, "mine_functions") {
        Some(Value::Array(names)) if !names.is_empty() => names
            .iter()
            .map(|n| {
                (
                    halite_salt_rules::pyfmt::python_str(n),
                    Value::Object(Map::new()),
                )
            })
            .collect(),
        Some(Value::Object(map)) if !map.is_empty() => map.clone(),
        Some(v) if halite_salt_rules::truth::python_bool(v) => return Ok(Value::Null),
        _ => configured_functions(host)?,
    };
    if functions.is_empty() {
        return Ok(Value::Null);
    }
    let mut data = Map::new();
    for (alias, definition) in &functions {
        let def = parse_function_definition(definition);
        if let Some(v) = run_one(host, alias, &def, "mine.update") {
            data.insert(alias.clone(), v);
        }
    }
    link(host)?.store(data, clear).map_err(failed)
}

/// `mine.send <name> [args...] [mine_function=...] [allow_tgt=...]
/// [allow_tgt_type=...] [kwargs...]`: runs one function and stores its
/// result under `name`; `False` when the function fails.
fn send(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "send")?;
    let mut kwargs: Map = args
        .kwargs
        .iter()
        .filter(|(k, _)| k.as_str() != "name" && !k.starts_with("__"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let def = MineFunction {
        function: kwargs.remove("mine_function").map(|f| match f {
            Value::String(s) => s,
            other => halite_salt_rules::pyfmt::python_str(&other),
        }),
        allow_tgt: kwargs
            .remove("allow_tgt")
            .filter(halite_salt_rules::truth::python_bool),
        allow_tgt_type: kwargs.remove("allow_tgt_type"),
        args: args.positional.iter().skip(1).cloned().collect(),
        kwargs,
    };
    let Some(value) = run_one(host, &name, &def, "mine.send") else {
        return Ok(Value::Bool(false));
    };
    let mut data = Map::new();
    data.insert(name, value);
    link(host)?.store(data, false).map_err(failed)
}

/// `mine.get <tgt> <fun> [tgt_type=glob] [exclude_minion=False]`: Salt's
/// `{minion: data}` (`{fun: {minion: data}}` for several functions).
fn get(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let tgt = args.require_str(0, "tgt", "get")?;
    let fun = args.get(1, "fun").cloned().ok_or_else(|| {
        ExecError::Invocation("get() missing 1 required positional argument: 'fun'".into())
    })?;
    let tgt_type = args
        .get_str(2, "tgt_type")
        .unwrap_or_else(|| "glob".to_string());
    let mut ret = link(host)?.get(&tgt, &fun, &tgt_type).map_err(failed)?;
    if args.get_bool(3, "exclude_minion", false) {
        if let (Value::Object(map), Some(id)) =
            (&mut ret, host.opts.get("id").and_then(Value::as_str))
        {
            map.remove(id);
        }
    }
    Ok(ret)
}

/// `mine.delete <fun>`: forgets `fun` in this minion's mine.
fn delete(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let fun = args.require_str(0, "fun", "delete")?;
    link(host)?.delete(&fun).map_err(failed)
}

/// `mine.flush`: forgets this minion's whole mine.
fn flush(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    link(host)?.flush().map_err(failed)
}

/// `mine.valid`: the mine functions this minion would run, as Salt shows
/// them (`{alias: {function: [args..., {kwarg: value}...]}}` for aliases,
/// the definition as written otherwise); `None` when there are none.
fn valid(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    let functions = configured_functions(host)?;
    if functions.is_empty() {
        return Ok(Value::Null);
    }
    let mut out = Map::new();
    for (alias, definition) in &functions {
        let def = parse_function_definition(definition);
        let name = def.function.as_deref().unwrap_or(alias);
        if !host.exec.has(name) {
            tracing::error!(function = %name, "Function {name} in mine_functions not available");
            continue;
        }
        let shown = match &def.function {
            Some(function) => {
                let mut call = def.args.clone();
                call.extend(def.kwargs.iter().map(|(k, v)| {
                    let mut one = Map::new();
                    one.insert(k.clone(), v.clone());
                    Value::Object(one)
                }));
                let mut m = Map::new();
                m.insert(function.clone(), Value::Array(call));
                Value::Object(m)
            }
            None => definition.clone(),
        };
        out.insert(alias.clone(), shown);
    }
    Ok(Value::Object(out))
}
