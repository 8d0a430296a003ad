//! A job's return and its progress events encoded for the wire on the
//! job's own thread, straight from what the engine kept (issue 25).
//!
//! The speed tricks of the minion's encoding live here and nowhere else:
//! a state run's records are encoded from the engine's dicts, never
//! copied into one `Value` map per state first (at 1,000 states that
//! copy, its walk by the encoder and its drop were a tenth of a warm
//! swarm's CPU), written with `rmp`'s writers rather than through
//! serde ([`write_value`]), each state's return once for both its
//! progress event and the job's return ([`keep_rets`]), and buffers
//! start at about the size they end at instead of doubling their way
//! there. The bytes are the ones the `Value` path gives (tests below);
//! the master cannot tell the two apart.

use halite_modules::exec::state::StateOutput;
use halite_proto::msg::{JobReturn, MinionEvent, MinionRequest, PackedReturn};
use serde::Serialize;
use serde_json::Value;

/// Bytes a state's return takes in msgpack, about (the bench's test
/// states ~200, a `file.managed` ~300): a buffer for `n` states starts at
/// `n` times this and grows at most once or twice.
const BYTES_PER_STATE: usize = 320;

/// A progress event's buffer: one allocation for nearly every state's
/// return (`{"ret": {...}, "len": n}`), where growing from empty took six.
const PROGRESS_BYTES: usize = 512;

/// `value` in msgpack (struct fields by name, as everywhere on the wire)
/// into a buffer of `capacity` bytes to start with.
fn pack_with<T: Serialize + ?Sized>(value: &T, capacity: usize) -> Result<Vec<u8>, String> {
    let mut buf = Vec::with_capacity(capacity);
    rmp_serde::encode::write_named(&mut buf, value).map_err(|e| e.to_string())?;
    Ok(buf)
}

/// `value` in msgpack, the bytes `rmp_serde` writes for it (tests
/// compare them), written straight with `rmp`'s writers: a state's
/// return is encoded without serde's walk of it (issue 25: a highstate
/// encodes 1,000 of them per minion).
fn write_value(out: &mut Vec<u8>, value: &Value) {
    // Writing into a `Vec` cannot fail; lengths are cast as `rmp_serde`
    // casts them (a frame's limit keeps them far below `u32::MAX`).
    match value {
        Value::Null => {
            let _ = rmp::encode::write_nil(out);
        }
        Value::Bool(b) => {
            let _ = rmp::encode::write_bool(out, *b);
        }
        Value::Number(n) => halite_state::id_bytes::write_number(out, n),
        Value::String(s) => {
            let _ = rmp::encode::write_str(out, s);
        }
        Value::Array(items) => {
            let _ = rmp::encode::write_array_len(out, items.len() as u32);
            for item in items {
                write_value(out, item);
            }
        }
        Value::Object(map) => {
            let _ = rmp::encode::write_map_len(out, map.len() as u32);
            for (key, item) in map {
                let _ = rmp::encode::write_str(out, key);
                write_value(out, item);
            }
        }
    }
}

/// A state's return in msgpack, as `rmp_serde` writes it ([`write_value`]).
fn write_dict(out: &mut Vec<u8>, dict: &halite_state::SmallDict) {
    let _ = rmp::encode::write_map_len(out, dict.len() as u32);
    for (key, value) in dict.iter() {
        let _ = rmp::encode::write_str(out, key);
        write_value(out, value);
    }
}

/// A scratch buffer kept at most this large between events (a job thread
/// that fired one huge event does not hold its memory for good).
const SCRATCH_KEEP: usize = 64 * 1024;

/// Bytes a return's request and its seal add to the return's own:
/// the header's fields (jid, id, fun, its arguments) and the tag.
const RETURN_HEAD_BYTES: usize = 512;

/// The highest `__run_num__` whose encoded return is kept (a run of more
/// states encodes the rest again for its return, as before).
const KEPT_RUN_NUMS: u64 = 1 << 20;

thread_local! {
    /// A job thread's state return, encoded here before it is written
    /// into its progress event (its length heads the event's data) when
    /// no job keeps its returns on this thread: one buffer per thread,
    /// not one per event.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };

    /// The state returns the job running on this thread encoded for its
    /// progress events ([`keep_rets`]), kept for its return.
    static KEPT: std::cell::RefCell<Option<KeptRets>> = const { std::cell::RefCell::new(None) };
}

/// The state returns a job's progress events carried, each encoded once
/// (issue 25): a state's return is the same bytes in its event
/// (`{"ret": <ret>, "len": n}`) and in the job's return (`{<state key>:
/// <ret>, ...}`), so the return is written from these instead of
/// encoding every state's dict a second time.
///
/// A record is found by the state's `__run_num__` (unique in a run) and
/// used only if the state's return still has the keys count and
/// `start_time` it had when its event fired; a run number fired twice
/// (a state run nested in a state of the job, on the job's thread) is
/// never used. The engine fires a state's event once its return is
/// final, so a record that passes is that return's bytes (debug builds
/// check every record used against a fresh encoding).
#[derive(Default)]
struct KeptRets {
    /// The returns encoded, one after another.
    bytes: Vec<u8>,
    /// By run number: where its bytes are.
    slots: Vec<Slot>,
}

/// What [`KeptRets`] holds for one run number.
#[derive(Clone, Copy, Default)]
enum Slot {
    /// No event carried it.
    #[default]
    Empty,
    /// One event carried it.
    One(KeptRet),
    /// Two events carried it: encoded again for the return.
    Twice,
}

/// One kept state return: where its bytes are, and what it was.
#[derive(Clone, Copy)]
struct KeptRet {
    start: usize,
    end: usize,
    keys: usize,
    start_time: u64,
}

/// A state return's `__run_num__`, if it has one that is kept.
fn run_num(ret: &halite_state::SmallDict) -> Option<usize> {
    ret.get("__run_num__")
        .and_then(Value::as_u64)
        .filter(|n| *n < KEPT_RUN_NUMS)
        .and_then(|n| usize::try_from(n).ok())
}

/// A state return's `start_time` (what tells two runs of a state apart),
/// hashed with the workspace's `rustc-hash` (a dozen bytes: no need for more).
fn start_time(ret: &halite_state::SmallDict) -> u64 {
    use std::hash::BuildHasher as _;
    let time = ret.get("start_time").and_then(Value::as_str);
    time.map_or(0, |t| rustc_hash::FxBuildHasher.hash_one(t))
}

impl KeptRets {
    /// Encodes `ret` at the end of the kept bytes and records it; where
    /// its bytes are.
    fn keep(&mut self, ret: &halite_state::SmallDict, states: usize) -> std::ops::Range<usize> {
        if self.bytes.capacity() == 0 {
            // The run's size is known from its first event: one buffer
            // for all its returns, not a dozen doublings of it (at most
            // a frame's worth: the return must fit one).
            let bytes = states.saturating_mul(BYTES_PER_STATE);
            self.bytes.reserve(bytes.min(halite_proto::MAX_FRAME_BYTES));
            self.slots.reserve(states.min(KEPT_RUN_NUMS as usize));
        }
        let start = self.bytes.len();
        write_dict(&mut self.bytes, ret);
        let end = self.bytes.len();
        if let Some(n) = run_num(ret) {
            if self.slots.len() <= n {
                self.slots.resize(n + 1, Slot::Empty);
            }
            self.slots[n] = match self.slots[n] {
                Slot::Empty => Slot::One(KeptRet {
                    start,
                    end,
                    keys: ret.len(),
                    start_time: start_time(ret),
                }),
                _ => Slot::Twice,
            };
        }
        start..end
    }

    /// The kept bytes of `ret`, if its event carried them.
    fn get(&self, ret: &halite_state::SmallDict) -> Option<&[u8]> {
        let Slot::One(kept) = *self.slots.get(run_num(ret)?)? else {
            return None;
        };
        if kept.keys != ret.len() || kept.start_time != start_time(ret) {
            return None;
        }
        let bytes = self.bytes.get(kept.start..kept.end)?;
        if cfg!(debug_assertions) {
            let fresh = rmp_serde::to_vec_named(ret).ok();
            assert!(
                fresh.as_deref() == Some(bytes),
                "a state return changed after its progress event fired: {ret:?}"
            );
        }
        Some(bytes)
    }
}

/// While the job on this thread runs: what [`keep_rets`] started.
pub(crate) struct KeepRets {
    /// Whether this guard started the keeping (a nested one leaves it to
    /// the outer one).
    owner: bool,
}

/// Keeps, from now until the guard drops, the state returns this thread's
/// progress events encode, for [`pack_outcome`] to write the job's return
/// from ([`KeptRets`]). The job's thread calls it before the job runs.
pub(crate) fn keep_rets() -> KeepRets {
    KEPT.with_borrow_mut(|kept| {
        let owner = kept.is_none();
        if owner {
            *kept = Some(KeptRets::default());
        }
        KeepRets { owner }
    })
}

impl Drop for KeepRets {
    fn drop(&mut self) {
        if self.owner {
            KEPT.with_borrow_mut(|kept| *kept = None);
        }
    }
}

/// A state's progress event encoded as one [`MinionEvent`] of a batch,
/// its data (`{"ret": ret, "len": len}`) packed: the bytes
/// `rmp_serde` gives that `MinionEvent`, with the data as
/// [`halite_state::progress_data`]'s value encodes (tests below), written
/// once on the job's thread with the tag straight in them and taken as
/// they are into the batch (issue 25: a tag `String` per event, and the
/// batch encoded again on the link, copying every event). The state's
/// return is encoded once: kept for the job's return while a job keeps
/// them ([`keep_rets`]). `None`: its data cannot be encoded in one frame.
pub(crate) fn progress_event(
    tag: &str,
    ret: &halite_state::SmallDict,
    len: usize,
) -> Option<Vec<u8>> {
    let kept = KEPT.with_borrow_mut(|kept| {
        let kept = kept.as_mut()?;
        let range = kept.keep(ret, len);
        Some(write_progress(tag, &kept.bytes[range], len))
    });
    if let Some(event) = kept {
        return event;
    }
    SCRATCH.with_borrow_mut(|data| {
        data.clear();
        if data.capacity() == 0 {
            data.reserve(PROGRESS_BYTES);
        }
        write_dict(data, ret);
        let event = write_progress(tag, data, len);
        if data.capacity() > SCRATCH_KEEP {
            *data = Vec::new();
        }
        event
    })
}

/// The progress event of a state whose return encodes to `ret`: the
/// `MinionEvent` with the packed data `{"ret": ret, "len": len}` as
/// `rmp_serde` writes `{"ret": ret, "len": len}` (a struct of those two
/// fields by name); `None` when that data is larger than a frame.
fn write_progress(tag: &str, ret: &[u8], len: usize) -> Option<Vec<u8>> {
    // A map of two fields, "ret" and "len" (fixstr of 3: 4 bytes each),
    // `len` as its smallest unsigned integer (at most 9 bytes).
    let data_len = 1 + 4 + ret.len() + 4 + uint_bytes(len as u64);
    if data_len > halite_proto::MAX_FRAME_BYTES {
        return None;
    }
    let mut event = Vec::with_capacity(EVENT_HEAD_BYTES + tag.len() + data_len);
    write_event_head(&mut event, tag, data_len);
    let _ = rmp::encode::write_map_len(&mut event, 2);
    let _ = rmp::encode::write_str(&mut event, "ret");
    event.extend_from_slice(ret);
    let _ = rmp::encode::write_str(&mut event, "len");
    let _ = rmp::encode::write_uint(&mut event, len as u64);
    Some(event)
}

/// How many bytes `rmp::encode::write_uint` writes `n` in.
fn uint_bytes(n: u64) -> usize {
    match n {
        0..=0x7f => 1,
        0x80..=0xff => 2,
        0x100..=0xffff => 3,
        0x1_0000..=0xffff_ffff => 5,
        _ => 9,
    }
}

/// The bytes of a `MinionEvent` beside its tag and data, at most.
const EVENT_HEAD_BYTES: usize = 32;

/// `MinionEvent { tag, data: null, packed: Some(packed) }` as
/// `rmp_serde` writes it (a map of its three fields by name), up to the
/// `packed` bytes themselves (`packed_len` of them follow).
fn write_event_head(out: &mut Vec<u8>, tag: &str, packed_len: usize) {
    // Writing into a `Vec` cannot fail; the length is at most a frame's.
    let _ = rmp::encode::write_map_len(out, 3);
    let _ = rmp::encode::write_str(out, "tag");
    let _ = rmp::encode::write_str(out, tag);
    let _ = rmp::encode::write_str(out, "data");
    let _ = rmp::encode::write_nil(out);
    let _ = rmp::encode::write_str(out, "packed");
    let _ = rmp::encode::write_bin_len(out, packed_len as u32);
}

/// Any other event as a batch carries it: `event` encoded.
pub(crate) fn encode_event(event: &MinionEvent) -> Result<Vec<u8>, halite_proto::FrameError> {
    halite_proto::frame::encode_sized(event, EVENT_HEAD_BYTES + event.tag.len())
}

/// An event encoded as a [`MinionEvent`] ([`progress_event`],
/// [`encode_event`]), waiting for its batch.
#[derive(Debug, PartialEq)]
pub(crate) struct EncodedEvent {
    /// The `MinionEvent`'s msgpack.
    pub bytes: Vec<u8>,
    /// Whether its data is packed (a lone event with decoded data goes
    /// as a single `MinionRequest::Event`, as it always did).
    pub packed: bool,
}

/// `MinionRequest::Events`'s encoding up to its array of events: what it
/// is with no events, less the empty array that ends it (`None` if the
/// encoding ever stops ending so; a test pins it).
fn events_prefix() -> Option<&'static [u8]> {
    static PREFIX: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
    PREFIX
        .get_or_init(|| {
            let empty = rmp_serde::to_vec_named(&MinionRequest::Events { events: Vec::new() });
            let mut empty = empty.ok()?;
            // 0x90: an array of no items, the request's last byte.
            (empty.pop() == Some(0x90)).then_some(empty)
        })
        .as_deref()
}

/// The encoded `MinionRequest::Events { events }` of `events`, each
/// taken as it is (no event encoded again), in a buffer of its size and
/// the seal's tag: the bytes encoding the decoded events gives.
pub(crate) fn events_request(events: &[EncodedEvent]) -> Result<Vec<u8>, halite_proto::FrameError> {
    let Some(prefix) = events_prefix() else {
        // Never taken (a test checks the prefix): the slow, same bytes.
        let events = events
            .iter()
            .map(|e| halite_proto::decode::<MinionEvent>(&e.bytes))
            .collect::<Result<Vec<_>, _>>()?;
        return halite_proto::encode(&MinionRequest::Events { events });
    };
    let body: usize = events.iter().map(|e| e.bytes.len()).sum();
    let mut out =
        Vec::with_capacity(prefix.len() + 5 + body + halite_proto::crypto::SEAL_TAG_BYTES);
    out.extend_from_slice(prefix);
    let count = u32::try_from(events.len()).map_err(|_| halite_proto::FrameError::TooLarge {
        size: events.len(),
        max: u32::MAX as usize,
    })?;
    let _ = rmp::encode::write_array_len(&mut out, count);
    for event in events {
        out.extend_from_slice(&event.bytes);
    }
    Ok(out)
}

/// A packed return of at least this many bytes goes to a master that
/// reads one as a zstd frame (issue 25, session 24: the master stored
/// every return compressed at its own cost; Salt spreads such work over
/// the minions). A smaller one (a ping's, a few KB of grains) goes as it
/// is: its frame would save the master next to nothing.
pub(crate) const FRAME_RETURNS_FROM: usize = 4096;

/// `ret` with its value as a zstd frame, if it is large enough to be
/// worth one ([`FRAME_RETURNS_FROM`]); `None`: send it as it is (also
/// when zstd fails, logged: the plain bytes are as good to the master).
pub(crate) fn framed_return(ret: &PackedReturn) -> Option<PackedReturn> {
    if ret.zstd || ret.ret.len() < FRAME_RETURNS_FROM {
        return None;
    }
    ret.framed()
        .map_err(|e| tracing::warn!(jid = %ret.jid, error = %e, "cannot compress a return; sent as it is"))
        .ok()
}

/// The encoded request of a packed return, sized for it and its seal.
pub(crate) fn return_request<T: Serialize>(
    request: &T,
    ret_bytes: usize,
) -> Result<Vec<u8>, halite_proto::FrameError> {
    halite_proto::frame::encode_sized(request, ret_bytes + RETURN_HEAD_BYTES)
}

/// What a job's function gave, before it is encoded: a state run's
/// records as the engine kept them, or any other function's value.
pub(crate) enum Outcome {
    /// `state.*` run from the master's bundle (or a compile's error).
    State(StateOutput),
    /// Any other function's return.
    Value(Value),
}

impl Outcome {
    /// The return code Salt gives this return of `fun`.
    pub(crate) fn retcode(&self, fun: &str) -> i64 {
        let code = match self {
            Outcome::Value(v) => halite_modules::exec::retcode(fun, v),
            Outcome::State(output) => {
                // As `exec::retcode` does: a state run ignores (and
                // clears) a code its modules set on the way.
                halite_modules::exec::clear_retcode();
                output.retcode(fun)
            }
        };
        i64::from(code)
    }

    /// The return as Salt data (returners, `halite-call`): built only
    /// where a reader needs the value itself.
    pub(crate) fn into_value(self) -> Value {
        match self {
            Outcome::Value(v) => v,
            Outcome::State(output) => output.into_value(),
        }
    }
}

impl Serialize for Outcome {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Outcome::Value(v) => v.serialize(serializer),
            Outcome::State(output) => output.serialize(serializer),
        }
    }
}

/// A first guess of the encoded size of `outcome`.
fn size_hint(outcome: &Outcome) -> usize {
    match outcome {
        Outcome::State(StateOutput::Ran(running)) => 64 + running.len() * BYTES_PER_STATE,
        _ => 256,
    }
}

/// The header of a job's return (everything but its value).
pub(crate) struct ReturnMeta {
    /// As [`JobReturn::jid`].
    pub jid: String,
    /// As [`JobReturn::id`].
    pub id: String,
    /// As [`JobReturn::fun`].
    pub fun: String,
    /// As [`JobReturn::fun_args`].
    pub fun_args: Vec<Value>,
    /// As [`JobReturn::retcode`].
    pub retcode: i64,
}

/// The return of a job whose function gave `outcome`, encoded once: the
/// same bytes as [`PackedReturn::pack`] of its value. Encoding into
/// memory cannot fail in practice; if it ever does, the return says so
/// instead of being lost.
pub(crate) fn pack_outcome(meta: ReturnMeta, outcome: &Outcome) -> PackedReturn {
    let packed = match outcome {
        Outcome::State(StateOutput::Ran(running)) => {
            KEPT.with_borrow(|kept| pack_running(running, kept.as_ref()).map(|(b, _)| b))
        }
        _ => pack_with(outcome, size_hint(outcome)),
    };
    match packed {
        Ok(bytes) => PackedReturn {
            jid: meta.jid,
            id: meta.id,
            fun: meta.fun,
            fun_args: meta.fun_args,
            ret: serde_bytes::ByteBuf::from(bytes),
            retcode: meta.retcode,
            success: meta.retcode == 0,
            zstd: false,
        },
        Err(e) => not_encoded(meta.jid, meta.id, meta.fun, &e),
    }
}

/// A state run's records encoded as [`StateOutput`] serializes them (a
/// map of state key to state return), each state's return taken from
/// the bytes its progress event carried where it is `kept`, written
/// ([`write_dict`]) where it is not; and how many were taken.
fn pack_running(
    running: &halite_state::Running,
    kept: Option<&KeptRets>,
) -> Result<(Vec<u8>, usize), String> {
    let keys: usize = running.keys().map(|k| k.len() + 5).sum();
    let rets = match kept {
        Some(kept) if !kept.bytes.is_empty() => kept.bytes.len(),
        _ => running.len() * BYTES_PER_STATE,
    };
    let mut out = Vec::with_capacity(5 + keys + rets);
    let count = u32::try_from(running.len()).map_err(|e| e.to_string())?;
    let _ = rmp::encode::write_map_len(&mut out, count);
    let mut taken = 0;
    for (key, ret) in running {
        let _ = rmp::encode::write_str(&mut out, key);
        match kept.and_then(|kept| kept.get(ret)) {
            Some(bytes) => {
                out.extend_from_slice(bytes);
                taken += 1;
            }
            None => write_dict(&mut out, ret),
        }
    }
    Ok((out, taken))
}

/// `ret` with its value encoded (returns made without running a
/// function: `find_job`, a signalled or abandoned job...).
pub(crate) fn pack_return(ret: JobReturn) -> PackedReturn {
    let (jid, id, fun) = (ret.jid.clone(), ret.id.clone(), ret.fun.clone());
    PackedReturn::pack(ret).unwrap_or_else(|e| not_encoded(jid, id, fun, &e.to_string()))
}

/// The failed return sent in place of one that could not be encoded.
fn not_encoded(jid: String, id: String, fun: String, error: &str) -> PackedReturn {
    tracing::error!(%jid, %error, "cannot encode a job's return; an error is sent instead");
    let text = format!("The minion could not encode the return of {fun}: {error}");
    let failed = JobReturn {
        jid: jid.clone(),
        id: id.clone(),
        fun: fun.clone(),
        fun_args: Vec::new(),
        ret: Value::String(text),
        retcode: 1,
        success: false,
    };
    // A string always encodes; empty bytes (refused by the master,
    // which stores an error) only if it did not.
    PackedReturn::pack(failed).unwrap_or(PackedReturn {
        jid,
        id,
        fun,
        fun_args: Vec::new(),
        ret: Default::default(),
        retcode: 1,
        success: false,
        zstd: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use halite_proto::msg::MinionRequest;
    use halite_state::{Running, SmallDict};
    use serde_json::json;

    fn meta(fun: &str, retcode: i64) -> ReturnMeta {
        ReturnMeta {
            jid: "20261127004500000001".into(),
            id: "web-ü1".into(),
            fun: fun.into(),
            fun_args: vec![json!("bench"), json!({"test": false})],
            retcode,
        }
    }

    /// The engine's records of a run with every kind of value in them:
    /// null, booleans, integers at both ends, floats, unicode, nested
    /// changes, empty containers; and one failed state.
    fn records() -> Running {
        let mut running = Running::default();
        for i in 0..300u64 {
            let mut ret = SmallDict::new();
            ret.insert("name", Value::from(format!("/srv/out/wéb1/f{i}.conf ✓")));
            ret.insert("result", Value::Bool(i != 7));
            ret.insert(
                "comment",
                Value::from(format!("File {i} updated — 日本語 🚀")),
            );
            let changes = match i % 5 {
                0 => json!({}),
                1 => json!({"diff": "--- \n+++ \n@@ -1 +1 @@\n-a\n+b\n", "mode": "0644"}),
                2 => json!({"new": null, "old": [1, -2, 3.5, "x", {"deep": [[], {}]}]}),
                3 => json!({"big": u64::MAX, "small": i64::MIN, "zero": 0, "f": -0.000_125}),
                _ => json!({"nested": {"a": {"b": {"c": true, "d": false}}}, "e": 1e300}),
            };
            ret.insert("changes", changes);
            ret.insert("__sls__", Value::from("bench"));
            ret.insert("__run_num__", Value::from(i));
            ret.insert("start_time", Value::from("00:45:01.123456"));
            ret.insert("duration", json!(0.417 + i as f64));
            ret.insert("__id__", Value::from(format!("f{i}")));
            // A key the engine does not know (a module's own).
            ret.insert("warnings", json!(["ünïcode warning"]));
            let tag = format!("file_|-f{i}_|-/srv/out/wéb1/f{i}.conf_|-managed");
            running.insert(tag, ret);
        }
        running
    }

    /// What the minion sent before: the records made a `Value`, then
    /// [`PackedReturn::pack`] of the return holding it.
    fn old_path(meta: ReturnMeta, ret: Value) -> PackedReturn {
        PackedReturn::pack(JobReturn {
            jid: meta.jid,
            id: meta.id,
            fun: meta.fun,
            fun_args: meta.fun_args,
            ret,
            retcode: meta.retcode,
            success: meta.retcode == 0,
        })
        .unwrap()
    }

    /// A state run's return encoded from the engine's records is, byte
    /// for byte and on the whole request, what encoding its `Value` gave;
    /// and its return code is the one the `Value` gave.
    #[test]
    fn a_state_run_packs_from_its_records_as_its_value_did() {
        let value = StateOutput::Ran(records()).into_value();
        let code = i64::from(halite_modules::exec::retcode("state.apply", &value));
        assert_eq!(code, 2, "a failed state makes the run's code 2");
        let outcome = Outcome::State(StateOutput::Ran(records()));
        assert_eq!(outcome.retcode("state.apply"), code);
        let new = pack_outcome(meta("state.apply", code), &outcome);
        let old = old_path(meta("state.apply", code), value.clone());
        assert_eq!(new.ret.as_slice(), old.ret.as_slice());
        assert_eq!(new, old);
        let wire = |r: &PackedReturn| {
            halite_proto::encode(&MinionRequest::PackedReturn(r.clone())).unwrap()
        };
        assert_eq!(wire(&new), wire(&old));
        // And it reads back as the value, key order included.
        let back = new.unpack().unwrap().ret;
        assert_eq!(back, value);
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&back), keys(&value));
    }

    /// Everything else a job returns (compile errors, a state run that
    /// did not run, any function's value) packs as its value did.
    #[test]
    fn other_returns_pack_as_their_values_did() {
        let cases = [
            (
                "state.apply",
                Outcome::State(StateOutput::Data(json!([
                    "Rendering SLS 'base:x' failed: ü"
                ]))),
            ),
            (
                "state.apply",
                Outcome::State(StateOutput::Ran(Running::default())),
            ),
            ("test.ping", Outcome::Value(Value::Bool(true))),
            (
                "grains.items",
                Outcome::Value(json!({"id": "wéb", "n": u64::MAX, "f": 1.5})),
            ),
            ("cmd.run", Outcome::Value(json!({"result": false}))),
        ];
        for (fun, outcome) in cases {
            halite_modules::exec::clear_retcode();
            let code = outcome.retcode(fun);
            let new = pack_outcome(meta(fun, code), &outcome);
            let value = outcome.into_value();
            halite_modules::exec::clear_retcode();
            let old_code = i64::from(halite_modules::exec::retcode(fun, &value));
            assert_eq!(code, old_code, "{fun}");
            assert_eq!(new, old_path(meta(fun, old_code), value), "{fun}");
        }
    }

    /// What the minion sent for a progress event before: its data's
    /// value encoded, in a `MinionEvent` encoded again.
    fn old_progress_event(tag: &str, ret: &SmallDict, len: usize) -> MinionEvent {
        let data = rmp_serde::to_vec_named(&halite_state::progress_data(ret, len)).unwrap();
        MinionEvent {
            tag: tag.to_string(),
            data: Value::Null,
            packed: Some(serde_bytes::ByteBuf::from(data)),
        }
    }

    /// A state's return whose data encodes to about `size` bytes.
    fn ret_of(size: usize, i: u64) -> SmallDict {
        let mut ret = SmallDict::new();
        ret.insert("name", Value::from(format!("/srv/wéb/{i}")));
        ret.insert("result", Value::Bool(!i.is_multiple_of(3)));
        ret.insert("comment", Value::from("é".repeat(size / 2)));
        ret.insert("changes", json!({"n": u64::MAX, "f": -1.5, "none": null}));
        ret.insert("__run_num__", Value::from(i));
        ret
    }

    /// A progress event written around its data is, byte for byte, the
    /// `MinionEvent` the link encoded before, for data and tags on both
    /// sides of every msgpack length boundary; one past a frame's size
    /// is refused, and the thread's scratch buffer does not keep it.
    #[test]
    fn a_progress_event_is_written_as_its_event_was_encoded() {
        let long_tag = format!("salt/job/1/prog/{}/9", "w".repeat(300));
        for tag in [
            "s",
            "salt/job/20261127064000000001/prog/web-ü1/999",
            &long_tag,
        ] {
            for size in [0, 100, 200, 250, 300, 65_400, 65_600, 70_000] {
                let ret = ret_of(size, size as u64);
                let old = rmp_serde::to_vec_named(&old_progress_event(tag, &ret, 1000)).unwrap();
                assert_eq!(
                    progress_event(tag, &ret, 1000).unwrap(),
                    old,
                    "{tag} {size}"
                );
            }
        }
        let mut huge = SmallDict::new();
        huge.insert(
            "changes",
            Value::from("x".repeat(halite_proto::MAX_FRAME_BYTES)),
        );
        assert!(progress_event("t", &huge, 1).is_none());
        assert!(SCRATCH.with_borrow(|b| b.capacity()) <= SCRATCH_KEEP);
        // The next event on the thread is whole again.
        let ret = ret_of(10, 1);
        let old = rmp_serde::to_vec_named(&old_progress_event("t", &ret, 2)).unwrap();
        assert_eq!(progress_event("t", &ret, 2).unwrap(), old);
    }

    /// A batch of events taken as they were encoded is, byte for byte,
    /// the `MinionRequest::Events` the link encoded from the decoded
    /// events, at every count across msgpack's array length boundaries,
    /// with packed progress events and events of decoded data mixed.
    #[test]
    fn a_batch_is_the_events_request_encoded_whole() {
        assert!(events_prefix().is_some(), "the request ends with its array");
        for count in [1, 2, 15, 16, 17, 128, 65_535, 65_536, 65_537] {
            let mut encoded = Vec::with_capacity(count);
            let mut events = Vec::with_capacity(count);
            for i in 0..count {
                let tag = format!("salt/job/1/prog/wéb/{i}");
                if i % 7 == 3 {
                    let event = MinionEvent::plain(format!("custom/{i}"), json!({"k": [i, "ü"]}));
                    encoded.push(EncodedEvent {
                        bytes: encode_event(&event).unwrap(),
                        packed: false,
                    });
                    events.push(event);
                } else {
                    let ret = ret_of(if count > 200 { 0 } else { i * 40 }, i as u64);
                    encoded.push(EncodedEvent {
                        bytes: progress_event(&tag, &ret, count).unwrap(),
                        packed: true,
                    });
                    events.push(old_progress_event(&tag, &ret, count));
                }
            }
            let want = rmp_serde::to_vec_named(&MinionRequest::Events { events }).unwrap();
            let got = events_request(&encoded).unwrap();
            assert_eq!(got.len(), want.len(), "{count}");
            assert!(got == want, "{count} events differ");
            assert!(
                got.capacity() >= got.len() + halite_proto::crypto::SEAL_TAG_BYTES,
                "room for the tag"
            );
        }
    }

    /// The events and return of a real state run on this thread, the way
    /// a job thread makes them: inside [`keep_rets`] when `keep`.
    struct Run {
        /// Each progress event as sent, or a value event as fired.
        events: Vec<Fired>,
        /// The return packed from the records (and the kept bytes).
        packed: PackedReturn,
        /// How many states' returns came from the kept bytes.
        taken: usize,
        /// The run's records as the Salt data the old path encoded.
        value: Value,
    }

    /// A sink that encodes progress events as the minion's does and
    /// checks each against the event the link encoded before.
    #[derive(Default)]
    struct Encode(std::sync::Mutex<Vec<Fired>>);

    /// A progress event as encoded, or another event as fired.
    type Fired = Result<Vec<u8>, (String, Value)>;

    impl halite_modules::host::EventSink for Encode {
        fn fire(&self, tag: &str, data: &Value) {
            self.0.lock().unwrap().push(Err((tag.into(), data.clone())));
        }
        fn fire_progress(&self, tag: &str, ret: &SmallDict, len: usize) {
            let event = progress_event(tag, ret, len).expect("an event of one frame");
            let old = rmp_serde::to_vec_named(&old_progress_event(tag, ret, len)).unwrap();
            assert!(event == old, "the progress event of {tag} changed");
            self.0.lock().unwrap().push(Ok(event));
        }
    }

    /// A state tree with every path a state's return takes in the engine:
    /// changes, a failure, requisites met and failed, onfail, a listener
    /// added at the end, a parallel state, `fire_event` (true and a tag),
    /// unicode, a prereq.
    const TREE: &str = r#"
changed:
  test.succeed_with_changes: []
quiet:
  test.succeed_without_changes:
    - require:
      - test: changed
failing:
  test.fail_without_changes:
    - comment: "Failure — 日本語"
after_fail:
  test.succeed_without_changes:
    - require:
      - test: failing
on_fail:
  test.succeed_with_changes:
    - onfail:
      - test: failing
fired:
  test.succeed_without_changes:
    - fire_event: True
custom:
  test.nop:
    - fire_event: my/custom
listener:
  test.succeed_without_changes:
    - listen:
      - test: changed
para:
  test.succeed_with_changes:
    - parallel: True
pre:
  test.succeed_without_changes:
    - prereq:
      - test: prereqd
prereqd:
  test.succeed_with_changes: []
"ünï ✓":
  test.nop:
    - name: "ünï 日本"
"#;

    fn run(sls: &str, opts: Value, keep: bool) -> Run {
        let dir = tempfile::tempdir().unwrap();
        let salt = dir.path().join("salt");
        std::fs::create_dir_all(&salt).unwrap();
        std::fs::write(salt.join("bench.sls"), sls).unwrap();
        let mut all = json!({
            "id": "web-ü1",
            "file_client": "local",
            "file_roots": {"base": [salt]},
            "cachedir": dir.path().join("cache"),
            "jid": "20261127190000000001",
        });
        if let (Value::Object(all), Value::Object(opts)) = (&mut all, opts) {
            all.extend(opts);
        }
        let sink = Arc::new(Encode::default());
        let (host, errors) = halite_modules::local::local_host(all, sink.clone());
        assert!(errors.is_empty(), "{errors:?}");
        let args = halite_modules::exec::Args {
            positional: vec![json!("bench")],
            kwargs: Default::default(),
        };
        let kept = keep.then(keep_rets);
        let output = halite_modules::exec::state::StateExec::run(&host, "state.sls", &args)
            .unwrap()
            .unwrap();
        let outcome = Outcome::State(output);
        let code = outcome.retcode("state.sls");
        let packed = pack_outcome(meta("state.sls", code), &outcome);
        let taken = match &outcome {
            Outcome::State(StateOutput::Ran(running)) => {
                KEPT.with_borrow(|k| pack_running(running, k.as_ref()).unwrap().1)
            }
            _ => 0,
        };
        drop(kept);
        let events = std::mem::take(&mut *sink.0.lock().unwrap());
        Run {
            events,
            packed,
            taken,
            value: outcome.into_value(),
        }
    }

    use std::sync::Arc;

    /// A real state run's return written from the bytes its progress
    /// events carried is, byte for byte, what encoding its value gave;
    /// with progress events on (every state's bytes reused), off
    /// (`state_events: False`: none kept, all encoded), and outside a
    /// job's keeping; `fire_event` events go as the values they were.
    #[test]
    fn a_state_runs_return_from_its_events_bytes_is_its_values() {
        for (state_events, keep) in [(true, true), (false, true), (true, false)] {
            let run = run(TREE, json!({"state_events": state_events}), keep);
            let states = run.value.as_object().unwrap().len();
            assert!(states >= 13, "{states} states ran");
            let code = i64::from(halite_modules::exec::retcode("state.sls", &run.value));
            assert_eq!(code, 2, "a failed state");
            assert_eq!(
                run.packed,
                old_path(meta("state.sls", code), run.value.clone())
            );
            let progress = run.events.iter().filter(|e| e.is_ok()).count();
            let fired: Vec<&str> = run
                .events
                .iter()
                .filter_map(|e| e.as_ref().err().map(|(tag, _)| tag.as_str()))
                .collect();
            assert_eq!(
                fired,
                [
                    "salt/state_result/20261127190000000001/web-ü1/fired",
                    "salt/state_result/20261127190000000001/web-ü1/my/custom"
                ]
            );
            match (state_events, keep) {
                (true, true) => {
                    assert_eq!(progress, states, "one progress event a state");
                    assert_eq!(run.taken, states, "every state's bytes reused");
                }
                (true, false) => assert_eq!((progress, run.taken), (states, 0)),
                _ => assert_eq!((progress, run.taken), (0, 0), "nothing kept"),
            }
        }
    }

    /// A run with no states (an empty SLS) returns as its value did, kept
    /// or not.
    #[test]
    fn a_job_with_no_states_packs_as_its_value_did() {
        for keep in [true, false] {
            let run = run("{}\n", json!({}), keep);
            let code = i64::from(halite_modules::exec::retcode("state.sls", &run.value));
            assert_eq!(
                run.packed,
                old_path(meta("state.sls", code), run.value.clone())
            );
            assert_eq!((run.events.len(), run.taken), (0, 0));
        }
    }

    /// A kept return is used only for the state it was encoded from: not
    /// for another return with its run number (a nested run's, or one
    /// changed since), and not once two events carried its run number.
    #[test]
    fn a_kept_return_is_used_only_for_its_own_state() {
        let _kept = keep_rets();
        let mut a = ret_of(10, 4);
        a.insert("start_time", Value::from("19:00:00.000001"));
        progress_event("t", &a, 9).unwrap();
        let mut later = a.clone();
        later.insert("start_time", Value::from("19:00:00.000002"));
        let mut more = a.clone();
        more.insert("extra", Value::Bool(true));
        KEPT.with_borrow(|k| {
            let k = k.as_ref().unwrap();
            assert_eq!(k.get(&a).unwrap(), rmp_serde::to_vec_named(&a).unwrap());
            assert!(k.get(&later).is_none(), "another start time");
            assert!(k.get(&more).is_none(), "another number of keys");
        });
        progress_event("t", &a, 9).unwrap();
        KEPT.with_borrow(|k| assert!(k.as_ref().unwrap().get(&a).is_none(), "fired twice"));
        // A nested keeping leaves the outer one in place.
        drop(keep_rets());
        assert!(KEPT.with_borrow(Option::is_some));
    }

    /// A value written with `rmp`'s writers is, byte for byte, what
    /// `rmp_serde` gives it: every integer width and sign, floats,
    /// strings, arrays and maps on both sides of each length boundary,
    /// nesting, unicode.
    #[test]
    fn a_value_is_written_as_rmp_serde_writes_it() {
        let mut values = vec![
            json!(null),
            json!(true),
            json!(false),
            json!(-0.0),
            json!(1e-300),
        ];
        // Each unsigned and signed width's last value and the next one.
        for bits in [7, 8, 16, 32] {
            values.push(json!((1u64 << bits) - 1));
            values.push(json!(1u64 << bits));
        }
        values.push(json!(u64::MAX));
        for bits in [5, 7, 15, 31] {
            let edge = -(1i64 << bits);
            values.push(json!(edge));
            values.push(json!(edge - 1));
        }
        values.extend([json!(-1), json!(i64::MIN)]);
        for len in [0, 31, 32, 255, 256, 65_535, 65_536] {
            values.push(Value::from("é".repeat(len / 2) + &"x".repeat(len % 2)));
            values.push(Value::Array((0..len).map(|i| json!(i)).collect()));
            let map: serde_json::Map<String, Value> = (0..len)
                .map(|i| (format!("k{i}"), json!([i, {"ü": null}])))
                .collect();
            values.push(Value::Object(map));
        }
        values.push(json!({"a": [[[{"b": {"c": [1.5, -2, "日本", {}, []]}}]]]}));
        let mut dict = SmallDict::new();
        for (i, value) in values.iter().enumerate() {
            let mut out = Vec::new();
            write_value(&mut out, value);
            assert!(out == rmp_serde::to_vec_named(value).unwrap(), "value {i}");
            dict.insert(format!("key {i}"), value.clone());
        }
        let mut out = Vec::new();
        write_dict(&mut out, &dict);
        assert!(out == rmp_serde::to_vec_named(&dict).unwrap(), "the dict");
    }
}
