//! Python's `fnmatch.fnmatchcase`, which Salt's glob targeting uses: `*`
//! matches any run of characters (including `/`), `?` one character,
//! `[seq]` / `[!seq]` a set with ranges; no braces, no escapes, case
//! sensitive. A `[` with no closing `]` is a literal `[`.

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

fn compile(pattern: &str) -> Vec<Piece> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut pieces = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' => {
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
    pieces
}

/// Parses a set starting after `[`; `None` when it never closes.
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
        Piece::AnyOne => true,
        Piece::AnyRun => true,
        Piece::Set { negated, items } => {
            items.iter().any(|(lo, hi)| *lo <= c && c <= *hi) != *negated
        }
    }
}

/// Whether `name` matches `pattern` with `fnmatch.fnmatchcase` semantics.
pub fn fnmatch(pattern: &str, name: &str) -> bool {
    let pieces = compile(pattern);
    let text: Vec<char> = name.chars().collect();
    // Iterative matcher with one backtrack point for the last `*`: linear
    // in practice, never exponential.
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

#[cfg(test)]
mod tests {
    use super::fnmatch;

    #[test]
    fn star_crosses_slashes_and_dots() {
        assert!(fnmatch("*", "a/b.c"));
        assert!(fnmatch("web*", "web01.example.com"));
        assert!(fnmatch("*/x", "a/b/x"));
        assert!(!fnmatch("web*", "db01"));
        assert!(fnmatch("a*b*c", "aXXbYYc"));
        assert!(!fnmatch("a*b*c", "aXXbYY"));
    }

    #[test]
    fn sets_ranges_and_negation() {
        assert!(fnmatch("web[0-9]", "web5"));
        assert!(!fnmatch("web[0-9]", "webx"));
        assert!(fnmatch("web[!0-9]", "webx"));
        assert!(!fnmatch("web[!0-9]", "web5"));
        assert!(fnmatch("[]]", "]"));
        assert!(fnmatch("[!]]", "a"));
        assert!(fnmatch("a[", "a["));
        assert!(fnmatch("?b", "ab"));
        assert!(!fnmatch("?b", "b"));
    }

    #[test]
    fn no_braces_and_case_sensitive() {
        assert!(!fnmatch("{a,b}", "a"));
        assert!(fnmatch("{a,b}", "{a,b}"));
        assert!(!fnmatch("WEB*", "web1"));
    }
}
