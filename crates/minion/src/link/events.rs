//! Events of job threads, batched per identity (issue 25): a 1,000-state
//! run fires 1,000 progress events, and one sealed message each cost the
//! master more than the run's compile. An identity's events wait here
//! until [`BATCH_EVENTS`] are queued, [`BATCH_WAIT`] has passed, or the
//! job's return is sent (which always follows its events), and go as one
//! [`MinionRequest::Events`]. The master fires them on its bus one by
//! one, exactly as single events. A master that predates batches (its
//! `Ready` does not say `batched_events`) gets one message per event.

use super::jobs::JobEvent;
use super::*;
use halite_proto::msg::MinionEvent;
use halite_proto::FrameError;

/// Events sent in one message at most.
const BATCH_EVENTS: usize = 128;

/// How long an event waits for others before its batch goes anyway: short
/// enough that live progress (the CLI's bars) still looks live.
const BATCH_WAIT: Duration = Duration::from_millis(50);

/// Events waiting to be sent, per identity, and when the oldest batch is due.
#[derive(Default)]
pub(super) struct PendingEvents {
    /// Identity -> its events, oldest first.
    queued: HashMap<usize, Vec<MinionEvent>>,
    /// When the batches go at the latest (`None`: nothing queued).
    due: Option<tokio::time::Instant>,
}

impl PendingEvents {
    /// When the queued events must be sent (`None`: nothing queued).
    pub(super) fn due(&self) -> Option<tokio::time::Instant> {
        self.due
    }
}

impl Link<'_> {
    /// Sends identity `idx`'s event now (a master without batches) or
    /// queues it for the next batch.
    pub(super) async fn queue_event(&mut self, idx: usize, event: JobEvent) {
        let packed_events = self.agents[idx].packed_events;
        let event = match event {
            // Encoded on the job's thread: sent as it is to a master that
            // reads packed events (the usual case), decoded for another.
            JobEvent::Packed(tag, bytes) if packed_events => MinionEvent {
                tag,
                data: Value::Null,
                packed: Some(serde_bytes::ByteBuf::from(bytes)),
            },
            JobEvent::Packed(tag, bytes) => match decode::<Value>(&bytes) {
                Ok(data) => self.event_for_master(idx, tag, data),
                Err(e) => {
                    tracing::warn!(%tag, error = %e, "cannot decode an event's data; dropped");
                    return;
                }
            },
            JobEvent::Value(tag, data) => self.event_for_master(idx, tag, data),
        };
        if !self.agents[idx].batched_events {
            let MinionEvent { tag, data, .. } = event;
            self.send_request(idx, &MinionRequest::Event { tag, data })
                .await;
            return;
        }
        let queued = self.events.queued.entry(idx).or_default();
        queued.push(event);
        if queued.len() >= BATCH_EVENTS {
            self.flush_events_of(idx).await;
        } else if self.events.due.is_none() {
            self.events.due = Some(tokio::time::Instant::now() + BATCH_WAIT);
        }
    }

    /// An event with its data as this identity's master reads it: packed
    /// when its `Ready` said `packed_events` (it decodes only the events
    /// some subscriber of its bus wants), as a value otherwise.
    fn event_for_master(&self, idx: usize, tag: String, data: Value) -> MinionEvent {
        if !self.agents[idx].packed_events {
            return MinionEvent::plain(tag, data);
        }
        match MinionEvent::packed(tag.clone(), &data) {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!(%tag, error = %e, "cannot encode an event's data; sent decoded");
                MinionEvent::plain(tag, data)
            }
        }
    }

    /// Sends identity `idx`'s queued events (before its job's return, so
    /// the master fires them first, as it did with single events).
    pub(super) async fn flush_events_of(&mut self, idx: usize) {
        if let Some(events) = self.events.queued.remove(&idx) {
            self.send_events(idx, events).await;
        }
        if self.events.queued.is_empty() {
            self.events.due = None;
        }
    }

    /// Sends every identity's queued events (their wait is over).
    pub(super) async fn flush_events(&mut self) {
        let queued = std::mem::take(&mut self.events.queued);
        self.events.due = None;
        for (idx, events) in queued {
            self.send_events(idx, events).await;
        }
    }

    /// Sends `events` in as few messages as fit a frame: a batch too large
    /// for one is split in halves; a single event too large is dropped and
    /// logged, as it was before batches.
    async fn send_events(&mut self, idx: usize, events: Vec<MinionEvent>) {
        let mut parts = vec![events];
        while let Some(mut part) = parts.pop() {
            let request = match part.len() {
                0 => continue,
                // A packed event goes as a batch of one (a single Event
                // carries decoded data).
                1 if part[0].packed.is_none() => match part.pop() {
                    Some(MinionEvent { tag, data, .. }) => MinionRequest::Event { tag, data },
                    None => continue,
                },
                _ => MinionRequest::Events { events: part },
            };
            match self.agents[idx].seal_request(&request) {
                Ok(Some(bytes)) => self.send(bytes).await,
                // No session any more: the events were for it.
                Ok(None) => return,
                Err(FrameError::TooLarge { .. }) => match request {
                    MinionRequest::Events { events } if events.len() == 1 => {
                        let tag = events.first().map(|e| e.tag.as_str()).unwrap_or_default();
                        tracing::warn!(%tag, "event too large for one message; dropped")
                    }
                    MinionRequest::Events { mut events } => {
                        let second = events.split_off(events.len() / 2);
                        // Popped first half first: the order is kept.
                        parts.push(second);
                        parts.push(events);
                    }
                    MinionRequest::Event { tag, .. } => {
                        tracing::warn!(%tag, "event too large for one message; dropped")
                    }
                    _ => {}
                },
                Err(e) => tracing::warn!(error = %e, "cannot send events to the master"),
            }
        }
    }
}
