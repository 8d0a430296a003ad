//! How both daemons stop: one signal that every loop listens for, and a
//! count of the work still running that the daemon waits for (within a
//! grace period) before it exits — the pattern of tokio's mini-redis
//! (`src/shutdown.rs` there: a broadcast notice plus a drain channel),
//! folded into one cloneable handle.
//!
//! - the master triggers it on SIGTERM, stops taking CLI connections, and
//!   drains: compiles and file reads in flight finish, the returns already
//!   received are written to the job cache, then it exits;
//! - the minion triggers it on SIGTERM, starts no new job, lets the running
//!   ones finish (their returns on disk, sent if the master is there), and
//!   past its grace period abandons the rest with a return kept on disk.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};

/// A daemon's shutdown: the signal (once triggered, for good) and the
/// count of [`Work`] guards still alive. Clones share both.
#[derive(Clone, Debug)]
pub struct Shutdown {
    shared: Arc<Shared>,
    signal: watch::Receiver<bool>,
}

#[derive(Debug)]
struct Shared {
    trigger: watch::Sender<bool>,
    running: AtomicUsize,
    idle: Notify,
}

/// One piece of running work the daemon waits for before it exits; the
/// count drops when the guard does (however the work ended).
#[derive(Debug)]
#[must_use = "the work counts as running only while its guard lives"]
pub struct Work {
    shared: Arc<Shared>,
}

impl Drop for Work {
    fn drop(&mut self) {
        if self.shared.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.idle.notify_waiters();
        }
    }
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    /// A shutdown not yet triggered, with no work running.
    pub fn new() -> Self {
        let (trigger, signal) = watch::channel(false);
        Shutdown {
            shared: Arc::new(Shared {
                trigger,
                running: AtomicUsize::new(0),
                idle: Notify::new(),
            }),
            signal,
        }
    }

    /// Tells every listener to stop (idempotent).
    pub fn trigger(&self) {
        self.shared.trigger.send_replace(true);
    }

    /// Triggers the shutdown when `signal` resolves (SIGTERM, SIGINT, a
    /// test's own future); must be called inside a tokio runtime.
    pub fn trigger_on(&self, signal: impl Future<Output = ()> + Send + 'static) {
        let this = self.clone();
        tokio::spawn(async move {
            signal.await;
            this.trigger();
        });
    }

    /// Whether the shutdown was triggered.
    pub fn is_triggered(&self) -> bool {
        *self.signal.borrow()
    }

    /// Resolves once the shutdown is triggered (at once if it was).
    pub async fn triggered(&self) {
        let mut signal = self.signal.clone();
        // The sender lives in `shared`, which this handle holds: no error.
        let _ = signal.wait_for(|stopped| *stopped).await;
    }

    /// Counts a piece of work as running until the guard is dropped.
    pub fn work(&self) -> Work {
        self.shared.running.fetch_add(1, Ordering::AcqRel);
        Work {
            shared: self.shared.clone(),
        }
    }

    /// How many [`Work`] guards are alive.
    pub fn running(&self) -> usize {
        self.shared.running.load(Ordering::Acquire)
    }

    /// Resolves once no work is running (at once if none is).
    pub async fn drained(&self) {
        loop {
            let notified = self.shared.idle.notified();
            tokio::pin!(notified);
            // Registered before the check, so a guard dropped in between wakes us.
            notified.as_mut().enable();
            if self.running() == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Waits up to `grace` for the running work to end; the number of
    /// pieces still running when it gave up (0: everything finished).
    pub async fn drain(&self, grace: Duration) -> usize {
        match tokio::time::timeout(grace, self.drained()).await {
            Ok(()) => 0,
            Err(_) => self.running(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn listeners_hear_the_trigger_and_the_drain_waits_for_work() {
        let shutdown = Shutdown::new();
        let listener = shutdown.clone();
        let heard = tokio::spawn(async move {
            listener.triggered().await;
            listener.is_triggered()
        });
        let work = shutdown.work();
        assert_eq!(shutdown.running(), 1);
        shutdown.trigger();
        assert!(heard.await.unwrap_or(false));
        // Still running: the drain gives up and says how much was left.
        assert_eq!(shutdown.drain(Duration::from_millis(50)).await, 1);
        let waiter = {
            let shutdown = shutdown.clone();
            tokio::spawn(async move { shutdown.drain(Duration::from_secs(30)).await })
        };
        tokio::task::yield_now().await;
        drop(work);
        assert_eq!(waiter.await.unwrap_or(usize::MAX), 0);
        assert_eq!(shutdown.running(), 0);
        // Triggered for good: a late listener returns at once.
        shutdown.clone().triggered().await;
    }
}
