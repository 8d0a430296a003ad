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
}

/// The longest minion id accepted (a file name must hold it).
pub const MAX_MINION_ID_BYTES: usize = 255;

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
    }
}
