//! Salt's `kmod` state: kernel modules loaded (`present`) or removed
//! (`absent`), optionally persisted, with Salt's comments.

use halite_state::{StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::kmod as exec;
use crate::exec::user::scalar_text;

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "kmod",
    functions: &[
        StateFunction::new("present", present),
        StateFunction::new("absent", absent),
    ],
};

fn err(e: crate::exec::ExecError) -> StateError {
    StateError::Other(e.to_string())
}

/// Salt's `_append_comment`.
fn append(ret: &mut StateResult, comment: &str) {
    if ret.comment.is_empty() {
        ret.comment = comment.to_string();
    } else {
        ret.comment = format!("{}\n{comment}", ret.comment.trim_end());
    }
}

/// `mods=` when a list, else just `name`.
fn mods_arg(call: &StateCall<'_>) -> Vec<String> {
    match call.arg("mods") {
        Some(Value::Array(items)) => items.iter().filter_map(scalar_text).collect(),
        _ => vec![call.name().to_string()],
    }
}

/// "Kernel module x" or "Kernel modules x, y".
fn modules(list: &[String]) -> String {
    match list {
        [one] => format!("Kernel module {one}"),
        many => format!("Kernel modules {}", many.join(", ")),
    }
}

fn present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(call, &["persist", "mods"])?;
    let name = call.name().to_string();
    let mods = mods_arg(call);
    let persist = call.arg_bool("persist", false);
    let conf = exec::modules_conf(call.env.grains());
    let mut ret = StateResult::ok(&name, "");
    let mut loaded = exec::mod_list(false, conf).map_err(err)?;
    if persist {
        let persisted = exec::mod_list(true, conf).map_err(err)?;
        loaded.retain(|m| persisted.contains(m));
    }
    let already: Vec<String> = mods
        .iter()
        .filter(|m| loaded.contains(m))
        .cloned()
        .collect();
    if !already.is_empty() {
        let verb = if already.len() == 1 { "is" } else { "are" };
        append(
            &mut ret,
            &format!("{} {verb} already present", modules(&already)),
        );
    }
    if already.len() == mods.len() {
        return Ok(ret);
    }
    let not_loaded: Vec<String> = mods
        .iter()
        .filter(|m| !already.contains(m))
        .cloned()
        .collect();
    if call.test {
        ret.result = None;
        if !ret.comment.is_empty() {
            ret.comment.push('\n');
        }
        let verb = if not_loaded.len() == 1 { "is" } else { "are" };
        append(
            &mut ret,
            &format!("{} {verb} set to be loaded", modules(&not_loaded)),
        );
        return Ok(ret);
    }
    let available = exec::available();
    let unavailable: Vec<String> = not_loaded
        .iter()
        .filter(|m| !available.contains(m))
        .cloned()
        .collect();
    if !unavailable.is_empty() {
        let verb = if unavailable.len() == 1 { "is" } else { "are" };
        append(
            &mut ret,
            &format!("{} {verb} unavailable", modules(&unavailable)),
        );
        ret.result = Some(false);
    }
    let (mut yes, mut no, mut failed) = (Vec::new(), Vec::new(), Vec::new());
    let mut by_dependency: Vec<String> = Vec::new();
    for m in not_loaded.iter().filter(|m| !unavailable.contains(m)) {
        if by_dependency.contains(m) {
            yes.push(m.clone());
            continue;
        }
        match exec::load(m, persist, conf).map_err(err)? {
            Ok(list) if !list.is_empty() => {
                for module in list {
                    ret.changes.insert(module.clone(), Value::from("loaded"));
                    if &module != m {
                        by_dependency.push(module);
                    }
                }
                yes.push(m.clone());
            }
            Ok(_) => {
                ret.result = Some(false);
                no.push(m.clone());
            }
            Err(msg) => {
                ret.result = Some(false);
                failed.push((m.clone(), msg));
            }
        }
    }
    report(&mut ret, "Loaded", "load", &yes, &no, failed);
    Ok(ret)
}

fn absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(call, &["persist", "comment", "mods"])?;
    let name = call.name().to_string();
    let mods = mods_arg(call);
    let persist = call.arg_bool("persist", false);
    let comment = call.arg_bool("comment", true);
    let conf = exec::modules_conf(call.env.grains());
    let mut ret = StateResult::ok(&name, "");
    let mut loaded = exec::mod_list(false, conf).map_err(err)?;
    if persist {
        loaded.extend(exec::mod_list(true, conf).map_err(err)?);
    }
    let to_unload: Vec<String> = mods
        .iter()
        .filter(|m| loaded.contains(m))
        .cloned()
        .collect();
    if to_unload.is_empty() {
        let verb = if mods.len() == 1 { "is" } else { "are" };
        ret.comment = format!("{} {verb} already removed", modules(&mods));
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        let verb = if to_unload.len() == 1 { "is" } else { "are" };
        append(
            &mut ret,
            &format!("{} {verb} set to be removed", modules(&to_unload)),
        );
        return Ok(ret);
    }
    let (mut yes, mut no, mut failed) = (Vec::new(), Vec::new(), Vec::new());
    for m in &to_unload {
        match exec::remove(m, persist, comment, conf).map_err(err)? {
            Ok(list) if !list.is_empty() => {
                for module in list {
                    ret.changes.insert(module, Value::from("removed"));
                }
                yes.push(m.clone());
            }
            Ok(_) => {
                ret.result = Some(false);
                no.push(m.clone());
            }
            Err(msg) => {
                ret.result = Some(false);
                failed.push((m.clone(), msg));
            }
        }
    }
    report(&mut ret, "Removed", "remove", &yes, &no, failed);
    Ok(ret)
}

/// Salt's comment lines after loading or removing: the modules `done`
/// ("Loaded"/"Removed"), those whose `verb` did nothing, and each failure
/// with its message.
fn report(
    ret: &mut StateResult,
    done: &str,
    verb: &str,
    yes: &[String],
    no: &[String],
    failed: Vec<(String, String)>,
) {
    let what = |n: usize| if n == 1 { "module" } else { "modules" };
    if !yes.is_empty() {
        append(
            ret,
            &format!("{done} kernel {} {}", what(yes.len()), yes.join(", ")),
        );
    }
    if !no.is_empty() {
        append(
            ret,
            &format!(
                "Failed to {verb} kernel {} {}",
                what(no.len()),
                no.join(", ")
            ),
        );
    }
    for (m, msg) in failed {
        append(ret, &format!("Failed to {verb} kernel module {m}: {msg}"));
    }
}
