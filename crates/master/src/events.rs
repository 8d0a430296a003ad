//! The master's event bus: every event fired on the master (auth, key,
//! job new/ret, minion start, forwarded minion events) goes to every local
//! subscriber (`halite-run state.event`, a watching `halite` run, the
//! reactor, the API's stream) whose [`Interest`] matches its tag.
//!
//! A subscriber declares what it wants when it subscribes; an event is
//! built (its envelope, its `_stamp`, its value) and broadcast only when
//! some subscriber wants its tag (issue 25: a fleet highstate fires a
//! million progress events, most of which nobody watches). Subscribers
//! receive what any subscriber wanted and keep their own by
//! [`Subscription::wants`].

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use serde_json::{json, Map, Value};
use tokio::sync::broadcast;

/// One event: Salt's tag and data (with `_stamp`).
///
/// A minion's packed return (issue 25) rides as its bytes: `data` then
/// holds every other key, `"return"` is `null` there, and the value is
/// read on demand ([`BusEvent::data`] decodes it, [`BusEvent::wire`]
/// transcodes it), so a return nobody reads whole is never built.
#[derive(Debug, Clone)]
pub struct BusEvent {
    /// The event's tag.
    pub tag: String,
    /// The event's data (a packed return's value left out).
    data: Value,
    /// The msgpack bytes of `data["return"]` (checked at intake), held
    /// or to be read back.
    packed_return: Option<Packed>,
}

/// A packed return's bytes on an event: in memory, or, past the bus's
/// budget for a slow reader, read back from where they were committed
/// (crate::spill).
#[derive(Clone)]
enum Packed {
    /// The bytes, counted on the bus while the event lives.
    Held {
        bytes: Arc<Vec<u8>>,
        _count: HeldBytes,
    },
    /// Where the bytes are read back from: `jid`'s return from `id`.
    Spilled {
        jid: String,
        id: String,
        store: Arc<dyn ReturnStore>,
    },
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Packed::Held { bytes, .. } => write!(f, "Held({} bytes)", bytes.len()),
            Packed::Spilled { jid, id, .. } => write!(f, "Spilled({jid}, {id})"),
        }
    }
}

/// Where the bus reads back a return it did not keep in memory: the job
/// cache, which holds every return before its event fires (crate::spill).
pub trait ReturnStore: Send + Sync {
    /// The msgpack bytes of `id`'s return value for `jid`, as the minion
    /// sent them; why not.
    fn packed_return(&self, jid: &str, id: &str) -> Result<Vec<u8>, String>;
}

/// How the bus bounds the returns it holds for slow readers: past
/// `budget` bytes of returns not yet read by every subscriber, a return's
/// event carries where it is in `store`, not its bytes.
#[derive(Clone)]
pub struct SpillTo {
    /// Bytes of packed returns the bus holds at most.
    pub budget: u64,
    /// Where spilled returns are read back from.
    pub store: Arc<dyn ReturnStore>,
}

/// Bytes of packed returns on the bus, counted while their event lives
/// (fired, not yet read by every subscriber), for `master.stats`
/// (issue 25, session 19: what a slow watcher holds in the master).
#[derive(Debug)]
struct HeldBytes {
    bytes: u64,
    counts: Arc<BusCounts>,
}

impl HeldBytes {
    fn new(bytes: u64, counts: &Arc<BusCounts>) -> Self {
        let now = counts.held_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        counts.peak_held_bytes.fetch_max(now, Ordering::Relaxed);
        Self {
            bytes,
            counts: counts.clone(),
        }
    }
}

impl Clone for HeldBytes {
    fn clone(&self) -> Self {
        Self::new(self.bytes, &self.counts)
    }
}

impl Drop for HeldBytes {
    fn drop(&mut self) {
        self.counts
            .held_bytes
            .fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl BusEvent {
    /// An event with its data decoded.
    pub fn new(tag: String, data: Value) -> Self {
        Self {
            tag,
            data,
            packed_return: None,
        }
    }

    /// The event's data, a packed return decoded into it: what every
    /// reader of the whole event sees (the reactor's templates).
    pub fn data(&self) -> Cow<'_, Value> {
        let Some(bytes) = self.packed_bytes() else {
            return Cow::Borrowed(&self.data);
        };
        let mut data = self.data.clone();
        let value = halite_proto::packed::unpack(&bytes).unwrap_or_else(|e| {
            tracing::error!(tag = %self.tag, error = %e, "a packed return cannot be read");
            Value::String(format!("the master could not read this return: {e}"))
        });
        if let Value::Object(map) = &mut data {
            map.insert("return".into(), value);
        }
        Cow::Owned(data)
    }

    /// The packed return's bytes: held, or read back (a spilled return
    /// that cannot be read gives a string saying why, as the value).
    fn packed_bytes(&self) -> Option<Cow<'_, [u8]>> {
        match self.packed_return.as_ref()? {
            Packed::Held { bytes, .. } => Some(Cow::Borrowed(bytes.as_slice())),
            Packed::Spilled { jid, id, store } => {
                let bytes = store.packed_return(jid, id).unwrap_or_else(|e| {
                    tracing::error!(tag = %self.tag, error = %e, "a return cannot be read back from the job cache");
                    let why = Value::String(format!(
                        "the master could not read this return back from its job cache: {e}; see it with halite-run jobs.lookup_jid {jid}"
                    ));
                    halite_proto::packed::pack(&why).unwrap_or_default()
                });
                Some(Cow::Owned(bytes))
            }
        }
    }

    /// Whether the event's packed return is read back from the job cache
    /// rather than held (crate::spill).
    pub fn is_spilled(&self) -> bool {
        matches!(self.packed_return, Some(Packed::Spilled { .. }))
    }

    /// The event's data without a packed return's value (`"return"` is
    /// `null` when it is packed): for a look at its other keys that must
    /// not build a 1,000-state return.
    pub fn head(&self) -> &Value {
        &self.data
    }

    /// The event's data as it serializes (to a local client, in msgpack
    /// or JSON): a packed return is transcoded in place, never built.
    pub fn wire(&self) -> WireData<'_> {
        WireData(self)
    }

    /// Whether the event carries a packed return ([`BusEvent::write_msgpack`]
    /// then splices it).
    pub fn has_packed_return(&self) -> bool {
        self.packed_return.is_some()
    }

    /// Appends the event's data in msgpack to `out`: the very bytes
    /// `rmp_serde::to_vec_named(&self.wire())` gives, but a packed
    /// return's bytes are copied in as they are instead of transcoded
    /// (issue 25: msgpack is self-delimiting, and the bytes were checked
    /// at intake to be exactly one value). The watching CLI's stream
    /// writes a 1,000-state return per minion this way.
    pub fn write_msgpack(&self, out: &mut Vec<u8>) -> Result<(), rmp_serde::encode::Error> {
        let (Some(bytes), Value::Object(map)) = (self.packed_bytes(), &self.data) else {
            return rmp_serde::encode::write_named(out, &self.data);
        };
        // Room for the return's bytes at once, not by doublings.
        out.reserve(bytes.len() + 256);
        // In the order of the map, as the decoded event would serialize.
        let len = u32::try_from(map.len()).map_err(|_| {
            rmp_serde::encode::Error::Syntax("an event with more than 2^32 keys".into())
        })?;
        rmp::encode::write_map_len(out, len)?;
        for (key, value) in map {
            rmp::encode::write_str(out, key)?;
            if key == "return" {
                out.extend_from_slice(&bytes);
            } else {
                rmp_serde::encode::write_named(out, value)?;
            }
        }
        Ok(())
    }
}

/// [`BusEvent::wire`]: serializes as the event's whole data.
pub struct WireData<'a>(&'a BusEvent);

impl serde::Serialize for WireData<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let event = self.0;
        let (Some(bytes), Value::Object(map)) = (event.packed_bytes(), &event.data) else {
            return event.data.serialize(serializer);
        };
        // In the order of the map, as the decoded event would serialize.
        let mut out = serializer.serialize_map(Some(map.len()))?;
        for (key, value) in map {
            if key == "return" {
                out.serialize_entry(key, &halite_proto::packed::Packed(&bytes))?;
            } else {
                out.serialize_entry(key, value)?;
            }
        }
        out.end()
    }
}

/// What a subscriber wants from the bus, checked on the tag alone before
/// an event is built.
#[derive(Debug, Clone, PartialEq)]
pub enum Interest {
    /// Every event (`halite-run state.event` without a tag, the API's
    /// stream).
    All,
    /// Salt's `tagmatch`: a glob when it has `*?[`, else a tag prefix;
    /// empty matches everything ([`halite_proto::tags::tag_matches`]).
    TagMatch(String),
    /// Tags starting with one of these (a watching CLI: its job's
    /// `salt/job/<jid>/ret/`, and `prog/` when it draws progress).
    Prefixes(Vec<String>),
    /// Tags matching one of these fnmatch globs (the reactor's map).
    Globs(Vec<String>),
}

impl Interest {
    /// Whether an event tagged `tag` is wanted.
    pub fn matches(&self, tag: &str) -> bool {
        match self {
            Interest::All => true,
            Interest::TagMatch(pattern) => halite_proto::tags::tag_matches(pattern, tag),
            Interest::Prefixes(prefixes) => prefixes.iter().any(|p| tag.starts_with(p.as_str())),
            Interest::Globs(globs) => globs.iter().any(|g| halite_salt_rules::fnmatch(tag, g)),
        }
    }
}

/// An [`Interest`] as the bus checks it against every event fired
/// (issue 25: two million progress events in a fleet highstate): its
/// globs compiled once, not once per event, and each glob's literal
/// runs looked for before it is run. It says what [`Interest::matches`]
/// says of every tag (tested below).
#[derive(Debug)]
enum Matcher {
    All,
    Prefixes(Vec<String>),
    Globs(Vec<QuickGlob>),
}

impl Matcher {
    fn new(interest: &Interest) -> Self {
        match interest {
            Interest::All => Matcher::All,
            Interest::TagMatch(p) if p.is_empty() || p == "*" => Matcher::All,
            Interest::TagMatch(p) if p.contains(['*', '?', '[']) => {
                Matcher::Globs(vec![QuickGlob::new(p)])
            }
            Interest::TagMatch(p) => Matcher::Prefixes(vec![p.clone()]),
            Interest::Prefixes(prefixes) => Matcher::Prefixes(prefixes.clone()),
            Interest::Globs(globs) => {
                Matcher::Globs(globs.iter().map(|g| QuickGlob::new(g)).collect())
            }
        }
    }

    fn matches(&self, tag: &str) -> bool {
        match self {
            Matcher::All => true,
            Matcher::Prefixes(prefixes) => prefixes.iter().any(|p| tag.starts_with(p.as_str())),
            Matcher::Globs(globs) => globs.iter().any(|g| g.matches(tag)),
        }
    }
}

/// A compiled fnmatch glob and the literal runs every tag it matches
/// must contain: `salt/job/*/ret/*` (a watching CLI's, until its jid is
/// known) refuses a progress tag by its missing `/ret/`, without the
/// glob's walk over the tag.
#[derive(Debug)]
struct QuickGlob {
    glob: halite_salt_rules::Glob,
    literals: Vec<String>,
}

impl QuickGlob {
    fn new(pattern: &str) -> Self {
        // Before the first `[` (which may open a set), every character
        // but `*` and `?` is a literal of the glob, in order.
        let plain = pattern.split('[').next().unwrap_or_default();
        let literals = plain
            .split(['*', '?'])
            .filter(|run| !run.is_empty())
            .map(str::to_string)
            .collect();
        Self {
            glob: halite_salt_rules::Glob::new(pattern),
            literals,
        }
    }

    fn matches(&self, tag: &str) -> bool {
        self.literals.iter().all(|run| tag.contains(run.as_str())) && self.glob.matches(tag)
    }
}

/// The subscribers' interests, by subscription number.
type Interests = RwLock<Vec<(u64, Matcher)>>;

/// Events fired and events not built because nobody wanted them, for
/// `halite-run master.stats` (and the test that proves a fleet's
/// unwatched progress costs no envelope).
#[derive(Debug, Default)]
struct BusCounts {
    built: AtomicU64,
    not_built: AtomicU64,
    /// Bytes of packed returns in events not yet read by every subscriber.
    held_bytes: AtomicU64,
    /// The most `held_bytes` has been.
    peak_held_bytes: AtomicU64,
    /// Returns whose event carried where they are, not their bytes.
    spilled: AtomicU64,
}

/// Fires events to the subscribers that want them; an event nobody wants
/// is never built.
#[derive(Clone)]
pub struct EventBus {
    sender: broadcast::Sender<Arc<BusEvent>>,
    interests: Arc<Interests>,
    next_id: Arc<AtomicU64>,
    counts: Arc<BusCounts>,
    /// The bound on returns held for slow readers; `None`: unbounded
    /// (the bus of a unit test).
    spill: Option<SpillTo>,
}

/// Salt's `_stamp`: UTC ISO-8601 with microseconds.
pub fn stamp() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.6f+00:00")
        .to_string()
}

impl EventBus {
    /// A bus that buffers `capacity` events per slow subscriber.
    pub fn new(capacity: usize) -> Self {
        let (sender, _) = broadcast::channel(capacity);
        Self {
            sender,
            interests: Arc::new(RwLock::new(Vec::new())),
            next_id: Arc::new(AtomicU64::new(0)),
            counts: Arc::new(BusCounts::default()),
            spill: None,
        }
    }

    /// The same bus holding at most `spill.budget` bytes of packed
    /// returns for slow readers; the rest are read back from
    /// `spill.store` (crate::spill).
    pub fn with_spill(mut self, spill: SpillTo) -> Self {
        self.spill = Some(spill);
        self
    }

    /// Whether some subscriber wants an event tagged `tag`.
    pub fn wants(&self, tag: &str) -> bool {
        wanted(&self.read_interests(), tag)
    }

    fn read_interests(&self) -> std::sync::RwLockReadGuard<'_, Vec<(u64, Matcher)>> {
        self.interests
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A batch of events to fire (a minion's `Events` message): the
    /// subscribers' interests are read once for all of them. A
    /// subscription made or dropped meanwhile waits for the batch's end.
    pub fn batch(&self) -> Batch<'_> {
        Batch {
            bus: self,
            interests: self.read_interests(),
            not_built: 0,
        }
    }

    /// Fires `tag` with `data` (an object gets `_stamp` added) when some
    /// subscriber wants it.
    pub fn fire(&self, tag: &str, data: Value) {
        self.fire_with(tag, || data);
    }

    /// Fires `tag` with the data `build` gives, calling it only when some
    /// subscriber wants the tag: what an event costs to build (a minion's
    /// `_minion_event` envelope, a return's data) is spent only for an
    /// event someone reads.
    pub fn fire_with(&self, tag: &str, build: impl FnOnce() -> Value) {
        self.fire_built(tag, || Some(build()));
    }

    /// As [`EventBus::fire_with`], where building may fail (`None`: the
    /// event is dropped; `build` logs why): a minion's packed event data
    /// is decoded only here.
    pub fn fire_built(&self, tag: &str, build: impl FnOnce() -> Option<Value>) {
        self.fire_event(tag, || build().map(|data| (data, None)));
    }

    /// As [`EventBus::fire_with`] for a minion's return whose value is
    /// packed: `build` gives the data with `"return"` set to `null`, and
    /// the value's checked msgpack bytes, which go on the event as they
    /// are ([`BusEvent`]). `stored`: the return's (jid, minion id) when
    /// the job cache holds exactly these bytes, so that past the bus's
    /// budget the event may carry where they are instead ([`SpillTo`]);
    /// `None` (a masked return) keeps them held.
    pub fn fire_packed_return(
        &self,
        tag: &str,
        stored: Option<(&str, &str)>,
        build: impl FnOnce() -> (Value, Arc<Vec<u8>>),
    ) {
        self.fire_event(tag, || {
            let (data, bytes) = build();
            let len = bytes.len() as u64;
            let over = |spill: &SpillTo| {
                self.counts.held_bytes.load(Ordering::Relaxed) + len > spill.budget
            };
            let packed = match (&self.spill, stored) {
                (Some(spill), Some((jid, id))) if over(spill) => {
                    self.counts.spilled.fetch_add(1, Ordering::Relaxed);
                    Packed::Spilled {
                        jid: jid.to_string(),
                        id: id.to_string(),
                        store: spill.store.clone(),
                    }
                }
                _ => Packed::Held {
                    bytes,
                    _count: HeldBytes::new(len, &self.counts),
                },
            };
            Some((data, Some(packed)))
        });
    }

    fn fire_event(&self, tag: &str, build: impl FnOnce() -> Option<(Value, Option<Packed>)>) {
        if !self.wants(tag) {
            self.counts.not_built.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.fire_wanted(tag, build);
    }

    /// Builds and broadcasts an event some subscriber wants.
    fn fire_wanted(&self, tag: &str, build: impl FnOnce() -> Option<(Value, Option<Packed>)>) {
        let Some((data, packed_return)) = build() else {
            return;
        };
        self.counts.built.fetch_add(1, Ordering::Relaxed);
        let data = match data {
            Value::Object(mut map) => {
                map.insert("_stamp".into(), Value::String(stamp()));
                Value::Object(map)
            }
            other => {
                let mut map = Map::new();
                map.insert("data".into(), other);
                map.insert("_stamp".into(), Value::String(stamp()));
                Value::Object(map)
            }
        };
        tracing::debug!(tag, "event");
        let _ = self.sender.send(Arc::new(BusEvent {
            tag: tag.to_string(),
            data,
            packed_return,
        }));
    }

    /// A new subscription wanting `interest`, receiving the events fired
    /// from now on.
    pub fn subscribe(&self, interest: Interest) -> Subscription {
        // The receiver first: an event wanted from the moment the
        // interest is registered is already in its queue.
        let rx = self.sender.subscribe();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.interests
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((id, Matcher::new(&interest)));
        Subscription {
            rx,
            id,
            interest,
            interests: self.interests.clone(),
        }
    }

    /// The bus's counters as `master.stats` shows them: events built and
    /// broadcast, events not built because no subscriber wanted them,
    /// events not yet read by every subscriber (`queued`), the bytes of
    /// packed returns among them (now and at most), and the returns
    /// spilled past the budget (read back from the job cache).
    pub fn snapshot(&self) -> Value {
        json!({
            "built": self.counts.built.load(Ordering::Relaxed),
            "not_built": self.counts.not_built.load(Ordering::Relaxed),
            "queued": self.sender.len(),
            "held_bytes": self.counts.held_bytes.load(Ordering::Relaxed),
            "peak_held_bytes": self.counts.peak_held_bytes.load(Ordering::Relaxed),
            "spilled": self.counts.spilled.load(Ordering::Relaxed),
        })
    }
}

/// Whether one of `interests` wants `tag`.
fn wanted(interests: &[(u64, Matcher)], tag: &str) -> bool {
    interests.iter().any(|(_, m)| m.matches(tag))
}

/// Events fired together on the bus ([`EventBus::batch`]), with the
/// subscribers' interests read once: one lock and one pass over them per
/// batch of a minion's events, not per event. Fire nothing on the bus
/// itself while a batch is alive (its interests are locked for reading).
pub struct Batch<'b> {
    bus: &'b EventBus,
    interests: std::sync::RwLockReadGuard<'b, Vec<(u64, Matcher)>>,
    not_built: u64,
}

impl Batch<'_> {
    /// [`EventBus::fire_built`], against the interests read for the batch.
    pub fn fire_built(&mut self, tag: &str, build: impl FnOnce() -> Option<Value>) {
        if !wanted(&self.interests, tag) {
            self.not_built += 1;
            return;
        }
        self.bus
            .fire_wanted(tag, || build().map(|data| (data, None)));
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        self.bus
            .counts
            .not_built
            .fetch_add(self.not_built, Ordering::Relaxed);
    }
}

/// A subscriber's end of the bus: the events some subscriber wanted,
/// filtered by its own [`Interest`] with [`Subscription::wants`]. Its
/// interest is withdrawn when it is dropped.
pub struct Subscription {
    rx: broadcast::Receiver<Arc<BusEvent>>,
    id: u64,
    interest: Interest,
    interests: Arc<Interests>,
}

impl Subscription {
    /// Whether this subscriber wants an event tagged `tag` (the bus
    /// delivers what any subscriber wanted).
    pub fn wants(&self, tag: &str) -> bool {
        self.interest.matches(tag)
    }

    /// What this subscriber wants.
    pub fn interest(&self) -> &Interest {
        &self.interest
    }

    /// Replaces what this subscriber wants (the reactor after rereading
    /// its map).
    pub fn set_interest(&mut self, interest: Interest) {
        let mut interests = self
            .interests
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(slot) = interests.iter_mut().find(|(id, _)| *id == self.id) {
            slot.1 = Matcher::new(&interest);
        }
        self.interest = interest;
    }

    /// The next event fired on the bus (any subscriber's).
    pub async fn recv(&mut self) -> Result<Arc<BusEvent>, broadcast::error::RecvError> {
        self.rx.recv().await
    }

    /// The next event already waiting, without waiting.
    pub fn try_recv(&mut self) -> Result<Arc<BusEvent>, broadcast::error::TryRecvError> {
        self.rx.try_recv()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.interests
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|(id, _)| *id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_nobody_wants_is_not_built() {
        let bus = EventBus::new(8);
        // No subscriber: nothing is built.
        bus.fire_with("salt/job/1/prog/web1/0", || panic!("built for nobody"));
        let mut cli = bus.subscribe(Interest::Prefixes(vec!["salt/job/1/ret/".into()]));
        bus.fire_with("salt/job/1/prog/web1/0", || panic!("built for nobody"));
        bus.fire("salt/job/1/ret/web1", json!({"return": true}));
        let ev = cli.try_recv().expect("the return");
        assert_eq!(ev.tag, "salt/job/1/ret/web1");
        assert!(ev.data().get("_stamp").is_some());
        assert!(cli.try_recv().is_err());
        assert_eq!(bus.snapshot()["built"], 1);
        assert_eq!(bus.snapshot()["not_built"], 2);
        // A second subscriber wanting everything gets progress; the first
        // receives it too and leaves it by its own interest.
        let mut all = bus.subscribe(Interest::All);
        bus.fire_with("salt/job/1/prog/web1/1", || json!({"n": 1}));
        assert_eq!(all.try_recv().expect("progress").data()["n"], 1);
        let seen = cli.try_recv().expect("delivered to every receiver");
        assert!(!cli.wants(&seen.tag));
        // Dropped: its interest goes with it.
        drop(all);
        bus.fire_with("salt/job/1/prog/web1/2", || panic!("built for nobody"));
        // A changed interest counts from then on.
        cli.set_interest(Interest::Globs(vec!["salt/job/*/prog/*".into()]));
        bus.fire_with("salt/job/1/prog/web1/3", || json!({}));
        assert_eq!(
            cli.try_recv().expect("wanted now").tag,
            "salt/job/1/prog/web1/3"
        );
    }

    /// Returns kept by (jid, id), as the job cache keeps them.
    struct Stored(std::collections::HashMap<(String, String), Vec<u8>>);

    impl ReturnStore for Stored {
        fn packed_return(&self, jid: &str, id: &str) -> Result<Vec<u8>, String> {
            self.0
                .get(&(jid.to_string(), id.to_string()))
                .cloned()
                .ok_or_else(|| format!("no return of {id} for {jid}"))
        }
    }

    #[test]
    fn past_its_budget_the_bus_holds_where_a_return_is_not_its_bytes() {
        let value = |n: usize| json!({"state": "x".repeat(1000), "n": n});
        let packed = |n: usize| Arc::new(halite_proto::packed::pack(&value(n)).unwrap());
        let size = packed(0).len() as u64;
        let store = Stored(
            (0..4)
                .map(|n| (("1".to_string(), format!("web{n}")), packed(n).to_vec()))
                .collect(),
        );
        // Room for two returns.
        let bus = EventBus::new(64).with_spill(SpillTo {
            budget: 2 * size + size / 2,
            store: Arc::new(store),
        });
        let mut slow = bus.subscribe(Interest::All);
        let head = |n: usize| json!({"id": format!("web{n}"), "return": null});
        for n in 0..4 {
            let id = format!("web{n}");
            bus.fire_packed_return(&format!("salt/job/1/ret/{id}"), Some(("1", &id)), || {
                (head(n), packed(n))
            });
        }
        // A masked return (not as stored) is held whatever the budget.
        bus.fire_packed_return("salt/job/1/ret/web9", None, || (head(9), packed(9)));
        let stats = bus.snapshot();
        assert_eq!(stats["spilled"], 2, "{stats}");
        assert_eq!(stats["held_bytes"], 3 * size, "{stats}");
        // Every reader sees every return whole, held or read back.
        for n in [0, 1, 2, 3, 9] {
            let ev = slow.try_recv().unwrap();
            assert_eq!(ev.is_spilled(), n == 2 || n == 3, "web{n}");
            assert_eq!(ev.data()["return"], value(n), "web{n}");
            let mut out = Vec::new();
            ev.write_msgpack(&mut out).unwrap();
            let whole: Value = halite_proto::decode(&out).unwrap();
            assert_eq!(whole["return"], value(n));
        }
        // Read by every subscriber: nothing held.
        assert_eq!(bus.snapshot()["held_bytes"], 0);
        assert_eq!(bus.snapshot()["peak_held_bytes"], 3 * size);
    }

    #[test]
    fn a_packed_return_reads_and_serializes_as_the_decoded_one() {
        let bus = EventBus::new(8);
        let mut rx = bus.subscribe(Interest::All);
        let value =
            json!({"a": {"duration": 0.1 + 0.2, "comment": "Succès ✓", "n": [1, -2, null]}});
        let head = json!({"cmd": "_return", "id": "web1", "return": null, "success": true, "user": "root"});
        let mut whole = head.clone();
        whole["return"] = value.clone();
        let bytes = Arc::new(halite_proto::packed::pack(&value).unwrap());
        bus.fire("salt/job/1/ret/web1", whole);
        bus.fire_packed_return("salt/job/1/ret/web1", None, || (head, bytes));
        let plain = rx.try_recv().unwrap();
        let packed = rx.try_recv().unwrap();
        // `_stamp` differs by the microsecond: compare without it.
        let without_stamp = |v: &Value| {
            let mut v = v.clone();
            v.as_object_mut().unwrap().shift_remove("_stamp");
            v
        };
        assert_eq!(packed.head()["return"], Value::Null);
        assert_eq!(packed.head()["user"], "root");
        assert_eq!(without_stamp(&packed.data()), without_stamp(&plain.data()));
        let wire = |ev: &BusEvent| {
            let mut v: Value =
                halite_proto::decode(&halite_proto::encode(&ev.wire()).unwrap()).unwrap();
            v.as_object_mut().unwrap().shift_remove("_stamp");
            (halite_proto::encode(&v).unwrap(), v)
        };
        assert_eq!(wire(&packed), wire(&plain));
        assert_eq!(
            serde_json::to_string(&without_stamp(
                &serde_json::to_value(packed.wire()).unwrap()
            ))
            .unwrap(),
            serde_json::to_string(&without_stamp(&plain.data())).unwrap()
        );
    }

    #[test]
    fn interests_match_as_salt_matches_tags() {
        assert!(Interest::All.matches("anything"));
        assert!(Interest::TagMatch(String::new()).matches("anything"));
        assert!(Interest::TagMatch("salt/job".into()).matches("salt/job/1/new"));
        assert!(!Interest::TagMatch("salt/job".into()).matches("salt/auth"));
        assert!(Interest::TagMatch("salt/job/*/ret/*".into()).matches("salt/job/1/ret/web"));
        assert!(
            Interest::Globs(vec!["salt/minion/*/start".into()]).matches("salt/minion/web1/start")
        );
        assert!(!Interest::Globs(vec!["salt/minion/*/start".into()]).matches("minion_start"));
        assert!(!Interest::Prefixes(vec![]).matches("salt/auth"));
    }
    #[test]
    fn the_bus_matches_every_interest_as_the_interest_does() {
        let patterns = [
            "",
            "*",
            "salt",
            "salt/job",
            "salt/job/*/ret/*",
            "salt/job/*/prog/*",
            "salt/*web1*",
            "*/ret/*",
            "salt/job/?/ret/web1",
            "salt/job/[0-9]*/ret/*",
            "salt/job/[!0-9]*",
            "a[",
            "a]b*",
            "[*]x",
            "*[]]*",
            "salt/state_result/*/web1/*",
            "myco/deploy",
            "*deploy",
            "ü*",
            "salt/job/1/ret/",
        ];
        let tags = [
            "",
            "salt",
            "salt/auth",
            "salt/job/1/ret/web1",
            "salt/job/1/prog/web1/0",
            "salt/job/20260101000000000001/prog/web1/12",
            "salt/state_result/1/web1/a/b",
            "salt/job/x/ret/",
            "a[",
            "a]bc",
            "*x",
            "]",
            "myco/deploy",
            "ü/x",
            "salt/job/1/ret/",
            "salt/job/1/ret/web1/prog/x",
        ];
        let mut interests: Vec<Interest> = patterns
            .iter()
            .flat_map(|p| {
                [
                    Interest::TagMatch(p.to_string()),
                    Interest::Globs(vec![p.to_string()]),
                    Interest::Prefixes(vec![p.to_string()]),
                ]
            })
            .collect();
        interests.push(Interest::All);
        interests.push(Interest::Globs(vec![]));
        interests.push(Interest::Globs(
            patterns.iter().map(|p| p.to_string()).collect(),
        ));
        for interest in &interests {
            let matcher = Matcher::new(interest);
            for tag in tags {
                assert_eq!(
                    matcher.matches(tag),
                    interest.matches(tag),
                    "{interest:?} on {tag:?}"
                );
            }
        }
    }
}
