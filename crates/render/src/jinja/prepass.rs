//! Source rewrites done before minijinja compiles a template.
//!
//! 1. Salt's serializer tags, which minijinja does not know:
//!    `{% import_yaml "f" as v %}` (also `import_json`, `import_text`) and
//!    `{% load_yaml as v %}...{% endload %}` (also `load_json`, `load_text`).
//!    They become `set` statements over helper functions.
//! 2. Dict and list literals (`{}`, `[1, 2]`) are wrapped in `__pydict(...)`
//!    / `__pylist(...)` so they are mutable Python-like objects (see
//!    [`super::objects`]); minijinja's own literals are immutable.
//!
//! Both rewrites keep every line where it was, so error line numbers still
//! point into the user's file.

use std::sync::OnceLock;

use regex::Regex;

/// The helper that renders an imported template and parses it.
pub const IMPORT_FUNCTION: &str = "__salt_import";
/// The helper that parses a captured block.
pub const PARSE_FUNCTION: &str = "__salt_parse";
/// The wrapper that makes a dict literal mutable.
pub const DICT_FUNCTION: &str = "__pydict";
/// The wrapper that makes a list literal mutable.
pub const LIST_FUNCTION: &str = "__pylist";
/// The filter that implements Python's `'s' * n` (a bool counts as 0 or 1).
pub const REPEAT_FILTER: &str = "__pyrepeat";
/// The filter that implements Python's `'fmt' % args`.
pub const PERCENT_FILTER: &str = "__pyformat";

/// Applies all rewrites.
pub fn prepare(source: &str) -> String {
    wrap_literals(&rewrite_do_statements(&rewrite_serializer_tags(source)))
}

/// Jinja2's `do` takes any expression (`{% do d.pop('k') if x %}`);
/// minijinja's only a call. `set` to a throwaway name evaluates anything.
pub fn rewrite_do_statements(source: &str) -> String {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(re) = RE
        .get_or_init(|| Regex::new(r"\{%([-+]?)(\s*)do\s").ok())
        .as_ref()
    else {
        return source.to_string();
    };
    if !source.contains("do") {
        return source.to_string();
    }
    re.replace_all(source, "{%${1}${2}set __halite_do = ")
        .into_owned()
}

fn import_tag() -> Option<&'static Regex> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"\{%(-?)\s*import_(yaml|json|text)\s+(.+?)\s+as\s+([A-Za-z_][A-Za-z0-9_]*)\s*(-?)%\}",
        )
        .ok()
    })
    .as_ref()
}

fn load_or_end_tag() -> Option<&'static Regex> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"\{%(-?)\s*(?:load_(yaml|json|text)\s+as\s+([A-Za-z_][A-Za-z0-9_]*)|(endload))\s*(-?)%\}").ok()
    })
    .as_ref()
}

/// Rewrites Salt's `import_*` / `load_*` tags into plain Jinja.
pub fn rewrite_serializer_tags(source: &str) -> String {
    if !source.contains("import_") && !source.contains("load_") {
        return source.to_string();
    }
    let Some(import_re) = import_tag() else {
        return source.to_string();
    };
    let imported = import_re.replace_all(source, |caps: &regex::Captures<'_>| {
        format!(
            "{{%{} set {} = {IMPORT_FUNCTION}({}, '{}') {}%}}",
            &caps[1], &caps[4], &caps[3], &caps[2], &caps[5]
        )
    });
    let Some(load_re) = load_or_end_tag() else {
        return imported.into_owned();
    };
    let mut open: Vec<(String, String)> = Vec::new();
    load_re
        .replace_all(&imported, |caps: &regex::Captures<'_>| {
            let (left, right) = (&caps[1], &caps[5]);
            if caps.get(4).is_some() {
                match open.pop() {
                    Some((kind, _)) if kind == "text" => format!("{{%{left} endset {right}%}}"),
                    Some((kind, var)) => {
                        format!("{{%{left} endset %}}{{% set {var} = {PARSE_FUNCTION}({var}, '{kind}') {right}%}}")
                    }
                    // An `endload` without `load_*`: leave it for minijinja to report.
                    None => caps[0].to_string(),
                }
            } else {
                open.push((caps[2].to_string(), caps[3].to_string()));
                format!("{{%{left} set {} {right}%}}", &caps[3])
            }
        })
        .into_owned()
}

/// Where the scanner is in the template text.
#[derive(Clone, Copy, PartialEq)]
enum Closer {
    Variable,
    Block,
}

/// Wraps `{...}` and `[...]` literals inside Jinja code in mutable-object
/// constructors, leaving text, comments, strings and `raw` blocks alone.
pub fn wrap_literals(source: &str) -> String {
    let bytes = source.as_bytes();
    let mut out = String::with_capacity(source.len() + source.len() / 8);
    let mut index = 0;
    let mut copied_to = 0;
    while index < bytes.len() {
        if bytes[index] != b'{' || index + 1 >= bytes.len() {
            index += 1;
            continue;
        }
        match bytes[index + 1] {
            b'#' => {
                index = source[index + 2..]
                    .find("#}")
                    .map_or(bytes.len(), |end| index + 2 + end + 2);
            }
            b'{' | b'%' => {
                let closer = if bytes[index + 1] == b'{' {
                    Closer::Variable
                } else {
                    Closer::Block
                };
                let code_start = index + 2;
                if closer == Closer::Block && is_raw_start(&source[code_start..]) {
                    index = find_endraw(source, code_start).unwrap_or(bytes.len());
                    continue;
                }
                out.push_str(&source[copied_to..code_start]);
                let (rewritten, end) = rewrite_code(source, code_start, closer);
                out.push_str(&rewritten);
                copied_to = end;
                index = end;
            }
            _ => index += 1,
        }
    }
    out.push_str(&source[copied_to.min(source.len())..]);
    out
}

fn is_raw_start(code: &str) -> bool {
    let trimmed = code.trim_start_matches('-').trim_start();
    trimmed.starts_with("raw")
        && trimmed[3..]
            .trim_start()
            .trim_start_matches('-')
            .starts_with("%}")
}

fn find_endraw(source: &str, from: usize) -> Option<usize> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let re = RE
        .get_or_init(|| Regex::new(r"\{%-?\s*endraw\s*-?%\}").ok())
        .as_ref()?;
    re.find(&source[from..]).map(|m| from + m.end())
}

const KEYWORDS_BEFORE_LITERAL: &[&str] = &[
    "in", "and", "or", "not", "if", "else", "is", "return", "elif", "set", "do", "for", "with",
    "print",
];

/// Rewrites one code region starting at `start`; returns the new text up to
/// and including the closing delimiter, and where the region ended.
fn rewrite_code(source: &str, start: usize, closer: Closer) -> (String, usize) {
    let bytes = source.as_bytes();
    let mut out = String::new();
    let mut index = start;
    // Stack of open brackets: (byte, wrapped?)
    let mut stack: Vec<(u8, bool)> = Vec::new();
    // The last significant token: true when it ends an operand (name, number,
    // string, closing bracket), so a following `[` is a subscript.
    let mut after_operand = false;
    let mut last_word = String::new();
    let mut previous_was_ident = false;
    let mut after_string = false;
    while index < bytes.len() {
        let byte = bytes[index];
        if stack.is_empty() {
            let rest = &source[index..];
            let end_marker = match closer {
                Closer::Variable => ["}}", "-}}", "+}}"],
                Closer::Block => ["%}", "-%}", "+%}"],
            };
            if let Some(marker) = end_marker.iter().find(|m| rest.starts_with(**m)) {
                out.push_str(marker);
                return (out, index + marker.len());
            }
        }
        if !(byte as char).is_whitespace() && byte != b'%' && byte != b'\'' && byte != b'"' {
            after_string = false;
        }
        match byte {
            b'\'' | b'"' => {
                let end = string_end(bytes, index);
                out.push_str(&source[index..end]);
                index = end;
                after_operand = true;
                after_string = true;
                last_word.clear();
                previous_was_ident = false;
                continue;
            }
            b'%' | b'*'
                if after_string
                    && !source[index..].starts_with("%}")
                    && !source[index..].starts_with("**") =>
            {
                // `'fmt' % operand` -> `'fmt'|__pyformat(operand)`;
                // `'s' * operand` -> `'s'|__pyrepeat(operand)` (Python accepts a bool).
                let operand_start = index + 1;
                let operand_end = operand_end(source, operand_start);
                out.push('|');
                out.push_str(if byte == b'%' {
                    PERCENT_FILTER
                } else {
                    REPEAT_FILTER
                });
                out.push('(');
                out.push_str(&wrap_literals_in_expression(
                    &source[operand_start..operand_end],
                ));
                out.push(')');
                index = operand_end;
                after_operand = true;
                after_string = false;
                continue;
            }
            b'{' => {
                out.push_str(DICT_FUNCTION);
                out.push_str("({");
                stack.push((b'{', true));
                after_operand = false;
            }
            b'[' => {
                let keyword_before = KEYWORDS_BEFORE_LITERAL.contains(&last_word.as_str());
                let literal = !after_operand || keyword_before;
                if literal {
                    out.push_str(LIST_FUNCTION);
                    out.push('(');
                }
                out.push('[');
                stack.push((b'[', literal));
                after_operand = false;
            }
            b'(' => {
                out.push('(');
                stack.push((b'(', false));
                after_operand = false;
            }
            b'}' | b']' | b')' => {
                out.push(byte as char);
                if let Some((_, wrapped)) = stack.pop() {
                    if wrapped {
                        out.push(')');
                    }
                }
                after_operand = true;
            }
            _ => {
                let ch = source[index..].chars().next().unwrap_or(' ');
                out.push(ch);
                if ch.is_alphanumeric() || ch == '_' {
                    if !previous_was_ident {
                        last_word.clear();
                    }
                    last_word.push(ch);
                    after_operand = true;
                    previous_was_ident = true;
                } else if ch.is_whitespace() {
                    previous_was_ident = false;
                } else {
                    after_operand = false;
                    last_word.clear();
                    previous_was_ident = false;
                }
                index += ch.len_utf8();
                continue;
            }
        }
        last_word.clear();
        previous_was_ident = false;
        index += 1;
    }
    (out, bytes.len())
}

/// Where the right operand of `%` ends: a parenthesised group, or a name
/// with its attribute, subscript and call suffixes, or a literal.
fn operand_end(source: &str, start: usize) -> usize {
    let bytes = source.as_bytes();
    let mut index = start;
    while index < bytes.len() && bytes[index] == b' ' {
        index += 1;
    }
    let mut depth = 0usize;
    while index < bytes.len() {
        let byte = bytes[index];
        match byte {
            b'\'' | b'"' => {
                index = string_end(bytes, index);
                if depth == 0 {
                    return index;
                }
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                if depth == 0 {
                    return index;
                }
                depth -= 1;
                if depth == 0 && byte == b')' && !source[index + 1..].starts_with(['.', '[', '(']) {
                    return index + 1;
                }
            }
            b if depth == 0 && !(b.is_ascii_alphanumeric() || b == b'_' || b == b'.') => {
                return index
            }
            _ => {}
        }
        index += 1;
    }
    index
}

/// Wraps literals inside a bare expression (the operand of `%`).
fn wrap_literals_in_expression(expression: &str) -> String {
    let wrapped = wrap_literals(&format!("{{{{{expression}}}}}"));
    wrapped
        .trim_start_matches("{{")
        .trim_end_matches("}}")
        .to_string()
}

fn string_end(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut index = start + 1;
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            b if b == quote => return index + 1,
            _ => index += 1,
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_wrapped_but_subscripts_and_text_are_not() {
        assert_eq!(wrap_literals("a {b} [c]"), "a {b} [c]");
        assert_eq!(
            wrap_literals("{% set d = {} %}"),
            "{% set d = __pydict({}) %}"
        );
        assert_eq!(
            wrap_literals("{{ x[0] }}{{ [1, 2]|join }}"),
            "{{ x[0] }}{{ __pylist([1, 2])|join }}"
        );
        assert_eq!(
            wrap_literals("{% for i in [1] %}"),
            "{% for i in __pylist([1]) %}"
        );
        assert_eq!(
            wrap_literals("{{ {'a': {'b': [1]}} }}"),
            "{{ __pydict({'a': __pydict({'b': __pylist([1])})}) }}"
        );
        assert_eq!(
            wrap_literals("{{ salt['x.y']('[') }}"),
            "{{ salt['x.y']('[') }}"
        );
        assert_eq!(
            wrap_literals("{# {} #}{% raw %}{{ {} }}{% endraw %}"),
            "{# {} #}{% raw %}{{ {} }}{% endraw %}"
        );
        assert_eq!(
            wrap_literals("{%- set l = [] -%}"),
            "{%- set l = __pylist([]) -%}"
        );
    }

    #[test]
    fn do_statements_take_any_expression() {
        assert_eq!(
            rewrite_do_statements("{%- do d.pop('k') if x %}{% do l.append(1) %}{% done %}"),
            "{%- set __halite_do = d.pop('k') if x %}{% set __halite_do = l.append(1) %}{% done %}"
        );
    }

    #[test]
    fn serializer_tags_become_set_statements() {
        assert_eq!(
            rewrite_serializer_tags("{% import_yaml tpldir ~ '/defaults.yaml' as defaults %}"),
            "{% set defaults = __salt_import(tpldir ~ '/defaults.yaml', 'yaml') %}"
        );
        assert_eq!(
            rewrite_serializer_tags("{%- load_yaml as x -%}\na: 1\n{%- endload -%}"),
            "{%- set x -%}\na: 1\n{%- endset %}{% set x = __salt_parse(x, 'yaml') -%}"
        );
        assert_eq!(
            rewrite_serializer_tags("{% load_text as t %}hi{% endload %}"),
            "{% set t %}hi{% endset %}"
        );
    }
}
