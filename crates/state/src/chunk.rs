//! Low chunks: one state function call, as Salt's `state.show_lowstate` shows it.

use std::borrow::Cow;
use std::ops::{Deref, DerefMut};

use serde::{Deserialize, Serialize};

use crate::dict::SmallDict;
use crate::value::{Map, Value};

/// The chunk key saying its strings came from a `yamlex` SLS. Salt's
/// yamlex loader makes every string an `SLSString`, whose `str()` is its
/// double-quoted YAML dump, so they print quoted wherever Salt formats
/// them: the state tag (`test_|-"greet"_|-"greet"_|-nop`), the requisite
/// messages. Its value says which: `true` every string of the chunk (its
/// ID, name and requisite values), `"name"` only its name (a listener's
/// `__id__`, `listener_"lst"`, is a plain string that already holds the
/// quotes). The engine consumes it; it is never a state argument.
pub const YAMLEX_STRINGS: &str = "__yamlex__";

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
    /// The return key: `<state>_|-<id>_|-<name>_|-<fun>`, the ID and
    /// name as Salt's `str()` prints them ([`LowChunk::shown_id`]).
    pub fn tag(&self) -> String {
        if self.contains(YAMLEX_STRINGS) {
            return crate::ret::state_tag(
                self.state(),
                &self.shown_id(),
                &self.shown_name(),
                self.fun(),
            );
        }
        // The common case: one lookup of the mark, no copies.
        match self.get("name") {
            Some(Value::String(name)) => {
                crate::ret::state_tag(self.state(), self.id(), name, self.fun())
            }
            Some(v) => crate::ret::state_tag(
                self.state(),
                self.id(),
                &crate::requisite::py_str(v),
                self.fun(),
            ),
            None => crate::ret::state_tag(self.state(), self.id(), "", self.fun()),
        }
    }
    /// Whether every string of this chunk is a yamlex string ([`YAMLEX_STRINGS`]).
    pub fn yamlex_strings(&self) -> bool {
        matches!(self.get(YAMLEX_STRINGS), Some(Value::Bool(true)))
    }
    /// `text`, a string of this chunk's data (a requisite's value), as
    /// Salt's `str()` prints it: quoted when the chunk's strings are
    /// yamlex strings.
    pub fn shown<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.yamlex_strings() {
            Cow::Owned(halite_salt_rules::pyyaml::yamlex_str(text))
        } else {
            Cow::Borrowed(text)
        }
    }
    /// The ID as Salt's `str()` prints it (see [`LowChunk::shown`]).
    pub fn shown_id(&self) -> Cow<'_, str> {
        self.shown(self.id())
    }
    /// The name as Salt's `str()` prints it: a string name quoted when it
    /// is a yamlex string, any other value as Python prints it.
    pub fn shown_name(&self) -> Cow<'_, str> {
        match self.get("name") {
            Some(Value::String(name)) => match self.get(YAMLEX_STRINGS) {
                Some(Value::Bool(true)) => Cow::Owned(halite_salt_rules::pyyaml::yamlex_str(name)),
                Some(Value::String(which)) if which == "name" => {
                    Cow::Owned(halite_salt_rules::pyyaml::yamlex_str(name))
                }
                _ => Cow::Borrowed(name.as_str()),
            },
            Some(v) => Cow::Owned(crate::requisite::py_str(v)),
            None => Cow::Borrowed(""),
        }
    }
}

/// High data as Salt shows it (`state.show_sls`, `show_highstate`):
/// without the engine's [`YAMLEX_STRINGS`] marks.
pub fn hide_marks(high: &mut Map) {
    for body in high.values_mut() {
        if let Value::Object(body) = body {
            body.shift_remove(YAMLEX_STRINGS);
        }
    }
}

impl LowChunk {
    /// The chunk as Salt shows it (`state.show_lowstate`): without the
    /// engine's [`YAMLEX_STRINGS`] mark. Borrowed when it has none.
    pub fn shown_chunk(&self) -> Cow<'_, LowChunk> {
        if self.contains(YAMLEX_STRINGS) {
            let mut c = self.clone();
            c.shift_remove(YAMLEX_STRINGS);
            Cow::Owned(c)
        } else {
            Cow::Borrowed(self)
        }
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
