//! Where a state's strings came from: which SLS rendered through Salt's
//! `yamlex` (whose loader makes every string an `SLSString`, printed
//! quoted by `str()`), and which names `extend` replaced with another
//! SLS's string.
//!
//! The high data stays plain JSON (Salt's `show_sls` shape): this record
//! travels beside it from the render to the compile, which stamps each
//! chunk's typed [`YamlexStrings`]. Nothing in the data has to be hidden
//! or stripped.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::value::{Map, Value};

/// Which of one chunk's strings are Salt's yamlex strings (`SLSString`):
/// its ID, its name, and the rest of its values (requisite targets).
/// Salt keeps the type with each string; halite keeps it per chunk,
/// where the engine and the state modules format them
/// ([`crate::chunk::LowChunk::shown`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct YamlexStrings {
    /// The ID (`__id__`) is a yamlex string.
    pub id: bool,
    /// The `name` is a yamlex string.
    pub name: bool,
    /// The other strings (requisite values) are yamlex strings.
    pub values: bool,
}

impl YamlexStrings {
    /// Every string of the chunk is a yamlex string (a state of a yamlex SLS).
    pub const ALL: YamlexStrings = YamlexStrings {
        id: true,
        name: true,
        values: true,
    };

    /// Whether any string of the chunk is a yamlex string.
    pub fn any(self) -> bool {
        self.id || self.name || self.values
    }

    /// The flags as bits (`1` ID, `2` name, `4` values), for the wire.
    pub fn bits(self) -> u8 {
        u8::from(self.id) | u8::from(self.name) << 1 | u8::from(self.values) << 2
    }

    /// The flags of [`YamlexStrings::bits`].
    pub fn from_bits(bits: u8) -> Self {
        YamlexStrings {
            id: bits & 1 != 0,
            name: bits & 2 != 0,
            values: bits & 4 != 0,
        }
    }
}

/// The renderer's word on each SLS of one compile, and the names `extend`
/// set from another SLS. Built by [`crate::HighBuilder`], updated by
/// [`crate::compile::reconcile_extend`], read by the compile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StringOrigins {
    /// `(saltenv, sls)` of each SLS whose pipeline ended in `yamlex`.
    yamlex_sls: HashSet<(String, String)>,
    /// State ID -> whether the name `extend` gave it is a yamlex string.
    extended_names: HashMap<String, bool>,
    /// State ID -> the requisites (`(key, value)`) an `extend` from an
    /// SLS of the other string type added to it: they print as that
    /// SLS's strings, not as the state's own ([`crate::chunk::LowChunk::shown_requisite`]).
    extended_requisites: HashMap<String, Vec<(String, String)>>,
}

impl StringOrigins {
    /// No yamlex SLS: every string prints plain.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether no SLS of the compile was yamlex (the common case).
    pub fn is_empty(&self) -> bool {
        self.yamlex_sls.is_empty()
    }

    /// Notes that `sls` of `saltenv` rendered to yamlex strings.
    pub fn add_yamlex_sls(&mut self, saltenv: &str, sls: &str) {
        self.yamlex_sls
            .insert((saltenv.to_string(), sls.to_string()));
    }

    /// Whether the state or extend `body` (which carries Salt's `__sls__`
    /// and `__env__`) came from a yamlex SLS.
    pub fn body_is_yamlex(&self, body: &Map) -> bool {
        if self.yamlex_sls.is_empty() {
            return false;
        }
        let text = |k: &str| body.get(k).and_then(Value::as_str).unwrap_or("");
        self.yamlex_sls
            .contains(&(text("__env__").to_string(), text("__sls__").to_string()))
    }

    /// Notes that `extend` set the name of state `id` from `ext_body`'s
    /// SLS: the name is that SLS's string (Salt 3008.5 prints a name set
    /// from a plain SLS plain on a yamlex state, and the other way round).
    pub fn note_extended_name(&mut self, id: &str, ext_body: &Map) {
        let yamlex = self.body_is_yamlex(ext_body);
        self.extended_names.insert(id.to_string(), yamlex);
    }

    /// Notes the requisites `extend` adds to state `id` (whose body is
    /// `target`) from `ext_body`'s SLS when that SLS's strings are of the
    /// other type than the state's (Salt 3008.5 prints a requisite a plain
    /// SLS added to a yamlex state plain, and the other way round).
    pub fn note_extended_requisites(&mut self, id: &str, target: &Map, ext_body: &Map) {
        if self.body_is_yamlex(target) == self.body_is_yamlex(ext_body) {
            return;
        }
        let items = ext_body
            .iter()
            .filter(|(state, _)| !state.starts_with("__"))
            .filter_map(|(_, run)| run.as_array())
            .flatten()
            .filter_map(Value::as_object)
            .flat_map(|arg| arg.iter())
            .filter(|(kw, _)| crate::requisite::REQUISITE_KEYWORDS.contains(&kw.as_str()))
            .filter_map(|(_, list)| list.as_array())
            .flatten()
            .filter_map(|item| match item {
                Value::String(v) => Some(("id".to_string(), v.clone())),
                Value::Object(m) => m
                    .iter()
                    .next()
                    .and_then(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))),
                _ => None,
            });
        let noted = self.extended_requisites.entry(id.to_string()).or_default();
        noted.extend(items);
        if noted.is_empty() {
            self.extended_requisites.remove(id);
        }
    }

    /// The requisites `extend` gave state `id` from an SLS of the other
    /// string type ([`StringOrigins::note_extended_requisites`]), if any.
    pub fn extended_requisites(&self, id: &str) -> Option<&[(String, String)]> {
        self.extended_requisites.get(id).map(Vec::as_slice)
    }

    /// The yamlex strings of the chunks of state `id` with `body`.
    pub fn of_state(&self, id: &str, body: &Map) -> YamlexStrings {
        let from_sls = self.body_is_yamlex(body);
        YamlexStrings {
            id: from_sls,
            name: self.extended_names.get(id).copied().unwrap_or(from_sls),
            values: from_sls,
        }
    }
}

/// The yamlex strings of compiled chunks as they cross to the minion
/// beside the chunks (which are Salt's plain low data): `(index, bits)`
/// of each chunk that has any ([`YamlexStrings::bits`]). Empty for a
/// tree without yamlex, which is nearly every tree.
pub fn wire_marks(chunks: &[crate::chunk::LowChunk]) -> Vec<(u32, u8)> {
    chunks
        .iter()
        .enumerate()
        .filter(|(_, c)| c.yamlex().any())
        .filter_map(|(i, c)| Some((u32::try_from(i).ok()?, c.yamlex().bits())))
        .collect()
}

/// Puts the [`wire_marks`] back on the chunks they were taken from (a
/// mark past the end, from a confused peer, is ignored).
pub fn apply_wire_marks(chunks: &mut [crate::chunk::LowChunk], marks: &[(u32, u8)]) {
    for &(i, bits) in marks {
        if let Some(c) = usize::try_from(i).ok().and_then(|i| chunks.get_mut(i)) {
            c.set_yamlex(YamlexStrings::from_bits(bits));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Map {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn a_name_set_by_extend_keeps_the_extending_sls_type() {
        let mut o = StringOrigins::new();
        o.add_yamlex_sls("base", "ylx");
        let state = body(json!({"__sls__": "ylx", "__env__": "base"}));
        assert_eq!(o.of_state("greet", &state), YamlexStrings::ALL);
        o.note_extended_name(
            "greet",
            &body(json!({"__sls__": "main", "__env__": "base"})),
        );
        let s = o.of_state("greet", &state);
        assert!(s.id && s.values && !s.name);
        let plain = body(json!({"__sls__": "main", "__env__": "base"}));
        assert!(!o.of_state("other", &plain).any());
        assert!(!o
            .of_state("x", &body(json!({"__sls__": "ylx", "__env__": "dev"})))
            .any());
    }

    #[test]
    fn requisites_extend_adds_from_the_other_type_are_noted() {
        let mut o = StringOrigins::new();
        o.add_yamlex_sls("base", "ylx");
        let ylx_state = body(json!({"__sls__": "ylx", "__env__": "base"}));
        let plain_ext = body(json!({
            "__sls__": "main", "__env__": "base",
            "test": [{"require": [{"test": "from-plain"}, "bare"]}, {"name": "n"}],
        }));
        o.note_extended_requisites("orphan", &ylx_state, &plain_ext);
        assert_eq!(
            o.extended_requisites("orphan"),
            Some(
                &[
                    ("test".to_string(), "from-plain".to_string()),
                    ("id".to_string(), "bare".to_string())
                ][..]
            )
        );
        // The same type: nothing to note.
        let ylx_ext = body(json!({
            "__sls__": "ylx", "__env__": "base",
            "test": [{"require": [{"test": "x"}]}],
        }));
        o.note_extended_requisites("other", &ylx_state, &ylx_ext);
        assert_eq!(o.extended_requisites("other"), None);
        // No requisite in the extend: nothing either.
        o.note_extended_requisites(
            "named",
            &ylx_state,
            &body(json!({"__sls__": "main", "__env__": "base", "test": [{"name": "n"}]})),
        );
        assert_eq!(o.extended_requisites("named"), None);
    }

    #[test]
    fn bits_round_trip() {
        for b in 0..8u8 {
            assert_eq!(YamlexStrings::from_bits(b).bits(), b);
        }
    }
}
