//! Low chunks: one state function call, as Salt's `state.show_lowstate` shows it.

use crate::{Map, Value};

/// One compiled state call (Salt's "low chunk").
///
/// Keys keep Salt's order: `state, name, __sls__, __env__,
/// [__sls_included_from__], __id__, <args in order>, order, fun`. The map is
/// kept as-is so that `state.show_low_sls` prints what Salt prints; the
/// accessors read the well-known keys.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LowChunk(pub Map);

/// Up to this many keys a chunk is searched in order: comparing a few short
/// keys costs less than hashing the one looked up.
const SCAN_LEN: usize = 16;

impl LowChunk {
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
    /// Any argument of the chunk.
    pub fn get(&self, key: &str) -> Option<&Value> {
        if self.0.len() <= SCAN_LEN {
            self.0
                .iter()
                .find(|(k, _)| k.as_str() == key)
                .map(|(_, v)| v)
        } else {
            self.0.get(key)
        }
    }
    /// Whether the chunk has `key`.
    pub fn contains(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
    /// The return key: `<state>_|-<id>_|-<name>_|-<fun>`.
    pub fn tag(&self) -> String {
        crate::ret::state_tag(self.state(), self.id(), self.name(), self.fun())
    }
}
