//! Salt's `status` execution module: `status.time`, which formulas call at
//! render time (postgres-formula's pillar: `salt['status.time']('%y-%m-%d')`).

use halite_state::Value;

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
    functions: &[ExecFunction::new("time", time)],
};

/// `status.time [format]`: the local time formatted with strftime.
fn time(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let fmt = args
        .get_str(0, "format")
        .unwrap_or_else(|| DEFAULT_FORMAT.to_string());
    strftime_now(&fmt).map(Value::from)
}
