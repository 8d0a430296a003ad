//! Salt's `virtualenv` state (`virtualenv_mod.py`): `virtualenv.managed`
//! creates (or clears) a virtualenv with `virtualenv.create`, then
//! installs `requirements` / `pip_pkgs` into it with `pip.install`,
//! reporting the packages `pip freeze` gained and lost.

use std::collections::BTreeSet;
use std::path::Path;

use halite_state::{
    CmdOptions, StateCall, StateError, StateFunction, StateResult, StateTable, Value,
};

use crate::exec::pip::{self as pip, InstallOpts, PipEnv};
use crate::exec::virtualenv as venv;

/// The module's table (`manage` is Salt's alias of `managed`).
pub const MODULE: StateTable = StateTable {
    name: "virtualenv",
    functions: &[
        StateFunction::new("managed", managed),
        StateFunction::new("manage", managed),
    ],
};

/// What `<venv>/bin/python -V` writes on stderr (Salt's
/// `cmd.run_stderr`: empty for Python 3, which prints on stdout).
fn python_stderr(venv_py: &str) -> String {
    crate::exec::pip::run_argv(
        &[venv_py.to_string(), "-V".to_string()],
        CmdOptions::default(),
    )
    .map(|o| o.stderr.trim_matches('\n').to_string())
    .unwrap_or_default()
}

/// `virtualenv.managed`.
fn managed(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let mut ret = StateResult::ok(&name, "");
    let venv_py = format!("{}/bin/python", name.trim_end_matches('/'));
    let exists = Path::new(&venv_py).exists();
    let clear = call.arg_bool("clear", false);
    let get = |k: &str| call.arg(k).cloned();
    // Resolve: a salt:// requirements file is fetched first.
    let mut requirements = call.arg("requirements").map(crate::exec::py_str);
    if let Some(req) = requirements.clone().filter(|r| r.starts_with("salt://")) {
        let cached = halite_state::strip_salt_url(&req).and_then(|(rel, env)| {
            call.env
                .file_client()
                .cache_file(rel, env.unwrap_or(call.chunk.env()))
                .ok()
                .flatten()
        });
        match cached {
            Some(path) => requirements = Some(path.to_string_lossy().into_owned()),
            None => {
                return Ok(StateResult::fail(
                    &name,
                    format!("pip requirements file '{req}' not found"),
                ))
            }
        }
    }
    let user = call.arg_str("user")?;
    let venv_env = PipEnv {
        bin_env: Some(name.clone()),
        user: user.clone(),
        ..PipEnv::default()
    };
    if exists && clear {
        let frozen = pip::freeze(&PipEnv {
            user: None,
            ..venv_env.clone()
        })
        .unwrap_or_default();
        ret.changes
            .insert("cleared_packages".into(), Value::from(frozen));
        ret.changes
            .insert("old".into(), Value::from(python_stderr(&venv_py)));
    }
    if call.test {
        ret.comment = match (exists, clear) {
            (true, true) => format!("Virtualenv {name} is set to be cleared"),
            (true, false) => format!("Virtualenv {name} is already created"),
            _ => format!("Virtualenv {name} is set to be created"),
        };
        if !exists || clear {
            ret.result = None;
        }
        return Ok(ret);
    }
    // Create (or clear).
    if !exists || clear {
        let opts = venv::create_opts(&get);
        let out = match venv::create(&name, &opts, call.env.opts()) {
            Ok(out) => out,
            Err(e) => {
                ret.result = Some(false);
                ret.comment = e.to_string();
                return Ok(ret);
            }
        };
        let text = |k: &str| {
            out.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        if out.get("retcode").and_then(Value::as_i64) != Some(0) {
            ret.result = Some(false);
            ret.comment = text("stdout") + &text("stderr");
            return Ok(ret);
        }
        ret.changes
            .insert("new".into(), Value::from(python_stderr(&venv_py)));
        ret.comment = if clear {
            "Cleared existing virtualenv"
        } else {
            "Created new virtualenv"
        }
        .to_string();
    } else {
        ret.comment = "virtualenv exists".to_string();
    }
    for opt in ["use_wheel", "no_use_wheel"] {
        if call.arg(opt).is_some_and(crate::exec::py_truth) {
            let ver = pip::version(&venv_env).ok().flatten().unwrap_or_default();
            ret.result = Some(false);
            ret.comment = format!("The '{opt}' option is only supported in pip between 1.4 and 9.0.3. The version of pip detected was {ver}.");
            return Ok(ret);
        }
    }
    let pip_pkgs = call
        .arg("pip_pkgs")
        .filter(|v| crate::exec::py_truth(v))
        .cloned();
    if requirements.is_none() && pip_pkgs.is_none() {
        return Ok(ret);
    }
    populate(call, ret, &venv_env, requirements, pip_pkgs)
}

/// Installs `requirements` / `pip_pkgs` into the environment; `changes`
/// gets the `pip freeze` lines gained (`new`) and lost (`old`).
fn populate(
    call: &StateCall<'_>,
    mut ret: StateResult,
    venv_env: &PipEnv,
    requirements: Option<String>,
    pip_pkgs: Option<Value>,
) -> Result<StateResult, StateError> {
    let before: BTreeSet<String> = match pip::freeze(venv_env) {
        Ok(f) => f.into_iter().collect(),
        Err(e) => {
            ret.result = Some(false);
            ret.comment = e.to_string();
            return Ok(ret);
        }
    };
    let mut cwd = call.arg_str("cwd")?;
    if let Some(first) = requirements.as_deref().and_then(|r| r.split(',').next()) {
        let path = Path::new(first);
        if !path.is_absolute() {
            let abs = std::env::current_dir().unwrap_or_default().join(path);
            cwd = abs.parent().map(|p| p.to_string_lossy().into_owned());
        }
    }
    let env = PipEnv {
        cwd,
        env_vars: PipEnv::from_lookup(&|k| call.arg(k).cloned())
            .map(|e| e.env_vars)
            .unwrap_or_default(),
        ..venv_env.clone()
    };
    // Salt's renamed arguments; the rest of the chunk goes to pip.install.
    let get = |k: &str| -> Option<Value> {
        match k {
            "pkgs" => pip_pkgs.clone(),
            "requirements" => requirements.clone().map(Value::from),
            "upgrade" => call.arg("pip_upgrade").cloned(),
            "download" => call.arg("pip_download").cloned(),
            "download_cache" => call.arg("pip_download_cache").cloned(),
            "exists_action" => call.arg("pip_exists_action").cloned(),
            "ignore_installed" => call.arg("pip_ignore_installed").cloned(),
            "no_cache_dir" => call.arg("pip_no_cache_dir").cloned(),
            "cache_dir" => call.arg("pip_cache_dir").cloned(),
            "saltenv" => Some(Value::from(call.chunk.env())),
            _ => call.arg(k).cloned(),
        }
    };
    let installed = InstallOpts::from_lookup(&get)
        .and_then(|opts| pip::install(&env, &opts, call.env.file_client()));
    let out = match installed {
        Ok(out) => out,
        Err(e) => {
            ret.result = Some(false);
            ret.comment = format!("{}\n{e}", ret.comment);
            return Ok(ret);
        }
    };
    let retcode = out.get("retcode").and_then(Value::as_i64).unwrap_or(1);
    if retcode != 0 {
        ret.result = Some(false);
        let text = |k: &str| {
            out.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        ret.comment = format!("{}\n{}\n{}", ret.comment, text("stdout"), text("stderr"));
    }
    let after: BTreeSet<String> = pip::freeze(&PipEnv {
        user: None,
        ..venv_env.clone()
    })
    .map(|f| f.into_iter().collect())
    .unwrap_or_default();
    let new: Vec<&String> = after.difference(&before).collect();
    let old: Vec<&String> = before.difference(&after).collect();
    if !new.is_empty() || !old.is_empty() {
        let side = |v: Vec<&String>| {
            if v.is_empty() {
                Value::from("")
            } else {
                Value::from(v.into_iter().cloned().collect::<Vec<_>>())
            }
        };
        let mut packages = halite_state::Map::new();
        packages.insert("new".into(), side(new));
        packages.insert("old".into(), side(old));
        ret.changes
            .insert("packages".into(), Value::Object(packages));
    }
    Ok(ret)
}
