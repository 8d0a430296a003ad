//! Salt's `firewalld` state (`salt/states/firewalld.py`): a zone's
//! settings (`present`) and a service's ports and protocols (`service`),
//! changed in the permanent configuration and then reloaded, with Salt's
//! `changes` and comments.
//!
//! `present` is one phase per setting (`icmp_types`, `default`,
//! `masquerade`, `ports`, `port_fwd`, `services`, `interfaces`, `sources`,
//! `rich_rules`), each reading what the zone has, planning what to add
//! (and with `prune_*` remove), acting unless `test=True`, and reporting
//! Salt's `{old, new}`.

use halite_state::{Map, StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::firewalld::{self as fw, PortForward};
use crate::exec::user::scalar_text;
use crate::exec::{py_truth, ExecError};

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "firewalld",
    functions: &[
        StateFunction::new("present", present),
        StateFunction::new("service", service),
    ],
};

/// A step that failed: Salt's `Error: <message>` comment.
struct Failed(String);

impl From<ExecError> for Failed {
    fn from(e: ExecError) -> Self {
        Failed(e.to_string())
    }
}

/// The run of one `present`: the zone, test mode, and what changed so far.
struct Zone<'a> {
    name: &'a str,
    test: bool,
    /// The zone does not exist yet and, in test mode, was not created:
    /// every setting reads as empty (Salt would fail asking firewall-cmd).
    predicted_new: bool,
    changes: Map,
}

impl Zone<'_> {
    /// The zone's items of `what` (`ports`, `services`...), empty for a
    /// zone only predicted.
    fn current(&self, what: &str) -> Result<Vec<String>, Failed> {
        if self.predicted_new {
            return Ok(Vec::new());
        }
        Ok(fw::zone_list(Some(self.name), what, true)?)
    }

    /// Adds or removes one item unless in test mode.
    fn change(&self, op: &str, what: &str, item: &str) -> Result<(), Failed> {
        if !self.test {
            fw::zone_item(Some(self.name), op, what, item, true)?;
        }
        Ok(())
    }

    /// Records `{old, new}` under `key`.
    fn record(&mut self, key: &str, old: Value, new: Value) {
        let mut m = Map::new();
        m.insert("old".into(), old);
        m.insert("new".into(), new);
        self.changes.insert(key.into(), Value::Object(m));
    }
}

/// A list argument as strings; `None` when absent or empty (Python's
/// `if ports:` is false for both).
fn list_arg(call: &StateCall<'_>, key: &str) -> Vec<String> {
    call.arg_list(key).iter().filter_map(scalar_text).collect()
}

/// A flag read with Python's `if x:`.
fn flag(call: &StateCall<'_>, key: &str) -> bool {
    call.arg(key).is_some_and(py_truth)
}

fn strings(items: &[String]) -> Value {
    Value::Array(items.iter().cloned().map(Value::from).collect())
}

/// What to add, what to remove, and Salt's `new` list: the wanted list
/// when pruning, else what is there plus what was added (Salt builds it
/// from a set; halite keeps the zone's order, then the additions').
fn plan<T: PartialEq + Clone>(
    wanted: &[T],
    prune: bool,
    current: &[T],
) -> (Vec<T>, Vec<T>, Vec<T>) {
    let mut add: Vec<T> = Vec::new();
    for w in wanted {
        if !current.contains(w) && !add.contains(w) {
            add.push(w.clone());
        }
    }
    let remove: Vec<T> = if prune {
        let mut r: Vec<T> = Vec::new();
        for c in current {
            if !wanted.contains(c) && !r.contains(c) {
                r.push(c.clone());
            }
        }
        r
    } else {
        Vec::new()
    };
    let new = if prune {
        wanted.to_vec()
    } else {
        current.iter().chain(add.iter()).cloned().collect()
    };
    (add, remove, new)
}

/// `ports`, `services`, `interfaces`, `sources`, `rich_rules`: the same
/// read-plan-act-report over one kind of item.
fn simple_section(
    zone: &mut Zone<'_>,
    key: &str,
    list_what: &str,
    item_what: &str,
    wanted: &[String],
    prune: bool,
) -> Result<(), Failed> {
    let current = zone.current(list_what)?;
    let (add, remove, new) = plan(wanted, prune, &current);
    for item in &add {
        zone.change("add", item_what, item)?;
    }
    for item in &remove {
        zone.change("remove", item_what, item)?;
    }
    if !add.is_empty() || !remove.is_empty() {
        zone.record(key, strings(&current), strings(&new));
    }
    Ok(())
}

/// `block_icmp`: types firewalld does not know are dropped with an error
/// logged, as Salt does.
fn icmp_section(zone: &mut Zone<'_>, wanted: &[String], prune: bool) -> Result<(), Failed> {
    let current = zone.current("icmp-blocks")?;
    let mut wanted = wanted.to_vec();
    if !wanted.is_empty() {
        let valid = fw::get_names("--get-icmptypes", true)?;
        wanted.retain(|t| {
            let ok = valid.contains(t);
            if !ok {
                tracing::error!("{t} is an invalid ICMP type");
            }
            ok
        });
    }
    let (add, remove, new) = plan(&wanted, prune, &current);
    for t in &add {
        zone.change("add", "icmp-block", t)?;
    }
    for t in &remove {
        zone.change("remove", "icmp-block", t)?;
    }
    if !add.is_empty() || !remove.is_empty() {
        zone.record("icmp_types", strings(&current), strings(&new));
    }
    Ok(())
}

/// `default: True`: the zone becomes the default one (runtime and
/// permanent at once, as firewall-cmd does it).
fn default_section(zone: &mut Zone<'_>) -> Result<(), Failed> {
    let current = fw::default_zone()?;
    if current != zone.name {
        if !zone.test {
            fw::set_default_zone(zone.name)?;
        }
        zone.record("default", Value::from(current), Value::from(zone.name));
    }
    Ok(())
}

/// `masquerade`: on or off when given (Salt reads it either way).
fn masquerade_section(zone: &mut Zone<'_>, wanted: Option<bool>) -> Result<(), Failed> {
    let current = if zone.predicted_new {
        false
    } else {
        fw::get_masquerade(Some(zone.name), true)?
    };
    let (op, said) = match wanted {
        Some(true) if !current => ("add", "Masquerading successfully set."),
        Some(false) if current => ("remove", "Masquerading successfully disabled."),
        _ => return Ok(()),
    };
    if !zone.test {
        fw::masquerade(op, Some(zone.name), true)?;
    }
    zone.record("masquerade", Value::Bool(current), Value::from(said));
    Ok(())
}

/// Salt's `_parse_forward`: `from:to:protocol[:destination]`.
fn parse_forward(mapping: &str) -> Result<PortForward, Failed> {
    let parts: Vec<&str> = mapping.split(':').collect();
    let (src, dest, proto, addr) = match parts.as_slice() {
        [s, d, p] => (s, d, p, &""),
        [s, d, p, a] => (s, d, p, a),
        _ => {
            return Err(Failed(format!(
                "port_fwd entry {mapping:?} is not from_port:to_port:protocol[:destination]"
            )))
        }
    };
    Ok(PortForward {
        srcport: src.to_string(),
        destport: dest.to_string(),
        protocol: proto.to_string(),
        destaddr: addr.to_string(),
    })
}

fn forwards(items: &[PortForward]) -> Value {
    Value::Array(items.iter().map(PortForward::to_value).collect())
}

/// `port_fwd`: forwards compared on all four fields.
fn port_fwd_section(zone: &mut Zone<'_>, wanted: &[String], prune: bool) -> Result<(), Failed> {
    let wanted = wanted
        .iter()
        .map(|m| parse_forward(m))
        .collect::<Result<Vec<_>, _>>()?;
    let current = if zone.predicted_new {
        Vec::new()
    } else {
        fw::list_port_fwd(zone.name, true)?
    };
    let (add, remove, new) = plan(&wanted, prune, &current);
    if !zone.test {
        for f in &add {
            fw::port_fwd("add", zone.name, f, true)?;
        }
        for f in &remove {
            fw::port_fwd("remove", zone.name, f, true)?;
        }
    }
    if !add.is_empty() || !remove.is_empty() {
        zone.record("port_fwd", forwards(&current), forwards(&new));
    }
    Ok(())
}

/// Salt's `_normalize_rich_rules`: every `key=value` of a rule gets its
/// value in double quotes, as firewall-cmd prints rules back.
fn normalize_rich_rule(rule: &str) -> String {
    rule.split(' ')
        .map(|word| match word.split_once('=') {
            Some((key, value)) if !value.starts_with('"') && !value.ends_with('"') => {
                let bare = value
                    .strip_prefix('\'')
                    .and_then(|v| v.strip_suffix('\''))
                    .unwrap_or(value);
                format!("{key}=\"{bare}\"")
            }
            _ => word.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
        .trim_start()
        .to_string()
}

/// Every phase of `present` in Salt's order; stops at the first failure.
fn apply(call: &StateCall<'_>, zone: &mut Zone<'_>) -> Result<(), Failed> {
    let zones = fw::get_names("--get-zones", true)?;
    if !zones.iter().any(|z| z == zone.name) {
        if zone.test {
            zone.predicted_new = true;
        } else {
            fw::manage_named("new", "zone", zone.name, true)?;
        }
        zone.record(zone.name, strings(&zones), Value::from(zone.name));
    }
    let block_icmp = list_arg(call, "block_icmp");
    let prune_icmp = flag(call, "prune_block_icmp");
    if !block_icmp.is_empty() || prune_icmp {
        icmp_section(zone, &block_icmp, prune_icmp)?;
    }
    if flag(call, "default") {
        default_section(zone)?;
    }
    masquerade_section(zone, call.arg("masquerade").map(py_truth))?;
    let ports = list_arg(call, "ports");
    let prune_ports = flag(call, "prune_ports");
    if !ports.is_empty() || prune_ports {
        simple_section(zone, "ports", "ports", "port", &ports, prune_ports)?;
    }
    let port_fwd = list_arg(call, "port_fwd");
    let prune_fwd = flag(call, "prune_port_fwd");
    if !port_fwd.is_empty() || prune_fwd {
        port_fwd_section(zone, &port_fwd, prune_fwd)?;
    }
    let sections = [
        ("services", "services", "service"),
        ("interfaces", "interfaces", "interface"),
        ("sources", "sources", "source"),
        ("rich_rules", "rich-rules", "rich-rule"),
    ];
    for (key, list_what, item_what) in sections {
        let mut wanted = list_arg(call, key);
        if key == "rich_rules" {
            wanted = wanted.iter().map(|r| normalize_rich_rule(r)).collect();
        }
        let prune = flag(call, &format!("prune_{key}"));
        if !wanted.is_empty() || prune {
            simple_section(zone, key, list_what, item_what, &wanted, prune)?;
        }
    }
    Ok(())
}

/// `firewalld.present`: the zone exists with these settings.
fn present(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(
        call,
        &[
            "block_icmp",
            "prune_block_icmp",
            "default",
            "masquerade",
            "ports",
            "prune_ports",
            "port_fwd",
            "prune_port_fwd",
            "services",
            "prune_services",
            "interfaces",
            "prune_interfaces",
            "sources",
            "prune_sources",
            "rich_rules",
            "prune_rich_rules",
        ],
    )?;
    let name = call.name().to_string();
    let mut zone = Zone {
        name: &name,
        test: call.test,
        predicted_new: false,
        changes: Map::new(),
    };
    let outcome = apply(call, &mut zone);
    let mut ret = StateResult::new(&name, Some(false));
    ret.changes = std::mem::take(&mut zone.changes);
    if let Err(Failed(msg)) = outcome {
        ret.comment = format!("Error: {msg}");
        reload_after(&ret, call.test);
        return Ok(ret);
    }
    if ret.changes.is_empty() {
        ret.result = Some(true);
        ret.comment = format!("'{name}' is already in the desired state.");
        return Ok(ret);
    }
    if call.test {
        // Salt puts the changes in the comment, through its nested
        // outputter, and returns none.
        let shown = halite_salt_rules::nested::render(
            &Value::Object(std::mem::take(&mut ret.changes)),
            0,
            &halite_salt_rules::colors::Colors::none(),
            0,
        );
        ret.result = None;
        ret.comment = format!(
            "Configuration for '{name}' will change:\n{}",
            shown.trim_end()
        );
        return Ok(ret);
    }
    ret.result = Some(true);
    ret.comment = format!("'{name}' was configured.");
    reload_after(&ret, false);
    Ok(ret)
}

/// Salt reloads firewalld whenever the state changed something (also
/// when a later step failed), so the runtime follows the permanent
/// configuration.
fn reload_after(ret: &StateResult, test: bool) {
    if test || ret.changes.is_empty() {
        return;
    }
    if let Err(e) = fw::reload_rules() {
        tracing::error!("reloading firewalld after changing it: {e}");
    }
}

/// `firewalld.service`: the service exists with exactly these ports and
/// protocols.
fn service(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(call, &["ports", "protocols"])?;
    let name = call.name().to_string();
    let mut ret = StateResult::new(&name, Some(false));
    if let Err(Failed(msg)) = apply_service(call, &name, &mut ret.changes) {
        ret.comment = format!("Error: {msg}");
        return Ok(ret);
    }
    if !ret.changes.is_empty() && !call.test {
        if let Err(e) = fw::reload_rules() {
            tracing::error!("reloading firewalld after changing it: {e}");
        }
    }
    ret.result = Some(true);
    ret.comment = if ret.changes.is_empty() {
        format!("'{name}' is already in the desired state.")
    } else if call.test {
        ret.result = None;
        format!("Configuration for '{name}' will change.")
    } else {
        format!("'{name}' was configured.")
    };
    Ok(ret)
}

/// The phases of `service`: create it, then its ports and protocols made
/// exactly the given lists.
fn apply_service(call: &StateCall<'_>, name: &str, changes: &mut Map) -> Result<(), Failed> {
    let exists = fw::get_names("--get-services", true)?
        .iter()
        .any(|s| s == name);
    if !exists && !call.test {
        fw::manage_named("new", "service", name, false)?;
    }
    for (key, what, item) in [
        ("ports", "ports", "port"),
        ("protocols", "protocols", "protocol"),
    ] {
        let wanted = list_arg(call, key);
        let current = if exists || !call.test {
            fw::service_list(name, what)?
        } else {
            Vec::new()
        };
        let (add, remove, _) = plan(&wanted, true, &current);
        if !call.test {
            for i in &add {
                fw::service_change_item(name, "add", item, i)?;
            }
            for i in &remove {
                fw::service_change_item(name, "remove", item, i)?;
            }
        }
        if !add.is_empty() || !remove.is_empty() {
            let mut m = Map::new();
            m.insert("old".into(), strings(&current));
            m.insert("new".into(), strings(&wanted));
            changes.insert(key.into(), Value::Object(m));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rich_rules_are_normalized_as_salt_does() {
        for rule in [
            "rule family=ipv4 source address=192.168.0.0/16 port port=22 protocol=tcp accept",
            "rule family=\"ipv4\" source address=\"192.168.0.0/16\" port port='22' protocol=tcp accept",
            "rule family='ipv4' source address='192.168.0.0/16' port port='22' protocol=tcp accept",
        ] {
            assert_eq!(
                normalize_rich_rule(rule),
                "rule family=\"ipv4\" source address=\"192.168.0.0/16\" port port=\"22\" protocol=\"tcp\" accept"
            );
        }
    }

    #[test]
    fn a_plan_without_prune_keeps_what_is_there() {
        let cur = vec!["a".to_string(), "b".to_string()];
        let want = vec!["c".to_string(), "a".to_string()];
        let (add, remove, new) = plan(&want, false, &cur);
        assert_eq!(add, vec!["c"]);
        assert!(remove.is_empty());
        assert_eq!(new, vec!["a", "b", "c"]);
        let (add, remove, new) = plan(&want, true, &cur);
        assert_eq!(add, vec!["c"]);
        assert_eq!(remove, vec!["b"]);
        assert_eq!(new, want);
    }

    #[test]
    fn a_forward_has_three_or_four_fields() {
        assert_eq!(
            parse_forward("2222:22:tcp").ok().map(|f| f.destaddr),
            Some(String::new())
        );
        assert_eq!(
            parse_forward("80:8080:tcp:10.0.0.1")
                .ok()
                .map(|f| f.destaddr),
            Some("10.0.0.1".into())
        );
        assert!(parse_forward("80:tcp").is_err());
    }
}
