//! A job's return and its progress events encoded for the wire on the
//! job's own thread, straight from what the engine kept (issue 25).
//!
//! The speed tricks of the minion's encoding live here and nowhere else:
//! a state run's records are encoded from the engine's dicts, never
//! copied into one `Value` map per state first (at 1,000 states that
//! copy, its walk by the encoder and its drop were a tenth of a warm
//! swarm's CPU), and buffers start at about the size they end at instead
//! of doubling their way there. The bytes are the ones the `Value` path
//! gives (tests below); the master cannot tell the two apart.

use halite_modules::exec::state::StateOutput;
use halite_proto::msg::{JobReturn, PackedReturn};
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

/// A progress event's data, `{"ret": ret, "len": len}`, serialized as
/// [`halite_state::progress_data`]'s value is (a test checks the bytes).
#[derive(Serialize)]
struct Progress<'a> {
    ret: &'a halite_state::SmallDict,
    len: usize,
}

/// The msgpack of a progress event's data, as the link would have
/// encoded its `Value` (`None`: it cannot be encoded in one frame).
pub(crate) fn packed_progress(ret: &halite_state::SmallDict, len: usize) -> Option<Vec<u8>> {
    let bytes = pack_with(&Progress { ret, len }, PROGRESS_BYTES).ok()?;
    (bytes.len() <= halite_proto::MAX_FRAME_BYTES).then_some(bytes)
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
    match pack_with(outcome, size_hint(outcome)) {
        Ok(bytes) => PackedReturn {
            jid: meta.jid,
            id: meta.id,
            fun: meta.fun,
            fun_args: meta.fun_args,
            ret: serde_bytes::ByteBuf::from(bytes),
            retcode: meta.retcode,
            success: meta.retcode == 0,
        },
        Err(e) => not_encoded(meta.jid, meta.id, meta.fun, &e),
    }
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

    /// A progress event's buffer sized up front gives the bytes growing
    /// from empty gave, and an event past a frame's size is refused.
    #[test]
    fn a_progress_event_packs_as_its_value_does_at_any_size() {
        let mut ret = SmallDict::new();
        ret.insert("comment", Value::from("é".repeat(300)));
        ret.insert("changes", json!({"diff": "x".repeat(5000)}));
        let want = rmp_serde::to_vec_named(&halite_state::progress_data(&ret, 3)).unwrap();
        assert_eq!(packed_progress(&ret, 3).unwrap(), want);
        let mut huge = SmallDict::new();
        huge.insert(
            "changes",
            Value::from("x".repeat(halite_proto::MAX_FRAME_BYTES)),
        );
        assert!(packed_progress(&huge, 1).is_none());
    }
}
