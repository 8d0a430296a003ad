//! The `dig` execution module against the real `dig` binary asking a tiny
//! DNS responder this test runs on 127.0.0.1 (never an outside resolver).
//! dig reads `~/.digrc`, so the test points HOME at a directory whose
//! `.digrc` holds the responder's port: Salt's functions take no port.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::collections::BTreeMap;
use std::net::UdpSocket;

use halite_modules::{Args, Host};
use serde_json::{json, Value};

const A: u16 = 1;
const NS: u16 = 2;
const CNAME: u16 = 5;
const MX: u16 = 15;
const TXT: u16 = 16;
const AAAA: u16 = 28;

/// The zone the responder answers: (name, type) -> rdata list.
fn zone() -> BTreeMap<(String, u16), Vec<Vec<u8>>> {
    let mut z = BTreeMap::new();
    let mut add = |name: &str, t: u16, rdata: Vec<u8>| {
        z.entry((name.to_string(), t))
            .or_insert_with(Vec::new)
            .push(rdata);
    };
    add("a.halite.test", A, vec![10, 0, 0, 1]);
    add("a.halite.test", A, vec![10, 0, 0, 2]);
    let mut v6 = vec![0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    v6[15] = 1;
    add("a.halite.test", AAAA, v6);
    add("www.halite.test", CNAME, encode_name("a.halite.test"));
    add("halite.test", NS, encode_name("ns1.halite.test"));
    add("ns1.halite.test", A, vec![10, 0, 0, 53]);
    let mut mx = vec![0, 10];
    mx.extend(encode_name("mail.halite.test"));
    add("halite.test", MX, mx);
    add("mail.halite.test", A, vec![10, 0, 0, 25]);
    add(
        "halite.test",
        TXT,
        txt("v=spf1 ip4:10.1.0.0/16 include:inc.halite.test ip4:bad -all"),
    );
    add("inc.halite.test", TXT, txt("v=spf1 ~ip4:10.2.0.0/24 ~all"));
    z
}

fn encode_name(name: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for label in name.split('.').filter(|l| !l.is_empty()) {
        out.push(label.len() as u8);
        out.extend(label.as_bytes());
    }
    out.push(0);
    out
}

fn txt(text: &str) -> Vec<u8> {
    let mut out = vec![text.len() as u8];
    out.extend(text.as_bytes());
    out
}

/// Answers one query packet, or None when it cannot be parsed.
fn answer(query: &[u8], zone: &BTreeMap<(String, u16), Vec<Vec<u8>>>) -> Option<Vec<u8>> {
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let len = *query.get(at)? as usize;
        at += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(query.get(at..at + len)?).to_lowercase());
        at += len;
    }
    let qtype = u16::from_be_bytes([*query.get(at)?, *query.get(at + 1)?]);
    let question_end = at + 4;
    let name = labels.join(".");
    let known = zone.keys().any(|(n, _)| *n == name);
    let records = zone.get(&(name, qtype)).cloned().unwrap_or_default();
    let mut out = query.get(..2)?.to_vec();
    out.extend([0x85, if known { 0x80 } else { 0x83 }]);
    out.extend(1u16.to_be_bytes());
    out.extend((records.len() as u16).to_be_bytes());
    out.extend([0, 0, 0, 0]);
    out.extend(query.get(12..question_end)?);
    for rdata in records {
        out.extend([0xc0, 0x0c]);
        out.extend(qtype.to_be_bytes());
        out.extend(1u16.to_be_bytes());
        out.extend(60u32.to_be_bytes());
        out.extend((rdata.len() as u16).to_be_bytes());
        out.extend(rdata);
    }
    Some(out)
}

/// Starts the responder on 127.0.0.1 and returns its port.
fn start_responder() -> u16 {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind a loopback UDP port");
    let port = socket.local_addr().expect("local addr").port();
    std::thread::spawn(move || {
        let zone = zone();
        let mut buf = [0u8; 1500];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            if let Some(reply) = answer(&buf[..n], &zone) {
                let _ = socket.send_to(&reply, from);
            }
        }
    });
    port
}

fn host() -> Host {
    common::host()
}

fn call(host: &Host, fun: &str, positional: Vec<Value>) -> Value {
    let args = Args {
        positional,
        kwargs: Default::default(),
    };
    host.call(fun, &args)
        .unwrap_or_else(|e| panic!("{fun} failed: {e}"))
}

#[test]
fn dig_functions_answer_from_a_local_dns_responder_as_salt_does() {
    let host = host();
    assert_eq!(
        call(&host, "dig.check_ip", vec![json!("10.0.0.1/24")]),
        json!(true)
    );
    assert_eq!(
        call(&host, "dig.check_ip", vec![json!("10.0.0.1/33")]),
        json!(false)
    );
    assert_eq!(
        call(&host, "dig.check_ip", vec![json!("fd00::1/64")]),
        json!(true)
    );
    assert_eq!(
        call(&host, "dig.check_ip", vec![json!("fd00::1/4")]),
        json!(false)
    );
    assert_eq!(
        call(&host, "dig.check_ip", vec![json!("not-an-ip")]),
        json!(false)
    );
    if halite_modules::grains::hw::which("dig").is_none() {
        println!("skipped the lookups: dig is not installed (apt-get install bind9-dnsutils)");
        return;
    }
    let port = start_responder();
    let home = tempfile::tempdir().expect("temp home");
    std::fs::write(
        home.path().join(".digrc"),
        format!("-p {port} +tries=2 +time=2\n"),
    )
    .expect("write .digrc");
    // This test binary holds this one test, so no other thread reads HOME.
    std::env::set_var("HOME", home.path());
    let ns = json!("127.0.0.1");
    let at = |fun: &str, args: Vec<Value>| call(&host, fun, args);

    assert_eq!(
        at("dig.A", vec![json!("a.halite.test"), ns.clone()]),
        json!(["10.0.0.1", "10.0.0.2"])
    );
    assert_eq!(
        at("dig.a", vec![json!("a.halite.test"), ns.clone()]),
        json!(["10.0.0.1", "10.0.0.2"])
    );
    assert_eq!(
        at("dig.AAAA", vec![json!("a.halite.test"), ns.clone()]),
        json!(["fd00::1"])
    );
    assert_eq!(
        at("dig.A", vec![json!("nothing.halite.test"), ns.clone()]),
        json!([])
    );
    assert_eq!(
        at("dig.CNAME", vec![json!("www.halite.test"), ns.clone()]),
        json!("a.halite.test.")
    );
    assert_eq!(
        at(
            "dig.NS",
            vec![json!("halite.test"), json!(true), ns.clone()]
        ),
        json!(["10.0.0.53"])
    );
    assert_eq!(
        at(
            "dig.NS",
            vec![json!("halite.test"), json!(false), ns.clone()]
        ),
        json!(["ns1.halite.test."])
    );
    assert_eq!(
        at(
            "dig.MX",
            vec![json!("halite.test"), json!(false), ns.clone()]
        ),
        json!([["10", "mail.halite.test."]])
    );
    assert_eq!(
        at(
            "dig.MX",
            vec![json!("halite.test"), json!(true), ns.clone()]
        ),
        json!([["10", "10.0.0.25"]])
    );
    assert_eq!(
        at("dig.TXT", vec![json!("inc.halite.test"), ns.clone()]),
        json!(["\"v=spf1 ~ip4:10.2.0.0/24 ~all\""])
    );
    // No SPF record: Salt falls back to TXT, follows include:, drops
    // what is not an IP range.
    assert_eq!(
        at(
            "dig.SPF",
            vec![json!("halite.test"), json!("SPF"), ns.clone()]
        ),
        json!(["10.1.0.0/16", "10.2.0.0/24"])
    );
    // dig fails (no server on that port): Salt's empty list, not an error.
    std::fs::write(home.path().join(".digrc"), "-p 1 +tries=1 +time=1\n").expect("write");
    assert_eq!(at("dig.A", vec![json!("a.halite.test"), ns]), json!([]));
}
