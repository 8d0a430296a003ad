//! Resolution of plain YAML scalars the way Salt's loader does it: PyYAML's
//! YAML 1.1 implicit resolvers, with Salt's twist that an integer written with
//! leading zeros is decimal (`0644` is 644), and timestamps left as strings.

use crate::Value;

/// What a plain scalar resolves to under YAML 1.1 (PyYAML's resolver table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScalarKind {
    Null,
    Bool,
    Int,
    Float,
    Merge,
    Str,
}

/// Classifies a plain (unquoted) scalar as PyYAML's implicit resolvers do.
pub(crate) fn classify_plain(text: &str) -> ScalarKind {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return ScalarKind::Null,
        "yes" | "Yes" | "YES" | "no" | "No" | "NO" | "true" | "True" | "TRUE" | "false"
        | "False" | "FALSE" | "on" | "On" | "ON" | "off" | "Off" | "OFF" => {
            return ScalarKind::Bool
        }
        "<<" => return ScalarKind::Merge,
        _ => {}
    }
    // Every YAML 1.1 int and float starts with a digit, a sign or a dot:
    // anything else (most keys and names) is a string.
    if !matches!(
        text.as_bytes().first(),
        Some(b'0'..=b'9' | b'+' | b'-' | b'.')
    ) {
        return ScalarKind::Str;
    }
    if is_yaml11_int(text) {
        ScalarKind::Int
    } else if is_yaml11_float(text) {
        ScalarKind::Float
    } else {
        ScalarKind::Str
    }
}

fn strip_sign(text: &str) -> (bool, &str) {
    match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    }
}

fn all_of(text: &str, allowed: impl Fn(u8) -> bool) -> bool {
    !text.is_empty() && text.bytes().all(allowed)
}

/// `[-+]?0b[0-1_]+ | [-+]?0[0-7_]+ | [-+]?(0|[1-9][0-9_]*) | [-+]?0x[0-9a-fA-F_]+ | sexagesimal`
fn is_yaml11_int(text: &str) -> bool {
    let (_, body) = strip_sign(text);
    if let Some(bin) = body.strip_prefix("0b") {
        return all_of(bin, |b| b == b'0' || b == b'1' || b == b'_');
    }
    if let Some(hex) = body.strip_prefix("0x") {
        return all_of(hex, |b| b.is_ascii_hexdigit() || b == b'_');
    }
    if body == "0" {
        return true;
    }
    if let Some(oct) = body.strip_prefix('0') {
        return all_of(oct, |b| (b'0'..=b'7').contains(&b) || b == b'_');
    }
    if let Some((head, rest)) = body.split_once(':') {
        return is_decimal_head(head) && sexagesimal_tail(rest, false);
    }
    is_decimal_head(body)
}

/// `[1-9][0-9_]*`
fn is_decimal_head(text: &str) -> bool {
    let bytes = text.as_bytes();
    matches!(bytes.first(), Some(b'1'..=b'9'))
        && bytes[1..].iter().all(|b| b.is_ascii_digit() || *b == b'_')
}

/// `(:[0-5]?[0-9])+` after the first `:` was split off; with `float_tail`, the
/// last group may carry `.[0-9_]*`.
fn sexagesimal_tail(rest: &str, float_tail: bool) -> bool {
    let parts: Vec<&str> = rest.split(':').collect();
    let last_index = parts.len() - 1;
    parts.iter().enumerate().all(|(index, part)| {
        let (digits, fraction) = if float_tail && index == last_index {
            match part.split_once('.') {
                Some((d, f)) => (d, Some(f)),
                None => return false,
            }
        } else {
            (*part, None)
        };
        let digits_ok = match digits.as_bytes() {
            [d] => d.is_ascii_digit(),
            [a, b] => (b'0'..=b'5').contains(a) && b.is_ascii_digit(),
            _ => false,
        };
        digits_ok && fraction.is_none_or(|f| f.bytes().all(|b| b.is_ascii_digit() || b == b'_'))
    })
}

/// PyYAML's YAML 1.1 float: a dot is required; an exponent needs a sign.
fn is_yaml11_float(text: &str) -> bool {
    let (_, body) = strip_sign(text);
    if matches!(body, ".inf" | ".Inf" | ".INF") {
        return true;
    }
    if matches!(text, ".nan" | ".NaN" | ".NAN") {
        return true;
    }
    if let Some((head, rest)) = body.split_once(':') {
        let head_ok = matches!(head.as_bytes().first(), Some(b'0'..=b'9'))
            && head.bytes().all(|b| b.is_ascii_digit() || b == b'_');
        return head_ok && sexagesimal_tail(rest, true);
    }
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(pos) => (&body[..pos], Some(&body[pos + 1..])),
        None => (body, None),
    };
    if let Some(exp) = exponent {
        let valid = matches!(exp.as_bytes().first(), Some(b'-' | b'+'))
            && exp.len() > 1
            && exp[1..].bytes().all(|b| b.is_ascii_digit());
        if !valid {
            return false;
        }
    }
    let Some((int_part, frac_part)) = mantissa.split_once('.') else {
        return false;
    };
    let frac_ok = frac_part.bytes().all(|b| b.is_ascii_digit() || b == b'_');
    if int_part.is_empty() {
        // `.5`: `\.[0-9][0-9_]*` (no sign allowed by PyYAML's regex here)
        return body.len() == text.len()
            && matches!(frac_part.as_bytes().first(), Some(b'0'..=b'9'))
            && frac_ok;
    }
    matches!(int_part.as_bytes().first(), Some(b'0'..=b'9'))
        && int_part.bytes().all(|b| b.is_ascii_digit() || b == b'_')
        && frac_ok
}

/// The boolean value of a YAML 1.1 boolean word.
pub(crate) fn bool_value(text: &str) -> bool {
    matches!(text.to_ascii_lowercase().as_str(), "yes" | "true" | "on")
}

/// Converts an integer scalar (already classified as one) to a value:
/// Salt strips leading zeros, so `0644` is decimal 644; `0x`/`0b` keep their base.
pub(crate) fn int_value(text: &str) -> Option<Value> {
    let (negative, body) = strip_sign(text);
    let cleaned: String = body.chars().filter(|c| *c != '_').collect();
    let magnitude: i128 = if let Some(hex) = cleaned.strip_prefix("0x") {
        i128::from_str_radix(hex, 16).ok()?
    } else if let Some(bin) = cleaned.strip_prefix("0b") {
        i128::from_str_radix(bin, 2).ok()?
    } else if cleaned.contains(':') {
        cleaned.split(':').try_fold(0i128, |acc, part| {
            Some(acc * 60 + part.parse::<i128>().ok()?)
        })?
    } else if text.starts_with(['-', '+']) && cleaned.len() > 1 && cleaned.starts_with('0') {
        // Salt only strips the zeros of an unsigned literal; PyYAML then reads
        // a signed `-0644` or `+0644` as octal.
        i128::from_str_radix(&cleaned[1..], 8).ok()?
    } else {
        let trimmed = cleaned.trim_start_matches('0');
        if trimmed.is_empty() {
            0
        } else {
            trimmed.parse::<i128>().ok()?
        }
    };
    let signed = if negative { -magnitude } else { magnitude };
    if let Ok(small) = i64::try_from(signed) {
        Some(Value::from(small))
    } else if let Ok(unsigned) = u64::try_from(signed) {
        Some(Value::from(unsigned))
    } else {
        // Python ints are unbounded; JSON numbers here are not. Keep the digits.
        Some(Value::String(signed.to_string()))
    }
}

/// Converts a float scalar to a value. JSON has no infinities or NaN, so those
/// become the strings Python prints for them (`inf`, `-inf`, `nan`).
pub(crate) fn float_value(text: &str) -> Option<Value> {
    let (negative, body) = strip_sign(text);
    let lower = body.to_ascii_lowercase();
    if lower == ".inf" {
        return Some(Value::String(
            if negative { "-inf" } else { "inf" }.to_string(),
        ));
    }
    if lower == ".nan" {
        return Some(Value::String("nan".to_string()));
    }
    let cleaned: String = body.chars().filter(|c| *c != '_').collect();
    let magnitude: f64 = if cleaned.contains(':') {
        cleaned.split(':').try_fold(0f64, |acc, part| {
            Some(acc * 60.0 + part.parse::<f64>().ok()?)
        })?
    } else {
        let normalized = if cleaned.starts_with('.') {
            format!("0{cleaned}")
        } else {
            cleaned
        };
        normalized.parse::<f64>().ok()?
    };
    let signed = if negative { -magnitude } else { magnitude };
    serde_json::Number::from_f64(signed).map(Value::Number)
}

/// Resolves a plain scalar to its value (merge keys are handled by the loader).
pub(crate) fn resolve_plain(text: &str) -> Value {
    match classify_plain(text) {
        ScalarKind::Null => Value::Null,
        ScalarKind::Bool => Value::Bool(bool_value(text)),
        ScalarKind::Int => int_value(text).unwrap_or_else(|| Value::String(text.to_string())),
        ScalarKind::Float => float_value(text).unwrap_or_else(|| Value::String(text.to_string())),
        ScalarKind::Merge | ScalarKind::Str => Value::String(text.to_string()),
    }
}

/// [`resolve_plain`] for text the caller owns: a string keeps its buffer
/// when it is one already.
pub(crate) fn resolve_plain_owned(text: std::borrow::Cow<'_, str>) -> Value {
    match classify_plain(&text) {
        ScalarKind::Merge | ScalarKind::Str => Value::String(text.into_owned()),
        _ => resolve_plain(&text),
    }
}

/// PyYAML's YAML 1.1 timestamp pattern (`2001-12-14`, `2001-12-14 21:59:43.10 -5`).
pub(crate) fn is_timestamp(text: &str) -> bool {
    static PATTERN: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    PATTERN
        .get_or_init(|| {
            regex::Regex::new(
                r"^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$",
            )
            .ok()
        })
        .as_ref()
        .is_some_and(|re| re.is_match(text))
}

/// Whether a string could be written plain and read back as the same string
/// (PyYAML's "implicit" check when it dumps).
pub(crate) fn plain_reads_back_as_string(text: &str) -> bool {
    classify_plain(text) == ScalarKind::Str && text != "=" && !is_timestamp(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml11_booleans_in_every_case_pyyaml_accepts() {
        for word in [
            "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE",
        ] {
            assert_eq!(resolve_plain(word), json!(true), "{word}");
        }
        for word in [
            "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE",
        ] {
            assert_eq!(resolve_plain(word), json!(false), "{word}");
        }
        assert_eq!(resolve_plain("yEs"), json!("yEs"));
        assert_eq!(resolve_plain("y"), json!("y"));
    }

    #[test]
    fn integers_follow_salt_not_yaml_octal() {
        assert_eq!(resolve_plain("0644"), json!(644));
        assert_eq!(resolve_plain("0750"), json!(750));
        assert_eq!(resolve_plain("0"), json!(0));
        assert_eq!(resolve_plain("000"), json!(0));
        assert_eq!(resolve_plain("0x1F"), json!(31));
        assert_eq!(resolve_plain("0b101"), json!(5));
        assert_eq!(resolve_plain("+12"), json!(12));
        assert_eq!(resolve_plain("+0644"), json!(420));
        assert_eq!(resolve_plain("-12"), json!(-12));
        assert_eq!(resolve_plain("1_000"), json!(1000));
        assert_eq!(resolve_plain("1:30"), json!(90));
        assert_eq!(
            resolve_plain("0800"),
            json!("0800"),
            "8 is not an octal digit"
        );
        assert_eq!(
            resolve_plain("1e5"),
            json!("1e5"),
            "YAML 1.1 floats need a dot"
        );
    }

    #[test]
    fn floats_need_a_dot_and_signed_exponent() {
        assert_eq!(resolve_plain("1.5"), json!(1.5));
        assert_eq!(resolve_plain("1."), json!(1.0));
        assert_eq!(resolve_plain(".5"), json!(0.5));
        assert_eq!(resolve_plain("1.0e+3"), json!(1000.0));
        assert_eq!(resolve_plain("1.0e3"), json!("1.0e3"));
        assert_eq!(resolve_plain(".inf"), json!("inf"));
        assert_eq!(resolve_plain("-.Inf"), json!("-inf"));
        assert_eq!(resolve_plain(".NaN"), json!("nan"));
        assert_eq!(resolve_plain("3.1.4"), json!("3.1.4"));
    }

    #[test]
    fn nulls_and_timestamps() {
        for word in ["", "~", "null", "Null", "NULL"] {
            assert_eq!(resolve_plain(word), Value::Null, "{word}");
        }
        assert_eq!(resolve_plain("2024-01-02"), json!("2024-01-02"));
        assert_eq!(resolve_plain("nULL"), json!("nULL"));
    }
}
