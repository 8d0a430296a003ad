//! Keeping pillar secrets out of what is shown and stored.
//!
//! Two rules live here, once for all of halite:
//! - [`serial`] is Salt 3008's `salt.utils.secret.serial`: every non-empty
//!   (truthy) scalar leaf of pillar data becomes `**********`; what
//!   `pillar.items`, `pillar.get`, `pillar.item` and `pillar.ext` return
//!   unless `unmask=True`.
//! - [`Cleartexts`] is halite's own: the values the gpg renderer decrypted
//!   for a minion, found and replaced by the same placeholder wherever they
//!   appear in data (a job return, a cached pillar) before it is written to
//!   disk, so a secret echoed by `cmd.run` or shown in a `file.managed` diff
//!   is never stored in clear.

use aho_corasick::{AhoCorasick, MatchKind};

use crate::{Map, Value};

/// What a masked value is shown as (Salt's `REDACT_PLACEHOLDER`).
pub const REDACT_PLACEHOLDER: &str = "**********";

/// Salt's `serial`: `value` with every truthy scalar leaf (a non-empty
/// string, a non-zero number, `true`) replaced by [`REDACT_PLACEHOLDER`];
/// empty strings, `0`, `false`, `null` and the structure stay as they are.
pub fn serial(value: &Value) -> Value {
    match value {
        Value::Array(a) => Value::Array(a.iter().map(serial).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), serial(v))).collect()),
        Value::Null => Value::Null,
        leaf if crate::truth::python_bool(leaf) => Value::from(REDACT_PLACEHOLDER),
        leaf => leaf.clone(),
    }
}

/// The shortest line of a multi-line secret that is masked on its own
/// (a PEM key's body lines are; a lone `}` or `-----END` line is not).
pub const MIN_LINE_FRAGMENT: usize = 8;

/// The shortest secret that is masked at all: shorter cleartexts (`1`,
/// `no`) would mask unrelated text everywhere and protect nothing.
pub const MIN_SECRET: usize = 4;

/// The cleartexts of one minion's decrypted secrets, ready to be found in
/// any data: each whole secret (trimmed) and, for a multi-line secret,
/// each of its lines of at least [`MIN_LINE_FRAGMENT`] characters (a diff
/// or a `cmd.run` output shows them one by one).
#[derive(Clone, Default)]
pub struct Cleartexts {
    needles: Vec<String>,
    finder: Option<AhoCorasick>,
}

impl std::fmt::Debug for Cleartexts {
    /// Never prints the secrets themselves.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cleartexts({} patterns)", self.needles.len())
    }
}

impl Cleartexts {
    /// The patterns for `secrets` (the decrypted texts).
    pub fn new<I, S>(secrets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut needles = Vec::new();
        for secret in secrets {
            let secret = secret.as_ref();
            let whole = secret.trim();
            if whole.chars().count() >= MIN_SECRET {
                needles.push(whole.to_string());
            }
            if whole.contains('\n') {
                for line in whole.lines().map(str::trim) {
                    if line.chars().count() >= MIN_LINE_FRAGMENT {
                        needles.push(line.to_string());
                    }
                }
            }
        }
        needles.sort();
        needles.dedup();
        // Leftmost-longest: a whole secret wins over one of its lines.
        let finder = if needles.is_empty() {
            None
        } else {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(&needles)
                .ok()
        };
        Self { needles, finder }
    }

    /// These patterns and those of `more` secrets.
    pub fn extended<S: AsRef<str>>(&self, more: &[S]) -> Self {
        Self::new(
            self.needles
                .iter()
                .map(String::as_str)
                .chain(more.iter().map(AsRef::as_ref)),
        )
    }

    /// Whether there is nothing to mask.
    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    /// `text` with every occurrence of a secret replaced by
    /// [`REDACT_PLACEHOLDER`].
    pub fn mask_text(&self, text: &str) -> String {
        match &self.finder {
            Some(finder) => {
                let placeholders = vec![REDACT_PLACEHOLDER; self.needles.len()];
                finder.replace_all(text, &placeholders)
            }
            None => text.to_string(),
        }
    }

    /// `value` with every secret masked in its strings and mapping keys, at
    /// any depth.
    pub fn mask(&self, value: &Value) -> Value {
        if self.finder.is_none() {
            return value.clone();
        }
        match value {
            Value::String(s) => Value::String(self.mask_text(s)),
            Value::Array(a) => Value::Array(a.iter().map(|v| self.mask(v)).collect()),
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, v) in m {
                    out.insert(self.mask_text(k), self.mask(v));
                }
                Value::Object(out)
            }
            other => other.clone(),
        }
    }

    /// Whether `text` holds one of the secrets.
    pub fn found_in(&self, text: &str) -> bool {
        self.finder.as_ref().is_some_and(|f| f.is_match(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serial_masks_truthy_leaves_as_salt_does() {
        let data = json!({"pw": "hunter2", "n": 5, "z": 0, "e": "", "t": true, "f": false,
            "nested": {"a": ["x", 1, "", {"b": "c"}], "none": null}});
        // Recorded from Salt 3008.5: salt-call --local pillar.items
        let salt = json!({"pw": "**********", "n": "**********", "z": 0, "e": "", "t": "**********",
            "f": false, "nested": {"a": ["**********", "**********", "", {"b": "**********"}], "none": null}});
        assert_eq!(serial(&data), salt);
    }

    #[test]
    fn cleartexts_are_masked_in_strings_keys_and_diff_lines() {
        let pem = "-----BEGIN KEY-----\nAAAABBBBCCCCDDDD\nEEEEFFFFGGGG\n-----END KEY-----\n";
        let secrets = Cleartexts::new(["Secret-77", pem, "no"]);
        let ret = json!({
            "cmd_|-x_|-echo Secret-77_|-run": {"changes": {"stdout": "got Secret-77!"}},
            "file": {"diff": "+AAAABBBBCCCCDDDD\n+EEEEFFFFGGGG\n", "whole": pem},
            "other": "no change here", "n": 3,
        });
        let masked = secrets.mask(&ret);
        let text = masked.to_string();
        assert!(!text.contains("Secret-77"), "{text}");
        assert!(
            !text.contains("AAAABBBB") && !text.contains("EEEEFFFF"),
            "{text}"
        );
        assert_eq!(masked["other"], "no change here");
        assert_eq!(masked["n"], 3);
        assert!(
            masked["cmd_|-x_|-echo **********_|-run"]["changes"]["stdout"] == "got **********!"
        );
        assert!(!secrets.found_in(&text));
        assert!(secrets.found_in(&ret.to_string()));
        assert!(Cleartexts::new(Vec::<String>::new()).is_empty());
        assert_eq!(format!("{secrets:?}"), "Cleartexts(6 patterns)");
    }
}
