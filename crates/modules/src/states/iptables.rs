//! Salt's `iptables` states: a rule appended, inserted or deleted (its
//! options are the state's other arguments, as `iptables.build_rule`
//! reads them), a chain present or absent, a chain's policy, a flush,
//! each optionally saved (`save: True` or a file), with Salt's comments
//! and its `changes: {locale: <name>}`.

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::iptables as exec;

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "iptables",
    functions: &[
        StateFunction::new("append", |c| add(c, Kind::Append)),
        StateFunction::new("insert", |c| add(c, Kind::Insert)),
        StateFunction::new("delete", delete),
        StateFunction::new("chain_present", chain_present),
        StateFunction::new("chain_absent", chain_absent),
        StateFunction::new("set_policy", set_policy),
        StateFunction::new("flush", flush),
    ],
};

fn err(e: crate::exec::ExecError) -> StateError {
    StateError::Other(e.to_string())
}

/// `table` (default `filter`) and `family` (default `ipv4`).
fn table_family(call: &StateCall<'_>) -> Result<(String, String), StateError> {
    Ok((
        call.arg_str("table")?.unwrap_or_else(|| "filter".into()),
        call.arg_str("family")?.unwrap_or_else(|| "ipv4".into()),
    ))
}

/// A required keyword of the rule states (`chain`, `policy`, `position`).
fn required(call: &StateCall<'_>, key: &str) -> Result<String, StateError> {
    call.require_str(key)
}

/// `save: True` (the OS's rules file) or `save: <file>`; `None` when not saving.
fn save_target(call: &StateCall<'_>) -> Option<Option<String>> {
    match call.arg("save") {
        Some(Value::Bool(true)) => Some(None),
        Some(Value::String(s)) if !s.is_empty() => Some(Some(s.clone())),
        Some(v) if crate::exec::py_truth(v) => Some(Some(halite_salt_rules::pyfmt::python_str(v))),
        _ => None,
    }
}

/// The chunk's arguments as the rule's keyword arguments, `name` and
/// `table` included (`build_rule` drops what is not an option).
fn rule_kwargs(call: &StateCall<'_>) -> Map {
    call.chunk
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Append,
    Insert,
}

/// The rules of every chain, for comparing the running rules with a
/// saved file (Salt compares the lists of rule lists).
fn all_rules(v: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    if let Value::Object(tables) = v {
        for chains in tables.values() {
            if let Value::Object(chains) = chains {
                for chain in chains.values() {
                    out.push(chain.get("rules").cloned().unwrap_or(Value::Null));
                }
            }
        }
    }
    out
}

/// Salt's `append` and `insert`.
fn add(call: &StateCall<'_>, kind: Kind) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let (table, family) = table_family(call)?;
    let chain = required(call, "chain")?;
    let position = if kind == Kind::Insert {
        required(call, "position")?
    } else {
        String::new()
    };
    let mut ret = StateResult::ok(&name, "");
    let rule = match exec::build_rule(&rule_kwargs(call)) {
        Ok(r) => r,
        Err(e) => return Ok(StateResult::fail(&name, e)),
    };
    let letter = if kind == Kind::Insert { "I" } else { "A" };
    let full =
        exec::full_command(&family, &table, letter, &chain, &position, &rule).map_err(err)?;
    let command = full.trim();
    let save = save_target(call);
    if exec::check(&table, &chain, &rule, &family).map_err(err)? {
        ret.comment = match kind {
            Kind::Append => {
                format!("iptables rule for {name} already set ({command}) for {family}")
            }
            Kind::Insert => {
                format!("iptables rule for {name} already set for {family} ({command})")
            }
        };
        if let Some(file) = save {
            // Saved only when the file differs from what runs.
            let saved = match &file {
                Some(f) => std::fs::read_to_string(f)
                    .map(|t| exec::parse_save(&t))
                    .ok(),
                None => None,
            };
            let running = exec::get_rules(&family).map_err(err)?;
            if saved.as_ref().map(all_rules) != Some(all_rules(&running)) {
                let out = save_rules(call, file.as_deref(), &family)?;
                ret.comment.push_str(&format!(
                    "\nSaved iptables rule {name} for {family}\n{command}\n{out}"
                ));
            }
        }
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment = match kind {
            Kind::Append => {
                format!("iptables rule for {name} needs to be set ({command}) for {family}")
            }
            Kind::Insert => {
                format!("iptables rule for {name} needs to be set for {family} ({command})")
            }
        };
        return Ok(ret);
    }
    let done = match kind {
        Kind::Append => exec::append(&table, &chain, &rule, &family).map_err(err)?,
        Kind::Insert => {
            let pos = position.parse::<i64>().map_err(|_| {
                StateError::BadArg(format!("position must be an integer, not '{position}'"))
            })?;
            exec::insert(&table, &chain, pos, &rule, &family)
                .map_err(err)?
                .is_empty()
        }
    };
    if !done {
        ret.result = Some(false);
        ret.comment = match kind {
            Kind::Append => format!(
                "Failed to set iptables rule for {name}.\nAttempted rule was {command} for {family}"
            ),
            Kind::Insert => {
                format!("Failed to set iptables rule for {name}.\nAttempted rule was {command}")
            }
        };
        return Ok(ret);
    }
    ret.changes
        .insert("locale".into(), Value::from(name.clone()));
    ret.comment = format!("Set iptables rule for {name} to: {command} for {family}");
    if let Some(file) = save {
        let out = save_rules(call, file.as_deref(), &family)?;
        ret.comment = format!("Set and saved iptables rule {name} for {family}\n{command}\n{out}");
    }
    Ok(ret)
}

/// `iptables.save` through the registry (so `iptables.save_filters` and
/// the grains are the host's).
fn save_rules(
    call: &StateCall<'_>,
    file: Option<&str>,
    family: &str,
) -> Result<String, StateError> {
    let mut kwargs = Map::new();
    if let Some(f) = file {
        kwargs.insert("filename".into(), Value::from(f));
    }
    kwargs.insert("family".into(), Value::from(family));
    call.env
        .call_function("iptables.save", &[], &kwargs)
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string())
        })
        .map_err(StateError::Other)
}

/// Salt's `iptables.delete`, of a rule or (`position`) of the rule there.
fn delete(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let (table, family) = table_family(call)?;
    let chain = required(call, "chain")?;
    let position = call.arg_str("position")?;
    let mut ret = StateResult::ok(&name, "");
    let rule = match exec::build_rule(&rule_kwargs(call)) {
        Ok(r) => r,
        Err(e) => return Ok(StateResult::fail(&name, e)),
    };
    let full = exec::full_command(&family, &table, "D", &chain, "", &rule).map_err(err)?;
    let command = full.trim();
    if position.is_none() && !exec::check(&table, &chain, &rule, &family).map_err(err)? {
        ret.comment = format!("iptables rule for {name} already absent for {family} ({command})");
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment =
            format!("iptables rule for {name} needs to be deleted for {family} ({command})");
        return Ok(ret);
    }
    let what = position.clone().unwrap_or_else(|| rule.clone());
    let failed = exec::delete(&table, &chain, &what, &family).map_err(err)?;
    if !failed.is_empty() {
        ret.result = Some(false);
        ret.comment =
            format!("Failed to delete iptables rule for {name}.\nAttempted rule was {command}");
        return Ok(ret);
    }
    ret.changes
        .insert("locale".into(), Value::from(name.clone()));
    ret.comment = format!("Delete iptables rule for {name} {command}");
    if let Some(file) = save_target(call) {
        let out = save_rules(call, file.as_deref(), &family)?;
        ret.comment =
            format!("Deleted and saved iptables rule {name} for {family}\n{command}\n{out}");
    }
    Ok(ret)
}

/// Salt's `iptables.chain_present`.
fn chain_present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(call, &["table", "family"])?;
    let name = call.name().to_string();
    let (table, family) = table_family(call)?;
    let mut ret = StateResult::ok(&name, "");
    if exec::check_chain(&table, &name, &family).map_err(err)? {
        ret.comment =
            format!("iptables {name} chain is already exist in {table} table for {family}");
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment =
            format!("iptables {name} chain in {table} table needs to be set for {family}");
        return Ok(ret);
    }
    match exec::chain_op("-N", &table, &name, &family).map_err(err)? {
        None => {
            ret.changes
                .insert("locale".into(), Value::from(name.clone()));
            ret.comment =
                format!("iptables {name} chain in {table} table create success for {family}");
        }
        Some(e) => {
            ret.result = Some(false);
            ret.comment = format!(
                "Failed to create {name} chain in {table} table: {} for {family}",
                e.trim()
            );
        }
    }
    Ok(ret)
}

/// Salt's `iptables.chain_absent`: the chain flushed, then deleted.
fn chain_absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(call, &["table", "family"])?;
    let name = call.name().to_string();
    let (table, family) = table_family(call)?;
    let mut ret = StateResult::ok(&name, "");
    if !exec::check_chain(&table, &name, &family).map_err(err)? {
        ret.comment =
            format!("iptables {name} chain is already absent in {table} table for {family}");
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment =
            format!("iptables {name} chain in {table} table needs to be removed {family}");
        return Ok(ret);
    }
    let flushed = exec::flush(&table, &name, &family).map_err(err)?;
    if !flushed.is_empty() {
        ret.result = Some(false);
        ret.comment = format!(
            "Failed to flush {name} chain in {table} table: {} for {family}",
            flushed.trim()
        );
        return Ok(ret);
    }
    match exec::chain_op("-X", &table, &name, &family).map_err(err)? {
        None => {
            ret.changes
                .insert("locale".into(), Value::from(name.clone()));
            ret.comment =
                format!("iptables {name} chain in {table} table delete success for {family}");
        }
        Some(e) => {
            ret.result = Some(false);
            ret.comment = format!(
                "Failed to delete {name} chain in {table} table: {} for {family}",
                e.trim()
            );
        }
    }
    Ok(ret)
}

/// Salt's `iptables.set_policy` (`chain`, `policy`, `save`).
fn set_policy(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let (table, family) = table_family(call)?;
    let chain = required(call, "chain")?;
    let policy = required(call, "policy")?;
    let mut ret = StateResult::ok(&name, "");
    if exec::get_policy(&table, &chain, &family)
        .map_err(err)?
        .as_deref()
        == Some(policy.as_str())
    {
        ret.comment = format!(
            "iptables default policy for chain {chain} on table {table} for {family} already set to {policy}"
        );
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment = format!(
            "iptables default policy for chain {chain} on table {table} for {family} needs to be set to {policy}"
        );
        return Ok(ret);
    }
    if !exec::set_policy(&table, &chain, &policy, &family)
        .map_err(err)?
        .is_empty()
    {
        ret.result = Some(false);
        ret.comment = "Failed to set iptables default policy".into();
        return Ok(ret);
    }
    ret.changes
        .insert("locale".into(), Value::from(name.clone()));
    ret.comment = format!("Set default policy for {chain} to {policy} family {family}");
    if let Some(file) = save_target(call) {
        save_rules(call, file.as_deref(), &family)?;
        ret.comment =
            format!("Set and saved default policy for {chain} to {policy} family {family}");
    }
    Ok(ret)
}

/// Salt's `iptables.flush` (of `chain`, or of the whole table). Salt
/// flushes on every run, so it always reports a change.
fn flush(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let (table, family) = table_family(call)?;
    let chain = call.arg_str("chain")?.unwrap_or_default();
    let mut ret = StateResult::ok(&name, "");
    if call.test {
        ret.result = None;
        ret.comment = format!(
            "iptables rules in {name} table {table} chain {family} family needs to be flushed"
        );
        return Ok(ret);
    }
    if !exec::flush(&table, &chain, &family)
        .map_err(err)?
        .is_empty()
    {
        ret.result = Some(false);
        ret.comment = "Failed to flush iptables rules".into();
        return Ok(ret);
    }
    ret.changes
        .insert("locale".into(), Value::from(name.clone()));
    ret.comment = format!("Flush iptables rules in {table} table {chain} chain {family} family");
    Ok(ret)
}
