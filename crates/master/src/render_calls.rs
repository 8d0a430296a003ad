//! Render-time calls waiting for their minion's answer. While the master
//! renders a minion's templates, a `salt['mod.fun'](...)` that needs the
//! minion's host is sent to it as a `RenderCall`; the compile waits for
//! the `RenderReply` up to `render_call_timeout`. One lost message (a full
//! connection queue, a reconnection) used to cost the compile all of it:
//! now a call with no answer after `request_channel_timeout` is sent again
//! under the same number, to the minion's current session, when the
//! minion said it keeps its answers (`kept_calls`: it answers a repeat
//! from what it kept, so `cmd.run` never runs twice for one call).
//!
//! Numbers: the n-th call of a published job's compile for a minion has a
//! number derived from (minion, jid, n, function, arguments), so a compile
//! made again for the same job (its bundle answer was lost and the minion
//! asked again) asks the same numbers and the minion answers them from
//! what it kept instead of running them again. Calls of compiles with no
//! published job (a `halite-call`, the mine's pillar) draw from a random
//! seed: their jid is not unique.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use halite_modules::Args;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// How long past its compile's timeout a call is still known (a late
/// answer is then dropped as late, not as unknown).
const GIVE_UP_GRACE: Duration = Duration::from_secs(10);

/// Where a compile thread waits for the answer to one call.
pub type Waiter = Sender<Result<Value, String>>;

/// The numbers of one compile's render-time calls, in call order.
pub struct CallNumbers {
    seed: [u8; 32],
    made: AtomicU64,
}

impl CallNumbers {
    /// Numbers that a compile for the same minion and job gives again.
    pub fn for_job(id: &str, jid: &str) -> Self {
        let mut h = Sha256::new();
        h.update(b"halite/1 render call");
        for part in [id, jid] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part.as_bytes());
        }
        Self {
            seed: h.finalize().into(),
            made: AtomicU64::new(0),
        }
    }

    /// Numbers no other compile gives (from `random`, a fresh draw).
    pub fn fresh(random: u64) -> Self {
        let mut seed = [0u8; 32];
        seed[..8].copy_from_slice(&random.to_be_bytes());
        Self {
            seed,
            made: AtomicU64::new(0),
        }
    }

    /// The number of this compile's next call, of `fun` with `args`.
    pub fn next(&self, fun: &str, args: &Args) -> u64 {
        let n = self.made.fetch_add(1, Ordering::Relaxed);
        let mut h = Sha256::new();
        h.update(self.seed);
        h.update(n.to_be_bytes());
        h.update((fun.len() as u64).to_be_bytes());
        h.update(fun.as_bytes());
        // serde_json's maps keep their order: the same call encodes the same.
        h.update(serde_json::to_vec(&(&args.positional, &args.kwargs)).unwrap_or_default());
        let digest = h.finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        u64::from_be_bytes(first)
    }
}

/// What a call asks the minion, kept to send it again.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// The job compiled.
    pub jid: String,
    /// The function called.
    pub fun: String,
    /// Its arguments.
    pub args: Args,
}

/// A call to send again now.
#[derive(Debug, PartialEq)]
pub struct Due {
    /// The call's number.
    pub call: u64,
    /// Whom it was asked of.
    pub asked: Asked,
    /// What it asks.
    pub question: Question,
}

/// Whom a call was asked of.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    /// The minion.
    pub id: String,
    /// The session it was (last) sent on.
    pub sid: u64,
    /// Whether that session is a `halite-call`'s: a call is not followed
    /// from it to the daemon's session.
    pub caller: bool,
    /// The question, kept to send it again: `None` for a minion that
    /// does not answer repeats from what it kept (an older one).
    pub repeat: Option<Question>,
}

struct Pending {
    asked: Asked,
    waiters: Vec<Waiter>,
    since: Instant,
    sent: Instant,
}

/// What became of a minion's answer.
#[derive(Debug, PartialEq, Eq)]
pub enum Answered {
    /// Handed to the compiles waiting for it.
    Taken,
    /// The call was asked of another minion: ignored.
    WrongMinion,
    /// Nothing waits for it (answered already, or given up).
    Unknown,
}

/// The calls waiting for an answer, by number.
pub struct PendingCalls {
    calls: HashMap<u64, Pending>,
    resend_after: Duration,
    give_up: Duration,
    resent: u64,
}

impl PendingCalls {
    /// Nothing waiting; calls are sent again every `resend_after`
    /// (`request_channel_timeout`) until `give_up` (`render_call_timeout`,
    /// when their compile stops waiting), and forgotten soon after.
    pub fn new(resend_after: Duration, give_up: Duration) -> Self {
        Self {
            calls: HashMap::new(),
            resend_after: resend_after.max(Duration::from_secs(1)),
            give_up,
            resent: 0,
        }
    }

    /// Records call `call`; true when it must be sent. The same call of
    /// the same minion waiting already (two compiles of one job: the
    /// minion reconnected and asked for its bundle again) is sent only
    /// when asked on another session, the minion's new one; the one
    /// answer serves both compiles.
    pub fn insert(&mut self, call: u64, asked: Asked, waiter: Waiter, now: Instant) -> bool {
        if let Some(pending) = self.calls.get_mut(&call) {
            if pending.asked.id == asked.id {
                pending.waiters.push(waiter);
                if pending.asked.sid == asked.sid {
                    return false;
                }
                pending.asked.sid = asked.sid;
                pending.asked.caller = asked.caller;
                pending.sent = now;
                self.resent += 1;
                return true;
            }
        }
        self.calls.insert(
            call,
            Pending {
                asked,
                waiters: vec![waiter],
                since: now,
                sent: now,
            },
        );
        true
    }

    /// Hands minion `id`'s answer to call `call` to its compiles: from
    /// any session of that minion (it may have reconnected since).
    pub fn answer(&mut self, call: u64, id: &str, result: Result<Value, String>) -> Answered {
        match self.calls.get(&call) {
            None => Answered::Unknown,
            Some(pending) if pending.asked.id != id => Answered::WrongMinion,
            Some(_) => {
                if let Some(pending) = self.calls.remove(&call) {
                    for waiter in pending.waiters {
                        let _ = waiter.send(result.clone());
                    }
                }
                Answered::Taken
            }
        }
    }

    /// Forgets the calls their compiles gave up on, and gives those due to
    /// be sent again (no answer within `resend_after` of the last send),
    /// marked sent now. The caller sends each on the minion's session
    /// and says where with [`PendingCalls::sent_on`].
    pub fn due(&mut self, now: Instant) -> Vec<Due> {
        let give_up = self.give_up;
        // Kept a little past it, so the compile's own timeout (which names
        // render_call_timeout) fires first, not a dropped channel.
        self.calls
            .retain(|_, p| now.duration_since(p.since) < give_up + GIVE_UP_GRACE);
        let mut due = Vec::new();
        for (call, p) in &mut self.calls {
            let Some(question) = &p.asked.repeat else {
                continue;
            };
            if now.duration_since(p.since) < give_up
                && now.duration_since(p.sent) >= self.resend_after
            {
                p.sent = now;
                due.push(Due {
                    call: *call,
                    question: question.clone(),
                    asked: p.asked.clone(),
                });
            }
        }
        due.sort_by_key(|d| d.call);
        due
    }

    /// Call `call` was sent again on session `sid` (the minion's current one).
    pub fn sent_on(&mut self, call: u64, sid: u64) {
        if let Some(p) = self.calls.get_mut(&call) {
            p.asked.sid = sid;
            self.resent += 1;
        }
    }

    /// Calls sent again since the start (`master.stats`).
    pub fn resent(&self) -> u64 {
        self.resent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Args {
        Args {
            positional: vec![v],
            kwargs: Default::default(),
        }
    }

    #[test]
    fn a_compile_made_again_for_the_same_job_asks_the_same_numbers() {
        let (a, b) = (
            CallNumbers::for_job("web1", "j1"),
            CallNumbers::for_job("web1", "j1"),
        );
        let first = [
            a.next("cmd.run", &args(json!("id"))),
            a.next("cmd.run", &args(json!("id"))),
        ];
        let again = [
            b.next("cmd.run", &args(json!("id"))),
            b.next("cmd.run", &args(json!("id"))),
        ];
        assert_eq!(first, again);
        assert_ne!(first[0], first[1], "the second call is another call");
        // Another minion, job, function or argument is another call.
        let other = |id, jid, fun, arg| CallNumbers::for_job(id, jid).next(fun, &args(arg));
        for n in [
            other("web2", "j1", "cmd.run", json!("id")),
            other("web1", "j2", "cmd.run", json!("id")),
            other("web1", "j1", "cmd.shell", json!("id")),
            other("web1", "j1", "cmd.run", json!("hostname")),
        ] {
            assert_ne!(n, first[0]);
        }
        assert_ne!(
            CallNumbers::fresh(1).next("cmd.run", &args(json!("id"))),
            CallNumbers::fresh(2).next("cmd.run", &args(json!("id")))
        );
    }

    #[test]
    fn a_call_with_no_answer_is_due_again_and_one_answer_serves_every_waiter() {
        let t0 = Instant::now();
        let mut calls = PendingCalls::new(Duration::from_secs(10), Duration::from_secs(120));
        let q = Question {
            jid: "j1".into(),
            fun: "cmd.run".into(),
            args: args(json!("id")),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let asked = |repeat| Asked {
            id: "web1".into(),
            sid: 1,
            caller: false,
            repeat,
        };
        assert!(calls.insert(7, asked(Some(q.clone())), tx.clone(), t0));
        assert!(!calls.insert(7, asked(Some(q.clone())), tx.clone(), t0));
        // Asked again from the minion's new session: sent there.
        let moved = Asked {
            sid: 3,
            ..asked(Some(q.clone()))
        };
        assert!(calls.insert(9, moved.clone(), tx.clone(), t0));
        assert!(calls.insert(9, Asked { sid: 4, ..moved }, tx.clone(), t0));
        // An older minion's call is never sent twice.
        assert!(calls.insert(8, asked(None), tx, t0));
        assert!(calls.due(t0 + Duration::from_secs(9)).is_empty());
        let due = calls.due(t0 + Duration::from_secs(10));
        assert_eq!(due.len(), 2);
        assert_eq!((due[1].call, due[1].asked.sid), (9, 4));
        assert_eq!(
            (due[0].call, due[0].asked.sid, &due[0].question),
            (7, 1, &q)
        );
        calls.sent_on(7, 2);
        assert_eq!(calls.resent(), 2, "the move to session 4, and this one");
        assert!(calls.due(t0 + Duration::from_secs(11)).is_empty());
        assert_eq!(calls.due(t0 + Duration::from_secs(20))[0].asked.sid, 2);
        // Another minion cannot answer it; its own, from any session, can.
        assert_eq!(calls.answer(7, "web2", Ok(json!(1))), Answered::WrongMinion);
        assert_eq!(calls.answer(7, "web1", Ok(json!("web1"))), Answered::Taken);
        assert_eq!(rx.try_recv().ok(), Some(Ok(json!("web1"))));
        assert_eq!(rx.try_recv().ok(), Some(Ok(json!("web1"))));
        assert_eq!(calls.answer(7, "web1", Ok(json!(1))), Answered::Unknown);
        // Past render_call_timeout it is not sent again, and a little
        // later nothing waits for it any more.
        assert!(calls.due(t0 + Duration::from_secs(120)).is_empty());
        assert_eq!(calls.answer(9, "web1", Ok(json!(1))), Answered::Taken);
        assert!(calls.due(t0 + Duration::from_secs(130)).is_empty());
        assert_eq!(calls.answer(8, "web1", Ok(json!(1))), Answered::Unknown);
    }
}
