//! Fuzzing the ZMTP decoder through a real ROUTER on loopback: greetings,
//! commands and frames with random bytes and random length claims
//! (including 2^62 and 1 TiB). The socket must keep serving a well-behaved
//! peer, and this process must never reserve memory for a claimed length.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

use halite_transport::Router;
use proptest::prelude::*;
use zeromq::{DealerSocket, Socket, SocketSend, ZmqMessage};

struct Harness {
    runtime: tokio::runtime::Runtime,
    port: u16,
    router: tokio::sync::Mutex<Router>,
}

fn harness() -> &'static Harness {
    static H: OnceLock<Harness> = OnceLock::new();
    H.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("port");
        let router = runtime
            .block_on(Router::bind(&format!("tcp://127.0.0.1:{port}")))
            .expect("bind");
        Harness {
            runtime,
            port,
            router: tokio::sync::Mutex::new(router),
        }
    })
}

fn greeting() -> Vec<u8> {
    let mut g = vec![0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3, 0];
    let mut mechanism = b"NULL".to_vec();
    mechanism.resize(20, 0);
    g.extend(mechanism);
    g.push(0);
    g.resize(64, 0);
    g
}

fn ready() -> Vec<u8> {
    let mut body = vec![5];
    body.extend(b"READY");
    body.push(11);
    body.extend(b"Socket-Type");
    body.extend(6u32.to_be_bytes());
    body.extend(b"DEALER");
    let mut frame = vec![0x04, body.len() as u8];
    frame.extend(body);
    frame
}

/// Pieces a ZMTP stream is made of, valid or not.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    let claim = prop_oneof![
        Just(1u64 << 62),
        Just(1u64 << 40),
        Just(u64::MAX),
        any::<u64>(),
        0u64..70_000
    ];
    prop_oneof![
        Just(greeting()),
        Just(ready()),
        proptest::collection::vec(any::<u8>(), 0..64),
        // A long frame header with any flags and a claim from tiny to 2^64-1.
        (any::<u8>(), claim).prop_map(|(flags, len)| {
            let mut h = vec![flags | 0x02];
            h.extend(len.to_be_bytes());
            h
        }),
        // A short frame with its body.
        (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..255)).prop_map(|(flags, body)| {
            let mut f = vec![flags & !0x02, body.len() as u8];
            f.extend(body);
            f
        }),
    ]
}

fn vm_peak_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmPeak:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A well-behaved DEALER's message still reaches the ROUTER's queue.
fn still_serves(h: &Harness, marker: &[u8]) -> bool {
    h.runtime.block_on(async {
        let mut dealer = DealerSocket::new();
        if dealer
            .connect(&format!("tcp://127.0.0.1:{}", h.port))
            .await
            .is_err()
        {
            return false;
        }
        if dealer
            .send(ZmqMessage::from(marker.to_vec()))
            .await
            .is_err()
        {
            return false;
        }
        let mut router = h.router.lock().await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while let Ok(Some(inbound)) =
            tokio::time::timeout_at(deadline, router.incoming.recv()).await
        {
            if inbound.payload.as_ref() == marker {
                return true;
            }
        }
        false
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn no_zmtp_stream_breaks_the_router(pieces in proptest::collection::vec(piece(), 1..8)) {
        let h = harness();
        let mut stream = TcpStream::connect(("127.0.0.1", h.port)).expect("connect");
        for p in &pieces {
            if stream.write_all(p).is_err() {
                break;
            }
        }
        drop(stream);
        prop_assert!(vm_peak_kb() < 4 * 1024 * 1024, "VmPeak {} kB", vm_peak_kb());
        prop_assert!(still_serves(h, b"still here"));
    }
}

#[test]
fn the_router_serves_after_hostile_streams() {
    let h = harness();
    let mut held = Vec::new();
    for claim in [1u64 << 62, 1u64 << 40, u64::MAX, 17 * 1024 * 1024] {
        for command in [true, false] {
            let mut bytes = greeting();
            if !command {
                bytes.extend(ready());
            }
            bytes.push(if command { 0x06 } else { 0x02 });
            bytes.extend(claim.to_be_bytes());
            let mut s = TcpStream::connect(("127.0.0.1", h.port)).expect("connect");
            let _ = s.write_all(&bytes);
            held.push(s);
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(still_serves(h, b"after the hostile streams"));
    assert!(vm_peak_kb() < 4 * 1024 * 1024, "VmPeak {} kB", vm_peak_kb());
}
