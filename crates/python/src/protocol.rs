//! The frames spoken with the worker: a 4-byte big-endian length, then
//! that many bytes of one UTF-8 JSON object carrying an `op` (docs/python.md).

use std::io::{Read, Write};

use serde_json::Value;

/// The largest frame either side accepts (256 MiB): a corrupt length must
/// not make the minion allocate without bound.
pub const MAX_FRAME: usize = 256 << 20;

/// Writes `value` as one frame.
pub fn write_frame(out: &mut impl Write, value: &Value) -> std::io::Result<()> {
    let body = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    write_raw_frame(out, &body)
}

/// Writes an already serialized JSON object as one frame.
pub fn write_raw_frame(out: &mut impl Write, body: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(body.len())
        .ok()
        .filter(|l| (*l as usize) <= MAX_FRAME)
        .ok_or_else(|| std::io::Error::other("frame larger than 256 MiB"))?;
    let mut frame = Vec::with_capacity(body.len() + 4);
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(body);
    out.write_all(&frame)?;
    out.flush()
}

/// Reads one frame; `Ok(None)` at a clean end of stream.
pub fn read_frame(input: &mut impl Read) -> std::io::Result<Option<Value>> {
    let mut len = [0u8; 4];
    match input.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::other(format!(
            "the Python worker sent a frame of {len} bytes (more than 256 MiB)"
        )));
    }
    let mut body = vec![0u8; len];
    input.read_exact(&mut body)?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| std::io::Error::other(format!("the Python worker sent bad JSON: {e}")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn frames_round_trip_order_and_ints() {
        let v: Value =
            serde_json::from_str(r#"{"z":1,"a":[true,null,2.5],"m":{"b":1,"a":2}}"#).unwrap();
        let mut buf = Vec::new();
        write_frame(&mut buf, &v).unwrap();
        let back = read_frame(&mut buf.as_slice()).unwrap().unwrap();
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            serde_json::to_string(&v).unwrap()
        );
        assert!(read_frame(&mut &[][..]).unwrap().is_none());
    }

    #[test]
    fn oversized_length_is_an_error_not_an_allocation() {
        let bytes = u32::MAX.to_be_bytes();
        assert!(read_frame(&mut &bytes[..]).is_err());
    }
}
