//! Login throttling: failed logins counted per user name and per source
//! address in a fixed window; once either count reaches the limit, further
//! logins for that key are refused (429) until the window ends. A
//! successful login clears the user's count.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The failure counters.
pub struct LoginLimiter {
    limit: u32,
    addr_limit: u32,
    window: Duration,
    counts: Mutex<HashMap<String, (Instant, u32)>>,
}

impl LoginLimiter {
    /// `limit` failures per `window` per user, `addr_limit` per source
    /// address; 0 disables a limit.
    pub fn new(limit: u32, addr_limit: u32, window: Duration) -> Self {
        Self {
            limit,
            addr_limit,
            window,
            counts: Mutex::new(HashMap::new()),
        }
    }

    fn count(&self, key: &str) -> u32 {
        let Ok(mut counts) = self.counts.lock() else {
            return 0;
        };
        let now = Instant::now();
        counts.retain(|_, (since, _)| now.duration_since(*since) < self.window);
        counts.get(key).map_or(0, |(_, n)| *n)
    }

    /// Whether a login for `user` from `addr` may be tried now.
    pub fn allowed(&self, user: &str, addr: &str) -> bool {
        (self.limit == 0 || self.count(&format!("user:{user}")) < self.limit)
            && (self.addr_limit == 0 || self.count(&format!("addr:{addr}")) < self.addr_limit)
    }

    /// Records a failed login.
    pub fn failed(&self, user: &str, addr: &str) {
        if let Ok(mut counts) = self.counts.lock() {
            let now = Instant::now();
            for key in [format!("user:{user}"), format!("addr:{addr}")] {
                let entry = counts.entry(key).or_insert((now, 0));
                entry.1 += 1;
            }
        }
    }

    /// Records a successful login (the user's failures are forgiven).
    pub fn succeeded(&self, user: &str) {
        if let Ok(mut counts) = self.counts.lock() {
            counts.remove(&format!("user:{user}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_lock_the_user_and_the_address() {
        let l = LoginLimiter::new(2, 2, Duration::from_secs(60));
        assert!(l.allowed("a", "1.1.1.1"));
        l.failed("a", "1.1.1.1");
        l.failed("b", "1.1.1.1");
        assert!(!l.allowed("c", "1.1.1.1"), "the address is locked");
        assert!(l.allowed("c", "2.2.2.2"));
        l.failed("a", "3.3.3.3");
        assert!(!l.allowed("a", "4.4.4.4"), "the user is locked");
        l.succeeded("a");
        assert!(l.allowed("a", "4.4.4.4"));
        assert!(LoginLimiter::new(0, 0, Duration::from_secs(1)).allowed("x", "y"));
    }
}
