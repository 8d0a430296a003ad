//! The `service` execution module over the host's init system: systemd
//! (`systemctl`) when systemd is PID 1, as Salt's `systemd_service`, else
//! SysV init scripts (`service`, `update-rc.d`, `/etc/rc?.d` links), as
//! Salt's `debian_service`. When systemd is installed but not running
//! (containers, image builds) systemd is driven "offline" as Salt 3008
//! does: unit files can be enabled, disabled and masked, but nothing can be
//! started or stopped. The minion config's `providers: {service: ...}`
//! picks one explicitly, as in Salt.

use std::path::Path;

use halite_state::{Map, Value};
use regex::Regex;

use crate::exec::user::{run, Ran};
use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// Which init system the service functions drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// `systemctl`, for hosts booted with systemd.
    Systemd,
    /// `systemctl` without a running systemd: unit files only (Salt's
    /// offline mode).
    SystemdOffline,
    /// SysV init scripts in `/etc/init.d`, run through `service`, enabled
    /// with `update-rc.d` (Debian's layout).
    SysV,
}

impl Provider {
    /// The provider for a host: `providers: {service: systemd|debian|sysvinit}`
    /// in `opts` when set, else systemd when it is running (Salt's
    /// `booted()`: `/run/systemd/system` exists), else offline systemd when
    /// `systemctl` is installed (Salt's `offline()`), else SysV.
    pub fn for_opts(opts: &Value) -> Provider {
        let booted = Path::new("/run/systemd/system").is_dir();
        let systemd = if booted {
            Provider::Systemd
        } else {
            Provider::SystemdOffline
        };
        match opts
            .get("providers")
            .and_then(|p| p.get("service"))
            .and_then(Value::as_str)
        {
            Some(name) if name.starts_with("systemd") => systemd,
            Some(_) => Provider::SysV,
            None if booted || crate::grains::hw::which("systemctl").is_some() => systemd,
            None => Provider::SysV,
        }
    }

    /// Whether services cannot be started or stopped (offline systemd).
    pub fn offline(self) -> bool {
        self == Provider::SystemdOffline
    }

    fn is_systemd(self) -> bool {
        matches!(self, Provider::Systemd | Provider::SystemdOffline)
    }

    /// Whether masking exists (systemd only; Salt's `service.masked`).
    pub fn can_mask(self) -> bool {
        self.is_systemd()
    }

    /// Whether this provider has a `full_restart` (Salt: not on systemd,
    /// whose `mod_watch` then falls back to a restart).
    pub fn has_full_restart(self) -> bool {
        self == Provider::SysV
    }
}

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "service",
    functions: &[
        ExecFunction::new("start", |a, h| action_fn("start", a, h)),
        ExecFunction::new("stop", |a, h| action_fn("stop", a, h)),
        ExecFunction::new("restart", |a, h| action_fn("restart", a, h)),
        ExecFunction::new("reload", |a, h| action_fn("reload", a, h)),
        ExecFunction::new("force_reload", |a, h| action_fn("force_reload", a, h)),
        ExecFunction::new("full_restart", |a, h| action_fn("full_restart", a, h)),
        ExecFunction::new("status", status_fn),
        ExecFunction::new("enabled", |a, h| enabled_fn("enabled", a, h)),
        ExecFunction::new("disabled", |a, h| enabled_fn("disabled", a, h)),
        ExecFunction::new("enable", enable_fn),
        ExecFunction::new("disable", disable_fn),
        ExecFunction::new("available", |a, h| available_fn("available", a, h)),
        ExecFunction::new("missing", |a, h| available_fn("missing", a, h)),
        ExecFunction::new("get_all", get_all_fn),
        ExecFunction::new("get_enabled", get_enabled_fn),
        ExecFunction::new("get_disabled", get_disabled_fn),
        ExecFunction::new("show", show_fn),
        ExecFunction::new("masked", masked_fn),
        ExecFunction::new("mask", |a, h| mask_fn("mask", a, h)),
        ExecFunction::new("unmask", |a, h| mask_fn("unmask", a, h)),
        ExecFunction::new("offline", offline_fn),
        ExecFunction::new("systemctl_reload", systemctl_reload_fn),
    ],
};

/// The host's init system and the `name` argument of `service.<fun>`.
fn provider_and_name(fun: &str, args: &Args, host: &Host) -> Result<(Provider, String), ExecError> {
    Ok((
        Provider::for_opts(&host.opts),
        args.require_str(0, "name", fun)?,
    ))
}

/// `service.start`, `stop`, `restart`, `reload`, `force_reload` and
/// `full_restart` (`fun`) `<name>`.
fn action_fn(fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let (p, name) = provider_and_name(fun, args, host)?;
    action(p, fun, &name).map(Value::Bool)
}

/// `service.status <name> [sig]`: whether it runs.
fn status_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let (p, name) = provider_and_name("status", args, host)?;
    status(p, &name, args.get_str(1, "sig").as_deref()).map(Value::Bool)
}

/// `service.enabled` and `service.disabled` (`fun`) `<name>`.
fn enabled_fn(fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let (p, name) = provider_and_name(fun, args, host)?;
    enabled(p, &name).map(|e| Value::Bool(if fun == "enabled" { e } else { !e }))
}

/// `service.enable <name>`.
fn enable_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let (p, name) = provider_and_name("enable", args, host)?;
    enable(p, &name).map(Value::Bool)
}

/// `service.disable <name>`.
fn disable_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let (p, name) = provider_and_name("disable", args, host)?;
    disable(p, &name).map(Value::Bool)
}

/// `service.available` and `service.missing` (`fun`) `<name>`.
fn available_fn(fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let (p, name) = provider_and_name(fun, args, host)?;
    available(p, &name).map(|a| Value::Bool(if fun == "available" { a } else { !a }))
}

/// `service.get_all`: every service.
fn get_all_fn(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    get_all(Provider::for_opts(&host.opts)).map(Value::from)
}

/// `service.get_enabled`: every enabled service.
fn get_enabled_fn(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    get_enabled(Provider::for_opts(&host.opts)).map(Value::from)
}

/// `service.get_disabled`: every service not enabled.
fn get_disabled_fn(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    let p = Provider::for_opts(&host.opts);
    let enabled = get_enabled(p)?;
    Ok(Value::from(
        get_all(p)?
            .into_iter()
            .filter(|s| !enabled.contains(s))
            .collect::<Vec<_>>(),
    ))
}

/// `service.show <name>`: the unit's properties.
fn show_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let (p, name) = provider_and_name("show", args, host)?;
    show(p, &name).map(Value::Object)
}

/// `service.masked <name> [runtime]`.
fn masked_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let (p, name) = provider_and_name("masked", args, host)?;
    masked(p, &name, args.get_bool(1, "runtime", false)).map(Value::Bool)
}

/// `service.mask` and `service.unmask` (`fun`) `<name> [runtime]`.
fn mask_fn(fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let (p, name) = provider_and_name(fun, args, host)?;
    mask(p, &name, args.get_bool(1, "runtime", false), fun == "mask").map(Value::Bool)
}

/// `service.offline`: whether systemd is driven without running.
fn offline_fn(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Bool(Provider::for_opts(&host.opts).offline()))
}

const UNIT_SUFFIXES: &[&str] = &[
    ".service",
    ".socket",
    ".device",
    ".mount",
    ".automount",
    ".swap",
    ".target",
    ".path",
    ".timer",
    ".slice",
    ".scope",
];

/// `nginx` -> `nginx.service`; names that already carry a unit type stay.
pub fn unit_name(name: &str) -> String {
    if UNIT_SUFFIXES.iter().any(|s| name.ends_with(s)) {
        name.to_string()
    } else {
        format!("{name}.service")
    }
}

/// Refuses names that would be read as options or leave `/etc/init.d`.
fn check_name(name: &str) -> Result<(), ExecError> {
    if name.is_empty() || name.starts_with('-') || name.contains('/') || name.contains('\0') {
        return Err(ExecError::Invocation(format!(
            "Invalid service name '{name}'"
        )));
    }
    Ok(())
}

fn systemctl(args: &[&str]) -> Result<Ran, ExecError> {
    let mut argv = vec!["systemctl"];
    argv.extend_from_slice(args);
    run(&argv)
}

/// Salt strips systemd's "Running scope as unit" noise from errors.
fn failure(out: &Ran) -> ExecError {
    let text = if out.stderr.is_empty() {
        &out.stdout
    } else {
        &out.stderr
    };
    let cleaned: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("Running scope as unit"))
        .collect();
    ExecError::Execution(cleaned.join("\n"))
}

/// Starts, stops, restarts or reloads `name`. On systemd a failure is an
/// error carrying systemctl's message (Salt raises there too); SysV
/// returns `false`.
pub fn action(p: Provider, verb: &str, name: &str) -> Result<bool, ExecError> {
    check_name(name)?;
    match p {
        Provider::SystemdOffline => Err(ExecError::Execution(format!(
            "Cannot {verb} {name}: systemd is not running on this host (offline mode), only unit files can be changed"
        ))),
        Provider::Systemd => {
            if verb == "full_restart" {
                return Ok(action(p, "stop", name)? && action(p, "start", name)?);
            }
            let sub = match verb {
                "force_reload" => "force-reload",
                other => other,
            };
            let unit = unit_name(name);
            let out = systemctl(&[sub, &unit])?;
            if out.retcode != 0 {
                return Err(failure(&out));
            }
            Ok(true)
        }
        Provider::SysV => {
            let sub = match verb {
                "force_reload" => "force-reload",
                "full_restart" => "--full-restart",
                other => other,
            };
            let out = run(&["service", name, sub])?;
            if out.retcode != 0 {
                tracing::info!(service = name, verb, stderr = %out.stderr, "service command failed");
            }
            Ok(out.retcode == 0)
        }
    }
}

/// Whether `name` is running: `systemctl is-active`, `service X status`,
/// or, with `sig`, whether a process whose command line matches `sig` exists.
pub fn status(p: Provider, name: &str, sig: Option<&str>) -> Result<bool, ExecError> {
    if let Some(sig) = sig.filter(|s| !s.is_empty()) {
        return Ok(run(&["pgrep", "-f", sig])?.retcode == 0);
    }
    check_name(name)?;
    Ok(match p {
        Provider::Systemd => systemctl(&["is-active", &unit_name(name)])?.retcode == 0,
        Provider::SystemdOffline => false,
        Provider::SysV => run(&["service", name, "status"])?.retcode == 0,
    })
}

/// The SysV runlevel whose `S` links count as enabled (Salt: `runlevel`,
/// `2` when unknown, e.g. in containers).
fn runlevel() -> String {
    match run(&["runlevel"]) {
        Ok(out) if !out.stdout.contains("unknown") => out
            .stdout
            .split_whitespace()
            .nth(1)
            .unwrap_or("2")
            .to_string(),
        _ => "2".to_string(),
    }
}

/// Services with an `S` link in `/etc/rcS.d` or the current runlevel's directory.
fn sysv_enabled_services() -> Vec<String> {
    let level = runlevel();
    let strip = Regex::new(r"^S\d*").ok();
    let mut out = std::collections::BTreeSet::new();
    for dir in ["/etc/rcS.d".to_string(), format!("/etc/rc{level}.d")] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            if !file.starts_with('S') {
                continue;
            }
            if let Some(re) = &strip {
                out.insert(re.replace(&file, "").into_owned());
            }
        }
    }
    out.into_iter().collect()
}

/// Whether `name` starts at boot.
pub fn enabled(p: Provider, name: &str) -> Result<bool, ExecError> {
    check_name(name)?;
    Ok(match p {
        Provider::Systemd | Provider::SystemdOffline => {
            systemctl(&["is-enabled", &unit_name(name)])?.retcode == 0
        }
        Provider::SysV => sysv_enabled_services().iter().any(|s| s == name),
    })
}

/// Makes `name` start at boot.
pub fn enable(p: Provider, name: &str) -> Result<bool, ExecError> {
    check_name(name)?;
    match p {
        Provider::Systemd | Provider::SystemdOffline => {
            let out = systemctl(&["enable", &unit_name(name)])?;
            if out.retcode != 0 {
                return Err(failure(&out));
            }
            Ok(true)
        }
        Provider::SysV => {
            // Salt runs `insserv X && update-rc.d X enable`; insserv is
            // optional on current Debian, `update-rc.d defaults` creates the
            // links from the script's LSB header in the same way.
            let defaults = run(&["update-rc.d", name, "defaults"])?;
            if defaults.retcode != 0 {
                return Err(failure(&defaults));
            }
            Ok(run(&["update-rc.d", name, "enable"])?.retcode == 0)
        }
    }
}

/// Stops `name` from starting at boot.
pub fn disable(p: Provider, name: &str) -> Result<bool, ExecError> {
    check_name(name)?;
    match p {
        Provider::Systemd | Provider::SystemdOffline => {
            let out = systemctl(&["disable", &unit_name(name)])?;
            if out.retcode != 0 {
                return Err(failure(&out));
            }
            Ok(true)
        }
        Provider::SysV => Ok(run(&["update-rc.d", name, "disable"])?.retcode == 0),
    }
}

/// Directories systemd loads unit files from, most specific first.
const UNIT_DIRS: &[&str] = &[
    "/etc/systemd/system",
    "/run/systemd/system",
    "/lib/systemd/system",
    "/usr/lib/systemd/system",
];

/// Whether the service exists.
pub fn available(p: Provider, name: &str) -> Result<bool, ExecError> {
    check_name(name)?;
    match p {
        Provider::Systemd | Provider::SystemdOffline => {
            let unit = unit_name(name);
            if UNIT_DIRS.iter().any(|d| Path::new(d).join(&unit).exists()) {
                return Ok(true);
            }
            if Path::new("/etc/init.d").join(name).is_file() {
                return Ok(true);
            }
            if Path::new("/run/systemd/system").is_dir() {
                // Generated and transient units: systemctl status exits 4 for unknown units.
                let out = systemctl(&["status", &unit, "-n", "0", "--no-pager"])?;
                return Ok((0..4).contains(&out.retcode));
            }
            Ok(false)
        }
        Provider::SysV => Ok(get_all(p)?.iter().any(|s| s == name)),
    }
}

fn sysv_scripts() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir("/etc/init.d")
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != "README")
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Every unit file as `systemctl list-unit-files` lists it: (name, state).
fn unit_files() -> Result<Vec<(String, String)>, ExecError> {
    let out = systemctl(&["list-unit-files", "--full", "--no-legend", "--no-pager"])?;
    Ok(out
        .stdout
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            Some((
                words.next()?.to_string(),
                words.next().unwrap_or("").to_string(),
            ))
        })
        .collect())
}

/// Salt's display name of a unit: `.service` dropped, other types kept.
fn display_name(unit: &str) -> String {
    unit.strip_suffix(".service").unwrap_or(unit).to_string()
}

/// Every service, sorted.
pub fn get_all(p: Provider) -> Result<Vec<String>, ExecError> {
    let mut all: std::collections::BTreeSet<String> = sysv_scripts().into_iter().collect();
    match p {
        Provider::Systemd | Provider::SystemdOffline => {
            all.extend(unit_files()?.into_iter().map(|(u, _)| display_name(&u)))
        }
        Provider::SysV => all.extend(sysv_enabled_services()),
    }
    Ok(all.into_iter().collect())
}

/// Every service that starts at boot, sorted.
pub fn get_enabled(p: Provider) -> Result<Vec<String>, ExecError> {
    match p {
        Provider::Systemd | Provider::SystemdOffline => {
            let mut out: Vec<String> = unit_files()?
                .into_iter()
                .filter(|(_, state)| state == "enabled")
                .map(|(u, _)| display_name(&u))
                .collect();
            out.sort();
            Ok(out)
        }
        Provider::SysV => Ok(sysv_enabled_services()),
    }
}

/// `systemctl show`: every property of the unit.
pub fn show(p: Provider, name: &str) -> Result<Map, ExecError> {
    check_name(name)?;
    if !p.is_systemd() {
        return Err(ExecError::Execution(
            "service.show needs systemd: this host runs SysV init scripts".into(),
        ));
    }
    let out = systemctl(&["show", &unit_name(name)])?;
    if out.retcode != 0 {
        return Err(failure(&out));
    }
    Ok(out
        .stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), Value::from(v)))
        .collect())
}

/// Whether the unit is masked: its unit file in `/etc` (or `/run` for
/// `runtime`) is a link to `/dev/null`, as Salt checks.
pub fn masked(p: Provider, name: &str, runtime: bool) -> Result<bool, ExecError> {
    check_name(name)?;
    if !p.can_mask() {
        return Err(ExecError::Execution(
            "Service masking not available on this minion".into(),
        ));
    }
    let dir = if runtime {
        "/run/systemd/system"
    } else {
        "/etc/systemd/system"
    };
    Ok(std::fs::read_link(Path::new(dir).join(unit_name(name)))
        .is_ok_and(|target| target == Path::new("/dev/null")))
}

/// `systemctl [un]mask [--runtime]`.
pub fn mask(p: Provider, name: &str, runtime: bool, on: bool) -> Result<bool, ExecError> {
    check_name(name)?;
    if !p.can_mask() {
        return Err(ExecError::Execution(
            "Service masking not available on this minion".into(),
        ));
    }
    let unit = unit_name(name);
    let mut args = vec![if on { "mask" } else { "unmask" }];
    if runtime {
        args.push("--runtime");
    }
    args.push(&unit);
    let out = systemctl(&args)?;
    if out.retcode != 0 {
        return Err(failure(&out));
    }
    Ok(true)
}

/// `service.systemctl_reload`: `systemctl --system daemon-reload`, needed
/// after unit files change; Salt's error carries systemctl's output.
fn systemctl_reload_fn(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let out = systemctl(&["--system", "daemon-reload"])?;
    if out.retcode != 0 {
        let text = [out.stdout.as_str(), out.stderr.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join("\n");
        return Err(ExecError::Execution(format!(
            "Problem performing systemctl daemon-reload: {text}"
        )));
    }
    Ok(Value::Bool(true))
}
