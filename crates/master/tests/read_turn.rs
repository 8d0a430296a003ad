//! The master's main task's turn (`read_bound.rs`, issue 25): bounded in
//! bytes and messages, a small message read ahead of a full turn, and each
//! connection's messages kept in the order it sent them. The order is
//! asserted, never a time.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::VecDeque;

use bytes::Bytes;
use halite_master::read_bound::{
    Message, Parked, Sorted, SMALL_MESSAGE_BYTES, TURN_BYTES, TURN_MESSAGES,
};

/// A message as the turn sees it: its connection, its size, and a name
/// the test follows it by.
#[derive(Debug, Clone, PartialEq)]
struct Msg {
    route: Bytes,
    bytes: u64,
    name: String,
}

impl Message for Msg {
    fn bytes(&self) -> u64 {
        self.bytes
    }
    fn route(&self) -> &Bytes {
        &self.route
    }
}

fn msg(route: &str, bytes: u64, name: &str) -> Msg {
    Msg {
        route: Bytes::copy_from_slice(route.as_bytes()),
        bytes,
        name: name.into(),
    }
}

/// A warm 1,000-state return's size.
const LARGE: u64 = 200_000;
/// Room under `return_commit_bytes` (32 MiB, nothing held); the small
/// room is 1 MiB past it, as `ReturnCounts::small_room` gives.
const ROOM: u64 = 32 << 20;

/// One turn over `queue` (the ROUTER's channel).
fn turn(
    parked: &mut Parked<Msg>,
    queue: &mut VecDeque<Msg>,
    room: u64,
    sorted: &mut Sorted,
) -> Vec<Msg> {
    let first = queue.pop_front().expect("a message to start the turn");
    parked.gather(first, || queue.pop_front(), room, room + (1 << 20), sorted)
}

/// `n` large returns of `n` minions (`bench-0`..), named `large-0`...
fn large_returns(n: usize) -> VecDeque<Msg> {
    (0..n)
        .map(|i| msg(&format!("bench-{i}"), LARGE, &format!("large-{i}")))
        .collect()
}

fn names(batch: &[Msg]) -> Vec<&str> {
    batch.iter().map(|m| m.name.as_str()).collect()
}

#[test]
fn a_pings_return_is_handled_in_the_turn_it_arrives_while_a_turns_worth_of_large_returns_waits() {
    // 60 large returns of 60 minions (12 MB, three turns' worth), a
    // ping's return of another minion behind them, then a large one more.
    let mut queue = large_returns(60);
    queue.push_back(msg("probe-0", 300, "ping"));
    queue.push_back(msg("bench-60", LARGE, "large-60"));
    let mut parked = Parked::default();
    let mut sorted = Sorted::default();
    let batch = turn(&mut parked, &mut queue, ROOM, &mut sorted);
    let in_order = (TURN_BYTES / LARGE + 1) as usize;
    assert_eq!(batch.len(), in_order + 1, "{:?}", names(&batch));
    for (i, m) in batch[..in_order].iter().enumerate() {
        assert_eq!(m.name, format!("large-{i}"));
    }
    assert_eq!(
        batch[in_order].name, "ping",
        "the ping goes ahead of the waiting large returns"
    );
    assert!(batch[..in_order].iter().map(|m| m.bytes).sum::<u64>() < TURN_BYTES + LARGE);
    // Everything else was read and waits, in its order.
    assert!(queue.is_empty());
    assert_eq!(parked.len(), 61 - in_order);
    assert_eq!(
        sorted,
        Sorted {
            ahead: 1,
            deferred: (61 - in_order) as u64,
            ..Sorted::default()
        }
    );
    // The next turns take them oldest first, a turn's bytes at a time.
    let mut rest = Vec::new();
    while !parked.is_empty() {
        let next = parked.take(TURN_BYTES, TURN_MESSAGES);
        assert!(next.len() <= in_order, "{}", next.len());
        rest.extend(next);
    }
    let expected: Vec<String> = (in_order..=60).map(|i| format!("large-{i}")).collect();
    assert_eq!(names(&rest), expected);
}

#[test]
fn a_small_message_waits_behind_its_own_connections_large_one_and_bounds_hold() {
    let mut queue = large_returns(30);
    // bench-29's large return is left for a later turn: its small message
    // (an event after its return) must not pass it.
    queue.push_back(msg("bench-29", 500, "bench-29 event"));
    queue.push_back(msg("probe-0", SMALL_MESSAGE_BYTES, "small"));
    queue.push_back(msg("probe-1", SMALL_MESSAGE_BYTES + 1, "just too large"));
    let mut parked = Parked::default();
    let mut sorted = Sorted::default();
    let batch = turn(&mut parked, &mut queue, ROOM, &mut sorted);
    let got = names(&batch);
    assert!(got.contains(&"small"), "{got:?}");
    assert!(!got.contains(&"bench-29 event"), "{got:?}");
    assert!(!got.contains(&"just too large"), "{got:?}");
    let rest = parked.take(u64::MAX, usize::MAX);
    let rest = names(&rest);
    let at = |name: &str| rest.iter().position(|n| *n == name).unwrap();
    assert!(at("large-29") < at("bench-29 event"), "{rest:?}");
    assert_eq!(rest.last(), Some(&"just too large"));

    // Small messages alone: a turn holds TURN_MESSAGES at most; the rest
    // stays in the channel.
    let mut queue: VecDeque<Msg> = (0..TURN_MESSAGES + 10)
        .map(|i| msg(&format!("m-{i}"), 100, "ping"))
        .collect();
    let batch = turn(&mut parked, &mut queue, ROOM, &mut Sorted::default());
    assert_eq!(batch.len(), TURN_MESSAGES);
    assert_eq!(queue.len(), 10);
    assert!(parked.is_empty());

    // Past the bound (no room): a small message is still handled, a large
    // one parked, and counted as such.
    let mut queue: VecDeque<Msg> =
        VecDeque::from([msg("a", LARGE, "large"), msg("b", 300, "ping")]);
    let mut sorted = Sorted::default();
    let batch = turn(&mut parked, &mut queue, 0, &mut sorted);
    assert_eq!(names(&batch), ["ping"]);
    assert_eq!((sorted.read_past_bound, sorted.parked), (1, 1));
}
