//! The text `file.accumulated` states charge during one run, for the
//! `file.managed` / `file.blockreplace` states after them (Salt keeps it
//! per State instance in its cachedir and deletes it when the run ends;
//! here it lives in the run's executor and goes with it).

use std::sync::Mutex;

use indexmap::IndexMap;

use crate::value::Value;

/// One accumulator: its texts in the order charged and the IDs/names of
/// the states its `require_in`/`watch_in` point at.
#[derive(Debug, Default, Clone)]
pub struct Accumulator {
    /// The charged texts (strings, or dicts as Salt allows), without repeats.
    pub texts: Vec<Value>,
    /// The requisite targets of the `file.accumulated` states that charged it.
    pub deps: Vec<Value>,
}

/// Every accumulator of a run, by target filename then accumulator name,
/// in the order they were first charged.
#[derive(Debug, Default)]
pub struct Accumulators {
    files: Mutex<IndexMap<String, IndexMap<String, Accumulator>>>,
}

impl Accumulators {
    /// Adds `texts` (skipping those already there) and `deps` to the
    /// accumulator `name` of `filename`; true when some text was new
    /// (Salt's "was charged by text" comment).
    pub fn charge(&self, filename: &str, name: &str, texts: &[Value], deps: &[Value]) -> bool {
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        let acc = files
            .entry(filename.to_string())
            .or_default()
            .entry(name.to_string())
            .or_default();
        acc.deps.extend(deps.iter().cloned());
        let mut charged = false;
        for t in texts {
            if !acc.texts.contains(t) {
                acc.texts.push(t.clone());
                charged = true;
            }
        }
        charged
    }

    /// The accumulators charged for `filename`, by name (empty when none).
    pub fn for_file(&self, filename: &str) -> IndexMap<String, Accumulator> {
        let files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        files.get(filename).cloned().unwrap_or_default()
    }
}
