//! Salt's `status` execution module: `status.time`, which formulas call at
//! render time (postgres-formula's pillar: `salt['status.time']('%y-%m-%d')`),
//! and the Linux readings of /proc templates reach for (`uptime`,
//! `loadavg`, `meminfo`, `cpuinfo`, `diskusage`).

use halite_state::{Map, Value};
use serde_json::json;

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// Salt's default format: "Monday, 27. July 2015 07:55AM".
const DEFAULT_FORMAT: &str = "%A, %d. %B %Y %I:%M%p";

/// Python's `datetime.today().strftime(fmt)`; an invalid directive is an
/// error rather than a panic.
pub fn strftime_now(fmt: &str) -> Result<String, ExecError> {
    use std::fmt::Write;
    let now = chrono::Local::now();
    let mut s = String::new();
    write!(s, "{}", now.format(fmt))
        .map_err(|_| ExecError::Execution(format!("Invalid format string: {fmt:?}")))?;
    Ok(s)
}

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "status",
    functions: &[
        ExecFunction::new("time", time),
        ExecFunction::new("uptime", uptime),
        ExecFunction::new("loadavg", loadavg),
        ExecFunction::new("meminfo", meminfo),
        ExecFunction::new("cpuinfo", cpuinfo),
        ExecFunction::new("diskusage", diskusage),
    ],
};

/// `status.time [format]`: the local time formatted with strftime.
fn time(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let fmt = args
        .get_str(0, "format")
        .unwrap_or_else(|| DEFAULT_FORMAT.to_string());
    strftime_now(&fmt).map(Value::from)
}

fn read_proc(path: &str) -> Result<String, ExecError> {
    std::fs::read_to_string(path)
        .map_err(|_| ExecError::Execution(format!("File {path} was not found.")))
}

/// `status.uptime`: seconds since boot (/proc/uptime), the boot time in
/// UTC, days and `h:m`, and the number of `who -s` lines as Salt counts them.
fn uptime(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    let now = chrono::Utc::now();
    let seconds = read_proc("/proc/uptime")?
        .split_whitespace()
        .next()
        .and_then(|s| s.parse::<f64>().ok())
        .ok_or_else(|| ExecError::Execution("/proc/uptime could not be read.".into()))?
        as i64;
    let boot = now - chrono::Duration::seconds(seconds);
    let iso = if boot.timestamp_subsec_micros() == 0 {
        boot.format("%Y-%m-%dT%H:%M:%S").to_string()
    } else {
        boot.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
    };
    let mut out = Map::new();
    out.insert("seconds".into(), json!(seconds));
    out.insert("since_iso".into(), json!(iso));
    out.insert("since_t".into(), json!(boot.timestamp()));
    out.insert("days".into(), json!(seconds / 86400));
    let rest = seconds % 86400;
    out.insert(
        "time".into(),
        json!(format!("{}:{}", rest / 3600, rest % 3600 / 60)),
    );
    if crate::exec::cmd::which("who").is_some() {
        let who = host
            .call(
                "cmd.run",
                &Args {
                    positional: vec![json!("who -s")],
                    kwargs: Map::new(),
                },
            )
            .unwrap_or_else(|_| json!(""));
        // Salt counts `len(out.split(os.linesep))`: empty output is 1.
        out.insert(
            "users".into(),
            json!(crate::exec::py_str(&who).split('\n').count()),
        );
    }
    Ok(Value::Object(out))
}

/// `status.loadavg`: the 1, 5 and 15 minute load averages.
fn loadavg(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let mut avg = [0f64; 3];
    // SAFETY: getloadavg writes at most 3 doubles into the array given.
    let n = unsafe { libc::getloadavg(avg.as_mut_ptr(), 3) };
    if n < 3 {
        return Err(ExecError::Execution(
            "status.loadavag is not available on your platform".into(),
        ));
    }
    Ok(json!({"1-min": avg[0], "5-min": avg[1], "15-min": avg[2]}))
}

/// `status.meminfo`: /proc/meminfo as `{key: {value, unit}}`.
fn meminfo(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let mut out = Map::new();
    let Ok(text) = std::fs::read_to_string("/proc/meminfo") else {
        return Ok(Value::Object(out));
    };
    for line in text.lines() {
        let comps: Vec<&str> = line.split_whitespace().collect();
        let (Some(key), Some(value)) = (comps.first(), comps.get(1)) else {
            continue;
        };
        let mut entry = Map::new();
        entry.insert("value".into(), json!(value));
        if let Some(unit) = comps.get(2) {
            entry.insert("unit".into(), json!(unit));
        }
        out.insert(key.replace(':', ""), Value::Object(entry));
    }
    Ok(Value::Object(out))
}

/// `status.cpuinfo`: /proc/cpuinfo's `key: value` lines (the last CPU's
/// win, as in Salt), `flags` split into a list.
fn cpuinfo(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let mut out = Map::new();
    let Ok(text) = std::fs::read_to_string("/proc/cpuinfo") else {
        return Ok(Value::Object(out));
    };
    for line in text.lines().filter(|l| !l.is_empty()) {
        let mut comps = line.split(':');
        let key = comps.next().unwrap_or_default().trim().to_string();
        let value = comps.next().unwrap_or_default();
        let value = if key == "flags" {
            json!(value.split_whitespace().collect::<Vec<_>>())
        } else {
            json!(value.trim())
        };
        out.insert(key, value);
    }
    Ok(Value::Object(out))
}

/// `status.diskusage [paths or fstype globs...]`: available and total
/// bytes of each path, or of every mount point whose type matches.
fn diskusage(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let mut selected = std::collections::BTreeSet::new();
    let mut fstypes = Vec::new();
    for arg in args.positional.iter().map(crate::exec::py_str) {
        if arg.starts_with('/') {
            selected.insert(arg);
        } else {
            fstypes.push(arg);
        }
    }
    if args.positional.is_empty() {
        fstypes.push("*".into());
    }
    if !fstypes.is_empty() {
        let Ok(mounts) = std::fs::read_to_string("/proc/mounts") else {
            return Ok(json!({}));
        };
        for line in mounts.lines() {
            let comps: Vec<&str> = line.split_whitespace().collect();
            if let (Some(mnt), Some(fstype)) = (comps.get(1), comps.get(2)) {
                if fstypes
                    .iter()
                    .any(|p| halite_salt_rules::fnmatch(fstype, p))
                {
                    selected.insert((*mnt).to_string());
                }
            }
        }
    }
    let mut out = Map::new();
    for path in selected {
        if !std::path::Path::new(&path).exists() {
            continue;
        }
        let usage = match nix::sys::statvfs::statvfs(path.as_str()) {
            Ok(st) => {
                let block = st.block_size();
                json!({
                    "available": st.blocks_available() * block,
                    "total": st.blocks() * block,
                })
            }
            Err(e) => {
                tracing::warn!("Cannot get stats from '{path}': {e}");
                json!({"available": null, "total": null})
            }
        };
        out.insert(path, usage);
    }
    Ok(Value::Object(out))
}
