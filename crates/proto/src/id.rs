//! Minion ids: validated before they name a file, a session or a target.

/// Why a minion id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidMinionId {
    /// The id is empty.
    #[error("minion id is empty; set `id` in the minion config")]
    Empty,
    #[error("minion id is longer than {max} bytes; choose a shorter `id`")]
    /// The id is longer than the limit.
    TooLong {
        /// The limit in bytes.
        max: usize,
    },
    /// The id could escape the key directory (named here).
    #[error("minion id {0:?} contains '/', '\\\\', '..', NUL or a control character; such ids are refused because they could escape the key directory")]
    Unsafe(String),
    /// The id holds a character that makes it display as another id (named here).
    #[error("minion id {0:?} contains a bidirectional or zero-width formatting character (U+202E and the like); such ids are refused because they display as another id")]
    Deceptive(String),
}

/// The longest minion id accepted (a file name must hold it).
pub const MAX_MINION_ID_BYTES: usize = 255;

/// Characters that change how the text around them is displayed without
/// showing themselves (Trojan Source, CVE-2021-42574): bidirectional
/// embeddings, overrides, isolates and marks, and zero-width characters.
fn is_deceptive(c: char) -> bool {
    matches!(c,
        '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

/// Checks that `id` can safely name a key file and a cache entry: not
/// empty, not `.`/`..`, no `/`, `\`, `..`, NUL or control characters.
pub fn validate_minion_id(id: &str) -> Result<(), InvalidMinionId> {
    if id.is_empty() {
        return Err(InvalidMinionId::Empty);
    }
    if id.len() > MAX_MINION_ID_BYTES {
        return Err(InvalidMinionId::TooLong {
            max: MAX_MINION_ID_BYTES,
        });
    }
    let unsafe_char = id.chars().any(|c| c == '/' || c == '\\' || c.is_control());
    if unsafe_char || id.contains("..") || id == "." {
        return Err(InvalidMinionId::Unsafe(id.to_string()));
    }
    if id.chars().any(is_deceptive) {
        return Err(InvalidMinionId::Deceptive(id.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_ids_pass() {
        for id in ["web1", "db-02.example.com", "minion_3", "a.b"] {
            assert_eq!(validate_minion_id(id), Ok(()), "{id}");
        }
    }

    #[test]
    fn path_like_ids_are_refused() {
        for id in [
            "", "a/b", "..", "../etc", "x..y", "a\0b", ".", "a\\b", "a\nb",
        ] {
            assert!(validate_minion_id(id).is_err(), "{id:?} must be refused");
        }
        assert!(validate_minion_id(&"a".repeat(256)).is_err());
        assert!(validate_minion_id(&"a".repeat(255)).is_ok());
    }

    #[test]
    fn ids_that_display_as_another_are_refused() {
        for id in [
            "web\u{202E}1bew",
            "\u{2066}db",
            "we\u{200B}b",
            "\u{FEFF}web",
            "a\u{061C}b",
        ] {
            assert!(
                matches!(validate_minion_id(id), Err(InvalidMinionId::Deceptive(_))),
                "{id:?} must be refused"
            );
        }
        assert_eq!(validate_minion_id("ünïcode-wéb"), Ok(()));
    }
}
