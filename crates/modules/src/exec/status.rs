//! Salt's `status` execution module: `status.time`, which formulas call at
//! render time (postgres-formula's pillar: `salt['status.time']('%y-%m-%d')`).

use halite_state::Value;

use crate::exec::{Args, ExecError, ExecModule};
use crate::Host;

/// `status.time`.
pub struct StatusExec;

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

impl ExecModule for StatusExec {
    fn name(&self) -> &'static str {
        "status"
    }

    fn functions(&self) -> &'static [&'static str] {
        &["time"]
    }

    fn call(&self, fun: &str, args: &Args, _host: &Host) -> Result<Value, ExecError> {
        match fun {
            "time" => {
                let fmt = args
                    .get_str(0, "format")
                    .unwrap_or_else(|| DEFAULT_FORMAT.to_string());
                strftime_now(&fmt).map(Value::from)
            }
            other => Err(ExecError::NotAvailable(format!("status.{other}"))),
        }
    }
}
