//! One identity's answers to the master's render-time calls, kept by
//! (jid, call number) so that a call the master sends again (no answer
//! came within its `request_channel_timeout`: the call or the answer was
//! lost, or the minion reconnected) is answered from what was kept and
//! never run twice: a template's `salt['cmd.run']('...')` runs once per
//! call. A repeat of a call still running is answered when it ends, once.
//! Only calls the master marks `repeatable` are kept (an older master's
//! numbers are not unique across its restarts). Bounded: the newest
//! [`KEPT_CALLS`] per identity, each for [`KEPT_FOR`] at most.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Answers kept per identity.
const KEPT_CALLS: usize = 128;

/// How long an answer is kept: past a job's 600 s wait for its bundle,
/// no compile of that job asks any more.
const KEPT_FOR: Duration = Duration::from_secs(660);

/// What to do with a call the master sent.
#[derive(Debug, PartialEq)]
pub(super) enum Ask {
    /// A new call: run it (it is marked running).
    Run,
    /// The same call runs now: its answer goes when it ends.
    Running,
    /// Asked before and answered: send this answer again.
    Answered(Result<Value, String>),
}

enum State {
    Running,
    Done(Result<Value, String>),
}

struct Kept {
    fun: String,
    state: State,
    at: Instant,
}

/// The render-time calls of one identity, running or answered.
#[derive(Default)]
pub(super) struct KeptCalls {
    calls: HashMap<(String, u64), Kept>,
    order: VecDeque<(String, u64)>,
}

impl KeptCalls {
    /// Call `call` of job `jid`, of function `fun`, arrived: whether to
    /// run it, wait for its run, or answer it from what was kept.
    pub(super) fn ask(&mut self, jid: &str, call: u64, fun: &str, now: Instant) -> Ask {
        self.forget_old(now);
        let key = (jid.to_string(), call);
        match self.calls.get(&key) {
            // The same number for another function is another call.
            Some(kept) if kept.fun == fun => match &kept.state {
                State::Running => return Ask::Running,
                State::Done(result) => return Ask::Answered(result.clone()),
            },
            Some(_) => self.order.retain(|k| *k != key),
            None => {}
        }
        self.calls.insert(
            key.clone(),
            Kept {
                fun: fun.to_string(),
                state: State::Running,
                at: now,
            },
        );
        self.order.push_back(key);
        while self.order.len() > KEPT_CALLS {
            if let Some(oldest) = self.order.pop_front() {
                self.calls.remove(&oldest);
            }
        }
        Ask::Run
    }

    /// Call `call` of job `jid` ended with `result`: kept for its repeats.
    pub(super) fn done(&mut self, jid: &str, call: u64, result: &Result<Value, String>) {
        if let Some(kept) = self.calls.get_mut(&(jid.to_string(), call)) {
            kept.state = State::Done(result.clone());
        }
    }

    fn forget_old(&mut self, now: Instant) {
        while let Some(oldest) = self.order.front() {
            let expired = self
                .calls
                .get(oldest)
                .is_none_or(|k| now.duration_since(k.at) >= KEPT_FOR);
            if !expired {
                break;
            }
            if let Some(oldest) = self.order.pop_front() {
                self.calls.remove(&oldest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_runs_once_and_its_repeats_get_the_one_answer() {
        let t0 = Instant::now();
        let mut kept = KeptCalls::default();
        assert_eq!(kept.ask("j1", 7, "cmd.run", t0), Ask::Run);
        assert_eq!(kept.ask("j1", 7, "cmd.run", t0), Ask::Running);
        kept.done("j1", 7, &Ok(json!("1")));
        assert_eq!(
            kept.ask("j1", 7, "cmd.run", t0),
            Ask::Answered(Ok(json!("1")))
        );
        // Another job's or function's call under that number runs.
        assert_eq!(kept.ask("j2", 7, "cmd.run", t0), Ask::Run);
        assert_eq!(kept.ask("j1", 7, "test.echo", t0), Ask::Run);
        // Kept for KEPT_FOR, then forgotten.
        assert_eq!(kept.ask("j9", 1, "cmd.run", t0 + KEPT_FOR), Ask::Run);
        assert_eq!(kept.ask("j2", 7, "cmd.run", t0 + KEPT_FOR), Ask::Run);
    }

    #[test]
    fn only_the_newest_answers_are_kept() {
        let t0 = Instant::now();
        let mut kept = KeptCalls::default();
        for call in 0..=KEPT_CALLS as u64 {
            assert_eq!(kept.ask("j", call, "cmd.run", t0), Ask::Run);
            kept.done("j", call, &Ok(json!(call)));
        }
        assert_eq!(kept.calls.len(), KEPT_CALLS);
        assert_eq!(kept.ask("j", 0, "cmd.run", t0), Ask::Run);
        assert_eq!(
            kept.ask("j", KEPT_CALLS as u64, "cmd.run", t0),
            Ask::Answered(Ok(json!(KEPT_CALLS)))
        );
    }
}
