//! PyYAML's emitter primitives, once: the column and indentation
//! bookkeeping every scalar style shares, and the double-quoted scalar
//! (escapes, long lines broken with a trailing `\`).
//!
//! halite's YAML dumper (halite-render) writes through a [`Cursor`], and
//! [`yamlex_str`] uses the same writer for Salt's yamlex strings, whose
//! `str()` is their double-quoted YAML dump.

/// PyYAML's default line width.
pub const BEST_WIDTH: usize = 80;
/// PyYAML's default indentation step.
pub const BEST_INDENT: usize = 2;

/// Where PyYAML's emitter is in its output: the text so far and the
/// state its line breaking and indicators depend on.
#[derive(Debug, Default)]
pub struct Cursor {
    /// The text written.
    pub out: String,
    /// The column of the next character (in characters).
    pub column: usize,
    /// The current indentation (`None` before the first node).
    pub indent: Option<usize>,
    /// The last character written was whitespace.
    pub whitespace: bool,
    /// Only indentation has been written on this line.
    pub indention: bool,
    /// The document ended with a plain scalar (PyYAML writes `...`).
    pub open_ended: bool,
    /// PyYAML's `allow_unicode`: printable non-ASCII characters are
    /// written as they are rather than escaped.
    pub allow_unicode: bool,
}

impl Cursor {
    /// A cursor at the start of a document.
    pub fn new(allow_unicode: bool) -> Self {
        Cursor {
            whitespace: true,
            indention: true,
            allow_unicode,
            ..Cursor::default()
        }
    }

    /// Writes `text` as is.
    pub fn write_raw(&mut self, text: &str) {
        self.column += text.chars().count();
        self.out.push_str(text);
    }

    /// Ends the line.
    pub fn write_line_break(&mut self) {
        self.out.push('\n');
        self.whitespace = true;
        self.indention = true;
        self.column = 0;
    }

    /// PyYAML's `write_indent`: a new line when needed, then the indentation.
    pub fn write_indent(&mut self) {
        let indent = self.indent.unwrap_or(0);
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.write_line_break();
        }
        if self.column < indent {
            self.whitespace = true;
            let pad = " ".repeat(indent - self.column);
            self.write_raw(&pad);
        }
    }

    /// PyYAML's `write_indicator`.
    pub fn write_indicator(
        &mut self,
        indicator: &str,
        need_whitespace: bool,
        whitespace: bool,
        indention: bool,
    ) {
        if self.whitespace || !need_whitespace {
            self.write_raw(indicator);
        } else {
            self.write_raw(&format!(" {indicator}"));
        }
        self.whitespace = whitespace;
        self.indention = self.indention && indention;
        self.open_ended = false;
    }

    /// PyYAML's `write_double_quoted`: escapes, and long lines broken with
    /// a trailing `\\` (a leading `\\ ` keeps a space that starts a line).
    pub fn write_double_quoted(&mut self, text: &str, split: bool) {
        self.write_indicator("\"", true, false, false);
        let chars: Vec<char> = text.chars().collect();
        let mut start = 0;
        let mut end = 0;
        while end <= chars.len() {
            let ch = chars.get(end).copied();
            let needs_escape = ch.is_none_or(|c| {
                matches!(
                    c,
                    '"' | '\\' | '\u{85}' | '\u{2028}' | '\u{2029}' | '\u{feff}'
                ) || !(('\u{20}'..='\u{7e}').contains(&c)
                    || (self.allow_unicode
                        && (('\u{a0}'..='\u{d7ff}').contains(&c)
                            || ('\u{e000}'..='\u{fffd}').contains(&c))))
            });
            if needs_escape {
                if start < end {
                    let data: String = chars[start..end].iter().collect();
                    self.write_raw(&data);
                    start = end;
                }
                if let Some(c) = ch {
                    let escaped = match c {
                        '\0' => "\\0".to_string(),
                        '\x07' => "\\a".to_string(),
                        '\x08' => "\\b".to_string(),
                        '\t' => "\\t".to_string(),
                        '\n' => "\\n".to_string(),
                        '\x0b' => "\\v".to_string(),
                        '\x0c' => "\\f".to_string(),
                        '\r' => "\\r".to_string(),
                        '\x1b' => "\\e".to_string(),
                        '"' => "\\\"".to_string(),
                        '\\' => "\\\\".to_string(),
                        '\u{85}' => "\\N".to_string(),
                        '\u{a0}' => "\\_".to_string(),
                        '\u{2028}' => "\\L".to_string(),
                        '\u{2029}' => "\\P".to_string(),
                        c if (c as u32) <= 0xff => format!("\\x{:02X}", c as u32),
                        c if (c as u32) <= 0xffff => format!("\\u{:04X}", c as u32),
                        c => format!("\\U{:08X}", c as u32),
                    };
                    self.write_raw(&escaped);
                    start = end + 1;
                }
            }
            if end > 0
                && end + 1 < chars.len()
                && (ch == Some(' ') || start >= end)
                && self.column + end.saturating_sub(start) > BEST_WIDTH
                && split
            {
                let mut data: String = if start < end {
                    chars[start..end].iter().collect()
                } else {
                    String::new()
                };
                data.push('\\');
                if start < end {
                    start = end;
                }
                self.write_raw(&data);
                self.write_indent();
                self.whitespace = false;
                self.indention = false;
                if chars.get(start) == Some(&' ') {
                    self.write_raw("\\");
                }
            }
            end += 1;
        }
        self.write_indicator("\"", false, false, false);
    }
}

/// `str()` of a string Salt's yamlex renderer loaded (its `SLSString`):
/// the string dumped as a double-quoted YAML document, `"foo"` for `foo`.
/// It shows wherever Salt formats such a string into text, e.g. the state
/// tag `test_|-"greet"_|-"greet"_|-nop` of a `#!yamlex` SLS.
pub fn yamlex_str(text: &str) -> String {
    // Salt's yamlex serializer leaves PyYAML's `allow_unicode` off.
    let mut cursor = Cursor::new(false);
    // A root scalar: PyYAML's `increase_indent(flow=True)` from none.
    cursor.indent = Some(BEST_INDENT);
    cursor.write_double_quoted(text, true);
    cursor.out
}

#[cfg(test)]
mod tests {
    use super::yamlex_str;

    /// Each answer is Salt 3008.5's `str(SLSString(text))`.
    #[test]
    fn yamlex_strings_print_as_salt_prints_them() {
        assert_eq!(yamlex_str("greet"), "\"greet\"");
        assert_eq!(yamlex_str("hello world"), "\"hello world\"");
        assert_eq!(yamlex_str(""), "\"\"");
        assert_eq!(yamlex_str("é"), "\"\\xE9\"");
        assert_eq!(yamlex_str("a\"b"), "\"a\\\"b\"");
        assert_eq!(yamlex_str("tab\tx"), "\"tab\\tx\"");
        let long = format!("{}{}", "a".repeat(100), " b c d e f g h ".repeat(10));
        assert_eq!(
            yamlex_str(&long),
            format!(
                "\"{}\\\n  \\ b c d e f g h  b c d e f g h  b c d e f g h  b c d e f g h  b c d e f g h  b c\\\n  \\ d e f g h  b c d e f g h  b c d e f g h  b c d e f g h  b c d e f g h \"",
                "a".repeat(100)
            )
        );
    }
}
