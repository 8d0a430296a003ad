//! Salt's `gem` states: a Ruby gem installed (at a `version`, which may
//! be a `>=`/`>`/`<`/`<=` requirement) or removed, with Salt 3007's
//! comments (Salt 3008 no longer ships the module). A `name` that is the
//! path of a `.gem` file is installed from that file, offline.

use halite_state::{StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::gem::{is_gem_file, Gem, InstallOptions};
use crate::pkg::version::{rpm_cmp, satisfies_one, split_comparison, Oper};

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "gem",
    functions: &[
        StateFunction::new("installed", installed),
        StateFunction::new("removed", removed),
    ],
};

fn gem_of(call: &StateCall<'_>) -> Result<Gem, StateError> {
    if call.arg("ruby").is_some() {
        tracing::warn!("gem: ruby= is for RVM/rbenv, which halite does not drive; set gem_bin to that ruby's gem instead");
    }
    Ok(Gem {
        gem_bin: call.arg_str("gem_bin")?,
        runas: call.arg_str("user")?,
    })
}

/// The gem the state is about: its name, and for a `.gem` file the
/// version the file holds (which then must be the one installed).
fn target(gem: &Gem, name: &str) -> Result<(String, Option<String>), StateError> {
    if is_gem_file(name) {
        let (n, v) = gem
            .file_spec(name)
            .map_err(|e| StateError::Other(format!("Cannot read {name}: {e}")))?;
        Ok((n, Some(v)))
    } else {
        Ok((name.to_string(), None))
    }
}

/// Salt's `gem.installed`: `ruby`, `gem_bin`, `user`, `version`, `rdoc`,
/// `ri`, `pre_releases`, `proxy`, `source`.
fn installed(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(
        call,
        &[
            "ruby",
            "gem_bin",
            "user",
            "version",
            "rdoc",
            "ri",
            "pre_releases",
            "proxy",
            "source",
        ],
    )?;
    let name = call.name().to_string();
    let gem = gem_of(call)?;
    let (gem_name, file_version) = target(&gem, &name)?;
    let version = call.arg_str("version")?.or(file_version);
    let mut ret = StateResult::ok(&name, "");
    let listed = gem
        .list(Some(&gem_name))
        .map_err(|e| StateError::Other(e.to_string()))?;
    if let Some(have) = listed.get(&gem_name) {
        let versions: Vec<String> = have
            .iter()
            .map(|v| v.replace("default: ", "").trim().to_string())
            .collect();
        match version.as_deref() {
            None => {
                ret.comment = "Gem is already installed.".into();
                return Ok(ret);
            }
            Some(spec) => {
                let (oper, wanted) = split_comparison(spec);
                let ranged = matches!(oper, Oper::Ge | Oper::Gt | Oper::Lt | Oper::Le);
                let first = versions.first().map(String::as_str).unwrap_or("");
                if ranged && satisfies_one(&rpm_cmp, first, oper, wanted) {
                    ret.comment = "Installed Gem meets version requirements.".into();
                    return Ok(ret);
                }
                if !ranged && versions.iter().any(|v| v == wanted) {
                    ret.comment = "Gem is already installed.".into();
                    return Ok(ret);
                }
            }
        }
    }
    if call.test {
        ret.result = None;
        ret.comment = format!("The gem {name} would have been installed");
        return Ok(ret);
    }
    let opts = InstallOptions {
        // A .gem file is its own version.
        version: call.arg_str("version")?,
        rdoc: call.arg_bool("rdoc", false),
        ri: call.arg_bool("ri", false),
        pre_releases: call.arg_bool("pre_releases", false),
        proxy: call.arg_str("proxy")?,
        source: call.arg_str("source")?,
    };
    match gem.install(std::slice::from_ref(&name), &opts) {
        Ok(_) => {
            ret.changes.insert(name.clone(), Value::from("Installed"));
            ret.comment = "Gem was successfully installed".into();
        }
        Err(e) => {
            ret.result = Some(false);
            ret.comment = format!("Could not install gem.\n{e}");
        }
    }
    Ok(ret)
}

/// Salt's `gem.removed`: `ruby`, `user`, `gem_bin`.
fn removed(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(call, &["ruby", "user", "gem_bin"])?;
    let name = call.name().to_string();
    let gem = gem_of(call)?;
    let mut ret = StateResult::ok(&name, "");
    let listed = gem
        .list(Some(&name))
        .map_err(|e| StateError::Other(e.to_string()))?;
    if !listed.contains_key(&name) {
        ret.comment = "Gem is not installed.".into();
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.comment = format!("The gem {name} would have been removed");
        return Ok(ret);
    }
    match gem.uninstall(std::slice::from_ref(&name)) {
        Ok(_) => {
            ret.changes.insert(name.clone(), Value::from("Removed"));
            ret.comment = "Gem was successfully removed.".into();
        }
        Err(e) => {
            ret.result = Some(false);
            ret.comment = format!("Could not remove gem.\n{e}");
        }
    }
    Ok(ret)
}
