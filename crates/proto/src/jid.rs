//! Job ids as Salt makes them: the UTC time as `YYYYMMDDhhmmssffffff`.

use std::sync::Mutex;

use chrono::{DateTime, NaiveDateTime, Utc};

/// Hands out jids that are unique and increasing within one process, even
/// when two jobs start in the same microsecond (Salt bumps the
/// microseconds the same way when `unique_jid` is off).
#[derive(Debug, Default)]
pub struct JidGenerator {
    last: Mutex<Option<NaiveDateTime>>,
}

impl JidGenerator {
    /// A generator with no history.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next jid for the current UTC time.
    pub fn next_jid(&self) -> String {
        self.next_at(Utc::now())
    }

    /// The next jid for `now` (never equal to or before the previous one).
    pub fn next_at(&self, now: DateTime<Utc>) -> String {
        let mut at = now.naive_utc();
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(prev) = *last {
            if at <= prev {
                at = prev + chrono::Duration::microseconds(1);
            }
        }
        *last = Some(at);
        format_jid(at)
    }
}

fn format_jid(at: NaiveDateTime) -> String {
    at.format("%Y%m%d%H%M%S%6f").to_string()
}

/// The jid of a return the minion sends for a call of its own
/// (`halite-call` without `--local`, Salt's salt-call `return_pub`): the
/// master gives the call a jid of its own when it stores the return.
pub const CALLER_JID: &str = "req";

/// Whether `jid` has Salt's shape: 20 ASCII digits.
pub fn is_jid(jid: &str) -> bool {
    jid.len() == 20 && jid.bytes().all(|b| b.is_ascii_digit())
}

/// The time a jid encodes, for job listings (`jobs.list_jobs` StartTime).
pub fn jid_time(jid: &str) -> Option<NaiveDateTime> {
    if !is_jid(jid) {
        return None;
    }
    NaiveDateTime::parse_from_str(jid, "%Y%m%d%H%M%S%6f").ok()
}

/// Salt's `jid_to_time` wording: `2026, Nov 21 21:15:21.123456`.
pub fn jid_start_time(jid: &str) -> String {
    if !is_jid(jid) {
        return String::new();
    }
    halite_salt_rules::jid::jid_to_time(jid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn jid_has_salts_shape_and_time() {
        let at = Utc
            .with_ymd_and_hms(2026, 11, 21, 21, 15, 21)
            .single()
            .unwrap_or_default()
            + chrono::Duration::microseconds(42);
        let jid = JidGenerator::new().next_at(at);
        assert_eq!(jid, "20261121211521000042");
        assert!(is_jid(&jid));
        assert_eq!(jid_start_time(&jid), "2026, Nov 21 21:15:21.000042");
    }

    #[test]
    fn jids_in_the_same_microsecond_still_increase() {
        let generator = JidGenerator::new();
        let at = Utc::now();
        let a = generator.next_at(at);
        let b = generator.next_at(at);
        assert!(b > a, "{b} must sort after {a}");
        assert!(!is_jid("2026112121152100004"));
        assert!(!is_jid("2026112121152100004x"));
    }
}
