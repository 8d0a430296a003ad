//! Replies the master's ROUTER cannot queue at once for a peer that reads
//! slowly (a swarm's one connection carrying many identities' file
//! chunks): they wait and arrive, in order; past the overflow's budget
//! they are dropped and counted, never silently (issue 25, session 16).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::time::Duration;

use halite_transport::{Dealer, Router, RouterLimits};

/// Replies sent to the one peer, each of [`REPLY_BYTES`]: 50 MiB in all,
/// far more than loopback's socket buffers hold while the peer does not read.
const REPLIES: usize = 200;
const REPLY_BYTES: usize = 256 * 1024;

fn port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port")
}

/// Sends [`REPLIES`] replies to a peer that reads only once they are all
/// handed to the router; returns the numbers of the replies it got, in
/// the order it got them (it stops after 5 s without one), and the router.
async fn flood(limits: RouterLimits) -> (Vec<u32>, Router) {
    let endpoint = format!("tcp://127.0.0.1:{}", port());
    let mut router = Router::bind_with(&endpoint, limits).await.unwrap();
    let mut dealer = Dealer::connect(&endpoint, Duration::from_secs(5))
        .await
        .unwrap();
    dealer.send(b"hello".to_vec()).await;
    let hello = router.incoming.recv().await.unwrap();
    let sender = router.sender();
    for n in 0..REPLIES as u32 {
        let mut reply = vec![0u8; REPLY_BYTES];
        reply[..4].copy_from_slice(&n.to_be_bytes());
        assert!(sender.try_send(hello.routing.clone(), reply));
    }
    // The peer is busy elsewhere for a while: its queue and TCP fill up.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut got = Vec::new();
    while let Ok(Ok(frames)) = tokio::time::timeout(Duration::from_secs(5), dealer.recv()).await {
        let frame = frames.last().unwrap();
        assert_eq!(frame.len(), REPLY_BYTES);
        got.push(u32::from_be_bytes(frame[..4].try_into().unwrap()));
        if got.len() == REPLIES {
            break;
        }
    }
    (got, router)
}

/// A queue of two messages per peer: before the overflow, every reply past
/// what the queue and the kernel's buffers held was dropped with a debug
/// line, and the peer waited for it forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_over_a_slow_peers_queue_wait_and_arrive_in_order() {
    let limits = RouterLimits {
        peer_messages: 2,
        ..RouterLimits::default()
    };
    let (got, router) = flood(limits).await;
    let want: Vec<u32> = (0..REPLIES as u32).collect();
    assert_eq!(got, want, "every reply arrives, in the order it was sent");
    let counts = router.sender();
    let counts = counts.counts();
    assert!(
        counts.overflowed.load(Ordering::Relaxed) > 0,
        "the test must overflow the peer's queue to mean anything"
    );
    assert_eq!(counts.dropped.load(Ordering::Relaxed), 0);
}

/// With no room to wait (overflow 0), what does not fit is dropped, but
/// counted: every reply either arrived or is in `dropped`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_past_the_overflow_are_counted_as_dropped() {
    let limits = RouterLimits {
        peer_messages: 2,
        overflow_bytes: 0,
        ..RouterLimits::default()
    };
    let (got, router) = flood(limits).await;
    let sender = router.sender();
    let dropped = sender.counts().dropped.load(Ordering::Relaxed);
    assert!(dropped > 0, "got {} of {REPLIES}", got.len());
    assert_eq!(got.len() as u64 + dropped, REPLIES as u64);
    // What arrived is still in order.
    assert!(got.windows(2).all(|w| w[0] < w[1]));
}
