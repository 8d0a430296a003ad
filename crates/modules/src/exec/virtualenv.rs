//! Salt's `virtualenv` execution module: `virtualenv.create` with the
//! standard library's `venv` (`python3 -m venv`, what Salt falls back to
//! when no `virtualenv` binary is installed), an interpreter given as
//! `venv_bin`, or a `virtualenv` binary.

use std::path::Path;

use halite_state::{CmdOptions, Map, Value};

use crate::exec::cmd::{run_all_value, which};
use crate::exec::pip::run_argv;
use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "virtualenv",
    functions: &[ExecFunction::new("create", create_fn)],
};

/// What `virtualenv.create` takes besides the path.
#[derive(Debug, Clone, Default)]
pub struct CreateOpts {
    /// `venv`, a python interpreter, or a `virtualenv` binary; `None`
    /// asks the minion's `venv_bin` option, then looks for `virtualenv`.
    pub venv_bin: Option<String>,
    /// The interpreter of the new environment.
    pub python: Option<String>,
    /// `--system-site-packages`.
    pub system_site_packages: bool,
    /// `--clear`.
    pub clear: bool,
    /// `--prompt`.
    pub prompt: Option<String>,
    /// `--upgrade` (venv only).
    pub upgrade: Option<bool>,
    /// `--symlinks` (venv only).
    pub symlinks: Option<bool>,
    /// Who runs it.
    pub user: Option<String>,
}

/// Whether `bin` names a python interpreter (`python3`, `/usr/bin/python3.11`).
fn is_python_binary(bin: &str) -> bool {
    let base = Path::new(bin)
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    ["python", "pypy"].iter().any(|p| {
        base.strip_prefix(p).is_some_and(|rest| {
            rest.trim_end_matches(".exe")
                .chars()
                .all(|c| c.is_ascii_digit() || c == '.')
        })
    })
}

/// The command that creates `path` (Salt's `virtualenv.create` up to
/// running it), or Salt's error for options the tool does not have.
pub fn create_command(
    path: &str,
    opts: &CreateOpts,
    default_bin: Option<&str>,
) -> Result<Vec<String>, ExecError> {
    let venv_bin = opts
        .venv_bin
        .clone()
        .or_else(|| default_bin.map(String::from))
        .or_else(|| which("virtualenv"))
        .unwrap_or_else(|| "venv".to_string());
    let python = opts.python.as_deref().filter(|p| !p.trim().is_empty());
    let missing = |p: &str| ExecError::Execution(format!("Cannot find requested python ({p})."));
    let mut cmd: Vec<String>;
    let via_interpreter = venv_bin == "venv" || is_python_binary(&venv_bin);
    if venv_bin == "venv" {
        let interpreter = match python {
            Some(p) => which(p).ok_or_else(|| missing(p))?,
            None => which("python3").unwrap_or_else(|| "python3".into()),
        };
        cmd = vec![interpreter, "-m".into(), "venv".into()];
    } else if is_python_binary(&venv_bin) {
        if python.is_some() {
            return Err(ExecError::Execution(
                "Pass the target interpreter either as `venv_bin` or as `python`, not both.".into(),
            ));
        }
        let found = which(&venv_bin).ok_or_else(|| missing(&venv_bin))?;
        cmd = vec![found, "-m".into(), "venv".into()];
    } else {
        cmd = vec![venv_bin.clone()];
    }
    if !via_interpreter && !venv_bin.contains("venv") {
        // A virtualenv binary.
        if opts.upgrade.is_some() {
            return Err(ExecError::Execution(format!(
                "The `upgrade`(`--upgrade`) option is not supported by '{venv_bin}'"
            )));
        }
        if opts.symlinks.is_some() {
            return Err(ExecError::Execution(format!(
                "The `symlinks`(`--symlinks`) option is not supported by '{venv_bin}'"
            )));
        }
        if let Some(p) = python {
            which(p).ok_or_else(|| missing(p))?;
            cmd.push(format!("--python={p}"));
        }
        if let Some(prompt) = opts.prompt.as_deref().filter(|p| !p.trim().is_empty()) {
            cmd.push(format!("--prompt='{prompt}'"));
        }
    } else {
        if !via_interpreter && python.is_some() {
            return Err(ExecError::Execution(format!(
                "The `python`(`--python`) option is not supported by '{venv_bin}'"
            )));
        }
        if opts.upgrade == Some(true) {
            cmd.push("--upgrade".into());
        }
        if opts.symlinks == Some(true) {
            cmd.push("--symlinks".into());
        }
        if let Some(prompt) = opts.prompt.as_deref().filter(|p| !p.trim().is_empty()) {
            cmd.extend(["--prompt".into(), prompt.to_string()]);
        }
    }
    if opts.clear {
        cmd.push("--clear".into());
    }
    if opts.system_site_packages {
        cmd.push("--system-site-packages".into());
    }
    cmd.push(path.to_string());
    Ok(cmd)
}

/// Creates the environment; `cmd.run_all`'s dict. A failed run removes
/// what it left of a new environment, so a later run does not take it
/// for a working one.
pub fn create(path: &str, opts: &CreateOpts, host_opts: &Value) -> Result<Map, ExecError> {
    let default_bin = host_opts.get("venv_bin").and_then(Value::as_str);
    let cmd = create_command(path, opts, default_bin)?;
    let preexisting = Path::new(path).exists();
    let out = run_argv(
        &cmd,
        CmdOptions {
            runas: opts.user.clone(),
            ..CmdOptions::default()
        },
    )?;
    if out.retcode != 0 && !preexisting && Path::new(path).is_dir() {
        if let Err(e) = std::fs::remove_dir_all(path) {
            tracing::warn!("removing the partly created virtualenv {path}: {e}");
        }
    }
    Ok(match run_all_value(&out) {
        Value::Object(m) => m,
        _ => Map::new(),
    })
}

/// Reads `virtualenv.create`'s keyword arguments through `get`.
pub fn create_opts(get: &dyn Fn(&str) -> Option<Value>) -> CreateOpts {
    let s = |k: &str| {
        get(k).and_then(|v| match v {
            Value::Null => None,
            Value::String(s) => Some(s),
            other => Some(crate::exec::py_str(&other)),
        })
    };
    // Salt tests these with `is True`.
    let strict = |k: &str| matches!(get(k), Some(Value::Bool(true)));
    let opt_bool = |k: &str| match get(k) {
        Some(Value::Bool(b)) => Some(b),
        _ => None,
    };
    CreateOpts {
        venv_bin: s("venv_bin"),
        python: s("python"),
        system_site_packages: strict("system_site_packages"),
        clear: strict("clear"),
        prompt: s("prompt"),
        upgrade: opt_bool("upgrade"),
        symlinks: opt_bool("symlinks"),
        user: s("user"),
    }
}

/// `virtualenv.create <path> [venv_bin] ...`.
fn create_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let path = args.require_str(0, "path", "create")?;
    let opts = create_opts(&|k| match k {
        "venv_bin" => args.get(1, k).cloned(),
        _ => args.kwargs.get(k).cloned(),
    });
    let default_bin = host
        .pillar
        .get("venv_bin")
        .and_then(Value::as_str)
        .map(String::from)
        .map(Value::from);
    let mut host_opts = host.opts.clone();
    if let (Some(bin), Value::Object(m)) = (default_bin, &mut host_opts) {
        m.insert("venv_bin".into(), bin);
    }
    create(&path, &opts, &host_opts).map(Value::Object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn venv_command_lines() {
        let opts = CreateOpts {
            venv_bin: Some("venv".into()),
            system_site_packages: true,
            clear: true,
            ..CreateOpts::default()
        };
        let cmd = create_command("/tmp/halite-t-venv", &opts, None).unwrap();
        assert_eq!(
            cmd[1..],
            [
                "-m",
                "venv",
                "--clear",
                "--system-site-packages",
                "/tmp/halite-t-venv"
            ]
        );
        let opts = CreateOpts {
            venv_bin: Some("venv".into()),
            python: Some("halite-t-no-such-python".into()),
            ..CreateOpts::default()
        };
        assert_eq!(
            create_command("/x", &opts, None).unwrap_err().to_string(),
            "Cannot find requested python (halite-t-no-such-python)."
        );
        let opts = CreateOpts {
            venv_bin: Some("python3".into()),
            python: Some("python3".into()),
            ..CreateOpts::default()
        };
        assert!(create_command("/x", &opts, None)
            .unwrap_err()
            .to_string()
            .contains("not both"));
        assert!(is_python_binary("/usr/bin/python3.11"));
        assert!(!is_python_binary("/usr/bin/virtualenv"));
    }
}
