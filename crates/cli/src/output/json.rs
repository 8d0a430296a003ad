//! Salt's json outputter: the return indented by `indent` spaces (4 by
//! default), non-ASCII kept, keys in the return's order.
//!
//! A state run of thousands of states prints megabytes of it, a good
//! part of `halite-call`'s time after the run: [`write_keyed_collection`]
//! serializes such a collection in pieces on two threads and writes them
//! out in order, so the text is the same whoever wrote which piece.

use halite_perf::options::{JSON_PIECE_ITEMS as PIECE_ITEMS, SPLIT_MIN};
use halite_perf::ordered::in_order_on_two_threads;
use std::io::{self, Write};
use std::ops::Range;

use halite_proto::cursor::{Cursor, CursorError, Token};
use serde::Serialize;
use serde_json::Value;

/// Writes `v` as Salt's json outputter prints it (`indent`, non-ASCII
/// kept) straight to `out`, without building the text first.
pub fn write_json<W: Write, T: Serialize + ?Sized>(out: W, v: &T, indent: usize) -> io::Result<()> {
    let mut breaks = Vec::new();
    let formatter = IndentFormatter::at_level(&mut breaks, indent, 0);
    let mut ser = serde_json::Serializer::with_formatter(out, formatter);
    v.serialize(&mut ser).map_err(io::Error::other)
}

/// JSON as Salt's json outputter prints it (`indent`, non-ASCII kept).
pub fn json(v: &Value, indent: usize) -> String {
    let mut buf = Vec::new();
    if write_json(&mut buf, v, indent).is_err() {
        return v.to_string();
    }
    String::from_utf8(buf).unwrap_or_else(|_| v.to_string())
}

/// Why a packed value was not printed from its bytes: the caller prints
/// it the old way, from its decoded value (which then fails or prints as
/// it always did).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotTranscoded(pub &'static str);

impl From<io::Error> for NotTranscoded {
    fn from(_: io::Error) -> Self {
        NotTranscoded("a write failed")
    }
}

/// Writes `{"<key>": <value>}` as [`write_json`] prints the map of `key`
/// to the value msgpack `packed` decodes to, straight from the bytes
/// (issue 25: `halite '*' state.apply --out json` on a fleet printed
/// ~0.4 MB per minion, each decoded into a `Value`, cloned twice, then
/// serialized). The same formatter calls a `Value` makes, in the same
/// order, so the text is the same byte for byte; what a `Value` would
/// not hold the same way (a key twice, a non-string key, binary or
/// extension data, invalid UTF-8, nesting past
/// [`halite_proto::MAX_VALUE_DEPTH`]) is refused, and `out` is then
/// left with a partial text for the caller to discard.
pub fn write_packed_keyed(
    out: &mut Vec<u8>,
    key: &str,
    packed: &[u8],
    indent: usize,
) -> Result<(), NotTranscoded> {
    let mut cur = Cursor::new(packed);
    write_packed_keyed_at(out, key, &mut cur, indent)?;
    if !cur.is_empty() {
        return Err(NotTranscoded("bytes after the value"));
    }
    Ok(())
}

/// [`write_packed_keyed`] of the one value that starts at `cur`, which is
/// left just after it: the bytes after it are the caller's (issue 25,
/// session 26: the CLI prints a return as its frame's parse comes to it,
/// so that the frame is walked once, not stepped over and then printed).
/// On `Err`, `cur` is somewhere inside the value and `out` holds a
/// partial text: the caller starts again from a copy of the cursor.
pub fn write_packed_keyed_at(
    out: &mut Vec<u8>,
    key: &str,
    cur: &mut Cursor<'_>,
    indent: usize,
) -> Result<(), NotTranscoded> {
    use serde_json::ser::Formatter;
    let mut breaks = Vec::new();
    let mut f = IndentFormatter::at_level(&mut breaks, indent, 0);
    f.begin_object(out)?;
    f.begin_object_key(out, true)?;
    write_str(out, key)?;
    f.end_object_key(out)?;
    f.begin_object_value(out)?;
    let mut keys = Vec::new();
    write_packed_value(out, &mut f, cur, 1, &mut keys)?;
    f.end_object_value(out)?;
    f.end_object(out)?;
    Ok(())
}

/// A JSON string as serde_json escapes it (the indenting formatter
/// leaves strings to the default methods).
fn write_str(out: &mut Vec<u8>, s: &str) -> Result<(), NotTranscoded> {
    serde_json::to_writer(out, s).map_err(|_| NotTranscoded("a write failed"))
}

/// Whether serde_json writes byte `b` of a string as it is, and it is
/// ASCII (so a string of such bytes is UTF-8 without a check): not a
/// control character, a quote or a backslash, the bytes it escapes.
/// (Written without short-circuits: each comparison a lane of a vector
/// in [`all_plain`].)
#[inline(always)]
#[allow(
    clippy::manual_range_contains,
    reason = "`contains` short-circuits; each comparison here is a lane of a vector in `all_plain`"
)]
fn plain_byte(b: u8) -> bool {
    (b >= 0x20) & (b < 0x80) & (b != b'"') & (b != b'\\')
}

/// Whether every byte of `bytes` is a [`plain_byte`]: sixteen bytes at a
/// time with no early exit inside them, so that the compiler compares
/// them in vector registers (issue 25, session 26: a table looked up byte
/// by byte, whose loads do not vectorise, was 17% of the CLI's CPU
/// printing a fleet's returns), the rest byte by byte: the same answer as
/// `bytes.iter().all(|&b| plain_byte(b))` for every input.
#[inline]
fn all_plain(bytes: &[u8]) -> bool {
    let mut chunks = bytes.chunks_exact(16);
    for chunk in &mut chunks {
        if !chunk.iter().fold(true, |all, &b| all & plain_byte(b)) {
            return false;
        }
    }
    chunks.remainder().iter().all(|&b| plain_byte(b))
}

/// The msgpack string `bytes` as [`write_str`] writes it once they are
/// checked UTF-8 (issue 25, session 25: the UTF-8 check and serde_json's
/// escape scan were a quarter of the CLI's CPU printing a fleet's
/// returns). Most strings of a return are plain ASCII: one pass finds
/// that, and they are copied between their quotes as serde_json would
/// write them; any other string takes the checked way.
fn write_packed_str(out: &mut Vec<u8>, bytes: &[u8]) -> Result<(), NotTranscoded> {
    if all_plain(bytes) {
        out.reserve(bytes.len() + 2);
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
        return Ok(());
    }
    let s = std::str::from_utf8(bytes).map_err(|_| NotTranscoded("a string is not UTF-8"))?;
    write_str(out, s)
}

/// Maps with more keys than this are checked for a key twice with a
/// hash set; smaller ones by comparing each key with those before it.
const LINEAR_KEYS: usize = 16;

impl From<CursorError> for NotTranscoded {
    fn from(e: CursorError) -> Self {
        NotTranscoded(match e {
            CursorError::Truncated => "truncated value",
            CursorError::Reserved => "a reserved marker",
            CursorError::TooDeep => "nested too deep",
            CursorError::Expected(_) => "an unexpected value",
            CursorError::NotUtf8 => "a string is not UTF-8",
            CursorError::Binary => "binary or extension data",
            CursorError::KeyNotString => "a key that is not a string",
        })
    }
}

/// The msgpack value at `cur`, at nesting `depth` (1: the return
/// itself), written with `f` as a decoded `Value` would be: integers as
/// their digits, `f32` widened to `f64` (a `Value` holds no `f32`),
/// floats that are not finite as `null`. `keys` is scratch space for the
/// duplicate check of the small maps, shared by every level.
fn write_packed_value<'a>(
    out: &mut Vec<u8>,
    f: &mut IndentFormatter<'_>,
    cur: &mut Cursor<'a>,
    depth: usize,
    keys: &mut Vec<&'a [u8]>,
) -> Result<(), NotTranscoded> {
    use serde_json::ser::Formatter;
    if depth > halite_proto::MAX_VALUE_DEPTH {
        return Err(NotTranscoded("nested too deep"));
    }
    let float = |out: &mut Vec<u8>, f: &mut IndentFormatter<'_>, v: f64| {
        if v.is_finite() {
            f.write_f64(out, v)
        } else {
            f.write_null(out)
        }
    };
    let (items, map) = match cur.token()? {
        Token::Uint(n) => return Ok(f.write_u64(out, n)?),
        Token::Int(n) => return Ok(f.write_i64(out, n)?),
        Token::Nil => return Ok(f.write_null(out)?),
        Token::Bool(b) => return Ok(f.write_bool(out, b)?),
        Token::F32(v) => return Ok(float(out, f, f64::from(v))?),
        Token::F64(v) => return Ok(float(out, f, v)?),
        Token::Str(s) => return write_packed_str(out, s),
        Token::Bin(_) | Token::Ext(_) => return Err(NotTranscoded("binary or extension data")),
        Token::Array(n) => (n, false),
        Token::Map(n) => (n, true),
    };
    if !map {
        f.begin_array(out)?;
        for i in 0..items {
            f.begin_array_value(out, i == 0)?;
            write_packed_value(out, f, cur, depth + 1, keys)?;
            f.end_array_value(out)?;
        }
        return Ok(f.end_array(out)?);
    }
    let base = keys.len();
    // A big map's keys (a state run's: one per state) in a hash set; a
    // small map's compared in `keys` (a sorted list cost a quarter of the
    // CLI's CPU in comparing the long state keys, issue 25, session 25).
    let mut big = (items > LINEAR_KEYS)
        .then(|| rustc_hash::FxHashSet::with_capacity_and_hasher(items, Default::default()));
    f.begin_object(out)?;
    for i in 0..items {
        let Token::Str(key) = cur.token()? else {
            return Err(NotTranscoded("a key that is not a string"));
        };
        let twice = match big.as_mut() {
            Some(seen) => !seen.insert(key),
            None => {
                let twice = keys[base..].contains(&key);
                keys.push(key);
                twice
            }
        };
        if twice {
            return Err(NotTranscoded("a key twice in a map"));
        }
        f.begin_object_key(out, i == 0)?;
        write_packed_str(out, key)?;
        f.end_object_key(out)?;
        f.begin_object_value(out)?;
        write_packed_value(out, f, cur, depth + 1, keys)?;
        f.end_object_value(out)?;
    }
    keys.truncate(base);
    Ok(f.end_object(out)?)
}

/// `,\n` (or `\n` when `first`) and the indentation of `level`, from
/// `breaks`, which keeps the longest such text asked for so far.
fn line_break(breaks: &mut Vec<u8>, indent: usize, level: usize, first: bool) -> &[u8] {
    let end = 2 + level * indent;
    if breaks.len() < end {
        breaks.clear();
        breaks.extend_from_slice(b",\n");
        breaks.resize(end, b' ');
    }
    &breaks[usize::from(first)..end]
}

/// serde_json's `PrettyFormatter` output, with each line break and its
/// indentation written at once (the pretty formatter writes the indent
/// once per level: at 10 000 states those small writes were a good part
/// of printing a run). The line breaks live outside it, so that a
/// formatter per collection item costs nothing.
struct IndentFormatter<'b> {
    breaks: &'b mut Vec<u8>,
    indent: usize,
    level: usize,
    has_value: bool,
}

impl<'b> IndentFormatter<'b> {
    /// A formatter for a value that starts `level` levels deep.
    fn at_level(breaks: &'b mut Vec<u8>, indent: usize, level: usize) -> Self {
        IndentFormatter {
            breaks,
            indent,
            level,
            has_value: false,
        }
    }

    fn line_break(&mut self, first: bool) -> &[u8] {
        line_break(self.breaks, self.indent, self.level, first)
    }

    /// Opens an array or an object: one level deeper, nothing in it yet.
    fn open<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(bracket)
    }

    /// Closes an array or an object, on a line of its own when it had values.
    fn close<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.level -= 1;
        if self.has_value {
            w.write_all(self.line_break(true))?;
        }
        w.write_all(bracket)
    }
}

impl serde_json::ser::Formatter for IndentFormatter<'_> {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"[")
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        w.write_all(self.line_break(first))
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"{")
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        w.write_all(self.line_break(first))
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// What the large collection [`write_keyed_collection`] prints is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collection {
    /// A map: items are added with [`JsonPiece::entry`].
    Map,
    /// A list: items are added with [`JsonPiece::element`].
    List,
}

/// The text of a run of consecutive items of a collection being written
/// by [`write_keyed_collection`]: what those items print as inside it.
pub struct JsonPiece {
    text: Vec<u8>,
    breaks: Vec<u8>,
    indent: usize,
    /// The level of the collection's items.
    level: usize,
    /// Whether the next item is the collection's first (no comma).
    first: bool,
}

impl JsonPiece {
    /// Adds the map entry `key: value`.
    pub fn entry<V: Serialize + ?Sized>(&mut self, key: &str, value: &V) -> io::Result<()> {
        self.item_break();
        self.serialize(key)?;
        self.text.extend_from_slice(b": ");
        self.serialize(value)
    }

    /// Adds the list element `value`.
    pub fn element<V: Serialize + ?Sized>(&mut self, value: &V) -> io::Result<()> {
        self.item_break();
        self.serialize(value)
    }

    fn item_break(&mut self) {
        let brk = line_break(&mut self.breaks, self.indent, self.level, self.first);
        self.text.extend_from_slice(brk);
        self.first = false;
    }

    fn serialize<V: Serialize + ?Sized>(&mut self, v: &V) -> io::Result<()> {
        let formatter = IndentFormatter::at_level(&mut self.breaks, self.indent, self.level);
        let mut ser = serde_json::Serializer::with_formatter(&mut self.text, formatter);
        v.serialize(&mut ser).map_err(io::Error::other)
    }
}

/// Writes `{"<key>": <collection>}` exactly as [`write_json`] prints
/// it, the collection's `len` items coming from `items(range, piece)`,
/// which adds the items of `range`, in order, to `piece`. From
/// [`SPLIT_MIN`] items the collection is serialized in pieces of
/// [`PIECE_ITEMS`], so that only a few pieces' text is in memory at once; on a
/// machine with a second core the calling thread and a helper thread
/// each take the next piece left, and the calling thread writes them
/// out in order.
pub fn write_keyed_collection<W: Write + ?Sized>(
    out: &mut W,
    key: &str,
    kind: Collection,
    len: usize,
    indent: usize,
    items: impl Fn(Range<usize>, &mut JsonPiece) -> io::Result<()> + Sync,
) -> io::Result<()> {
    let (open, close) = match kind {
        Collection::Map => (b'{', b'}'),
        Collection::List => (b'[', b']'),
    };
    let mut breaks = Vec::new();
    let mut head = vec![b'{'];
    head.extend_from_slice(line_break(&mut breaks, indent, 1, true));
    serde_json::to_writer(&mut head, key).map_err(io::Error::other)?;
    head.extend_from_slice(b": ");
    head.push(open);
    out.write_all(&head)?;

    let pieces = if len < SPLIT_MIN {
        1
    } else {
        len.div_ceil(PIECE_ITEMS)
    };
    let range = |p: usize| p * len / pieces..(p + 1) * len / pieces;
    let work = |p: usize, text: &mut Vec<u8>| {
        let mut piece = JsonPiece {
            text: std::mem::take(text),
            breaks: Vec::new(),
            indent,
            level: 2,
            first: p == 0,
        };
        let done = items(range(p), &mut piece);
        *text = piece.text;
        done
    };
    in_order_on_two_threads(pieces, work, |text| out.write_all(text))?;

    if len > 0 {
        out.write_all(line_break(&mut breaks, indent, 1, true))?;
    }
    out.write_all(&[close])?;
    out.write_all(line_break(&mut breaks, indent, 0, true))?;
    out.write_all(b"}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectorised check finds every byte serde_json escapes (the
    /// control characters, the quote, the backslash) and every byte
    /// that is not ASCII, alone and at every place of strings 1 to 40
    /// bytes long (the sixteen-byte chunks and the rest after them).
    #[test]
    fn all_plain_finds_every_byte_that_is_not_plain_wherever_it_is() {
        for b in 0..=255u8 {
            let plain = (0x20..0x80).contains(&b) && b != b'"' && b != b'\\';
            assert_eq!(all_plain(&[b]), plain, "byte {b:#04x}");
            for len in 1..=40 {
                for at in 0..len {
                    let mut s = vec![b'a'; len];
                    s[at] = b;
                    assert_eq!(all_plain(&s), plain, "{b:#04x} at {at} of {len}");
                }
            }
        }
        assert!(all_plain(b""));
    }

    /// The one-write-per-line formatter prints exactly what serde_json's
    /// pretty printer prints, at every indent Salt's `--out-indent` allows.
    #[test]
    fn json_matches_serde_json_pretty_output() {
        let v = serde_json::json!({
            "local": {
                "a": {"changes": {}, "result": true, "list": [], "nested": [[1, 2], {"x": null}],
                      "comment": "quote \" backslash \\ tab \t é ✓", "duration": 0.113},
                "b": [1.5, -2, "s", false, {"deep": {"deeper": [{}]}}]
            }
        });
        for indent in [0, 1, 2, 4, 8] {
            let ind = vec![b' '; indent];
            let mut expected = Vec::new();
            let mut ser = serde_json::Serializer::with_formatter(
                &mut expected,
                serde_json::ser::PrettyFormatter::with_indent(&ind),
            );
            serde::Serialize::serialize(&v, &mut ser).expect("serialize");
            let mut ours = Vec::new();
            write_json(&mut ours, &v, indent).expect("write");
            assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&expected),
                "indent {indent}"
            );
        }
    }

    /// `n` items shaped like state returns, each different (its number is
    /// in its key and values), some nested deeper than others.
    fn items(n: usize) -> Vec<(String, Value)> {
        (0..n)
            .map(|i| {
                let deep = if i % 7 == 0 {
                    serde_json::json!({"diff": ["a", {"b": [i]}], "empty": {}})
                } else {
                    serde_json::json!({})
                };
                (
                    format!("test_|-s{i}_|-s{i}_|-succeed \"q\""),
                    serde_json::json!({"name": format!("s{i}"), "changes": deep,
                                       "result": i % 3 != 0, "__run_num__": i, "duration": 0.5}),
                )
            })
            .collect()
    }

    /// Written in pieces (on two threads from `SPLIT_MIN` items), a map or
    /// a list prints exactly what `write_json` prints for the whole
    /// document: the pieces come out in order, joined as one text.
    #[test]
    fn a_collection_written_in_pieces_prints_as_the_whole_document() {
        for n in [0, 1, 5, SPLIT_MIN + 37] {
            let entries = items(n);
            for indent in [0, 4] {
                let map: serde_json::Map<String, Value> = entries.iter().cloned().collect();
                let mut expected = Vec::new();
                write_json(&mut expected, &serde_json::json!({"local": map}), indent)
                    .expect("json");
                let mut ours = Vec::new();
                write_keyed_collection(
                    &mut ours,
                    "local",
                    Collection::Map,
                    n,
                    indent,
                    |r, piece| entries[r].iter().try_for_each(|(k, v)| piece.entry(k, v)),
                )
                .expect("pieces");
                assert_eq!(
                    String::from_utf8_lossy(&ours),
                    String::from_utf8_lossy(&expected),
                    "map of {n}, indent {indent}"
                );

                let list: Vec<&Value> = entries.iter().map(|(_, v)| v).collect();
                let mut expected = Vec::new();
                write_json(&mut expected, &serde_json::json!({"local": list}), indent)
                    .expect("json");
                let mut ours = Vec::new();
                write_keyed_collection(
                    &mut ours,
                    "local",
                    Collection::List,
                    n,
                    indent,
                    |r, piece| list[r].iter().try_for_each(|v| piece.element(v)),
                )
                .expect("pieces");
                assert_eq!(
                    String::from_utf8_lossy(&ours),
                    String::from_utf8_lossy(&expected),
                    "list of {n}, indent {indent}"
                );
            }
        }
    }
}
