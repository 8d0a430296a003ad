//! Salt's `disk` execution module: `disk.usage`, `df -P` parsed into
//! `{mount point: {filesystem, 1K-blocks, used, available, capacity}}`.

use halite_state::{CmdOptions, Map, Value};
use serde_json::json;

use crate::exec::{py_str, Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "disk",
    functions: &[ExecFunction::new("usage", usage)],
};

/// The `df` flags Salt lets through (`_clean_flags`).
const ALLOWED_FLAGS: &str = "aBhHiklPtTxv";

/// Salt's `_clean_flags`: each character must be an allowed `df` flag.
fn clean_flags(args: Option<&Value>, caller: &str) -> Result<String, ExecError> {
    let Some(raw) = args.filter(|v| !v.is_null()) else {
        return Ok(String::new());
    };
    let flags: Vec<String> = match raw {
        Value::Array(items) => items.iter().map(py_str).collect(),
        other => py_str(other).chars().map(String::from).collect(),
    };
    let mut out = String::new();
    for flag in flags {
        if flag.chars().count() == 1 && ALLOWED_FLAGS.contains(flag.as_str()) {
            out.push_str(&flag);
        } else {
            return Err(ExecError::Execution(format!(
                "Invalid flag passed to {caller}"
            )));
        }
    }
    Ok(out)
}

/// Parses `df -P` output as Salt does: a filesystem name with spaces is
/// joined back, a line wrapped after a long name is joined to the next.
pub fn parse_df(out: &str) -> Map {
    let mut ret = Map::new();
    let mut oldline: Option<String> = None;
    for line in out.lines() {
        if line.is_empty() || line.starts_with("Filesystem") {
            continue;
        }
        let line = match oldline.take() {
            Some(old) => format!("{old} {line}"),
            None => line.to_string(),
        };
        let mut comps: Vec<String> = line.split_whitespace().map(String::from).collect();
        if comps.len() == 1 {
            oldline = Some(line);
            continue;
        }
        while comps.len() >= 2 && !comps[1].chars().all(|c| c.is_ascii_digit()) {
            let second = comps.remove(1);
            comps[0] = format!("{} {second}", comps[0]);
        }
        if comps.len() < 6 {
            tracing::error!("Problem parsing disk usage information");
            return Map::new();
        }
        ret.insert(
            comps[5].clone(),
            json!({
                "filesystem": comps[0],
                "1K-blocks": comps[1],
                "used": comps[2],
                "available": comps[3],
                "capacity": comps[4],
            }),
        );
    }
    ret
}

/// `disk.usage [args=flags]`: usage of every mounted filesystem.
fn usage(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let flags = clean_flags(args.get(0, "args"), "disk.usage")?;
    if !std::path::Path::new("/etc/mtab").is_file() {
        tracing::error!("df cannot run without /etc/mtab");
        return Ok(json!({}));
    }
    let mut cmd = "df -P".to_string();
    if !flags.is_empty() {
        cmd.push_str(&format!(" -{flags}"));
    }
    let out = crate::host::run_command(&cmd, &CmdOptions::default())
        .map_err(|e| ExecError::Execution(format!("Unable to run {cmd}: {e}")))?;
    Ok(Value::Object(parse_df(&out.stdout)))
}
