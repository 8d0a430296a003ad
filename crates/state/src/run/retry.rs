//! The `retry` option of a state: how often, how long between, until what.

use super::StateReturn;
use crate::requisite::py_str;
use crate::value::Value;

/// A validated `retry` argument (Salt's `verify_retry_data`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetrySpec {
    /// `until` (Salt's default `True`): the result that ends the retries.
    pub until: bool,
    /// How many times to try at most.
    pub attempts: u64,
    /// Seconds between attempts.
    pub interval: u64,
    /// Up to this many extra seconds at random between attempts.
    pub splay: u64,
}

impl RetrySpec {
    /// Salt's defaults and validation: wrong types fall back to defaults.
    pub fn from_value(v: &Value) -> RetrySpec {
        let defaults = RetrySpec {
            until: true,
            attempts: 2,
            interval: 30,
            splay: 0,
        };
        match v {
            Value::Object(m) => RetrySpec {
                until: m
                    .get("until")
                    .and_then(Value::as_bool)
                    .unwrap_or(defaults.until),
                attempts: m
                    .get("attempts")
                    .and_then(Value::as_u64)
                    .unwrap_or(defaults.attempts),
                interval: m
                    .get("interval")
                    .and_then(Value::as_u64)
                    .unwrap_or(defaults.interval),
                splay: m
                    .get("splay")
                    .and_then(Value::as_u64)
                    .unwrap_or(defaults.splay),
            },
            Value::Bool(false) => RetrySpec {
                attempts: 0,
                ..defaults
            },
            _ => defaults,
        }
    }
}

impl RetrySpec {
    /// Waits Salt's pause before the next attempt, `interval` plus up to
    /// `splay` seconds; the seconds waited. One place for both callers: the
    /// executor's retry and a parallel state's retry in its worker.
    pub(super) fn pause(&self) -> u64 {
        let mut interval = self.interval;
        if self.splay > 0 {
            interval += pseudo_random(self.splay);
        }
        if interval > 0 {
            std::thread::sleep(std::time::Duration::from_secs(interval));
        }
        interval
    }
}

/// A number in `0..=max` without pulling in a RNG crate: splay only needs
/// to spread retries, not to be unpredictable.
pub(super) fn pseudo_random(max: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(0);
    nanos % (max + 1)
}

/// Salt's comment for a state with `retry` in test mode.
pub(super) fn note_would_retry(ret: &mut StateReturn, retry: &RetrySpec) {
    let c = ret.get("comment").map(py_str).unwrap_or_default();
    ret.insert("comment",
        Value::from(format!(
            "{c}  The state would be retried every {} seconds (with a splay of up to {} seconds) a maximum of {} times or until a result of {} is returned",
            retry.interval,
            retry.splay,
            retry.attempts,
            if retry.until { "True" } else { "False" }
        )),
    );
}
