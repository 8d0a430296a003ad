//! Python's `fnmatch.fnmatchcase`, which Salt uses for requisite globs, SLS
//! excludes, includes and targets: `*` matches across `/`, `?` one
//! character, `[seq]` / `[!seq]` classes, no braces. globset's rules differ,
//! so this is written against Python's definition.

/// Whether `pattern` contains a glob metacharacter (Salt's test before it
/// decides between a lookup and a scan).
pub fn is_pattern(pattern: &str) -> bool {
    pattern.contains(['*', '?', '[', ']'])
}

/// `fnmatch.fnmatchcase(name, pattern)`.
pub fn fnmatch(name: &str, pattern: &str) -> bool {
    let name: Vec<char> = name.chars().collect();
    let pat: Vec<char> = pattern.chars().collect();
    match_from(&name, 0, &pat, 0)
}

/// Parses a `[...]` class starting at `pat[i] == '['`. Returns the class
/// (negated, items) and the index after `]`, or `None` when unclosed (then
/// Python treats `[` as a literal).
/// A parsed `[...]` class: negated, ranges, index after `]`.
type CharClass = (bool, Vec<(char, char)>, usize);

fn parse_class(pat: &[char], i: usize) -> Option<CharClass> {
    let mut j = i + 1;
    let mut negate = false;
    if j < pat.len() && pat[j] == '!' {
        negate = true;
        j += 1;
    }
    // A `]` right after `[` or `[!` is a literal member.
    let start = j;
    let mut items = Vec::new();
    while j < pat.len() && (pat[j] != ']' || j == start) {
        let c = pat[j];
        if j + 2 < pat.len() && pat[j + 1] == '-' && pat[j + 2] != ']' {
            let hi = pat[j + 2];
            if c <= hi {
                items.push((c, hi));
            }
            j += 3;
        } else {
            items.push((c, c));
            j += 1;
        }
    }
    if j >= pat.len() {
        return None;
    }
    Some((negate, items, j + 1))
}

fn match_from(name: &[char], mut n: usize, pat: &[char], mut p: usize) -> bool {
    // Iterative with backtracking to the last `*`.
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pat.len() {
            match pat[p] {
                '*' => {
                    // Collapse runs of '*'.
                    while p < pat.len() && pat[p] == '*' {
                        p += 1;
                    }
                    if p == pat.len() {
                        return true;
                    }
                    star = Some((p, n));
                    continue;
                }
                '?' if n < name.len() => {
                    n += 1;
                    p += 1;
                    continue;
                }
                '[' => {
                    if let Some((negate, items, next)) = parse_class(pat, p) {
                        if n < name.len() {
                            let c = name[n];
                            let hit = items.iter().any(|&(lo, hi)| lo <= c && c <= hi);
                            if hit != negate {
                                n += 1;
                                p = next;
                                continue;
                            }
                        }
                    } else if n < name.len() && name[n] == '[' {
                        n += 1;
                        p += 1;
                        continue;
                    }
                }
                c if c != '?' && n < name.len() && name[n] == c => {
                    n += 1;
                    p += 1;
                    continue;
                }
                _ => {}
            }
        } else if n == name.len() {
            return true;
        }
        // Mismatch: backtrack to the last star, consuming one more char.
        match star {
            Some((sp, sn)) if sn < name.len() => {
                star = Some((sp, sn + 1));
                p = sp;
                n = sn + 1;
            }
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fnmatch;

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
}
