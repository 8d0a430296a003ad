//! Python-like mutable containers for templates.
//!
//! Salt formulas rely on Python semantics: dicts and lists are shared by
//! reference and mutated in place (`{% do d.update(x) %}`, `l.append(y)`,
//! a macro changing its caller's dict). minijinja's own maps and lists are
//! immutable, so Salt data entering a template (pillar, grains, function
//! results, and every `{}`/`[]` literal, see [`super::prepass`]) is wrapped in
//! these objects instead.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use indexmap::IndexMap;
use minijinja::value::{Enumerator, Kwargs, Object, ObjectRepr, ValueKind};
use minijinja::{Error, ErrorKind, State, Value as MjValue};

use crate::memo::{Read, ReadLog, Root};
use crate::{Map, Value};

/// A Python `dict`: insertion-ordered, mutable, shared by reference.
#[derive(Default)]
pub struct PyDict {
    entries: Mutex<IndexMap<MjValue, MjValue>>,
    /// Set on the render's own `grains`, `pillar` and `opts`: every read of
    /// them is recorded (a key, or the whole dict), so the render can be
    /// reused for contexts that give the same values ([`crate::memo`]).
    watch: Option<Watch>,
}

/// Where a watched dict records its reads.
struct Watch {
    log: Arc<ReadLog>,
    root: Root,
}

/// A Python `list`: mutable, shared by reference.
#[derive(Default)]
pub struct PyList {
    items: Mutex<Vec<MjValue>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl fmt::Debug for PyDict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("dict")
    }
}

impl fmt::Debug for PyList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("list")
    }
}

impl PyDict {
    /// A new dict value holding `entries`.
    pub fn new_value(entries: IndexMap<MjValue, MjValue>) -> MjValue {
        MjValue::from_object(PyDict {
            entries: Mutex::new(entries),
            watch: None,
        })
    }

    /// Records a read of `key` (a string key; any other reads the whole).
    fn note_key(&self, key: &MjValue) {
        if let Some(watch) = &self.watch {
            match key.as_str() {
                Some(key) => watch.log.note(Read::Key(watch.root, key.to_string())),
                None => watch.log.note(Read::All(watch.root)),
            }
        }
    }

    /// Records a read of every entry.
    fn note_all(&self) {
        if let Some(watch) = &self.watch {
            watch.log.note(Read::All(watch.root));
        }
    }

    /// A snapshot of the entries.
    pub fn snapshot(&self) -> Vec<(MjValue, MjValue)> {
        self.note_all();
        lock(&self.entries)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Sets `key` to `value`.
    pub fn insert(&self, key: MjValue, value: MjValue) {
        lock(&self.entries).insert(key, value);
    }

    /// The value under `key`.
    pub fn get(&self, key: &MjValue) -> Option<MjValue> {
        self.note_key(key);
        lock(&self.entries).get(key).cloned()
    }

    fn update_from(&self, source: &MjValue) -> Result<(), Error> {
        if source.is_undefined() || source.is_none() {
            return Ok(());
        }
        let pairs = pairs_of(source)?;
        let mut entries = lock(&self.entries);
        for (k, v) in pairs {
            entries.insert(k, v);
        }
        Ok(())
    }
}

impl PyList {
    /// A new list value holding `items`.
    pub fn new_value(items: Vec<MjValue>) -> MjValue {
        MjValue::from_object(PyList {
            items: Mutex::new(items),
        })
    }

    /// A snapshot of the items.
    pub fn snapshot(&self) -> Vec<MjValue> {
        lock(&self.items).clone()
    }
}

/// The (key, value) pairs of a mapping, or of a sequence of pairs (what
/// Python's `dict.update` accepts).
pub fn pairs_of(value: &MjValue) -> Result<Vec<(MjValue, MjValue)>, Error> {
    if let Some(dict) = value.downcast_object_ref::<PyDict>() {
        return Ok(dict.snapshot());
    }
    match value.kind() {
        ValueKind::Map => {
            let mut pairs = Vec::new();
            for key in value.try_iter()? {
                let item = value.get_item(&key)?;
                pairs.push((key, item));
            }
            Ok(pairs)
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let mut pairs = Vec::new();
            for pair in value.try_iter()? {
                let key = pair.get_item_by_index(0)?;
                let item = pair.get_item_by_index(1)?;
                pairs.push((key, item));
            }
            Ok(pairs)
        }
        _ => Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("'{}' object is not iterable", python_type_name(value)),
        )),
    }
}

/// Python's name of a value's type, for error messages.
pub fn python_type_name(value: &MjValue) -> &'static str {
    match value.kind() {
        ValueKind::Undefined => "Undefined",
        ValueKind::None => "NoneType",
        ValueKind::Bool => "bool",
        ValueKind::Number if value.is_integer() => "int",
        ValueKind::Number => "float",
        ValueKind::String => "str",
        ValueKind::Bytes => "bytes",
        ValueKind::Seq => "list",
        ValueKind::Map => "dict",
        _ => "object",
    }
}

fn split_kwargs(args: &[MjValue]) -> (&[MjValue], Option<Kwargs>) {
    match args.split_last() {
        Some((last, rest)) if last.is_kwargs() => (rest, Kwargs::try_from(last.clone()).ok()),
        _ => (args, None),
    }
}

fn arg_count_error(method: &str, expected: &str, got: usize) -> Error {
    Error::new(
        ErrorKind::InvalidOperation,
        format!("{method}() takes {expected} arguments ({got} given)"),
    )
}

impl Object for PyDict {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &MjValue) -> Option<MjValue> {
        self.get(key)
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        self.note_all();
        Enumerator::Values(lock(&self.entries).keys().cloned().collect())
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        self.note_all();
        Some(lock(&self.entries).len())
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &mut State<'_, '_>,
        method: &str,
        args: &[MjValue],
    ) -> Result<MjValue, Error> {
        let (positional, kwargs) = split_kwargs(args);
        match method {
            // Reads of every entry (the key-wise ones record in `get`).
            "keys" | "values" | "items" | "popitem" | "copy" => self.note_all(),
            "setdefault" | "pop" | "has_key" | "__contains__" => {
                if let Some(key) = positional.first() {
                    self.note_key(key);
                }
            }
            _ => {}
        }
        match method {
            "get" => {
                let key = positional
                    .first()
                    .ok_or_else(|| arg_count_error("get", "at least 1", 0))?;
                Ok(self
                    .get(key)
                    .unwrap_or_else(|| positional.get(1).cloned().unwrap_or(MjValue::from(()))))
            }
            "keys" => Ok(PyList::new_value(
                lock(&self.entries).keys().cloned().collect(),
            )),
            "values" => Ok(PyList::new_value(
                lock(&self.entries).values().cloned().collect(),
            )),
            "items" => Ok(PyList::new_value(
                lock(&self.entries)
                    .iter()
                    .map(|(k, v)| pair_tuple(k.clone(), v.clone()))
                    .collect(),
            )),
            "update" => {
                for source in positional {
                    self.update_from(source)?;
                }
                if let Some(kwargs) = kwargs {
                    for key in kwargs.args() {
                        let value: MjValue = kwargs.peek(key)?;
                        self.insert(MjValue::from(key), value);
                    }
                }
                Ok(MjValue::from(()))
            }
            "setdefault" => {
                let key = positional
                    .first()
                    .ok_or_else(|| arg_count_error("setdefault", "at least 1", 0))?;
                let mut entries = lock(&self.entries);
                let default = positional.get(1).cloned().unwrap_or(MjValue::from(()));
                Ok(entries.entry(key.clone()).or_insert(default).clone())
            }
            "pop" => {
                let key = positional
                    .first()
                    .ok_or_else(|| arg_count_error("pop", "at least 1", 0))?;
                match lock(&self.entries).shift_remove(key) {
                    Some(value) => Ok(value),
                    None => positional.get(1).cloned().ok_or_else(|| {
                        Error::new(
                            ErrorKind::InvalidOperation,
                            format!("KeyError: {}", key_repr(key)),
                        )
                    }),
                }
            }
            "popitem" => lock(&self.entries)
                .pop()
                .map(|(k, v)| pair_tuple(k, v))
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::InvalidOperation,
                        "popitem(): dictionary is empty",
                    )
                }),
            "copy" => Ok(PyDict::new_value(lock(&self.entries).clone())),
            "clear" => {
                lock(&self.entries).clear();
                Ok(MjValue::from(()))
            }
            "has_key" | "__contains__" => {
                let key = positional
                    .first()
                    .ok_or_else(|| arg_count_error(method, "exactly 1", 0))?;
                Ok(MjValue::from(lock(&self.entries).contains_key(key)))
            }
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        }
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&python_repr(&MjValue::from_dyn_object(self.clone())))
    }
}

impl Object for PyList {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &MjValue) -> Option<MjValue> {
        let items = lock(&self.items);
        let index = key.as_i64()?;
        let resolved = if index < 0 {
            items.len() as i64 + index
        } else {
            index
        };
        usize::try_from(resolved)
            .ok()
            .and_then(|i| items.get(i).cloned())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(self.snapshot())
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(lock(&self.items).len())
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &mut State<'_, '_>,
        method: &str,
        args: &[MjValue],
    ) -> Result<MjValue, Error> {
        let (positional, _) = split_kwargs(args);
        let none = MjValue::from(());
        match method {
            "append" => {
                let item = positional
                    .first()
                    .ok_or_else(|| arg_count_error("append", "exactly 1", 0))?;
                lock(&self.items).push(item.clone());
                Ok(none)
            }
            "extend" => {
                let source = positional
                    .first()
                    .ok_or_else(|| arg_count_error("extend", "exactly 1", 0))?;
                let new_items: Vec<MjValue> = source.try_iter()?.collect();
                lock(&self.items).extend(new_items);
                Ok(none)
            }
            "insert" => {
                let (Some(index), Some(item)) = (positional.first(), positional.get(1)) else {
                    return Err(arg_count_error("insert", "exactly 2", positional.len()));
                };
                let mut items = lock(&self.items);
                let len = items.len() as i64;
                let raw = index.as_i64().unwrap_or(len);
                let at = if raw < 0 {
                    (len + raw).max(0)
                } else {
                    raw.min(len)
                };
                items.insert(at as usize, item.clone());
                Ok(none)
            }
            "pop" => {
                let mut items = lock(&self.items);
                let len = items.len() as i64;
                let raw = positional.first().and_then(|v| v.as_i64()).unwrap_or(-1);
                let at = if raw < 0 { len + raw } else { raw };
                if at < 0 || at >= len {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "IndexError: pop index out of range",
                    ));
                }
                Ok(items.remove(at as usize))
            }
            "remove" => {
                let target = positional
                    .first()
                    .ok_or_else(|| arg_count_error("remove", "exactly 1", 0))?;
                let position = self.snapshot().iter().position(|item| item == target);
                let mut items = lock(&self.items);
                match position.filter(|at| *at < items.len()) {
                    Some(at) => {
                        items.remove(at);
                        Ok(none)
                    }
                    None => Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "ValueError: list.remove(x): x not in list",
                    )),
                }
            }
            "index" => {
                let target = positional
                    .first()
                    .ok_or_else(|| arg_count_error("index", "at least 1", 0))?;
                self.snapshot()
                    .iter()
                    .position(|item| item == target)
                    .map(MjValue::from)
                    .ok_or_else(|| {
                        Error::new(
                            ErrorKind::InvalidOperation,
                            format!("ValueError: {} is not in list", key_repr(target)),
                        )
                    })
            }
            "count" => {
                let target = positional
                    .first()
                    .ok_or_else(|| arg_count_error("count", "exactly 1", 0))?;
                Ok(MjValue::from(
                    self.snapshot()
                        .iter()
                        .filter(|item| *item == target)
                        .count(),
                ))
            }
            "copy" => Ok(PyList::new_value(self.snapshot())),
            "clear" => {
                lock(&self.items).clear();
                Ok(none)
            }
            "reverse" => {
                lock(&self.items).reverse();
                Ok(none)
            }
            "sort" => {
                lock(&self.items).sort();
                Ok(none)
            }
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        }
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&python_repr(&MjValue::from_dyn_object(self.clone())))
    }
}

/// A `(key, value)` tuple as `dict.items()` yields.
fn pair_tuple(key: MjValue, value: MjValue) -> MjValue {
    MjValue::from_object(minijinja::value::Tuple::new(vec![key, value]))
}

fn key_repr(value: &MjValue) -> String {
    python_repr(value)
}

/// Salt data -> a template value, with dicts and lists made mutable.
pub fn to_template(value: &Value) -> MjValue {
    match value {
        Value::Null => MjValue::from(()),
        Value::Bool(b) => MjValue::from(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                MjValue::from(i)
            } else if let Some(u) = n.as_u64() {
                MjValue::from(u)
            } else {
                MjValue::from(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => MjValue::from(s.as_str()),
        Value::Array(items) => PyList::new_value(items.iter().map(to_template).collect()),
        Value::Object(map) => PyDict::new_value(
            map.iter()
                .map(|(k, v)| (MjValue::from(k.as_str()), to_template(v)))
                .collect(),
        ),
    }
}

/// [`to_template`] for the render's own `grains`, `pillar` or `opts`:
/// with a `log`, the top-level dict records every read of it.
pub fn to_watched(value: &Value, root: Root, log: Option<&Arc<ReadLog>>) -> MjValue {
    let (Some(log), Value::Object(map)) = (log, value) else {
        if let Some(log) = log {
            log.note(Read::All(root));
        }
        return to_template(value);
    };
    MjValue::from_object(PyDict {
        entries: Mutex::new(
            map.iter()
                .map(|(k, v)| (MjValue::from(k.as_str()), to_template(v)))
                .collect(),
        ),
        watch: Some(Watch {
            log: log.clone(),
            root,
        }),
    })
}

/// Makes a template value mutable (a native map/list from a literal or a
/// filter becomes a [`PyDict`]/[`PyList`]); scalars and our objects pass through.
pub fn make_mutable(value: MjValue) -> MjValue {
    if value.downcast_object_ref::<PyDict>().is_some()
        || value.downcast_object_ref::<PyList>().is_some()
    {
        return value;
    }
    match value.kind() {
        ValueKind::Map if !value.is_kwargs() => match pairs_of(&value) {
            Ok(pairs) => PyDict::new_value(pairs.into_iter().collect()),
            Err(_) => value,
        },
        ValueKind::Seq => match value.try_iter() {
            Ok(iter) => PyList::new_value(iter.collect()),
            Err(_) => value,
        },
        _ => value,
    }
}

/// A template value -> Salt data. Keys become strings as JSON output
/// writes them (`true`, `null`, `1`); undefined becomes null.
pub fn from_template(value: &MjValue) -> Value {
    data_at(value, 0)
}

fn data_at(value: &MjValue, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    if let Some(dict) = value.downcast_object_ref::<PyDict>() {
        return Value::Object(
            dict.snapshot()
                .iter()
                .map(|(k, v)| (json_key(k), data_at(v, depth + 1)))
                .collect::<Map>(),
        );
    }
    if let Some(list) = value.downcast_object_ref::<PyList>() {
        return Value::Array(
            list.snapshot()
                .iter()
                .map(|v| data_at(v, depth + 1))
                .collect(),
        );
    }
    match value.kind() {
        ValueKind::Undefined | ValueKind::None => Value::Null,
        ValueKind::Bool => Value::Bool(value.is_true()),
        ValueKind::Number => {
            if let Some(i) = value.as_i64().filter(|_| value.is_integer()) {
                Value::from(i)
            } else if let Ok(u) = u64::try_from(value.clone()).map_err(|_| ()).and_then(|u| {
                if value.is_integer() {
                    Ok(u)
                } else {
                    Err(())
                }
            }) {
                Value::from(u)
            } else {
                f64::try_from(value.clone())
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
                    .unwrap_or_else(|| Value::String(value.to_string()))
            }
        }
        ValueKind::String => Value::String(value.as_str().unwrap_or_default().to_string()),
        ValueKind::Map => {
            let mut map = Map::new();
            if let Ok(iter) = value.try_iter() {
                for key in iter {
                    let item = value.get_item(&key).unwrap_or_default();
                    map.insert(json_key(&key), data_at(&item, depth + 1));
                }
            }
            Value::Object(map)
        }
        ValueKind::Seq | ValueKind::Iterable => Value::Array(
            value
                .try_iter()
                .map(|iter| iter.map(|v| data_at(&v, depth + 1)).collect())
                .unwrap_or_default(),
        ),
        _ => Value::String(value.to_string()),
    }
}

/// How `json.dumps` writes a dict key.
fn json_key(key: &MjValue) -> String {
    match key.kind() {
        ValueKind::String => key.as_str().unwrap_or_default().to_string(),
        ValueKind::None | ValueKind::Undefined => "null".to_string(),
        ValueKind::Bool => if key.is_true() { "true" } else { "false" }.to_string(),
        _ => python_str(key),
    }
}

/// Python's `str()` of a template value.
pub fn python_str(value: &MjValue) -> String {
    match value.kind() {
        ValueKind::String => value.as_str().unwrap_or_default().to_string(),
        _ => python_repr(value),
    }
}

/// Python's `repr()` of a template value (`{'a': [1, True, None]}`).
pub fn python_repr(value: &MjValue) -> String {
    repr_at(value, 0)
}

/// How deep data may nest before printing and conversion stop (a list that
/// contains itself would otherwise recurse forever).
pub const MAX_DEPTH: usize = 128;

fn repr_at(value: &MjValue, depth: usize) -> String {
    if depth > MAX_DEPTH {
        return "...".to_string();
    }
    match value.kind() {
        ValueKind::Undefined => String::new(),
        ValueKind::None => "None".to_string(),
        ValueKind::Bool => if value.is_true() { "True" } else { "False" }.to_string(),
        ValueKind::Number if value.is_integer() => value.to_string(),
        ValueKind::Number => match f64::try_from(value.clone()) {
            Ok(f) => crate::pyfmt::float_repr(f),
            Err(_) => value.to_string(),
        },
        ValueKind::String => crate::pyfmt::string_repr(value.as_str().unwrap_or_default()),
        ValueKind::Map => {
            let parts: Vec<String> = pairs_of(value)
                .unwrap_or_default()
                .iter()
                .map(|(k, v)| format!("{}: {}", repr_at(k, depth + 1), repr_at(v, depth + 1)))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let parts: Vec<String> = value
                .try_iter()
                .map(|iter| iter.map(|v| repr_at(&v, depth + 1)).collect())
                .unwrap_or_default();
            if value.is_tuple() {
                if parts.len() == 1 {
                    format!("({},)", parts[0])
                } else {
                    format!("({})", parts.join(", "))
                }
            } else {
                format!("[{}]", parts.join(", "))
            }
        }
        _ => value.to_string(),
    }
}
