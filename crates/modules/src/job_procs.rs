//! The processes a minion job started, so `saltutil.kill_job`,
//! `term_job` and `signal_job` reach them.
//!
//! Salt runs each job in a process of its own and signals that process.
//! halite runs a job on a thread of the minion, so what can be signalled
//! is what the job started: every command a job runs (through
//! [`crate::command`]) is put in a process group of its own and recorded
//! here under the job's jid, and a signalled job's waits (`test.sleep`)
//! end early. The runner marks the thread with [`JobScope::enter`].

use std::collections::{HashMap, HashSet};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

thread_local! {
    /// The jid of the job this thread runs, if any.
    static CURRENT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// What is known of one running job's processes.
#[derive(Default)]
struct JobProcs {
    /// Process groups of the commands it runs now.
    groups: HashSet<u32>,
    /// The signal it received, if any (its waits end).
    signalled: Option<i32>,
}

#[derive(Default)]
struct Registry {
    jobs: Mutex<HashMap<String, JobProcs>>,
    /// Woken when a job is signalled (its `test.sleep` ends).
    wake: Condvar,
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::default)
}

/// Marks the current thread as running job `jid` until dropped.
pub struct JobScope {
    jid: String,
}

impl JobScope {
    /// The current thread runs job `jid` from now on.
    pub fn enter(jid: &str) -> JobScope {
        CURRENT.with(|c| *c.borrow_mut() = Some(jid.to_string()));
        if let Ok(mut jobs) = registry().jobs.lock() {
            jobs.entry(jid.to_string()).or_default();
        }
        JobScope {
            jid: jid.to_string(),
        }
    }
}

impl Drop for JobScope {
    fn drop(&mut self) {
        CURRENT.with(|c| *c.borrow_mut() = None);
        if let Ok(mut jobs) = registry().jobs.lock() {
            jobs.remove(&self.jid);
        }
    }
}

/// Whether the current thread runs a job (its commands get a process group).
pub fn in_job() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

/// A command's process group, recorded under the current job until dropped.
pub struct ChildGuard {
    jid: Option<String>,
    pgid: u32,
}

/// Records process group `pgid` as the current job's (a no-op outside a job).
pub fn track_child(pgid: u32) -> ChildGuard {
    let jid = CURRENT.with(|c| c.borrow().clone());
    if let Some(jid) = &jid {
        if let Ok(mut jobs) = registry().jobs.lock() {
            let procs = jobs.entry(jid.clone()).or_default();
            if let Some(sig) = procs.signalled {
                // Signalled before this command started: it gets it too.
                send(pgid, sig);
            }
            procs.groups.insert(pgid);
        }
    }
    ChildGuard { jid, pgid }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(jid) = &self.jid {
            if let Ok(mut jobs) = registry().jobs.lock() {
                if let Some(procs) = jobs.get_mut(jid) {
                    procs.groups.remove(&self.pgid);
                }
            }
        }
    }
}

/// Sends `signal` to every process group job `jid` runs and ends its
/// waits; false when no such job runs here.
pub fn signal_job(jid: &str, signal: i32) -> bool {
    let reg = registry();
    let Ok(mut jobs) = reg.jobs.lock() else {
        return false;
    };
    let Some(procs) = jobs.get_mut(jid) else {
        return false;
    };
    if terminates(signal) {
        procs.signalled = Some(signal);
    }
    for &pgid in &procs.groups {
        send(pgid, signal);
    }
    reg.wake.notify_all();
    true
}

/// Whether `signal`'s default action ends a process (so the job ends):
/// not SIGCHLD, SIGCONT, SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU, SIGURG, SIGWINCH.
pub fn terminates(signal: i32) -> bool {
    use nix::sys::signal::Signal::*;
    let keeps = [
        SIGCHLD, SIGCONT, SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU, SIGURG, SIGWINCH,
    ];
    signal > 0 && !keeps.iter().any(|s| *s as i32 == signal)
}

/// The signal job `jid` received, if any.
pub fn signalled(jid: &str) -> Option<i32> {
    registry()
        .jobs
        .lock()
        .ok()
        .and_then(|jobs| jobs.get(jid).and_then(|p| p.signalled))
}

/// Sleeps `length`, or less when the current job is signalled; the
/// signal that ended it early, if any.
pub fn sleep(length: Duration) -> Option<i32> {
    let Some(jid) = CURRENT.with(|c| c.borrow().clone()) else {
        std::thread::sleep(length);
        return None;
    };
    let reg = registry();
    let deadline = Instant::now() + length;
    let Ok(mut jobs) = reg.jobs.lock() else {
        std::thread::sleep(length);
        return None;
    };
    loop {
        if let Some(sig) = jobs.get(&jid).and_then(|p| p.signalled) {
            return Some(sig);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        jobs = match reg.wake.wait_timeout(jobs, deadline - now) {
            Ok((guard, _)) => guard,
            Err(_) => return None,
        };
    }
}

/// `kill(-pgid, signal)`: the whole group, ignoring a group already gone.
fn send(pgid: u32, signal: i32) {
    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::Pid;
    let (Ok(raw), Ok(sig)) = (i32::try_from(pgid), Signal::try_from(signal)) else {
        return;
    };
    if let Err(e) = killpg(Pid::from_raw(raw), sig) {
        tracing::debug!(pgid, error = %e, "signal to a job's process group not delivered");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn a_signalled_job_sleeps_no_more_and_its_commands_get_the_signal() {
        let jid = "20261126000000000001";
        let scope = JobScope::enter(jid);
        let mut child = std::process::Command::new("sleep")
            .arg("300")
            .process_group(0)
            .spawn()
            .unwrap();
        let _guard = track_child(child.id());
        let waiter = std::thread::spawn(|| {
            let _s = JobScope::enter("20261126000000000002");
            sleep(Duration::from_secs(300))
        });
        assert!(signal_job(jid, 15));
        assert!(!signal_job("20261126000000000009", 15));
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.wait().unwrap().signal(), Some(15));
        assert_eq!(sleep(Duration::from_secs(300)), Some(15));
        // The waiter may not have entered its job yet.
        while !signal_job("20261126000000000002", 9) {
            std::thread::yield_now();
        }
        assert_eq!(waiter.join().unwrap(), Some(9));
        drop(scope);
        assert_eq!(signalled(jid), None);
    }

    use std::os::unix::process::CommandExt;
}
