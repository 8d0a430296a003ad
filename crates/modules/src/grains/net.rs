//! Network grains: host names (`host`, `fqdn`, `domain`, `nodename`,
//! `localhost`) and addresses (`ipv4`, `ip4_interfaces`, `hwaddr_interfaces`...).

use std::collections::BTreeMap;
use std::net::{IpAddr, ToSocketAddrs};

use halite_state::{Map, Value};
use nix::ifaddrs::getifaddrs;

/// This machine's host name as the kernel reports it (`socket.gethostname()`).
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".to_string())
}

/// The fully qualified name of `host`, as Python's `socket.getfqdn()` finds it:
/// the canonical name and aliases from the resolver (here `/etc/hosts` first),
/// the first one containing a dot, else `host` itself.
pub fn fqdn_of(host: &str) -> String {
    if host.contains('.') {
        return host.to_string();
    }
    if let Ok(hosts) = std::fs::read_to_string("/etc/hosts") {
        for line in hosts.lines() {
            let line = line.split('#').next().unwrap_or("");
            let mut fields = line.split_whitespace();
            let Some(_addr) = fields.next() else { continue };
            let names: Vec<&str> = fields.collect();
            if names.contains(&host) {
                if let Some(dotted) = names.iter().find(|n| n.contains('.')) {
                    return dotted.to_string();
                }
            }
        }
    }
    host.to_string()
}

/// Addresses `name` resolves to (`fqdn_ip4` / `fqdn_ip6`), sorted and unique.
fn resolve(name: &str) -> (Vec<String>, Vec<String>) {
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    if let Ok(addrs) = (name, 0u16).to_socket_addrs() {
        for addr in addrs {
            match addr.ip() {
                IpAddr::V4(ip) => v4.push(ip.to_string()),
                IpAddr::V6(ip) => v6.push(ip.to_string()),
            }
        }
    }
    v4.sort();
    v4.dedup();
    v6.sort();
    v6.dedup();
    (v4, v6)
}

/// Inserts `host`, `fqdn`, `domain`, `nodename`, `localhost`.
pub fn insert_name_grains(grains: &mut Map, nodename: &str) {
    let local = hostname();
    let fqdn = fqdn_of(&local);
    let (host, domain) = match fqdn.split_once('.') {
        Some((h, d)) => (h.to_string(), d.to_string()),
        None => (fqdn.clone(), String::new()),
    };
    grains.insert("localhost".into(), Value::from(local));
    grains.insert("fqdn".into(), Value::from(fqdn));
    grains.insert("host".into(), Value::from(host));
    grains.insert("domain".into(), Value::from(domain));
    grains.insert("nodename".into(), Value::from(nodename));
}

/// Inserts `fqdn_ip4` and `fqdn_ip6` for the already computed `fqdn`
/// grain (loopback included, as Salt); empty when the host has no address
/// of that family.
pub fn insert_fqdn_ips(grains: &mut Map) {
    let fqdn = grains
        .get("fqdn")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let (mut v4, mut v6) = if fqdn.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        resolve(&fqdn)
    };
    let has = |key: &str| {
        grains
            .get(key)
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
    };
    if !has("ipv4") {
        v4.clear();
    }
    if !has("ipv6") {
        v6.clear();
    }
    grains.insert("fqdn_ip4".into(), Value::from(v4));
    grains.insert("fqdn_ip6".into(), Value::from(v6));
}

fn sorted_unique(mut v: Vec<String>) -> Value {
    v.sort();
    v.dedup();
    Value::from(v)
}

/// Inserts `ipv4`, `ipv6`, `ip4_interfaces`, `ip6_interfaces`,
/// `ip_interfaces` and `hwaddr_interfaces` from `getifaddrs(3)`.
pub fn insert_interface_grains(grains: &mut Map) {
    let mut v4: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut v6: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut hw: BTreeMap<String, String> = BTreeMap::new();
    if let Ok(addrs) = getifaddrs() {
        for ifa in addrs {
            let name = ifa.interface_name.clone();
            v4.entry(name.clone()).or_default();
            v6.entry(name.clone()).or_default();
            let Some(addr) = ifa.address else { continue };
            if let Some(sin) = addr.as_sockaddr_in() {
                v4.entry(name).or_default().push(sin.ip().to_string());
            } else if let Some(sin6) = addr.as_sockaddr_in6() {
                v6.entry(name).or_default().push(sin6.ip().to_string());
            } else if let Some(link) = addr.as_link_addr() {
                if let Some(mac) = link.addr() {
                    let text = mac
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect::<Vec<_>>()
                        .join(":");
                    hw.insert(name, text);
                }
            }
        }
    }
    let all4: Vec<String> = v4.values().flatten().cloned().collect();
    let all6: Vec<String> = v6.values().flatten().cloned().collect();
    let mut ip4_ifaces = Map::new();
    let mut ip6_ifaces = Map::new();
    let mut ip_ifaces = Map::new();
    for (name, addrs) in &v4 {
        ip4_ifaces.insert(name.clone(), Value::from(addrs.clone()));
        let mut both = addrs.clone();
        both.extend(v6.get(name).cloned().unwrap_or_default());
        ip_ifaces.insert(name.clone(), Value::from(both));
    }
    for (name, addrs) in &v6 {
        ip6_ifaces.insert(name.clone(), Value::from(addrs.clone()));
    }
    let hw_map: Map = hw.into_iter().map(|(k, v)| (k, Value::from(v))).collect();
    grains.insert("ipv4".into(), sorted_unique(all4));
    grains.insert("ipv6".into(), sorted_unique(all6));
    grains.insert("ip4_interfaces".into(), Value::Object(ip4_ifaces));
    grains.insert("ip6_interfaces".into(), Value::Object(ip6_ifaces));
    grains.insert("ip_interfaces".into(), Value::Object(ip_ifaces));
    grains.insert("hwaddr_interfaces".into(), Value::Object(hw_map));
}

/// Inserts `dns` from `/etc/resolv.conf` (Salt's `dns` grain shape).
pub fn insert_dns(grains: &mut Map) {
    let Ok(text) = std::fs::read_to_string("/etc/resolv.conf") else {
        return;
    };
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    let mut search = Vec::new();
    let mut domain = String::new();
    let mut options = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("nameserver") => {
                if let Some(ip) = words.next().and_then(|w| w.parse::<IpAddr>().ok()) {
                    match ip {
                        IpAddr::V4(_) => v4.push(Value::from(ip.to_string())),
                        IpAddr::V6(_) => v6.push(Value::from(ip.to_string())),
                    }
                }
            }
            Some("search") => search.extend(words.map(Value::from)),
            Some("domain") => domain = words.next().unwrap_or("").to_string(),
            Some("options") => options.extend(words.map(Value::from)),
            _ => {}
        }
    }
    let mut dns = Map::new();
    let mut all = v4.clone();
    all.extend(v6.iter().cloned());
    dns.insert("nameservers".into(), Value::Array(all));
    dns.insert("ip4_nameservers".into(), Value::Array(v4));
    dns.insert("ip6_nameservers".into(), Value::Array(v6));
    dns.insert("sortlist".into(), Value::Array(Vec::new()));
    dns.insert("domain".into(), Value::from(domain));
    dns.insert("search".into(), Value::Array(search));
    dns.insert("options".into(), Value::Array(options));
    grains.insert("dns".into(), Value::Object(dns));
}

const RTF_GATEWAY: u32 = 0x0002;
const RTF_REJECT: u32 = 0x0200;

/// The first IPv4 default route of `/proc/net/route` text: `Some(Some(ip))`
/// with a gateway, `Some(None)` for a device route, `None` without one.
fn ipv4_default_route(table: &str) -> Option<Option<String>> {
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (dest, gw, flags, mask) = (f.get(1)?, f.get(2)?, f.get(3)?, f.get(7)?);
        let flags = u32::from_str_radix(flags, 16).ok()?;
        if *dest != "00000000" || *mask != "00000000" || flags & RTF_REJECT != 0 {
            return None;
        }
        let gw = u32::from_str_radix(gw, 16).ok()?;
        let via = (flags & RTF_GATEWAY != 0 && gw != 0)
            .then(|| std::net::Ipv4Addr::from(gw.to_le_bytes()).to_string());
        Some(via)
    })
}

/// The first IPv6 default route of `/proc/net/ipv6_route` text, as
/// [`ipv4_default_route`].
fn ipv6_default_route(table: &str) -> Option<Option<String>> {
    table.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (dest, plen, hop, flags) = (f.first()?, f.get(1)?, f.get(4)?, f.get(8)?);
        let flags = u32::from_str_radix(flags, 16).ok()?;
        if dest.chars().any(|c| c != '0') || *plen != "00" || flags & RTF_REJECT != 0 {
            return None;
        }
        let hop = u128::from_str_radix(hop, 16).ok()?;
        Some((hop != 0).then(|| std::net::Ipv6Addr::from(hop).to_string()))
    })
}

/// Inserts `ip_gw`, `ip4_gw`, `ip6_gw` (Salt's `default_gateway`: the
/// gateway address, `true` for a default route without one, else `false`)
/// from the kernel's routing tables. Like Salt, nothing when `ip` is not
/// installed.
pub fn insert_gateway_grains(grains: &mut Map) {
    if crate::grains::hw::which("ip").is_none() {
        return;
    }
    let gw = |route: Option<Option<String>>| match route {
        Some(Some(ip)) => Value::from(ip),
        Some(None) => Value::Bool(true),
        None => Value::Bool(false),
    };
    let v4 = gw(std::fs::read_to_string("/proc/net/route")
        .ok()
        .and_then(|t| ipv4_default_route(&t)));
    let v6 = gw(std::fs::read_to_string("/proc/net/ipv6_route")
        .ok()
        .and_then(|t| ipv6_default_route(&t)));
    let any = v4 != Value::Bool(false) || v6 != Value::Bool(false);
    grains.insert("ip_gw".into(), Value::Bool(any));
    grains.insert("ip4_gw".into(), v4);
    grains.insert("ip6_gw".into(), v6);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_routes_are_read_from_the_kernel_tables() {
        let v4 = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n\
                  eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\n\
                  eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\n";
        assert_eq!(ipv4_default_route(v4), Some(Some("192.0.2.1".to_string())));
        assert_eq!(
            ipv4_default_route("h\nppp0\t00000000\t00000000\t0001\t0\t0\t0\t00000000\n"),
            Some(None)
        );
        let v6 = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200 lo\n\
                  00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003 eth0\n";
        assert_eq!(ipv6_default_route(v6), Some(Some("fd00::1".to_string())));
        assert_eq!(ipv6_default_route(""), None);
    }
}
