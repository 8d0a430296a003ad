//! Salt's Jinja filters and tests (salt/utils/jinja.py, salt/utils/data.py...)
//! on top of minijinja's built-ins.

use base64::Engine as _;
use md5::Digest as _;
use minijinja::value::{Rest, ValueKind, ValueOrKwargs};
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
    env.add_filter("yaml_squote", |v: MjValue| {
        format!("'{}'", python_str(&v).replace('\'', "''"))
    });
    env.add_filter("yaml_encode", yaml_encode);
    env.add_filter("sequence", |v: MjValue| {
        if is_list(&v) {
            v
        } else {
            PyList::new_value(vec![v])
        }
    });
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
    env.add_filter("quote", |v: MjValue| shell_quote(&python_str(&v)));
    env.add_filter("is_list", |v: MjValue| is_list(&v));
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
    env.add_test("list", |v: MjValue| is_list(&v));
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
        ValueKind::Number => f64::try_from(value.clone()).is_ok_and(|n| n > 0.0),
        ValueKind::String => matches!(
            value.as_str().unwrap_or_default().to_lowercase().as_str(),
            "yes" | "1" | "true"
        ),
        _ => value.len().is_some_and(|n| n > 0),
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

fn groups_of(caps: &regex::Captures<'_>) -> MjValue {
    MjValue::from_object(minijinja::value::Tuple::new(
        caps.iter()
            .skip(1)
            .map(|g| g.map_or(MjValue::from(()), |m| MjValue::from(m.as_str())))
            .collect(),
    ))
}

/// A YAML double-quoted scalar (Salt's `yaml_dquote`).
fn double_quoted(text: &str) -> String {
    let mut out = String::from("\"");
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
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

/// Python's `shlex.quote`.
pub fn shell_quote(text: &str) -> String {
    if text.is_empty() {
        return "''".to_string();
    }
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c))
    {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', "'\"'\"'"))
}

/// `os.path.join`.
fn path_join(first: MjValue, rest: Rest<MjValue>) -> String {
    let mut joined = python_str(&first);
    for part in rest.iter() {
        let part = python_str(part);
        if part.starts_with('/') {
            joined = part;
        } else if joined.is_empty() || joined.ends_with('/') {
            joined.push_str(&part);
        } else {
            joined.push('/');
            joined.push_str(&part);
        }
    }
    joined
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

fn flatten_filter(value: MjValue, levels: Option<i64>, preserve_nulls: Option<bool>) -> MjValue {
    fn walk(value: &MjValue, levels: Option<i64>, keep_nulls: bool, out: &mut Vec<MjValue>) {
        for item in items_of(value) {
            if item.is_none() && !keep_nulls {
                continue;
            }
            if is_list(&item) && levels.is_none_or(|l| l > 0) {
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

fn to_num(value: MjValue) -> MjValue {
    let Some(text) = value.as_str() else {
        return value;
    };
    if let Ok(i) = text.trim().parse::<i64>() {
        return MjValue::from(i);
    }
    if let Ok(f) = text.trim().parse::<f64>() {
        return MjValue::from(f);
    }
    value
}
