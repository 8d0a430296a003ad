//! A value carried as its msgpack bytes instead of decoded (issue 25: a
//! 1,000-state return crosses the master to the watching CLI and the job
//! cache, and building it as a `serde_json::Value` on the way, then
//! encoding it twice, was most of what a return cost the master).
//!
//! - [`check`] walks the bytes without building anything, with the limits a
//!   decoded value would meet (depth, string keys, no binary), so whatever
//!   passes reads back as the same `Value` [`crate::decode`] gives;
//! - [`Packed`] serializes the bytes into any serde format (msgpack for a
//!   local client, JSON for the job cache) by transcoding them
//!   (`serde-transcode`): no `Value`, and floats written from the same
//!   `f64` a decode would hold.

use serde::{Serialize, Serializer};

use crate::cursor::Cursor;
#[cfg(doc)]
use crate::frame::MAX_VALUE_DEPTH;
use crate::frame::{FrameError, MAX_DECODE_DEPTH};

/// A decoder over `bytes` with the wire's depth guard (so no input can
/// exhaust the stack).
fn decoder(bytes: &[u8]) -> rmp_serde::Deserializer<rmp_serde::decode::ReadRefReader<'_, [u8]>> {
    let mut de = rmp_serde::Deserializer::from_read_ref(bytes);
    de.set_max_depth(MAX_DECODE_DEPTH);
    de
}

/// Checks that `bytes` are one msgpack value a minion may send: nested at
/// most [`MAX_VALUE_DEPTH`] levels (as [`crate::value_depth`] counts),
/// maps keyed by strings, no binary or extension data, and nothing after
/// the value (checked bytes are spliced as they are into the frames the
/// master sends its local clients, where a byte more would shift the
/// next key). Nothing is built: the walk only reads ([`Cursor::skip`]).
pub fn check(bytes: &[u8]) -> Result<(), FrameError> {
    let mut cur = Cursor::new(bytes);
    cur.skip(1)
        .map_err(|e| FrameError::Malformed(format!("packed value: {e}")))?;
    if !cur.is_empty() {
        return Err(FrameError::Malformed(
            "packed value: bytes after the value".into(),
        ));
    }
    Ok(())
}

/// The most bytes a return's zstd frame may expand to ([`unframe`]): what
/// a plain return may be, one wire frame ([`crate::MAX_FRAME_BYTES`]).
pub const MAX_RETURN_BYTES: usize = crate::frame::MAX_FRAME_BYTES;

/// The zstd level a minion compresses its return at ([`frame`]): level 1,
/// the level the master's job cache compressed every return at itself
/// (docs/benchmarks.md, issue 25 sessions 17 and 24).
pub const RETURN_ZSTD_LEVEL: i32 = 1;

/// `bytes` (a return's packed value) as one zstd frame: level
/// [`RETURN_ZSTD_LEVEL`], no dictionary, its size named in the header,
/// no checksum. The master stores such a frame as it is, and its job
/// cache reads it back with a plain `zstd` decode.
pub fn frame(bytes: &[u8]) -> Result<Vec<u8>, FrameError> {
    zstd::bulk::compress(bytes, RETURN_ZSTD_LEVEL)
        .map_err(|e| FrameError::Encode(format!("zstd: {e}")))
}

/// How many bytes zstd `frame` says it expands to, if it says.
pub fn framed_len(frame: &[u8]) -> Option<u64> {
    zstd::zstd_safe::get_frame_content_size(frame)
        .ok()
        .flatten()
}

/// The packed bytes inside a return's zstd `frame`, refused (never
/// allocated) when the frame claims or yields more than `max` bytes, and
/// refused unless it is what [`frame`] makes and what the job cache's
/// reader decodes as it is: exactly one frame (nothing after it), no
/// dictionary, its size named in the header. The bytes are not
/// [`check`]ed here.
pub fn unframe(frame: &[u8], max: usize) -> Result<Vec<u8>, FrameError> {
    let bad = |why: String| FrameError::Malformed(format!("zstd frame: {why}"));
    let whole = zstd::zstd_safe::find_frame_compressed_size(frame)
        .map_err(|code| bad(zstd::zstd_safe::get_error_name(code).to_string()))?;
    if whole != frame.len() {
        return Err(bad(format!(
            "{} bytes after the frame",
            frame.len().saturating_sub(whole)
        )));
    }
    if let Some(dict) = zstd::zstd_safe::get_dict_id_from_frame(frame) {
        return Err(bad(format!("it needs dictionary {dict}")));
    }
    let named = framed_len(frame).ok_or_else(|| bad("it does not name its size".into()))?;
    let size = usize::try_from(named)
        .ok()
        .filter(|size| *size <= max)
        .ok_or_else(|| {
            bad(format!(
                "it expands to {named} bytes, past the {max}-byte limit"
            ))
        })?;
    let plain = zstd::bulk::decompress(frame, size).map_err(|e| bad(e.to_string()))?;
    if plain.len() != size {
        return Err(bad(format!(
            "it names {size} bytes and yields {}",
            plain.len()
        )));
    }
    Ok(plain)
}

/// The bytes of `value`, as [`Packed`] reads them.
pub fn pack(value: &serde_json::Value) -> Result<Vec<u8>, FrameError> {
    rmp_serde::to_vec_named(value).map_err(|e| FrameError::Encode(e.to_string()))
}

/// The value of packed `bytes` (with the decoder's depth limit).
pub fn unpack(bytes: &[u8]) -> Result<serde_json::Value, FrameError> {
    crate::decode(bytes)
}

/// Packed bytes that serialize as the value they hold, into any format
/// (transcoded, never decoded into a `Value`). Bytes that fail
/// [`check`] fail the serialization with the decoder's error.
#[derive(Debug, Clone, Copy)]
pub struct Packed<'a>(pub &'a [u8]);

impl Serialize for Packed<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut de = decoder(self.0);
        serde_transcode::transcode(&mut de, serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::MAX_VALUE_DEPTH;
    use crate::testing::nested;
    use crate::value_depth;
    use serde_json::json;

    #[test]
    fn the_check_refuses_what_a_decode_would_and_what_is_too_deep() {
        let value = json!({"a": [1, -2, 2.5, 1e300, "é ✓", null, true], "b": {"c": {}}});
        check(&pack(&value).unwrap()).unwrap();
        assert_eq!(unpack(&pack(&value).unwrap()).unwrap(), value);
        // Depth as value_depth counts it.
        let ok = nested(MAX_VALUE_DEPTH);
        assert_eq!(value_depth(&ok), MAX_VALUE_DEPTH);
        check(&pack(&ok).unwrap()).unwrap();
        assert!(check(&pack(&nested(MAX_VALUE_DEPTH + 1)).unwrap()).is_err());
        // 100 000 levels: refused, not a stack overflow.
        let mut deep = vec![0x91u8; 100_000];
        deep.push(0xc0);
        assert!(check(&deep).is_err());
        // Binary data, an integer key, truncated bytes, invalid UTF-8, a
        // reserved marker, nothing: none is a value a decode gives.
        for bad in [
            &[0xc4, 0x01, 0x00][..],
            &[0x81, 0x01, 0xc0],
            &[0x92, 0x01],
            &[0xa2, 0xff, 0xfe],
            &[0xc1],
            &[],
            // A value, then a byte more.
            &[0x01, 0xc0],
            &[0x81, 0xa1, b'a', 0x01, 0x01],
        ] {
            assert!(check(bad).is_err(), "{bad:?} passed");
        }
    }

    /// A state run's return with one bad string deep in it (a comment, a
    /// long comment, a key of its changes): refused wherever it is, and
    /// the same return with the string good passes.
    #[test]
    fn a_string_that_is_not_utf8_deep_in_a_return_is_refused() {
        let state = |n: usize, comment: &str, key: &str| {
            json!({"result": true, "comment": comment, "__run_num__": n,
                   "changes": {"diff": {key: "ok"}}, "duration": 0.5})
        };
        let long = format!("{}XXXX", "y".repeat(60));
        let mut ret = serde_json::Map::new();
        for n in 0..200 {
            let (comment, key) = match n {
                150 => ("XXXX", "new"),
                151 => (long.as_str(), "new"),
                152 => ("Success!", "XXXX"),
                _ => ("Success!", "new"),
            };
            ret.insert(format!("test_|-s{n}_|-s{n}_|-nop"), state(n, comment, key));
        }
        let good = pack(&serde_json::Value::Object(ret)).unwrap();
        check(&good).unwrap();
        let marks: Vec<usize> = good
            .windows(4)
            .enumerate()
            .filter(|(_, w)| w == b"XXXX")
            .map(|(at, _)| at)
            .collect();
        assert_eq!(marks.len(), 3);
        // A surrogate, an overlong slash, a lone continuation byte.
        for bad in [
            [0xed, 0xa0, 0x80, b'X'],
            [b'X', 0xc0, 0xaf, b'X'],
            [b'X', b'X', b'X', 0x80],
        ] {
            for at in &marks {
                let mut bytes = good.clone();
                bytes[*at..*at + 4].copy_from_slice(&bad);
                let e = check(&bytes).unwrap_err().to_string();
                assert!(e.contains("not UTF-8"), "{e}");
                assert!(crate::decode::<serde_json::Value>(&bytes).is_err());
            }
        }
    }

    #[test]
    fn a_frame_expands_to_its_bytes_within_the_limit_and_nothing_else_passes() {
        let bytes = pack(&json!({"comment": "Succès ✓ ".repeat(1000), "n": [1, 2.5]})).unwrap();
        let framed = frame(&bytes).unwrap();
        assert_eq!(framed_len(&framed), Some(bytes.len() as u64));
        assert_eq!(unframe(&framed, bytes.len()).unwrap(), bytes);
        // The job cache's reader gives the same bytes.
        assert_eq!(zstd::decode_all(&framed[..]).unwrap(), bytes);
        let refused = |frame: &[u8], max: usize| match unframe(frame, max) {
            Err(e) => e.to_string(),
            Ok(b) => panic!("{} bytes passed", b.len()),
        };
        // One byte past the limit: refused before anything is allocated.
        assert!(refused(&framed, bytes.len() - 1).contains("past the"));
        // 17 MiB of zeros in a frame of a few hundred bytes.
        let bomb = frame(&vec![0u8; MAX_RETURN_BYTES + (1 << 20)]).unwrap();
        assert!(bomb.len() < 4096, "{}", bomb.len());
        assert!(refused(&bomb, MAX_RETURN_BYTES).contains("past the 16777216-byte limit"));
        // A second frame after the first (a plain decode would read both).
        let two = [framed.clone(), frame(b"\xc0").unwrap()].concat();
        assert!(refused(&two, MAX_RETURN_BYTES).contains("bytes after the frame"));
        // A frame that does not name its size (a stream's).
        let streamed = zstd::encode_all(&bytes[..], 1).unwrap();
        assert_eq!(framed_len(&streamed), None);
        assert!(refused(&streamed, MAX_RETURN_BYTES).contains("does not name its size"));
        // A frame that needs a dictionary: the header's dictionary flag
        // set, a one-byte id after the descriptor.
        let small = frame(&pack(&json!("x")).unwrap()).unwrap();
        let mut with_dict = small[..4].to_vec();
        with_dict.push(small[4] | 0x01);
        let single_segment = small[4] & 0x20 != 0;
        let at = if single_segment { 5 } else { 6 };
        with_dict.extend_from_slice(&small[5..at]);
        with_dict.push(7);
        with_dict.extend_from_slice(&small[at..]);
        assert!(refused(&with_dict, MAX_RETURN_BYTES).contains("dictionary 7"));
        // Not zstd at all, truncated, nothing.
        for bad in [&bytes[..], &framed[..framed.len() - 1], &[]] {
            refused(bad, MAX_RETURN_BYTES);
        }
    }

    #[test]
    fn packed_bytes_serialize_as_their_value_in_msgpack_and_json() {
        let value = json!({"z": 1, "a": {"duration": 0.1 + 0.2, "big": u64::MAX, "neg": i64::MIN,
            "s": "naïve ✓ \u{1F600}", "l": [1.5e-300, 2.0, null, false]}});
        let bytes = pack(&value).unwrap();
        assert_eq!(
            serde_json::to_string(&Packed(&bytes)).unwrap(),
            serde_json::to_string(&value).unwrap()
        );
        assert_eq!(
            rmp_serde::to_vec_named(&Packed(&bytes)).unwrap(),
            rmp_serde::to_vec_named(&value).unwrap()
        );
        assert!(serde_json::to_string(&Packed(&[0x92, 0x01])).is_err());
    }
}
