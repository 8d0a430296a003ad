//! Salt's `timezone` execution module on Linux: `get_zone`, `set_zone`,
//! `zone_compare`, `get_offset`, `get_zonecode`, `get_hwclock`,
//! `set_hwclock`. With a running systemd it goes through `timedatectl`, as
//! Salt does; where `timedatectl` cannot operate (systemd not PID 1:
//! containers, image builds) it uses the files Salt's Debian code reads and
//! writes (`/etc/timezone`, the `/etc/localtime` link, `/etc/adjtime`),
//! where Salt itself would fail on timedatectl's error.

use std::path::{Path, PathBuf};

use halite_state::Value;

use crate::exec::user::run;
use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "timezone",
    functions: &[
        ExecFunction::new("get_zone", get_zone_fn),
        ExecFunction::new("get_zonecode", get_zonecode_fn),
        ExecFunction::new("get_offset", get_offset_fn),
        ExecFunction::new("set_zone", set_zone_fn),
        ExecFunction::new("zone_compare", zone_compare_fn),
        ExecFunction::new("get_hwclock", get_hwclock_fn),
        ExecFunction::new("set_hwclock", set_hwclock_fn),
    ],
};

const LOCALTIME: &str = "/etc/localtime";
const ZONEINFO: &str = "/usr/share/zoneinfo/";
const ETC_TIMEZONE: &str = "/etc/timezone";
const ADJTIME: &str = "/etc/adjtime";

/// `timedatectl`'s output when it can operate (systemd running).
fn timedatectl() -> Option<String> {
    crate::grains::hw::which("timedatectl")?;
    let ran = run(&["timedatectl"]).ok()?;
    (ran.retcode == 0).then_some(ran.stdout)
}

fn is_debian(grains: &Value) -> bool {
    grains.get("os_family").and_then(Value::as_str) == Some("Debian")
}

/// The zone `/etc/localtime` links to (its path under the zoneinfo dir).
fn zone_of_localtime() -> Result<String, ExecError> {
    let target = std::fs::read_link(LOCALTIME).map_err(|e| {
        ExecError::Execution(format!(
            "Unable to determine timezone from {LOCALTIME}: {e}"
        ))
    })?;
    let full = Path::new("/etc").join(target);
    let text = full.to_string_lossy().replace("/../", "/");
    let normal = text
        .rsplit_once(ZONEINFO.trim_start_matches('/'))
        .map(|(_, zone)| zone.to_string());
    normal.ok_or_else(|| ExecError::Execution("Unable to determine timezone".into()))
}

/// Salt's `get_zone`: `Time zone:` of timedatectl, else `/etc/timezone` on
/// Debian, else the `/etc/localtime` link.
pub fn get_zone(grains: &Value) -> Result<String, ExecError> {
    if let Some(out) = timedatectl() {
        if let Some(zone) = out.lines().find_map(|l| {
            let l = l.trim();
            l.strip_prefix("Time zone:")
                .or_else(|| l.strip_prefix("Timezone:"))
                .and_then(|rest| rest.split_whitespace().next())
        }) {
            return Ok(zone.to_string());
        }
    }
    if is_debian(grains) {
        return std::fs::read_to_string(ETC_TIMEZONE)
            .map(|s| s.trim().to_string())
            .map_err(|e| {
                ExecError::Execution(format!("Problem reading timezone file {ETC_TIMEZONE}: {e}"))
            });
    }
    zone_of_localtime()
}

/// The zoneinfo file of `zone`, refusing names that climb out of it.
fn zone_file(zone: &str) -> Result<PathBuf, ExecError> {
    if zone.is_empty() || zone.starts_with('/') || zone.split('/').any(|p| p == "..") {
        return Err(ExecError::Invocation(format!(
            "Invalid timezone '{zone}': give a zone name such as Europe/Paris"
        )));
    }
    Ok(Path::new(ZONEINFO).join(zone))
}

/// Salt's `zone_compare`: the zone name against `get_zone`, else the
/// bytes of `/etc/localtime` against the zone's file.
pub fn zone_compare(grains: &Value, zone: &str) -> Result<bool, ExecError> {
    if let Ok(current) = get_zone(grains) {
        return Ok(current == zone);
    }
    let wanted = std::fs::read(zone_file(zone)?)
        .map_err(|_| ExecError::Invocation(format!("Can't find a local timezone \"{zone}\"")))?;
    let current = std::fs::read(LOCALTIME).map_err(|e| {
        ExecError::Execution(format!(
            "Failed to read {LOCALTIME} to determine current timezone: {e}"
        ))
    })?;
    Ok(current == wanted)
}

/// Salt's `set_zone`: timedatectl when it runs, then the `/etc/localtime`
/// link and, on Debian, `/etc/timezone`. A zone without a zoneinfo file is
/// Salt's string answer "Zone does not exist: <path>".
pub fn set_zone(grains: &Value, zone: &str) -> Result<Value, ExecError> {
    let path = zone_file(zone)?;
    if timedatectl().is_some() {
        let _ = run(&["timedatectl", "set-timezone", zone]);
    }
    if !path.exists() {
        return Ok(Value::from(format!(
            "Zone does not exist: {}",
            path.display()
        )));
    }
    let io = |e: std::io::Error| ExecError::Execution(format!("Cannot set the timezone: {e}"));
    if std::fs::symlink_metadata(LOCALTIME).is_ok() {
        std::fs::remove_file(LOCALTIME).map_err(io)?;
    }
    std::os::unix::fs::symlink(&path, LOCALTIME).map_err(io)?;
    if is_debian(grains) {
        std::fs::write(ETC_TIMEZONE, format!("{}\n", zone.trim())).map_err(io)?;
    }
    Ok(Value::Bool(true))
}

/// Salt's `get_hwclock`: `RTC in local TZ` of timedatectl, else Debian's
/// `/etc/default/rcS` `UTC=`, else the last line of `/etc/adjtime` (as
/// Salt returns it: `UTC` or `LOCAL`); None without an RTC.
pub fn get_hwclock(grains: &Value) -> Result<Value, ExecError> {
    if let Some(out) = timedatectl() {
        if let Some(line) = out
            .lines()
            .find(|l| l.to_lowercase().contains("rtc in local tz"))
        {
            let local = line.rsplit(':').next().unwrap_or("").trim() == "yes";
            return Ok(Value::from(if local { "localtime" } else { "UTC" }));
        }
    }
    if is_debian(grains) {
        if let Ok(text) = std::fs::read_to_string("/etc/default/rcS") {
            if let Some(line) = text
                .lines()
                .find(|l| !l.trim_start().starts_with('#') && l.contains("UTC="))
            {
                let utc = line.rsplit('=').next().unwrap_or("").to_lowercase() == "yes";
                return Ok(Value::from(if utc { "UTC" } else { "localtime" }));
            }
        }
    }
    match std::fs::read_to_string(ADJTIME) {
        Ok(text) => Ok(Value::from(text.lines().last().unwrap_or("").to_string())),
        Err(_) if Path::new("/dev/rtc").exists() => Err(ExecError::Execution(format!(
            "Unable to get hwclock timezone from {ADJTIME}"
        ))),
        Err(_) => Ok(Value::Null),
    }
}

/// Salt's `set_hwclock` (`UTC` or `localtime`): timedatectl when it runs,
/// else the `UTC`/`LOCAL` line of `/etc/adjtime`.
pub fn set_hwclock(clock: &str) -> Result<bool, ExecError> {
    let local = match clock {
        "UTC" | "utc" => false,
        "localtime" => true,
        other => {
            return Err(ExecError::Invocation(format!(
                "Only 'UTC' and 'localtime' are allowed, not '{other}'"
            )))
        }
    };
    if timedatectl().is_some() {
        let ran = run(&[
            "timedatectl",
            "set-local-rtc",
            if local { "true" } else { "false" },
        ])?;
        return Ok(ran.retcode == 0);
    }
    let word = if local { "LOCAL" } else { "UTC" };
    let text = std::fs::read_to_string(ADJTIME).unwrap_or_else(|_| "0.0 0 0.0\n0\nUTC\n".into());
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    while lines.len() < 3 {
        lines.push(String::new());
    }
    lines[2] = word.to_string();
    std::fs::write(ADJTIME, format!("{}\n", lines.join("\n")))
        .map_err(|e| ExecError::Execution(format!("Cannot write {ADJTIME}: {e}")))?;
    Ok(true)
}

fn date(fmt: &str) -> Result<Value, ExecError> {
    Ok(Value::from(run(&["date", fmt])?.stdout))
}

fn get_zone_fn(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    get_zone(&host.grains).map(Value::from)
}

fn get_zonecode_fn(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    date("+%Z")
}

fn get_offset_fn(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    date("+%z")
}

fn set_zone_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    set_zone(&host.grains, &args.require_str(0, "timezone", "set_zone")?)
}

fn zone_compare_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    zone_compare(
        &host.grains,
        &args.require_str(0, "timezone", "zone_compare")?,
    )
    .map(Value::Bool)
}

fn get_hwclock_fn(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    get_hwclock(&host.grains)
}

fn set_hwclock_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    set_hwclock(&args.require_str(0, "clock", "set_hwclock")?).map(Value::Bool)
}
