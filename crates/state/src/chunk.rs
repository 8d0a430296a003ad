//! Low chunks: one state function call, as Salt's `state.show_lowstate` shows it.

use std::ops::{Deref, DerefMut};

use serde::{Deserialize, Serialize};

use crate::dict::SmallDict;
use crate::value::{Map, Value};

/// One compiled state call (Salt's "low chunk").
///
/// Keys keep Salt's order: `state, name, __sls__, __env__,
/// [__sls_included_from__], __id__, <args in order>, order, fun`, so that
/// `state.show_low_sls` prints what Salt prints. It is a [`SmallDict`]
/// (which it dereferences to, for the arguments) with accessors for the
/// well-known keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LowChunk(SmallDict);

impl LowChunk {
    /// An empty chunk.
    pub fn new() -> Self {
        Self::default()
    }
    /// An empty chunk with room for `n` keys.
    pub fn with_capacity(n: usize) -> Self {
        LowChunk(SmallDict::with_capacity(n))
    }
    fn str_key(&self, key: &str) -> &str {
        self.get(key).and_then(Value::as_str).unwrap_or("")
    }
    /// The state module, e.g. `file`.
    pub fn state(&self) -> &str {
        self.str_key("state")
    }
    /// The function, e.g. `managed`.
    pub fn fun(&self) -> &str {
        self.str_key("fun")
    }
    /// The `name` argument (defaults to the ID at compile time).
    pub fn name(&self) -> &str {
        self.str_key("name")
    }
    /// The state ID.
    pub fn id(&self) -> &str {
        self.str_key("__id__")
    }
    /// The SLS the state was declared in.
    pub fn sls(&self) -> &str {
        self.str_key("__sls__")
    }
    /// The saltenv (`__env__`).
    pub fn env(&self) -> &str {
        self.str_key("__env__")
    }
    /// Whether the chunk has `key`.
    pub fn contains(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }
    /// The return key: `<state>_|-<id>_|-<name>_|-<fun>`.
    pub fn tag(&self) -> String {
        crate::ret::state_tag(self.state(), self.id(), self.name(), self.fun())
    }
}

impl Deref for LowChunk {
    type Target = SmallDict;
    fn deref(&self) -> &SmallDict {
        &self.0
    }
}

impl DerefMut for LowChunk {
    fn deref_mut(&mut self) -> &mut SmallDict {
        &mut self.0
    }
}

impl From<Map> for LowChunk {
    fn from(map: Map) -> Self {
        LowChunk(SmallDict::from(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_well_known_keys_and_round_trips() {
        let text = r#"{"state":"file","name":"/x","__sls__":"a","__env__":"base","__id__":"x","mode":"0644","fun":"managed"}"#;
        let c: LowChunk = serde_json::from_str(text).expect("a chunk");
        assert_eq!(
            (c.state(), c.fun(), c.name(), c.id(), c.sls(), c.env()),
            ("file", "managed", "/x", "x", "a", "base")
        );
        assert_eq!(c.tag(), "file_|-x_|-/x_|-managed");
        assert_eq!(serde_json::to_string(&c).expect("json"), text);
        assert_eq!(LowChunk::from(c.to_map()), c);
    }
}
