//! Salt's `network` execution module, the functions templates reach for:
//! `network.interfaces` (`ip addr show` parsed as Salt's `_interfaces_ip`),
//! `network.ip_addrs`, `network.default_route` (`ip route`, Salt's path
//! when it does not use netstat) and `network.ping`.

use std::net::{IpAddr, Ipv4Addr};

use halite_state::{CmdOptions, Map, Value};
use serde_json::json;

use crate::exec::{py_str, Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "network",
    functions: &[
        ExecFunction::new("interfaces", interfaces),
        ExecFunction::new("ip_addrs", ip_addrs),
        ExecFunction::new("ipaddrs", ip_addrs),
        ExecFunction::new("default_route", default_route),
        ExecFunction::new("ping", ping),
    ],
};

fn run(cmd: &str) -> Result<String, ExecError> {
    crate::host::run_command(cmd, &CmdOptions::default())
        .map(|out| out.stdout)
        .map_err(|e| ExecError::Execution(format!("Unable to run command '{cmd}': {e}")))
}

/// The dotted netmask of an IPv4 prefix length (Salt's `cidr_to_ipv4_netmask`).
fn netmask(prefix: u32) -> String {
    let bits = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix.min(32))
    };
    Ipv4Addr::from(bits).to_string()
}

/// Parses `ip addr show` output into Salt's interface map: `up`,
/// `hwaddr`, `inet` (address, netmask, broadcast, label), `inet6`
/// (address, prefixlen, scope), `secondary`, `parent`.
pub fn parse_ip_addr(out: &str) -> Map {
    let mut ret = Map::new();
    let Ok(header) = regex::Regex::new(r"^\d*:\s+([\w.\-]+)(?:@)?([\w.\-]+)?:\s+<(.+)>") else {
        return ret;
    };
    let mut current: Option<(String, Map)> = None;
    for line in out.lines() {
        if !line.contains(' ') {
            continue;
        }
        if let Some(caps) = header.captures(line) {
            if let Some((name, data)) = current.take() {
                ret.insert(name, Value::Object(data));
            }
            let mut data = Map::new();
            let up = caps[3].split(',').any(|a| a == "UP");
            data.insert("up".into(), json!(up));
            if let Some(parent) = caps.get(2) {
                data.insert("parent".into(), json!(parent.as_str()));
            }
            current = Some((caps[1].to_string(), data));
            continue;
        }
        let Some((_, data)) = current.as_mut() else {
            continue;
        };
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() < 2 {
            continue;
        }
        let (kind, value) = (cols[0], cols[1]);
        let label = cols[cols.len() - 1];
        let after = |word: &str| {
            cols.iter()
                .position(|c| *c == word)
                .and_then(|i| cols.get(i + 1))
                .map(|s| json!(s))
                .unwrap_or(Value::Null)
        };
        let (ip, cidr) = value.split_once('/').unwrap_or((value, "32"));
        let secondary = cols.contains(&"secondary");
        let mut addr = Map::new();
        match kind {
            "inet" => {
                if secondary {
                    addr.insert("type".into(), json!("inet"));
                }
                addr.insert("address".into(), json!(ip));
                addr.insert("netmask".into(), json!(netmask(cidr.parse().unwrap_or(32))));
                addr.insert("broadcast".into(), after("brd"));
                addr.insert("label".into(), json!(label));
            }
            "inet6" => {
                if secondary {
                    addr.insert("type".into(), json!("inet6"));
                }
                addr.insert("address".into(), json!(ip));
                addr.insert("prefixlen".into(), json!(cidr));
                addr.insert("scope".into(), after("scope"));
            }
            k if k.starts_with("link") => {
                data.insert("hwaddr".into(), json!(value));
                continue;
            }
            _ => continue,
        }
        let key = if secondary { "secondary" } else { kind };
        if let Value::Array(list) = data.entry(key.to_string()).or_insert_with(|| json!([])) {
            list.push(Value::Object(addr));
        }
    }
    if let Some((name, data)) = current {
        ret.insert(name, Value::Object(data));
    }
    ret
}

/// `network.interfaces`: every interface with its state and addresses.
fn interfaces(_args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Object(parse_ip_addr(&run("ip addr show")?)))
}

/// Whether `ip` is in `cidr` (`a.b.c.d/n`); false for a malformed cidr.
fn in_subnet(cidr: &str, ip: &IpAddr) -> bool {
    let (net, len) = cidr.split_once('/').unwrap_or((cidr, "32"));
    match (net.parse::<IpAddr>(), ip, len.parse::<u32>()) {
        (Ok(IpAddr::V4(net)), IpAddr::V4(ip), Ok(len)) if len <= 32 => {
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            u32::from(net) & mask == u32::from(*ip) & mask
        }
        (Ok(IpAddr::V6(net)), IpAddr::V6(ip), Ok(len)) if len <= 128 => {
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            u128::from(net) & mask == u128::from(*ip) & mask
        }
        _ => false,
    }
}

/// Python's `ipaddress.IPv4Address.is_private` ranges.
fn is_private(ip: &Ipv4Addr) -> bool {
    [
        "0.0.0.0/8",
        "10.0.0.0/8",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/29",
        "192.0.0.170/31",
        "192.0.2.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "240.0.0.0/4",
        "255.255.255.255/32",
    ]
    .iter()
    .any(|net| in_subnet(net, &IpAddr::V4(*ip)))
}

/// `network.ip_addrs [interface] [include_loopback=False] [cidr] [type]`:
/// the sorted IPv4 addresses of the host (or one interface).
fn ip_addrs(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let interface = args.get_str(0, "interface");
    let include_loopback = args.get_bool(1, "include_loopback", false);
    let cidr = args.get_str(2, "cidr");
    let kind = args.get_str(3, "type");
    let ifaces = parse_ip_addr(&run("ip addr show")?);
    let mut found: Vec<Ipv4Addr> = Vec::new();
    for (name, data) in &ifaces {
        if interface.as_ref().is_some_and(|i| i != name) {
            continue;
        }
        let primary = data
            .get("inet")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        let secondary = data
            .get("secondary")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|a| a.get("type") == Some(&json!("inet")));
        for addr in primary.chain(secondary) {
            if let Some(ip) = addr
                .get("address")
                .and_then(Value::as_str)
                .and_then(|a| a.parse::<Ipv4Addr>().ok())
            {
                if include_loopback || !ip.is_loopback() {
                    found.push(ip);
                }
            }
        }
    }
    found.sort();
    found.dedup();
    let keep = |ip: &Ipv4Addr| match (&cidr, kind.as_deref()) {
        (Some(c), _) => in_subnet(c, &IpAddr::V4(*ip)),
        (None, Some("public")) => !is_private(ip),
        (None, Some("private")) => is_private(ip),
        _ => true,
    };
    Ok(json!(found
        .iter()
        .filter(|ip| keep(ip))
        .map(ToString::to_string)
        .collect::<Vec<_>>()))
}

/// The default routes of `ip route` output as Salt shapes them.
pub fn parse_default_routes(v4: &str, v6: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for (family, text, destination, netmask) in [
        ("inet", v4, "0.0.0.0", "0.0.0.0"),
        ("inet6", v6, "::/0", ""),
    ] {
        for line in text.lines() {
            let comps: Vec<&str> = line.split_whitespace().collect();
            if comps.first() != Some(&"default") {
                continue;
            }
            let interface = match (comps.get(3), comps.get(4)) {
                (Some(&"dev"), Some(dev)) => *dev,
                _ => "",
            };
            out.push(json!({
                "addr_family": family,
                "destination": destination,
                "gateway": comps.get(2).copied().unwrap_or_default(),
                "netmask": netmask,
                "flags": "UG",
                "interface": interface,
            }));
        }
    }
    out
}

/// `network.default_route [family]`: the default routes (`inet`, `inet6`
/// or both).
fn default_route(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let family = args.get_str(0, "family");
    if let Some(f) = family
        .as_deref()
        .filter(|f| !matches!(*f, "inet" | "inet6"))
    {
        return Err(ExecError::Execution(format!("Invalid address family {f}")));
    }
    let v4 = run("ip -4 route show table main")?;
    let v6 = run("ip -6 route show table all")?;
    let routes = parse_default_routes(&v4, &v6);
    Ok(Value::Array(
        routes
            .into_iter()
            .filter(|r| {
                family
                    .as_deref()
                    .is_none_or(|f| r["addr_family"] == json!(f))
            })
            .collect(),
    ))
}

/// Salt's `sanitize_host`: an IP address unchanged, else only the
/// characters a host name may have.
fn sanitize_host(host: &str) -> String {
    if host.parse::<IpAddr>().is_ok() {
        return host.to_string();
    }
    host.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
        .collect()
}

/// `network.ping <host> [timeout] [return_boolean=False]`: four pings;
/// the output, or whether they succeeded.
fn ping(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let target = sanitize_host(&args.require_str(0, "host", "ping")?);
    let timeout = args
        .get(1, "timeout")
        .filter(|v| !matches!(v, Value::Null | Value::Bool(false)) && v.as_str() != Some(""))
        .map(py_str);
    let cmd = match timeout {
        Some(t) => format!("ping -W {} -c 4 {target}", crate::host::shell_quote(&t)),
        None => format!("ping -c 4 {target}"),
    };
    let out = crate::host::run_command(&cmd, &CmdOptions::default())
        .map_err(|e| ExecError::Execution(format!("Unable to run command '{cmd}', reason: {e}")))?;
    if args.get_bool(2, "return_boolean", false) {
        return Ok(json!(out.retcode == 0));
    }
    let mut text = out.stdout;
    if !out.stderr.is_empty() {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&out.stderr);
    }
    Ok(json!(text))
}
