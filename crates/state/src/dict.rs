//! [`SmallDict`]: the short, insertion-ordered dicts a state run is made of.

use std::borrow::Cow;
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::value::{Map, Value};

/// A key of a [`SmallDict`]. The keys every chunk and every return has
/// (`state`, `__id__`, `result`, `comment`...) and the requisite keywords
/// are static strings, so only a state's own argument names allocate.
pub type DictKey = Cow<'static, str>;

/// Keys shared by most chunks and returns, stored without an allocation.
const KNOWN_KEYS: &[&str] = &[
    // Chunks.
    "state",
    "name",
    "__sls__",
    "__env__",
    "__sls_included_from__",
    "__id__",
    "order",
    "fun",
    "name_order",
    "__prereq__",
    "__prerequiring__",
    "require",
    "require_any",
    "watch",
    "watch_any",
    "onchanges",
    "onchanges_any",
    "onfail",
    "onfail_any",
    "onfail_all",
    "prereq",
    "listen",
    "use",
    "sfun",
    "parallel",
    "failhard",
    "unless",
    "onlyif",
    "creates",
    "check_cmd",
    "retry",
    "runas",
    "cwd",
    "env",
    "shell",
    "source",
    "template",
    "user",
    "group",
    "mode",
    "makedirs",
    "contents",
    "test",
    // Returns.
    "result",
    "changes",
    "comment",
    "__run_num__",
    "start_time",
    "duration",
    "__state_ran__",
    "skip_watch",
    "warnings",
];

/// The key as a [`DictKey`], static when it is one of [`KNOWN_KEYS`].
fn intern(key: DictKey) -> DictKey {
    match key {
        Cow::Owned(s) => match KNOWN_KEYS.iter().find(|k| **k == s) {
            Some(k) => Cow::Borrowed(k),
            None => Cow::Owned(s),
        },
        borrowed => borrowed,
    }
}

/// A short insertion-ordered dict of Salt data: a low chunk's arguments
/// or a state's return.
///
/// A run holds one chunk and one return per state, each with a dozen keys
/// at most. As hash maps (`serde_json::Map`), their hash tables and key
/// strings were most of a 10 000-state run's memory and a good part of
/// its time; as a list of pairs with static well-known keys, a lookup
/// compares a few short keys and a dict is one allocation plus its values.
/// It behaves as a Python dict: a new key goes at the end, setting an
/// existing one keeps its place, equality ignores order.
///
/// Most lookups miss: the engine asks each chunk for a score of keys a
/// state seldom has (`unless`, `retry`, `parallel`, `__prereq__`...) and
/// each new key of a return is looked up before it is added. A 64-bit
/// filter of the keys present ([`key_bit`]) answers most misses without
/// comparing a key (a 10k-state apply: 3.5% fewer instructions).
#[derive(Debug, Clone, Default)]
pub struct SmallDict {
    entries: Vec<(DictKey, Value)>,
    /// The [`key_bit`] of every key present (and, after a removal, of
    /// none that is not: it is recomputed).
    filter: u64,
}

/// The bit of `key` in a [`SmallDict`]'s filter: its length and its
/// first, middle and last bytes, mixed by one multiplication. The
/// multiplier was picked (by trying random odd ones) so that none of the
/// keys the engine asks a chunk or a return for shares a bit with the keys
/// every chunk or return has ([`tests::probed_keys_miss_in_the_filter`]);
/// a shared bit would only cost a scan.
#[inline(always)]
const fn key_bit(key: &str) -> u64 {
    const MIX: u64 = 0x5dc5_60cc_5e4c_25e5;
    let b = key.as_bytes();
    let Some((&last, _)) = b.split_last() else {
        return 1;
    };
    let x = (b.len() as u64 & 0xff)
        | (b[0] as u64) << 8
        | (b[b.len() / 2] as u64) << 16
        | (last as u64) << 24;
    1 << (x.wrapping_mul(MIX) >> 58)
}

/// A fixed set of keys a dict is asked whether it has any of (the
/// requisite keywords, for every chunk): their filter bits are computed
/// once, so that a dict with none of them mostly answers with one test.
#[derive(Debug)]
pub struct KeySet {
    keys: &'static [&'static str],
    filter: u64,
}

impl KeySet {
    /// The set of `keys`.
    pub const fn new(keys: &'static [&'static str]) -> KeySet {
        let mut filter = 0;
        let mut i = 0;
        while i < keys.len() {
            filter |= key_bit(keys[i]);
            i += 1;
        }
        KeySet { keys, filter }
    }
}

impl SmallDict {
    /// An empty dict.
    pub fn new() -> Self {
        Self::default()
    }
    /// An empty dict with room for `n` keys.
    pub fn with_capacity(n: usize) -> Self {
        SmallDict {
            entries: Vec::with_capacity(n),
            filter: 0,
        }
    }
    /// The value of `key`.
    #[inline]
    pub fn get(&self, key: &str) -> Option<&Value> {
        if self.filter & key_bit(key) == 0 {
            return None;
        }
        self.entries
            .iter()
            .find(|(k, _)| k.as_ref() == key)
            .map(|(_, v)| v)
    }
    /// The value of `key`, to change it in place.
    #[inline]
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.slot(key, key_bit(key))
    }
    /// The value of `key`, whose [`key_bit`] is `bit`.
    #[inline]
    fn slot(&mut self, key: &str, bit: u64) -> Option<&mut Value> {
        if self.filter & bit == 0 {
            return None;
        }
        self.entries
            .iter_mut()
            .find(|(k, _)| k.as_ref() == key)
            .map(|(_, v)| v)
    }
    /// Whether the dict has any key of `set`.
    #[inline]
    pub fn contains_any(&self, set: &KeySet) -> bool {
        self.filter & set.filter != 0 && set.keys.iter().any(|k| self.contains_key(k))
    }
    /// Whether the dict has `key`.
    #[inline]
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
    /// Sets `key`: in place when the dict has it, else at the end.
    /// Returns the value it replaced.
    #[inline(always)]
    pub fn insert(&mut self, key: impl Into<DictKey>, value: Value) -> Option<Value> {
        let key = key.into();
        let bit = key_bit(&key);
        match self.slot(&key, bit) {
            Some(slot) => Some(std::mem::replace(slot, value)),
            None => {
                self.filter |= bit;
                self.entries.push((intern(key), value));
                None
            }
        }
    }
    /// Removes `key`, keeping the order of the others.
    pub fn shift_remove(&mut self, key: &str) -> Option<Value> {
        self.shift_remove_full(key).map(|(_, value)| value)
    }
    /// Removes `key`, keeping the order of the others; returns where it
    /// was and its value.
    pub fn shift_remove_full(&mut self, key: &str) -> Option<(usize, Value)> {
        if self.filter & key_bit(key) == 0 {
            return None;
        }
        let i = self.entries.iter().position(|(k, _)| k.as_ref() == key)?;
        let (_, value) = self.entries.remove(i);
        self.filter = self.entries.iter().fold(0, |f, (k, _)| f | key_bit(k));
        Some((i, value))
    }
    /// Puts `key`, which the dict must not have, back at `index` (or at
    /// the end when the dict is shorter): the inverse of
    /// [`SmallDict::shift_remove_full`].
    pub fn insert_at(&mut self, index: usize, key: impl Into<DictKey>, value: Value) {
        let key = intern(key.into());
        debug_assert!(!self.contains_key(&key), "insert_at of a key the dict has");
        self.filter |= key_bit(&key);
        let index = index.min(self.entries.len());
        self.entries.insert(index, (key, value));
    }
    /// The (key, value) pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.entries.iter().map(|(k, v)| (k.as_ref(), v))
    }
    /// The keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_ref())
    }
    /// How many keys the dict has.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    /// Whether the dict has no keys.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// The dict as Salt data (a map in the same order).
    pub fn to_map(&self) -> Map {
        self.iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }
    /// The dict as Salt data, consuming it (values are moved, not copied).
    pub fn into_map(self) -> Map {
        self.into_iter().collect()
    }
    /// The dict as a Salt value.
    pub fn to_value(&self) -> Value {
        Value::Object(self.to_map())
    }
}

impl IntoIterator for SmallDict {
    type Item = (String, Value);
    type IntoIter = std::iter::Map<
        std::vec::IntoIter<(DictKey, Value)>,
        fn((DictKey, Value)) -> (String, Value),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter().map(|(k, v)| (k.into_owned(), v))
    }
}

impl From<Map> for SmallDict {
    fn from(map: Map) -> Self {
        let mut filter = 0;
        let entries = map
            .into_iter()
            .map(|(k, v)| {
                filter |= key_bit(&k);
                (intern(Cow::Owned(k)), v)
            })
            .collect();
        SmallDict { entries, filter }
    }
}

impl From<SmallDict> for Value {
    fn from(dict: SmallDict) -> Self {
        Value::Object(dict.into_map())
    }
}

impl<K: Into<DictKey>> FromIterator<(K, Value)> for SmallDict {
    fn from_iter<I: IntoIterator<Item = (K, Value)>>(iter: I) -> Self {
        let mut dict = SmallDict::new();
        for (k, v) in iter {
            dict.insert(k, v);
        }
        dict
    }
}

/// Two dicts are equal when they have the same keys and values, in any
/// order (as two Python dicts are).
impl PartialEq for SmallDict {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl Serialize for SmallDict {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for SmallDict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DictVisitor;
        impl<'de> Visitor<'de> for DictVisitor {
            type Value = SmallDict;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<SmallDict, A::Error> {
                // The declared length sizes the dict, up to a bound: a
                // hostile map of 2^32 - 1 entries in a few bytes must be
                // a decode error, not a 240 GB allocation that aborts.
                let room = access.size_hint().unwrap_or(8).min(MAX_PRESIZED_KEYS);
                let mut dict = SmallDict::with_capacity(room);
                while let Some((k, v)) = access.next_entry::<Key, Value>()? {
                    dict.insert(k.0, v);
                }
                Ok(dict)
            }
        }
        deserializer.deserialize_map(DictVisitor)
    }
}

/// The most keys a decoded dict is sized for before they are read (a
/// chunk or a return has a dozen; more grow the dict as they come).
const MAX_PRESIZED_KEYS: usize = 256;

/// A key as decoded: one of [`KNOWN_KEYS`] without an allocation (a
/// minion decodes ~10 keys per chunk of every bundle, nearly all known).
struct Key(DictKey);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(Key(match KNOWN_KEYS.iter().find(|k| **k == key) {
                    Some(k) => Cow::Borrowed(k),
                    None => Cow::Owned(key.to_string()),
                }))
            }
            fn visit_string<E: serde::de::Error>(self, key: String) -> Result<Key, E> {
                Ok(Key(intern(Cow::Owned(key))))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_insertion_order_and_replaces_in_place() {
        let mut d = SmallDict::new();
        d.insert("state", Value::from("test"));
        d.insert(String::from("custom"), Value::from(1));
        d.insert("fun", Value::from("nop"));
        d.insert(String::from("state"), Value::from("cmd"));
        assert_eq!(d.keys().collect::<Vec<_>>(), ["state", "custom", "fun"]);
        assert_eq!(d.get("state"), Some(&Value::from("cmd")));
        assert_eq!(d.shift_remove("custom"), Some(Value::from(1)));
        assert_eq!(d.keys().collect::<Vec<_>>(), ["state", "fun"]);
        assert_eq!(d.shift_remove("custom"), None);
    }

    #[test]
    fn round_trips_through_json_in_order() {
        let text =
            r#"{"state":"file","name":"/x","__id__":"x","zeta":1,"alpha":2,"fun":"managed"}"#;
        let d: SmallDict = serde_json::from_str(text).expect("a dict");
        assert_eq!(serde_json::to_string(&d).expect("json"), text);
        assert_eq!(serde_json::to_string(&d.to_map()).expect("json"), text);
        assert_eq!(SmallDict::from(d.to_map()), d);
        assert_eq!(Value::from(d.clone()), d.to_value());
    }

    /// The keys every chunk has, every return has, and the ones the engine
    /// asks for that a state seldom has.
    const CHUNK_KEYS: [&str; 8] = [
        "state",
        "name",
        "__sls__",
        "__env__",
        "__id__",
        "order",
        "fun",
        "__sls_included_from__",
    ];
    const RETURN_KEYS: [&str; 10] = [
        "name",
        "changes",
        "result",
        "comment",
        "__sls__",
        "__run_num__",
        "start_time",
        "duration",
        "__id__",
        "__state_ran__",
    ];
    const PROBED_KEYS: [&str; 22] = [
        "__prereq__",
        "__prerequiring__",
        "retry",
        "test",
        "unless",
        "onlyif",
        "creates",
        "parallel",
        "check_cmd",
        "reload_grains",
        "reload_pillar",
        "failhard",
        "listen",
        "listen_in",
        "aggregate",
        "sfun",
        "require",
        "watch",
        "onchanges",
        "onfail",
        "prereq",
        "skip_req",
    ];

    #[test]
    fn probed_keys_miss_in_the_filter() {
        let chunk: SmallDict = CHUNK_KEYS.iter().map(|k| (*k, Value::Null)).collect();
        let ret: SmallDict = RETURN_KEYS.iter().map(|k| (*k, Value::Null)).collect();
        for key in PROBED_KEYS {
            assert_eq!(
                chunk.filter & key_bit(key),
                0,
                "{key} shares a bit with a chunk key"
            );
            assert_eq!(
                ret.filter & key_bit(key),
                0,
                "{key} shares a bit with a return key"
            );
        }
    }

    #[test]
    fn contains_any_finds_each_key_of_the_set() {
        const SET: KeySet = KeySet::new(&["require", "watch_any", "listen"]);
        let chunk: SmallDict = CHUNK_KEYS.iter().map(|k| (*k, Value::Null)).collect();
        assert!(!chunk.contains_any(&SET));
        for key in SET.keys {
            let mut with = chunk.clone();
            with.insert(*key, Value::Null);
            assert!(with.contains_any(&SET), "{key}");
            with.shift_remove(key);
            assert!(!with.contains_any(&SET), "{key} removed");
        }
        assert!(!SmallDict::new().contains_any(&KeySet::new(&[])));
    }

    #[test]
    fn lookups_are_exact_whatever_the_filter_says() {
        // Keys sharing a bit with a present key, absent keys, the empty
        // key, removals: answers as a list scan gives them.
        let mut d = SmallDict::new();
        let mut model: Vec<(String, Value)> = Vec::new();
        let keys: Vec<String> = (0..300)
            .map(|i| format!("k{i}"))
            .chain(["".into(), "a".into(), "name".into(), "names".into()])
            .chain(CHUNK_KEYS.iter().chain(&PROBED_KEYS).map(|k| k.to_string()))
            .collect();
        for (step, key) in keys.iter().enumerate() {
            if step % 3 == 0 {
                d.insert(key.clone(), Value::from(step));
                model.push((key.clone(), Value::from(step)));
            }
            if step % 7 == 0 && !model.is_empty() {
                let (gone, _) = model.remove(step % model.len());
                assert!(d.shift_remove(&gone).is_some(), "{gone}");
                assert_eq!(d.shift_remove(&gone), None, "{gone} twice");
            }
            for probe in &keys {
                let want = model.iter().find(|(k, _)| k == probe).map(|(_, v)| v);
                assert_eq!(d.get(probe), want, "get {probe:?} at step {step}");
                assert_eq!(d.contains_key(probe), want.is_some());
            }
        }
        assert_eq!(
            d.keys().collect::<Vec<_>>(),
            model.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>()
        );
        let back = SmallDict::from(d.to_map());
        for probe in &keys {
            assert_eq!(back.get(probe), d.get(probe), "{probe:?} after from(Map)");
        }
    }

    #[test]
    fn a_hostile_declared_length_is_a_decode_error_not_an_allocation() {
        // A map declaring 2^32 - 1 entries, then one: refused (before,
        // the dict was sized for them all and the process aborted).
        let bytes = [0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, b'a', 0x01];
        assert!(rmp_serde::from_slice::<SmallDict>(&bytes).is_err());
        // A dict with more keys than the bound still decodes whole.
        let many: SmallDict = (0..600)
            .map(|i| (format!("k{i}"), Value::from(i)))
            .collect();
        let back: SmallDict = rmp_serde::from_slice(&rmp_serde::to_vec(&many).unwrap()).unwrap();
        assert_eq!(
            back.keys().collect::<Vec<_>>(),
            many.keys().collect::<Vec<_>>()
        );
    }

    #[test]
    fn equality_ignores_order_like_a_dict() {
        let a: SmallDict = [("a", Value::from(1)), ("b", Value::from(2))]
            .into_iter()
            .collect();
        let b: SmallDict = [("b", Value::from(2)), ("a", Value::from(1))]
            .into_iter()
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, SmallDict::new());
    }
}
