//! Salt's `firewalld` execution module: zones, services, ports, forwards,
//! ICMP blocks, interfaces, sources and rich rules of firewalld, driven
//! through `firewall-cmd` as Salt 3008 does (`salt/modules/firewalld.py`).
//!
//! Why `firewall-cmd` and not D-Bus directly: it is what Salt runs, so the
//! errors users see (`firewall-cmd failed: Error: INVALID_ZONE: x`) are the
//! same, and it honours `DBUS_SYSTEM_BUS_ADDRESS` like any D-Bus client.

use halite_state::{CmdOptions, Map, Value};

use crate::exec::{py_str, py_truth, Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "firewalld",
    functions: &[
        ExecFunction::new("version", |_, _| text(&["--version"])),
        ExecFunction::new("reload_rules", |_, h| {
            guarded(h, "reload_rules", || reload_rules().map(Value::from))
        }),
        ExecFunction::new("default_zone", |_, _| default_zone().map(Value::from)),
        ExecFunction::new("make_permanent", |_, h| {
            guarded(h, "make_permanent", || text(&["--runtime-to-permanent"]))
        }),
        ExecFunction::new("list_zones", list_zones_fn),
        ExecFunction::new("get_zones", |a, _| names("--get-zones", a, 0)),
        ExecFunction::new("get_services", |a, _| names("--get-services", a, 0)),
        ExecFunction::new("get_icmp_types", |a, _| names("--get-icmptypes", a, 0)),
        ExecFunction::new("new_zone", |a, h| {
            guarded(h, "new_zone", || manage("new", "zone", a))
        }),
        ExecFunction::new("delete_zone", |a, h| {
            guarded(h, "delete_zone", || manage("delete", "zone", a))
        }),
        ExecFunction::new("new_service", |a, h| {
            guarded(h, "new_service", || manage("new", "service", a))
        }),
        ExecFunction::new("delete_service", |a, h| {
            guarded(h, "delete_service", || manage("delete", "service", a))
        }),
        ExecFunction::new("set_default_zone", |a, h| {
            guarded(h, "set_default_zone", || set_default_zone_fn(a, h))
        }),
        ExecFunction::new("list_all", list_all_fn),
        ExecFunction::new("list_services", |a, _| {
            zone_list_fn(a, ZoneArg::Optional, "services")
        }),
        ExecFunction::new("add_service", |a, h| {
            guarded(h, "add_service", || service_change("add", a, "add_service"))
        }),
        ExecFunction::new("remove_service", |a, h| {
            guarded(h, "remove_service", || {
                service_change("remove", a, "remove_service")
            })
        }),
        ExecFunction::new("add_service_port", |a, h| {
            guarded(h, "add_service_port", || {
                service_item("add", "port", a, true)
            })
        }),
        ExecFunction::new("remove_service_port", |a, h| {
            guarded(h, "remove_service_port", || {
                service_item("remove", "port", a, true)
            })
        }),
        ExecFunction::new("get_service_ports", |a, _| service_items("ports", a)),
        ExecFunction::new("add_service_protocol", |a, h| {
            guarded(h, "add_service_protocol", || {
                service_item("add", "protocol", a, false)
            })
        }),
        ExecFunction::new("remove_service_protocol", |a, h| {
            guarded(h, "remove_service_protocol", || {
                service_item("remove", "protocol", a, false)
            })
        }),
        ExecFunction::new("get_service_protocols", |a, _| {
            service_items("protocols", a)
        }),
        ExecFunction::new("get_masquerade", get_masquerade_fn),
        ExecFunction::new("add_masquerade", |a, h| {
            guarded(h, "add_masquerade", || masquerade_fn("add", a))
        }),
        ExecFunction::new("remove_masquerade", |a, h| {
            guarded(h, "remove_masquerade", || masquerade_fn("remove", a))
        }),
        ExecFunction::new("add_port", |a, h| {
            guarded(h, "add_port", || add_port_fn(a, h))
        }),
        ExecFunction::new("remove_port", |a, h| {
            guarded(h, "remove_port", || zone_item_fn(a, "remove", "port"))
        }),
        ExecFunction::new("list_ports", |a, _| {
            zone_list_fn(a, ZoneArg::Required, "ports")
        }),
        ExecFunction::new("add_port_fwd", |a, h| {
            guarded(h, "add_port_fwd", || port_fwd_fn("add", a))
        }),
        ExecFunction::new("remove_port_fwd", |a, h| {
            guarded(h, "remove_port_fwd", || port_fwd_fn("remove", a))
        }),
        ExecFunction::new("list_port_fwd", list_port_fwd_fn),
        ExecFunction::new("block_icmp", |a, h| {
            guarded(h, "block_icmp", || icmp_fn(a, true))
        }),
        ExecFunction::new("allow_icmp", |a, h| {
            guarded(h, "allow_icmp", || icmp_fn(a, false))
        }),
        ExecFunction::new("list_icmp_block", |a, _| {
            zone_list_fn(a, ZoneArg::Required, "icmp-blocks")
        }),
        ExecFunction::new("get_interfaces", |a, _| {
            zone_list_fn(a, ZoneArg::Required, "interfaces")
        }),
        ExecFunction::new("add_interface", |a, h| {
            guarded(h, "add_interface", || zone_item_fn(a, "add", "interface"))
        }),
        ExecFunction::new("remove_interface", |a, h| {
            guarded(h, "remove_interface", || {
                zone_item_fn(a, "remove", "interface")
            })
        }),
        ExecFunction::new("get_sources", |a, _| {
            zone_list_fn(a, ZoneArg::Required, "sources")
        }),
        ExecFunction::new("add_source", |a, h| {
            guarded(h, "add_source", || zone_item_fn(a, "add", "source"))
        }),
        ExecFunction::new("remove_source", |a, h| {
            guarded(h, "remove_source", || zone_item_fn(a, "remove", "source"))
        }),
        ExecFunction::new("get_rich_rules", |a, _| {
            zone_list_fn(a, ZoneArg::Required, "rich-rules")
        }),
        ExecFunction::new("add_rich_rule", |a, h| {
            guarded(h, "add_rich_rule", || zone_item_fn(a, "add", "rich-rule"))
        }),
        ExecFunction::new("remove_rich_rule", |a, h| {
            guarded(h, "remove_rich_rule", || {
                zone_item_fn(a, "remove", "rich-rule")
            })
        }),
    ],
};

/// Under `test=True` a function that would change firewalld says so
/// instead (Salt runs it anyway; halite's dispatch probe calls every
/// function with no arguments, which for `add_masquerade` means the
/// default zone).
fn guarded(
    host: &Host,
    fun: &str,
    run: impl FnOnce() -> Result<Value, ExecError>,
) -> Result<Value, ExecError> {
    if host.test_mode() {
        return Ok(Value::from(format!("test=True: would run firewalld.{fun}")));
    }
    run()
}

/// Runs `firewall-cmd <words>`: its stdout, or Salt's `firewall-cmd
/// failed: <stderr or stdout>` error.
pub fn firewall_cmd(words: &[String]) -> Result<String, ExecError> {
    let bin = crate::exec::cmd::which("firewall-cmd").ok_or_else(|| {
        ExecError::Execution(
            "firewall-cmd is not installed: install firewalld (apt-get install firewalld)".into(),
        )
    })?;
    let argv: Vec<String> = std::iter::once(bin).chain(words.iter().cloned()).collect();
    tracing::debug!(?argv, "firewall-cmd");
    let out = crate::command::run_argv(&argv, &CmdOptions::default())
        .map_err(|e| ExecError::Execution(format!("cannot run firewall-cmd: {e}")))?;
    if out.retcode != 0 {
        let msg = if out.stderr.is_empty() {
            out.stdout
        } else {
            out.stderr
        };
        return Err(ExecError::Execution(format!("firewall-cmd failed: {msg}")));
    }
    Ok(out.stdout)
}

/// `firewall-cmd` with fixed words, its stdout as a string.
fn text(words: &[&str]) -> Result<Value, ExecError> {
    firewall_cmd(&owned(words)).map(Value::from)
}

fn owned(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// `--permanent` appended when asked (Salt's `permanent=True` default).
fn with_permanent(mut words: Vec<String>, permanent: bool) -> Vec<String> {
    if permanent {
        words.push("--permanent".into());
    }
    words
}

/// Salt's `reload_rules`: the permanent configuration becomes the runtime.
pub fn reload_rules() -> Result<String, ExecError> {
    firewall_cmd(&owned(&["--reload"]))
}

/// Salt's `default_zone` (the runtime one).
pub fn default_zone() -> Result<String, ExecError> {
    firewall_cmd(&owned(&["--get-default-zone"]))
}

/// Salt's `set_default_zone` (runtime and permanent at once).
pub fn set_default_zone(zone: &str) -> Result<String, ExecError> {
    firewall_cmd(&[format!("--set-default-zone={zone}")])
}

fn set_default_zone_fn(args: &Args, _: &Host) -> Result<Value, ExecError> {
    let zone = args.require_str(0, "zone", "set_default_zone")?;
    set_default_zone(&zone).map(Value::from)
}

/// Whitespace-separated names printed by `flag` (`--get-zones`...).
pub fn get_names(flag: &str, permanent: bool) -> Result<Vec<String>, ExecError> {
    let out = firewall_cmd(&with_permanent(vec![flag.to_string()], permanent))?;
    Ok(out.split_whitespace().map(String::from).collect())
}

fn names(flag: &str, args: &Args, at: usize) -> Result<Value, ExecError> {
    let permanent = args.get_bool(at, "permanent", true);
    get_names(flag, permanent).map(list)
}

fn list(items: Vec<String>) -> Value {
    Value::Array(items.into_iter().map(Value::from).collect())
}

/// Salt's `new_zone`/`delete_zone`/`new_service`/`delete_service`
/// (`--<action>-<kind>=<name> --permanent`), reloading afterwards unless
/// `restart=False`.
pub fn manage_named(
    action: &str,
    kind: &str,
    name: &str,
    restart: bool,
) -> Result<String, ExecError> {
    let out = firewall_cmd(&[format!("--{action}-{kind}={name}"), "--permanent".into()])?;
    if restart && out == "success" {
        return reload_rules();
    }
    Ok(out)
}

fn manage(action: &str, kind: &str, args: &Args) -> Result<Value, ExecError> {
    let key = if kind == "zone" { "zone" } else { "name" };
    let name = args.require_str(0, key, &format!("{action}_{kind}"))?;
    let restart = args.get_bool(1, "restart", true);
    manage_named(action, kind, &name, restart).map(Value::from)
}

/// Salt's `__parse_zone`: `--list-all` output as `{zone: {key: [values]}}`
/// (continuation lines, as rich rules are printed, join the last key).
pub fn parse_zones(out: &str) -> Map {
    let mut zones = Map::new();
    let mut zone: Option<String> = None;
    let mut key = String::new();
    for line in out.lines().filter(|l| !l.trim().is_empty()) {
        if line.starts_with(|c: char| c.is_ascii_alphanumeric()) {
            zone = Some(line.trim_end().to_string());
            continue;
        }
        let Some(name) = &zone else { continue };
        let entry = zones
            .entry(name.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(fields) = entry else {
            continue;
        };
        if line.starts_with('\t') {
            if let Some(Value::Array(values)) = fields.get_mut(&key) {
                values.push(Value::from(line.trim()));
            }
            continue;
        }
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        key = k.trim().to_string();
        fields.insert(key.clone(), Value::Array(vec![Value::from(v.trim())]));
    }
    zones
}

/// Salt's `list_all`: one zone's (or the default zone's) settings.
pub fn list_all(zone: Option<&str>, permanent: bool) -> Result<Map, ExecError> {
    let mut words = Vec::new();
    if let Some(z) = zone {
        words.push(format!("--zone={z}"));
    }
    words.push("--list-all".into());
    Ok(parse_zones(&firewall_cmd(&with_permanent(
        words, permanent,
    ))?))
}

fn list_all_fn(args: &Args, _: &Host) -> Result<Value, ExecError> {
    let zone = args.get_str(0, "zone");
    let permanent = args.get_bool(1, "permanent", true);
    list_all(zone.as_deref(), permanent).map(Value::Object)
}

fn list_zones_fn(args: &Args, _: &Host) -> Result<Value, ExecError> {
    let permanent = args.get_bool(0, "permanent", true);
    let words = with_permanent(vec!["--list-all-zones".into()], permanent);
    Ok(Value::Object(parse_zones(&firewall_cmd(&words)?)))
}

/// Salt's `get_masquerade`: whether masquerading is on in the zone.
pub fn get_masquerade(zone: Option<&str>, permanent: bool) -> Result<bool, ExecError> {
    let zones = list_all(zone, permanent)?;
    let off = zones.values().any(|fields| {
        fields
            .get("masquerade")
            .and_then(|v| v.get(0))
            .and_then(Value::as_str)
            == Some("no")
    });
    Ok(!off)
}

fn get_masquerade_fn(args: &Args, _: &Host) -> Result<Value, ExecError> {
    let zone = args.get_str(0, "zone");
    let permanent = args.get_bool(1, "permanent", true);
    get_masquerade(zone.as_deref(), permanent).map(Value::from)
}

/// Salt's `add_masquerade`/`remove_masquerade` (`op`).
pub fn masquerade(op: &str, zone: Option<&str>, permanent: bool) -> Result<String, ExecError> {
    let mut words = Vec::new();
    if let Some(z) = zone {
        words.push(format!("--zone={z}"));
    }
    words.push(format!("--{op}-masquerade"));
    firewall_cmd(&with_permanent(words, permanent))
}

fn masquerade_fn(op: &str, args: &Args) -> Result<Value, ExecError> {
    let zone = args.get_str(0, "zone");
    let permanent = args.get_bool(1, "permanent", true);
    masquerade(op, zone.as_deref(), permanent).map(Value::from)
}

/// Whether a function's `zone` comes first and may be left out (then the
/// default zone is meant) or is required.
#[derive(Clone, Copy)]
enum ZoneArg {
    Optional,
    Required,
}

/// `--zone=<zone> --list-<what>`: the zone's items; rich rules are one a
/// line, everything else whitespace-separated (as Salt splits them).
pub fn zone_list(
    zone: Option<&str>,
    what: &str,
    permanent: bool,
) -> Result<Vec<String>, ExecError> {
    let mut words = Vec::new();
    if let Some(z) = zone {
        words.push(format!("--zone={z}"));
    }
    words.push(format!("--list-{what}"));
    let out = firewall_cmd(&with_permanent(words, permanent))?;
    Ok(if what == "rich-rules" {
        out.lines().map(String::from).collect()
    } else {
        out.split_whitespace().map(String::from).collect()
    })
}

fn zone_list_fn(args: &Args, zone_arg: ZoneArg, what: &str) -> Result<Value, ExecError> {
    let zone = match zone_arg {
        ZoneArg::Optional => args.get_str(0, "zone"),
        ZoneArg::Required => Some(args.require_str(0, "zone", &list_fun(what))?),
    };
    let permanent = args.get_bool(1, "permanent", true);
    zone_list(zone.as_deref(), what, permanent).map(list)
}

/// Salt's function name for `--list-<what>`, for its argument errors.
fn list_fun(what: &str) -> String {
    match what {
        "icmp-blocks" => "list_icmp_block".into(),
        "interfaces" | "sources" | "rich-rules" => format!("get_{}", what.replace('-', "_")),
        other => format!("list_{other}"),
    }
}

/// `--zone=<zone> --<op>-<what>=<item>`: adds or removes one item.
pub fn zone_item(
    zone: Option<&str>,
    op: &str,
    what: &str,
    item: &str,
    permanent: bool,
) -> Result<String, ExecError> {
    let mut words = Vec::new();
    if let Some(z) = zone {
        words.push(format!("--zone={z}"));
    }
    words.push(format!("--{op}-{what}={item}"));
    firewall_cmd(&with_permanent(words, permanent))
}

/// `add_port`, `add_interface`... `(zone, item, permanent=True)`.
fn zone_item_fn(args: &Args, op: &str, what: &str) -> Result<Value, ExecError> {
    let fun = format!("{op}_{}", what.replace('-', "_"));
    let zone = args.require_str(0, "zone", &fun)?;
    let key = match what {
        "rich-rule" => "rule",
        other => other,
    };
    let item = item_arg(args, 1, key, &fun)?;
    let permanent = args.get_bool(2, "permanent", true);
    zone_item(Some(&zone), op, what, &item, permanent).map(Value::from)
}

/// A required argument as Salt formats it into the command line.
fn item_arg(args: &Args, at: usize, key: &str, fun: &str) -> Result<String, ExecError> {
    match args.get(at, key) {
        Some(v) if !v.is_null() => Ok(py_str(v)),
        _ => args.require_str(at, key, fun),
    }
}

fn add_port_fn(args: &Args, _: &Host) -> Result<Value, ExecError> {
    let zone = args.require_str(0, "zone", "add_port")?;
    let port = item_arg(args, 1, "port", "add_port")?;
    let permanent = args.get_bool(2, "permanent", true);
    if args.get(3, "force_masquerade").is_some_and(py_truth) && !get_masquerade(Some(&zone), true)?
    {
        masquerade("add", Some(&zone), true)?;
    }
    zone_item(Some(&zone), "add", "port", &port, permanent).map(Value::from)
}

/// `add_service`/`remove_service`: `(service, zone=None, permanent=True)`.
fn service_change(op: &str, args: &Args, fun: &str) -> Result<Value, ExecError> {
    let service = args.require_str(0, "service", fun)?;
    let zone = args.get_str(1, "zone");
    let permanent = args.get_bool(2, "permanent", true);
    zone_item(zone.as_deref(), op, "service", &service, permanent).map(Value::from)
}

/// A port forward as Salt's state compares them (`ForwardingMapping`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PortForward {
    /// The port traffic arrives on.
    pub srcport: String,
    /// The port it is sent to.
    pub destport: String,
    /// `tcp`, `udp`...
    pub protocol: String,
    /// The address it is sent to; empty for this host.
    pub destaddr: String,
}

impl PortForward {
    /// Salt's `todict`, keys in its order.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("Source port".into(), Value::from(self.srcport.clone()));
        m.insert(
            "Destination port".into(),
            Value::from(self.destport.clone()),
        );
        m.insert("Protocol".into(), Value::from(self.protocol.clone()));
        m.insert(
            "Destination address".into(),
            Value::from(self.destaddr.clone()),
        );
        Value::Object(m)
    }

    /// The `port=..:proto=..:toport=..:toaddr=..` firewall-cmd takes.
    fn spec(&self) -> String {
        format!(
            "port={}:proto={}:toport={}:toaddr={}",
            self.srcport, self.protocol, self.destport, self.destaddr
        )
    }
}

/// Salt's `list_port_fwd`: the zone's forwards.
pub fn list_port_fwd(zone: &str, permanent: bool) -> Result<Vec<PortForward>, ExecError> {
    let words = with_permanent(
        vec![format!("--zone={zone}"), "--list-forward-ports".into()],
        permanent,
    );
    let out = firewall_cmd(&words)?;
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let field = |name: &str| {
                line.split(':')
                    .find_map(|part| part.strip_prefix(name).and_then(|r| r.strip_prefix('=')))
                    .map(String::from)
                    .ok_or_else(|| {
                        ExecError::Execution(format!(
                            "cannot read the forward {line:?} printed by firewall-cmd: no {name}"
                        ))
                    })
            };
            Ok(PortForward {
                srcport: field("port")?,
                protocol: field("proto")?,
                destport: field("toport")?,
                destaddr: field("toaddr").unwrap_or_default(),
            })
        })
        .collect()
}

fn list_port_fwd_fn(args: &Args, _: &Host) -> Result<Value, ExecError> {
    let zone = args.require_str(0, "zone", "list_port_fwd")?;
    let permanent = args.get_bool(1, "permanent", true);
    let fwds = list_port_fwd(&zone, permanent)?;
    Ok(Value::Array(
        fwds.iter().map(PortForward::to_value).collect(),
    ))
}

/// Salt's `add_port_fwd`/`remove_port_fwd` (`op`).
pub fn port_fwd(
    op: &str,
    zone: &str,
    fwd: &PortForward,
    permanent: bool,
) -> Result<String, ExecError> {
    let words = with_permanent(
        vec![
            format!("--zone={zone}"),
            format!("--{op}-forward-port={}", fwd.spec()),
        ],
        permanent,
    );
    firewall_cmd(&words)
}

fn port_fwd_fn(op: &str, args: &Args) -> Result<Value, ExecError> {
    let fun = format!("{op}_port_fwd");
    let zone = args.require_str(0, "zone", &fun)?;
    let fwd = PortForward {
        srcport: item_arg(args, 1, "src", &fun)?,
        destport: item_arg(args, 2, "dest", &fun)?,
        protocol: args.get_str(3, "proto").unwrap_or_else(|| "tcp".into()),
        destaddr: args.get_str(4, "dstaddr").unwrap_or_default(),
    };
    let permanent = args.get_bool(5, "permanent", true);
    if op == "add"
        && args.get(6, "force_masquerade").is_some_and(py_truth)
        && !get_masquerade(Some(&zone), true)?
    {
        masquerade("add", Some(&zone), true)?;
    }
    port_fwd(op, &zone, &fwd, permanent).map(Value::from)
}

/// Salt's `block_icmp` (`block`) and `allow_icmp`: an unknown type is
/// `False` (logged), one already in the wanted state `"success"`.
fn icmp_fn(args: &Args, block: bool) -> Result<Value, ExecError> {
    let fun = if block { "block_icmp" } else { "allow_icmp" };
    let zone = args.require_str(0, "zone", fun)?;
    let icmp = item_arg(args, 1, "icmp", fun)?;
    let permanent = args.get_bool(2, "permanent", true);
    if !get_names("--get-icmptypes", permanent)?.contains(&icmp) {
        tracing::error!("Invalid ICMP type");
        return Ok(Value::Bool(false));
    }
    let blocked = zone_list(Some(&zone), "icmp-blocks", permanent)?.contains(&icmp);
    if blocked == block {
        return Ok(Value::from("success"));
    }
    let op = if block { "add" } else { "remove" };
    zone_item(Some(&zone), op, "icmp-block", &icmp, permanent).map(Value::from)
}

/// `--permanent --service=<name> --get-<what>`: a service's ports or
/// protocols.
pub fn service_list(service: &str, what: &str) -> Result<Vec<String>, ExecError> {
    let words = vec![
        "--permanent".to_string(),
        format!("--service={service}"),
        format!("--get-{what}"),
    ];
    Ok(firewall_cmd(&words)?
        .split_whitespace()
        .map(String::from)
        .collect())
}

fn service_items(what: &str, args: &Args) -> Result<Value, ExecError> {
    let service = args.require_str(0, "service", &format!("get_service_{what}"))?;
    service_list(&service, what).map(list)
}

/// `--permanent --service=<name> --<op>-<what>=<item>`.
pub fn service_change_item(
    service: &str,
    op: &str,
    what: &str,
    item: &str,
) -> Result<String, ExecError> {
    firewall_cmd(&[
        "--permanent".to_string(),
        format!("--service={service}"),
        format!("--{op}-{what}={item}"),
    ])
}

/// `add_service_port` & co.; ports check that the service exists first,
/// as Salt does.
fn service_item(op: &str, what: &str, args: &Args, check: bool) -> Result<Value, ExecError> {
    let fun = format!("{op}_service_{what}");
    let service = args.require_str(0, "service", &fun)?;
    let item = item_arg(args, 1, what, &fun)?;
    if check && !get_names("--get-services", true)?.contains(&service) {
        return Err(ExecError::Execution("The service does not exist.".into()));
    }
    service_change_item(&service, op, what, &item).map(Value::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_all_output_reads_as_salts_parse_zone() {
        let out = "work\n  target: default\n  services: dhcpv6-client ssh\n  masquerade: no\n  rich rules: \n\trule family=\"ipv4\" accept\n\trule family=\"ipv6\" drop\n";
        let zones = parse_zones(out);
        let work = &zones["work"];
        assert_eq!(work["services"], serde_json::json!(["dhcpv6-client ssh"]));
        assert_eq!(work["masquerade"], serde_json::json!(["no"]));
        assert_eq!(
            work["rich rules"],
            serde_json::json!([
                "",
                "rule family=\"ipv4\" accept",
                "rule family=\"ipv6\" drop"
            ])
        );
    }

    #[test]
    fn a_forward_spec_is_firewall_cmds() {
        let f = PortForward {
            srcport: "2222".into(),
            destport: "22".into(),
            protocol: "tcp".into(),
            destaddr: String::new(),
        };
        assert_eq!(f.spec(), "port=2222:proto=tcp:toport=22:toaddr=");
    }
}
