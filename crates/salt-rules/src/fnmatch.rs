//! Python's `fnmatch.fnmatchcase`, which Salt uses for requisite globs, SLS
//! excludes, includes, glob targets (top files and the master's `halite
//! 'web*'`) and event tag patterns: `*` matches any run of characters
//! (including `/` and `.`), `?` one character, `[seq]` / `[!seq]` a set
//! with ranges; no braces, no escapes, case sensitive. A `[` with no
//! closing `]` is a literal `[`. globset's rules differ, so this is written
//! against Python's `fnmatch.translate`.
//!
//! This is halite's only implementation: every crate that needs a Salt glob
//! calls [`fnmatch`] or compiles a [`Glob`] once and matches it many times.

/// Whether `pattern` contains a glob metacharacter (Salt's test before it
/// decides between a lookup and a scan).
pub fn is_pattern(pattern: &str) -> bool {
    pattern.contains(['*', '?', '[', ']'])
}

/// `fnmatch.fnmatchcase(name, pattern)`: note the order, name first, as in
/// Python.
pub fn fnmatch(name: &str, pattern: &str) -> bool {
    Glob::new(pattern).matches(name)
}

/// One compiled piece of a pattern.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Literal(char),
    AnyOne,
    AnyRun,
    Set {
        negated: bool,
        items: Vec<(char, char)>,
    },
}

/// A glob compiled once, for matching the same pattern against many names
/// (a target against every accepted minion, a requisite glob against every
/// state).
#[derive(Debug, Clone, PartialEq)]
pub struct Glob {
    pieces: Vec<Piece>,
}

impl Glob {
    /// Compiles `pattern`; every string is a valid pattern.
    pub fn new(pattern: &str) -> Self {
        let chars: Vec<char> = pattern.chars().collect();
        let mut pieces = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '*' => {
                    // Runs of `*` are one `*`.
                    if pieces.last() != Some(&Piece::AnyRun) {
                        pieces.push(Piece::AnyRun);
                    }
                    i += 1;
                }
                '?' => {
                    pieces.push(Piece::AnyOne);
                    i += 1;
                }
                '[' => match parse_set(&chars, i + 1) {
                    Some((set, next)) => {
                        pieces.push(set);
                        i = next;
                    }
                    None => {
                        pieces.push(Piece::Literal('['));
                        i += 1;
                    }
                },
                c => {
                    pieces.push(Piece::Literal(c));
                    i += 1;
                }
            }
        }
        Glob { pieces }
    }

    /// Whether `name` matches, with `fnmatch.fnmatchcase` semantics.
    pub fn matches(&self, name: &str) -> bool {
        let pieces = &self.pieces;
        let text: Vec<char> = name.chars().collect();
        // Iterative, with one backtrack point at the last `*`: linear in
        // practice, never exponential.
        let (mut p, mut t) = (0usize, 0usize);
        let mut star: Option<(usize, usize)> = None;
        while t < text.len() {
            match pieces.get(p) {
                Some(Piece::AnyRun) => {
                    star = Some((p, t));
                    p += 1;
                }
                Some(piece) if piece_matches_char(piece, text[t]) => {
                    p += 1;
                    t += 1;
                }
                _ => match star {
                    Some((sp, st)) => {
                        p = sp + 1;
                        t = st + 1;
                        star = Some((sp, st + 1));
                    }
                    None => return false,
                },
            }
        }
        pieces[p..].iter().all(|piece| *piece == Piece::AnyRun)
    }
}

/// Parses a set starting after `[`; `None` when it never closes (then
/// Python treats the `[` as a literal).
fn parse_set(chars: &[char], start: usize) -> Option<(Piece, usize)> {
    let mut j = start;
    let mut negated = false;
    if chars.get(j) == Some(&'!') {
        negated = true;
        j += 1;
    }
    // A `]` right after `[` or `[!` is a member, as in Python.
    let body_start = j;
    if chars.get(j) == Some(&']') {
        j += 1;
    }
    while j < chars.len() && chars[j] != ']' {
        j += 1;
    }
    if j >= chars.len() {
        return None;
    }
    let body = &chars[body_start..j];
    let mut items = Vec::new();
    let mut k = 0;
    while k < body.len() {
        if k + 2 < body.len() && body[k + 1] == '-' {
            // Python drops reversed ranges (they match nothing).
            if body[k] <= body[k + 2] {
                items.push((body[k], body[k + 2]));
            }
            k += 3;
        } else {
            items.push((body[k], body[k]));
            k += 1;
        }
    }
    Some((Piece::Set { negated, items }, j + 1))
}

fn piece_matches_char(piece: &Piece, c: char) -> bool {
    match piece {
        Piece::Literal(l) => *l == c,
        Piece::AnyOne | Piece::AnyRun => true,
        Piece::Set { negated, items } => {
            items.iter().any(|(lo, hi)| *lo <= c && c <= *hi) != *negated
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{fnmatch, is_pattern, Glob};

    #[test]
    fn python_semantics() {
        assert!(fnmatch("a/b/c", "a*c"));
        assert!(fnmatch("web01", "web0?"));
        assert!(!fnmatch("web10", "web0?"));
        assert!(fnmatch("web1", "web[0-9]"));
        assert!(!fnmatch("webx", "web[0-9]"));
        assert!(fnmatch("webx", "web[!0-9]"));
        assert!(fnmatch("a]", "a[]]"));
        assert!(fnmatch("a[", "a["));
        assert!(!fnmatch("a{b,c}", "ab"));
        assert!(fnmatch("a{b,c}", "a{b,c}"));
        assert!(fnmatch("", "*"));
        assert!(!fnmatch("abc", "ab"));
        assert!(fnmatch("abcabc", "*abc"));
        assert!(fnmatch("x.y.z", "x.*"));
        assert!(!fnmatch("xay", "x.y"));
    }

    #[test]
    fn star_crosses_slashes_and_dots() {
        assert!(fnmatch("a/b.c", "*"));
        assert!(fnmatch("web01.example.com", "web*"));
        assert!(fnmatch("a/b/x", "*/x"));
        assert!(!fnmatch("db01", "web*"));
        assert!(fnmatch("aXXbYYc", "a*b*c"));
        assert!(!fnmatch("aXXbYY", "a*b*c"));
    }

    #[test]
    fn sets_ranges_and_negation() {
        assert!(fnmatch("web5", "web[0-9]"));
        assert!(!fnmatch("webx", "web[0-9]"));
        assert!(fnmatch("webx", "web[!0-9]"));
        assert!(!fnmatch("web5", "web[!0-9]"));
        assert!(fnmatch("]", "[]]"));
        assert!(fnmatch("a", "[!]]"));
        assert!(fnmatch("a[", "a["));
        assert!(fnmatch("ab", "?b"));
        assert!(!fnmatch("b", "?b"));
    }

    /// Corner cases checked against CPython's `fnmatch.fnmatchcase`.
    #[test]
    fn python_corner_cases() {
        // `[a-c-e]` is a-c, `-` and `e`; `[z-a]` matches nothing; `[!]` never
        // closes, so it is literal.
        assert!(fnmatch("-", "[a-c-e]"));
        assert!(fnmatch("e", "[a-c-e]"));
        assert!(!fnmatch("d", "[a-c-e]"));
        assert!(!fnmatch("m", "[z-a]"));
        assert!(fnmatch("b", "[z-ab]"));
        assert!(fnmatch("-", "[a-]"));
        assert!(fnmatch("[!]", "[!]"));
        assert!(!fnmatch("a", "[!]"));
        assert!(fnmatch("a\nb", "a?b"));
    }

    #[test]
    fn no_braces_and_case_sensitive() {
        assert!(!fnmatch("a", "{a,b}"));
        assert!(fnmatch("{a,b}", "{a,b}"));
        assert!(!fnmatch("web1", "WEB*"));
    }

    #[test]
    fn compiled_glob_matches_many_names() {
        let g = Glob::new("web[0-9]*");
        assert!(g.matches("web1"));
        assert!(g.matches("web12.example.com"));
        assert!(!g.matches("db1"));
        assert!(is_pattern("web*") && is_pattern("a[b]") && !is_pattern("web1"));
    }

    /// The cases of the copies this replaced (the renderer's `fnmatch`, the
    /// grains' `expr_match`), which compiled patterns to regular
    /// expressions and agreed with this one on every well-formed pattern.
    #[test]
    fn cases_of_the_former_copies() {
        assert!(fnmatch("Debian", "Deb*"));
        assert!(fnmatch("a/b", "a*"));
        assert!(fnmatch("x1", "x[0-9]"));
        assert!(!fnmatch("xa", "x[!a]"));
        assert!(!fnmatch("debian", "Debian"));
        assert!(fnmatch("{a}", "{a}"));
        assert!(fnmatch("ip4_interfaces", "ip*"));
        assert!(fnmatch("osfinger", "os[!a]inger"));
        assert!(!fnmatch("osainger", "os[!a]inger"));
        assert!(fnmatch("x[", "x["));
        assert!(!fnmatch("Debian", "debian"));
        // Where those copies' regular expressions failed to compile (and so
        // matched nothing), Python matches, and so does this.
        assert!(fnmatch("[", "[[]"));
        assert!(fnmatch("b", "[z-ab]"));
        assert!(fnmatch("&", "[&&]"));
    }
}
