//! Salt's `yamlex` renderer (salt/renderers/yamlex.py over
//! salt/serializers/yamlex.py and salt/utils/aggregation.py): YAML where a
//! key given twice in a mapping is merged rather than refused, `!aggregate`
//! marks a value to be aggregated with the other values of its key (a
//! scalar or list becomes a list joined without duplicates, a mapping is
//! merged), and `!reset` on a key drops what the earlier values of that key
//! gave. The document itself is an aggregate mapping.
//!
//! The marks matter after loading too: pillar merging with the `aggregate`
//! strategy (`smart` with `renderer: yamlex`) aggregates two values only
//! when both are marked. They travel inside the data ([`MARK`]: a
//! mapping's first key, a list's first item) while pillar is compiled
//! ([`keep_marks`]); everything else gets them removed ([`strip`]).

use std::cell::Cell;
use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Tag};

use super::{scalar, YamlError};
use crate::{Map, Value};

/// The in-data mark of an aggregate mapping (its first key, value `true`)
/// or list (its first item).
pub const MARK: &str = "\u{1}yamlex:aggregate";

thread_local! {
    static KEEP_MARKS: Cell<usize> = const { Cell::new(0) };
}

/// While the returned guard lives, yamlex data rendered on this thread
/// keeps its aggregate marks (pillar compilation merges with them, then
/// strips them).
pub fn keep_marks() -> KeepMarks {
    KEEP_MARKS.with(|k| k.set(k.get() + 1));
    KeepMarks(())
}

/// See [`keep_marks`].
pub struct KeepMarks(());

impl Drop for KeepMarks {
    fn drop(&mut self) {
        KEEP_MARKS.with(|k| k.set(k.get().saturating_sub(1)));
    }
}

/// A yamlex document as the renderer gives it: marked while
/// [`keep_marks`] is held, plain otherwise.
pub fn render(text: &str) -> Result<Value, YamlError> {
    let data = load_marked(text)?;
    let data = if data.is_null() {
        Value::Object(Map::new())
    } else {
        data
    };
    if KEEP_MARKS.with(Cell::get) > 0 {
        Ok(data)
    } else {
        Ok(strip(data))
    }
}

/// Whether `v` carries the aggregate mark.
pub fn is_marked(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.contains_key(MARK),
        Value::Array(a) => a.first().and_then(Value::as_str) == Some(MARK),
        _ => false,
    }
}

/// `v` with every aggregate mark removed, at any depth.
pub fn strip(v: Value) -> Value {
    match v {
        Value::Object(mut m) => {
            m.shift_remove(MARK);
            Value::Object(m.into_iter().map(|(k, v)| (k, strip(v))).collect())
        }
        Value::Array(a) => Value::Array(
            a.into_iter()
                .filter(|x| x.as_str() != Some(MARK))
                .map(strip)
                .collect(),
        ),
        other => other,
    }
}

/// `aggregation.mark`: `v` as an aggregate (a mapping marked, a list
/// marked, a scalar a marked one-item list).
fn mark(v: Value) -> Value {
    if is_marked(&v) {
        return v;
    }
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            out.insert(MARK.into(), Value::Bool(true));
            out.extend(m);
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(std::iter::once(Value::from(MARK)).chain(a).collect()),
        Value::Null => Value::Array(vec![Value::from(MARK)]),
        scalar => Value::Array(vec![Value::from(MARK), scalar]),
    }
}

/// `aggregation.aggregate(a, b, level)`: `b` merged into `a`. `levels`
/// says how many levels from here mark both sides first (Salt's `level`:
/// 0 is `False`, 1 marks this level only).
pub fn aggregate(a: &Value, b: &Value, levels: usize) -> Value {
    let (a, b) = if levels > 0 {
        (mark(a.clone()), mark(b.clone()))
    } else {
        (a.clone(), b.clone())
    };
    let sub = levels.saturating_sub(1);
    match (&a, &b) {
        (Value::Object(am), Value::Object(bm)) => {
            let mut out = if is_marked(&a) && is_marked(&b) {
                am.clone()
            } else {
                bm.clone()
            };
            for (k, v) in bm {
                let v = match am.get(k) {
                    Some(old) if k != MARK => aggregate(old, v, sub),
                    _ => v.clone(),
                };
                out.insert(k.clone(), v);
            }
            Value::Object(out)
        }
        (Value::Array(aa), Value::Array(ba)) if is_marked(&a) && is_marked(&b) => {
            let mut out = aa.clone();
            for v in ba.iter().skip(1) {
                if !aa.contains(v) {
                    out.push(v.clone());
                }
            }
            Value::Array(out)
        }
        _ => b,
    }
}

/// A node being built.
enum Frame {
    Seq {
        anchor: usize,
        marked: bool,
        deep: bool,
        items: Vec<Value>,
    },
    Map {
        anchor: usize,
        marked: bool,
        deep: bool,
        entries: Map,
        /// The key waiting for its value, and whether it was `!reset`.
        key: Option<(String, bool)>,
        /// `!aggregate` written on the key: applies to the value.
        key_aggregates: bool,
    },
}

/// Loads a yamlex document with its aggregate marks (`Null` when empty).
pub fn load_marked(text: &str) -> Result<Value, YamlError> {
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, Value> = HashMap::new();
    let mut result: Option<Value> = None;
    let mut parser = Parser::new_from_str(text);
    let err = |message: String, line: Option<usize>| YamlError { message, line };
    while let Some(next) = parser.next_event() {
        let (event, span) = next.map_err(|e| err(e.info().to_string(), Some(e.marker().line())))?;
        let line = Some(span.start.line());
        // (value, its tag says !aggregate, its tag says !reset, anchor,
        // built outside any !aggregate/!reset node)
        let node = match event {
            Event::Scalar(text, style, anchor, tag) => {
                let (aggregate, reset) = sls_tag(tag.as_deref());
                let value = scalar_value(text, style, tag.as_deref(), aggregate || reset)
                    .map_err(|m| err(m, line))?;
                Some((value, aggregate, reset, anchor, false))
            }
            Event::Alias(id) => {
                let value = anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| err("found undefined alias".into(), line))?;
                Some((value, false, false, 0, false))
            }
            Event::SequenceStart(anchor, tag) => {
                let (marked, reset) = sls_tag(tag.as_deref());
                let deep = marked || reset || in_deep(&stack);
                stack.push(Frame::Seq {
                    anchor,
                    marked,
                    deep,
                    items: Vec::new(),
                });
                None
            }
            Event::MappingStart(anchor, tag) => {
                let (marked, reset) = sls_tag(tag.as_deref());
                let deep = marked || reset || in_deep(&stack);
                // The document is an aggregate mapping.
                let marked = marked || stack.is_empty();
                stack.push(Frame::Map {
                    anchor,
                    marked,
                    deep,
                    entries: Map::new(),
                    key: None,
                    key_aggregates: false,
                });
                None
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq {
                    anchor,
                    marked,
                    deep,
                    items,
                }) => {
                    let v = Value::Array(items);
                    Some((
                        if marked { mark(v) } else { v },
                        false,
                        false,
                        anchor,
                        !deep,
                    ))
                }
                _ => None,
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map {
                    anchor,
                    marked,
                    deep,
                    entries,
                    ..
                }) => {
                    let v = Value::Object(entries);
                    Some((
                        if marked { mark(v) } else { v },
                        false,
                        false,
                        anchor,
                        !deep,
                    ))
                }
                _ => None,
            },
            Event::DocumentStart(_)
            | Event::DocumentEnd
            | Event::StreamStart
            | Event::StreamEnd
            | Event::Nothing => None,
        };
        let Some((value, aggregate, reset, anchor, shallow)) = node else {
            continue;
        };
        let is_key = matches!(stack.last(), Some(Frame::Map { key: None, .. }));
        let value = if aggregate && !is_key {
            mark(value)
        } else {
            value
        };
        if anchor > 0 {
            anchors.insert(anchor, value.clone());
        }
        match stack.last_mut() {
            None => {
                // A scalar document: an aggregate of one item, as in Salt.
                result = Some(if value.is_object() || value.is_array() {
                    value
                } else {
                    mark(value)
                });
            }
            Some(Frame::Seq { items, .. }) => items.push(value),
            Some(Frame::Map {
                entries,
                key,
                key_aggregates,
                ..
            }) => match key.take() {
                None => {
                    let text = match &value {
                        Value::String(s) => s.clone(),
                        Value::Null => "None".into(),
                        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
                        Value::Number(n) => n.to_string(),
                        _ => {
                            return Err(err(
                                "while constructing a mapping found unacceptable key".into(),
                                line,
                            ))
                        }
                    };
                    if aggregate {
                        tracing::warn!("!aggregate applies on values only, not on keys");
                    }
                    *key_aggregates = aggregate;
                    *key = Some((text, reset));
                }
                Some((k, reset)) => {
                    let value = if std::mem::take(key_aggregates) {
                        mark(value)
                    } else {
                        value
                    };
                    let value = match entries.get(&k) {
                        Some(old) if !reset => merge_duplicate(old, &value, shallow && !aggregate),
                        _ => value,
                    };
                    entries.insert(k, value);
                }
            },
        }
    }
    Ok(result.unwrap_or(Value::Null))
}

/// Whether the node being built is inside an `!aggregate`/`!reset` node.
fn in_deep(stack: &[Frame]) -> bool {
    matches!(
        stack.last(),
        Some(Frame::Seq { deep: true, .. } | Frame::Map { deep: true, .. })
    )
}

/// A key given again in one mapping: `merge_recursive(old, new)` as Salt
/// runs it while constructing. A list Salt has not filled yet when it
/// merges (one built outside any `!aggregate`/`!reset` node: `shallow`)
/// comes out empty, as it does in Salt 3008.5 (`a: {x: [1]}` then
/// `a: {x: [2]}` gives `a: {x: []}`).
fn merge_duplicate(a: &Value, b: &Value, shallow: bool) -> Value {
    match (a, b) {
        (Value::Object(am), Value::Object(bm)) => {
            let mut out = if is_marked(a) && is_marked(b) {
                am.clone()
            } else {
                bm.clone()
            };
            let shallow = shallow && !is_marked(b);
            for (k, v) in bm {
                let v = match am.get(k) {
                    Some(old) if k != MARK => merge_duplicate(old, v, shallow),
                    _ => v.clone(),
                };
                out.insert(k.clone(), v);
            }
            Value::Object(out)
        }
        (Value::Array(_), Value::Array(_)) if is_marked(a) && is_marked(b) => aggregate(a, b, 0),
        (_, Value::Array(_)) if shallow && !is_marked(b) => Value::Array(Vec::new()),
        _ => b.clone(),
    }
}

/// (`!aggregate`, `!reset`) of a node's tag.
fn sls_tag(tag: Option<&Tag>) -> (bool, bool) {
    match tag {
        Some(t) if t.handle == "!" => (t.suffix == "aggregate", t.suffix == "reset"),
        _ => (false, false),
    }
}

/// A scalar's value: plain ones resolved with Salt's YAML rules (also under
/// `!aggregate`/`!reset`, which resolve the scalar as if untagged).
fn scalar_value(
    text: std::borrow::Cow<'_, str>,
    style: ScalarStyle,
    tag: Option<&Tag>,
    sls_tagged: bool,
) -> Result<Value, String> {
    match tag {
        None => {}
        Some(_) if sls_tagged => {}
        Some(t) if t.handle == "!!" || t.is_yaml_core_schema() => {
            return match t.suffix.as_str() {
                "str" => Ok(Value::String(text.into_owned())),
                "int" | "float" | "bool" | "null" => Ok(scalar::resolve_plain_owned(text)),
                other => Err(format!(
                    "could not determine a constructor for the tag 'tag:yaml.org,2002:{other}'"
                )),
            }
        }
        Some(t) => {
            return Err(format!(
                "could not determine a constructor for the tag '{}{}'",
                t.handle, t.suffix
            ))
        }
    }
    Ok(match style {
        ScalarStyle::Plain => scalar::resolve_plain_owned(text),
        _ => Value::String(text.into_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plain(text: &str) -> Value {
        strip(load_marked(text).unwrap())
    }

    #[test]
    fn documented_examples_load_as_in_salt() {
        // salt/serializers/yamlex.py's docstring examples.
        assert_eq!(
            plain("placeholder: !aggregate foo\nplaceholder: !aggregate bar\nplaceholder: !aggregate baz\n"),
            json!({"placeholder": ["foo", "bar", "baz"]})
        );
        assert_eq!(
            plain("placeholder: {!aggregate foo: {foo: 42}}\nplaceholder: {!aggregate foo: {bar: null}}\n!reset placeholder: {!aggregate foo: {baz: inga}}\n"),
            json!({"placeholder": {"foo": {"baz": "inga"}}})
        );
        // Unmarked duplicates: the later value, its mapping's keys only.
        assert_eq!(plain("a: 1\na: 2\n"), json!({"a": 2}));
        assert_eq!(
            plain("a: {x: 1, y: 1}\na: {y: 2}\n"),
            json!({"a": {"y": 2}})
        );
        assert_eq!(
            plain("a: !aggregate {x: 1, y: 1}\na: !aggregate {y: 2}\n"),
            json!({"a": {"x": 1, "y": 2}})
        );
        assert_eq!(plain(""), Value::Null);
        // Recorded from Salt 3008.5 (salt.serializers.yamlex.deserialize):
        // lists Salt has not filled yet when it merges come out empty.
        assert_eq!(
            plain("l: !aggregate [1, 2]\nl: !aggregate [2, 3]\nl: [9]\n"),
            json!({"l": []})
        );
        assert_eq!(
            plain("l: !aggregate [1, 2]\nl: !aggregate [2, 3]\n"),
            json!({"l": [1, 2, 3]})
        );
        assert_eq!(
            plain("a: {x: [1], y: [5]}\na: {x: [2], z: [3]}\n"),
            json!({"a": {"x": [], "z": [3]}})
        );
        assert_eq!(plain("a: [1]\na: {k: [1]}\n"), json!({"a": {"k": [1]}}));
        assert_eq!(
            plain("a: !aggregate {x: [1]}\na: !aggregate {x: [2]}\n"),
            json!({"a": {"x": [2]}})
        );
        assert_eq!(plain("a: !aggregate [x]\na: y\n"), json!({"a": "y"}));
        assert_eq!(
            plain("n: 010\nq: \"010\"\nb: yes\n"),
            json!({"n": 10, "q": "010", "b": true})
        );
    }
}
