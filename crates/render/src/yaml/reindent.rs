//! libyaml (and so Salt) ignores indentation inside flow collections and
//! multi-line quoted scalars; YAML 1.2 parsers such as saphyr do not. PyYAML
//! itself writes such text: `|yaml` wraps a long flow mapping onto a line
//! indented less than the key that holds it. To load what Salt loads, lines
//! that continue a flow collection or a quoted scalar are indented past the
//! column where it opened. Leading whitespace on those lines is folded away
//! by YAML, so the data does not change.

/// Whether the scanner is inside something that spans lines.
#[derive(Clone, Copy, PartialEq)]
enum Inside {
    Nothing,
    Single,
    Double,
}

/// Re-indents continuation lines of flow collections and quoted scalars.
/// Returns `None` when nothing needed to change.
pub fn reindent_continuations(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 64);
    let mut changed = false;
    let mut flow_depth = 0usize;
    let mut inside = Inside::Nothing;
    // Column the outermost open construct started at.
    let mut open_column = 0usize;
    for line in text.split_inclusive('\n') {
        let spanning = flow_depth > 0 || inside != Inside::Nothing;
        let content = line.trim_start_matches(' ');
        let indent = line.len() - content.len();
        let mut written_indent = indent;
        if spanning && !content.trim().is_empty() && indent <= open_column {
            written_indent = open_column + 1;
            out.push_str(&" ".repeat(written_indent));
            out.push_str(content);
            changed = true;
        } else {
            out.push_str(line);
        }
        let offset = written_indent - indent;
        scan_line(line, offset, &mut flow_depth, &mut inside, &mut open_column);
    }
    changed.then_some(out)
}

/// Updates the flow/quote state with one line. `offset` is how far the line
/// was shifted (for the column of anything that opens on it).
fn scan_line(
    line: &str,
    offset: usize,
    flow_depth: &mut usize,
    inside: &mut Inside,
    open_column: &mut usize,
) {
    let chars: Vec<char> = line.chars().collect();
    let mut index = 0;
    // The last non-space character before the current one on this line
    // (None at the line start): a quote starts a scalar only after an indicator.
    let mut previous: Option<char> = None;
    while index < chars.len() {
        let ch = chars[index];
        match *inside {
            Inside::Single => {
                if ch == '\'' {
                    if chars.get(index + 1) == Some(&'\'') {
                        index += 2;
                        continue;
                    }
                    *inside = Inside::Nothing;
                    previous = Some('\'');
                }
                index += 1;
                continue;
            }
            Inside::Double => {
                if ch == '\\' {
                    index += 2;
                    continue;
                }
                if ch == '"' {
                    *inside = Inside::Nothing;
                    previous = Some('"');
                }
                index += 1;
                continue;
            }
            Inside::Nothing => {}
        }
        match ch {
            '#' if index == 0 || chars[index - 1] == ' ' || chars[index - 1] == '\t' => return,
            '\'' | '"' if previous.is_none_or(|p| "[{,:-?".contains(p)) => {
                if *flow_depth == 0 {
                    *open_column = index + offset;
                }
                *inside = if ch == '\'' {
                    Inside::Single
                } else {
                    Inside::Double
                };
            }
            '[' | '{' if previous.is_none_or(|p| "[{,:-?".contains(p)) || *flow_depth > 0 => {
                if *flow_depth == 0 {
                    *open_column = index + offset;
                }
                *flow_depth += 1;
            }
            ']' | '}' if *flow_depth > 0 => *flow_depth -= 1,
            _ => {}
        }
        if !ch.is_whitespace() {
            previous = Some(ch);
        }
        index += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_mapping_wrapped_by_pyyaml_is_reindented() {
        let text = "a:\n  - context: {x: 1,\n  y: 2}\n  - z\n";
        assert_eq!(
            reindent_continuations(text).as_deref(),
            Some("a:\n  - context: {x: 1,\n              y: 2}\n  - z\n")
        );
    }

    #[test]
    fn quoted_scalars_and_plain_text_are_handled() {
        assert_eq!(
            reindent_continuations("a:\n  - b: 'one\n two'\n"),
            Some("a:\n  - b: 'one\n        two'\n".into())
        );
        assert_eq!(
            reindent_continuations("a: it's\nb: 1\n"),
            None,
            "an apostrophe inside a plain scalar is not a quote"
        );
        assert_eq!(reindent_continuations("a: 'x''y'\nb: [1]\n"), None);
        assert_eq!(
            reindent_continuations("a: 1 # {\nb: 2\n"),
            None,
            "comments are ignored"
        );
    }
}
