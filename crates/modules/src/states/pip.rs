//! Salt's `pip` state (`pip_state.py`): `pip.installed`, `pip.removed`,
//! `pip.uptodate`, with Salt's comments and `changes` (`{"name==ver":
//! "Installed"}`), over the `pip` execution module's Rust functions.
//!
//! `pip.installed` runs in named phases: [`resolve`] the package lines,
//! [`check`] them against `pip list`, [`act`] (one `pip install`) and
//! [`report`] what the install did.

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::pip::requirement::{self, Requirement};
use crate::exec::pip::{self as pip, InstallOpts, PipEnv, PreReleases};
use crate::exec::ExecError;

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "pip",
    functions: &[
        StateFunction::new("installed", installed),
        StateFunction::new("removed", removed),
        StateFunction::new("uptodate", uptodate),
    ],
};

/// The chunk as a lookup for the exec module's option readers, with
/// `pip_bin` standing in for a missing `bin_env` as Salt does.
fn lookup<'a>(call: &'a StateCall<'a>) -> impl Fn(&str) -> Option<Value> + 'a {
    move |k| match k {
        "bin_env" => call.arg("bin_env").or_else(|| call.arg("pip_bin")).cloned(),
        "saltenv" => Some(Value::from(call.chunk.env())),
        _ => call.arg(k).cloned(),
    }
}

fn exec_err(e: ExecError) -> StateError {
    StateError::Other(e.to_string())
}

/// One package of `name`/`pkgs`: its line as given and what it parses to.
struct Wanted {
    line: String,
    req: Requirement,
}

/// Phase 1: the package lines (`pkgs`, else `name`), a mapping entry
/// `{name: spec}` read as `"name spec"`.
fn package_lines(call: &StateCall<'_>) -> Result<Vec<String>, String> {
    let Some(pkgs) = call.arg("pkgs").filter(|v| crate::exec::py_truth(v)) else {
        return Ok(vec![call.name().to_string()]);
    };
    let Value::Array(items) = pkgs else {
        return Err("pkgs argument must be formatted as a list".to_string());
    };
    Ok(items
        .iter()
        .map(|p| match p {
            Value::String(s) => s.clone(),
            Value::Object(m) => m
                .iter()
                .next()
                .map(|(k, v)| format!("{k} {}", crate::exec::py_str(v)))
                .unwrap_or_default(),
            other => crate::exec::py_str(other),
        })
        .collect())
}

/// Phase 1b: every line parsed, or Salt's comments for the refused ones.
fn resolve(lines: &[String]) -> Result<Vec<Wanted>, String> {
    let mut wanted = Vec::new();
    let mut refused = Vec::new();
    for line in lines {
        match requirement::parse(line) {
            Ok(req) => wanted.push(Wanted {
                line: line.clone(),
                req,
            }),
            Err(comment) => refused.push(comment),
        }
    }
    if refused.is_empty() {
        Ok(wanted)
    } else {
        Err(refused.join("\n"))
    }
}

/// Salt's `_check_if_installed` for one package: `Some(comment)` when it
/// is already there as wanted, `None` when it must be installed.
fn already_installed(
    call: &StateCall<'_>,
    env: &PipEnv,
    wanted: &Wanted,
    installed: &Map,
) -> Result<Option<String>, ExecError> {
    let prefix = &wanted.req.prefix;
    let Some(current) = installed
        .iter()
        .find(|(k, _)| k.to_lowercase() == prefix.to_lowercase())
        .and_then(|(_, v)| v.as_str())
    else {
        return Ok(None);
    };
    if call.arg_bool("ignore_installed", false) || call.arg_bool("force_reinstall", false) {
        return Ok(None);
    }
    let specs = &wanted.req.specs;
    let upgrade = call.arg("upgrade").is_some_and(crate::exec::py_truth);
    let was_installed = format!("Python package {} was already installed", wanted.line);
    if !upgrade {
        return Ok(requirement::fulfills(current, specs).then_some(was_installed));
    }
    let has = |x: &str| specs.iter().any(|(_, v)| v.contains(x));
    let pre = PreReleases {
        alpha: has("a"),
        beta: has("b"),
        rc: has("rc"),
    };
    let index = call.arg_str("index_url").ok().flatten();
    let extra = call.arg_str("extra_index_url").ok().flatten();
    // Salt runs `pip index versions` without the state's env_vars.
    let plain = PipEnv {
        env_vars: Vec::new(),
        ..env.clone()
    };
    let available =
        pip::list_all_versions(&plain, prefix, pre, index.as_deref(), extra.as_deref())?
            .unwrap_or_default();
    let desired = available
        .iter()
        .rev()
        .find(|v| requirement::fulfills(v, specs))
        .cloned();
    let Some(desired) = desired else {
        return Ok(Some(format!(
            "Python package {prefix} was already installed and\nthe available upgrade doesn't fulfills the version requirements"
        )));
    };
    Ok(
        (requirement::compare(current, &desired) == Some(std::cmp::Ordering::Equal))
            .then_some(was_installed),
    )
}

/// What [`check`] found: the packages to install and the comments of
/// those already there.
struct Plan {
    targets: Vec<Wanted>,
    present: Vec<String>,
}

/// Phase 2: which packages `pip install` must get.
fn check(call: &StateCall<'_>, env: &PipEnv, wanted: Vec<Wanted>) -> Result<Plan, ExecError> {
    let installed = pip::list(env, None)?;
    let mut plan = Plan {
        targets: Vec::new(),
        present: Vec::new(),
    };
    for w in wanted {
        let found = if w.req.prefix.is_empty() {
            None
        } else {
            already_installed(call, env, &w, &installed)?
        };
        match found {
            Some(comment) => plan.present.push(comment),
            None => plan.targets.push(w),
        }
    }
    Ok(plan)
}

/// `pip.installed`: the packages of `name`/`pkgs`, a `requirements`
/// file or an `editable` checkout installed with pip.
fn installed(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let lines = match package_lines(call) {
        Ok(l) => l,
        Err(comment) => return Ok(StateResult::fail(call.name(), comment)),
    };
    let mut ret = StateResult::new(lines.join(";"), None);
    let get = lookup(call);
    let env = match PipEnv::from_lookup(&get) {
        Ok(e) => e,
        Err(e) => return Ok(fail(ret, e.to_string())),
    };
    // Salt asks the version as the minion's user, before checking `user`.
    let as_minion = PipEnv {
        user: None,
        env_vars: Vec::new(),
        ..env.clone()
    };
    if let Err(e) = pip::version(&as_minion) {
        return Ok(fail(
            ret,
            format!("Error installing '{}': {e}", call.name()),
        ));
    }
    // Every pip of today is past 9.0.3: Salt refuses these two options.
    for opt in ["use_wheel", "no_use_wheel"] {
        if call.arg(opt).is_some_and(crate::exec::py_truth) {
            let ver = pip::version(&env).ok().flatten().unwrap_or_default();
            return Ok(fail(
                ret,
                format!("The '{opt}' option is only supported in pip between 1.4 and 9.0.3. The version of pip detected was {ver}."),
            ));
        }
    }
    let requirements = call
        .arg("requirements")
        .filter(|v| crate::exec::py_truth(v));
    let editable = call.arg("editable").filter(|v| crate::exec::py_truth(v));
    let by_file = requirements.is_some() || editable.is_some();
    let wanted = if by_file {
        Vec::new()
    } else {
        match resolve(&lines) {
            Ok(w) => w,
            Err(comment) => return Ok(fail(ret, comment)),
        }
    };
    if let Some(user) = &env.user {
        if crate::exec::user::info(user).is_none() {
            return Ok(fail(ret, format!("User {user} does not exist")));
        }
    }
    let shown = |v: Option<&Value>| v.map(crate::exec::py_str).unwrap_or_default();
    let (targets, present) = if by_file {
        if call.test {
            let mut comments = Vec::new();
            if requirements.is_some() {
                comments.push(format!(
                    "Requirements file '{}' will be processed.",
                    shown(requirements)
                ));
            }
            if editable.is_some() {
                comments.push(format!(
                    "Package will be installed in editable mode (i.e. setuptools \"develop mode\") from {}.",
                    shown(editable)
                ));
            }
            ret.comment = comments.join(" ");
            return Ok(ret);
        }
        (Vec::new(), Vec::new())
    } else {
        let count = wanted.len();
        let all_lines: Vec<String> = wanted.iter().map(|w| w.line.clone()).collect();
        let plan = match check(call, &env, wanted) {
            Ok(p) => p,
            Err(e) => {
                return Ok(fail(
                    ret,
                    format!("Error installing '{}': {e}", call.name()),
                ))
            }
        };
        let upgrade = call.arg("upgrade").is_some_and(crate::exec::py_truth);
        if let (true, Some(first)) = (call.test, plan.targets.first()) {
            ret.comment = if count > 1 {
                format!(
                    "Python package(s) set to be installed:\n{}",
                    all_lines.join("\n")
                )
            } else {
                format!("Python package {} is set to be installed", first.line)
            };
            return Ok(ret);
        }
        if plan.targets.is_empty() {
            ret.result = Some(true);
            ret.comment = with_present(
                &plan.present,
                &format!(
                    "All specified packages are already installed{}",
                    if upgrade { " and up-to-date" } else { "" }
                ),
            );
            return Ok(ret);
        }
        (plan.targets, plan.present)
    };
    act(call, &env, ret, &lines, targets, present)
}

/// `comment` after the "already installed" lines, as Salt joins them.
fn with_present(present: &[String], comment: &str) -> String {
    if present.is_empty() {
        comment.to_string()
    } else {
        format!("{}\n{comment}", present.join("\n"))
    }
}

fn fail(mut ret: StateResult, comment: String) -> StateResult {
    ret.result = Some(false);
    ret.comment = comment;
    ret
}

/// Phase 3: one `pip install` of the targets (or of the requirements
/// file / editable checkout), then [`report`].
fn act(
    call: &StateCall<'_>,
    env: &PipEnv,
    mut ret: StateResult,
    lines: &[String],
    targets: Vec<Wanted>,
    present: Vec<String>,
) -> Result<StateResult, StateError> {
    let get = lookup(call);
    let pkgs: Vec<String> = targets.iter().map(|t| t.line.replace(',', ";")).collect();
    let install_get = |k: &str| match k {
        "pkgs" => Some(Value::from(pkgs.clone())),
        "disable_version_check" => Some(Value::Bool(true)),
        _ => get(k),
    };
    let outcome = InstallOpts::from_lookup(&install_get)
        .and_then(|opts| pip::install(env, &opts, call.env.file_client()));
    let out = match outcome {
        Ok(out) => out,
        Err(e) => return Ok(fail(ret, with_present(&present, &e.to_string()))),
    };
    let text = |k: &str| {
        out.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let requirements = call
        .arg("requirements")
        .filter(|v| crate::exec::py_truth(v));
    let editable = call.arg("editable").filter(|v| crate::exec::py_truth(v));
    let shown = |v: Option<&Value>| v.map(crate::exec::py_str).unwrap_or_default();
    if out.get("retcode").and_then(Value::as_i64) != Some(0) {
        let error = if out.contains_key("stdout") {
            format!("Error: {} {}", text("stdout"), text("stderr"))
        } else {
            format!("Error: {}", text("comment"))
        };
        ret.result = Some(false);
        ret.comment = if requirements.is_some() || editable.is_some() {
            let mut comments = Vec::new();
            if requirements.is_some() {
                comments.push(format!(
                    "Unable to process requirements file \"{}\"",
                    shown(requirements)
                ));
            }
            if editable.is_some() {
                comments.push(format!(
                    "Unable to install from VCS checkout {}.",
                    shown(editable)
                ));
            }
            comments.push(error);
            comments.join(" ")
        } else {
            let names: Vec<&str> = targets.iter().map(|t| t.line.as_str()).collect();
            with_present(
                &present,
                &format!("Failed to install packages: {}. {error}", names.join(", ")),
            )
        };
        return Ok(ret);
    }
    ret.result = Some(true);
    if requirements.is_some() || editable.is_some() {
        let mut comments = Vec::new();
        if requirements.is_some() {
            if requirements_changed(&text("stdout")) {
                ret.changes.insert("requirements".into(), Value::Bool(true));
                comments.push(format!(
                    "Successfully processed requirements file {}.",
                    shown(requirements)
                ));
            } else {
                comments.push("Requirements were already installed.".to_string());
            }
        }
        if editable.is_some() {
            comments.push(format!(
                "Package successfully installed from VCS checkout {}.",
                shown(editable)
            ));
            ret.changes.insert("editable".into(), Value::Bool(true));
        }
        ret.comment = comments.join(" ");
        return Ok(ret);
    }
    report(env, ret, lines, &targets, &present, &text("stdout"))
}

/// Whether `pip install -r` output shows a change: a line that is none
/// of pip's "nothing to do" lines (Salt's `PIP_REQUIREMENTS_NOCHANGE`).
fn requirements_changed(stdout: &str) -> bool {
    const NO_CHANGE: [&str; 7] = [
        "Requirement already satisfied",
        "Requirement already up-to-date",
        "Requirement not upgraded",
        "Collecting",
        "Cloning",
        "Cleaning up...",
        "Looking in indexes",
    ];
    stdout
        .split('\n')
        .any(|line| !NO_CHANGE.iter().any(|p| line.trim().starts_with(p)))
}

/// Phase 4: `changes` from `pip list` after the install, a package pip
/// said was "already satisfied" left out.
fn report(
    env: &PipEnv,
    mut ret: StateResult,
    lines: &[String],
    targets: &[Wanted],
    present: &[String],
    stdout: &str,
) -> Result<StateResult, StateError> {
    let satisfied: Vec<String> = stdout
        .split('\n')
        .filter_map(|l| {
            l.strip_prefix("Requirement already satisfied: ")
                .or_else(|| l.strip_prefix("Requirement already up-to-date: "))
        })
        .filter_map(|rest| rest.split_whitespace().next())
        .map(|s| pip::normalize(s.split(['=', '!', '<', '>', '~', '@']).next().unwrap_or(s)))
        .collect();
    let mut missing = Vec::new();
    for t in targets {
        if t.req.prefix.is_empty() {
            ret.changes.insert(
                format!("{}==???", t.line.replace(',', ";")),
                Value::from("Installed"),
            );
            continue;
        }
        let found = pip::list(env, Some(&t.req.prefix)).map_err(exec_err)?;
        if found.is_empty() {
            // Salt names the last package line here.
            missing.push(format!(
                "There was no error installing package '{}' although it does not show when calling 'pip.freeze'.",
                lines.last().map(String::as_str).unwrap_or_default()
            ));
            continue;
        }
        let hit = found
            .iter()
            .find(|(k, _)| k.to_lowercase() == t.req.prefix.to_lowercase());
        if let Some((_, ver)) = hit {
            if !satisfied.contains(&t.req.prefix) {
                ret.changes.insert(
                    format!("{}=={}", t.req.prefix, crate::exec::py_str(ver)),
                    Value::from("Installed"),
                );
            }
        }
    }
    let success = if missing.is_empty() {
        "All packages were successfully installed".to_string()
    } else {
        missing.join("\n")
    };
    ret.comment = with_present(present, &success);
    Ok(ret)
}

/// `pip.removed`: the package uninstalled.
fn removed(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let get = lookup(call);
    let env = PipEnv::from_lookup(&|k| match k {
        "env_vars" => None,
        _ => get(k),
    })
    .map_err(exec_err)?;
    let installed = match pip::list(&env, None) {
        Ok(l) => l,
        Err(e) => {
            return Ok(StateResult::fail(
                &name,
                format!("Error uninstalling '{name}': {e}"),
            ))
        }
    };
    if !installed.contains_key(&name) {
        return Ok(StateResult::ok(&name, "Package is not installed."));
    }
    if call.test {
        return Ok(StateResult::would_change(
            &name,
            format!("Package {name} is set to be removed"),
            Map::new(),
        ));
    }
    let requirements: Vec<String> = call
        .arg_list("requirements")
        .iter()
        .map(crate::exec::py_str)
        .collect();
    match pip::uninstall(
        &env,
        std::slice::from_ref(&name),
        &requirements,
        call.env.file_client(),
        call.chunk.env(),
    ) {
        Ok(_) => Ok(StateResult::ok(&name, "Package was successfully removed.")
            .with_change(&name, Value::from("Removed"))),
        Err(e) => {
            tracing::warn!("pip uninstall {name}: {e}");
            Ok(StateResult::fail(&name, "Could not remove package."))
        }
    }
}

/// `pip.uptodate`: every outdated package of the environment upgraded.
fn uptodate(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let get = lookup(call);
    let env = PipEnv::from_lookup(&|k| match k {
        "env_vars" => None,
        _ => get(k),
    })
    .map_err(exec_err)?;
    let outdated = match pip::list_upgrades(&env) {
        Ok(p) => p,
        Err(e) => return Ok(StateResult::fail(&name, e.to_string())),
    };
    if outdated.is_empty() {
        return Ok(StateResult::ok(&name, "System is already up-to-date."));
    }
    if call.test {
        return Ok(StateResult::would_change(
            &name,
            "System update will be performed",
            Map::new(),
        ));
    }
    let updated = match pip::upgrade(&env) {
        Ok(u) => u,
        Err(e) => return Ok(StateResult::fail(&name, e.to_string())),
    };
    if updated.get("result") == Some(&Value::Bool(false)) {
        let mut ret = StateResult::fail(
            &name,
            updated
                .get("comment")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
        if let Some(Value::Object(c)) = updated.get("changes") {
            ret.changes = c.clone();
        }
        return Ok(ret);
    }
    // Salt puts pip.upgrade's whole return under `changes`.
    let mut ret = StateResult::ok(&name, "Upgrade successful.");
    ret.changes = updated;
    Ok(ret)
}
