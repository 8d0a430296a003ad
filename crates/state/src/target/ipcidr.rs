//! The ipcidr engine (`-S`, `S@`, `match: ipcidr` in top files), as Salt
//! 3008's `salt/matchers/ipcidr_match.py` and the master's
//! `_check_ipcidr_minions` read it: the target is an address, matched by
//! its text among the minion's `ipv4`/`ipv6` grains, or a network, matched
//! when any of those addresses is inside it. Networks are parsed with the
//! `ipnet` crate, strictly as Python's `ipaddress.ip_network` does (no host
//! bits set; IPv4 may give a netmask or hostmask instead of a prefix).

use std::net::{IpAddr, Ipv4Addr};

use ipnet::{IpNet, Ipv4Net};
use serde_json::Value;

/// An ipcidr target, parsed once.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum IpTarget {
    /// One address: matches when the minion lists exactly it.
    Addr(IpAddr),
    /// A network: matches when any of the minion's addresses is inside.
    Net(IpNet),
}

impl IpTarget {
    /// Reads `expr` as `ipaddress.ip_address`, else `ip_network` (strict);
    /// `Err` says why it is neither (the caller names the target).
    pub(super) fn parse(expr: &str) -> Result<Self, String> {
        if let Ok(addr) = expr.parse::<IpAddr>() {
            return Ok(IpTarget::Addr(addr));
        }
        let Some((addr, mask)) = expr.split_once('/') else {
            return Err("it is not an IP address".into());
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("{addr:?} is not an IP address"))?;
        let net =
            if !mask.is_empty() && mask.bytes().all(|b| b.is_ascii_digit()) {
                let prefix: u8 = mask
                    .parse()
                    .map_err(|_| format!("{mask:?} is not a valid prefix length"))?;
                IpNet::new(addr, prefix)
                    .map_err(|_| format!("{mask:?} is not a valid prefix length"))?
            } else {
                match addr {
                    IpAddr::V4(v4) => IpNet::V4(v4_with_mask(v4, mask).ok_or_else(|| {
                        format!("{mask:?} is not a valid netmask or prefix length")
                    })?),
                    IpAddr::V6(_) => return Err(format!("{mask:?} is not a valid prefix length")),
                }
            };
        if net.trunc() != net {
            return Err(format!(
                "it has host bits set (the network is {})",
                net.trunc()
            ));
        }
        Ok(IpTarget::Net(net))
    }

    /// Whether a minion with these grains is selected: its `ipv4` (or
    /// `ipv6`, by the target's version) grain holds the address, or an
    /// address inside the network. No grains, no match.
    pub(super) fn matches(&self, grains: &Value) -> bool {
        let proto = match self.version_is_v4() {
            true => "ipv4",
            false => "ipv6",
        };
        let Some(listed) = grains.get(proto) else {
            return false;
        };
        let items: Vec<&str> = match listed {
            Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
            Value::String(s) => vec![s.as_str()],
            _ => return false,
        };
        match self {
            IpTarget::Addr(addr) => {
                let text = addr.to_string();
                match listed {
                    // Python's `str in str` is a substring test.
                    Value::String(s) => s.contains(&text),
                    _ => items.contains(&text.as_str()),
                }
            }
            // Salt's `in_subnet`: any listed address inside the network.
            IpTarget::Net(net) => items
                .iter()
                .filter_map(|i| i.parse::<IpAddr>().ok())
                .any(|a| net.contains(&a)),
        }
    }

    fn version_is_v4(&self) -> bool {
        match self {
            IpTarget::Addr(a) => a.is_ipv4(),
            IpTarget::Net(n) => matches!(n, IpNet::V4(_)),
        }
    }
}

/// An IPv4 network from a netmask (`255.0.0.0`) or a hostmask
/// (`0.255.255.255`), as `ipaddress.IPv4Network` accepts both.
fn v4_with_mask(addr: Ipv4Addr, mask: &str) -> Option<Ipv4Net> {
    let mask: Ipv4Addr = mask.parse().ok()?;
    Ipv4Net::with_netmask(addr, mask)
        .or_else(|_| Ipv4Net::with_netmask(addr, Ipv4Addr::from(!u32::from(mask))))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn grains() -> Value {
        json!({
            "ipv4": ["10.1.2.3", "127.0.0.1"],
            "ipv6": ["::1", "2001:db8::5", "fe80::1"],
        })
    }

    fn hit(tgt: &str) -> bool {
        IpTarget::parse(tgt).unwrap().matches(&grains())
    }

    #[test]
    fn addresses_and_networks_match_the_ip_grains() {
        assert!(hit("10.1.2.3") && hit("127.0.0.1"));
        assert!(!hit("10.1.2.4"));
        assert!(hit("10.0.0.0/8") && hit("10.1.2.0/24") && hit("127.0.0.0/8"));
        assert!(hit("10.1.2.3/32") && hit("0.0.0.0/0"));
        assert!(!hit("192.168.0.0/16") && !hit("10.1.3.0/24"));
        // Netmask and hostmask forms, as Python's IPv4Network reads them.
        assert!(hit("10.0.0.0/255.0.0.0") && hit("10.1.0.0/0.0.255.255"));
        assert!(!hit("11.0.0.0/255.0.0.0"));
        // IPv6 against the ipv6 grain, written in any form.
        assert!(hit("2001:db8::/32") && hit("2001:0db8:0000::5") && hit("::1"));
        assert!(!hit("2001:db9::/32") && !hit("2001:db8::6"));
        // An IPv4 target never reads the ipv6 grain, nor the reverse.
        assert!(!IpTarget::parse("10.0.0.0/8")
            .unwrap()
            .matches(&json!({"ipv6": ["::ffff:10.0.0.1"]})));
        // No grains, or no ipv4 grain: no match.
        assert!(!IpTarget::parse("0.0.0.0/0").unwrap().matches(&Value::Null));
        assert!(!IpTarget::parse("0.0.0.0/0")
            .unwrap()
            .matches(&json!({"ipv6": ["::1"]})));
        // Invalid entries in the grain are skipped, not fatal.
        assert!(IpTarget::parse("10.0.0.0/8")
            .unwrap()
            .matches(&json!({"ipv4": ["junk", "10.9.9.9"]})));
    }

    #[test]
    fn bad_targets_are_errors_as_in_python() {
        for bad in [
            "10.0.0.1/8",  // host bits set: ip_network is strict
            "10.0.0.0/33", // prefix too long
            "10.0.0.0/",
            "10.0.0.0/-1",
            "10.0.0.0/255.0.255.0", // not a contiguous mask
            "2001:db8::/129",
            "2001:db8::/ffff::",
            "300.0.0.1",
            "web*",
            "",
        ] {
            assert!(IpTarget::parse(bad).is_err(), "{bad:?}");
        }
        let e = IpTarget::parse("10.0.0.1/8").unwrap_err().to_string();
        assert!(
            e.contains("host bits set") && e.contains("10.0.0.0/8"),
            "{e}"
        );
    }
}
