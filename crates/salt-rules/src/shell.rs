//! Shell quoting and splitting as Salt does them: Python's `shlex.quote`
//! for the `quote` Jinja filter, single-quoting of a whole command for
//! `sh -c`, and the POSIX-like word split of `python_shell=False` commands.
//!
//! The `shlex` crate was tried against these and not used: its `try_quote`
//! spells quotes differently from Python's `shlex.quote` (which the Jinja
//! filter's output must equal), and its `split` treats `#` as a comment and
//! refuses an unclosed quote, where halite's commands keep both as text.

/// Python's `shlex.quote`: a word of only safe characters stays as it is,
/// the empty word is `''`, anything else goes in single quotes with each
/// `'` written as `'"'"'`.
pub fn shlex_quote(text: &str) -> String {
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

/// Quotes `s` for a POSIX shell, always in single quotes (each `'` written
/// as `'\''`): how a command or a path is passed to `sh -c`.
pub fn single_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Splits a command line into words like a POSIX shell (single and double
/// quotes, backslashes), for commands run without a shell. An unclosed
/// quote runs to the end of the line; `#` is an ordinary character.
pub fn split_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    cur.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                cur.push(n);
                            }
                        }
                        _ => cur.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shlex_quote_matches_python() {
        assert_eq!(shlex_quote(""), "''");
        assert_eq!(shlex_quote("a-b_c/d.e:f"), "a-b_c/d.e:f");
        assert_eq!(shlex_quote("a b"), "'a b'");
        assert_eq!(shlex_quote("it's"), "'it'\"'\"'s'");
    }

    #[test]
    fn single_quote_always_quotes() {
        assert_eq!(single_quote("abc"), "'abc'");
        assert_eq!(single_quote("it's"), "'it'\\''s'");
    }

    #[test]
    fn split_words_follows_the_shell() {
        assert_eq!(
            split_words(r#"echo 'a b' "c \"d\"" e\ f  # g"#),
            ["echo", "a b", "c \"d\"", "e f", "#", "g"]
        );
        assert_eq!(split_words("''"), [""]);
        assert_eq!(split_words("  "), Vec::<String>::new());
        assert_eq!(split_words("'open"), ["open"]);
    }
}
