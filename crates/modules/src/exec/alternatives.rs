//! Salt's `alternatives` execution module, the read-only part formulas call
//! at render time (php-formula: `salt['alternatives.show_current']('php')`).

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
    functions: &[ExecFunction::new("show_current", show_current_fn)],
};

/// `alternatives.show_current <name>`: the current target of an alternative.
fn show_current_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let name = args.require_str(0, "name", "show_current")?;
    Ok(show_current(Path::new(ALTERNATIVES_DIR), &name))
}
