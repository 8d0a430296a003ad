//! Low chunks: one state function call, as Salt's `state.show_lowstate` shows it.

use std::borrow::Cow;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::dict::SmallDict;
use crate::origins::YamlexStrings;
use crate::value::{Map, Value};

/// One compiled state call (Salt's "low chunk").
///
/// Keys keep Salt's order: `state, name, __sls__, __env__,
/// [__sls_included_from__], __id__, <args in order>, order, fun`, so that
/// `state.show_low_sls` prints what Salt prints. It is a [`SmallDict`]
/// (which it dereferences to, for the arguments) with accessors for the
/// well-known keys. Beside the dict it knows which of its strings are
/// Salt's yamlex strings ([`YamlexStrings`]): typed, never a key, so the
/// chunk serializes exactly as Salt shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LowChunk {
    dict: SmallDict,
    #[serde(skip)]
    yamlex: YamlexStrings,
    /// The requisites (`(key, value)`) an `extend` added from an SLS of
    /// the other string type than the chunk's values
    /// ([`crate::origins::StringOrigins::note_extended_requisites`]);
    /// shared by the chunks of one ID. Only the compile's messages read it.
    #[serde(skip)]
    other_type_requisites: Option<Arc<Vec<(String, String)>>>,
}

impl LowChunk {
    /// An empty chunk.
    pub fn new() -> Self {
        Self::default()
    }
    /// An empty chunk with room for `n` keys.
    pub fn with_capacity(n: usize) -> Self {
        LowChunk {
            dict: SmallDict::with_capacity(n),
            yamlex: YamlexStrings::default(),
            other_type_requisites: None,
        }
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
        self.dict.contains_key(key)
    }
    /// The return key: `<state>_|-<id>_|-<name>_|-<fun>`, the ID and
    /// name as Salt's `str()` prints them ([`LowChunk::shown_id`]).
    pub fn tag(&self) -> String {
        if self.yamlex.any() {
            return crate::ret::state_tag(
                self.state(),
                &self.shown_id(),
                &self.shown_name(),
                self.fun(),
            );
        }
        // The common case: no copies.
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
    /// The chunk as Salt data, consuming it (its values are moved, not
    /// copied; what [`LowChunk::yamlex`] says travels beside it).
    pub fn into_value(self) -> Value {
        Value::from(self.dict)
    }
    /// Which of this chunk's strings are Salt's yamlex strings.
    pub fn yamlex(&self) -> YamlexStrings {
        self.yamlex
    }
    /// Says which of this chunk's strings are yamlex strings (the
    /// compile, from [`crate::origins::StringOrigins`]; a listener's new
    /// ID, a plain string holding the quotes, turns `id` off).
    pub fn set_yamlex(&mut self, yamlex: YamlexStrings) {
        self.yamlex = yamlex;
    }
    /// `text`, a string of this chunk's data (a requisite's value), as
    /// Salt's `str()` prints it: quoted when the chunk's values are
    /// yamlex strings.
    pub fn shown<'a>(&self, text: &'a str) -> Cow<'a, str> {
        quoted_if(self.yamlex.values, text)
    }
    /// Notes the requisites an `extend` added from an SLS of the other
    /// string type (the compile, from [`crate::origins::StringOrigins`]).
    pub fn set_other_type_requisites(&mut self, requisites: Option<Arc<Vec<(String, String)>>>) {
        self.other_type_requisites = requisites;
    }
    /// `text`, the key or the value of the requisite `key: value` of this
    /// chunk, as Salt's `str()` prints it: as [`LowChunk::shown`], except
    /// for a requisite an `extend` added from an SLS of the other string
    /// type, which prints as that SLS's string.
    pub fn shown_requisite<'a>(&self, key: &str, value: &str, text: &'a str) -> Cow<'a, str> {
        let other = self
            .other_type_requisites
            .as_deref()
            .is_some_and(|r| r.iter().any(|(k, v)| k == key && v == value));
        quoted_if(self.yamlex.values != other, text)
    }
    /// The ID as Salt's `str()` prints it: quoted when a yamlex string.
    pub fn shown_id(&self) -> Cow<'_, str> {
        quoted_if(self.yamlex.id, self.id())
    }
    /// The name as Salt's `str()` prints it: a string name quoted when it
    /// is a yamlex string, any other value as Python prints it.
    pub fn shown_name(&self) -> Cow<'_, str> {
        match self.get("name") {
            Some(Value::String(name)) => quoted_if(self.yamlex.name, name),
            Some(v) => Cow::Owned(crate::requisite::py_str(v)),
            None => Cow::Borrowed(""),
        }
    }
    /// `text` as Salt's `str()` prints it when a state module formats a
    /// value derived from the name: quoted as [`LowChunk::shown_name`]
    /// when it is the name unchanged (Python's `os.path.expanduser` and
    /// friends hand back the very `SLSString` when they change nothing),
    /// plain when it differs (a new, plain `str`).
    pub fn shown_if_name<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.get("name") {
            Some(Value::String(name)) if name == text => quoted_if(self.yamlex.name, text),
            _ => Cow::Borrowed(text),
        }
    }
}

/// `text` as `str()` prints it: a yamlex string's double-quoted dump
/// when `yamlex`, else itself.
fn quoted_if(yamlex: bool, text: &str) -> Cow<'_, str> {
    if yamlex {
        Cow::Owned(halite_salt_rules::pyyaml::yamlex_str(text))
    } else {
        Cow::Borrowed(text)
    }
}

impl Deref for LowChunk {
    type Target = SmallDict;
    fn deref(&self) -> &SmallDict {
        &self.dict
    }
}

impl DerefMut for LowChunk {
    fn deref_mut(&mut self) -> &mut SmallDict {
        &mut self.dict
    }
}

impl From<Map> for LowChunk {
    fn from(map: Map) -> Self {
        LowChunk {
            dict: SmallDict::from(map),
            yamlex: YamlexStrings::default(),
            other_type_requisites: None,
        }
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
