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
use crate::packing::{encode_event, events_request, EncodedEvent};
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
    /// Identity -> its events, oldest first, each encoded as its batch
    /// carries it.
    queued: HashMap<usize, Vec<EncodedEvent>>,
    /// When the batches go at the latest (`None`: nothing queued).
    due: Option<tokio::time::Instant>,
}

impl PendingEvents {
    /// When the queued events must be sent (`None`: nothing queued).
    pub(super) fn due(&self) -> Option<tokio::time::Instant> {
        self.due
    }
}

/// The tag and data of an encoded `MinionEvent` (a progress event going
/// to a master that reads them decoded).
fn decoded(bytes: &[u8]) -> Result<(String, Value), FrameError> {
    let event = decode::<MinionEvent>(bytes)?;
    let tag = event.tag.clone();
    Ok((tag, event.into_data()?))
}

impl Link<'_> {
    /// Sends identity `idx`'s event now (a master without batches) or
    /// queues it for the next batch.
    pub(super) async fn queue_event(&mut self, idx: usize, event: JobEvent) {
        let agent = &self.agents[idx];
        let (batched, packed_events) = (agent.batched_events, agent.packed_events);
        let (tag, data) = match event {
            // Encoded on the job's thread as the batch carries it: queued
            // as it is for a master that reads packed events (the usual
            // case), decoded for another.
            JobEvent::Progress(bytes) if batched && packed_events => {
                self.queue_encoded(
                    idx,
                    EncodedEvent {
                        bytes,
                        packed: true,
                    },
                )
                .await;
                return;
            }
            JobEvent::Progress(bytes) => match decoded(&bytes) {
                Ok(event) => event,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot decode an event's data; dropped");
                    return;
                }
            },
            JobEvent::Value(tag, data) => (tag, data),
        };
        if !batched {
            self.send_request(idx, &MinionRequest::Event { tag, data })
                .await;
            return;
        }
        let event = self.event_for_master(idx, tag, data);
        match encode_event(&event) {
            Ok(bytes) => {
                let packed = event.packed.is_some();
                self.queue_encoded(idx, EncodedEvent { bytes, packed })
                    .await
            }
            Err(e) => {
                tracing::warn!(tag = %event.tag, error = %e, "cannot encode an event; dropped")
            }
        }
    }

    /// Queues `event` in identity `idx`'s batch, sent when it is full.
    async fn queue_encoded(&mut self, idx: usize, event: EncodedEvent) {
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
    async fn send_events(&mut self, idx: usize, events: Vec<EncodedEvent>) {
        let mut parts = vec![events];
        while let Some(mut part) = parts.pop() {
            let request = match part.as_slice() {
                [] => continue,
                // An event whose data is not packed goes alone as a
                // single Event (it carries decoded data).
                [one] if !one.packed => decoded(&one.bytes)
                    .and_then(|(tag, data)| encode(&MinionRequest::Event { tag, data })),
                _ => events_request(&part),
            };
            match request.and_then(|plain| self.agents[idx].seal_plain(plain)) {
                Ok(Some(bytes)) => self.send(bytes).await,
                // No session any more: the events were for it.
                Ok(None) => return,
                Err(FrameError::TooLarge { .. }) if part.len() > 1 => {
                    let second = part.split_off(part.len() / 2);
                    // Popped first half first: the order is kept.
                    parts.push(second);
                    parts.push(part);
                }
                Err(FrameError::TooLarge { .. }) => {
                    let tag = part
                        .first()
                        .and_then(|e| decode::<MinionEvent>(&e.bytes).ok())
                        .map(|e| e.tag)
                        .unwrap_or_default();
                    tracing::warn!(%tag, "event too large for one message; dropped")
                }
                Err(e) => tracing::warn!(error = %e, "cannot send events to the master"),
            }
        }
    }
}
