//! A fast path for the plain block YAML most SLS files are made of:
//! mappings and `- ` sequences nested by indentation, with one-line plain
//! scalars. It builds the same data as the full loader for that subset in a
//! fraction of the time (no token queue, no events, no marks), and gives up
//! (`None`) on anything else, which then goes through the full loader:
//! quotes, flow collections, anchors, tags, comments, block scalars,
//! multi-line scalars, merge keys, non-string or repeated keys, tabs,
//! non-ASCII text, anything it does not expect. Errors are always the full
//! loader's, so they keep their PyYAML shape.

use std::borrow::Cow;

use super::scalar;
use crate::{Map, Value};

/// The bytes that send a text to the full loader: anything but printable
/// ASCII and newlines, and the indicators of quotes, flow collections,
/// anchors, aliases, tags, block scalars, directives and comments.
const REJECTED: [bool; 256] = {
    let mut t = [true; 256];
    let mut b = 0x20;
    while b < 0x7f {
        t[b] = false;
        b += 1;
    }
    t[b'\n' as usize] = false;
    let indicators = b"#'\"{}[]&*!|>%@`?";
    let mut i = 0;
    while i < indicators.len() {
        t[indicators[i] as usize] = true;
        i += 1;
    }
    t
};

/// One non-blank line: its indentation and the text after it.
#[derive(Clone, Copy)]
struct Line<'a> {
    indent: usize,
    text: &'a str,
}

/// Below this size a text is read on one thread (a thread costs more
/// than reading this much): a named option of the performance boundary.
use halite_perf::options::YAML_SPLIT_MIN_BYTES as SPLIT_MIN;

/// Loads `text` when it is in the subset, `None` otherwise.
///
/// A large top-level mapping is cut at top-level keys into pieces read
/// on threads of their own: in the subset every line at column 0 that is
/// not a `- ` item starts a top-level entry (nothing spans lines), so the
/// pieces' entries, in order, are the whole text's. A repeated key across
/// pieces gives up, as a repeated key does in one piece.
pub(super) fn load(text: &str) -> Option<Value> {
    load_on(text, threads())
}

/// [`load`] on up to `threads` threads.
fn load_on(text: &str, threads: usize) -> Option<Value> {
    let bytes = text.as_bytes();
    // Printable ASCII and newlines only; none of the characters that start
    // a construct the fast path does not handle (or a comment).
    if bytes.iter().any(|&b| REJECTED[usize::from(b)]) {
        return None;
    }
    let pieces = if text.len() >= SPLIT_MIN {
        split_at_top_level_keys(text, threads.min(text.len() / SPLIT_MIN))
    } else {
        Vec::new()
    };
    if pieces.len() < 2 {
        let mut parser = FastParser::new(text)?;
        let indent = parser.lines[0].indent;
        let value = parser.block(indent, false)?;
        return (parser.pos == parser.lines.len()).then_some(value);
    }
    // A piece whose thread panicked reads as not taken.
    let entries: Vec<Option<Vec<(String, Value)>>> =
        halite_perf::scoped::map_on_threads(&pieces, |piece| top_level_entries(piece))
            .into_iter()
            .map(Option::flatten)
            .collect();
    // A piece the subset does not take gives the whole text up.
    let all: Vec<Vec<(String, Value)>> = entries.into_iter().collect::<Option<_>>()?;
    let mut map = Map::with_capacity(all.iter().map(Vec::len).sum());
    for (key, value) in all.into_iter().flatten() {
        if map.insert(key, value).is_some() {
            return None;
        }
    }
    Some(Value::Object(map))
}

/// How many threads a large text is read on: the machine's cores, at most
/// the performance boundary's `YAML_MAX_THREADS`.
fn threads() -> usize {
    halite_perf::threads_up_to(halite_perf::options::YAML_MAX_THREADS)
}

/// `text` cut into up to `n` pieces of about equal size, each cut just
/// before a line that starts at column 0 and is not a `- ` item. Empty
/// (no cut) when the text's first line is indented (its top level is
/// then not at column 0) or an item (a top-level list).
fn split_at_top_level_keys(text: &str, n: usize) -> Vec<&str> {
    let bytes = text.as_bytes();
    let first_line = skip_blank_lines(bytes);
    if n < 2
        || bytes
            .get(first_line)
            .is_none_or(|&b| b == b' ' || b == b'-')
    {
        return Vec::new();
    }
    let mut pieces = Vec::with_capacity(n);
    let mut start = 0;
    for i in 1..n {
        let target = (text.len() * i / n).max(start);
        let Some(cut) = next_top_level_line(bytes, target) else {
            break;
        };
        if cut > start {
            pieces.push(&text[start..cut]);
            start = cut;
        }
    }
    pieces.push(&text[start..]);
    pieces
}

/// The offset of the first line after blank lines at the start.
fn skip_blank_lines(bytes: &[u8]) -> usize {
    let mut line = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => line = i + 1,
            b' ' => {}
            _ => break,
        }
        i += 1;
    }
    line
}

/// The start of the first line at or after `from` that begins, at column
/// 0, with something other than a space, a newline or `-`.
fn next_top_level_line(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < bytes.len() {
        let nl = bytes[i..].iter().position(|&b| b == b'\n')? + i;
        let next = nl + 1;
        if bytes
            .get(next)
            .is_some_and(|&b| !matches!(b, b' ' | b'\n' | b'-'))
        {
            return Some(next);
        }
        i = next;
    }
    None
}

/// The top-level entries of one piece, in order (a mapping at column 0).
fn top_level_entries(piece: &str) -> Option<Vec<(String, Value)>> {
    let mut parser = FastParser::new(piece)?;
    if parser.lines[0].indent != 0 {
        return None;
    }
    parser.mapping_entries(0)?;
    (parser.pos == parser.lines.len()).then_some(parser.entries)
}

struct FastParser<'a> {
    lines: Vec<Line<'a>>,
    pos: usize,
    /// The entries of the mappings being read, innermost last: a mapping
    /// is built once its entries are known, at its exact size (most SLS
    /// mappings have one or two keys; grown one insert at a time, each
    /// reserved room for four).
    entries: Vec<(String, Value)>,
}

/// `text` without its leading spaces.
fn skip_spaces(text: &str) -> &str {
    let n = text.bytes().take_while(|&b| b == b' ').count();
    &text[n..]
}

/// Where `: ` first occurs (a byte scan: `str::find` sets up a substring
/// searcher per call, which cost more than the scan on these short lines).
fn colon_space(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    (0..b.len().saturating_sub(1)).find(|&i| b[i] == b':' && b[i + 1] == b' ')
}

/// Splits `key: value` / `key:`; `None` when the line is not a mapping entry.
fn split_entry(text: &str) -> Option<(&str, &str)> {
    let (key, value) = match colon_space(text) {
        Some(i) => (&text[..i], skip_spaces(&text[i + 2..])),
        None => (text.strip_suffix(':')?, ""),
    };
    Some((key, value))
}

/// Whether `text` can be read as a one-line plain scalar here: it starts
/// with no indicator and holds no `: ` or final `:`.
fn plain_ok(text: &str) -> bool {
    let Some(first) = text.bytes().next() else {
        return false;
    };
    !matches!(first, b'-' | b':' | b',' | b' ' | b'.' | b'<' | b'=' | b'~')
        && colon_space(text).is_none()
        && !text.ends_with(':')
}

/// [`plain_ok`] for a key [`split_entry`] cut: it holds no `: ` by
/// construction (it ends where the first one is), so that scan is skipped.
fn plain_key_ok(key: &str) -> bool {
    let Some(first) = key.bytes().next() else {
        return false;
    };
    !matches!(first, b'-' | b':' | b',' | b' ' | b'.' | b'<' | b'=' | b'~') && !key.ends_with(':')
}

fn scalar_value(text: &str) -> Value {
    scalar::resolve_plain_owned(Cow::Borrowed(text))
}

impl<'a> FastParser<'a> {
    /// The text's non-blank lines, ready to read; `None` when there are
    /// none or one the subset does not allow.
    fn new(text: &'a str) -> Option<Self> {
        let bytes = text.as_bytes();
        let mut lines = Vec::with_capacity(memchr::memchr_iter(b'\n', bytes).count() + 1);
        // Lines split at the newlines `memchr` finds (the text is ASCII, so
        // every byte index is a char boundary): `str::split` and
        // `trim_start_matches` set up a char searcher per call, most of the
        // cost of these short lines.
        let ends = memchr::memchr_iter(b'\n', bytes).chain(std::iter::once(bytes.len()));
        let mut start = 0;
        for end in ends {
            let raw = &text[start..end];
            start = end + 1;
            let content = skip_spaces(raw);
            if content.is_empty() {
                continue;
            }
            if content.ends_with(' ') || content.starts_with("...") {
                return None;
            }
            lines.push(Line {
                indent: raw.len() - content.len(),
                text: content,
            });
        }
        if lines.is_empty() {
            return None;
        }
        Some(FastParser {
            lines,
            pos: 0,
            entries: Vec::new(),
        })
    }

    fn peek(&self) -> Option<Line<'a>> {
        self.lines.get(self.pos).copied()
    }

    /// The node starting at the current line, whose indentation is `indent`.
    /// `in_parent_column`: a sequence written at its parent key's column.
    fn block(&mut self, indent: usize, in_parent_column: bool) -> Option<Value> {
        let line = self.peek()?;
        if line.text.starts_with("- ") {
            self.sequence(indent, in_parent_column)
        } else {
            // Not a mapping entry either: `mapping` gives up on it.
            self.mapping(indent)
        }
    }

    fn mapping(&mut self, indent: usize) -> Option<Value> {
        let first = self.mapping_entries(indent)?;
        let mut map = Map::with_capacity(self.entries.len() - first);
        for (key, value) in self.entries.drain(first..) {
            // A repeated key goes to the full loader (for its error).
            if map.insert(key, value).is_some() {
                return None;
            }
        }
        Some(Value::Object(map))
    }

    /// Reads a mapping's entries onto `entries`; where they start there.
    fn mapping_entries(&mut self, indent: usize) -> Option<usize> {
        let first = self.entries.len();
        while let Some(line) = self.peek() {
            if line.indent < indent {
                break;
            }
            if line.indent > indent || line.text.starts_with('-') {
                return None;
            }
            let (key, value) = split_entry(line.text)?;
            if !plain_key_ok(key) || key.ends_with(' ') || key.len() > 1000 {
                return None;
            }
            let Value::String(key) = scalar_value(key) else {
                return None;
            };
            self.pos += 1;
            let value = if value.is_empty() {
                match self.peek() {
                    Some(next) if next.indent > indent => self.block(next.indent, false)?,
                    Some(next) if next.indent == indent && next.text.starts_with("- ") => {
                        self.sequence(indent, true)?
                    }
                    _ => Value::Null,
                }
            } else {
                if !plain_ok(value) {
                    return None;
                }
                scalar_value(value)
            };
            self.entries.push((key, value));
        }
        Some(first)
    }

    fn sequence(&mut self, indent: usize, in_parent_column: bool) -> Option<Value> {
        let mut items = Vec::new();
        while let Some(line) = self.peek() {
            if line.indent < indent {
                break;
            }
            if line.indent > indent {
                return None;
            }
            let Some(rest) = line.text.strip_prefix("- ") else {
                if in_parent_column {
                    // The parent mapping's next key.
                    break;
                }
                return None;
            };
            let item = skip_spaces(rest);
            let column = indent + line.text.len() - item.len();
            if item.starts_with('-') {
                return None;
            }
            if split_entry(item).is_some() {
                // A mapping begun on the entry's line: read it as if it
                // started on its own line at the item's column.
                self.lines[self.pos] = Line {
                    indent: column,
                    text: item,
                };
                items.push(self.mapping(column)?);
            } else {
                if !plain_ok(item) {
                    return None;
                }
                items.push(scalar_value(item));
                self.pos += 1;
            }
        }
        Some(Value::Array(items))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path, when it answers, must answer what the full loader does.
    fn same(text: &str) -> bool {
        let fast = load(text);
        if let Some(v) = &fast {
            let slow = super::super::load::load(text).expect("full loader accepts it");
            assert_eq!(v, &slow, "fast path differs on {text:?}");
        }
        fast.is_some()
    }

    #[test]
    fn sls_shapes_take_the_fast_path() {
        let sls = "s00000:\n  test.succeed_without_changes:\n    - name: s00000\n\n\
                   s00001:\n  test.succeed_with_changes:\n    - name: s00001\n    - require:\n      - test: s00000\n      - test: s00000b\n    - watch:\n      - test: s00000\n";
        assert!(same(sls));
        assert!(same("a:\n- x\n- 1\nb: yes\nc:\nd: 0644\n"));
        assert!(same(
            "pkgs:\n  - vim\n  - git\nport: 8080\nratio: 1.5\nnone: null\n"
        ));
        assert!(same("- a: 1\n  b: 2\n- c\n- d:\n    e: f\n- g:\n  - h\n"));
        assert!(same("url: salt://foo/bar.conf\ntime: 12:30\n"));
        assert!(same("  a: 1\n  b: 2\n"));
        assert!(same("k: a  b,c\n"));
        assert!(same("a:b: c\nd: e:f\n"));
    }

    #[test]
    fn anything_else_goes_to_the_full_loader() {
        for text in [
            "",
            "a: 'q'\n",
            "a: \"q\"\n",
            "a: [1, 2]\n",
            "a: {b: 1}\n",
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "a: |\n  text\n",
            "a: 1 # c\n",
            "a: b\n  c\n",
            "- a\n  b\n",
            "a: 1\na: 2\n",
            "1: a\n",
            "true: a\n",
            "<<: x\n",
            "a:\tb\n",
            "a: b\r\n",
            "a: é\n",
            "a: b: c\n",
            "a: b:\n",
            "---\na: 1\n",
            "a: 1\n...\n",
            "a: -1\n",
            "-\n  a: 1\n",
            "- - a\n",
            "a:\n  b: 1\n c: 2\n",
            "a:\n    - x\n  - y\n",
            "- a: 1\n   b: 2\n",
            "- a: 1\n  - b\n",
            "a: 1 \n",
            "a\n",
            "a:\nb\n",
            "x:y\n",
            "a: ~\n",
            "a : b\n",
        ] {
            assert!(!same(text), "fast path took {text:?}");
        }
    }

    /// Every SLS of the conformance cases (those without Jinja) that the
    /// fast path takes loads as the full loader loads it.
    #[test]
    fn conformance_sls_load_alike() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut taken = 0;
        for dir in [
            root.join("tests/conformance"),
            root.join("../shared/conformance"),
        ] {
            let mut stack = vec![dir];
            while let Some(dir) = stack.pop() {
                let Ok(entries) = std::fs::read_dir(&dir) else {
                    continue;
                };
                for entry in entries.flatten() {
                    let path = entry.path();
                    if path.is_dir() {
                        stack.push(path);
                    } else if path.extension().is_some_and(|e| e == "sls") {
                        let text = std::fs::read_to_string(&path).unwrap_or_default();
                        if same(&text) {
                            taken += 1;
                        }
                    }
                }
            }
        }
        eprintln!("{taken} conformance SLS files took the fast path");
    }

    /// A generated SLS of `n` states in the shapes the fast path takes,
    /// with top-level keys whose list sits at their own column.
    fn big_sls(n: usize) -> String {
        let mut text = String::from("\n\n");
        for i in 0..n {
            text.push_str(&format!(
                "s{i:05}:\n  test.succeed_with_changes:\n    - name: s{i:05}\n    - require:\n      - test: s{:05}\n\n",
                i.saturating_sub(1)
            ));
            if i % 97 == 0 {
                text.push_str(&format!("list{i}:\n- a\n- 1.5\n- b: c\nscalar{i}: yes\n"));
            }
        }
        text
    }

    /// A large text read in pieces on several threads loads as the full
    /// loader loads it (the same entries, in the same order).
    #[test]
    fn large_text_read_in_pieces_loads_alike() {
        let text = big_sls(4000);
        assert!(text.len() > 4 * SPLIT_MIN);
        for n in 2..=5 {
            let pieces = split_at_top_level_keys(&text, n);
            assert!(pieces.len() >= 2, "{n} pieces");
            assert_eq!(pieces.concat(), text);
            for piece in &pieces[1..] {
                assert!(
                    !piece.starts_with([' ', '-', '\n']),
                    "cut inside an entry: {piece:.40?}"
                );
            }
        }
        assert!(same(&text));
        let whole = super::super::load::load(&text).expect("full loader");
        for threads in 1..=4 {
            assert_eq!(
                load_on(&text, threads).as_ref(),
                Some(&whole),
                "{threads} threads"
            );
        }
    }

    /// What one piece gives up on, the pieces give up on: a key repeated
    /// in two pieces, a top level that is not at column 0, a list.
    #[test]
    fn large_text_in_pieces_gives_up_where_one_piece_does() {
        let text = big_sls(4000);
        let repeated = format!("{text}s00000: again\n");
        assert!(load_on(&repeated, 4).is_none());
        assert!(super::super::load::load(&repeated).is_err());

        let indented: String = text.lines().map(|l| format!("  {l}\n")).collect();
        assert!(split_at_top_level_keys(&indented, 2).is_empty());
        assert!(same(&indented));

        let list: String = (0..20_000).map(|i| format!("- item{i}\n")).collect();
        assert!(split_at_top_level_keys(&list, 2).is_empty());
        assert!(same(&list));
    }

    #[test]
    fn scalars_resolve_as_in_the_full_loader() {
        for v in [
            "yes",
            "No",
            "on",
            "OFF",
            "null",
            "Null",
            "0x1f",
            "0o17",
            "017",
            "1_000",
            "1e3",
            "1.5e-3",
            "190:20:30",
            "2001-12-14",
            "2001-12-14 21:59:43.10 -5",
            ".inf",
            "-.inf",
            "+1",
            "+.5",
            "0",
            "00",
            "08",
            "0b101",
            "True",
            "TRUE",
            "y",
            "n",
            "=",
            "a=b",
        ] {
            same(&format!("k: {v}\n"));
            same(&format!("- {v}\n"));
        }
    }
}
