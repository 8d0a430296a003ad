//! The YAML loader: saphyr-parser's events folded into Salt data, with Salt's
//! rules (see [`super::scalar`]), merge keys, and PyYAML-shaped errors.

use std::collections::HashMap;

use saphyr_parser::{Event, Marker, Parser, ScalarStyle, ScanError, Span, Tag};

use super::scalar::{self, ScalarKind};
use super::YamlError;
use crate::{Map, Value};

/// The name PyYAML gives a string stream in its error marks.
const STREAM_NAME: &str = "<unicode string>";

/// Formats a mark the way PyYAML does (1-based line and column).
fn mark_text(mark: &Marker) -> String {
    format!(
        "  in \"{STREAM_NAME}\", line {}, column {}",
        mark.line(),
        mark.col() + 1
    )
}

/// A PyYAML-style two-part error: context (where the construct began) and problem.
fn contextual_error(
    context: &str,
    context_mark: &Marker,
    problem: &str,
    problem_mark: &Marker,
) -> YamlError {
    YamlError {
        message: format!(
            "{context}\n{}\n{problem}\n{}",
            mark_text(context_mark),
            mark_text(problem_mark)
        ),
        line: Some(problem_mark.line()),
    }
}

fn problem_error(problem: &str, problem_mark: &Marker) -> YamlError {
    YamlError {
        message: format!("{problem}\n{}", mark_text(problem_mark)),
        line: Some(problem_mark.line()),
    }
}

/// A collection being built, with where it started (for error context).
enum Frame {
    Sequence {
        start: Marker,
        flow: bool,
        anchor: usize,
        items: Vec<Value>,
    },
    Mapping(MappingFrame),
}

/// A mapping being built: explicit entries, merge sources, and the key
/// waiting for its value.
struct MappingFrame {
    start: Marker,
    flow: bool,
    anchor: usize,
    /// (key as text, Python identity of the key, value, where the key was)
    entries: Vec<(String, KeyIdentity, Value, Marker)>,
    merges: Vec<Map>,
    pending_key: Option<PendingKey>,
}

enum PendingKey {
    Key(String, KeyIdentity, Marker),
    Merge(Marker),
}

/// What makes two keys the same key in Python. A string key is only equal
/// to the same string, which the mapping itself detects, so only the other
/// keys carry an identity (`True == 1 == 1.0`, `False == 0`).
#[derive(PartialEq, Eq)]
enum KeyIdentity {
    Str,
    Other(String),
}

/// Loads a single YAML document with Salt's rules. An empty stream is `Null`.
pub fn load(text: &str) -> Result<Value, YamlError> {
    let mut loader = Loader {
        chars: if text.is_ascii() {
            None
        } else {
            Some(text.chars().collect())
        },
        text,
        anchors: HashMap::new(),
        stack: Vec::new(),
        result: None,
        documents: 0,
    };
    let mut parser = Parser::new_from_str(text);
    loop {
        let next = parser.next_event();
        let (event, span) = match next {
            None => break,
            Some(Ok(pair)) => pair,
            Some(Err(error)) => return Err(loader.scan_error(&error)),
        };
        if matches!(event, Event::StreamEnd) {
            break;
        }
        loader.event(event, span)?;
    }
    Ok(loader.result.unwrap_or(Value::Null))
}

struct Loader<'a> {
    text: &'a str,
    /// The text as characters when it is not ASCII (saphyr's marks count characters).
    chars: Option<Vec<char>>,
    anchors: HashMap<usize, Value>,
    stack: Vec<Frame>,
    result: Option<Value>,
    documents: usize,
}

impl Loader<'_> {
    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), YamlError> {
        match event {
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(contextual_error(
                        "expected a single document in the stream",
                        &Marker::new(0, 1, 0),
                        "but found another document",
                        &span.start,
                    ));
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                let is_merge = style == ScalarStyle::Plain && tag.is_none() && &*text == "<<";
                let value = self.scalar(text, style, tag.as_deref(), &span.start)?;
                if anchor > 0 {
                    self.anchors.insert(anchor, value.clone());
                }
                self.push_node(value, span.start, is_merge)?;
            }
            Event::Alias(anchor) => {
                let value = self
                    .anchors
                    .get(&anchor)
                    .cloned()
                    .ok_or_else(|| problem_error("found undefined alias", &span.start))?;
                self.push_node(value, span.start, false)?;
            }
            Event::SequenceStart(anchor, tag) => {
                check_collection_tag(tag.as_deref(), "seq", &span.start)?;
                let flow = self.is_flow_start(&span, '[');
                self.stack.push(Frame::Sequence {
                    start: span.start,
                    flow,
                    anchor,
                    items: Vec::new(),
                });
            }
            Event::MappingStart(anchor, tag) => {
                check_collection_tag(tag.as_deref(), "map", &span.start)?;
                let flow = self.is_flow_start(&span, '{');
                self.stack.push(Frame::Mapping(MappingFrame {
                    start: span.start,
                    flow,
                    anchor,
                    entries: Vec::new(),
                    merges: Vec::new(),
                    pending_key: None,
                }));
            }
            Event::SequenceEnd => {
                if let Some(Frame::Sequence {
                    start,
                    anchor,
                    items,
                    ..
                }) = self.stack.pop()
                {
                    let value = Value::Array(items);
                    if anchor > 0 {
                        self.anchors.insert(anchor, value.clone());
                    }
                    self.push_node(value, start, false)?;
                }
            }
            Event::MappingEnd => {
                if let Some(Frame::Mapping(frame)) = self.stack.pop() {
                    let start = frame.start;
                    let anchor = frame.anchor;
                    let value = Value::Object(finish_mapping(frame)?);
                    if anchor > 0 {
                        self.anchors.insert(anchor, value.clone());
                    }
                    self.push_node(value, start, false)?;
                }
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => {}
        }
        Ok(())
    }

    fn is_flow_start(&self, span: &Span, opener: char) -> bool {
        let at = span.start.index();
        let found = match &self.chars {
            Some(chars) => chars.get(at).copied(),
            None => self.text.as_bytes().get(at).map(|b| char::from(*b)),
        };
        found == Some(opener)
    }

    /// Places a finished node into its parent (or as the document).
    fn push_node(
        &mut self,
        value: Value,
        mark: Marker,
        is_merge_key: bool,
    ) -> Result<(), YamlError> {
        match self.stack.last_mut() {
            None => self.result = Some(value),
            Some(Frame::Sequence { items, .. }) => items.push(value),
            Some(Frame::Mapping(frame)) => match frame.pending_key.take() {
                None if is_merge_key => frame.pending_key = Some(PendingKey::Merge(mark)),
                None => {
                    let identity = key_identity(&value);
                    let key = key_string(value).ok_or_else(|| {
                        contextual_error(
                            "while constructing a mapping",
                            &frame.start,
                            "found unacceptable key (unhashable type)",
                            &mark,
                        )
                    })?;
                    frame.pending_key = Some(PendingKey::Key(key, identity, mark));
                }
                Some(PendingKey::Key(key, identity, key_mark)) => {
                    frame.entries.push((key, identity, value, key_mark))
                }
                Some(PendingKey::Merge(merge_mark)) => {
                    let start = frame.start;
                    add_merge_source(frame, value, &start, &merge_mark)?;
                }
            },
        }
        Ok(())
    }

    fn scalar(
        &self,
        text: std::borrow::Cow<'_, str>,
        style: ScalarStyle,
        tag: Option<&Tag>,
        mark: &Marker,
    ) -> Result<Value, YamlError> {
        let Some(tag) = tag else {
            return Ok(match style {
                ScalarStyle::Plain => scalar::resolve_plain_owned(text),
                _ => Value::String(text.into_owned()),
            });
        };
        let text = &*text;
        let core = tag.is_yaml_core_schema() || tag.handle == "!!";
        let bad_tag = || {
            contextual_error(
                "while constructing a Python object",
                mark,
                &format!(
                    "could not determine a constructor for the tag '{}'",
                    tag_uri(tag)
                ),
                mark,
            )
        };
        if tag.handle == "!" && tag.suffix.is_empty() {
            return Ok(Value::String(text.to_string()));
        }
        if !core {
            return Err(bad_tag());
        }
        let invalid = |kind: &str| problem_error(&format!("invalid {kind} literal '{text}'"), mark);
        match tag.suffix.as_str() {
            "str" | "timestamp" => Ok(Value::String(text.to_string())),
            // Python gets bytes; Salt data is text, so the decoded bytes as UTF-8.
            "binary" => {
                use base64::Engine as _;
                let compact: String = text.split_whitespace().collect();
                base64::engine::general_purpose::STANDARD
                    .decode(compact)
                    .map(|bytes| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
                    .map_err(|e| problem_error(&format!("failed to decode base64 data: {e}"), mark))
            }
            "null" => Ok(Value::Null),
            "bool" => match scalar::classify_plain(text) {
                ScalarKind::Bool => Ok(Value::Bool(scalar::bool_value(text))),
                _ => Err(invalid("bool")),
            },
            "int" => scalar::int_value(text).ok_or_else(|| invalid("int")),
            "float" => scalar::float_value(text)
                .or_else(|| {
                    scalar::int_value(text)
                        .and_then(|v| v.as_f64())
                        .and_then(serde_json::Number::from_f64)
                        .map(Value::Number)
                })
                .ok_or_else(|| invalid("float")),
            _ => Err(bad_tag()),
        }
    }

    /// Converts a scanner/parser error into PyYAML's two-part shape, using the
    /// innermost open collection as the context mark.
    fn scan_error(&self, error: &ScanError) -> YamlError {
        let info = error.info();
        let mark = error.marker();
        if info.contains("unknown anchor") {
            return problem_error("found undefined alias", mark);
        }
        if let Some((context, problem)) = info.split_once(", ") {
            if context.starts_with("while parsing") {
                let context_mark = self.context_mark(context).unwrap_or(*mark);
                let problem =
                    problem.replace("expected ',' or ']'", "did not find expected ',' or ']'");
                return contextual_error(context, &context_mark, &problem, mark);
            }
        }
        if info == "invalid indentation" {
            // libyaml does not check indentation inside flow collections; what
            // it reports instead is the unclosed collection.
            if let Some((flow_mark, is_sequence)) = self.innermost_flow() {
                let (context, problem) = if is_sequence {
                    (
                        "while parsing a flow sequence",
                        "did not find expected ',' or ']'",
                    )
                } else {
                    (
                        "while parsing a flow mapping",
                        "did not find expected ',' or '}'",
                    )
                };
                return contextual_error(context, &flow_mark, problem, mark);
            }
        }
        // Scanner errors: Salt prints only libyaml's problem text.
        let problem = match info.split_once(", ") {
            Some((context, problem)) if context.starts_with("while scanning") => problem,
            _ => info,
        };
        let problem = if problem.contains("tab") {
            "found character that cannot start any token"
        } else {
            problem
        };
        YamlError {
            message: problem.to_string(),
            line: Some(mark.line()),
        }
    }

    /// The innermost open flow collection: its start and whether it is a sequence.
    fn innermost_flow(&self) -> Option<(Marker, bool)> {
        self.stack.iter().rev().find_map(|frame| match frame {
            Frame::Sequence {
                start, flow: true, ..
            } => Some((*start, true)),
            Frame::Mapping(m) if m.flow => Some((m.start, false)),
            _ => None,
        })
    }

    fn context_mark(&self, context: &str) -> Option<Marker> {
        let want_flow = context.contains("flow");
        let want_sequence = context.contains("sequence") || context.contains("collection");
        let want_mapping = context.contains("mapping");
        self.stack.iter().rev().find_map(|frame| match frame {
            Frame::Sequence { start, flow, .. } if want_sequence && *flow == want_flow => {
                Some(*start)
            }
            Frame::Mapping(m) if want_mapping && m.flow == want_flow => Some(m.start),
            _ if !want_sequence && !want_mapping => None,
            _ => None,
        })
    }
}

fn tag_uri(tag: &Tag) -> String {
    if tag.handle == "!!" {
        format!("tag:yaml.org,2002:{}", tag.suffix)
    } else if tag.is_yaml_core_schema() {
        format!("{}{}", tag.handle, tag.suffix)
    } else {
        tag.to_string()
    }
}

fn check_collection_tag(tag: Option<&Tag>, expected: &str, mark: &Marker) -> Result<(), YamlError> {
    let Some(tag) = tag else { return Ok(()) };
    let core = tag.is_yaml_core_schema() || tag.handle == "!!";
    let accepted = (core
        && (tag.suffix == expected || (expected == "map" && tag.suffix == "omap")))
        || (tag.handle == "!" && tag.suffix.is_empty());
    if accepted {
        Ok(())
    } else {
        Err(contextual_error(
            "while constructing a Python object",
            mark,
            &format!(
                "could not determine a constructor for the tag '{}'",
                tag_uri(tag)
            ),
            mark,
        ))
    }
}

/// Merge sources (`<<: *a` or `<<: [*a, *b]`) as Salt's flatten_mapping reads them.
fn add_merge_source(
    frame: &mut MappingFrame,
    value: Value,
    start: &Marker,
    mark: &Marker,
) -> Result<(), YamlError> {
    let expected = || {
        contextual_error(
            "while constructing a mapping",
            start,
            "expected a mapping or list of mappings for merging, but found scalar",
            mark,
        )
    };
    match value {
        Value::Object(map) => frame.merges.push(map),
        Value::Array(items) => {
            // Salt reverses the list, so later sources come first.
            let mut maps = Vec::new();
            for item in items {
                match item {
                    Value::Object(map) => maps.push(map),
                    _ => return Err(expected()),
                }
            }
            maps.reverse();
            frame.merges.extend(maps);
        }
        _ => return Err(expected()),
    }
    Ok(())
}

/// Builds the mapping: merged entries whose key is not set explicitly come
/// first, then the explicit ones; any duplicate is Salt's "conflicting ID".
fn finish_mapping(frame: MappingFrame) -> Result<Map, YamlError> {
    let mut merged: Vec<(String, KeyIdentity, Value, Marker)> = Vec::new();
    if !frame.merges.is_empty() {
        let explicit: std::collections::HashSet<&str> = frame
            .entries
            .iter()
            .map(|(k, _, _, _)| k.as_str())
            .collect();
        for source in &frame.merges {
            for (key, value) in source {
                if !explicit.contains(key.as_str()) {
                    merged.push((key.clone(), KeyIdentity::Str, value.clone(), frame.start));
                }
            }
        }
    }
    let mut map = Map::with_capacity(merged.len() + frame.entries.len());
    // Identities of the non-string keys seen so far (rare: a short list).
    let mut seen: Vec<String> = Vec::new();
    for (key, identity, value, mark) in merged.into_iter().chain(frame.entries) {
        let repeated = match identity {
            KeyIdentity::Str => false,
            KeyIdentity::Other(id) => {
                let repeated = seen.contains(&id);
                seen.push(id);
                repeated
            }
        };
        if repeated || map.contains_key(&key) {
            return Err(contextual_error(
                "while constructing a mapping",
                &frame.start,
                &format!("found conflicting ID '{key}'"),
                &mark,
            ));
        }
        map.insert(key, value);
    }
    Ok(map)
}

/// What makes two keys the same key in Python: `True == 1 == 1.0`,
/// `False == 0`, and strings only equal strings.
fn key_identity(value: &Value) -> KeyIdentity {
    KeyIdentity::Other(match value {
        Value::Bool(b) => format!("n:{}", u8::from(*b)),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => format!("n:{}", f as i64),
            _ => format!("n:{n}"),
        },
        Value::Null => "none".to_string(),
        Value::String(_) => return KeyIdentity::Str,
        other => format!("o:{other}"),
    })
}

/// Mapping keys become strings as Python's `str()` prints them
/// (`True`, `1`, `None`); collections cannot be keys.
fn key_string(value: Value) -> Option<String> {
    Some(match value {
        Value::String(s) => s,
        Value::Bool(true) => "True".to_string(),
        Value::Bool(false) => "False".to_string(),
        Value::Null => "None".to_string(),
        Value::Number(n) => python_number(&n),
        Value::Array(_) | Value::Object(_) => return None,
    })
}

pub(crate) use halite_salt_rules::pyfmt::python_number;
