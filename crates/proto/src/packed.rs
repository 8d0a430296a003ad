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

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Serialize, Serializer};

use crate::frame::{FrameError, MAX_DECODE_DEPTH, MAX_VALUE_DEPTH};

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
/// next key). Nothing is built: the walk only reads.
pub fn check(bytes: &[u8]) -> Result<(), FrameError> {
    let mut de = decoder(bytes);
    Level(1)
        .deserialize(&mut de)
        .map_err(|e| FrameError::Malformed(format!("packed value: {e}")))?;
    // The decoder does not say where it stopped: a read past the value
    // must find the end of the bytes (anything else is a byte more).
    match serde::de::IgnoredAny::deserialize(&mut de) {
        Err(rmp_serde::decode::Error::InvalidMarkerRead(e))
            if e.kind() == std::io::ErrorKind::UnexpectedEof =>
        {
            Ok(())
        }
        _ => Err(FrameError::Malformed(
            "packed value: bytes after the value".into(),
        )),
    }
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

/// One value at nesting level `.0` (1: the top).
struct Level(usize);

impl<'de> DeserializeSeed<'de> for Level {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        if self.0 > MAX_VALUE_DEPTH {
            return Err(de::Error::custom(format!(
                "nested more than {MAX_VALUE_DEPTH} levels deep"
            )));
        }
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Level {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON-like value (no binary data, string keys)")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Level(self.0 + 1))?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Key)?.is_some() {
            map.next_value_seed(Level(self.0 + 1))?;
        }
        Ok(())
    }
}

/// A map key: a string, as a `Value`'s object needs.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string map key")
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
