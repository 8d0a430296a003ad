//! What a fleet bench (`crates/cli/benches/highstate.rs`) checks of the
//! `halite ... state.apply --out json` stream, counted by scanning its
//! bytes instead of building a `serde_json::Value` of each minion's
//! document.
//!
//! Why: the benches are often run as debug builds (a release build of a
//! bench target rebuilds the whole workspace for its dev-dependencies'
//! features), and in debug building the `Value` of a minion's ~0.4 MB
//! return took longer than the CLI took to print it (session 17, 1,000
//! minions): the CLI waited on the pipe and the master held the returns
//! it could not stream, which showed in the walls and the master's RSS.
//! At 10,000 minions a run prints ~4 GB. The scanner honours strings and
//! escapes and reads only what it needs: each member `id: return` of a
//! document, and in each state's own mapping its `result` and `changes`.

/// One minion's return, as counted.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Counted {
    /// The minion id (the document's key).
    pub id: String,
    /// The return was a mapping (of states); anything else is an error.
    pub mapping: bool,
    /// States in it (mappings one level down).
    pub states: usize,
    /// States whose `result` is `true`.
    pub true_results: usize,
    /// States whose `changes` is a non-empty mapping.
    pub changed: usize,
}

/// What the next value means once a key of a state's mapping was read.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// `result`: is it `true`?
    Result,
    /// `changes`: is it a mapping?
    Changes,
    /// `changes` opened a mapping: is it empty?
    ChangesOpened,
}

/// Longest key kept: the minion ids, and enough to tell `result` and
/// `changes` from longer strings.
const KEPT: usize = 256;

/// The bytes the scan acts on outside strings: a quote, the structure
/// (`:`, `,`, brackets); the others (whitespace, numbers, `true`,
/// `null`) are stepped over unless a `result` or `changes` value is due.
static STRUCTURAL: [bool; 256] = {
    let mut table = [false; 256];
    let bytes = *b"\":,{}[]";
    let mut k = 0;
    while k < bytes.len() {
        table[bytes[k] as usize] = true;
        k += 1;
    }
    table
};

/// A string's first bytes looked at one by one before `memchr` is asked.
const SHORT: usize = 24;

/// Feeds on the stream's bytes and hands out each minion's counts.
#[derive(Default)]
pub struct ReturnScan {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// The string being read, when at a level whose keys matter.
    text: Vec<u8>,
    /// Whether `text` is being kept.
    keeping: bool,
    /// The last string read at a level whose keys matter.
    last: Vec<u8>,
    expect: Option<Expect>,
    current: Option<Counted>,
}

impl ReturnScan {
    /// Scans `bytes` (any cut of the stream); each member finished in
    /// them goes to `done`.
    pub fn feed(&mut self, bytes: &[u8], done: &mut impl FnMut(Counted)) {
        let mut finished = Vec::new();
        self.scan(bytes, &mut finished);
        finished.into_iter().for_each(done);
    }

    /// [`ReturnScan::feed`]'s loop, not generic, so that it is compiled
    /// in this crate, which the workspace optimises even in debug builds
    /// (`Cargo.toml`: a debug bench scanning 400 MB byte by byte was the
    /// tail of a 1,000-minion run, session 20).
    #[inline(never)]
    fn scan(&mut self, bytes: &[u8], finished: &mut Vec<Counted>) {
        let mut i = 0;
        while i < bytes.len() {
            if self.in_string {
                i = self.string_part(bytes, i);
                continue;
            }
            if self.expect.is_none() {
                // Up to the next byte that may matter: an indentation, a
                // number, `true` and the like are stepped over at once.
                match bytes[i..].iter().position(|&b| STRUCTURAL[usize::from(b)]) {
                    Some(at) => i += at,
                    None => return,
                }
            }
            let b = bytes[i];
            i += 1;
            if b.is_ascii_whitespace() {
                continue;
            }
            if let Some(expect) = self.expect.take() {
                self.settle(expect, b);
            }
            match b {
                b'"' => {
                    self.in_string = true;
                    // Keys that matter: the ids (level 1), a state's own (level 3).
                    self.keeping = self.depth == 1 || self.depth == 3;
                    self.text.clear();
                }
                b':' if self.depth == 1 => {
                    self.current = Some(Counted {
                        id: String::from_utf8_lossy(&self.last).into_owned(),
                        ..Counted::default()
                    });
                }
                b':' if self.depth == 3 => {
                    self.expect = match self.last.as_slice() {
                        b"result" => Some(Expect::Result),
                        b"changes" => Some(Expect::Changes),
                        _ => None,
                    };
                }
                b'{' | b'[' => {
                    self.depth += 1;
                    if let Some(c) = self.current.as_mut() {
                        match self.depth {
                            2 => c.mapping = b == b'{',
                            3 if c.mapping && b == b'{' => c.states += 1,
                            _ => {}
                        }
                    }
                }
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        if let Some(c) = self.current.take() {
                            finished.push(c);
                        }
                    }
                }
                b',' if self.depth == 1 => {
                    if let Some(c) = self.current.take() {
                        finished.push(c);
                    }
                }
                _ => {}
            }
        }
    }

    /// Reads inside a string from `bytes[i]`: up to its closing quote or
    /// the end of `bytes`, the span between escapes found with `memchr`
    /// (most of the stream's bytes are in strings: byte by byte, the scan
    /// took 1.4 CPU s of a 1,000-minion run, issue 25, session 25).
    /// Answers where the scan goes on.
    fn string_part(&mut self, bytes: &[u8], mut i: usize) -> usize {
        if self.escaped {
            // The escaped byte is the string's, whatever it is.
            self.escaped = false;
            self.keep(&bytes[i..=i]);
            return i + 1;
        }
        let rest = &bytes[i..];
        // Most strings are short: a look at their first bytes, then memchr.
        let head = &rest[..rest.len().min(SHORT)];
        let found = match head.iter().position(|&b| b == b'"' || b == b'\\') {
            Some(at) => Some(at),
            None if rest.len() > SHORT => {
                memchr::memchr2(b'"', b'\\', &rest[SHORT..]).map(|at| at + SHORT)
            }
            None => None,
        };
        let Some(at) = found else {
            self.keep(rest);
            return bytes.len();
        };
        self.keep(&rest[..at]);
        i += at + 1;
        if rest[at] == b'\\' {
            self.escaped = true;
        } else {
            self.in_string = false;
            if self.keeping {
                std::mem::swap(&mut self.last, &mut self.text);
            }
        }
        i
    }

    /// Keeps `part` of the string being read, when its level's keys
    /// matter, up to [`KEPT`] bytes.
    fn keep(&mut self, part: &[u8]) {
        if self.keeping && self.text.len() < KEPT {
            let room = KEPT - self.text.len();
            self.text.extend_from_slice(&part[..part.len().min(room)]);
        }
    }

    /// The first byte of the value a `result` or `changes` key announced.
    fn settle(&mut self, expect: Expect, b: u8) {
        let Some(c) = self.current.as_mut() else {
            return;
        };
        match expect {
            Expect::Result => {
                if b == b't' {
                    c.true_results += 1;
                }
            }
            Expect::Changes => {
                if b == b'{' {
                    self.expect = Some(Expect::ChangesOpened);
                }
            }
            Expect::ChangesOpened => {
                if b != b'}' {
                    c.changed += 1;
                }
            }
        }
    }

    /// Whether the stream ended between documents.
    pub fn finished(&self) -> bool {
        self.depth == 0 && !self.in_string
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_states_results_and_changes_across_any_cut() {
        let text = concat!(
            "{\n    \"web1\": {\n        \"a_|-x_|-x_|-run\": {\"result\": true, \"changes\": {}, \"comment\": \"result: false \\\" {\"},\n",
            "        \"b\": {\"changes\": {\"diff\": {\"result\": false}}, \"result\": true, \"name\": \"changes\"},\n",
            "        \"c\": {\"result\": false, \"changes\": {}}, \"d\": {\"result\": null, \"changes\": []}\n    }\n}\n",
            "{\"web2\": [\"Rendering SLS failed\"]}\n{\"web3\": {}, \"web4\": {\"s\": {\"result\": true, \"changes\": {\"x\": 1}}}}"
        );
        let expected = vec![
            Counted {
                id: "web1".into(),
                mapping: true,
                states: 4,
                true_results: 2,
                changed: 1,
            },
            Counted {
                id: "web2".into(),
                ..Counted::default()
            },
            Counted {
                id: "web3".into(),
                mapping: true,
                ..Counted::default()
            },
            Counted {
                id: "web4".into(),
                mapping: true,
                states: 1,
                true_results: 1,
                changed: 1,
            },
        ];
        for cut in [1, 2, 3, 7, 64, text.len()] {
            let mut scan = ReturnScan::default();
            let mut got = Vec::new();
            for chunk in text.as_bytes().chunks(cut) {
                scan.feed(chunk, &mut |c| got.push(c));
            }
            assert!(scan.finished());
            assert_eq!(got, expected, "cut every {cut} bytes");
        }
    }
}
