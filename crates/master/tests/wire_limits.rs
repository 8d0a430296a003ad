//! Issue 17, the transport: what an unauthenticated peer can send to a
//! daemon's ZeroMQ ports without crashing it or growing its memory without
//! bound. Raw ZMTP over TCP, as an attacker would write it.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use common::*;
use halite_proto::crypto::MinionHandshake;
use halite_proto::msg::ToMaster;
use halite_proto::{encode, Identity};

/// A ZMTP 3.0 greeting with the NULL mechanism.
fn greeting(as_server: bool) -> Vec<u8> {
    let mut g = vec![0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3, 0];
    let mut mechanism = b"NULL".to_vec();
    mechanism.resize(20, 0);
    g.extend(mechanism);
    g.push(u8::from(as_server));
    g.resize(64, 0);
    g
}

/// The READY command of a socket of type `kind`.
fn ready(kind: &str) -> Vec<u8> {
    let mut body = vec![5];
    body.extend(b"READY");
    body.push(11);
    body.extend(b"Socket-Type");
    body.extend((kind.len() as u32).to_be_bytes());
    body.extend(kind.as_bytes());
    let mut frame = vec![0x04, body.len() as u8];
    frame.extend(body);
    frame
}

/// A long frame header claiming `len` bytes (a command when `command`).
fn long_header(len: u64, command: bool) -> Vec<u8> {
    let mut h = vec![if command { 0x06 } else { 0x02 }];
    h.extend(len.to_be_bytes());
    h
}

/// One short message frame.
fn frame(payload: &[u8], more: bool) -> Vec<u8> {
    let mut f = Vec::new();
    if payload.len() > 255 {
        f.push(0x02 | u8::from(more));
        f.extend((payload.len() as u64).to_be_bytes());
    } else {
        f.push(u8::from(more));
        f.push(payload.len() as u8);
    }
    f.extend(payload);
    f
}

/// `VmRSS` and `VmPeak` of `pid` in kB.
fn memory_kb(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmPeak:"))
}

/// Sends `bytes` on a fresh connection to `port` and keeps it open a moment.
fn probe(port: u16, bytes: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let _ = s.write_all(bytes);
    s
}

const CLAIMS: [u64; 2] = [1 << 62, 1 << 40];

#[test]
fn huge_frame_headers_do_not_crash_the_master() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let mut master = fleet.start_master("auto_accept: True");
    let mut held = Vec::new();
    for (port, kind) in [(fleet.ret_port, "DEALER"), (fleet.publish_port, "SUB")] {
        for claim in CLAIMS {
            // As the first frame after the greeting (a command)...
            let mut bytes = greeting(false);
            bytes.extend(long_header(claim, true));
            held.push(probe(port, &bytes));
            // ...and as a message after a complete handshake.
            let mut bytes = greeting(false);
            bytes.extend(ready(kind));
            bytes.extend(long_header(claim, false));
            held.push(probe(port, &bytes));
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        master.alive(),
        "the master died: {}",
        master
            .log_text()
            .lines()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let (_, peak) = memory_kb(master.child.id());
    assert!(
        peak < 4 * 1024 * 1024,
        "the master reserved {peak} kB of virtual memory for a claimed length"
    );
    // And it still serves: a minion authenticates and answers.
    let _minion = fleet.start_minion("after-probe", "");
    fleet.wait_responding("after-probe");
    drop(held);
}

/// Accepts one connection on `listener` within a few seconds.
fn accept(listener: &TcpListener) -> Option<TcpStream> {
    listener.set_nonblocking(true).ok()?;
    for _ in 0..200 {
        if let Ok((s, _)) = listener.accept() {
            s.set_nonblocking(false).ok()?;
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[test]
fn huge_frame_headers_from_a_fake_master_do_not_crash_a_minion() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let ret = TcpListener::bind(("127.0.0.1", fleet.ret_port)).expect("bind ret");
    let publish = TcpListener::bind(("127.0.0.1", fleet.publish_port)).expect("bind pub");
    let mut minion = fleet.start_minion("target", "");
    for (ret_claim, pub_claim) in [(CLAIMS[0], CLAIMS[1]), (CLAIMS[1], CLAIMS[0])] {
        // The minion's DEALER gets a handshake and its SUB a huge frame;
        // then the DEALER gets one too. Before any key is checked.
        let mut r = accept(&ret).expect("the minion never connected its DEALER");
        let mut bytes = greeting(true);
        bytes.extend(ready("ROUTER"));
        r.write_all(&bytes).expect("write");
        let mut p = accept(&publish).expect("the minion never connected its SUB");
        let mut bytes = greeting(true);
        bytes.extend(ready("PUB"));
        bytes.extend(long_header(pub_claim, false));
        p.write_all(&bytes).expect("write");
        std::thread::sleep(Duration::from_millis(300));
        let _ = r.write_all(&long_header(ret_claim, false));
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            minion.alive(),
            "the minion died: {}",
            minion
                .log_text()
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .join("\n")
        );
        let (_, peak) = memory_kb(minion.child.id());
        assert!(peak < 4 * 1024 * 1024, "the minion reserved {peak} kB");
    }
    // Still trying to reach its master: it connects again.
    let mut again = accept(&ret).expect("the minion did not reconnect");
    let mut hello = [0u8; 10];
    again.read_exact(&mut hello).expect("a greeting");
    assert_eq!(hello[0], 0xff);
    assert!(minion.alive());
}

#[test]
fn peers_that_do_not_read_their_replies_cost_bounded_memory() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let mut master = fleet.start_master("");
    let _minion = fleet.start_minion("real", "");
    fleet.accept("real");
    let (rss_before, _) = memory_kb(master.child.id());
    // 100 peers, each sending Hellos whose invalid 256 KiB id a Refused
    // reply would echo, and never reading a byte.
    let rogue = Identity::generate().expect("identity");
    let bad_id = format!("x/{}", "y".repeat(256 * 1024));
    let (_, hello) = MinionHandshake::start(&rogue, &bad_id).expect("hello");
    let hello = encode(&ToMaster::Hello(hello)).expect("encode");
    let mut message = Vec::new();
    for _ in 0..20 {
        message.extend(frame(&hello, false));
    }
    let mut handshake = greeting(false);
    handshake.extend(ready("DEALER"));
    let mut peers = Vec::new();
    for _ in 0..100 {
        let mut s = TcpStream::connect(("127.0.0.1", fleet.ret_port)).expect("connect");
        s.write_all(&handshake).expect("handshake");
        peers.push(s);
    }
    let writers: Vec<_> = peers
        .iter()
        .map(|s| {
            let mut s = s.try_clone().expect("clone");
            let message = message.clone();
            std::thread::spawn(move || {
                let _ = s.set_write_timeout(Some(Duration::from_secs(20)));
                let _ = s.write_all(&message);
            })
        })
        .collect();
    for w in writers {
        let _ = w.join();
    }
    std::thread::sleep(Duration::from_secs(2));
    let (rss_after, _) = memory_kb(master.child.id());
    eprintln!("master RSS: {rss_before} kB before, {rss_after} kB with 100 non-reading peers");
    assert!(master.alive());
    assert!(
        rss_after < rss_before + 150 * 1024,
        "the master grew from {rss_before} kB to {rss_after} kB"
    );
    // The real minion is still served while they hang on.
    fleet.wait_responding("real");
    drop(peers);
}
