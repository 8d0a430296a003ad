//! Admission of unauthenticated work: Hellos are rate-limited per
//! connection and overall, and new keys (pending or denied files) per
//! second, so a flood of Hellos costs the master bounded CPU and disk and
//! never stalls the sessions of real minions. Token buckets from
//! `governor` (GCRA, keyed by ZeroMQ routing id).
//!
//! A Hello from a new id over `pending_key_rate` is held (bounded, one per
//! id, the newest Hello kept) and answered as soon as the rate allows,
//! instead of being dropped: a dropped Hello cost its minion a whole
//! `auth_timeout` before it asked again, so a new fleet of 1,000 came up in
//! rounds of `auth_timeout`. The rate of key files written is unchanged.

use std::collections::{HashMap, VecDeque};
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use bytes::Bytes;
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};
use halite_proto::msg::Hello;

use crate::config::MasterConfig;

/// How often a "rate limited" summary is logged at most.
const REPORT_EVERY: Duration = Duration::from_secs(10);

/// Most Hellos held for `pending_key_rate` at once (one per id; a few
/// hundred bytes each). Beyond it a new id's Hello is dropped, as before.
pub const MAX_HELD_HELLOS: usize = 10_000;

/// How long a held Hello is kept: a minion that has not asked again by
/// then has given up (its retries replace the held Hello and its time).
const HOLD_FOR: Duration = Duration::from_secs(60);

/// A Hello from a new id held back by `pending_key_rate`.
pub struct HeldHello {
    /// The connection it came on.
    pub routing: Bytes,
    /// The newest Hello of that id.
    pub hello: Hello,
    /// From `halite-call` (a caller session) rather than a minion daemon.
    pub caller: bool,
    at: Instant,
}

/// What was refused since the last report.
#[derive(Default)]
struct Refused {
    per_peer: u64,
    overall: u64,
    new_keys: u64,
    held_full: u64,
}

/// The master's limits on work done before a peer has authenticated.
pub struct Admission {
    per_peer: Option<DefaultKeyedRateLimiter<Bytes>>,
    overall: Option<DefaultDirectRateLimiter>,
    new_keys: Option<DefaultDirectRateLimiter>,
    refused: Refused,
    last_report: Instant,
    /// Held Hellos in arrival order (ids), and each id's newest Hello.
    held_order: VecDeque<String>,
    held: HashMap<String, HeldHello>,
}

/// A per-second quota with a burst of one second's worth; `None` for 0 (no limit).
fn quota(per_second: u32) -> Option<Quota> {
    NonZeroU32::new(per_second).map(Quota::per_second)
}

impl Admission {
    /// Limits from `hello_rate_per_peer`, `hello_rate` and `pending_key_rate`.
    pub fn new(cfg: &MasterConfig) -> Self {
        Self {
            per_peer: quota(cfg.hello_rate_per_peer).map(RateLimiter::hashmap),
            overall: quota(cfg.hello_rate).map(RateLimiter::direct),
            new_keys: quota(cfg.pending_key_rate).map(RateLimiter::direct),
            refused: Refused::default(),
            last_report: Instant::now(),
            held_order: VecDeque::new(),
            held: HashMap::new(),
        }
    }

    /// Whether a Hello from the connection `routing` may be handled now.
    pub fn hello(&mut self, routing: &Bytes) -> bool {
        if let Some(limit) = &self.per_peer {
            if limit.check_key(routing).is_err() {
                self.refused.per_peer += 1;
                return false;
            }
        }
        if let Some(limit) = &self.overall {
            if limit.check().is_err() {
                self.refused.overall += 1;
                return false;
            }
        }
        true
    }

    /// Whether one more key file (a new pending key, a denied key) may be
    /// written now.
    pub fn new_key(&mut self) -> bool {
        match &self.new_keys {
            Some(limit) if limit.check().is_err() => {
                self.refused.new_keys += 1;
                false
            }
            _ => true,
        }
    }

    /// Holds the Hello of a new id that `pending_key_rate` refused now, to
    /// be answered by [`Admission::next_held`] when the rate allows. A
    /// second Hello of a held id replaces the first (the minion retried:
    /// only its newest Hello's Welcome is accepted). `false` when the hold
    /// is full and the Hello is dropped.
    pub fn hold(&mut self, routing: Bytes, hello: Hello, caller: bool) -> bool {
        let at = Instant::now();
        if let Some(held) = self.held.get_mut(&hello.id) {
            *held = HeldHello {
                routing,
                hello,
                caller,
                at,
            };
            return true;
        }
        if self.held.len() >= MAX_HELD_HELLOS {
            self.refused.held_full += 1;
            return false;
        }
        self.held_order.push_back(hello.id.clone());
        self.held.insert(
            hello.id.clone(),
            HeldHello {
                routing,
                hello,
                caller,
                at,
            },
        );
        true
    }

    /// Whether Hellos are held.
    pub fn has_held(&self) -> bool {
        !self.held.is_empty()
    }

    /// The oldest held Hello, when one more key file may be written now
    /// (the rate's token is taken: the caller writes the key). Held Hellos
    /// older than a minute are forgotten.
    pub fn next_held(&mut self) -> Option<HeldHello> {
        loop {
            let id = self.held_order.front()?;
            match self.held.get(id) {
                Some(held) if held.at.elapsed() < HOLD_FOR => {}
                _ => {
                    if let Some(id) = self.held_order.pop_front() {
                        self.held.remove(&id);
                    }
                    continue;
                }
            }
            if self.new_keys.as_ref().is_some_and(|l| l.check().is_err()) {
                return None;
            }
            let id = self.held_order.pop_front()?;
            return self.held.remove(&id);
        }
    }

    /// Forgets idle connections' buckets and logs what was refused (at
    /// most every ten seconds); called on the master's tick.
    pub fn tidy(&mut self) {
        if let Some(limit) = &self.per_peer {
            limit.retain_recent();
            limit.shrink_to_fit();
        }
        if self.last_report.elapsed() < REPORT_EVERY {
            return;
        }
        let r = std::mem::take(&mut self.refused);
        self.last_report = Instant::now();
        if r.per_peer + r.overall + r.held_full > 0 {
            tracing::warn!(
                per_connection = r.per_peer,
                overall = r.overall,
                new_keys_over_the_hold = r.held_full,
                "unauthenticated Hellos dropped by rate limits (hello_rate_per_peer, hello_rate, pending_key_rate with {MAX_HELD_HELLOS} held) in the last {} s",
                REPORT_EVERY.as_secs()
            );
        }
        if r.new_keys > 0 {
            tracing::info!(
                new_keys = r.new_keys,
                held = self.held.len(),
                "Hellos of new ids held for pending_key_rate in the last {} s (answered as the rate allows)",
                REPORT_EVERY.as_secs()
            );
        }
    }
}
