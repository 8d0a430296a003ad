//! The patched serde_json (`vendor/serde_json`, docs/compact-map.md) scans
//! strings for bytes to escape eight at a time. Every JSON text halite
//! prints or sends goes through that scan: these tests hold it to the
//! escaping upstream does byte by byte, for every ASCII byte at every
//! position of a word and across word boundaries, and for non-ASCII text.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

/// What upstream serde_json writes for `s`: `"` and `\` escaped with a
/// backslash, the control characters with a short escape where JSON has
/// one and `\u00XX` otherwise, everything else (non-ASCII included) as is.
fn reference(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn check(s: &str) {
    let got = serde_json::to_string(s).expect("a string serializes");
    assert_eq!(got, reference(s), "escaping {s:?}");
    let back: String = serde_json::from_str(&got).expect("the text parses back");
    assert_eq!(back, s);
}

#[test]
fn every_ascii_byte_at_every_position_escapes_as_upstream() {
    for len in [1usize, 7, 8, 9, 15, 16, 17, 24, 31] {
        for at in 0..len {
            for byte in 0u8..0x80 {
                let mut text = vec![b'a'; len];
                text[at] = byte;
                let text = String::from_utf8(text).expect("ASCII");
                check(&text);
            }
        }
    }
}

#[test]
fn escapes_next_to_each_other_and_in_runs() {
    for s in [
        "",
        "\"",
        "\\\\\\\\\\\\\\\\\\",
        "\"\"\"\"\"\"\"\"\"\"",
        "abcdefg\"",
        "abcdefgh\"",
        "abcdefghi\\",
        "\u{0}\u{1}\u{1f} \u{7f}~!#",
        "line one\nline two\r\n\ttabbed \u{8}\u{c} end",
        "test_|-s00000_|-s00000_|-succeed_without_changes",
        "{\"k\": \"v\\n\"} and more than eight bytes after",
    ] {
        check(s);
    }
}

#[test]
fn non_ascii_text_is_written_as_is() {
    // Bytes at and above 0x80 never need escaping, whatever their
    // neighbours: multi-byte characters across word boundaries, next to
    // quotes and control characters.
    for s in [
        "é",
        "héhéhéhéhé\"héhé",
        "日本語のテキスト\n日本語",
        "\u{80}\u{7ff}\u{800}\u{ffff}\u{10000}\u{10ffff}",
        "ÿÿÿÿÿÿÿÿ\\",
        "aaaaaaa€\u{1}",
    ] {
        check(s);
    }
    for at in 0..20 {
        let mut s = "x".repeat(at);
        s.push('ÿ');
        s.push('"');
        s.push_str("\u{1f}zzzzzzzzz");
        check(&s);
    }
}
