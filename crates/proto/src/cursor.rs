//! One reader of msgpack bytes that builds nothing (issue 25): the
//! master checks a minion's return with it ([`crate::packed::check`]),
//! the client finds a return's bytes in a frame with it, and the CLI
//! prints a return's text from it. Before, each of those restated the
//! marker table in a walker of its own.
//!
//! It reads one marker at a time ([`Cursor::token`]), steps over a whole
//! value as a decode into a `serde_json::Value` would accept it
//! ([`Cursor::skip`]: strings and keys UTF-8, keys strings, no binary or
//! extension data, nested at most [`MAX_VALUE_DEPTH`] levels), and never
//! panics: truncated bytes, a wrong or reserved marker and lengths
//! larger than the bytes are errors.

use crate::frame::MAX_VALUE_DEPTH;

/// Why the bytes are not the value a caller reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    /// The bytes end inside a value (or where one was expected).
    #[error("truncated value")]
    Truncated,
    /// The marker 0xc1, which msgpack never uses.
    #[error("the reserved marker 0xc1")]
    Reserved,
    /// A value nested deeper than [`MAX_VALUE_DEPTH`] levels.
    #[error("nested more than {MAX_VALUE_DEPTH} levels deep")]
    TooDeep,
    /// Another kind of value than the one asked for.
    #[error("expected {0}")]
    Expected(&'static str),
    /// A string that is not valid UTF-8.
    #[error("a string is not UTF-8")]
    NotUtf8,
    /// Binary or extension data, which no `serde_json::Value` holds.
    #[error("binary or extension data")]
    Binary,
    /// A map key that is not a string.
    #[error("a map key that is not a string")]
    KeyNotString,
}

/// One msgpack marker and what it carries: a scalar, the bytes of a
/// string (not yet checked as UTF-8), binary or extension data, or a
/// container's length (its items follow).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Token<'a> {
    /// `nil`.
    Nil,
    /// `true` or `false`.
    Bool(bool),
    /// A non-negative integer (positive fixint, `uint 8..64`).
    Uint(u64),
    /// A signed integer (negative fixint, `int 8..64`).
    Int(i64),
    /// A `float 32`.
    F32(f32),
    /// A `float 64`.
    F64(f64),
    /// A string's bytes.
    Str(&'a [u8]),
    /// `bin 8..32` data.
    Bin(&'a [u8]),
    /// `ext` / `fixext` data: the type byte, then the data.
    Ext(&'a [u8]),
    /// An array of this many items.
    Array(usize),
    /// A map of this many key/value pairs.
    Map(usize),
}

/// A position in msgpack bytes. Copy it to look ahead.
#[derive(Debug, Clone, Copy)]
pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    /// How many bytes were read so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    /// The next `n` bytes.
    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], CursorError> {
        let end = self.pos.checked_add(n).ok_or(CursorError::Truncated)?;
        let taken = self
            .bytes
            .get(self.pos..end)
            .ok_or(CursorError::Truncated)?;
        self.pos = end;
        Ok(taken)
    }

    /// The next `N` bytes, as an array (for the big-endian numbers).
    #[inline]
    fn be<const N: usize>(&mut self) -> Result<[u8; N], CursorError> {
        let mut b = [0u8; N];
        b.copy_from_slice(self.take(N)?);
        Ok(b)
    }

    /// A big-endian length of 1, 2 or 4 bytes.
    #[inline]
    fn len(&mut self, n: usize) -> Result<usize, CursorError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0usize, |len, b| (len << 8) | usize::from(*b)))
    }

    /// Reads the next marker and what it carries (a container's items
    /// stay to be read).
    #[inline]
    pub fn token(&mut self) -> Result<Token<'a>, CursorError> {
        let marker = self.take(1)?[0];
        Ok(match marker {
            0x00..=0x7f => Token::Uint(u64::from(marker)),
            0x80..=0x8f => Token::Map(usize::from(marker & 0x0f)),
            0x90..=0x9f => Token::Array(usize::from(marker & 0x0f)),
            0xa0..=0xbf => Token::Str(self.take(usize::from(marker & 0x1f))?),
            0xc0 => Token::Nil,
            0xc1 => return Err(CursorError::Reserved),
            0xc2 => Token::Bool(false),
            0xc3 => Token::Bool(true),
            0xc4 => Token::Bin(self.sized(1)?),
            0xc5 => Token::Bin(self.sized(2)?),
            0xc6 => Token::Bin(self.sized(4)?),
            // ext 8/16/32: a length, then a type byte and the data.
            0xc7 => Token::Ext(self.ext(1)?),
            0xc8 => Token::Ext(self.ext(2)?),
            0xc9 => Token::Ext(self.ext(4)?),
            0xca => Token::F32(f32::from_be_bytes(self.be()?)),
            0xcb => Token::F64(f64::from_be_bytes(self.be()?)),
            0xcc => Token::Uint(u64::from(self.be::<1>()?[0])),
            0xcd => Token::Uint(u64::from(u16::from_be_bytes(self.be()?))),
            0xce => Token::Uint(u64::from(u32::from_be_bytes(self.be()?))),
            0xcf => Token::Uint(u64::from_be_bytes(self.be()?)),
            0xd0 => Token::Int(i64::from(i8::from_be_bytes(self.be()?))),
            0xd1 => Token::Int(i64::from(i16::from_be_bytes(self.be()?))),
            0xd2 => Token::Int(i64::from(i32::from_be_bytes(self.be()?))),
            0xd3 => Token::Int(i64::from_be_bytes(self.be()?)),
            // fixext 1/2/4/8/16: a type byte and the data.
            0xd4 => Token::Ext(self.take(2)?),
            0xd5 => Token::Ext(self.take(3)?),
            0xd6 => Token::Ext(self.take(5)?),
            0xd7 => Token::Ext(self.take(9)?),
            0xd8 => Token::Ext(self.take(17)?),
            0xd9 => Token::Str(self.sized(1)?),
            0xda => Token::Str(self.sized(2)?),
            0xdb => Token::Str(self.sized(4)?),
            0xdc => Token::Array(self.len(2)?),
            0xdd => Token::Array(self.len(4)?),
            0xde => Token::Map(self.len(2)?),
            0xdf => Token::Map(self.len(4)?),
            0xe0..=0xff => Token::Int(i64::from(marker as i8)),
        })
    }

    /// Bytes preceded by their length of `n` bytes.
    #[inline]
    fn sized(&mut self, n: usize) -> Result<&'a [u8], CursorError> {
        let len = self.len(n)?;
        self.take(len)
    }

    /// Extension data preceded by its length of `n` bytes (the type byte
    /// not counted).
    fn ext(&mut self, n: usize) -> Result<&'a [u8], CursorError> {
        let len = self.len(n)?;
        self.take(len.checked_add(1).ok_or(CursorError::Truncated)?)
    }

    /// The length of the map that comes next.
    pub fn map_len(&mut self) -> Result<usize, CursorError> {
        match self.token()? {
            Token::Map(n) => Ok(n),
            _ => Err(CursorError::Expected("a map")),
        }
    }

    /// The string that comes next (valid UTF-8).
    #[inline]
    pub fn str(&mut self) -> Result<&'a str, CursorError> {
        match self.token()? {
            Token::Str(s) => std::str::from_utf8(s).map_err(|_| CursorError::NotUtf8),
            _ => Err(CursorError::Expected("a string")),
        }
    }

    /// A map key: a string (valid UTF-8).
    #[inline]
    pub fn key(&mut self) -> Result<&'a str, CursorError> {
        // A short key (most are) without building its token.
        if let Some(&m @ 0xa0..=0xbf) = self.bytes.get(self.pos) {
            self.pos += 1;
            let s = self.take(usize::from(m & 0x1f))?;
            return std::str::from_utf8(s).map_err(|_| CursorError::NotUtf8);
        }
        self.str().map_err(|e| match e {
            CursorError::Expected(_) => CursorError::KeyNotString,
            e => e,
        })
    }

    /// Steps over a map key as [`Cursor::key`] reads it (a string, valid
    /// UTF-8), without making it a `str`: the check's walk.
    #[inline]
    fn skip_key(&mut self) -> Result<(), CursorError> {
        if let Some(&m @ 0xa0..=0xbf) = self.bytes.get(self.pos) {
            self.pos += 1;
            return utf8(self.take(usize::from(m & 0x1f))?);
        }
        match self.token()? {
            Token::Str(s) => utf8(s),
            _ => Err(CursorError::KeyNotString),
        }
    }

    /// Steps over the value that comes next, nested `depth` levels deep
    /// (1: a value at the top), and answers its bytes. The value must be
    /// one a decode into a `serde_json::Value` accepts: strings and keys
    /// UTF-8, keys strings, no binary or extension data, no value nested
    /// deeper than [`MAX_VALUE_DEPTH`] (as [`crate::value_depth`] counts).
    /// A key twice is not looked for.
    pub fn skip(&mut self, depth: usize) -> Result<&'a [u8], CursorError> {
        let start = self.pos;
        self.skip_at::<true>(depth)?;
        Ok(&self.bytes[start..self.pos])
    }

    /// Steps over the value that comes next as [`Cursor::skip`] does, but
    /// checks only its shape (complete, nested at most
    /// [`MAX_VALUE_DEPTH`] levels from `depth`): strings are not checked
    /// as UTF-8, keys may be anything, binary and extension data pass.
    /// For bytes a reader will check anyway as it reads them (the CLI's
    /// printers), so that they are not checked twice.
    pub fn step(&mut self, depth: usize) -> Result<&'a [u8], CursorError> {
        let start = self.pos;
        self.skip_at::<false>(depth)?;
        Ok(&self.bytes[start..self.pos])
    }

    /// Steps over a value nested `depth` levels, checked as a decode
    /// would check it when `STRICT`, for its shape only when not (a
    /// constant: each walk is compiled without the other's branches).
    fn skip_at<const STRICT: bool>(&mut self, depth: usize) -> Result<(), CursorError> {
        if depth > MAX_VALUE_DEPTH {
            return Err(CursorError::TooDeep);
        }
        // The commonest markers of a return (small scalars, short
        // strings, a state's `duration`, a comment of 32 to 255 bytes)
        // first, without building their token.
        match self.bytes.get(self.pos) {
            Some(0x00..=0x7f | 0xc0 | 0xc2 | 0xc3 | 0xe0..=0xff) => {
                self.pos += 1;
                return Ok(());
            }
            Some(&m @ 0xa0..=0xbf) => {
                self.pos += 1;
                let s = self.take(usize::from(m & 0x1f))?;
                if STRICT {
                    utf8(s)?;
                }
                return Ok(());
            }
            Some(0xcb) => {
                self.take(9)?;
                return Ok(());
            }
            Some(0xd9) => {
                self.pos += 1;
                let s = self.sized(1)?;
                if STRICT {
                    utf8(s)?;
                }
                return Ok(());
            }
            _ => {}
        }
        match self.token()? {
            Token::Str(s) if STRICT => {
                utf8(s)?;
            }
            Token::Bin(_) | Token::Ext(_) if STRICT => return Err(CursorError::Binary),
            Token::Array(n) => {
                for _ in 0..n {
                    self.skip_at::<STRICT>(depth + 1)?;
                }
            }
            Token::Map(n) => {
                for _ in 0..n {
                    if STRICT {
                        self.skip_key()?;
                    } else {
                        // A key is a value inside the map, as its value is
                        // (at the map's own level, keys in keys would
                        // recurse without a bound).
                        self.skip_at::<false>(depth + 1)?;
                    }
                    self.skip_at::<STRICT>(depth + 1)?;
                }
            }
            Token::Str(_)
            | Token::Bin(_)
            | Token::Ext(_)
            | Token::Nil
            | Token::Bool(_)
            | Token::Uint(_)
            | Token::Int(_)
            | Token::F32(_)
            | Token::F64(_) => {}
        }
        Ok(())
    }
}

/// Whether `s` is UTF-8, as `std::str::from_utf8` tells. ASCII (nearly
/// every key and value of a return) is told by `is_ascii` first, a word
/// at a time: a return's many short strings paid `from_utf8`'s own setup
/// each (issue 25, session 24: 6% of the master's CPU). The same answer
/// for every input (a test compares them).
#[inline]
fn utf8(s: &[u8]) -> Result<(), CursorError> {
    if s.is_ascii() || std::str::from_utf8(s).is_ok() {
        Ok(())
    } else {
        Err(CursorError::NotUtf8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::nested;
    use serde_json::json;

    /// A value with every kind a return holds, in every width.
    fn sample() -> Vec<u8> {
        let value = json!({
            "states": {"test_|-a_|-a_|-succeed": {"result": true, "comment": "é ✓ 😀", "__run_num__": 0,
                        "changes": {}, "duration": 0.25, "start_time": "03:45:00.123456"}},
            "ints": [0, 127, 128, 255, 256, 65_535, 65_536, u64::MAX, -1, -32, -33, -129, -32_769, i64::MIN],
            "floats": [0.1, -1e300, 5e-324],
            "long": "x".repeat(300), "longer": "y".repeat(70_000),
            "many": (0..20).collect::<Vec<_>>(),
            "keys": (0..20).map(|i| (format!("k{i}"), json!(i))).collect::<serde_json::Map<_, _>>(),
            "null": null, "empty": [[], {}],
        });
        crate::packed::pack(&value).unwrap()
    }

    #[test]
    fn tokens_read_every_marker_width() {
        let cases: Vec<(Vec<u8>, Token)> = vec![
            (vec![0x05], Token::Uint(5)),
            (vec![0xff], Token::Int(-1)),
            (vec![0xcc, 0xff], Token::Uint(255)),
            (vec![0xcd, 0x01, 0x00], Token::Uint(256)),
            (vec![0xd0, 0x80], Token::Int(-128)),
            (vec![0xd1, 0xff, 0x7f], Token::Int(-129)),
            (
                [vec![0xcf], u64::MAX.to_be_bytes().to_vec()].concat(),
                Token::Uint(u64::MAX),
            ),
            (
                [vec![0xd3], i64::MIN.to_be_bytes().to_vec()].concat(),
                Token::Int(i64::MIN),
            ),
            (
                [vec![0xca], 1.5f32.to_be_bytes().to_vec()].concat(),
                Token::F32(1.5),
            ),
            (
                [vec![0xcb], 0.1f64.to_be_bytes().to_vec()].concat(),
                Token::F64(0.1),
            ),
            (vec![0xc0], Token::Nil),
            (vec![0xc3], Token::Bool(true)),
            (vec![0xa2, b'a', b'b'], Token::Str(b"ab")),
            (vec![0xda, 0, 1, b'c'], Token::Str(b"c")),
            (vec![0xc4, 1, 9], Token::Bin(&[9])),
            (vec![0xc7, 1, 5, 9], Token::Ext(&[5, 9])),
            (vec![0xd4, 5, 9], Token::Ext(&[5, 9])),
            (vec![0xdc, 0, 3], Token::Array(3)),
            (vec![0xdf, 0, 1, 0, 0], Token::Map(65_536)),
        ];
        for (bytes, token) in cases {
            let mut cur = Cursor::new(&bytes);
            assert_eq!(cur.token().unwrap(), token, "{bytes:x?}");
            assert!(cur.is_empty(), "{bytes:x?}");
        }
        assert_eq!(Cursor::new(&[0xc1]).token(), Err(CursorError::Reserved));
    }

    #[test]
    fn skip_steps_over_a_value_a_decode_accepts_and_refuses_the_rest() {
        let bytes = sample();
        let mut cur = Cursor::new(&bytes);
        assert_eq!(cur.skip(1).unwrap(), &bytes[..]);
        assert!(cur.is_empty());
        // Depth as value_depth counts it, from the level given.
        let ok = crate::packed::pack(&nested(MAX_VALUE_DEPTH)).unwrap();
        Cursor::new(&ok).skip(1).unwrap();
        assert_eq!(Cursor::new(&ok).skip(2), Err(CursorError::TooDeep));
        let deep = crate::packed::pack(&nested(MAX_VALUE_DEPTH + 1)).unwrap();
        assert_eq!(Cursor::new(&deep).skip(1), Err(CursorError::TooDeep));
        let mut very_deep = vec![0x91u8; 100_000];
        very_deep.push(0xc0);
        assert_eq!(Cursor::new(&very_deep).skip(1), Err(CursorError::TooDeep));
        assert_eq!(Cursor::new(&very_deep).step(1), Err(CursorError::TooDeep));
        // Maps as keys of maps, 100,000 deep: refused, not a stack overflow.
        let mut keys_in_keys = vec![0x81u8; 100_000];
        keys_in_keys.push(0xc0);
        assert_eq!(
            Cursor::new(&keys_in_keys).step(1),
            Err(CursorError::TooDeep)
        );
        assert_eq!(
            Cursor::new(&keys_in_keys).skip(1),
            Err(CursorError::KeyNotString)
        );
        for (bad, why) in [
            (&[0xc4, 0x01, 0x00][..], CursorError::Binary),
            (&[0xd4, 0x01, 0x00], CursorError::Binary),
            (&[0x81, 0x01, 0xc0], CursorError::KeyNotString),
            (&[0x81, 0xa1, 0xff, 0xc0], CursorError::NotUtf8),
            (&[0xa2, 0xff, 0xfe], CursorError::NotUtf8),
            (&[0x92, 0x01], CursorError::Truncated),
            (&[0xc1], CursorError::Reserved),
            (&[], CursorError::Truncated),
            // Lengths far past the bytes.
            (
                &[0xdb, 0xff, 0xff, 0xff, 0xff, b'a'],
                CursorError::Truncated,
            ),
            (
                &[0xc9, 0xff, 0xff, 0xff, 0xff, 0x01],
                CursorError::Truncated,
            ),
            (
                &[0xdd, 0xff, 0xff, 0xff, 0xff, 0x01],
                CursorError::Truncated,
            ),
            (
                &[0xdf, 0xff, 0xff, 0xff, 0xff, 0xa0, 0x01],
                CursorError::Truncated,
            ),
        ] {
            assert_eq!(Cursor::new(bad).skip(1), Err(why), "{bad:x?}");
        }
    }

    #[test]
    fn step_checks_the_shape_only() {
        let bytes = sample();
        let mut cur = Cursor::new(&bytes);
        assert_eq!(cur.step(1).unwrap(), &bytes[..]);
        assert!(cur.is_empty());
        // What a decode refuses but is one whole value: stepped over.
        for ok in [
            &[0xc4, 0x01, 0x00][..],
            &[0xd4, 0x01, 0x00],
            &[0x81, 0x01, 0xc0],
            &[0x81, 0xa1, 0xff, 0xc0],
            &[0x92, 0xa2, 0xff, 0xfe, 0xc7, 0x01, 0x05, 0x09],
        ] {
            let mut cur = Cursor::new(ok);
            assert_eq!(cur.step(1).unwrap(), ok, "{ok:x?}");
            assert!(cur.is_empty());
        }
        // Truncated, reserved, too deep: refused as skip refuses them.
        let deep = crate::packed::pack(&nested(MAX_VALUE_DEPTH + 1)).unwrap();
        assert_eq!(Cursor::new(&deep).step(1), Err(CursorError::TooDeep));
        assert_eq!(
            Cursor::new(&[0x92, 0x01]).step(1),
            Err(CursorError::Truncated)
        );
        assert_eq!(
            Cursor::new(&[0x91, 0xc1]).step(1),
            Err(CursorError::Reserved)
        );
        assert_eq!(
            Cursor::new(&[0xdd, 0xff, 0xff, 0xff, 0xff, 0x01]).step(1),
            Err(CursorError::Truncated)
        );
        for end in 0..bytes.len() {
            assert_eq!(
                Cursor::new(&bytes[..end]).step(1),
                Err(CursorError::Truncated),
                "prefix of {end} bytes"
            );
        }
    }

    /// The ASCII shortcut answers as `from_utf8` does: ASCII, every kind
    /// of bad sequence (a lone continuation byte, an overlong form, a
    /// surrogate, past U+10FFFF, cut short) anywhere in a string, and
    /// random bytes.
    #[test]
    fn the_utf8_check_answers_as_from_utf8() {
        let mut cases: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"result".to_vec(),
            "Succès ✓ 😀".as_bytes().to_vec(),
        ];
        for bad in [
            &[0x80][..],
            &[0xc0, 0xaf],
            &[0xed, 0xa0, 0x80],
            &[0xf4, 0x90, 0x80, 0x80],
            &[0xe2, 0x9c],
            &[0xff],
        ] {
            for at in [0, 7, 40] {
                let mut s = vec![b'a'; at];
                s.extend_from_slice(bad);
                s.extend_from_slice(b"tail");
                cases.push(s);
            }
        }
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 24) as usize;
            // Mostly ASCII, with a high byte now and then.
            let s = (0..len)
                .map(|i| {
                    let b = (seed >> (i % 8 * 8)) as u8;
                    if b.is_multiple_of(5) {
                        b | 0x80
                    } else {
                        b & 0x7f
                    }
                })
                .collect();
            cases.push(s);
        }
        for s in &cases {
            assert_eq!(utf8(s).is_ok(), std::str::from_utf8(s).is_ok(), "{s:x?}");
        }
    }

    /// Every strict prefix of a valid value is an error, never a panic
    /// nor a shorter value.
    #[test]
    fn every_prefix_of_a_value_is_refused() {
        let bytes = sample();
        for end in 0..bytes.len() {
            assert_eq!(
                Cursor::new(&bytes[..end]).skip(1),
                Err(CursorError::Truncated),
                "prefix of {end} bytes"
            );
        }
    }

    /// Random bytes (a seeded xorshift, so a failure repeats), and a
    /// valid value with random bytes changed: the cursor answers an error
    /// or a value, never panics, never reads past the end, and whatever
    /// it accepts a decode accepts too.
    #[test]
    fn random_bytes_never_panic_and_what_passes_decodes() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let sample = sample();
        for round in 0..20_000 {
            let bytes: Vec<u8> = if round % 2 == 0 {
                let len = (next() % 64) as usize;
                (0..len).map(|_| next() as u8).collect()
            } else {
                let mut b = sample.clone();
                for _ in 0..1 + next() % 4 {
                    let at = (next() as usize) % b.len();
                    b[at] = next() as u8;
                }
                b
            };
            let mut cur = Cursor::new(&bytes);
            while !cur.is_empty() {
                if cur.token().is_err() {
                    break;
                }
            }
            let _ = Cursor::new(&bytes).step(1);
            let mut cur = Cursor::new(&bytes);
            if let Ok(value) = cur.skip(1) {
                assert!(cur.pos() <= bytes.len());
                assert!(
                    crate::decode::<serde_json::Value>(value).is_ok(),
                    "accepted, not decoded: {value:x?}"
                );
            }
        }
    }
}
