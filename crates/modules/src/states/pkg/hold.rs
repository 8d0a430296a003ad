//! `pkg.held` / `pkg.unheld`: packages are (or are not) held at their
//! version (`apt-mark hold` on Debian), with Salt 3008's comments.

use halite_state::{Map, StateCall, StateResult, Value};

use crate::pkg::{PkgError, PkgProvider};

/// Salt's comment when the provider cannot list its held packages.
const NO_LIST: &str = "No any function to get the list of held packages available.\nCheck if the package manager supports package locking.";

/// The `pkgs` entries (a name, or `{name: version}`), or `name` (with
/// `version`) when `pkgs` is absent; `None` for an explicit empty list.
fn wanted(call: &StateCall<'_>, version_for_name: bool) -> Option<Vec<(String, Option<String>)>> {
    let one = |v: &Value| -> (String, Option<String>) {
        match v {
            Value::Object(m) => m
                .iter()
                .next()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        (!v.is_null()).then(|| halite_salt_rules::pyfmt::python_str(v)),
                    )
                })
                .unwrap_or_default(),
            other => (halite_salt_rules::pyfmt::python_str(other), None),
        }
    };
    match call.arg("pkgs") {
        Some(Value::Array(a)) if a.is_empty() => None,
        Some(Value::Array(a)) => Some(a.iter().map(one).collect()),
        _ => {
            let version = if version_for_name {
                call.arg("version")
                    .map(halite_salt_rules::pyfmt::python_str)
            } else {
                None
            };
            Some(vec![(call.name().to_string(), version)])
        }
    }
}

/// The per-package result of `set_hold` for `name`: whether it succeeded
/// and its comment.
fn outcome(ret: &Map, name: &str) -> (bool, String) {
    let r = ret.get(name);
    (
        r.and_then(|r| r.get("result"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
        r.and_then(|r| r.get("comment"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    )
}

/// `pkg.held`: `name` (or every entry of `pkgs`) is held; with `replace`,
/// every other held package is released.
pub(super) fn held(
    call: &StateCall<'_>,
    provider: &dyn PkgProvider,
) -> Result<StateResult, PkgError> {
    let name = call.name().to_string();
    let replace = call.arg_bool("replace", false);
    let pkgs = match wanted(call, true) {
        Some(p) => p,
        None if !replace => {
            let mut r = StateResult::new(name, Some(true));
            r.comment = "No packages to be held provided".into();
            return Ok(r);
        }
        None => Vec::new(),
    };
    let Some(locks) = provider.list_held()? else {
        return Ok(StateResult::fail(&name, NO_LIST));
    };
    let mut ret = StateResult::new(name.clone(), Some(true));
    let mut comments = Vec::new();
    let mut held_now = Vec::new();
    for (pkg, ver) in &pkgs {
        held_now.push(pkg.clone());
        if locks.contains(pkg) {
            continue;
        }
        let suffix = ver
            .as_ref()
            .map(|v| format!(" (version = {v})"))
            .unwrap_or_default();
        if call.test {
            comments.push(format!(
                "The following package would be held: {pkg}{suffix}"
            ));
            continue;
        }
        let hold_ret = provider.set_hold(std::slice::from_ref(pkg), true)?;
        let (ok, _) = outcome(&hold_ret, pkg);
        if ok {
            comments.push(format!("Package {pkg} is now being held"));
        } else {
            ret.result = Some(false);
            comments.push(format!("Package {pkg} was not held"));
        }
        ret.changes.extend(hold_ret);
    }
    if replace {
        for pkg in locks.iter().filter(|p| !held_now.contains(p)) {
            if call.test {
                comments.push(format!("The following package would be unheld: {pkg}"));
                continue;
            }
            release(provider, pkg, &mut ret, &mut comments)?;
        }
    }
    ret.comment = comments.join("\n");
    if ret.changes.is_empty() && ret.comment.is_empty() {
        ret.comment = "No changes made".into();
    }
    Ok(ret)
}

/// `pkg.unheld`: `name` (or every entry of `pkgs`, or with `all` every
/// held package) is not held.
pub(super) fn unheld(
    call: &StateCall<'_>,
    provider: &dyn PkgProvider,
) -> Result<StateResult, PkgError> {
    let name = call.name().to_string();
    let all = call.arg_bool("all", false);
    let pkgs = match wanted(call, true) {
        Some(p) => p,
        None if !all => {
            let mut r = StateResult::new(name, Some(true));
            r.comment = "No packages to be unheld provided".into();
            return Ok(r);
        }
        None => Vec::new(),
    };
    let Some(locks) = provider.list_held()? else {
        return Ok(StateResult::fail(&name, NO_LIST));
    };
    let mut ret = StateResult::new(name.clone(), Some(true));
    let mut comments = Vec::new();
    for pkg in &locks {
        if !(all || pkgs.iter().any(|(p, _)| p == pkg)) {
            continue;
        }
        if call.test {
            // apt's holds carry no version: Salt prints "(version = None)"
            // when a version was asked for.
            let asked = pkgs.iter().any(|(p, v)| p == pkg && v.is_some());
            let suffix = if asked { " (version = None)" } else { "" };
            comments.push(format!(
                "The following package would be unheld: {pkg}{suffix}"
            ));
            continue;
        }
        release(provider, pkg, &mut ret, &mut comments)?;
    }
    ret.comment = comments.join("\n");
    if ret.changes.is_empty() && ret.comment.is_empty() {
        ret.comment = "No changes made".into();
    }
    Ok(ret)
}

/// Releases the hold on `pkg`: its changes and comment join the state's,
/// and a release that did not happen fails the state.
fn release(
    provider: &dyn PkgProvider,
    pkg: &str,
    ret: &mut StateResult,
    comments: &mut Vec<String>,
) -> Result<(), PkgError> {
    let unhold_ret = provider.set_hold(&[pkg.to_string()], false)?;
    let (ok, comment) = outcome(&unhold_ret, pkg);
    if !ok {
        ret.result = Some(false);
    }
    if !comment.is_empty() {
        comments.push(comment);
    }
    ret.changes.extend(unhold_ret);
    Ok(())
}
