//! Encoding and decoding of wire messages with a size bound.

use serde::{de::DeserializeOwned, Serialize};

/// The largest message either daemon accepts (a job return with big
/// command output fits; a garbage 1 GiB frame does not).
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

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
    let bytes = rmp_serde::to_vec_named(value).map_err(|e| FrameError::Encode(e.to_string()))?;
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
    rmp_serde::from_slice(bytes).map_err(|e| FrameError::Malformed(e.to_string()))
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
}
