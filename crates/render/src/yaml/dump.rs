//! A YAML writer that reproduces PyYAML's `safe_dump` output as Salt uses it:
//! the `yaml` Jinja filter (flow style, keys sorted) and the `yaml` outputter
//! (block style). Scalar style choice, quoting and line wrapping at 80 columns
//! follow PyYAML's emitter so that text Salt users paste or diff looks the same.

use halite_salt_rules::pyyaml::{Cursor, BEST_INDENT, BEST_WIDTH};

use crate::Value;

/// How collections are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpStyle {
    /// `{a: 1, b: [x, y]}` (`default_flow_style=True`).
    Flow,
    /// One key per line, sequences as `- item` (`default_flow_style=False`).
    Block,
    /// PyYAML's `default_flow_style=None`: a collection holding only
    /// scalars is written in flow style, the others in block style
    /// (`a: [1, 2]`), as Salt's `yaml` serializer writes.
    Leaves,
}

/// Whether a collection holds no collection (flow style under [`DumpStyle::Leaves`]).
fn holds_only_scalars(value: &Value) -> bool {
    match value {
        Value::Array(items) => !items.iter().any(|v| v.is_array() || v.is_object()),
        Value::Object(map) => !map.values().any(|v| v.is_array() || v.is_object()),
        _ => true,
    }
}

/// Options of one dump.
#[derive(Debug, Clone, Copy)]
pub struct DumpOptions {
    /// Block or flow style, as Salt's dumpers choose.
    pub style: DumpStyle,
    /// Sort mapping keys (PyYAML's `sort_keys=True`, used for plain dicts).
    pub sort_keys: bool,
}

/// Dumps `value` as PyYAML's `safe_dump(value, default_flow_style=...)` would,
/// including the trailing newline (and `...` after a lone plain scalar).
pub fn dump_with(value: &Value, options: DumpOptions) -> String {
    let mut emitter = Emitter::new(options);
    emitter.document(value);
    emitter.cursor.out
}

/// PyYAML's emitter: the shared [`Cursor`] (which it dereferences to)
/// and the nesting only collections need.
struct Emitter {
    cursor: Cursor,
    options: DumpOptions,
    indents: Vec<Option<usize>>,
    flow_level: usize,
}

impl std::ops::Deref for Emitter {
    type Target = Cursor;
    fn deref(&self) -> &Cursor {
        &self.cursor
    }
}

impl std::ops::DerefMut for Emitter {
    fn deref_mut(&mut self) -> &mut Cursor {
        &mut self.cursor
    }
}

/// A scalar ready to write: its text and whether it may be plain.
struct ScalarText {
    text: String,
    plain_ok: bool,
}

impl Emitter {
    fn new(options: DumpOptions) -> Self {
        Emitter {
            // Salt's dumpers pass `allow_unicode=True`.
            cursor: Cursor::new(true),
            options,
            indents: Vec::new(),
            flow_level: 0,
        }
    }

    fn document(&mut self, value: &Value) {
        self.node(value, false, true);
        self.write_line_break();
        if self.open_ended {
            self.write_raw("...");
            self.write_line_break();
        }
    }

    fn increase_indent(&mut self, flow: bool, indentless: bool) {
        self.indents.push(self.indent);
        self.indent = match self.indent {
            None => Some(if flow { BEST_INDENT } else { 0 }),
            Some(current) if !indentless => Some(current + BEST_INDENT),
            Some(current) => Some(current),
        };
    }

    fn decrease_indent(&mut self) {
        self.indent = self.indents.pop().flatten();
    }

    fn node(&mut self, value: &Value, simple_key: bool, root: bool) {
        self.node_in(value, simple_key, root, false);
    }

    fn node_in(&mut self, value: &Value, simple_key: bool, root: bool, mapping_context: bool) {
        match value {
            Value::Array(items) => {
                if self.flow_level > 0
                    || self.options.style == DumpStyle::Flow
                    || items.is_empty()
                    || (self.options.style == DumpStyle::Leaves && holds_only_scalars(value))
                {
                    self.flow_sequence(items);
                } else {
                    self.block_sequence(items, mapping_context);
                }
            }
            Value::Object(map) => {
                let entries = self.entries(map);
                if self.flow_level > 0
                    || self.options.style == DumpStyle::Flow
                    || entries.is_empty()
                    || (self.options.style == DumpStyle::Leaves && holds_only_scalars(value))
                {
                    self.flow_mapping(&entries);
                } else {
                    self.block_mapping(&entries);
                }
            }
            scalar => {
                let prepared = prepare_scalar(scalar);
                self.scalar(&prepared, simple_key, root);
            }
        }
    }

    fn entries<'a>(&self, map: &'a crate::Map) -> Vec<(&'a String, &'a Value)> {
        let mut entries: Vec<_> = map.iter().collect();
        if self.options.sort_keys {
            entries.sort_by(|a, b| a.0.cmp(b.0));
        }
        entries
    }

    fn flow_sequence(&mut self, items: &[Value]) {
        self.write_indicator("[", true, true, false);
        self.flow_level += 1;
        self.increase_indent(true, false);
        for (index, item) in items.iter().enumerate() {
            if index > 0 {
                self.write_indicator(",", false, false, false);
            }
            if self.column > BEST_WIDTH {
                self.write_indent();
            }
            self.node(item, false, false);
        }
        self.decrease_indent();
        self.flow_level -= 1;
        self.write_indicator("]", false, false, false);
    }

    fn flow_mapping(&mut self, entries: &[(&String, &Value)]) {
        self.write_indicator("{", true, true, false);
        self.flow_level += 1;
        self.increase_indent(true, false);
        for (index, (key, value)) in entries.iter().enumerate() {
            if index > 0 {
                self.write_indicator(",", false, false, false);
            }
            if self.column > BEST_WIDTH {
                self.write_indent();
            }
            let key_value = Value::String((*key).clone());
            if is_simple_key(key) {
                self.node(&key_value, true, false);
                self.write_indicator(":", false, false, false);
            } else {
                self.write_indicator("?", true, false, false);
                self.node(&key_value, false, false);
                if self.column > BEST_WIDTH {
                    self.write_indent();
                }
                self.write_indicator(":", true, false, false);
            }
            self.node(value, false, false);
        }
        self.decrease_indent();
        self.flow_level -= 1;
        self.write_indicator("}", false, false, false);
    }

    fn block_sequence(&mut self, items: &[Value], mapping_context: bool) {
        let indentless = mapping_context && !self.indention;
        self.increase_indent(false, indentless);
        for item in items {
            self.write_indent();
            self.write_indicator("-", true, false, true);
            self.node_in(item, false, false, false);
        }
        self.decrease_indent();
    }

    fn block_mapping(&mut self, entries: &[(&String, &Value)]) {
        self.increase_indent(false, false);
        for (key, value) in entries {
            self.write_indent();
            let key_value = Value::String((*key).clone());
            if is_simple_key(key) {
                self.node(&key_value, true, false);
                self.write_indicator(":", false, false, false);
            } else {
                self.write_indicator("?", true, false, true);
                self.node_in(&key_value, false, false, true);
                self.write_indent();
                self.write_indicator(":", true, false, true);
            }
            self.node_in(value, false, false, true);
        }
        self.decrease_indent();
    }

    fn scalar(&mut self, scalar: &ScalarText, simple_key: bool, root: bool) {
        let analysis = analyze(&scalar.text);
        let plain_allowed = if self.flow_level > 0 {
            analysis.allow_flow_plain
        } else {
            analysis.allow_block_plain
        };
        let split = !simple_key;
        self.increase_indent(true, false);
        if scalar.plain_ok
            && !(simple_key && (analysis.empty || analysis.multiline))
            && plain_allowed
        {
            if root {
                self.open_ended = true;
            }
            self.write_plain(&scalar.text, split);
        } else if analysis.allow_single_quoted && !(simple_key && analysis.multiline) {
            self.write_single_quoted(&scalar.text, split);
        } else {
            self.write_double_quoted(&scalar.text, split);
        }
        self.decrease_indent();
    }

    fn write_plain(&mut self, text: &str, split: bool) {
        if text.is_empty() {
            return;
        }
        if !self.whitespace {
            self.write_raw(" ");
        }
        self.whitespace = false;
        self.indention = false;
        let chars: Vec<char> = text.chars().collect();
        let mut spaces = false;
        let mut start = 0;
        let mut end = 0;
        while end <= chars.len() {
            let ch = chars.get(end).copied();
            if spaces {
                if ch != Some(' ') {
                    if start + 1 == end && self.column > BEST_WIDTH && split {
                        self.write_indent();
                        self.whitespace = false;
                        self.indention = false;
                    } else {
                        let data: String = chars[start..end].iter().collect();
                        self.write_raw(&data);
                    }
                    start = end;
                }
            } else if ch.is_none() || ch == Some(' ') {
                let data: String = chars[start..end].iter().collect();
                self.write_raw(&data);
                start = end;
            }
            if let Some(c) = ch {
                spaces = c == ' ';
            }
            end += 1;
        }
    }

    fn write_single_quoted(&mut self, text: &str, split: bool) {
        self.write_indicator("'", true, false, false);
        let chars: Vec<char> = text.chars().collect();
        let mut spaces = false;
        let mut breaks = false;
        let mut start = 0;
        let mut end = 0;
        while end <= chars.len() {
            let ch = chars.get(end).copied();
            if spaces {
                if ch != Some(' ') {
                    if start + 1 == end
                        && self.column > BEST_WIDTH
                        && split
                        && start != 0
                        && end != chars.len()
                    {
                        self.write_indent();
                    } else {
                        let data: String = chars[start..end].iter().collect();
                        self.write_raw(&data);
                    }
                    start = end;
                }
            } else if breaks {
                if ch.is_none_or(|c| !is_break(c)) {
                    if chars[start] == '\n' {
                        self.write_line_break();
                    }
                    for br in &chars[start..end] {
                        if *br == '\n' {
                            self.write_line_break();
                        } else {
                            self.out.push(*br);
                            self.write_line_break();
                        }
                    }
                    self.write_indent();
                    start = end;
                }
            } else if ch.is_none_or(|c| c == ' ' || is_break(c) || c == '\'') && start < end {
                let data: String = chars[start..end].iter().collect();
                self.write_raw(&data);
                start = end;
            }
            if ch == Some('\'') {
                self.write_raw("''");
                start = end + 1;
            }
            if let Some(c) = ch {
                spaces = c == ' ';
                breaks = is_break(c);
            }
            end += 1;
        }
        self.write_indicator("'", false, false, false);
    }
}

/// PyYAML's `check_simple_key` for a string key: not empty, one line, and
/// shorter than 128 characters counting its `!!str` tag.
fn is_simple_key(key: &str) -> bool {
    !key.is_empty() && !key.chars().any(is_break) && key.chars().count() + 5 < 128
}

fn is_break(ch: char) -> bool {
    matches!(ch, '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

fn is_printable(ch: char) -> bool {
    matches!(ch, '\u{20}'..='\u{7e}' | '\u{85}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..='\u{10fffe}')
        && ch != '\u{feff}'
}

/// Turns a scalar value into its YAML text as PyYAML's SafeRepresenter does.
fn prepare_scalar(value: &Value) -> ScalarText {
    match value {
        Value::Null => ScalarText {
            text: "null".into(),
            plain_ok: true,
        },
        Value::Bool(b) => ScalarText {
            text: if *b { "true" } else { "false" }.into(),
            plain_ok: true,
        },
        Value::Number(n) => {
            let text = if n.is_f64() {
                let repr = crate::pyfmt::float_repr(n.as_f64().unwrap_or_default()).to_lowercase();
                if !repr.contains('.') && repr.contains('e') {
                    repr.replacen('e', ".0e", 1)
                } else {
                    repr
                }
            } else {
                n.to_string()
            };
            ScalarText {
                text,
                plain_ok: true,
            }
        }
        Value::String(s) => ScalarText {
            text: s.clone(),
            plain_ok: super::scalar::plain_reads_back_as_string(s),
        },
        Value::Array(_) | Value::Object(_) => ScalarText {
            text: String::new(),
            plain_ok: false,
        },
    }
}

/// PyYAML's `analyze_scalar`: which styles can carry this text.
struct Analysis {
    empty: bool,
    multiline: bool,
    allow_flow_plain: bool,
    allow_block_plain: bool,
    allow_single_quoted: bool,
}

fn analyze(text: &str) -> Analysis {
    if text.is_empty() {
        return Analysis {
            empty: true,
            multiline: false,
            allow_flow_plain: false,
            allow_block_plain: true,
            allow_single_quoted: true,
        };
    }
    let chars: Vec<char> = text.chars().collect();
    let is_space_or_break = |c: char| {
        matches!(
            c,
            '\0' | ' ' | '\t' | '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}'
        )
    };
    let mut block_indicators = false;
    let mut flow_indicators = false;
    let mut line_breaks = false;
    let mut special_characters = false;
    let (mut leading_space, mut leading_break, mut trailing_space, mut trailing_break) =
        (false, false, false, false);
    let (mut break_space, mut space_break) = (false, false);
    if text.starts_with("---") || text.starts_with("...") {
        block_indicators = true;
        flow_indicators = true;
    }
    let mut preceded_by_whitespace = true;
    let mut followed_by_whitespace = chars.len() == 1 || is_space_or_break(chars[1]);
    let mut previous_space = false;
    let mut previous_break = false;
    for (index, &ch) in chars.iter().enumerate() {
        if index == 0 {
            if "#,[]{}&*!|>'\"%@`".contains(ch) {
                flow_indicators = true;
                block_indicators = true;
            }
            if ch == '?' || ch == ':' {
                flow_indicators = true;
                if followed_by_whitespace {
                    block_indicators = true;
                }
            }
            if ch == '-' && followed_by_whitespace {
                flow_indicators = true;
                block_indicators = true;
            }
        } else {
            if ",?[]{}".contains(ch) {
                flow_indicators = true;
            }
            if ch == ':' {
                flow_indicators = true;
                if followed_by_whitespace {
                    block_indicators = true;
                }
            }
            if ch == '#' && preceded_by_whitespace {
                flow_indicators = true;
                block_indicators = true;
            }
        }
        if is_break(ch) {
            line_breaks = true;
        }
        if !(ch == '\n' || ('\u{20}'..='\u{7e}').contains(&ch) || is_printable(ch)) {
            special_characters = true;
        }
        if ch == ' ' {
            if index == 0 {
                leading_space = true;
            }
            if index == chars.len() - 1 {
                trailing_space = true;
            }
            if previous_break {
                break_space = true;
            }
            previous_space = true;
            previous_break = false;
        } else if is_break(ch) {
            if index == 0 {
                leading_break = true;
            }
            if index == chars.len() - 1 {
                trailing_break = true;
            }
            if previous_space {
                space_break = true;
            }
            previous_space = false;
            previous_break = true;
        } else {
            previous_space = false;
            previous_break = false;
        }
        preceded_by_whitespace = is_space_or_break(ch);
        followed_by_whitespace = index + 2 >= chars.len() || is_space_or_break(chars[index + 2]);
    }
    let _ = space_break;
    let mut allow_flow_plain = true;
    let mut allow_block_plain = true;
    let mut allow_single_quoted = true;
    if leading_space || leading_break || trailing_space || trailing_break {
        allow_flow_plain = false;
        allow_block_plain = false;
    }
    if break_space || special_characters {
        allow_flow_plain = false;
        allow_block_plain = false;
        allow_single_quoted = false;
    }
    if line_breaks {
        allow_flow_plain = false;
        allow_block_plain = false;
    }
    if flow_indicators {
        allow_flow_plain = false;
    }
    if block_indicators {
        allow_block_plain = false;
    }
    Analysis {
        empty: false,
        multiline: line_breaks,
        allow_flow_plain,
        allow_block_plain,
        allow_single_quoted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flow(value: &Value) -> String {
        dump_with(
            value,
            DumpOptions {
                style: DumpStyle::Flow,
                sort_keys: true,
            },
        )
    }
    fn block(value: &Value) -> String {
        dump_with(
            value,
            DumpOptions {
                style: DumpStyle::Block,
                sort_keys: true,
            },
        )
    }

    #[test]
    fn leaves_style_flows_only_collections_of_scalars_like_pyyaml_none() {
        // PyYAML: yaml.dump({'b': [1, {'x': 1}], 'a': {'c': 'x'}}, default_flow_style=None)
        let value = json!({"b": [1, {"x": 1}], "a": {"c": "x"}});
        let options = DumpOptions {
            style: DumpStyle::Leaves,
            sort_keys: true,
        };
        assert_eq!(dump_with(&value, options), "a: {c: x}\nb:\n- 1\n- {x: 1}\n");
        assert_eq!(dump_with(&json!([1, 2]), options), "[1, 2]\n");
    }

    #[test]
    fn flow_style_sorts_keys_and_quotes_lookalikes() {
        let value = json!({"b": ["yes", "65", "*", "", "plain text"], "a": 1, "c": {"x": null, "y": true, "z": 1.5}});
        assert_eq!(
            flow(&value),
            "{a: 1, b: ['yes', '65', '*', '', plain text], c: {x: null, y: true, z: 1.5}}\n"
        );
    }

    #[test]
    fn indicators_and_special_characters_pick_pyyaml_styles() {
        let value = json!({"a": "its", "b": "a: b", "c": "-x", "d": "- x", "e": "#x", "f": "x #y", "g": 1e20, "h": "2024-01-01", "i": "<<", "j": "~", "k": "tab\there", "l": "é"});
        assert_eq!(
            flow(&value),
            "{a: its, b: 'a: b', c: -x, d: '- x', e: '#x', f: 'x #y', g: 1.0e+20, h: '2024-01-01',\n  i: '<<', j: '~', k: \"tab\\there\", l: é}\n"
        );
    }

    #[test]
    fn lone_plain_scalar_gets_document_end() {
        assert_eq!(flow(&json!("foo")), "foo\n...\n");
        assert_eq!(flow(&json!("yes")), "'yes'\n");
    }

    #[test]
    fn block_style_nests_like_pyyaml() {
        let value = json!({"pkgs": ["a", "b"], "conf": {"port": 80, "list": [{"k": "v", "l": "w"}]}, "empty": [], "none": {}});
        assert_eq!(
            block(&value),
            "conf:\n  list:\n  - k: v\n    l: w\n  port: 80\nempty: []\nnone: {}\npkgs:\n- a\n- b\n"
        );
        assert_eq!(block(&json!([[1, 2], 3])), "- - 1\n  - 2\n- 3\n");
        assert_eq!(
            block(&json!({"a": "x\ny", "l": [{"x": {"y": [1]}}]})),
            "a: 'x\n\n  y'\nl:\n- x:\n    y:\n    - 1\n"
        );
    }

    #[test]
    fn multiline_strings_are_single_quoted_with_blank_lines() {
        assert_eq!(flow(&json!({"a": "x\ny"})), "{a: 'x\n\n    y'}\n");
    }

    #[test]
    fn long_flow_scalars_wrap_after_80_columns() {
        let words = vec!["word"; 30].join(" ");
        let out = flow(&json!({ "key": words }));
        let pyyaml = "{key: word word word word word word word word word word word word word word word word\n    word word word word word word word word word word word word word word}\n";
        assert_eq!(out, pyyaml);
        let reparsed = crate::yaml::load(&out).map_err(|e| e.message);
        assert_eq!(reparsed.ok(), Some(json!({ "key": words })));
    }
}
