//! Salt's `dig` execution module: DNS lookups through the `dig` binary
//! (`dig.A`, `dig.AAAA`, `dig.NS`, `dig.MX`, `dig.SPF`, `dig.TXT`,
//! `dig.PTR`, `dig.CNAME`, `dig.check_ip`), which formulas call from
//! templates (`salt['dig.A']('db.example.com')`). As in Salt, a failing
//! `dig` gives an empty list, and only answers that are IPs are kept
//! where the record holds addresses.

use std::net::{Ipv4Addr, Ipv6Addr};

use halite_state::Value;
use regex::Regex;

use crate::exec::user::run;
use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

/// The module's table (Salt's lowercase aliases included).
pub const MODULE: ExecTable = ExecTable {
    name: "dig",
    functions: &[
        ExecFunction::new("check_ip", check_ip),
        ExecFunction::new("A", a),
        ExecFunction::new("a", a),
        ExecFunction::new("AAAA", aaaa),
        ExecFunction::new("aaaa", aaaa),
        ExecFunction::new("PTR", ptr),
        ExecFunction::new("ptr", ptr),
        ExecFunction::new("CNAME", cname),
        ExecFunction::new("cname", cname),
        ExecFunction::new("NS", ns),
        ExecFunction::new("ns", ns),
        ExecFunction::new("SPF", spf),
        ExecFunction::new("spf", spf),
        ExecFunction::new("MX", mx),
        ExecFunction::new("mx", mx),
        ExecFunction::new("TXT", txt),
        ExecFunction::new("txt", txt),
    ],
};

/// Salt's `check_ip`: an IPv4 address (optionally `/1`-`/32`) or an IPv6
/// address (optionally `/8`-`/128`).
pub fn is_ip(addr: &str) -> bool {
    let (ip, prefix) = match addr.rsplit_once('/') {
        Some((ip, prefix)) => (ip, Some(prefix)),
        None => (addr, None),
    };
    let range = if ip.parse::<Ipv4Addr>().is_ok() {
        1..=32
    } else if ip.parse::<Ipv6Addr>().is_ok() {
        8..=128
    } else {
        return false;
    };
    match prefix {
        None => true,
        Some(p) => p.trim().parse::<i64>().is_ok_and(|n| range.contains(&n)),
    }
}

/// `dig +short <name> <rtype> [@nameserver]`: its lines, or None when dig
/// exits non-zero (Salt logs a warning and answers an empty list).
fn dig_short(args: &[&str], nameserver: Option<&str>) -> Result<Option<String>, ExecError> {
    if crate::grains::hw::which("dig").is_none() {
        return Err(ExecError::Execution(
            "The dig execution module cannot be loaded: the dig binary is not in the path. Install it (Debian: apt-get install bind9-dnsutils)".into(),
        ));
    }
    let at = nameserver.map(|n| format!("@{n}"));
    let mut argv = vec!["dig", "+short"];
    argv.extend_from_slice(args);
    if let Some(at) = at.as_deref() {
        argv.push(at);
    }
    let ran = run(&argv)?;
    if ran.retcode != 0 {
        tracing::warn!(
            retcode = ran.retcode,
            "dig returned a non-zero exit code; returning an empty list as fallback"
        );
        return Ok(None);
    }
    Ok(Some(ran.stdout))
}

/// The `host` (or `domain`) argument, required.
fn target(args: &Args, key: &str, fun: &str) -> Result<String, ExecError> {
    args.require_str(0, key, fun)
}

/// The `nameserver` argument at position `i`.
fn nameserver(args: &Args, i: usize) -> Option<String> {
    args.get_str(i, "nameserver")
}

fn lines(stdout: &str) -> Vec<Value> {
    stdout.split('\n').map(Value::from).collect()
}

/// Records of `rtype` for `host`, keeping only the lines that are IPs.
fn addresses(host: &str, rtype: &str, nameserver: Option<&str>) -> Result<Vec<String>, ExecError> {
    Ok(dig_short(&[host, rtype], nameserver)?
        .map(|out| {
            out.split('\n')
                .filter(|l| is_ip(l))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default())
}

fn check_ip(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(Value::Bool(match args.get(0, "addr") {
        Some(Value::String(s)) => is_ip(s),
        _ => false,
    }))
}

fn a(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let host = target(args, "host", "A")?;
    let found = addresses(&host, "A", nameserver(args, 1).as_deref())?;
    Ok(Value::from(found))
}

fn aaaa(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let host = target(args, "host", "AAAA")?;
    let found = addresses(&host, "AAAA", nameserver(args, 1).as_deref())?;
    Ok(Value::from(found))
}

fn ptr(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let host = target(args, "host", "PTR")?;
    let out = dig_short(&["-x", &host], nameserver(args, 1).as_deref())?;
    Ok(Value::Array(out.map(|o| lines(&o)).unwrap_or_default()))
}

fn cname(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let host = target(args, "host", "CNAME")?;
    let out = dig_short(&[&host, "CNAME"], nameserver(args, 1).as_deref())?;
    Ok(out.map_or_else(|| Value::Array(Vec::new()), Value::from))
}

fn txt(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let host = target(args, "host", "TXT")?;
    let out = dig_short(&[&host, "TXT"], nameserver(args, 1).as_deref())?;
    Ok(Value::Array(out.map(|o| lines(&o)).unwrap_or_default()))
}

fn ns(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let domain = target(args, "domain", "NS")?;
    let resolve = args.get_bool(1, "resolve", true);
    let server = nameserver(args, 2);
    let Some(out) = dig_short(&[&domain, "NS"], server.as_deref())? else {
        return Ok(Value::Array(Vec::new()));
    };
    if !resolve {
        return Ok(Value::Array(lines(&out)));
    }
    let mut ips = Vec::new();
    for name in out.split('\n') {
        ips.extend(addresses(name, "A", server.as_deref())?);
    }
    Ok(Value::from(ips))
}

fn mx(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let domain = target(args, "domain", "MX")?;
    let resolve = args.get_bool(1, "resolve", false);
    let server = nameserver(args, 2);
    let Some(out) = dig_short(&[&domain, "MX"], server.as_deref())? else {
        return Ok(Value::Array(Vec::new()));
    };
    let rows: Vec<Vec<String>> = out
        .split('\n')
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect();
    if !resolve {
        return Ok(Value::from(rows));
    }
    let mut resolved = Vec::new();
    for row in rows {
        let (Some(pref), Some(name)) = (row.first(), row.get(1)) else {
            return Err(ExecError::Execution(format!(
                "dig gave an MX answer without a host for {domain}: {row:?}"
            )));
        };
        let ip = addresses(name, "A", server.as_deref())?
            .into_iter()
            .next()
            .ok_or_else(|| {
                ExecError::Execution(format!("MX host {name} of {domain} has no A record"))
            })?;
        resolved.push(vec![pref.clone(), ip]);
    }
    Ok(Value::from(resolved))
}

fn spf(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let domain = target(args, "domain", "SPF")?;
    let record = args.get_str(1, "record").unwrap_or_else(|| "SPF".into());
    let server = nameserver(args, 2);
    let mut seen = Vec::new();
    spf_lookup(&domain, &record, server.as_deref(), &mut seen).map(Value::from)
}

/// Salt's SPF walk: the `ip4:`/`ip6:` ranges of the record, following
/// `include:` and `redirect=`; an empty SPF record falls back to TXT.
/// `seen` stops include loops, which Salt would follow forever.
fn spf_lookup(
    domain: &str,
    record: &str,
    server: Option<&str>,
    seen: &mut Vec<String>,
) -> Result<Vec<String>, ExecError> {
    let key = format!("{domain} {record}");
    if seen.contains(&key) || seen.len() > 32 {
        return Ok(Vec::new());
    }
    seen.push(key);
    let Some(out) = dig_short(&[domain, record], server)? else {
        return Ok(Vec::new());
    };
    if out.is_empty() && record == "SPF" {
        return spf_lookup(domain, "TXT", server, seen);
    }
    let text = out.replace('"', "");
    let sections: Vec<&str> = text.split_whitespace().collect();
    if sections.first() != Some(&"v=spf1") {
        return Ok(Vec::new());
    }
    if let Some(target) = sections.get(1).and_then(|s| s.strip_prefix("redirect=")) {
        return spf_lookup(target, "SPF", server, seen);
    }
    let mechanism = Regex::new(r"^(?:\+|~)?(ip[46]|include):(.+)")
        .map_err(|e| ExecError::Execution(format!("SPF pattern: {e}")))?;
    let mut ret = Vec::new();
    for section in sections.iter().skip(1) {
        let Some(caps) = mechanism.captures(section) else {
            continue;
        };
        let (kind, address) = (&caps[1], &caps[2]);
        if kind == "include" {
            ret.extend(spf_lookup(address, "SPF", server, seen)?);
        } else if is_ip(address) {
            ret.push(address.to_string());
        }
    }
    Ok(ret)
}
