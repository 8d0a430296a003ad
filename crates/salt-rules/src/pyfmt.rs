//! Python's textual forms of values (`str()`/`repr()`, `json.dumps`), which
//! Salt users see whenever a template or a message prints data: `True`,
//! `None`, `1.0`, `{'a': 1}`.
//!
//! [`python_repr`] and [`python_str`] are Python's own rules. Two older
//! spellings that halite's outputs already carry are kept beside them under
//! their own names, so that nothing a user sees changes:
//! [`quoted_repr`]/[`quoted_str`] (the state engine's messages, the CLI's
//! `txt`/`raw` outputters) and [`str_json`] (grain values matched by
//! `grains.filter_by`, archive sources in messages).

use crate::{Map, Value};

/// Python's `repr(float)`: shortest round-trip digits, always with a `.0` or
/// an exponent, `inf`/`nan` spelled as Python does.
pub fn float_repr(value: f64) -> String {
    if value.is_nan() {
        return "nan".to_string();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    let abs = value.abs();
    if abs != 0.0 && !(1e-4..1e16).contains(&abs) {
        // Python switches to exponent notation: 1e+16, 1e-05
        let formatted = format!("{value:e}");
        let (mantissa, exponent) = formatted.split_once('e').unwrap_or((&formatted, "0"));
        let exp_num: i32 = exponent.parse().unwrap_or(0);
        let sign = if exp_num < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp_num.abs());
    }
    let text = format!("{value}");
    if text.contains('.') {
        text
    } else {
        format!("{text}.0")
    }
}

/// Python's `repr()` of a string: single quotes unless the text has a single
/// quote and no double quote.
pub fn string_repr(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for ch in text.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python's `str()` of a number (`1.0` keeps its `.0`, `1e+16`), as YAML
/// keys and printed data show it.
pub fn python_number(number: &serde_json::Number) -> String {
    if let Some(f) = number.as_f64().filter(|_| number.is_f64()) {
        float_repr(f)
    } else {
        number.to_string()
    }
}

/// Python's `str()` of Salt data: strings bare, everything else as `repr()`.
pub fn python_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => python_repr(other),
    }
}

/// What Python's `pprint.pformat` prints for data that fits on a line:
/// `repr()` with dict keys sorted.
pub fn python_repr_sorted(value: &Value) -> String {
    match value {
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(python_repr_sorted).collect();
            format!("[{}]", inner.join(", "))
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let inner: Vec<String> = entries
                .iter()
                .map(|(k, v)| format!("{}: {}", string_repr(k), python_repr_sorted(v)))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
        other => python_repr(other),
    }
}

/// Python's `repr()` of Salt data (`{'a': [1, True, None]}`).
pub fn python_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".to_string(),
        Value::Bool(true) => "True".to_string(),
        Value::Bool(false) => "False".to_string(),
        Value::Number(n) => python_number(n),
        Value::String(s) => string_repr(s),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(python_repr).collect();
            format!("[{}]", inner.join(", "))
        }
        Value::Object(map) => {
            let inner: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", string_repr(k), python_repr(v)))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
    }
}

/// Python's `json.dumps(value, sort_keys=..., indent=..., ensure_ascii=...)`
/// with its default separators (`", "` and `": "`).
pub fn json_dumps(
    value: &Value,
    sort_keys: bool,
    indent: Option<usize>,
    ensure_ascii: bool,
) -> String {
    let mut out = String::new();
    write_json(&mut out, value, sort_keys, indent, ensure_ascii, 0);
    out
}

fn write_json_string(out: &mut String, text: &str, ensure_ascii: bool) {
    out.push('"');
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if ensure_ascii && (c as u32) > 0x7f => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_json(
    out: &mut String,
    value: &Value,
    sort_keys: bool,
    indent: Option<usize>,
    ensure_ascii: bool,
    depth: usize,
) {
    let (item_sep, newline) = match indent {
        Some(width) => (",".to_string(), Some(width)),
        None => (", ".to_string(), None),
    };
    let open_line = |out: &mut String, level: usize| {
        if let Some(width) = newline {
            out.push('\n');
            out.push_str(&" ".repeat(width * level));
        }
    };
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&python_number(n)),
        Value::String(s) => write_json_string(out, s, ensure_ascii),
        Value::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push_str(&item_sep);
                }
                open_line(out, depth + 1);
                write_json(out, item, sort_keys, indent, ensure_ascii, depth + 1);
            }
            open_line(out, depth);
            out.push(']');
        }
        Value::Object(map) => {
            if map.is_empty() {
                out.push_str("{}");
                return;
            }
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            if sort_keys {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            out.push('{');
            for (index, (key, item)) in entries.iter().enumerate() {
                if index > 0 {
                    out.push_str(&item_sep);
                }
                open_line(out, depth + 1);
                write_json_string(out, key, ensure_ascii);
                out.push_str(": ");
                write_json(out, item, sort_keys, indent, ensure_ascii, depth + 1);
            }
            open_line(out, depth);
            out.push('}');
        }
    }
}

/// The state engine's `repr()` of a value in messages that quote Salt
/// (requisite errors, `user.present` comments, the CLI's `raw` outputter).
///
/// It differs from Python's [`python_repr`] in two ways that halite's
/// outputs already show: every string is in single quotes with `\\` and `'`
/// backslash-escaped (Python switches to double quotes), and numbers print
/// in JSON form (`1e16`, not `1e+16`); dict keys are not escaped.
pub fn quoted_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(quoted_repr).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => quoted_dict(m),
    }
}

/// [`quoted_repr`] of a dict: `{'key': value}` with keys as they are.
pub fn quoted_dict(m: &Map) -> String {
    let inner: Vec<String> = m
        .iter()
        .map(|(k, v)| format!("'{k}': {}", quoted_repr(v)))
        .collect();
    format!("{{{}}}", inner.join(", "))
}

/// `'{}'.format(x)` in the engine's messages: strings bare, everything else
/// as [`quoted_repr`].
pub fn quoted_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => quoted_repr(other),
    }
}

/// `str()` of a scalar as Salt prints it (`True`, `None`, strings bare),
/// with numbers, lists and dicts in JSON form: what `grains.filter_by`
/// globs a grain value against and how an invalid archive source is named.
pub fn str_json(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Null => "None".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_print_like_python() {
        assert_eq!(float_repr(1.0), "1.0");
        assert_eq!(float_repr(0.1), "0.1");
        assert_eq!(float_repr(1e16), "1e+16");
        assert_eq!(float_repr(1e-5), "1e-05");
        assert_eq!(float_repr(-2.5), "-2.5");
    }

    #[test]
    fn repr_of_nested_data() {
        let value = json!({"a": [1, true, null, "it's"], "b": 1.5});
        assert_eq!(
            python_repr(&value),
            "{'a': [1, True, None, \"it's\"], 'b': 1.5}"
        );
    }

    #[test]
    fn quoted_forms_keep_the_engines_spelling() {
        let value = json!({"a": ["it's", 1.5, null, false]});
        assert_eq!(quoted_repr(&value), "{'a': ['it\\'s', 1.5, None, False]}");
        assert_eq!(quoted_str(&json!("bare")), "bare");
        assert_eq!(quoted_str(&json!(["x"])), "['x']");
        assert_eq!(str_json(&json!(true)), "True");
        assert_eq!(str_json(&json!(null)), "None");
        assert_eq!(str_json(&json!(["x"])), "[\"x\"]");
        assert_eq!(python_number(&serde_json::Number::from(3)), "3");
        assert_eq!(python_str(&json!(1e16)), "1e+16");
    }
}
