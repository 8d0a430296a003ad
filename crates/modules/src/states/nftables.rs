//! Salt's `nftables` states: tables and chains present or absent, a rule
//! appended, inserted or deleted (built from the state's arguments as
//! `nftables.build_rule` does), a chain's policy, a flush; Salt 3008.5's
//! comments and `changes: {locale: <name>}`.
//!
//! Where Salt 3008.5 fails on its own bugs (`chain_absent` raises,
//! `delete` cannot find a rule's handle, `set_policy` never sees the
//! current policy and so changes it on every run), halite does the job
//! with the comments Salt's code would give.

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::nftables as exec;

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "nftables",
    functions: &[
        StateFunction::new("append", |c| add(c, false)),
        StateFunction::new("insert", |c| add(c, true)),
        StateFunction::new("delete", delete),
        StateFunction::new("chain_present", chain_present),
        StateFunction::new("chain_absent", chain_absent),
        StateFunction::new("table_present", table_present),
        StateFunction::new("table_absent", table_absent),
        StateFunction::new("set_policy", set_policy),
        StateFunction::new("flush", flush),
    ],
};

fn err(e: crate::exec::ExecError) -> StateError {
    StateError::Other(e.to_string())
}

fn family(call: &StateCall<'_>) -> Result<String, StateError> {
    Ok(call.arg_str("family")?.unwrap_or_else(|| "ipv4".into()))
}

fn table(call: &StateCall<'_>) -> Result<String, StateError> {
    Ok(call.arg_str("table")?.unwrap_or_else(|| "filter".into()))
}

/// The chunk as the rule's keyword arguments.
fn kwargs(call: &StateCall<'_>) -> Map {
    call.chunk
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// `save: True`: the ruleset written to the OS's nftables file.
fn save(call: &StateCall<'_>, filename: Option<&str>) -> Result<(), StateError> {
    let mut kw = Map::new();
    if let Some(f) = filename {
        kw.insert("filename".into(), Value::from(f));
    }
    call.env
        .call_function("nftables.save", &[], &kw)
        .map(|_| ())
        .map_err(StateError::Other)
}

/// Salt's `nftables.append` / `insert`.
fn add(call: &StateCall<'_>, insert: bool) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let family = family(call)?;
    let table = call.require_str("table")?;
    let chain = call.require_str("chain")?;
    let rule = exec::build_rule(&kwargs(call), &family).map_err(err)?;
    let mut ret = StateResult::ok(&name, "");
    let check = exec::check(&table, &chain, &rule, &family).map_err(err)?;
    if check.result {
        ret.comment = if insert {
            format!("nftables rule for {name} already set for {family} ({rule})")
        } else {
            format!("nftables rule for {name} already set ({rule}) for {family}")
        };
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment = if insert {
            format!("nftables rule for {name} needs to be set for {family} ({rule})")
        } else {
            format!("nftables rule for {name} needs to be set ({rule}) for {family}")
        };
        return Ok(ret);
    }
    let position = call.arg_str("position")?;
    let res =
        exec::add(&table, &chain, position.as_deref(), &rule, &family, insert).map_err(err)?;
    if !res.result {
        ret.result = Some(false);
        ret.comment = if insert {
            format!("Failed to set nftables rule for {name}.\nAttempted rule was {rule}")
        } else {
            format!(
                "Failed to set nftables rule for {name}.\nAttempted rule was {rule} for {family}.\n{}",
                res.comment
            )
        };
        return Ok(ret);
    }
    ret.changes
        .insert("locale".into(), Value::from(name.clone()));
    ret.comment = format!("Set nftables rule for {name} to: {rule} for {family}");
    if call.arg_bool("save", false) {
        save(call, None)?;
        ret.comment = format!("Set and Saved nftables rule for {name} to: {rule} for {family}");
    }
    Ok(ret)
}

/// Salt's `nftables.delete` (of the rule, or of the handle `position`).
fn delete(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let family = family(call)?;
    let table = call.require_str("table")?;
    let chain = call.require_str("chain")?;
    let rule = exec::build_rule(&kwargs(call), &family).map_err(err)?;
    let mut ret = StateResult::ok(&name, "");
    if !exec::check(&table, &chain, &rule, &family)
        .map_err(err)?
        .result
    {
        ret.comment = format!("nftables rule for {name} already absent for {family} ({rule})");
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment = format!("nftables rule for {name} needs to be deleted for {family} ({rule})");
        return Ok(ret);
    }
    let position = call.arg_str("position")?;
    let res = exec::delete(&table, &chain, position.as_deref(), &rule, &family).map_err(err)?;
    if !res.result {
        ret.result = Some(false);
        ret.comment =
            format!("Failed to delete nftables rule for {name}.\nAttempted rule was {rule}");
        return Ok(ret);
    }
    ret.changes
        .insert("locale".into(), Value::from(name.clone()));
    ret.comment = format!("Delete nftables rule for {name} {rule}");
    if call.arg_bool("save", false) {
        save(call, None)?;
        ret.comment = format!("Deleted and Saved nftables rule for {name} for {rule}{family}");
    }
    Ok(ret)
}

/// Salt's `nftables.chain_present` (`table_type`, `hook`, `priority` for
/// a base chain).
fn chain_present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(call, &["table", "table_type", "hook", "priority", "family"])?;
    let name = call.name().to_string();
    let (table, family) = (table(call)?, family(call)?);
    let mut ret = StateResult::ok(&name, "");
    if exec::check_chain(&table, &name, &family)
        .map_err(err)?
        .result
    {
        ret.comment =
            format!("nftables {name} chain is already exist in {table} table for {family}");
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment =
            format!("nftables chain {name} would be created in table {table} for family {family}");
        return Ok(ret);
    }
    let kind = call.arg_str("table_type")?;
    let hook = call.arg_str("hook")?;
    let priority = call.arg_str("priority")?;
    let res = match (&kind, &hook, &priority) {
        (None, None, None) => exec::new_chain(&table, &name, None, &family).map_err(err)?,
        (Some(k), Some(h), Some(p)) => {
            exec::new_chain(&table, &name, Some((k, h, p)), &family).map_err(err)?
        }
        _ => exec::Answer {
            result: false,
            comment: "Table_type, hook, and priority required.".into(),
        },
    };
    report(&mut ret, &res, "create", &table, &family);
    Ok(ret)
}

/// Salt's `nftables.chain_absent`: the chain flushed, then deleted.
fn chain_absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(call, &["table", "family"])?;
    let name = call.name().to_string();
    let (table, family) = (table(call)?, family(call)?);
    let mut ret = StateResult::ok(&name, "");
    if !exec::check_chain(&table, &name, &family)
        .map_err(err)?
        .result
    {
        ret.comment =
            format!("nftables {name} chain is already absent in {table} table for {family}");
        return Ok(ret);
    }
    if call.test {
        // Salt checks nothing here; halite predicts as the other states do.
        ret.result = None;
        ret.comment =
            format!("nftables {name} chain in {table} table needs to be removed {family}");
        return Ok(ret);
    }
    let flushed = exec::flush(&table, &name, &family).map_err(err)?;
    if !flushed.result {
        ret.result = Some(false);
        ret.comment = format!(
            "Failed to flush {name} chain in {table} table: {} for {family}",
            flushed.comment.trim()
        );
        return Ok(ret);
    }
    let res = exec::delete_chain(&table, &name, &family).map_err(err)?;
    report(&mut ret, &res, "delete", &table, &family);
    Ok(ret)
}

/// The end of `chain_present` (`verb` "create") and `chain_absent`
/// ("delete"): Salt's `locale` change and its success or failure comment,
/// the same words for both.
fn report(ret: &mut StateResult, res: &exec::Answer, verb: &str, table: &str, family: &str) {
    let name = ret.name.clone();
    if res.result {
        ret.changes
            .insert("locale".into(), Value::from(name.clone()));
        ret.comment = format!("nftables {name} chain in {table} table {verb} success for {family}");
    } else {
        ret.result = Some(false);
        ret.comment = format!(
            "Failed to {verb} {name} chain in {table} table: {} for {family}",
            res.comment.trim()
        );
    }
}

/// Salt's `nftables.table_present`.
fn table_present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    table_state(call, true)
}

/// Salt's `nftables.table_absent`.
fn table_absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    table_state(call, false)
}

fn table_state(call: &StateCall<'_>, present: bool) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let family = family(call)?;
    let mut ret = StateResult::ok(&name, "");
    let exists = exec::check_table(&name, &family).map_err(err)?.result;
    if exists == present {
        ret.comment = if present {
            format!("nftables table {name} already exists in family {family}")
        } else {
            format!("nftables table {name} is already absent from family {family}")
        };
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment = if present {
            format!("nftables table {name} would be created in family {family}")
        } else {
            format!("nftables table {name} would be deleted from family {family}")
        };
        return Ok(ret);
    }
    let res = exec::table_op(present, &name, &family).map_err(err)?;
    if res.result {
        ret.changes
            .insert("locale".into(), Value::from(name.clone()));
        ret.comment = if present {
            format!("nftables table {name} successfully created in family {family}")
        } else {
            format!("nftables table {name} successfully deleted from family {family}")
        };
    } else {
        ret.result = Some(false);
        ret.comment = if present {
            format!("Failed to create table {name} for family {family}")
        } else {
            format!("Failed to delete table {name} from family {family}")
        };
    }
    Ok(ret)
}

/// Salt's `nftables.set_policy` (`chain`, `policy`, `save`, `save_filename`).
fn set_policy(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let (table, family) = (table(call)?, family(call)?);
    let chain = call.require_str("chain")?;
    let policy = call.require_str("policy")?;
    let mut ret = StateResult::ok(&name, "");
    let current = exec::get_policy(&table, &chain, &family).map_err(err)?;
    if current.unwrap_or_default().to_lowercase() == policy.to_lowercase() {
        ret.comment = format!(
            "nftables default policy for chain {chain} on table {table} for {family} already set to {policy}"
        );
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment = format!(
            "nftables default policy for chain {chain} on table {table} for {family} needs to be set to {policy}"
        );
        return Ok(ret);
    }
    if !exec::set_policy(&table, &chain, &policy.to_lowercase(), &family).map_err(err)? {
        ret.result = Some(false);
        ret.comment = "Failed to set nftables default policy".into();
        return Ok(ret);
    }
    ret.changes
        .insert("locale".into(), Value::from(name.clone()));
    ret.comment = format!("Set default policy for {chain} to {policy} family {family}");
    if call.arg_bool("save", false) {
        save(call, call.arg_str("save_filename")?.as_deref())?;
        ret.comment =
            format!("Set and saved default policy for {chain} to {policy} family {family}");
    }
    Ok(ret)
}

/// Salt's `nftables.flush` (`table`, `chain`, `ignore_absence`); it
/// flushes on every run, so it always reports a change.
fn flush(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let mut ret = StateResult::ok(&name, "");
    if call.test {
        ret.result = None;
        ret.comment = "nftables flush not performed in test mode.".into();
        return Ok(ret);
    }
    let (table, family) = (table(call)?, family(call)?);
    let ignore_absence = call.arg_bool("ignore_absence", false);
    let table_ok = exec::check_table(&table, &family).map_err(err)?.result;
    if !ignore_absence && !table_ok {
        ret.result = Some(false);
        ret.comment =
            format!("Failed to flush table {table} in family {family}, table does not exist.");
        return Ok(ret);
    }
    let chain = call.arg_str("chain")?;
    let mut chain_ok = true;
    if let Some(chain) = &chain {
        chain_ok = exec::check_chain(&table, chain, &family)
            .map_err(err)?
            .result;
        if !ignore_absence && !chain_ok {
            ret.result = Some(false);
            ret.comment = format!(
                "Failed to flush chain {chain} in table {table} in family {family}, chain does not exist."
            );
            return Ok(ret);
        }
    }
    let chain = chain.unwrap_or_default();
    let res = exec::flush(&table, &chain, &family).map_err(err)?;
    if res.result || (ignore_absence && (!table_ok || !chain_ok)) {
        ret.changes
            .insert("locale".into(), Value::from(name.clone()));
        ret.comment =
            format!("Flush nftables rules in {table} table {chain} chain {family} family");
    } else {
        ret.result = Some(false);
        ret.comment = "Failed to flush nftables rules".into();
    }
    Ok(ret)
}
