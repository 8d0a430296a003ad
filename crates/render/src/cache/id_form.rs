//! The id form of a rendered text: the minion's id replaced by a
//! placeholder, so a fleet whose SLS differ only by the id (paths built
//! from `grains['id']`) parses one text instead of one per minion.
//!
//! Why the shared parse is exact. Let `T` be a minion's text and `F` its
//! id form (every occurrence of the id replaced by [`PLACEHOLDER`]). Then
//! `T` is `F` with the placeholder replaced back by the id, and the data
//! `T` loads to is the data `F` loads to with the placeholder replaced by
//! the id in every string, when all of these hold (each is checked; any
//! failure sends the minion to its own parse):
//!
//! - the id is made of `[A-Za-z0-9_.-]` and starts with a letter or
//!   digit, as the placeholder is, so swapping one for the other inside a
//!   line never creates or removes a YAML token (no quote, colon, space,
//!   `#`, flow or block indicator, escape), and it is no longer than the
//!   placeholder, so a key that fits YAML's 1024-character simple-key
//!   limit in `F` fits in `T`;
//! - `T` does not hold the placeholder, and the placeholder's first
//!   character occurs nowhere else in it, so the placeholders in `F` are
//!   exactly the replaced ids;
//! - every placeholder of `F` is inside a string of its data (the count in
//!   the text equals the count in the strings: none was eaten by a
//!   comment, an anchor, a tag or an escape);
//! - every string that held a placeholder reads, once the id is back, as
//!   a string when written plain (YAML 1.1 resolves `123`, `yes`, `1e3`,
//!   `null` to other types: such a minion gets its own parse);
//! - putting the id back does not make two keys of one mapping equal (a
//!   duplicate key is an error in Salt, which the minion's own parse gives).

use crate::yaml::scalar::{classify_plain, ScalarKind};
use crate::{Map, Value};

/// What replaces the id. Starts with `Q`, which it holds nowhere else, and
/// is of the id's character class.
pub const PLACEHOLDER: &str = "Qhaliteminionidplaceholder0000000000000000000000000000000000000x";

/// Whether `text`, rendered for minion `id`, has a usable id form: the id
/// is of the safe class and length and occurs in the text, and the text
/// does not hold the placeholder.
pub fn applies(text: &str, id: &str) -> bool {
    id_is_inert(id) && text.contains(id) && !text.contains(PLACEHOLDER)
}

/// The id form of `text`.
pub fn of(text: &str, id: &str) -> String {
    text.replace(id, PLACEHOLDER)
}

/// Parses the id form `form` with `parse`, keeping the data only when
/// every placeholder of the text is inside one of its strings.
pub fn parse<E>(form: &str, parse: impl Fn(&str) -> Result<Value, E>) -> Option<Value> {
    let data = parse(form).ok()?;
    (count_in_data(&data) == form.matches(PLACEHOLDER).count()).then_some(data)
}

/// `data` (an id form's parse) with the id put back into its strings and
/// keys; `None` when that would not be what the minion's own text loads
/// to (a string that would read as another type, a repeated key).
///
/// Built at its final size: every list and map of the result is allocated
/// once (collecting through `Option` would grow them from empty, and the
/// copies of a 1,000-state tree's data were most of this function).
pub fn substitute(data: &Value, id: &str) -> Option<Value> {
    match data {
        Value::String(s) => string(s, id).map(Value::String),
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                out.push(substitute(item, id)?);
            }
            Some(Value::Array(out))
        }
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (key, value) in map {
                let key = string(key, id)?;
                let value = substitute(value, id)?;
                if out.insert(key, value).is_some() {
                    return None;
                }
            }
            Some(Value::Object(out))
        }
        other => Some(other.clone()),
    }
}

/// Whether [`substitute`] puts `id` back into the string `s` (of a form's
/// parse) as a string: `false` when the string would then read as
/// another type, and the minion gets its own parse.
pub fn string_puts_back(s: &str, id: &str) -> bool {
    string(s, id).is_some()
}

/// A string with the id back in it, `None` when it would then read as
/// something other than a string.
fn string(s: &str, id: &str) -> Option<String> {
    if !s.contains(PLACEHOLDER) {
        return Some(s.to_string());
    }
    let back = s.replace(PLACEHOLDER, id);
    (classify_plain(&back) == ScalarKind::Str).then_some(back)
}

/// Whether `id` can stand where the placeholder stood: one or more of
/// `[A-Za-z0-9_.-]`, a letter or digit first, no longer than it.
pub fn id_is_inert(id: &str) -> bool {
    id.len() <= PLACEHOLDER.len()
        && id.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// How many placeholders the strings and keys of `data` hold.
fn count_in_data(data: &Value) -> usize {
    match data {
        Value::String(s) => s.matches(PLACEHOLDER).count(),
        Value::Array(items) => items.iter().map(count_in_data).sum(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| k.matches(PLACEHOLDER).count() + count_in_data(v))
            .sum(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What the shared parse gives minion `id` for `text`, `None` when it
    /// refuses (the minion then parses its own text).
    fn shared(text: &str, id: &str) -> Option<Value> {
        if !applies(text, id) {
            return None;
        }
        let data = parse(&of(text, id), crate::yaml::load)?;
        substitute(&data, id)
    }

    /// The shared parse, when given, must equal the minion's own.
    fn check(text: &str, id: &str) -> Option<Value> {
        let got = shared(text, id);
        if let Some(got) = &got {
            assert_eq!(got, &crate::yaml::load(text).unwrap(), "{text:?} for {id}");
        }
        got
    }

    #[test]
    fn the_placeholder_holds_its_first_character_once() {
        assert_eq!(PLACEHOLDER.matches('Q').count(), 1);
        assert!(PLACEHOLDER.starts_with('Q'));
        assert!(id_is_inert(PLACEHOLDER));
    }

    #[test]
    fn ids_in_paths_names_and_keys_share_the_parse() {
        let text = "web1_motd:\n  file.managed:\n    - name: /srv/web1/motd\n    - contents: \"host web1\"\n";
        let got = check(text, "web1").unwrap();
        assert_eq!(
            got["web1_motd"]["file.managed"][0]["name"],
            json!("/srv/web1/motd")
        );
        // Another minion, same form: the same shared data, its own id.
        let other = text.replace("web1", "db-2.example.com");
        let got = check(&other, "db-2.example.com").unwrap();
        assert!(got.get("db-2.example.com_motd").is_some());
    }

    #[test]
    fn an_id_that_would_read_as_another_type_gets_its_own_parse() {
        // `name: 123` is the integer 123, `1.5` a float, `on` a bool.
        for (text, id) in [
            ("a:\n  - name: 123\n", "123"),
            ("a: 1.5\n", "1.5"),
            ("a: on\n", "on"),
            ("a: 0x1F\n", "0x1F"),
            ("\"123\": 1\n", "123"),
        ] {
            assert_eq!(check(text, id), None, "{text}");
        }
    }

    #[test]
    fn an_id_that_repeats_a_key_gets_its_own_parse_and_its_error() {
        let text = "web1:\n  test.nop: []\nweb1:\n  test.nop: []\n";
        assert!(crate::yaml::load(text).is_err());
        assert_eq!(check(text, "web1"), None);
        // Keys that become equal only once the id is back.
        let data = json!({"Qx": 1, "web1": 2});
        let form = data.to_string().replace("Qx", PLACEHOLDER);
        let data: Value = serde_json::from_str(&form).unwrap();
        assert_eq!(substitute(&data, "web1"), None);
    }

    #[test]
    fn ids_in_comments_anchors_and_escapes_are_refused() {
        for (text, id) in [
            ("a: 1 # web1\n", "web1"),
            ("a: &web1 x\nb: *web1\n", "web1"),
            ("a: \"\\n\"\n", "n"),
            ("a: !!str web1\n", "str"),
        ] {
            let got = check(text, id);
            assert_eq!(got, None, "{text}");
        }
    }

    #[test]
    fn ids_outside_the_safe_class_or_length_are_not_tried() {
        for id in ["web 1", "-web", "a:b", "we#b", "x'y", "", &"a".repeat(65)] {
            assert!(!applies(&format!("k: {id}\n"), id), "{id:?}");
        }
        assert!(!applies("k: web1\n", "web2"));
        assert!(!applies(&format!("k: web1 {PLACEHOLDER}\n"), "web1"));
    }

    #[test]
    fn a_short_id_inside_words_and_booleans_is_still_exact() {
        // `a` occurs in `false` and in keys: `f<placeholder>lse` reads as a
        // string; with `a` back it is the boolean, so the parse is refused.
        assert_eq!(check("name: x\nflag: false\n", "a"), None);
        // Without such a word, every replaced `a` is inside a string.
        assert!(check("name: a\npath: /srv/a/data\n", "a").is_some());
    }
}
