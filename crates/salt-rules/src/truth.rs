//! Salt's truthiness of an argument: Python's `bool()` for data, plus the
//! words Salt's `is_true` accepts for strings given on a command line or in
//! YAML (`yes`, `on`, `1`...).

use crate::Value;

/// Whether a Salt value counts as true: `None`, `0`, empty collections are
/// false; a string is true only when it is `true`/`yes`/`on`/`y`/`1` in any
/// case (so `"false"` and `"no"` given as text are false, as Salt reads
/// flags).
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().map(|f| f != 0.0).unwrap_or(false),
        Value::String(s) => matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "yes" | "on" | "1" | "y"
        ),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Python's own `bool()` of a value, for the places Salt tests data with
/// `if value:` (a non-empty string is true whatever it says), unlike
/// [`truthy`] which reads flag words.
pub fn python_bool(v: &Value) -> bool {
    match v {
        Value::String(s) => !s.is_empty(),
        other => truthy(other),
    }
}

#[cfg(test)]
mod tests {
    use super::{python_bool, truthy};
    use serde_json::json;

    #[test]
    fn data_and_flag_words() {
        for yes in [
            json!(true),
            json!(1),
            json!(0.5),
            json!("Yes"),
            json!("on"),
            json!("Y"),
            json!("1"),
            json!([0]),
            json!({"a": 0}),
        ] {
            assert!(truthy(&yes), "{yes}");
        }
        for no in [
            json!(false),
            json!(0),
            json!(0.0),
            json!(null),
            json!("false"),
            json!("no"),
            json!(""),
            json!("0"),
            json!("x"),
            json!([]),
            json!({}),
        ] {
            assert!(!truthy(&no), "{no}");
        }
    }

    #[test]
    fn python_bool_is_pythons() {
        assert!(python_bool(&json!("false")));
        assert!(python_bool(&json!("aGVsbG8=")));
        assert!(!python_bool(&json!("")));
        assert!(!python_bool(&json!(0)));
        assert!(!python_bool(&json!(null)));
        assert!(python_bool(&json!([0])));
    }
}
