//! Unified diffs exactly as Salt prints them in `changes['diff']`.
//!
//! Salt builds its diffs with Python's `difflib.unified_diff` over the two
//! files' lines (line endings kept) with empty file names, three lines of
//! context, and `SequenceMatcher`'s matching (longest common block first,
//! "popular" lines ignored as anchors once the new side has 200 lines or
//! more). Users compare these texts between runs and review them in CI, so
//! this module reproduces that algorithm rather than a different (equally
//! valid) diff: same hunks, same headers (`--- \n+++ \n`).

use std::collections::{HashMap, HashSet};

/// One edit operation between line ranges `a[a1..a2]` and `b[b1..b2]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Opcode {
    tag: Tag,
    a1: usize,
    a2: usize,
    b1: usize,
    b2: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    Equal,
    Replace,
    Delete,
    Insert,
}

/// Line matcher with difflib's semantics (no junk function, autojunk on).
struct Matcher<'a> {
    a: &'a [&'a str],
    b: &'a [&'a str],
    b2j: HashMap<&'a str, Vec<usize>>,
}

impl<'a> Matcher<'a> {
    fn new(a: &'a [&'a str], b: &'a [&'a str]) -> Self {
        let mut b2j: HashMap<&'a str, Vec<usize>> = HashMap::new();
        for (j, line) in b.iter().enumerate() {
            b2j.entry(line).or_default().push(j);
        }
        // difflib's autojunk: lines occurring in more than 1% of a long b are
        // not used as match anchors.
        if b.len() >= 200 {
            let threshold = b.len() / 100 + 1;
            let popular: HashSet<&str> = b2j
                .iter()
                .filter(|(_, idx)| idx.len() > threshold)
                .map(|(k, _)| *k)
                .collect();
            for line in popular {
                b2j.remove(line);
            }
        }
        Matcher { a, b, b2j }
    }

    fn longest_match(
        &self,
        alo: usize,
        ahi: usize,
        blo: usize,
        bhi: usize,
    ) -> (usize, usize, usize) {
        let (mut best_i, mut best_j, mut best_size) = (alo, blo, 0usize);
        let mut j2len: HashMap<usize, usize> = HashMap::new();
        for i in alo..ahi {
            let mut new_j2len: HashMap<usize, usize> = HashMap::new();
            if let Some(js) = self.b2j.get(self.a[i]) {
                for &j in js {
                    if j < blo {
                        continue;
                    }
                    if j >= bhi {
                        break;
                    }
                    let k = j
                        .checked_sub(1)
                        .and_then(|p| j2len.get(&p))
                        .copied()
                        .unwrap_or(0)
                        + 1;
                    new_j2len.insert(j, k);
                    if k > best_size {
                        best_i = i + 1 - k;
                        best_j = j + 1 - k;
                        best_size = k;
                    }
                }
            }
            j2len = new_j2len;
        }
        // Extend over equal lines that were not anchors (popular lines).
        while best_i > alo && best_j > blo && self.a[best_i - 1] == self.b[best_j - 1] {
            best_i -= 1;
            best_j -= 1;
            best_size += 1;
        }
        while best_i + best_size < ahi
            && best_j + best_size < bhi
            && self.a[best_i + best_size] == self.b[best_j + best_size]
        {
            best_size += 1;
        }
        (best_i, best_j, best_size)
    }

    fn matching_blocks(&self) -> Vec<(usize, usize, usize)> {
        let (la, lb) = (self.a.len(), self.b.len());
        let mut queue = vec![(0, la, 0, lb)];
        let mut blocks = Vec::new();
        while let Some((alo, ahi, blo, bhi)) = queue.pop() {
            let (i, j, k) = self.longest_match(alo, ahi, blo, bhi);
            if k > 0 {
                blocks.push((i, j, k));
                if alo < i && blo < j {
                    queue.push((alo, i, blo, j));
                }
                if i + k < ahi && j + k < bhi {
                    queue.push((i + k, ahi, j + k, bhi));
                }
            }
        }
        blocks.sort_unstable();
        let mut merged = Vec::new();
        let (mut i1, mut j1, mut k1) = (0, 0, 0);
        for (i2, j2, k2) in blocks {
            if i1 + k1 == i2 && j1 + k1 == j2 {
                k1 += k2;
            } else {
                if k1 > 0 {
                    merged.push((i1, j1, k1));
                }
                (i1, j1, k1) = (i2, j2, k2);
            }
        }
        if k1 > 0 {
            merged.push((i1, j1, k1));
        }
        merged.push((la, lb, 0));
        merged
    }

    fn opcodes(&self) -> Vec<Opcode> {
        let (mut i, mut j) = (0, 0);
        let mut out = Vec::new();
        for (ai, bj, size) in self.matching_blocks() {
            let tag = if i < ai && j < bj {
                Some(Tag::Replace)
            } else if i < ai {
                Some(Tag::Delete)
            } else if j < bj {
                Some(Tag::Insert)
            } else {
                None
            };
            if let Some(tag) = tag {
                out.push(Opcode {
                    tag,
                    a1: i,
                    a2: ai,
                    b1: j,
                    b2: bj,
                });
            }
            i = ai + size;
            j = bj + size;
            if size > 0 {
                out.push(Opcode {
                    tag: Tag::Equal,
                    a1: ai,
                    a2: i,
                    b1: bj,
                    b2: j,
                });
            }
        }
        out
    }

    fn grouped_opcodes(&self, n: usize) -> Vec<Vec<Opcode>> {
        let mut codes = self.opcodes();
        if codes.is_empty() {
            codes.push(Opcode {
                tag: Tag::Equal,
                a1: 0,
                a2: 1,
                b1: 0,
                b2: 1,
            });
        }
        if let Some(first) = codes.first_mut() {
            if first.tag == Tag::Equal {
                first.a1 = first.a1.max(first.a2.saturating_sub(n));
                first.b1 = first.b1.max(first.b2.saturating_sub(n));
            }
        }
        if let Some(last) = codes.last_mut() {
            if last.tag == Tag::Equal {
                last.a2 = last.a2.min(last.a1 + n);
                last.b2 = last.b2.min(last.b1 + n);
            }
        }
        let mut groups = Vec::new();
        let mut group = Vec::new();
        for mut code in codes {
            if code.tag == Tag::Equal && code.a2 - code.a1 > 2 * n {
                group.push(Opcode {
                    tag: Tag::Equal,
                    a1: code.a1,
                    a2: code.a2.min(code.a1 + n),
                    b1: code.b1,
                    b2: code.b2.min(code.b1 + n),
                });
                groups.push(std::mem::take(&mut group));
                code.a1 = code.a1.max(code.a2.saturating_sub(n));
                code.b1 = code.b1.max(code.b2.saturating_sub(n));
            }
            group.push(code);
        }
        let only_equal = group.len() == 1 && group[0].tag == Tag::Equal;
        if !group.is_empty() && !only_equal {
            groups.push(group);
        }
        groups
    }
}

fn unified_range(start: usize, stop: usize) -> String {
    let length = stop - start;
    match length {
        1 => format!("{}", start + 1),
        0 => format!("{start},0"),
        _ => format!("{},{length}", start + 1),
    }
}

/// Splits text into lines that keep their `\n`, like Python's
/// `readlines()` on a file opened in binary mode.
pub fn split_lines_keep_ends(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

/// The pieces `difflib.unified_diff(a, b)` yields (headers, hunk ranges,
/// lines), for callers that join them differently (`file.append` joins
/// with newlines).
pub fn unified_diff_pieces(a: &[&str], b: &[&str]) -> Vec<String> {
    let matcher = Matcher::new(a, b);
    let mut out = Vec::new();
    for (index, group) in matcher.grouped_opcodes(3).iter().enumerate() {
        if index == 0 {
            out.push("--- \n".to_string());
            out.push("+++ \n".to_string());
        }
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        out.push(format!(
            "@@ -{} +{} @@\n",
            unified_range(first.a1, last.a2),
            unified_range(first.b1, last.b2)
        ));
        for code in group {
            if code.tag == Tag::Equal {
                out.extend(a[code.a1..code.a2].iter().map(|l| format!(" {l}")));
                continue;
            }
            if matches!(code.tag, Tag::Replace | Tag::Delete) {
                out.extend(a[code.a1..code.a2].iter().map(|l| format!("-{l}")));
            }
            if matches!(code.tag, Tag::Replace | Tag::Insert) {
                out.extend(b[code.b1..code.b2].iter().map(|l| format!("+{l}")));
            }
        }
    }
    out
}

/// The unified diff of two line lists, as `difflib.unified_diff(a, b)`
/// joined into one string (empty when the lists are equal).
pub fn unified_diff_lines(a: &[&str], b: &[&str]) -> String {
    unified_diff_pieces(a, b).concat()
}

/// The unified diff of two texts, line by line (Salt's `get_diff`).
pub fn unified_diff(old: &str, new: &str) -> String {
    unified_diff_lines(&split_lines_keep_ends(old), &split_lines_keep_ends(new))
}

/// Whether bytes look binary to Salt (`salt.utils.files.is_binary`): a NUL
/// byte, or text that is not UTF-8.
pub fn is_binary(data: &[u8]) -> bool {
    let head = &data[..data.len().min(2048)];
    head.contains(&0) || std::str::from_utf8(data).is_err()
}

/// What Salt reports instead of a diff when either side is binary, or
/// `None` when both are text (Salt's `_binary_replace`).
pub fn binary_replace(old: &[u8], new: &[u8]) -> Option<&'static str> {
    match (is_binary(old), is_binary(new)) {
        (true, true) => Some("Replace binary file"),
        (false, true) => Some("Replace text file with binary file"),
        (true, false) => Some("Replace binary file with text file"),
        (false, false) => None,
    }
}

/// The diff between two file contents as Salt's `file.get_diff` reports it
/// (binary files named instead of diffed; `""` when equal).
pub fn file_diff(old: &[u8], new: &[u8]) -> String {
    if old == new {
        return String::new();
    }
    if let Some(msg) = binary_replace(old, new) {
        return msg.to_string();
    }
    unified_diff(&String::from_utf8_lossy(old), &String::from_utf8_lossy(new))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_one_line_with_context() {
        let d = unified_diff("enabled=0\ncolor=blue\n", "enabled=1\ncolor=blue\n");
        assert_eq!(
            d,
            "--- \n+++ \n@@ -1,2 +1,2 @@\n-enabled=0\n+enabled=1\n color=blue\n"
        );
    }

    #[test]
    fn equal_texts_give_empty_diff() {
        assert_eq!(unified_diff("a\nb\n", "a\nb\n"), "");
    }

    #[test]
    fn distant_changes_make_two_hunks() {
        let old: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let new: String = (1..=20)
            .map(|i| match i {
                2 => "two\n".to_string(),
                19 => "nineteen\n".to_string(),
                _ => format!("{i}\n"),
            })
            .collect();
        let d = unified_diff(&old, &new);
        assert_eq!(
            d,
            "--- \n+++ \n@@ -1,5 +1,5 @@\n 1\n-2\n+two\n 3\n 4\n 5\n@@ -16,5 +16,5 @@\n 16\n 17\n 18\n-19\n+nineteen\n 20\n"
        );
    }

    #[test]
    fn insert_into_empty_uses_zero_range() {
        assert_eq!(unified_diff("", "x\n"), "--- \n+++ \n@@ -0,0 +1 @@\n+x\n");
    }
}
