//! Salt's `locale` state: `locale.present` (generate a locale) and
//! `locale.system` (the system's `LANG`), with Salt's comments.

use halite_state::{StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::locale;

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "locale",
    functions: &[
        StateFunction::new("present", present),
        StateFunction::new("system", system),
    ],
};

fn system(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let run = || -> Result<StateResult, crate::ExecError> {
        if locale::get_locale()? == name {
            return Ok(StateResult::ok(
                &name,
                format!("System locale {name} already set"),
            ));
        }
        if call.test {
            let mut ret = StateResult::new(&name, None);
            ret.comment = format!("System locale {name} needs to be set");
            return Ok(ret);
        }
        if locale::set_locale(&name)? {
            let mut ret = StateResult::ok(&name, format!("Set system locale {name}"));
            ret.changes
                .insert("locale".into(), Value::from(name.clone()));
            Ok(ret)
        } else {
            Ok(StateResult::fail(
                &name,
                format!("Failed to set system locale to {name}"),
            ))
        }
    };
    Ok(run()
        .unwrap_or_else(|e| StateResult::fail(&name, format!("Failed to set system locale: {e}"))))
}

fn present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let err = |e: crate::ExecError| StateError::Other(e.to_string());
    if locale::avail(&name).map_err(err)? {
        return Ok(StateResult::ok(
            &name,
            format!("Locale {name} is already present"),
        ));
    }
    if call.test {
        let mut ret = StateResult::new(&name, None);
        ret.comment = format!("Locale {name} needs to be generated");
        return Ok(ret);
    }
    if locale::gen_locale(&name).map_err(err)? {
        let mut ret = StateResult::ok(&name, format!("Generated locale {name}"));
        ret.changes
            .insert("locale".into(), Value::from(name.clone()));
        Ok(ret)
    } else {
        Ok(StateResult::fail(
            &name,
            format!("Failed to generate locale {name}"),
        ))
    }
}
