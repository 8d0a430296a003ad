//! Salt's Jinja filters and tests (salt/utils/jinja.py, salt/utils/data.py...)
//! on top of minijinja's built-ins.

use base64::Engine as _;
use md5::Digest as _;
use minijinja::value::{Kwargs, Rest, ValueKind, ValueOrKwargs};
use minijinja::{Environment, Error, ErrorKind, Value as MjValue};

use super::args::CallArgs;
use super::data::{is_list, is_mapping, traverse};
use super::objects::{from_template, python_str, to_template, PyList};
use crate::pyfmt;

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.into())
}

/// Registers every Salt filter and test on `env`.
pub fn register(env: &mut Environment<'static>) {
    env.add_filter("yaml", yaml_filter);
    env.add_filter("json", json_filter);
    env.add_filter("tojson", tojson_filter);
    env.add_filter("load_yaml", load_yaml_filter);
    env.add_filter("load_json", load_json_filter);
    env.add_filter("traverse", traverse_filter);
    env.add_filter("to_bool", |v: MjValue| MjValue::from(to_bool(&v)));
    env.add_filter("regex_replace", regex_replace);
    env.add_filter("regex_search", |t: String, args: Rest<ValueOrKwargs>| {
        regex_filter("regex_search", &t, &args.into_values(), false)
    });
    env.add_filter("regex_match", |t: String, args: Rest<ValueOrKwargs>| {
        regex_filter("regex_match", &t, &args.into_values(), true)
    });
    env.add_filter("yaml_dquote", |v: MjValue| double_quoted(&python_str(&v)));
    env.add_filter("yaml_squote", |v: MjValue| single_quoted(&python_str(&v)));
    env.add_filter("yaml_encode", yaml_encode);
    env.add_filter("sequence", |v: MjValue| {
        if is_list(&v) || is_mapping(&v) {
            v
        } else {
            PyList::new_value(vec![v])
        }
    });
    env.add_filter("dictsort", dictsort_filter);
    env.add_filter("default", default_filter);
    env.add_filter("d", default_filter);
    env.add_filter("int", int_filter);
    env.add_filter("float", float_filter);
    env.add_filter("replace", replace_filter);
    env.add_filter("center", |text: MjValue, width: Option<usize>| {
        let text = python_str(&text);
        let width = width.unwrap_or(80);
        let pad = width.saturating_sub(text.chars().count());
        // Python's str.center puts the odd space on the right unless the
        // width is odd and the padding too.
        let left = pad / 2 + (pad & width & 1);
        format!("{}{text}{}", " ".repeat(left), " ".repeat(pad - left))
    });
    env.add_filter("wordcount", |text: MjValue| {
        // Jinja2 counts `\w+` runs of the text.
        let text = python_str(&text);
        text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .count()
    });
    env.add_filter("pprint", |value: MjValue| {
        pyfmt::python_repr_sorted(&from_template(&value))
    });
    let escape = |value: MjValue| -> MjValue {
        if value.is_safe() {
            return value;
        }
        MjValue::from_safe_string(markup_escape(&python_str(&value)))
    };
    env.add_filter("escape", escape);
    env.add_filter("e", escape);
    env.add_filter("truncate", truncate_filter);
    env.add_filter("md5", |v: MjValue| {
        hex::encode(md5::Md5::digest(python_str(&v).as_bytes()))
    });
    env.add_filter("sha1", |v: MjValue| {
        hex::encode(sha1::Sha1::digest(python_str(&v).as_bytes()))
    });
    env.add_filter("sha256", |v: MjValue| {
        hex::encode(sha2::Sha256::digest(python_str(&v).as_bytes()))
    });
    env.add_filter("sha512", |v: MjValue| {
        hex::encode(sha2::Sha512::digest(python_str(&v).as_bytes()))
    });
    env.add_filter("base64_encode", |v: MjValue| {
        base64::engine::general_purpose::STANDARD.encode(python_str(&v))
    });
    env.add_filter("base64_decode", base64_decode);
    env.add_filter("quote", |v: MjValue| {
        // shlex.quote: an empty (or falsy) argument is ''.
        if v.is_true() {
            halite_salt_rules::shell::shlex_quote(&python_str(&v))
        } else {
            "''".to_string()
        }
    });
    env.add_filter("is_list", |v: MjValue| is_list(&v) && !v.is_tuple());
    env.add_filter("is_iter", |v: MjValue| {
        matches!(
            v.kind(),
            ValueKind::Seq | ValueKind::Map | ValueKind::Iterable
        )
    });
    env.add_filter("path_join", path_join);
    env.add_filter("difference", |a: MjValue, b: MjValue| {
        set_op(&a, &b, SetOp::Difference)
    });
    env.add_filter("intersect", |a: MjValue, b: MjValue| {
        set_op(&a, &b, SetOp::Intersect)
    });
    env.add_filter("union", |a: MjValue, b: MjValue| {
        set_op(&a, &b, SetOp::Union)
    });
    env.add_filter("symmetric_difference", |a: MjValue, b: MjValue| {
        set_op(&a, &b, SetOp::Symmetric)
    });
    env.add_filter("unique", |v: MjValue| unique(&v));
    env.add_filter("flatten", flatten_filter);
    env.add_filter("to_num", to_num);
    env.add_filter("str_to_num", to_num);
    env.add_filter("string", |v: MjValue| python_str(&v));
    env.add_filter("contains_whitespace", |v: String| {
        v.chars().any(char::is_whitespace)
    });
    env.add_filter("is_hex", |v: String| {
        let digits = v.strip_prefix("0x").unwrap_or(&v);
        !digits.is_empty() && digits.chars().all(|c| c.is_ascii_hexdigit())
    });
    env.add_filter(
        "substring_in_list",
        |s: String, list: MjValue| -> Result<bool, Error> {
            Ok(list.try_iter()?.any(|item| python_str(&item).contains(&s)))
        },
    );
    env.add_filter("avg", |v: MjValue| -> Result<MjValue, Error> {
        let numbers: Vec<f64> = v
            .try_iter()?
            .filter_map(|x| f64::try_from(x).ok())
            .collect();
        if numbers.is_empty() {
            return Ok(MjValue::from(0.0));
        }
        Ok(MjValue::from(
            numbers.iter().sum::<f64>() / numbers.len() as f64,
        ))
    });
    env.add_filter("to_snake_case", |v: String| {
        let mut out = String::new();
        for (index, ch) in v.chars().enumerate() {
            if ch.is_uppercase() && index > 0 {
                out.push('_');
            }
            out.extend(ch.to_lowercase());
        }
        out
    });

    env.add_test("match", |v: String, args: Rest<ValueOrKwargs>| {
        regex_filter("match", &v, &args.into_values(), true).map(|g| !g.is_none())
    });
    env.add_test("list", |v: MjValue| is_list(&v) && !v.is_tuple());
    env.add_test("callable", |v: MjValue| v.kind() == ValueKind::Plain);
    env.add_test("string", |v: MjValue| v.kind() == ValueKind::String);
    env.add_test("mapping", |v: MjValue| is_mapping(&v));
    env.add_test("sequence", |v: MjValue| {
        matches!(
            v.kind(),
            ValueKind::Seq | ValueKind::String | ValueKind::Map
        )
    });
    env.add_test("iterable", |v: MjValue| {
        matches!(
            v.kind(),
            ValueKind::Seq | ValueKind::String | ValueKind::Map | ValueKind::Iterable
        )
    });
}

/// Jinja2's `dictsort(case_sensitive=False, by='key', reverse=False)`,
/// whose arguments Python also takes by position (`dictsort(true)`, seen
/// in public formulas); minijinja's own filter takes keywords only.
fn dictsort_filter(value: MjValue, args: Rest<ValueOrKwargs>) -> Result<MjValue, Error> {
    let call = CallArgs::new("dictsort", &args.into_values())?;
    let names = ["case_sensitive", "by", "reverse"];
    if call.positional().len() > names.len() {
        return Err(invalid(format!(
            "dictsort() takes at most {} positional arguments ({} given)",
            names.len(),
            call.positional().len()
        )));
    }
    if let Some(unknown) = call
        .keywords()
        .keys()
        .find(|k| !names.contains(&k.as_str()))
    {
        return Err(invalid(format!(
            "dictsort() got an unexpected keyword argument '{unknown}'"
        )));
    }
    let kwargs = names
        .iter()
        .enumerate()
        .filter_map(|(index, name)| call.get(index, name).map(|v| (*name, v)));
    minijinja::filters::dictsort(&value, Kwargs::from_iter(kwargs))
}

/// `|yaml` / `|yaml(False)`: PyYAML's safe_dump, stripped, without `...`.
fn yaml_filter(value: MjValue, args: Rest<ValueOrKwargs>) -> Result<MjValue, Error> {
    let call = CallArgs::new("yaml", &args.into_values())?;
    let flow = call
        .get(0, "flow_style")
        .is_none_or(|v| v.is_true() || v.is_none());
    let text = crate::yaml::dump(&from_template(&value), flow);
    let mut text = text.trim().to_string();
    if text.ends_with("\n...") {
        text.truncate(text.len() - 4);
    }
    Ok(MjValue::from_safe_string(text))
}

/// `|json` (keys sorted by default, Python's separators).
fn json_filter(value: MjValue, args: Rest<ValueOrKwargs>) -> Result<MjValue, Error> {
    let call = CallArgs::new("json", &args.into_values())?;
    let sort_keys = call.flag(0, "sort_keys", true);
    let indent = call.get(1, "indent").and_then(|v| v.as_usize());
    let data = from_template(&value);
    Ok(MjValue::from_safe_string(
        pyfmt::json_dumps(&data, sort_keys, indent, false)
            .trim()
            .to_string(),
    ))
}

/// Salt's `tojson`: insertion order, ASCII only, HTML-sensitive characters escaped.
fn tojson_filter(value: MjValue, args: Rest<ValueOrKwargs>) -> Result<MjValue, Error> {
    let call = CallArgs::new("tojson", &args.into_values())?;
    let indent = call.get(0, "indent").and_then(|v| v.as_usize());
    let data = from_template(&value);
    let text = pyfmt::json_dumps(&data, false, indent, true)
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\'', "\\u0027");
    Ok(MjValue::from_safe_string(text))
}

fn load_yaml_filter(value: MjValue) -> Result<MjValue, Error> {
    if !matches!(value.kind(), ValueKind::String) {
        return Ok(value);
    }
    crate::yaml::load(value.as_str().unwrap_or_default())
        .map(|data| to_template(&data))
        .map_err(|e| invalid(format!("Unable to load yaml: {}", e.message)))
}

fn load_json_filter(value: MjValue) -> Result<MjValue, Error> {
    if !matches!(value.kind(), ValueKind::String) {
        return Ok(value);
    }
    serde_json::from_str::<crate::Value>(value.as_str().unwrap_or_default())
        .map(|data| to_template(&data))
        .map_err(|e| invalid(format!("Unable to load json: {e}")))
}

fn traverse_filter(data: MjValue, args: Rest<ValueOrKwargs>) -> Result<MjValue, Error> {
    let call = CallArgs::new("traverse", &args.into_values())?;
    let key = call.text(0, "key", "");
    let default = call.get(1, "default").unwrap_or_else(|| MjValue::from(()));
    Ok(traverse(
        &data,
        &key,
        default,
        &call.text(2, "delimiter", ":"),
    ))
}

/// Salt's `to_bool`.
pub fn to_bool(value: &MjValue) -> bool {
    match value.kind() {
        ValueKind::None | ValueKind::Undefined => false,
        ValueKind::Bool => value.is_true(),
        ValueKind::String => {
            matches!(
                value.as_str().unwrap_or_default().to_lowercase().as_str(),
                "yes" | "1" | "true"
            )
        }
        ValueKind::Number if value.is_integer() => value.as_i64().is_some_and(|n| n > 0),
        // Lists and dicts: not empty. Floats, tuples and other hashables: False.
        ValueKind::Seq if !value.is_tuple() => value.len().is_some_and(|n| n > 0),
        ValueKind::Map => value.len().is_some_and(|n| n > 0),
        _ => false,
    }
}

fn build_regex(
    pattern: &str,
    ignorecase: Option<bool>,
    multiline: Option<bool>,
) -> Result<regex::Regex, Error> {
    regex::RegexBuilder::new(pattern)
        .case_insensitive(ignorecase.unwrap_or(false))
        .multi_line(multiline.unwrap_or(false))
        .build()
        .map_err(|e| invalid(format!("invalid regular expression '{pattern}': {e}")))
}

/// `regex_replace(txt, rgx, val, ignorecase=False, multiline=False)` with
/// Python's `\1` / `\g<name>` replacement syntax.
fn regex_replace(text: String, args: Rest<ValueOrKwargs>) -> Result<String, Error> {
    let call = CallArgs::new("regex_replace", &args.into_values())?;
    let pattern = call.text(0, "rgx", "");
    let replacement = call.text(1, "val", "");
    let (ignorecase, multiline) = (
        Some(call.flag(2, "ignorecase", false)),
        Some(call.flag(3, "multiline", false)),
    );
    let re = build_regex(&pattern, ignorecase, multiline)?;
    let group_ref =
        regex::Regex::new(r"\\(\d+)|\\g<(\w+)>|\$").map_err(|e| invalid(e.to_string()))?;
    let rust_replacement = group_ref.replace_all(&replacement, |caps: &regex::Captures<'_>| {
        if let Some(n) = caps.get(1).or_else(|| caps.get(2)) {
            format!("${{{}}}", n.as_str())
        } else {
            "$$".to_string()
        }
    });
    let rust_replacement = rust_replacement
        .replace("\\n", "\n")
        .replace("\\t", "\t")
        .replace("\\\\", "\\");
    Ok(re
        .replace_all(&text, rust_replacement.as_str())
        .into_owned())
}

/// `regex_search` / `regex_match` arguments: `(rgx, ignorecase=False, multiline=False)`.
fn regex_filter(
    name: &str,
    text: &str,
    args: &[MjValue],
    anchored: bool,
) -> Result<MjValue, Error> {
    let call = CallArgs::new(name, args)?;
    regex_groups(
        text,
        &call.text(0, "rgx", ""),
        Some(call.flag(1, "ignorecase", false)),
        Some(call.flag(2, "multiline", false)),
        anchored,
    )
}

/// `regex_search` / `regex_match`: the groups tuple, or None when no match.
fn regex_groups(
    text: &str,
    pattern: &str,
    ignorecase: Option<bool>,
    multiline: Option<bool>,
    anchored: bool,
) -> Result<MjValue, Error> {
    let re = build_regex(pattern, ignorecase, multiline)?;
    let Some(caps) = re.captures(text) else {
        return Ok(MjValue::from(()));
    };
    if anchored && caps.get(0).is_some_and(|m| m.start() != 0) {
        // re.match is anchored at the start; retry with an anchored pattern.
        let anchored_re = build_regex(&format!("^(?:{pattern})"), ignorecase, multiline)?;
        let Some(caps) = anchored_re
            .captures(text)
            .filter(|c| c.get(0).is_some_and(|m| m.start() == 0))
        else {
            return Ok(MjValue::from(()));
        };
        return Ok(groups_of(&caps));
    }
    Ok(groups_of(&caps))
}

/// The match's groups as a tuple; without groups, the whole match (Salt).
fn groups_of(caps: &regex::Captures<'_>) -> MjValue {
    let groups: Vec<MjValue> = if caps.len() == 1 {
        vec![MjValue::from(caps.get(0).map_or("", |m| m.as_str()))]
    } else {
        caps.iter()
            .skip(1)
            .map(|g| g.map_or(MjValue::from(()), |m| MjValue::from(m.as_str())))
            .collect()
    };
    MjValue::from_object(minijinja::value::Tuple::new(groups))
}

/// A YAML double-quoted scalar as Salt's `yaml_dquote` writes it: PyYAML's
/// emitter without `allow_unicode`, so anything outside printable ASCII is
/// escaped (`\\xDC`, `\\u2028`), and no line wrapping.
fn double_quoted(text: &str) -> String {
    let mut out = String::from("\"");
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\x0b' => out.push_str("\\v"),
            '\x0c' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            '\x1b' => out.push_str("\\e"),
            '\u{85}' => out.push_str("\\N"),
            '\u{a0}' => out.push_str("\\_"),
            '\u{2028}' => out.push_str("\\L"),
            '\u{2029}' => out.push_str("\\P"),
            c if (' '..='~').contains(&c) => out.push(c),
            c if (c as u32) <= 0xff => out.push_str(&format!("\\x{:02X}", c as u32)),
            c if (c as u32) <= 0xffff => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push_str(&format!("\\U{:08X}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// A YAML single-quoted scalar as Salt's `yaml_squote` writes it: quotes
/// doubled, each run of line breaks written with one more break.
fn single_quoted(text: &str) -> String {
    let mut out = String::from("'");
    let mut chars = text.chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            '\'' => out.push_str("''"),
            '\n' => {
                out.push_str("\n\n");
                while chars.peek() == Some(&'\n') {
                    chars.next();
                    out.push('\n');
                }
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Jinja2's `int(value, default=0, base=10)`: numbers truncate, strings
/// parse as int then as float, anything else is the default.
fn int_filter(value: MjValue, default: Option<MjValue>, base: Option<u32>) -> MjValue {
    let fallback = default.unwrap_or_else(|| MjValue::from(0));
    match value.kind() {
        ValueKind::Bool => MjValue::from(i64::from(value.is_true())),
        ValueKind::Number if value.is_integer() => value,
        ValueKind::Number => {
            f64::try_from(value).map_or(fallback, |f| MjValue::from(f.trunc() as i64))
        }
        ValueKind::String => {
            let text = value.as_str().unwrap_or_default().trim().replace('_', "");
            let base = base.unwrap_or(10);
            let (negative, digits) = match text.strip_prefix('-') {
                Some(rest) => (true, rest.to_string()),
                None => (false, text.trim_start_matches('+').to_string()),
            };
            let digits = match base {
                16 => digits
                    .trim_start_matches("0x")
                    .trim_start_matches("0X")
                    .to_string(),
                8 => digits
                    .trim_start_matches("0o")
                    .trim_start_matches("0O")
                    .to_string(),
                2 => digits
                    .trim_start_matches("0b")
                    .trim_start_matches("0B")
                    .to_string(),
                _ => digits,
            };
            if let Ok(n) = i64::from_str_radix(&digits, base) {
                return MjValue::from(if negative { -n } else { n });
            }
            text.parse::<f64>()
                .map_or(fallback, |f| MjValue::from(f.trunc() as i64))
        }
        _ => fallback,
    }
}

/// Jinja2's `float(value, default=0.0)`.
fn float_filter(value: MjValue, default: Option<MjValue>) -> MjValue {
    let fallback = default.unwrap_or_else(|| MjValue::from(0.0));
    match value.kind() {
        ValueKind::Bool => MjValue::from(if value.is_true() { 1.0 } else { 0.0 }),
        ValueKind::Number => f64::try_from(value).map_or(fallback, MjValue::from),
        ValueKind::String => value
            .as_str()
            .unwrap_or_default()
            .trim()
            .replace('_', "")
            .parse::<f64>()
            .map_or(fallback, MjValue::from),
        _ => fallback,
    }
}

/// Jinja2's `replace(old, new, count=None)`.
fn replace_filter(value: MjValue, old: String, new: String, count: Option<usize>) -> String {
    let text = python_str(&value);
    match count {
        Some(n) => text.replacen(&old, &new, n),
        None => text.replace(&old, &new),
    }
}

/// Jinja2's `truncate(length=255, killwords=False, end='...', leeway=5)`.
fn truncate_filter(value: MjValue, args: Rest<ValueOrKwargs>) -> Result<String, Error> {
    let call = CallArgs::new("truncate", &args.into_values())?;
    let text = python_str(&value);
    let length = call
        .get(0, "length")
        .and_then(|v| v.as_usize())
        .unwrap_or(255);
    let killwords = call.flag(1, "killwords", false);
    let end = call.text(2, "end", "...");
    let leeway = call
        .get(3, "leeway")
        .and_then(|v| v.as_usize())
        .unwrap_or(5);
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= length + leeway {
        return Ok(text);
    }
    let keep = length.saturating_sub(end.chars().count());
    let head: String = chars[..keep.min(chars.len())].iter().collect();
    if killwords {
        return Ok(format!("{head}{end}"));
    }
    let cut = match head.rfind(' ') {
        Some(at) => &head[..at],
        None => head.as_str(),
    };
    Ok(format!("{cut}{end}"))
}

/// `yaml_encode`: one scalar as YAML: strings double-quoted (Salt uses
/// `yaml_dquote` for them), other scalars as PyYAML writes them (`true`, `5`).
fn yaml_encode(value: MjValue) -> Result<String, Error> {
    let data = from_template(&value);
    match data {
        crate::Value::Array(_) | crate::Value::Object(_) => {
            Err(invalid("yaml_encode only encodes scalars"))
        }
        crate::Value::String(text) => Ok(double_quoted(&text)),
        scalar => {
            let text = crate::yaml::dump(&scalar, true);
            Ok(text
                .trim_end()
                .trim_end_matches("\n...")
                .trim_end()
                .to_string())
        }
    }
}

fn base64_decode(value: MjValue) -> Result<String, Error> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(python_str(&value).trim())
        .map_err(|e| invalid(format!("base64_decode: {e}")))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Jinja2's `default(default_value='', boolean=False)`, keywords included.
fn default_filter(value: MjValue, args: Rest<ValueOrKwargs>) -> Result<MjValue, Error> {
    let call = CallArgs::new("default", &args.into_values())?;
    let fallback = call
        .get(0, "default_value")
        .unwrap_or_else(|| MjValue::from(""));
    let boolean = call.flag(1, "boolean", false);
    Ok(if value.is_undefined() || (boolean && !value.is_true()) {
        fallback
    } else {
        value
    })
}

/// markupsafe's escape: `& < > ' "` as entities, as Jinja2 writes them.
fn markup_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\'' => out.push_str("&#39;"),
            '"' => out.push_str("&#34;"),
            c => out.push(c),
        }
    }
    out
}

/// `os.path.join`.
fn path_join(first: MjValue, rest: Rest<MjValue>) -> String {
    // Salt: normalise each part, strip leading slashes from all but the
    // first, join, normalise again.
    let mut joined = super::salt::normpath(&python_str(&first));
    for part in rest.iter() {
        let part = super::salt::normpath(&python_str(part));
        let part = part.trim_start_matches('/');
        if joined.is_empty() || joined.ends_with('/') {
            joined.push_str(part);
        } else {
            joined.push('/');
            joined.push_str(part);
        }
    }
    super::salt::normpath(&joined)
}

enum SetOp {
    Difference,
    Intersect,
    Union,
    Symmetric,
}

fn items_of(value: &MjValue) -> Vec<MjValue> {
    value.try_iter().map(|i| i.collect()).unwrap_or_default()
}

fn push_unique(out: &mut Vec<MjValue>, item: MjValue) {
    if !out.contains(&item) {
        out.push(item);
    }
}

fn set_op(a: &MjValue, b: &MjValue, op: SetOp) -> MjValue {
    let (left, right) = (items_of(a), items_of(b));
    let mut out = Vec::new();
    match op {
        SetOp::Difference => left
            .into_iter()
            .filter(|x| !right.contains(x))
            .for_each(|x| push_unique(&mut out, x)),
        SetOp::Intersect => left
            .into_iter()
            .filter(|x| right.contains(x))
            .for_each(|x| push_unique(&mut out, x)),
        SetOp::Union => left
            .into_iter()
            .chain(right)
            .for_each(|x| push_unique(&mut out, x)),
        SetOp::Symmetric => {
            let only_left: Vec<MjValue> = left
                .iter()
                .filter(|x| !right.contains(x))
                .cloned()
                .collect();
            let only_right: Vec<MjValue> = right
                .iter()
                .filter(|x| !left.contains(x))
                .cloned()
                .collect();
            only_left
                .into_iter()
                .chain(only_right)
                .for_each(|x| push_unique(&mut out, x));
        }
    }
    PyList::new_value(out)
}

fn unique(value: &MjValue) -> MjValue {
    let mut out = Vec::new();
    for item in items_of(value) {
        push_unique(&mut out, item);
    }
    PyList::new_value(out)
}

fn flatten_filter(value: MjValue, args: Rest<ValueOrKwargs>) -> Result<MjValue, Error> {
    let call = CallArgs::new("flatten", &args.into_values())?;
    let levels = call
        .get(0, "levels")
        .filter(|v| !v.is_none())
        .and_then(|v| v.as_i64());
    let preserve_nulls = Some(call.flag(1, "preserve_nulls", false));
    Ok(flatten_values(value, levels, preserve_nulls))
}

fn flatten_values(value: MjValue, levels: Option<i64>, preserve_nulls: Option<bool>) -> MjValue {
    fn is_null_like(item: &MjValue) -> bool {
        item.is_none() || matches!(item.as_str(), Some("None" | "null"))
    }
    fn walk(value: &MjValue, levels: Option<i64>, keep_nulls: bool, out: &mut Vec<MjValue>) {
        for item in items_of(value) {
            if !keep_nulls && is_null_like(&item) {
                continue;
            }
            let iterable = matches!(
                item.kind(),
                ValueKind::Seq | ValueKind::Map | ValueKind::Iterable
            );
            if iterable && levels.is_none_or(|l| l >= 1) {
                walk(&item, levels.map(|l| l - 1), keep_nulls, out);
            } else {
                out.push(item);
            }
        }
    }
    let mut out = Vec::new();
    walk(&value, levels, preserve_nulls.unwrap_or(false), &mut out);
    PyList::new_value(out)
}

/// Salt's `to_num`: `int(x)`, else `float(x)`, else `x` unchanged.
fn to_num(value: MjValue) -> MjValue {
    match value.kind() {
        ValueKind::Bool => MjValue::from(i64::from(value.is_true())),
        ValueKind::Number if value.is_integer() => value,
        ValueKind::Number => {
            f64::try_from(value.clone()).map_or(value, |f| MjValue::from(f.trunc() as i64))
        }
        ValueKind::String => {
            let text = value.as_str().unwrap_or_default().trim().replace('_', "");
            if let Ok(i) = text.parse::<i64>() {
                return MjValue::from(i);
            }
            match text.parse::<f64>() {
                Ok(f) => MjValue::from(f),
                Err(_) => value,
            }
        }
        _ => value,
    }
}
