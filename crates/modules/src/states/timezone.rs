//! Salt's `timezone` state: `timezone.system` sets the zone and whether the
//! hardware clock keeps UTC, through the `timezone` execution module, with
//! Salt's comments and changes.

use halite_state::{StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::timezone as tz;

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "timezone",
    functions: &[StateFunction::new("system", system)],
};

fn system(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let utc = call.arg_bool("utc", true);
    let grains = call.env.grains();
    let mut ret = StateResult::new(&name, None);
    let compzone = match tz::zone_compare(grains, &name) {
        Ok(same) => same,
        Err(e) => {
            return Ok(StateResult::fail(
                &name,
                format!("Unable to compare desired timezone '{name}' to system timezone: {e}"),
            ))
        }
    };
    let hwclock = tz::get_hwclock(grains).map_err(|e| StateError::Other(e.to_string()))?;
    let myutc = hwclock.as_str() != Some("localtime");
    let mut messages = Vec::new();
    let mut do_zone = false;
    let mut do_utc = false;
    if compzone {
        ret.result = Some(true);
        messages.push(format!("Timezone {name} already set"));
    } else {
        do_zone = true;
    }
    if utc && utc != myutc {
        ret.result = None;
        do_utc = true;
    } else if utc && utc == myutc {
        messages.push(format!("UTC already set to {name}"));
    }
    let py_bool = |b: bool| if b { "True" } else { "False" };
    if ret.result == Some(true) {
        ret.comment = messages.join(", ");
        return Ok(ret);
    }
    if call.test {
        let mut messages = Vec::new();
        if !compzone {
            messages.push(format!("Timezone {name} needs to be set"));
        }
        if utc && myutc != utc {
            messages.push(format!("UTC needs to be set to {}", py_bool(utc)));
        }
        ret.comment = messages.join(", ");
        return Ok(ret);
    }
    let mut messages = Vec::new();
    if do_zone {
        match tz::set_zone(grains, &name) {
            Ok(Value::Bool(true)) => {
                ret.changes
                    .insert("timezone".into(), Value::from(name.clone()));
                messages.push(format!("Set timezone {name}"));
                ret.result = Some(true);
            }
            // Salt's set_zone answers a string ("Zone does not exist: ..."),
            // which Salt reads as success; halite reports it.
            Ok(Value::String(why)) => {
                messages.push(format!("Failed to set timezone: {why}"));
                ret.result = Some(false);
            }
            Ok(_) | Err(_) => {
                messages.push("Failed to set timezone".into());
                ret.result = Some(false);
            }
        }
    }
    if do_utc {
        let clock = if utc { "UTC" } else { "localtime" };
        if tz::set_hwclock(clock).unwrap_or(false) {
            ret.changes.insert("utc".into(), Value::Bool(utc));
            messages.push(format!("Set UTC to {}", py_bool(utc)));
            ret.result = Some(true);
        } else {
            messages.push(format!("Failed to set UTC to {}", py_bool(utc)));
            ret.result = Some(false);
        }
    }
    ret.comment = messages.join(", ");
    Ok(ret)
}
