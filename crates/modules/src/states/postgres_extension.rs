//! Salt's `postgres_extension` state: an extension installed (moved to
//! its schema, upgraded to its version) or dropped.

use halite_state::{StateCall, StateError, StateFunction, StateResult, StateTable};

use crate::exec::postgres::state::{changed, failed, opt_bool, opt_str, psql};
use crate::exec::postgres::{self as pg, ExtensionOptions};

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "postgres_extension",
    functions: &[
        StateFunction::new("present", present),
        StateFunction::new("absent", absent),
    ],
};

/// Salt's `postgres_extension.present`.
fn present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let p = psql(call, None)?;
    let o = ExtensionOptions {
        if_not_exists: opt_bool(call, "if_not_exists"),
        schema: opt_str(call, "schema"),
        ext_version: opt_str(call, "ext_version"),
        from_version: opt_str(call, "from_version"),
    };
    let mut ret = StateResult::new(&name, Some(true));
    ret.comment = format!("Extension {name} is already present");
    let meta = match pg::create_metadata(&p, &name, o.ext_version.as_deref(), o.schema.as_deref()) {
        Ok(m) => m,
        Err(e) => return Ok(failed(&name, e)),
    };
    let install = meta.contains(&pg::EXTENSION_NOT_INSTALLED);
    let upgrade = meta.contains(&pg::EXTENSION_INSTALLED)
        && (meta.contains(&pg::EXTENSION_TO_MOVE) || meta.contains(&pg::EXTENSION_TO_UPGRADE));
    if !install && !upgrade {
        return Ok(ret);
    }
    let mode = if upgrade { "upgrade" } else { "install" };
    if call.test {
        ret.result = None;
        ret.comment = format!("Extension {name} is set to be {mode}ed").replace("eed", "ed");
        return Ok(ret);
    }
    match pg::create_extension(&p, &name, &o) {
        Ok(true) => {
            let suffix = if mode.ends_with('e') { "d" } else { "ed" };
            ret.comment = format!("The extension {name} has been {mode}{suffix}");
            let mut cap = mode.to_string();
            cap[..1].make_ascii_uppercase();
            changed(&mut ret, &name, format!("{cap}{suffix}"));
        }
        Ok(false) => {
            ret.result = Some(false);
            ret.comment = format!("Failed to {mode} extension {name}");
        }
        Err(e) => return Ok(failed(&name, e)),
    }
    Ok(ret)
}

/// Salt's `postgres_extension.absent`.
fn absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let p = psql(call, None)?;
    let mut ret = StateResult::new(&name, Some(true));
    let exists = match pg::installed_extensions(&p) {
        Ok(m) => m.contains_key(&name),
        Err(e) => return Ok(failed(&name, e)),
    };
    if !exists {
        ret.comment = format!("Extension {name} is not present, so it cannot be removed");
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment = format!("Extension {name} is set to be removed");
        return Ok(ret);
    }
    let dropped = pg::drop_extension(
        &p,
        &name,
        opt_bool(call, "if_exists").unwrap_or(false),
        opt_bool(call, "restrict").unwrap_or(false),
        opt_bool(call, "cascade").unwrap_or(true),
    );
    match dropped {
        Ok(true) => {
            ret.comment = format!("Extension {name} has been removed");
            changed(&mut ret, &name, "Absent");
        }
        Ok(false) => {
            ret.result = Some(false);
            ret.comment = format!("Extension {name} failed to be removed");
        }
        Err(e) => return Ok(failed(&name, e)),
    }
    Ok(ret)
}
