//! Salt's `host` state: `host.present`, `host.absent` and `host.only` over
//! the hosts file (the `hosts.file` option, else `/etc/hosts`), through the
//! `hosts` execution module, with Salt's comments and changes.

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::dig::is_ip;
use crate::exec::hosts;
use crate::ExecError;

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "host",
    functions: &[
        StateFunction::new("present", present),
        StateFunction::new("absent", absent),
        StateFunction::new("only", only),
    ],
};

fn err(e: ExecError) -> StateError {
    StateError::Other(e.to_string())
}

/// A string-or-list argument as a list of strings.
fn list_arg(call: &StateCall<'_>, key: &str) -> Result<Vec<String>, StateError> {
    match call.arg(key) {
        None => Err(StateError::BadArg(format!(
            "Missing parameter {key} for host.{}",
            call.chunk
                .get("fun")
                .and_then(Value::as_str)
                .unwrap_or("present")
        ))),
        Some(Value::Array(items)) => Ok(items.iter().map(crate::exec::py_str).collect()),
        Some(one) => Ok(vec![crate::exec::py_str(one)]),
    }
}

/// Appends `value` under `changes[kind][addr]` (a list).
fn add_change(ret: &mut StateResult, kind: &str, addr: &str, value: &str) {
    let entry = ret
        .changes
        .entry(kind.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(by_addr) = entry {
        let list = by_addr
            .entry(addr.to_string())
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = list {
            list.push(Value::from(value));
        }
    }
}

fn push_unique(list: &mut Vec<(String, String)>, item: (String, String)) {
    if !list.contains(&item) {
        list.push(item);
    }
}

fn present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let ips = list_arg(call, "ip")?;
    let comment = call.arg_str("comment")?.unwrap_or_default();
    let clean = call.arg_bool("clean", false);
    let opts = call.env.opts();
    let all_hosts = hosts::list(opts).map_err(err)?;
    let mut ret = StateResult::ok(&name, "");
    // As Salt's `str()` prints them: the name, the `ip` and `comment`
    // arguments are yamlex strings in a yamlex SLS (quoted); addresses
    // read from the hosts file are plain. An address to add that is in
    // the file came from it, as in Salt's set of pairs.
    let shown = call.chunk.shown_name();
    let shown_addr = |addr: &str| -> String {
        if all_hosts.contains_key(addr) {
            addr.to_string()
        } else {
            call.chunk.shown(addr).into_owned()
        }
    };
    let mut comments = Vec::new();
    let mut warnings = Vec::new();
    let mut to_add = Vec::new();
    let mut to_remove = Vec::new();
    let mut update_comment = Vec::new();
    for addr in ips.iter().filter(|a| !all_hosts.contains_key(*a)) {
        push_unique(&mut to_add, (addr.clone(), name.clone()));
        if !comment.is_empty() {
            push_unique(&mut update_comment, (addr.clone(), comment.clone()));
        }
    }
    for addr in all_hosts.keys() {
        let has_name = hosts::aliases(&all_hosts, addr).contains(&name);
        let info = &all_hosts[addr];
        if !ips.contains(addr) {
            if has_name {
                if clean {
                    push_unique(&mut to_remove, (addr.clone(), name.clone()));
                } else {
                    warnings.push(Value::from(format!(
                        "Host {shown} present for IP address {addr}. To get rid of this warning, either run this state with 'clean' set to True to remove {shown} from {addr}, or add {addr} to the 'ip' argument."
                    )));
                }
            }
        } else if has_name {
            let current = info.get("comment").and_then(Value::as_str);
            if !comment.is_empty() && current != Some(comment.as_str()) {
                push_unique(&mut update_comment, (addr.clone(), comment.clone()));
            } else {
                comments.push(format!("Host {shown} ({addr}) already present"));
            }
        } else if is_ip(addr) {
            push_unique(&mut to_add, (addr.clone(), name.clone()));
            if !comment.is_empty() {
                push_unique(&mut update_comment, (addr.clone(), comment.clone()));
            }
        } else {
            ret.result = Some(false);
            comments.push(format!("Invalid IP Address for {shown} ({addr})"));
        }
    }
    for (addr, host) in &to_add {
        let shown_a = shown_addr(addr);
        if call.test {
            ret.result = None;
            comments.push(format!("Host {shown} ({shown_a}) would be added"));
        } else if hosts::add_host(opts, addr, host).map_err(err)? {
            comments.push(format!("Added host {shown} ({shown_a})"));
        } else {
            ret.result = Some(false);
            comments.push(format!("Failed to add host {shown} ({shown_a})"));
            continue;
        }
        add_change(&mut ret, "added", addr, host);
    }
    for (addr, text) in &update_comment {
        let (shown_a, shown_t) = (shown_addr(addr), call.chunk.shown(text));
        if call.test {
            comments.push(format!("Comment for {shown_a} ({shown_t}) would be added"));
        } else if hosts::set_comment(opts, addr, text).map_err(err)? {
            comments.push(format!("Set comment for host {shown_a} ({shown_t})"));
        } else {
            ret.result = Some(false);
            comments.push(format!(
                "Failed to add comment for host {shown_a} ({shown_t})"
            ));
            continue;
        }
        add_change(&mut ret, "comment_added", addr, text);
    }
    for (addr, host) in &to_remove {
        if call.test {
            ret.result = None;
            comments.push(format!("Host {shown} ({addr}) would be removed"));
        } else if hosts::rm_host(opts, addr, host).map_err(err)? {
            comments.push(format!("Removed host {shown} ({addr})"));
        } else {
            ret.result = Some(false);
            comments.push(format!("Failed to remove host {shown} ({addr})"));
            continue;
        }
        add_change(&mut ret, "removed", addr, host);
    }
    if !warnings.is_empty() {
        ret.extra.insert("warnings".into(), Value::Array(warnings));
    }
    ret.comment = comments.join("\n");
    Ok(ret)
}

fn absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let ips = list_arg(call, "ip")?;
    let opts = call.env.opts();
    let mut ret = StateResult::new(&name, None);
    let mut comments = Vec::new();
    for ip in &ips {
        if !hosts::has_pair(opts, ip, &name).map_err(err)? {
            ret.result = Some(true);
            comments.push(format!("Host {name} ({ip}) already absent"));
        } else if call.test {
            comments.push(format!("Host {name} ({ip}) needs to be removed"));
        } else if hosts::rm_host(opts, ip, &name).map_err(err)? {
            ret.changes = Map::new();
            ret.changes.insert("host".into(), Value::from(name.clone()));
            ret.result = Some(true);
            comments.push(format!("Removed host {name} ({ip})"));
        } else {
            ret.result = Some(false);
            comments.push("Failed to remove host".into());
        }
    }
    ret.comment = comments.join("\n");
    Ok(ret)
}

fn only(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = call.name().to_string();
    let hostnames = list_arg(call, "hostnames")?;
    let opts = call.env.opts();
    let old = hosts::aliases(&hosts::list(opts).map_err(err)?, &name).join(" ");
    let new = hostnames
        .iter()
        .map(|h| h.trim())
        .collect::<Vec<_>>()
        .join(" ");
    if old == new {
        return Ok(StateResult::ok(
            &name,
            format!("IP address {name} already set to \"{new}\""),
        ));
    }
    if call.test {
        let mut ret = StateResult::new(&name, None);
        ret.comment = format!("Would change {name} from \"{old}\" to \"{new}\"");
        return Ok(ret);
    }
    if !hosts::set_host(opts, &name, &new, None).map_err(err)? {
        return Ok(StateResult::fail(
            &name,
            format!("hosts.set_host failed to change {name} from \"{old}\" to \"{new}\""),
        ));
    }
    let mut ret = StateResult::ok(
        &name,
        format!("successfully changed {name} from \"{old}\" to \"{new}\""),
    );
    let mut change = Map::new();
    change.insert("old".into(), Value::from(old));
    change.insert("new".into(), Value::from(new));
    ret.changes.insert(name.clone(), Value::Object(change));
    Ok(ret)
}
