//! Salt's `system` execution module: `system.reboot`, which formulas call
//! through `module.run` after a kernel change. Guarded: the time is
//! checked before anything runs, and `test=True` (the dry-run switch the
//! tests use) answers with the command instead of running it.

use halite_state::{CmdOptions, Value};
use serde_json::json;

use crate::exec::{py_str, Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "system",
    functions: &[ExecFunction::new("reboot", reboot)],
};

/// Whether `at` is a time `shutdown` understands: `now`, `+minutes`,
/// minutes, or `hh:mm`.
pub fn valid_at_time(at: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    if at == "now" || digits(at.strip_prefix('+').unwrap_or(at)) {
        return true;
    }
    match at.split_once(':') {
        Some((h, m)) if digits(h) && digits(m) && h.len() <= 2 && m.len() == 2 => {
            h.parse::<u32>().is_ok_and(|h| h < 24) && m.parse::<u32>().is_ok_and(|m| m < 60)
        }
        _ => false,
    }
}

/// The `shutdown` command `system.reboot` runs for `at_time`.
pub fn reboot_command(at_time: Option<&str>) -> String {
    format!("shutdown -r {}", at_time.unwrap_or("now"))
}

/// `system.reboot [at_time]`: reboots now, or at `at_time` (minutes, or
/// what `shutdown` takes); returns `shutdown`'s output as Salt does. A
/// time `shutdown` cannot parse gets its message without anything run.
fn reboot(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let at_time = args
        .get(0, "at_time")
        // Python's `if at_time`: None, False, 0 and "" mean now.
        .filter(|v| !matches!(v, Value::Null | Value::Bool(false)))
        .filter(|v| v.as_str() != Some("") && v.as_i64() != Some(0))
        .map(py_str);
    if let Some(at) = at_time.as_deref() {
        if !valid_at_time(at) {
            return Ok(json!(format!("Failed to parse time specification: {at}")));
        }
    }
    let cmd = reboot_command(at_time.as_deref());
    if args.get_bool(usize::MAX, "test", false) || host.test_mode() {
        return Ok(json!(format!("Would run: {cmd}")));
    }
    tracing::warn!("system.reboot: running {cmd}");
    let out = crate::host::run_command(&cmd, &CmdOptions::default())
        .map_err(|e| ExecError::Execution(format!("Unable to run command '{cmd}': {e}")))?;
    let mut text = out.stdout;
    if !out.stderr.is_empty() {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&out.stderr);
    }
    Ok(json!(text))
}
