//! The id form's chunks encoded once (issue 25): the msgpack bytes of the
//! chunk list as `rmp-serde` writes them, with the strings that hold the
//! id form's placeholder marked, so that each minion's bytes are the
//! literal spans copied and those strings written again with its id in
//! them (their length headers recomputed). No `Value` tree is built per
//! minion. The encoding is `rmp`'s (the encoder `rmp-serde` is built on:
//! the same header for each length, the same integer widths), and
//! `crates/master/tests/compile_id_form.rs` compares every minion's
//! bundle with the one `rmp-serde` packs from a fresh compile.

use memchr::memmem::Finder;
use serde_json::Number;

use crate::value::Value;

/// The chunks of one id form as msgpack: literal bytes and the strings
/// the id goes into. Why it exists: writing a minion's chunks is then a
/// copy of spans, not a compile, a copy of the chunks and an encode.
#[derive(Debug)]
pub struct IdBytes {
    /// The encoding with the placeholder in place (its own lengths).
    bytes: Vec<u8>,
    /// The strings holding the placeholder, in order of their offset.
    holes: Vec<Hole>,
    /// The placeholder as UTF-8.
    placeholder: Vec<u8>,
}

/// One string of [`IdBytes::bytes`] that holds the placeholder.
#[derive(Debug)]
struct Hole {
    /// Where its header starts.
    start: usize,
    /// Where its text starts (after the header).
    text: usize,
    /// Where its text ends.
    end: usize,
    /// How many placeholders it holds.
    count: usize,
}

impl IdBytes {
    /// `chunks` (with `placeholder` where the id goes) encoded as the list
    /// `rmp_serde::to_vec_named` writes.
    pub fn new(chunks: &[Value], placeholder: char) -> Self {
        let mut p = [0; 4];
        let placeholder = placeholder.encode_utf8(&mut p).as_bytes().to_vec();
        let mut out = Self {
            bytes: Vec::new(),
            holes: Vec::new(),
            placeholder,
        };
        array_len(&mut out.bytes, chunks.len());
        let finder = Finder::new(&out.placeholder).into_owned();
        for chunk in chunks {
            out.value(chunk, &finder);
        }
        out
    }

    /// The encoded size with the placeholder in place (a capacity hint).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether nothing was encoded (never: an empty list is one byte).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Appends the chunks with `id` where the placeholder is: the bytes
    /// `rmp-serde` writes for the chunks of the minion's own compile.
    pub fn write(&self, id: &str, out: &mut Vec<u8>) {
        let finder = Finder::new(&self.placeholder);
        let grows = id.len().saturating_sub(self.placeholder.len());
        out.reserve(self.bytes.len() + self.holes.len() * (grows + 4));
        let mut at = 0;
        for hole in &self.holes {
            out.extend_from_slice(&self.bytes[at..hole.start]);
            let text = &self.bytes[hole.text..hole.end];
            let len = text.len() - hole.count * self.placeholder.len() + hole.count * id.len();
            str_len(out, len);
            let mut rest = text;
            while let Some(i) = finder.find(rest) {
                out.extend_from_slice(&rest[..i]);
                out.extend_from_slice(id.as_bytes());
                rest = &rest[i + self.placeholder.len()..];
            }
            out.extend_from_slice(rest);
            at = hole.end;
        }
        out.extend_from_slice(&self.bytes[at..]);
    }

    fn string(&mut self, s: &str, finder: &Finder<'_>) {
        let count = finder.find_iter(s.as_bytes()).count();
        let start = self.bytes.len();
        str_len(&mut self.bytes, s.len());
        let text = self.bytes.len();
        self.bytes.extend_from_slice(s.as_bytes());
        if count > 0 {
            self.holes.push(Hole {
                start,
                text,
                end: self.bytes.len(),
                count,
            });
        }
    }

    fn value(&mut self, v: &Value, finder: &Finder<'_>) {
        match v {
            Value::Null => self.bytes.push(0xc0),
            Value::Bool(b) => self.bytes.push(if *b { 0xc3 } else { 0xc2 }),
            Value::Number(n) => write_number(&mut self.bytes, n),
            Value::String(s) => self.string(s, finder),
            Value::Array(items) => {
                array_len(&mut self.bytes, items.len());
                for item in items {
                    self.value(item, finder);
                }
            }
            Value::Object(map) => {
                map_len(&mut self.bytes, map.len());
                for (k, item) in map {
                    self.string(k, finder);
                    self.value(item, finder);
                }
            }
        }
    }
}

// Writing to a `Vec` cannot fail: the `rmp` results below are `Ok`.

fn str_len(out: &mut Vec<u8>, len: usize) {
    let _ = rmp::encode::write_str_len(out, len as u32);
}

fn array_len(out: &mut Vec<u8>, len: usize) {
    let _ = rmp::encode::write_array_len(out, len as u32);
}

fn map_len(out: &mut Vec<u8>, len: usize) {
    let _ = rmp::encode::write_map_len(out, len as u32);
}

/// A number as `serde_json` serializes it to `rmp-serde`: `u64`, `i64`
/// or `f64`, each at its smallest width (floats stay 64-bit). Public for
/// the minion's writer of state returns (`halite-minion`'s packing.rs),
/// which must write numbers by the same rule.
pub fn write_number(out: &mut Vec<u8>, n: &Number) {
    if let Some(u) = n.as_u64() {
        let _ = rmp::encode::write_uint(out, u);
    } else if let Some(i) = n.as_i64() {
        let _ = rmp::encode::write_sint(out, i);
    } else {
        let _ = rmp::encode::write_f64(out, n.as_f64().unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const P: char = '\u{E000}';

    fn put(v: &Value, id: &str) -> Value {
        match v {
            Value::String(s) => Value::String(s.replace(P, id)),
            Value::Array(a) => Value::Array(a.iter().map(|i| put(i, id)).collect()),
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, i)| (k.replace(P, id), put(i, id)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    #[test]
    fn each_minion_s_bytes_are_rmp_serde_s_for_its_own_chunks() {
        let p = P.to_string();
        let long = format!("/srv/{p}/{}", "x".repeat(40));
        let chunks = vec![
            json!({"state": "file", "__id__": format!("{p}_conf"), "name": format!("/srv/{p}/conf"),
                   "order": 10000, "neg": -1, "big": -40000, "u": 300, "f": 1.5, "t": true, "n": null,
                   "names": [format!("{p}{p}"), "web1", {"k": [1, 2, 3]}],
                   format!("key{p}"): long.clone()}),
            json!({"state": "test", "fun": "nop", "__id__": "literal", "name": "no placeholder"}),
        ];
        let bytes = IdBytes::new(&chunks, P);
        // Ids shorter, equal and longer than the placeholder's 3 bytes, and
        // ones that push a string over the fixstr, str8 and str16 bounds.
        for id in [
            "a",
            "abc",
            "web1",
            "web-4.example.com",
            &"z".repeat(200),
            &"y".repeat(70_000),
        ] {
            let mut out = Vec::new();
            bytes.write(id, &mut out);
            let own: Vec<Value> = chunks.iter().map(|c| put(c, id)).collect();
            assert!(
                out == rmp_serde::to_vec_named(&own).unwrap(),
                "{}",
                &id[..id.len().min(20)]
            );
        }
    }
}
