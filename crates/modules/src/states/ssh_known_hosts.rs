//! Salt's `ssh_known_hosts` state: a host's keys in a `known_hosts` file
//! (`present`, given as `key`+`enc`, as a `fingerprint` checked against
//! what `ssh-keyscan` fetches, or fetched whole) and their removal
//! (`absent`).

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::ssh;
use crate::exec::user::scalar_text;

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "ssh_known_hosts",
    functions: &[
        StateFunction::new("present", present),
        StateFunction::new("absent", absent),
    ],
};

fn text(call: &StateCall<'_>, key: &str) -> Option<String> {
    call.arg(key)
        .and_then(scalar_text)
        .filter(|s| !s.is_empty())
}

fn err(e: crate::exec::ExecError) -> StateError {
    StateError::Other(e.to_string())
}

/// `config=` with Salt's defaults; `Err` with Salt's comment when a
/// relative config has no user to be relative to.
fn config_arg(call: &StateCall<'_>, user: Option<&str>) -> Result<String, String> {
    let config = text(call, "config").unwrap_or_else(|| {
        if user.is_some() {
            ".ssh/known_hosts".into()
        } else {
            "/etc/ssh/ssh_known_hosts".into()
        }
    });
    if user.is_none() && !config.starts_with('/') {
        return Err("If not specifying a \"user\", specify an absolute \"config\".".into());
    }
    Ok(config)
}

fn port_arg(call: &StateCall<'_>) -> Result<Option<i64>, StateError> {
    match call.arg("port") {
        None => Ok(None),
        Some(v) => scalar_text(v)
            .and_then(|s| s.trim().parse().ok())
            .map(Some)
            .ok_or_else(|| StateError::BadArg(format!("Invalid port: {v}"))),
    }
}

fn present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(
        call,
        &[
            "user",
            "fingerprint",
            "key",
            "port",
            "enc",
            "config",
            "hash_known_hosts",
            "timeout",
            "fingerprint_hash_type",
        ],
    )?;
    let name = call.name().to_string();
    let user = text(call, "user");
    let config = match config_arg(call, user.as_deref()) {
        Ok(c) => c,
        Err(c) => return Ok(StateResult::fail(&name, c)),
    };
    let key = text(call, "key");
    let fingerprint = text(call, "fingerprint");
    let enc = text(call, "enc");
    let port = port_arg(call)?;
    let hash_type = text(call, "fingerprint_hash_type");
    if call.test {
        let mut ret = StateResult::new(&name, None);
        if key.is_some() && fingerprint.is_some() {
            return Ok(StateResult::fail(
                &name,
                "Specify either \"key\" or \"fingerprint\", not both.",
            ));
        }
        if key.is_some() && enc.is_none() {
            return Ok(StateResult::fail(
                &name,
                "Required argument \"enc\" if using \"key\" argument.",
            ));
        }
        let result = ssh::check_known_host(
            user.as_deref(),
            &name,
            key.as_deref(),
            fingerprint.as_deref(),
            Some(&config),
            port,
            hash_type.as_deref(),
        )
        .map_err(err)?;
        if let Some(e) = result.get("error").and_then(Value::as_str) {
            return Ok(StateResult::fail(&name, e));
        }
        ret.comment = match result.as_str() {
            Some("exists") => {
                ret.result = Some(true);
                format!("Host {name} is already in {config}")
            }
            Some("add") => format!("Key for {name} is set to be added to {config}"),
            _ => format!("Key for {name} is set to be updated in {config}"),
        };
        return Ok(ret);
    }
    let req = ssh::KnownHost {
        user: user.clone(),
        hostname: name.clone(),
        fingerprint: fingerprint.clone(),
        key: key.clone(),
        port,
        enc: enc.clone(),
        config: Some(config.clone()),
        hash_known_hosts: call.arg_bool("hash_known_hosts", true),
        timeout: text(call, "timeout")
            .and_then(|t| t.parse().ok())
            .unwrap_or(5),
        fingerprint_hash_type: hash_type,
    };
    let result = ssh::set_known_host(&req).map_err(err)?;
    let status = result.get("status").and_then(Value::as_str).unwrap_or("");
    match status {
        "exists" => {
            return Ok(StateResult::ok(
                &name,
                format!("{name} already exists in {config}"),
            ))
        }
        "error" => {
            let e = result.get("error").and_then(Value::as_str).unwrap_or("");
            return Ok(StateResult::fail(&name, e));
        }
        _ => {}
    }
    let first = result.get("new").and_then(|n| n.get(0));
    let field = |k: &str| {
        first
            .and_then(|f| f.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let comment = if key.is_some() {
        format!("{name}'s key saved to {config} (key: {})", field("key"))
    } else if fingerprint.is_some() {
        format!(
            "{name}'s key saved to {config} (fingerprint: {})",
            field("fingerprint")
        )
    } else if let Some(enc) = &enc {
        format!(
            "{name}'s {enc} key saved to {config} (key: {})",
            field("key")
        )
    } else {
        format!("{name}'s key(s) saved to {config}")
    };
    let mut changes = Map::new();
    changes.insert(
        "old".into(),
        result.get("old").cloned().unwrap_or(Value::Null),
    );
    changes.insert(
        "new".into(),
        result.get("new").cloned().unwrap_or(Value::Null),
    );
    let mut ret = StateResult::ok(&name, comment);
    ret.changes = changes;
    Ok(ret)
}

fn absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(call, &["user", "config"])?;
    let name = call.name().to_string();
    let user = text(call, "user");
    let config = match config_arg(call, user.as_deref()) {
        Ok(c) => c,
        Err(c) => return Ok(StateResult::fail(&name, c)),
    };
    let known = match ssh::get_known_host_entries(user.as_deref(), &name, Some(&config), None, None)
        .map_err(err)?
    {
        Ok(Some(k)) => Value::Array(k),
        Ok(None) => return Ok(StateResult::ok(&name, "Host is already absent")),
        Err(e) => e,
    };
    if call.test {
        let mut ret = StateResult::new(&name, None);
        ret.comment = format!("Key for {name} is set to be removed from {config}");
        return Ok(ret);
    }
    let rm = ssh::rm_known_host(user.as_deref(), &name, Some(&config), None).map_err(err)?;
    if rm.get("status").and_then(Value::as_str) == Some("error") {
        let e = rm.get("error").and_then(Value::as_str).unwrap_or("");
        return Ok(StateResult::fail(&name, e));
    }
    let mut ret = StateResult::ok(
        &name,
        rm.get("comment").and_then(Value::as_str).unwrap_or(""),
    );
    ret.changes.insert("old".into(), known);
    ret.changes.insert("new".into(), Value::Null);
    Ok(ret)
}
