//! Salt's `npm` states: packages installed (`installed`, at a version
//! with `name@version`) or removed in a project (`dir`) or globally, and a
//! project's own dependencies installed (`bootstrap`), with Salt's
//! comments and `changes`.
//!
//! Salt 3008 ships only the `npm` execution module; the states follow
//! Salt 3007's `salt/states/npm.py`.

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::npm::Npm;

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "npm",
    functions: &[
        StateFunction::new("installed", installed),
        StateFunction::new("removed", removed),
        StateFunction::new("bootstrap", bootstrap),
    ],
};

/// The state's `dir`, `user` and `env`.
fn npm_of(call: &StateCall<'_>, dir: Option<String>) -> Result<Npm, StateError> {
    Ok(Npm {
        dir,
        runas: call.arg_str("user")?,
        env: crate::exec::cmd::env_pairs(call.arg("env")).map_err(StateError::BadArg)?,
    })
}

/// Salt's split of `@scope/name@version` into the name and the version.
fn split_spec(pkg: &str) -> (String, Option<String>) {
    let (scope, rest) = match pkg.strip_prefix('@') {
        Some(r) => ("@", r),
        None => ("", pkg),
    };
    let word = rest.split_whitespace().next().unwrap_or_default();
    match word.split_once('@') {
        Some((name, ver)) if !ver.is_empty() => (format!("{scope}{name}"), Some(ver.to_string())),
        Some((name, _)) => (format!("{scope}{name}"), None),
        None => (format!("{scope}{word}"), None),
    }
}

/// A local tarball or directory (`./pkg.tgz`, `/srv/pkg`, `file:...`):
/// the path npm records as the package's `resolved` source.
fn local_source(pkg: &str, dir: Option<&str>) -> Option<std::path::PathBuf> {
    let path = pkg.strip_prefix("file:").unwrap_or(pkg);
    let looks_local = pkg.starts_with("file:")
        || path.starts_with('/')
        || path.starts_with("./")
        || path.starts_with("../")
        || path.ends_with(".tgz")
        || path.ends_with(".tar.gz");
    if !looks_local {
        return None;
    }
    let p = std::path::Path::new(path);
    let full = match dir {
        Some(d) if p.is_relative() => std::path::Path::new(d).join(p),
        _ => p.to_path_buf(),
    };
    Some(full.canonicalize().unwrap_or(full))
}

/// Salt's `_pkg_is_installed`: the installed entry for `pkg` (by name,
/// by the URL npm installed it from, and, beyond Salt, by the local
/// tarball or directory npm resolved it to, so installing from a path
/// is idempotent too). Returns the name npm lists it under.
fn installed_as(pkg: &str, name: &str, installed: &Map, dir: Option<&str>) -> Option<String> {
    if installed.get(name).and_then(|i| i.get("version")).is_some() {
        return Some(name.to_string());
    }
    if let Some((_, rest)) = name.split_once("://") {
        for (n, details) in installed {
            let from = details.get("from").and_then(Value::as_str).unwrap_or("");
            if let Some((_, mut f)) = from.split_once("://").map(|(a, b)| (a, b.to_string())) {
                if !f.ends_with(".git") && name.starts_with("git://") {
                    f.push_str(".git");
                }
                if rest == f {
                    return Some(n.clone());
                }
            }
        }
    }
    let local = local_source(pkg, dir)?;
    installed.iter().find_map(|(n, details)| {
        let resolved = details.get("resolved").and_then(Value::as_str)?;
        let path = resolved.strip_prefix("file:")?;
        let p = std::path::Path::new(path);
        let full = match dir {
            Some(d) if p.is_relative() => std::path::Path::new(d).join(p),
            _ => p.to_path_buf(),
        };
        (full.canonicalize().unwrap_or(full) == local).then(|| n.clone())
    })
}

/// Salt's `npm.installed`: `pkgs` (else `name`), `dir`, `user`,
/// `force_reinstall`, `registry`, `env`.
fn installed(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(
        call,
        &["pkgs", "dir", "user", "force_reinstall", "registry", "env"],
    )?;
    let name = call.name().to_string();
    let pkg_list: Vec<String> = match call.arg_list("pkgs") {
        l if !l.is_empty() => l
            .iter()
            .filter_map(crate::exec::user::scalar_text)
            .collect(),
        _ => vec![name.clone()],
    };
    let dir = call.arg_str("dir")?;
    let npm = npm_of(call, dir.clone())?;
    let mut ret = StateResult::ok(&name, "");
    let installed = match npm.list(None, Some(0)) {
        Ok(i) => i,
        Err(e) => {
            return Ok(StateResult::fail(
                &name,
                format!("Error looking up '{name}': {e}"),
            ))
        }
    };
    let force = call.arg("force_reinstall") == Some(&Value::Bool(true));
    let (mut satisfied, mut to_install) = (Vec::new(), Vec::new());
    for pkg in &pkg_list {
        let (pkg_name, pkg_ver) = split_spec(pkg);
        let found = installed_as(pkg, &pkg_name, &installed, dir.as_deref());
        let Some(listed) = found.filter(|_| !force) else {
            to_install.push(pkg.clone());
            continue;
        };
        let have = installed
            .get(&listed)
            .and_then(|i| i.get("version"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match pkg_ver {
            Some(v) if v != have && local_source(pkg, dir.as_deref()).is_none() => {
                to_install.push(pkg.clone())
            }
            _ => satisfied.push(format!("{listed}@{have}")),
        }
    }
    let satisfied_msg = format!(
        "Package(s) '{}' satisfied by {}",
        pkg_list.join(", "),
        satisfied.join(", ")
    );
    let new_changes = |ret: &mut StateResult, list: &[String]| {
        ret.changes.insert("old".into(), Value::Array(Vec::new()));
        ret.changes.insert(
            "new".into(),
            Value::Array(list.iter().cloned().map(Value::from).collect()),
        );
    };
    if call.test {
        ret.result = None;
        let mut msg = Vec::new();
        if !to_install.is_empty() {
            msg.push(format!(
                "NPM package(s) '{}' are set to be installed",
                to_install.join(", ")
            ));
            new_changes(&mut ret, &to_install);
        }
        if !satisfied.is_empty() {
            msg.push(satisfied_msg);
            ret.result = Some(true);
        }
        ret.comment = msg.join(". ");
        return Ok(ret);
    }
    if to_install.is_empty() {
        ret.comment = satisfied_msg;
        return Ok(ret);
    }
    let registry = call.arg_str("registry")?;
    if let Err(e) = npm.install(&pkg_list, registry.as_deref(), false, true) {
        return Ok(StateResult::fail(
            &name,
            format!("Error installing '{}': {e}", pkg_list.join(", ")),
        ));
    }
    new_changes(&mut ret, &to_install);
    ret.comment = format!(
        "Package(s) '{}' successfully installed",
        to_install.join(", ")
    );
    Ok(ret)
}

/// Salt's `npm.removed`: `dir`, `user`.
fn removed(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(call, &["dir", "user"])?;
    let name = call.name().to_string();
    let npm = npm_of(call, call.arg_str("dir")?)?;
    let mut ret = StateResult::ok(&name, "");
    let installed = match npm.list(None, Some(0)) {
        Ok(i) => i,
        Err(e) => {
            return Ok(StateResult::fail(
                &name,
                format!("Error uninstalling '{name}': {e}"),
            ))
        }
    };
    if !installed.contains_key(&name) {
        ret.comment = format!("Package '{name}' is not installed");
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment = format!("Package '{name}' is set to be removed");
        return Ok(ret);
    }
    if npm
        .uninstall(&name)
        .map_err(|e| StateError::Other(e.to_string()))?
    {
        ret.changes.insert(name.clone(), Value::from("Removed"));
        ret.comment = format!("Package '{name}' was successfully removed");
    } else {
        ret.result = Some(false);
        ret.comment = format!("Error removing package '{name}'");
    }
    Ok(ret)
}

/// Whether npm's JSON report says it changed nothing (npm 7 and later
/// always print a report; an empty one is Salt's "nothing to do").
fn did_nothing(report: &Value) -> bool {
    match report {
        Value::Object(m) => ["added", "changed", "removed"]
            .iter()
            .all(|k| m.get(*k).and_then(Value::as_i64).unwrap_or(0) == 0),
        other => !crate::exec::py_truth(other),
    }
}

/// Salt's `npm.bootstrap`: `npm install` in the project directory `name`
/// (`user`, `silent`).
fn bootstrap(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(call, &["user", "silent", "env"])?;
    let name = call.name().to_string();
    let npm = npm_of(call, Some(name.clone()))?;
    let silent = call.arg_bool("silent", true);
    let mut ret = StateResult::ok(&name, "");
    if call.test {
        match npm.install(&[], None, true, silent) {
            Ok(report) if !did_nothing(&report) => {
                ret.result = None;
                let new = report.get("add").cloned().unwrap_or(report);
                ret.changes.insert("old".into(), Value::Array(Vec::new()));
                ret.changes.insert("new".into(), new);
                ret.comment = format!("{name} is set to be bootstrapped");
            }
            Ok(_) => ret.comment = format!("{name} is already bootstrapped"),
            Err(e) => {
                ret.result = Some(false);
                ret.comment = format!("Error Bootstrapping '{name}': {e}");
            }
        }
        return Ok(ret);
    }
    let report = match npm.install(&[], None, false, silent) {
        Ok(r) => r,
        Err(e) => {
            return Ok(StateResult::fail(
                &name,
                format!("Error Bootstrapping '{name}': {e}"),
            ))
        }
    };
    if did_nothing(&report) {
        ret.comment = "Directory is already bootstrapped".into();
        return Ok(ret);
    }
    if let Value::String(text) = &report {
        // npm printed something that is not its JSON report.
        ret.result = Some(false);
        ret.changes
            .insert("output".into(), Value::from(text.clone()));
        ret.comment = "Could not bootstrap directory".into();
        return Ok(ret);
    }
    ret.changes
        .insert(name.clone(), Value::from("Bootstrapped"));
    ret.comment = "Directory was successfully bootstrapped".into();
    Ok(ret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_split_like_salts_regex() {
        assert_eq!(split_spec("coffee-script"), ("coffee-script".into(), None));
        assert_eq!(
            split_spec("buffer-equal@1.0.1"),
            ("buffer-equal".into(), Some("1.0.1".into()))
        );
        assert_eq!(
            split_spec("@google-cloud/bigquery@^0.9.6"),
            ("@google-cloud/bigquery".into(), Some("^0.9.6".into()))
        );
        assert_eq!(split_spec("@foobar"), ("@foobar".into(), None));
    }
}
