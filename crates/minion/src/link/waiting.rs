//! Job threads' requests waiting for the master's answer, by request
//! number. An idempotent request (a `salt://` file's stat, chunk or list,
//! a bundle) is sent again with the same number when no answer came within
//! `request_channel_timeout` (Salt's key, 60 s): one lost message (a full
//! queue on the way) costs a job that long, not the whole request timeout.
//! The master answers a repeat it is still working on once.

use std::collections::HashMap;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use halite_proto::msg::{ReplyBody, RequestBody};
use serde_json::{Map, Value};

/// Salt's default `request_channel_timeout`.
const DEFAULT_RESEND_AFTER: Duration = Duration::from_secs(60);

/// When a request with no answer is sent again: the minion config's
/// `request_channel_timeout` (seconds; Salt's key and default), at least 1 s.
pub fn resend_after(extra: &Map<String, Value>) -> Duration {
    extra
        .get("request_channel_timeout")
        .and_then(|v| {
            v.as_u64()
                .or_else(|| v.as_f64().map(|f| f as u64))
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
        })
        .map(|s| Duration::from_secs(s.max(1)))
        .unwrap_or(DEFAULT_RESEND_AFTER)
}

/// Whether asking `body` twice gives the same answer and changes nothing
/// on the master, so it may be sent again. A minion's own job (it is
/// recorded) and mine requests (`mine.send` stores) are not.
fn idempotent(body: &RequestBody) -> bool {
    matches!(
        body,
        RequestBody::FileStat { .. }
            | RequestBody::FileChunk { .. }
            | RequestBody::FileList { .. }
            | RequestBody::FileEnvs
            | RequestBody::Bundle { .. }
            | RequestBody::CallBundle { .. }
    )
}

struct Entry {
    agent: usize,
    reply: Sender<ReplyBody>,
    since: Instant,
    /// The request and when it was last sent, when it may be sent again.
    resend: Option<(RequestBody, Instant)>,
}

/// The requests of one link waiting for their answer.
pub(super) struct Waiting {
    entries: HashMap<u64, Entry>,
    resend_after: Duration,
    timeout: Duration,
}

impl Waiting {
    /// Nothing waiting; idempotent requests are sent again every
    /// `resend_after`, and every request is forgotten after `timeout`.
    pub(super) fn new(resend_after: Duration, timeout: Duration) -> Self {
        Self {
            entries: HashMap::new(),
            resend_after,
            timeout,
        }
    }

    /// Remembers request `req` of identity `agent`, just sent.
    pub(super) fn insert(
        &mut self,
        req: u64,
        agent: usize,
        reply: Sender<ReplyBody>,
        body: &RequestBody,
        now: Instant,
    ) {
        let resend = idempotent(body).then(|| (body.clone(), now));
        self.entries.insert(
            req,
            Entry {
                agent,
                reply,
                since: now,
                resend,
            },
        );
    }

    /// Hands the master's answer to request `req` of identity `agent` to
    /// its job; false when nothing waits for it (a late or repeated answer).
    pub(super) fn answer(&mut self, req: u64, agent: usize, body: ReplyBody) -> bool {
        match self.entries.get(&req) {
            Some(entry) if entry.agent == agent => {
                if let Some(entry) = self.entries.remove(&req) {
                    let _ = entry.reply.send(body);
                }
                true
            }
            _ => false,
        }
    }

    /// Whether `body` is kept across a reconnection and asked again.
    pub(super) fn keeps(body: &RequestBody) -> bool {
        idempotent(body)
    }

    /// The link ended: requests that may not be asked again are answered
    /// "lost" (their sender dropped); the others wait for the identity's
    /// next session, where [`Waiting::for_new_session`] gives them.
    pub(super) fn link_ended(&mut self) {
        self.entries.retain(|_, e| e.resend.is_some());
    }

    /// Identity `agent` has a new session: its requests still waiting, to
    /// ask again there under the same numbers, marked sent `now`.
    pub(super) fn for_new_session(
        &mut self,
        agent: usize,
        now: Instant,
    ) -> Vec<(u64, RequestBody)> {
        let mut again = Vec::new();
        for (req, entry) in &mut self.entries {
            if entry.agent != agent {
                continue;
            }
            if let Some((body, sent)) = &mut entry.resend {
                *sent = now;
                again.push((*req, body.clone()));
            }
        }
        again.sort_by_key(|(req, _)| *req);
        again
    }

    /// Forgets requests whose job gave up waiting, and returns those due
    /// to be sent again (request number, identity, request), marked sent.
    pub(super) fn due(&mut self, now: Instant) -> Vec<(u64, usize, RequestBody)> {
        let timeout = self.timeout;
        self.entries
            .retain(|_, e| now.duration_since(e.since) < timeout);
        let mut due = Vec::new();
        for (req, entry) in &mut self.entries {
            if let Some((body, sent)) = &mut entry.resend {
                if now.duration_since(*sent) >= self.resend_after {
                    *sent = now;
                    due.push((*req, entry.agent, body.clone()));
                }
            }
        }
        due.sort_by_key(|(req, _, _)| *req);
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_idempotent_requests_are_sent_again_when_due() {
        let mut w = Waiting::new(Duration::from_secs(10), Duration::from_secs(600));
        let t0 = Instant::now();
        let (tx, rx) = std::sync::mpsc::channel();
        let chunk = RequestBody::FileChunk {
            saltenv: "base".into(),
            path: "a".into(),
            offset: 0,
            sha256: "x".into(),
        };
        w.insert(1, 0, tx.clone(), &chunk, t0);
        w.insert(
            2,
            0,
            tx,
            &RequestBody::Mine(halite_proto::mine::MineRequest::PillarFunctions),
            t0,
        );
        assert!(w.due(t0 + Duration::from_secs(5)).is_empty());
        let due = w.due(t0 + Duration::from_secs(10));
        assert_eq!(due, vec![(1, 0, chunk)]);
        // Marked sent: not due again at once.
        assert!(w.due(t0 + Duration::from_secs(11)).is_empty());
        // Another identity's answer under the same number is not taken.
        assert!(!w.answer(1, 1, ReplyBody::FileChunk(vec![])));
        assert!(w.answer(1, 0, ReplyBody::FileChunk(vec![7])));
        assert_eq!(rx.recv().ok(), Some(ReplyBody::FileChunk(vec![7])));
        assert!(!w.answer(1, 0, ReplyBody::FileChunk(vec![7])));
        // Past the timeout everything is forgotten.
        assert!(w.due(t0 + Duration::from_secs(600)).is_empty());
        assert!(!w.answer(2, 0, ReplyBody::Value(json!(null))));
    }

    #[test]
    fn idempotent_requests_outlive_the_link_and_are_asked_on_the_new_session() {
        let mut w = Waiting::new(Duration::from_secs(10), Duration::from_secs(600));
        let t0 = Instant::now();
        let (tx, rx) = std::sync::mpsc::channel();
        let bundle = RequestBody::Bundle {
            jid: "j1".into(),
            have: None,
            packed: true,
            kept_calls: true,
            synced: None,
        };
        w.insert(1, 0, tx.clone(), &bundle, t0);
        w.insert(2, 1, tx.clone(), &bundle, t0);
        w.insert(
            3,
            0,
            tx,
            &RequestBody::Mine(halite_proto::mine::MineRequest::PillarFunctions),
            t0,
        );
        w.link_ended();
        let t1 = t0 + Duration::from_secs(5);
        assert_eq!(w.for_new_session(0, t1), vec![(1, bundle.clone())]);
        // Marked sent on the new session: not due again at once.
        assert_eq!(
            w.due(t0 + Duration::from_secs(10)),
            vec![(2, 1, bundle.clone())]
        );
        assert!(w.answer(1, 0, ReplyBody::Value(json!(1))));
        assert_eq!(rx.try_recv().ok(), Some(ReplyBody::Value(json!(1))));
        // The request that may not be asked twice was answered "lost".
        assert!(!w.answer(3, 0, ReplyBody::Value(json!(1))));
    }

    #[test]
    fn request_channel_timeout_is_read_as_salt_writes_it() {
        let cfg = |v: Value| {
            json!({ "request_channel_timeout": v })
                .as_object()
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(resend_after(&Map::new()), Duration::from_secs(60));
        assert_eq!(resend_after(&cfg(json!(5))), Duration::from_secs(5));
        assert_eq!(resend_after(&cfg(json!("7"))), Duration::from_secs(7));
        assert_eq!(resend_after(&cfg(json!(0))), Duration::from_secs(1));
    }
}
