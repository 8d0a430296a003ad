//! Salt's `kmod` execution module: kernel modules listed with `lsmod`,
//! loaded with `modprobe`, removed with `rmmod`, looked up under
//! `/lib/modules/<release>`, and persisted in `/etc/modules` (or
//! `/etc/modules-load.d/salt_managed.conf` on systemd hosts).

use std::collections::BTreeSet;
use std::path::Path;

use halite_state::{Map, Value};

use crate::exec::signature::{self, Signature};
use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "kmod",
    functions: &[
        ExecFunction::new("available", available_fn),
        ExecFunction::new("check_available", check_available_fn),
        ExecFunction::new("lsmod", lsmod_fn),
        ExecFunction::new("mod_list", mod_list_fn),
        ExecFunction::new("load", load_fn),
        ExecFunction::new("is_loaded", is_loaded_fn),
        ExecFunction::new("remove", remove_fn),
    ],
};

/// The Python signatures of the functions, for Salt's argument errors.
const SIGNATURES: &[Signature] = &[
    Signature::new("available", &[], &[]),
    Signature::new("check_available", &["mod"], &[]),
    Signature::new("lsmod", &[], &[]),
    Signature::new("mod_list", &[], &["only_persist"]),
    Signature::new("load", &["mod"], &["persist"]),
    Signature::new("is_loaded", &["mod"], &[]),
    Signature::new("remove", &["mod"], &["persist", "comment"]),
];

fn exec_err(msg: impl Into<String>) -> ExecError {
    ExecError::Execution(msg.into())
}

/// Salt's `_get_modules_conf`: where persisted modules are listed.
pub fn modules_conf(grains: &Value) -> &'static str {
    if grains.get("systemd").is_some() {
        "/etc/modules-load.d/salt_managed.conf"
    } else {
        "/etc/modules"
    }
}

fn run(prog: &str, args: &[&str]) -> Result<(i32, String, String), ExecError> {
    tracing::debug!(prog, ?args, "running");
    let out = std::process::Command::new(prog)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|_| exec_err(format!("Command '{prog}' cannot be found")))?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).trim_end().to_string(),
        String::from_utf8_lossy(&out.stderr).trim_end().to_string(),
    ))
}

/// Salt's `kmod.available`: every module of the running kernel, sorted.
pub fn available() -> Vec<String> {
    let release = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = Path::new("/lib/modules").join(release);
    let mut ret = Vec::new();
    if let Ok(text) = std::fs::read_to_string(dir.join("modules.builtin")) {
        for line in text.lines() {
            let base = line.rsplit('/').next().unwrap_or(line);
            ret.push(base.strip_suffix(".ko").unwrap_or(base).to_string());
        }
    }
    for entry in walkdir::WalkDir::new(&dir).into_iter().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(pos) = name.find(".ko") {
            ret.push(name[..pos].replace('-', "_"));
        }
    }
    ret.sort();
    ret
}

/// One `lsmod` row.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// The module name.
    pub module: String,
    /// Its size.
    pub size: String,
    /// How many modules use it.
    pub depcount: String,
    /// Which modules use it.
    pub deps: Vec<String>,
}

/// Salt's `kmod.lsmod`. A kernel without loadable modules (no
/// `/proc/modules`) has none loaded; Salt parses lsmod's error text into
/// bogus rows there.
pub fn lsmod() -> Result<Vec<Loaded>, ExecError> {
    let (rc, out, err) = run("lsmod", &[])?;
    if rc != 0 {
        tracing::warn!("lsmod failed: {err}{out}");
        return Ok(Vec::new());
    }
    Ok(out
        .lines()
        .filter_map(|line| {
            let comps: Vec<&str> = line.split_whitespace().collect();
            if comps.len() <= 2 || comps[0] == "Module" {
                return None;
            }
            Some(Loaded {
                module: comps[0].into(),
                size: comps[1].into(),
                depcount: comps[2].into(),
                deps: comps
                    .get(3)
                    .map(|d| d.split(',').map(str::to_string).collect())
                    .unwrap_or_default(),
            })
        })
        .collect())
}

/// Salt's `kmod.mod_list`: loaded modules, or (`only_persist`) those
/// listed in `conf`.
pub fn mod_list(only_persist: bool, conf: &str) -> Result<Vec<String>, ExecError> {
    let mut mods = BTreeSet::new();
    if only_persist {
        if let Ok(text) = std::fs::read_to_string(conf) {
            for line in text.lines().map(str::trim) {
                if let Some(name) = line.split_whitespace().next() {
                    if !line.starts_with('#') {
                        mods.insert(name.to_string());
                    }
                }
            }
        }
    } else {
        mods.extend(lsmod()?.into_iter().map(|m| m.module));
    }
    Ok(mods.into_iter().collect())
}

fn names(mods: &[Loaded]) -> BTreeSet<String> {
    mods.iter().map(|m| m.module.clone()).collect()
}

/// Adds `module` to `conf` (uncommenting it when commented out).
fn set_persistent(module: &str, conf: &str) -> Result<BTreeSet<String>, ExecError> {
    let Some(name) = module.split_whitespace().next() else {
        return Ok(BTreeSet::new());
    };
    if mod_list(true, conf)?.iter().any(|m| m == name) || !available().iter().any(|m| m == name) {
        return Ok(BTreeSet::new());
    }
    let text = std::fs::read_to_string(conf).unwrap_or_default();
    let mut found = false;
    let mut lines: Vec<String> = text
        .lines()
        .map(|l| {
            let bare = l.trim_start_matches('#').trim();
            if !found && l.starts_with('#') && bare == module {
                found = true;
                module.to_string()
            } else {
                l.to_string()
            }
        })
        .collect();
    if !found {
        lines.push(module.to_string());
    }
    std::fs::write(conf, lines.join("\n") + "\n")
        .map_err(|e| exec_err(format!("Unable to write {conf}: {e}")))?;
    Ok(BTreeSet::from([name.to_string()]))
}

/// Comments `module` out of `conf` (or deletes it when `comment` is false).
fn remove_persistent(
    module: &str,
    comment: bool,
    conf: &str,
) -> Result<BTreeSet<String>, ExecError> {
    let Some(name) = module.split_whitespace().next() else {
        return Ok(BTreeSet::new());
    };
    if !mod_list(true, conf)?.iter().any(|m| m == name) {
        return Ok(BTreeSet::new());
    }
    let text = std::fs::read_to_string(conf).unwrap_or_default();
    let lines: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let is_it = l.split_whitespace().next() == Some(module);
            match (is_it, comment) {
                (true, true) => Some(format!("#{l}")),
                (true, false) => None,
                _ => Some(l.to_string()),
            }
        })
        .collect();
    std::fs::write(conf, lines.join("\n") + "\n")
        .map_err(|e| exec_err(format!("Unable to write {conf}: {e}")))?;
    Ok(BTreeSet::from([name.to_string()]))
}

/// Salt's `kmod.load`: the modules it loaded (with dependencies), or
/// `Err(message)` when modprobe failed.
pub fn load(
    module: &str,
    persist: bool,
    conf: &str,
) -> Result<Result<Vec<String>, String>, ExecError> {
    let pre = names(&lsmod()?);
    let (rc, _, stderr) = run("modprobe", &[module])?;
    if rc != 0 {
        return Ok(Err(format!("Error loading module {module}: {stderr}")));
    }
    let mut mods: BTreeSet<String> = names(&lsmod()?).difference(&pre).cloned().collect();
    if persist {
        mods.extend(set_persistent(module, conf)?);
    }
    Ok(Ok(mods.into_iter().collect()))
}

/// Salt's `kmod.remove`: the modules it removed, or `Err(message)`.
pub fn remove(
    module: &str,
    persist: bool,
    comment: bool,
    conf: &str,
) -> Result<Result<Vec<String>, String>, ExecError> {
    let pre = names(&lsmod()?);
    let (rc, _, stderr) = run("rmmod", &[module])?;
    if rc != 0 {
        return Ok(Err(format!("Error removing module {module}: {stderr}")));
    }
    let mut mods: BTreeSet<String> = pre.difference(&names(&lsmod()?)).cloned().collect();
    if persist {
        mods.extend(remove_persistent(module, comment, conf)?);
    }
    Ok(Ok(mods.into_iter().collect()))
}

fn strings(v: Vec<String>) -> Value {
    Value::Array(v.into_iter().map(Value::from).collect())
}

fn available_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "available", args)?;
    Ok(strings(available()))
}

fn check_available_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "check_available", args)?;
    let m = args.require_str(0, "mod", "check_available")?;
    Ok(Value::Bool(available().contains(&m)))
}

fn lsmod_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "lsmod", args)?;
    Ok(Value::Array(
        lsmod()?
            .into_iter()
            .map(|m| {
                let mut o = Map::new();
                o.insert("size".into(), Value::from(m.size));
                o.insert("module".into(), Value::from(m.module));
                o.insert("depcount".into(), Value::from(m.depcount));
                o.insert("deps".into(), strings(m.deps));
                Value::Object(o)
            })
            .collect(),
    ))
}

fn mod_list_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "mod_list", args)?;
    mod_list(
        args.get_bool(0, "only_persist", false),
        modules_conf(&host.grains),
    )
    .map(strings)
}

fn is_loaded_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "is_loaded", args)?;
    let m = args.require_str(0, "mod", "is_loaded")?;
    Ok(Value::Bool(mod_list(false, "")?.contains(&m)))
}

fn load_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "load", args)?;
    let m = args.require_str(0, "mod", "load")?;
    let persist = args.get_bool(1, "persist", false);
    Ok(match load(&m, persist, modules_conf(&host.grains))? {
        Ok(mods) => strings(mods),
        Err(msg) => Value::from(msg),
    })
}

fn remove_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    signature::check(SIGNATURES, "remove", args)?;
    let m = args.require_str(0, "mod", "remove")?;
    let persist = args.get_bool(1, "persist", false);
    let comment = args.get_bool(2, "comment", true);
    Ok(
        match remove(&m, persist, comment, modules_conf(&host.grains))? {
            Ok(mods) => strings(mods),
            Err(msg) => Value::from(msg),
        },
    )
}
