//! Admission of unauthenticated work: Hellos are rate-limited per
//! connection and overall, and new keys (pending or denied files) per
//! second, so a flood of Hellos costs the master bounded CPU and disk and
//! never stalls the sessions of real minions. Token buckets from
//! `governor` (GCRA, keyed by ZeroMQ routing id).

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use bytes::Bytes;
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::config::MasterConfig;

/// How often a "rate limited" summary is logged at most.
const REPORT_EVERY: Duration = Duration::from_secs(10);

/// What was refused since the last report.
#[derive(Default)]
struct Refused {
    per_peer: u64,
    overall: u64,
    new_keys: u64,
}

/// The master's limits on work done before a peer has authenticated.
pub struct Admission {
    per_peer: Option<DefaultKeyedRateLimiter<Bytes>>,
    overall: Option<DefaultDirectRateLimiter>,
    new_keys: Option<DefaultDirectRateLimiter>,
    refused: Refused,
    last_report: Instant,
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
        if r.per_peer + r.overall + r.new_keys > 0 {
            tracing::warn!(
                per_connection = r.per_peer,
                overall = r.overall,
                new_keys = r.new_keys,
                "unauthenticated Hellos dropped by rate limits (hello_rate_per_peer, hello_rate, pending_key_rate) in the last {} s",
                REPORT_EVERY.as_secs()
            );
        }
    }
}
