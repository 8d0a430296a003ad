//! Encoding and decoding of wire messages with a size bound.

use serde::{de::DeserializeOwned, Serialize};

/// The largest message either daemon accepts (a job return with big
/// command output fits; a garbage 1 GiB frame does not).
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// How deeply a decoded frame may nest (arrays and maps): deep enough for
/// any message with a value of [`MAX_VALUE_DEPTH`] inside, shallow enough
/// that decoding (which recurses) can never exhaust a thread's stack.
pub const MAX_DECODE_DEPTH: usize = 128;

/// How deeply a value from a minion (grains, a return, event data) may
/// nest to be kept. Below serde_json's recursion limit (128) with room
/// for the records it is stored and sent in, so whatever is accepted can
/// be read back from the job cache and shown by the CLI.
pub const MAX_VALUE_DEPTH: usize = 64;

/// The nesting depth of `value`: 1 for a scalar, one more per array or
/// object level. Iterative, so no input can overflow the stack.
pub fn value_depth(value: &serde_json::Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((v, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        match v {
            serde_json::Value::Array(items) => stack.extend(items.iter().map(|i| (i, depth + 1))),
            serde_json::Value::Object(map) => stack.extend(map.values().map(|i| (i, depth + 1))),
            _ => {}
        }
    }
    deepest
}

/// Why a frame was refused.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {size} bytes exceeds the {max}-byte limit; it was dropped")]
    /// A frame longer than the limit; it is dropped unread.
    TooLarge {
        /// Its length in bytes.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The bytes are not a message of this protocol.
    #[error("frame is not a valid halite message: {0}")]
    Malformed(String),
    /// A message could not be encoded.
    #[error("message could not be encoded: {0}")]
    Encode(String),
}

/// Encodes `value` as msgpack (struct fields by name, so both sides can
/// evolve), refusing results over [`MAX_FRAME_BYTES`].
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, FrameError> {
    encode_sized(value, 0)
}

/// As [`encode`], into a buffer of `capacity` bytes to start with: a
/// caller that knows about how large the message is (a sealed batch of
/// events, a return) saves the buffer's doublings and their copies
/// (issue 25). The bytes are [`encode`]'s whatever the capacity.
pub fn encode_sized<T: Serialize + ?Sized>(
    value: &T,
    capacity: usize,
) -> Result<Vec<u8>, FrameError> {
    let mut bytes = Vec::with_capacity(capacity);
    rmp_serde::encode::write_named(&mut bytes, value)
        .map_err(|e| FrameError::Encode(e.to_string()))?;
    if bytes.len() > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge {
            size: bytes.len(),
            max: MAX_FRAME_BYTES,
        });
    }
    Ok(bytes)
}

/// Decodes a msgpack frame after checking its size; any schema mismatch
/// is an error, never a panic.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, FrameError> {
    if bytes.len() > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge {
            size: bytes.len(),
            max: MAX_FRAME_BYTES,
        });
    }
    let mut de = rmp_serde::Deserializer::from_read_ref(bytes);
    de.set_max_depth(MAX_DECODE_DEPTH);
    T::deserialize(&mut de).map_err(|e| FrameError::Malformed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::ToMaster;

    #[test]
    fn garbage_and_oversized_frames_are_errors() {
        assert!(decode::<ToMaster>(b"\xff\x00garbage").is_err());
        assert!(decode::<ToMaster>(&[]).is_err());
        let huge = vec![0u8; MAX_FRAME_BYTES + 1];
        assert!(matches!(
            decode::<ToMaster>(&huge),
            Err(FrameError::TooLarge { .. })
        ));
        // A msgpack array header announcing 4 billion elements must not allocate them.
        assert!(decode::<ToMaster>(b"\xdd\xff\xff\xff\xff").is_err());
    }

    /// A buffer sized up front changes nothing in the bytes, whether it
    /// is too small, exact or larger.
    #[test]
    fn a_sized_encoding_is_the_encoding() {
        let sealed = crate::msg::ToMaster::Sealed(crate::msg::Sealed {
            session: u64::MAX,
            counter: 300,
            ciphertext: vec![0xab; 70_000],
        });
        let want = encode(&sealed).unwrap();
        for capacity in [0, 1, want.len() - 1, want.len(), want.len() + 64, 1 << 20] {
            assert_eq!(encode_sized(&sealed, capacity).unwrap(), want, "{capacity}");
        }
        let huge = vec![0u8; MAX_FRAME_BYTES + 1];
        assert!(matches!(
            encode_sized(&serde_bytes::Bytes::new(&huge), MAX_FRAME_BYTES + 16),
            Err(FrameError::TooLarge { .. })
        ));
    }

    #[test]
    fn nesting_is_bounded_when_decoding_and_measured_without_recursion() {
        // 100 000 nested one-element arrays: refused, not a stack overflow.
        let mut deep = vec![0x91u8; 100_000];
        deep.push(0xc0);
        assert!(decode::<serde_json::Value>(&deep).is_err());
        // Past the limit (rmp-serde's own default would allow 1024).
        let mut over = vec![0x91u8; MAX_DECODE_DEPTH + 1];
        over.push(0xc0);
        assert!(decode::<serde_json::Value>(&over).is_err());
        let mut ok = vec![0x91u8; MAX_DECODE_DEPTH - 1];
        ok.push(0xc0);
        let value = decode::<serde_json::Value>(&ok).expect("within the limit");
        assert_eq!(value_depth(&value), MAX_DECODE_DEPTH);
        assert_eq!(value_depth(&serde_json::json!({"a": [1, {"b": 2}]})), 4);
        assert_eq!(value_depth(&serde_json::json!(1)), 1);
    }
}
