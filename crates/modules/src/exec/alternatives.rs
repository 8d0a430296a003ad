//! Salt's `alternatives` execution module: `show_current`, which formulas
//! call at render time (php-formula: `salt['alternatives.show_current']('php')`),
//! and the rest over the real `update-alternatives` (`alternatives` on
//! RedHat): `display`, `show_link`, `check_exists`, `check_installed`,
//! `install`, `remove`, `auto`, `set`, which the `alternatives` states use.

use std::path::Path;

use halite_state::Value;

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// Where Debian's update-alternatives keeps its links.
const ALTERNATIVES_DIR: &str = "/etc/alternatives";

/// The target of `/etc/alternatives/<name>` as `os.readlink` gives it
/// (not canonicalised), or `False` when it is not a link, as Salt returns.
pub fn show_current(dir: &Path, name: &str) -> Value {
    // Salt joins the name blindly; a name that is not one path component
    // cannot be an alternative, so it reads as absent.
    if name.is_empty() || name.contains('/') || name == "." || name == ".." || name.contains('\0') {
        return Value::Bool(false);
    }
    match std::fs::read_link(dir.join(name)) {
        Ok(target) => Value::from(target.to_string_lossy().into_owned()),
        Err(_) => {
            tracing::error!("alternative: {name} does not exist");
            Value::Bool(false)
        }
    }
}

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "alternatives",
    functions: &[
        ExecFunction::new("show_current", show_current_fn),
        ExecFunction::new("display", |a, h| call_more("display", a, h)),
        ExecFunction::new("show_link", |a, h| call_more("show_link", a, h)),
        ExecFunction::new("check_exists", |a, h| call_more("check_exists", a, h)),
        ExecFunction::new("check_installed", |a, h| call_more("check_installed", a, h)),
        ExecFunction::new("install", |a, h| call_more("install", a, h)),
        ExecFunction::new("remove", |a, h| call_more("remove", a, h)),
        ExecFunction::new("auto", |a, h| call_more("auto", a, h)),
        ExecFunction::new("set", |a, h| call_more("set", a, h)),
    ],
};

/// `alternatives.show_current <name>`: the current target of an alternative.
fn show_current_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "show_current")?;
    Ok(show_current(Path::new(ALTERNATIVES_DIR), &name))
}

/// The command: `alternatives` on RedHat, `update-alternatives` elsewhere.
fn command(grains: &Value) -> &'static str {
    if grains.get("os_family").and_then(Value::as_str) == Some("RedHat") {
        "alternatives"
    } else {
        "update-alternatives"
    }
}

/// Runs the command; Salt answers its stderr when it fails with one
/// (`fail_on_stderr`), else its stdout.
fn run_alt(grains: &Value, args: &[&str], any_failure: bool) -> Result<String, ExecError> {
    let mut argv = vec![command(grains)];
    argv.extend_from_slice(args);
    let ran = crate::exec::user::run(&argv)?;
    if ran.retcode > 0 && (any_failure || !ran.stderr.is_empty()) {
        return Ok(ran.stderr);
    }
    Ok(ran.stdout)
}

/// `update-alternatives --display <name>`: its text (stderr on failure).
pub fn display(grains: &Value, name: &str) -> Result<String, ExecError> {
    run_alt(grains, &["--display", name], false)
}

/// Salt's `check_exists`: whether `path` is registered for `name` (a line
/// of `--display` starts with it).
pub fn check_exists(grains: &Value, name: &str, path: &str) -> Result<bool, ExecError> {
    let ran = crate::exec::user::run(&[command(grains), "--display", name])?;
    if ran.retcode > 0 && !ran.stderr.is_empty() {
        return Ok(false);
    }
    Ok(ran.stdout.lines().any(|l| l.starts_with(path)))
}

/// Salt's `check_installed`: whether `/etc/alternatives/<name>` points at `path`.
pub fn check_installed(name: &str, path: &str) -> bool {
    show_current(Path::new(ALTERNATIVES_DIR), name).as_str() == Some(path)
}

/// Salt's `show_link` on Debian: the `Link:` of `--query`'s first block.
fn show_link(grains: &Value, name: &str) -> Result<Value, ExecError> {
    let ran = crate::exec::user::run(&[command(grains), "--query", name])?;
    if ran.retcode > 0 && !ran.stderr.is_empty() {
        return Ok(Value::Bool(false));
    }
    let first = ran.stdout.split("\n\n").next().unwrap_or("");
    Ok(first
        .lines()
        .find_map(|l| l.strip_prefix("Link:"))
        .map_or(Value::Bool(false), |l| Value::from(l.trim())))
}

/// `update-alternatives --install <link> <name> <path> <priority>`.
pub fn install(
    grains: &Value,
    name: &str,
    link: &str,
    path: &str,
    priority: &str,
) -> Result<String, ExecError> {
    run_alt(grains, &["--install", link, name, path, priority], false)
}

/// `--remove`, `--auto`, `--set`: stderr when they fail, else stdout.
pub fn action(grains: &Value, args: &[&str]) -> Result<String, ExecError> {
    run_alt(grains, args, true)
}

fn call_more(fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let grains = &host.grains;
    let name = args.require_str(0, "name", fun)?;
    let path = || args.require_str(1, "path", fun);
    match fun {
        "display" => display(grains, &name).map(Value::from),
        "show_link" => show_link(grains, &name),
        "check_exists" => check_exists(grains, &name, &path()?).map(Value::Bool),
        "check_installed" => Ok(Value::Bool(check_installed(&name, &path()?))),
        "install" => {
            let link = args.require_str(1, "link", fun)?;
            let target = args.require_str(2, "path", fun)?;
            let priority = args.require_str(3, "priority", fun)?;
            install(grains, &name, &link, &target, &priority).map(Value::from)
        }
        "remove" => action(grains, &["--remove", &name, &path()?]).map(Value::from),
        "auto" => action(grains, &["--auto", &name]).map(Value::from),
        "set" => action(grains, &["--set", &name, &path()?]).map(Value::from),
        other => Err(ExecError::NotAvailable(format!("alternatives.{other}"))),
    }
}
