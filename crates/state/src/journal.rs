//! [`ChunkJournal`]: what ordering wrote into a graph's chunks, kept so it
//! can be taken back.
//!
//! Ordering ([`crate::graph::Graph::order`]) writes into the chunks as
//! Salt's does: `order` made a number, `name_order` folded into it,
//! `__prereq__` / `__prerequiring__` set. The master orders a minion's
//! chunks only to find the requisite errors, and must then send them as
//! compiled, unordered (the minion orders them itself). Copying every
//! chunk before ordering was an eighth of the master's cold compile (issue
//! 25, session 17); the journal instead notes the few keys ordering
//! touches and puts each back, so the chunks themselves are moved into
//! the bundle. This is the one place that trick lives.

use crate::chunk::LowChunk;
use crate::value::Value;

/// What a chunk's key held before ordering wrote it.
#[derive(Debug)]
enum Prior {
    /// The key was absent: it was added at the end.
    Absent,
    /// The key held this value, in the place it still has.
    Held(Value),
    /// The key held this value at this index, and was removed.
    RemovedAt(usize, Value),
}

/// The writes ordering made into a graph's chunks, in the order made.
#[derive(Debug, Default)]
pub struct ChunkJournal {
    writes: Vec<(usize, &'static str, Prior)>,
}

impl ChunkJournal {
    /// Sets `key` of chunk `ci` to `value`, noting what it held.
    pub fn set(&mut self, chunks: &mut [LowChunk], ci: usize, key: &'static str, value: Value) {
        let prior = match chunks[ci].insert(key, value) {
            Some(old) => Prior::Held(old),
            None => Prior::Absent,
        };
        self.writes.push((ci, key, prior));
    }

    /// Removes `key` of chunk `ci`, noting where it was; returns its value
    /// (a copy: the original is kept to be put back).
    pub fn remove(
        &mut self,
        chunks: &mut [LowChunk],
        ci: usize,
        key: &'static str,
    ) -> Option<Value> {
        let (at, value) = chunks[ci].shift_remove_full(key)?;
        self.writes
            .push((ci, key, Prior::RemovedAt(at, value.clone())));
        Some(value)
    }

    /// Takes every write back, last first: each chunk is again what it
    /// was before ordering, keys in the same order.
    pub fn undo(self, chunks: &mut [LowChunk]) {
        for (ci, key, prior) in self.writes.into_iter().rev() {
            let chunk = &mut chunks[ci];
            match prior {
                Prior::Absent => {
                    chunk.shift_remove(key);
                }
                Prior::Held(value) => {
                    chunk.insert(key, value);
                }
                Prior::RemovedAt(at, value) => chunk.insert_at(at, key, value),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::compile::compile_high_data;
    use crate::graph::Graph;
    use crate::origins::StringOrigins;
    use crate::value::{Map, Value};
    use serde_json::json;

    fn graph(high: &Value) -> Graph {
        let Value::Object(high) = high.clone() else {
            unreachable!("test high data is a mapping")
        };
        compile_high_data(high, &StringOrigins::new())
    }

    /// The chunks as they travel: JSON text, so key order counts.
    fn text(chunks: &[crate::LowChunk]) -> String {
        serde_json::to_string(chunks).unwrap_or_default()
    }

    fn state(args: Value) -> Value {
        let mut m = Map::new();
        m.insert("__sls__".into(), json!("s"));
        m.insert("__env__".into(), json!("base"));
        m.insert("test".into(), json!([args, "nop"]));
        Value::Object(m)
    }

    /// Everything ordering writes into the chunks (`order` made a number,
    /// from `first`, `last`, a negative number or none; `name_order` of
    /// `names` folded in and removed; `__prereq__` / `__prerequiring__`),
    /// taken back: the chunks [`Graph::check_order`] gives are the
    /// compiled ones byte for byte, keys in their order, and its errors
    /// are [`Graph::order`]'s, with and without errors in the tree.
    #[test]
    fn check_order_gives_the_chunks_as_compiled_and_the_errors_of_order() {
        let mut high = json!({
            "many": state(json!({"names": ["x", "y", "z"], "order": "last"})),
            "before": state(json!({"prereq": [{"test": "many"}]})),
            "negative": state(json!({"order": -1})),
            "early": state(json!({"order": "first", "require": [{"test": "negative"}]})),
            "numbered": state(json!({"order": 5, "watch": [{"test": "early"}]})),
            "plain": state(json!({"name": "p", "onchanges": [{"test": "numbered"}]})),
        });
        for errors in [false, true] {
            if errors {
                let Value::Object(m) = &mut high else {
                    unreachable!("a mapping")
                };
                m.insert(
                    "lost".into(),
                    state(json!({"require": [{"test": "nowhere"}]})),
                );
                m.insert("ping".into(), state(json!({"require": [{"test": "pong"}]})));
                m.insert("pong".into(), state(json!({"require": [{"test": "ping"}]})));
            }
            let compiled = graph(&high);
            let before = text(&compiled.chunks);
            let mut ordered = graph(&high);
            let order = ordered.order(&[]);
            // Ordering does write into the chunks (else this proves nothing).
            assert_ne!(text(&ordered.chunks), before);
            assert!(ordered.chunks.iter().any(|c| c.contains("__prereq__")));
            let (chunks, checked) = compiled.check_order(&[]);
            assert_eq!(text(&chunks), before, "errors in the tree: {errors}");
            assert_eq!(checked, order.map(|_| ()));
            assert_eq!(checked.is_err(), errors, "{checked:?}");
        }
    }
}
