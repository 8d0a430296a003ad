//! Command-line function arguments, parsed as Salt does: each word is YAML
//! (`test.echo 1` passes an integer), `key=value` words are keyword
//! arguments.

use halite_modules::Args;
use serde_json::Value;

/// Parses one argument value with Salt's YAML rules, keeping it a string
/// when it does not load as a plain scalar, list or mapping.
pub fn yamlify(word: &str) -> Value {
    if word.is_empty() {
        return Value::from("");
    }
    match halite_render::yaml::load(word) {
        Ok(Value::Null) if !matches!(word, "null" | "None" | "~" | "Null" | "NULL") => {
            Value::from(word)
        }
        Ok(Value::String(_)) => Value::from(word),
        Ok(v) => v,
        Err(_) => Value::from(word),
    }
}

/// Splits CLI words into positional and keyword arguments.
pub fn parse_args(words: &[String]) -> Args {
    let mut args = Args::default();
    for w in words {
        match w.split_once('=') {
            Some((k, v)) if is_kwarg_name(k) => {
                args.kwargs.insert(k.to_string(), yamlify(v));
            }
            _ => args.positional.push(yamlify(w)),
        }
    }
    args
}

fn is_kwarg_name(k: &str) -> bool {
    !k.is_empty()
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !k.starts_with(|c: char| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn salt_arg_parsing() {
        let a = parse_args(&[
            "main".into(),
            "test=True".into(),
            "pillar={\"k\": \"v\"}".into(),
            "1".into(),
            "a b=c".into(),
        ]);
        assert_eq!(a.positional[0], Value::from("main"));
        assert_eq!(a.kwargs["test"], Value::Bool(true));
        assert_eq!(a.kwargs["pillar"]["k"], Value::from("v"));
        assert_eq!(a.positional[1], Value::from(1));
        assert_eq!(a.positional[2], Value::from("a b=c"));
    }
}
