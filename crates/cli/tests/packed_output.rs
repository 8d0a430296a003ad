//! Issue 25, session 20: `halite --out json` prints a streamed return
//! straight from its msgpack bytes (`output::json::write_packed_keyed`)
//! instead of decoding it into a `Value` and serializing that. The text
//! must be the same byte for byte: here every kind of value is printed
//! both ways from the same frame, and through a real master whose bus
//! spills some returns to the job cache (read back) and holds others.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use halite_cli::output::json::{write_packed_keyed, write_packed_keyed_at};
use halite_cli::output::{self, highstate, OutputOptions, Outputter};
use halite_client::local::{LocalReply, Streamed};
use halite_test_support::can_run;
use halite_test_support::fleet::Fleet;
use serde_json::{json, Map, Value};

/// A msgpack string.
fn mp_str(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match s.len() {
        n if n < 32 => out.push(0xa0 | n as u8),
        n if n < 256 => out.extend([0xd9, n as u8]),
        n if n < 65536 => {
            out.push(0xda);
            out.extend((n as u16).to_be_bytes());
        }
        n => {
            out.push(0xdb);
            out.extend((n as u32).to_be_bytes());
        }
    }
    out.extend_from_slice(s);
    out
}

/// A frame as the master streams `id`'s return: `{"Return": {"id": id,
/// "data": {key: value...}}}`, the values msgpack.
fn frame_with(id: &str, data: &[(&str, &[u8])]) -> Vec<u8> {
    let mut f = vec![0x81];
    f.extend(mp_str(b"Return"));
    f.push(0x82);
    f.extend(mp_str(b"id"));
    f.extend(mp_str(id.as_bytes()));
    f.extend(mp_str(b"data"));
    f.push(0x80 | data.len() as u8);
    for (key, value) in data {
        f.extend(mp_str(key.as_bytes()));
        f.extend_from_slice(value);
    }
    f
}

/// The frame of `id`'s return whose value is the msgpack `ret`, with the
/// other keys of a return event.
fn frame(id: &str, ret: &[u8]) -> Vec<u8> {
    let jid = mp_str(b"20261127034500000001");
    frame_with(
        id,
        &[
            ("jid", &jid),
            ("return", ret),
            ("retcode", &[0x00]),
            ("success", &[0xc3]),
        ],
    )
}

/// What `halite --out json` printed for a return before: the frame
/// decoded whole, its `return` rendered as `{id: return}`, a newline.
fn printed_decoded(frame: &[u8]) -> Result<Vec<u8>, String> {
    let reply: LocalReply = halite_proto::decode(frame).map_err(|e| e.to_string())?;
    let LocalReply::Return { id, data } = reply else {
        return Err("not a return".into());
    };
    let ret = data.get("return").cloned().unwrap_or(Value::Null);
    let mut map = Map::new();
    map.insert(id, ret);
    let text = output::render(Outputter::Json, &map, &OutputOptions::default(), 0);
    Ok(format!("{text}\n").into_bytes())
}

/// What it prints now: transcoded from the packed bytes, or, when they
/// cannot be, the decoded way. `Err` when neither prints; the bool says
/// whether the bytes were transcoded.
fn printed_packed(frame: Vec<u8>) -> Result<(Vec<u8>, bool), String> {
    match Streamed::parse(frame.clone()).map_err(|e| e.to_string())? {
        Streamed::Return(ret) => {
            let mut text = Vec::new();
            let packed = ret.packed().expect("a return");
            if write_packed_keyed(&mut text, &ret.id, packed, 4).is_ok() {
                text.push(b'\n');
                return Ok((text, true));
            }
            printed_decoded(&frame).map(|t| (t, false))
        }
        Streamed::Reply(_) => printed_decoded(&frame).map(|t| (t, false)),
    }
}

/// What `halite --out json` prints now (issue 25, session 26): the return
/// printed as the frame's parse comes to it
/// (`Streamed::parse_printing` with `write_packed_keyed_at`, as the CLI
/// calls them), or, when it cannot be, the decoded way. `Err` when
/// neither prints; the bool says whether it was printed from the bytes.
/// Also checks that the rest of the frame reads as `Streamed::parse`
/// reads it (the same keys after the return, the same decoded values).
fn printed_in_one_walk(frame: Vec<u8>) -> Result<(Vec<u8>, bool), String> {
    let mut text = Vec::new();
    let (read, printed) = Streamed::parse_printing(frame.clone(), |id, cur| {
        text.clear();
        write_packed_keyed_at(&mut text, id, cur, 4).is_ok()
    })
    .map_err(|e| e.to_string())?;
    let before = Streamed::parse(frame.clone()).map_err(|e| e.to_string())?;
    match (read, before) {
        (Streamed::Return(ret), Streamed::Return(old)) => {
            for key in ["jid", "return", "retcode", "success", "extra"] {
                assert_eq!(ret.field(key), old.field(key), "field {key}");
            }
            if printed {
                text.push(b'\n');
                return Ok((text, true));
            }
            printed_decoded(&frame).map(|t| (t, false))
        }
        (Streamed::Reply(_), Streamed::Reply(_)) => printed_decoded(&frame).map(|t| (t, false)),
        (now, old) => panic!("read as {now:?}, before as {old:?}"),
    }
}

/// A msgpack map of `n` keys `key00`, `key01`... (the last one `key00`
/// again when `twice`), each to its number.
fn map_of_keys(n: u16, twice: bool) -> Vec<u8> {
    let mut v = vec![0xde];
    v.extend(n.to_be_bytes());
    for i in 0..n {
        let k = if twice && i == n - 1 { 0 } else { i };
        v.extend(mp_str(format!("key{k:02}").as_bytes()));
        v.push(i as u8);
    }
    v
}

/// `levels` arrays nested in each other around a 1.
fn nested_arrays(levels: usize) -> Vec<u8> {
    let mut v = vec![0x91; levels - 1];
    v.push(0x01);
    v
}

#[test]
fn a_packed_return_prints_the_same_bytes_as_its_decoded_value() {
    let long = "é✓😀\"\\\u{0}\u{1f}/<>&\u{2028}".repeat(40);
    let very_long = "x".repeat(70_000);
    let states: Map<String, Value> = (0..300)
        .map(|i| {
            (
                format!("test_|-s{i}_|-s{i}_|-succeed_without_changes"),
                json!({"result": i % 3 != 0, "comment": format!("state {i} ✓"), "name": format!("s{i}"),
                       "changes": if i % 7 == 0 { json!({"diff": "+a\n-b", "list": [1, [], {}]}) } else { json!({}) },
                       "__run_num__": i, "duration": 0.1 * i as f64, "start_time": "03:45:00.123456"}),
            )
        })
        .collect();
    // Values a minion's return holds, encoded as the minion encodes them.
    let encoded: Vec<(&str, Value)> = vec![
        ("states", Value::Object(states)),
        (
            "unicode and escapes",
            json!({"s": long, "k€y \"q\"": "v", "": ""}),
        ),
        ("a long string", json!([very_long])),
        (
            "floats",
            json!([
                0.1 + 0.2,
                1e300,
                -1e-300,
                5e-324,
                -0.0,
                1.0,
                123_456_789.0,
                f64::MAX,
                1e21,
                1e-7
            ]),
        ),
        (
            "big ints",
            json!([
                u64::MAX,
                i64::MIN,
                i64::MAX,
                -1,
                0,
                127,
                128,
                255,
                256,
                65_535,
                65_536,
                -32,
                -33,
                -129,
                -32_769
            ]),
        ),
        (
            "nested empties",
            json!({"a": {}, "b": [], "c": [[], {}, [[]], {"d": {}}], "e": null, "f": false}),
        ),
        ("a scalar", json!("Minion did not return. [No response]")),
        ("a number", json!(42)),
        ("null", Value::Null),
        ("a list at the top", json!([{"x": 1}, [2], "3"])),
        (
            "sixteen keys and more",
            Value::Object((0..70_000).map(|i| (format!("k{i}"), json!(i))).collect()),
        ),
    ];
    let mut cases: Vec<(String, Vec<u8>, bool)> = encoded
        .into_iter()
        .map(|(name, v)| {
            (
                name.to_string(),
                halite_proto::packed::pack(&v).unwrap(),
                true,
            )
        })
        .collect();
    let ascii: Vec<u8> = (0u8..0x80).collect();
    // Bytes no `Value` encodes to, but a peer may send.
    let raw: Vec<(&str, Vec<u8>, bool)> = vec![
        // f32: a `Value` widens it to f64 (0.1f32 prints as 0.10000000149011612).
        (
            "f32",
            [
                vec![0x92, 0xca],
                0.1f32.to_be_bytes().to_vec(),
                vec![0xca],
                1.5f32.to_be_bytes().to_vec(),
            ]
            .concat(),
            true,
        ),
        (
            "f64 NaN and infinity",
            [
                vec![0x92, 0xcb],
                f64::NAN.to_be_bytes().to_vec(),
                vec![0xcb],
                f64::INFINITY.to_be_bytes().to_vec(),
            ]
            .concat(),
            true,
        ),
        (
            "f32 infinity",
            [vec![0x91, 0xca], f32::NEG_INFINITY.to_be_bytes().to_vec()].concat(),
            true,
        ),
        // Integers in wider markers than they need.
        (
            "wide ints",
            vec![
                0x94, 0xcf, 0, 0, 0, 0, 0, 0, 0, 5, 0xd3, 0, 0, 0, 0, 0, 0, 0, 7, 0xd0, 0xff, 0xcd,
                0, 1,
            ],
            true,
        ),
        // Strings and containers in wider markers.
        (
            "wide strings",
            [
                vec![0x92, 0xdb, 0, 0, 0, 2],
                b"ab".to_vec(),
                vec![0xda, 0, 1],
                b"c".to_vec(),
            ]
            .concat(),
            true,
        ),
        (
            "wide containers",
            [vec![
                0xdd, 0, 0, 0, 2, 0xdf, 0, 0, 0, 1, 0xa1, b'k', 0xde, 0, 0, 0xdc, 0, 0,
            ]]
            .concat(),
            true,
        ),
        // A key twice: a `Value` keeps the last value at the first place.
        (
            "a key twice",
            vec![0x83, 0xa1, b'a', 0x01, 0xa1, b'b', 0x02, 0xa1, b'a', 0x03],
            false,
        ),
        (
            "a key twice, deeper",
            vec![
                0x91, 0x81, 0xa1, b'x', 0x82, 0xa1, b'a', 0x01, 0xa1, b'a', 0x02,
            ],
            false,
        ),
        // A key twice in a map big enough to be checked by hashing
        // (more than 16 keys), its last key its first.
        ("a key twice in a big map", map_of_keys(40, true), false),
        ("forty keys", map_of_keys(40, false), true),
        // Every ASCII byte in a key and a value: the control characters,
        // the quote and the backslash escaped as serde_json escapes them,
        // DEL (0x7f) and the rest written as they are.
        (
            "every ASCII byte",
            [vec![0x81], mp_str(&ascii), mp_str(&ascii)].concat(),
            true,
        ),
        // And each alone, as a key and as a value.
        (
            "each ASCII byte alone",
            [
                vec![0xde, 0, 0x80],
                ascii
                    .iter()
                    .flat_map(|b| [mp_str(&[*b]), mp_str(&[*b])].concat())
                    .collect(),
            ]
            .concat(),
            true,
        ),
        // As deep as a minion's value may be, and one level more.
        ("64 levels", nested_arrays(64), true),
        ("65 levels", nested_arrays(65), false),
    ];
    cases.extend(raw.into_iter().map(|(n, b, t)| (n.to_string(), b, t)));
    for id in ["web1", "wéb \"2\" 😀"] {
        for (name, ret, transcoded) in &cases {
            let frame = frame(id, ret);
            let before = printed_decoded(&frame).unwrap_or_else(|e| panic!("{name}: {e}"));
            let (now, was_transcoded) = printed_packed(frame.clone()).unwrap();
            assert_eq!(
                String::from_utf8_lossy(&now),
                String::from_utf8_lossy(&before),
                "{name} for {id}"
            );
            assert_eq!(now, before, "{name} for {id}");
            assert_eq!(was_transcoded, *transcoded, "{name}: transcoded or not");
            let (one_walk, was_transcoded) = printed_in_one_walk(frame).unwrap();
            assert_eq!(one_walk, before, "{name} for {id}, in one walk");
            assert_eq!(
                was_transcoded, *transcoded,
                "{name}: transcoded or not, in one walk"
            );
        }
    }

    // What a decode refuses is refused by both ways, with the decode's error.
    let refused: Vec<(&str, Vec<u8>)> = vec![
        ("binary", vec![0xc4, 0x02, 0x01, 0x02]),
        ("extension data", vec![0xd4, 0x01, 0x00]),
        ("an integer key", vec![0x81, 0x01, 0x02]),
        ("invalid UTF-8", vec![0xa2, 0xff, 0xfe]),
        ("a lone continuation byte", vec![0xa1, 0x80]),
        ("a lone continuation byte key", vec![0x81, 0xa1, 0x80, 0x01]),
        ("an invalid UTF-8 key", vec![0x81, 0xa2, 0xff, 0xfe, 0x01]),
        ("a reserved marker", vec![0xc1]),
    ];
    for (name, ret) in refused {
        let frame = frame("web1", &ret);
        let before = printed_decoded(&frame).expect_err(name);
        let now = printed_packed(frame.clone()).expect_err(name);
        assert_eq!(now, before, "{name}");
        let one_walk = printed_in_one_walk(frame).expect_err(name);
        assert_eq!(one_walk, before, "{name}, in one walk");
        let mut text = Vec::new();
        assert!(
            write_packed_keyed(&mut text, "web1", &ret, 4).is_err(),
            "{name}"
        );
    }

    // Every indent `--out-indent` allows prints as the decoded value does.
    let value = json!({"a": [1, {"b": {}}, []], "c": "d"});
    let bytes = halite_proto::packed::pack(&value).unwrap();
    for indent in [0, 1, 2, 8] {
        let mut expected = Vec::new();
        output::write_json(&mut expected, &json!({"m": value}), indent).unwrap();
        let mut text = Vec::new();
        write_packed_keyed(&mut text, "m", &bytes, indent).unwrap();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            String::from_utf8(expected).unwrap(),
            "indent {indent}"
        );
    }
}

/// A seeded xorshift: the same cases every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A msgpack value of random shape, `depth` levels deep (1: the top),
/// in every marker width, with what a `Value` holds otherwise now and
/// then: a key twice, a non-string key, binary and extension data,
/// invalid UTF-8, f32, non-finite floats, nesting past the limit.
fn random_value(rng: &mut Rng, depth: usize, out: &mut Vec<u8>) {
    let words: [&[u8]; 10] = [
        b"result",
        b"changes",
        b"test_|-s1_|-s1_|-succeed_without_changes",
        b"",
        "é ✓ 😀".as_bytes(),
        b"quote \" back \\ tab \t",
        b"\x00\x1f\x7f",
        b"\xff\xfe",
        b"\xc3",
        b"k",
    ];
    let container = depth < 70 && rng.below(if depth < 4 { 3 } else { 6 }) == 0;
    if container {
        let wide = rng.below(8) == 0;
        let n = rng.below(if wide { 40 } else { 6 }) as usize;
        let map = rng.below(2) == 0;
        match (map, n, rng.below(3)) {
            (true, n, 0) if n < 16 => out.push(0x80 | n as u8),
            (false, n, 0) if n < 16 => out.push(0x90 | n as u8),
            (true, n, 1) => {
                out.push(0xde);
                out.extend((n as u16).to_be_bytes());
            }
            (false, n, 1) => {
                out.push(0xdc);
                out.extend((n as u16).to_be_bytes());
            }
            (true, n, _) => {
                out.push(0xdf);
                out.extend((n as u32).to_be_bytes());
            }
            (false, n, _) => {
                out.push(0xdd);
                out.extend((n as u32).to_be_bytes());
            }
        }
        let mut keys = Vec::new();
        for _ in 0..n {
            if map {
                match rng.below(40) {
                    0 => out.push(0x07),
                    1 if !keys.is_empty() => {
                        let k: &Vec<u8> = &keys[rng.below(keys.len() as u64) as usize];
                        out.extend(mp_str(k));
                    }
                    _ => {
                        let mut k = words[rng.below(3) as usize].to_vec();
                        if rng.below(50) == 0 {
                            k = words[rng.below(words.len() as u64) as usize].to_vec();
                        }
                        k.extend(format!("{}", keys.len()).bytes());
                        out.extend(mp_str(&k));
                        keys.push(k);
                    }
                }
            }
            random_value(rng, depth + 1, out);
        }
        return;
    }
    match rng.below(24) {
        0 => out.push(0xc0),
        1 => out.push(0xc2 | rng.below(2) as u8),
        2 => out.push(rng.below(128) as u8),
        3 => out.push(0xe0 | rng.below(32) as u8),
        4 => {
            out.push(0xcc + rng.below(4) as u8);
            let width = [1, 2, 4, 8][usize::from(out[out.len() - 1] - 0xcc)];
            out.extend(&rng.next().to_be_bytes()[..width]);
        }
        5 => {
            out.push(0xd0 + rng.below(4) as u8);
            let width = [1, 2, 4, 8][usize::from(out[out.len() - 1] - 0xd0)];
            out.extend(&rng.next().to_be_bytes()[..width]);
        }
        6 => {
            let v =
                [0.1, -0.0, 1e300, f64::NAN, f64::INFINITY, 5e-324, 123.456][rng.below(7) as usize];
            out.push(0xcb);
            out.extend(v.to_be_bytes());
        }
        7 => {
            out.push(0xca);
            out.extend((rng.next() as u32).to_be_bytes());
        }
        8 if rng.below(10) == 0 => out.extend([0xc4, 0x01, 0x00]),
        9 if rng.below(10) == 0 => out.extend([0xd4, 0x01, 0x00]),
        10 => {
            let mut s = Vec::new();
            for _ in 0..rng.below(4) {
                s.extend(words[rng.below(7) as usize]);
            }
            out.extend(mp_str(&s));
        }
        11 if rng.below(5) == 0 => {
            out.extend(mp_str(words[rng.below(words.len() as u64) as usize]))
        }
        12 => out.extend(mp_str(&vec![b'x'; rng.below(70_000) as usize])),
        _ => out.extend(mp_str(words[rng.below(7) as usize])),
    }
}

/// Thousands of random returns, and each of them cut short, in frames
/// with the return's key first, in the middle, last or twice: the CLI's
/// one walk prints (or refuses, or fails) exactly as the step over the
/// return and then its printing did, and as its decoded value prints;
/// the keys after the return read the same.
#[test]
fn a_return_printed_in_one_walk_prints_as_stepped_over_and_printed() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut transcoded, mut decoded, mut refused) = (0, 0, 0);
    for case in 0..3_000 {
        let mut ret = Vec::new();
        random_value(&mut rng, 1, &mut ret);
        let jid = mp_str(b"20261127034500000001");
        let extra: &[u8] = &[0x92, 0x01, 0xa1, b'x'];
        let cut = if case % 5 == 0 {
            rng.below(ret.len() as u64) as usize
        } else {
            ret.len()
        };
        let layouts: [Vec<(&str, &[u8])>; 4] = [
            vec![("return", &ret[..cut]), ("retcode", &[0x00])],
            vec![
                ("jid", &jid),
                ("return", &ret[..cut]),
                ("retcode", &[0x01]),
                ("success", &[0xc2]),
            ],
            vec![("extra", extra), ("jid", &jid), ("return", &ret[..cut])],
            vec![
                ("return", &ret[..cut]),
                ("return", &[0x01]),
                ("success", &[0xc3]),
            ],
        ];
        let layout = &layouts[case % 4];
        let frame = frame_with("web1", layout);
        let before = printed_packed(frame.clone());
        let now = printed_in_one_walk(frame.clone());
        assert_eq!(now, before, "case {case}: {frame:02x?}");
        if let Ok((text, _)) = &now {
            assert_eq!(Ok(text.clone()), printed_decoded(&frame), "case {case}");
        }
        match now {
            Ok((_, true)) => transcoded += 1,
            Ok((_, false)) => decoded += 1,
            Err(_) => refused += 1,
        }
    }
    assert!(
        transcoded > 1_000 && decoded > 100 && refused > 500,
        "{transcoded} printed from the bytes, {decoded} decoded, {refused} refused"
    );
}

/// Other replies, and returns whose frame is not the master's layout, read
/// as they always did: decoded whole.
#[test]
fn frames_that_are_not_the_masters_return_layout_decode_whole() {
    let event = halite_proto::encode(&LocalReply::Event {
        tag: "salt/job/1/prog/web1/0".into(),
        data: json!({"a": 1}),
    })
    .unwrap();
    assert!(matches!(
        Streamed::parse(event).unwrap(),
        Streamed::Reply(LocalReply::Event { .. })
    ));
    // A return event's data with "return" twice (a `Value` keeps the last).
    let twice = frame_with(
        "web1",
        &[
            ("return", &[0x01]),
            ("retcode", &[0x00]),
            ("return", &[0x02]),
        ],
    );
    match Streamed::parse(twice).unwrap() {
        Streamed::Reply(LocalReply::Return { data, .. }) => assert_eq!(data["return"], 2),
        other => panic!("{other:?}"),
    }
    // The master's own encoding of a return is taken apart.
    let whole = halite_proto::encode(&LocalReply::Return {
        id: "web1".into(),
        data: json!({"return": {"a": 1}, "retcode": 2, "success": false}),
    })
    .unwrap();
    let Streamed::Return(ret) = Streamed::parse(whole).unwrap() else {
        panic!("not taken apart");
    };
    assert_eq!(ret.id, "web1");
    assert_eq!(ret.decoded("retcode"), Some(json!(2)));
    assert_eq!(ret.decoded("success"), Some(json!(false)));
    assert_eq!(ret.decoded("jid"), None);
    assert_eq!(
        halite_proto::decode::<Value>(ret.packed().unwrap()).unwrap(),
        json!({"a": 1})
    );
    // Truncated: the decode's error, as before.
    let mut cut = frame("web1", &[0x92, 0x01, 0x02]);
    cut.truncate(cut.len() - 3);
    assert!(Streamed::parse(cut).is_err());
}

/// Through a real master: a CLI whose output nobody reads until the fleet
/// has returned gets some returns held on the bus and the rest read back
/// from the job cache (`event_return_bytes`); every one prints exactly
/// as its decoded value prints, and all are the same value.
#[test]
fn spilled_and_held_returns_print_the_same_json_as_their_decoded_values() {
    if !can_run() {
        return;
    }
    const N: usize = 12;
    // Room for two of the ~100 KB returns below.
    const BUDGET: u64 = 250_000;
    let fleet = Fleet::new();
    let _daemons = fleet.start_with_return_budget(BUDGET, N);
    let big = "ünïcödé ✓ 😀 \"q\" \\ ".repeat(3_500);
    let (out, stats) = fleet.halite_read_late(
        &[
            "*",
            "test.arg",
            &big,
            "f=0.30000000000000004",
            "n=18446744073709551615",
            "neg=-5",
            "e={}",
            "l=[]",
            "-t",
            "60",
            "--out",
            "json",
        ],
        N as u64,
    );
    let spilled = stats["bus"]["spilled"].as_u64().unwrap();
    assert!(
        spilled > 0 && spilled < N as u64,
        "some returns spilled, not all: {stats}"
    );

    let mut docs = Vec::new();
    let mut stream = serde_json::Deserializer::from_slice(&out).into_iter::<Value>();
    let mut start = 0;
    while let Some(doc) = stream.next() {
        let end = stream.byte_offset();
        let doc = doc.expect("a JSON document");
        // The document and its newline, as the decoded value prints.
        let text = &out[start..end + 1];
        let Value::Object(map) = &doc else {
            panic!("{doc}")
        };
        let printed = output::render(Outputter::Json, map, &OutputOptions::default(), 0);
        assert_eq!(String::from_utf8_lossy(text), format!("{printed}\n"));
        docs.push(map.clone());
        start = end + 1;
    }
    assert_eq!(start, out.len(), "nothing after the last document");
    assert_eq!(docs.len(), N, "one document a minion");
    let first = docs[0].values().next().unwrap().clone();
    assert_eq!(first["args"][0], big.as_str());
    for doc in &docs {
        assert_eq!(
            doc.values().next().unwrap(),
            &first,
            "every minion's return is the same value"
        );
    }
}

/// Every combination of the options the highstate outputter reads:
/// `state_output` (each mode, with and without `_id`), `state_verbose`,
/// the profile, the percentages, colours on and off.
fn highstate_options() -> Vec<OutputOptions> {
    let mut all = Vec::new();
    for mode in [
        "full",
        "terse",
        "mixed",
        "changes",
        "full_id",
        "terse_id",
        "mixed_id",
        "changes_id",
    ] {
        for verbose in [true, false] {
            for profile in [true, false] {
                for pct in [true, false] {
                    for colors in [output::Colors::none(), output::Colors::ansi()] {
                        all.push(OutputOptions {
                            colors,
                            state_output: mode.into(),
                            state_verbose: verbose,
                            state_output_profile: profile,
                            state_output_pct: pct,
                            json_indent: 4,
                        });
                    }
                }
            }
        }
    }
    all
}

/// `ret`'s highstate text from its bytes (`None`: refused, the CLI
/// prints the decoded value) and from its decoded value, for `opts`.
fn highstate_both_ways(
    host: &str,
    ret: &[u8],
    opts: &OutputOptions,
) -> (Option<String>, Option<String>) {
    let packed = highstate::format_host_packed(host, ret, opts).ok();
    let decoded = halite_proto::decode::<Value>(ret)
        .ok()
        .map(|v| highstate::format_host(host, &v, opts));
    (packed, decoded)
}

/// The shared conformance corpus (real Salt 3008.5 returns), beside the
/// repository or beside the directory of its worktrees.
fn conformance_cases() -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    [
        "../shared/conformance/cases",
        "../../shared/conformance/cases",
    ]
    .iter()
    .map(|rel| root.join(rel))
    .find(|p| p.is_dir())
    .expect("shared/conformance/cases beside the repository (CI runs with shared/ beside it)")
}

/// The highstate text printed from a return's bytes is the text its
/// decoded value prints, byte for byte, for every real Salt return of the
/// conformance corpus, in every mode of the outputter.
#[test]
fn the_highstate_text_from_the_bytes_is_the_decoded_values_for_the_salt_corpus() {
    let opts = highstate_options();
    let mut returns = 0;
    let mut states = 0;
    for case in std::fs::read_dir(conformance_cases()).unwrap() {
        let case = case.unwrap().path();
        let Ok(text) = std::fs::read_to_string(case.join("expected.json")) else {
            continue;
        };
        let expected: Value = serde_json::from_str(&text).unwrap();
        let Some(Value::Object(hosts)) = expected.get("return") else {
            continue;
        };
        for (host, ret) in hosts {
            let bytes = halite_proto::packed::pack(ret).unwrap();
            for o in &opts {
                let (packed, decoded) = highstate_both_ways(host, &bytes, o);
                let decoded = decoded.unwrap();
                match (ret, packed) {
                    (Value::Object(_), Some(packed)) => assert_eq!(
                        packed,
                        decoded,
                        "{} in mode {} verbose {}",
                        case.display(),
                        o.state_output,
                        o.state_verbose
                    ),
                    (Value::Object(_), None) => panic!("{} refused", case.display()),
                    // Errors and strings print decoded.
                    (_, packed) => assert_eq!(packed, None, "{}", case.display()),
                }
            }
            returns += 1;
            states += ret.as_object().map_or(0, Map::len);
        }
    }
    assert!(
        returns > 50 && states > 200,
        "{returns} returns, {states} states"
    );
}

/// Returns shaped as no Salt case shapes them print the same both ways,
/// and what a `Value` holds otherwise is left to the decoded path.
#[test]
fn odd_state_returns_print_the_same_highstate_text_or_are_refused() {
    let state = |i: usize| {
        json!({"result": true, "comment": format!("ok {i}"), "changes": {}, "__run_num__": i,
               "start_time": "03:45:00.000001", "duration": 0.5, "name": "n", "__id__": "i"})
    };
    let orch = json!({"out": "highstate", "ret": {"web1": {
        "test_|-a_|-a_|-succeed_with_changes": {"result": true, "comment": "c", "changes": {"x": 1},
                                               "__run_num__": 0, "duration": 1.0}}}});
    let shapes: Vec<(&str, Value)> = vec![
        (
            "every result and change kind",
            json!({
                "test_|-t_|-t_|-succeed": state(3),
                "test_|-f_|-f_|-fail": {"result": false, "comment": "boom\nline two\n", "changes": {},
                                        "__run_num__": 1, "duration": 12, "start_time": "x"},
                "test_|-n_|-n_|-none": {"result": null, "comment": ["a", 1], "changes": {"a": {"old": 1, "new": [2, {}]}},
                                        "__run_num__": 0, "duration": 1e-7},
                "test_|-s_|-s_|-str": {"result": "weird", "changes": "not a dict", "__run_num__": 2,
                                       "warnings": ["w1", "w2\nw3"]},
                "test_|-w_|-w_|-warn": {"result": true, "changes": {}, "__run_num__": 4,
                                        "warnings": "not a list", "comment": 5},
                "orch_|-o_|-o_|-state": {"result": true, "changes": orch, "__run_num__": 5, "duration": 1000.5},
                "no result": {"comment": "skipped"},
                "not a map": [1, 2],
                "a scalar": "s",
                "short_|-id": {"result": true, "__run_num__": 6},
                "é ✓_|-ü 😀_|-\"q\"_|-fun": state(7),
            }),
        ),
        ("same run numbers keep the return's order", {
            let m: Map<String, Value> = (0..40)
                .map(|i| (format!("test_|-s{i}_|-s{i}_|-succeed"), state(i % 3)))
                .collect();
            Value::Object(m)
        }),
        ("a thousand states, the sum of durations in seconds", {
            let m: Map<String, Value> = (0..1000)
                .rev()
                .map(|i| (format!("test_|-s{i}_|-s{i}_|-succeed"), state(i)))
                .collect();
            Value::Object(m)
        }),
        ("no states", json!({})),
        (
            "nothing that is a state",
            json!({"a": 1, "b": {"comment": "x"}}),
        ),
    ];
    for (name, ret) in &shapes {
        let bytes = halite_proto::packed::pack(ret).unwrap();
        for o in highstate_options() {
            let (packed, decoded) = highstate_both_ways("wéb1", &bytes, &o);
            assert_eq!(packed, decoded, "{name} in mode {}", o.state_output);
        }
    }

    // Bytes no `Value` encodes to, but a minion may send.
    let opts = OutputOptions::default();
    let key = |k: &str| mp_str(k.as_bytes());
    let one_state = |fields: &[(&str, &[u8])]| {
        let mut b = vec![0x81];
        b.extend(key("test_|-a_|-a_|-succeed"));
        b.push(0x80 | fields.len() as u8);
        for (k, v) in fields {
            b.extend(key(k));
            b.extend_from_slice(v);
        }
        b
    };
    let f32_duration = [vec![0xca], 0.1f32.to_be_bytes().to_vec()].concat();
    let nan = [vec![0xcb], f64::NAN.to_be_bytes().to_vec()].concat();
    let wide_run_num = [vec![0xd3], 9i64.to_be_bytes().to_vec()].concat();
    let printed: Vec<(&str, Vec<u8>)> = vec![
        (
            "f32 and NaN",
            one_state(&[
                ("result", &[0xc3]),
                ("duration", &f32_duration),
                ("start_time", &nan),
            ]),
        ),
        (
            "wide markers",
            one_state(&[("result", &[0xc2]), ("__run_num__", &wide_run_num)]),
        ),
        // An unprinted key twice: a `Value` keeps the last, nobody reads it.
        (
            "an unprinted key twice",
            one_state(&[("result", &[0xc3]), ("name", &[0x01]), ("name", &[0x02])]),
        ),
    ];
    for (name, bytes) in &printed {
        let (packed, decoded) = highstate_both_ways("web1", bytes, &opts);
        assert!(packed.is_some(), "{name} refused");
        assert_eq!(packed, decoded, "{name}");
    }
    // A printed key twice, a state twice, deeper than a minion's value
    // may be: printed decoded. Binary data, invalid UTF-8, truncated:
    // refused both ways (the decoded path fails as it always did).
    let deep = nested_arrays(65);
    let twice_state = [
        vec![0x82],
        key("test_|-a_|-a_|-succeed"),
        vec![0x81],
        key("result"),
        vec![0xc3],
        key("test_|-a_|-a_|-succeed"),
        vec![0x81],
        key("result"),
        vec![0xc2],
    ]
    .concat();
    let refused: Vec<(&str, Vec<u8>, bool)> = vec![
        (
            "a printed key twice",
            one_state(&[("result", &[0xc3]), ("result", &[0xc2])]),
            true,
        ),
        ("a state twice", twice_state, true),
        (
            "too deep in an unprinted key",
            one_state(&[("result", &[0xc3]), ("name", &deep)]),
            true,
        ),
        (
            "a list of errors",
            halite_proto::packed::pack(&json!(["bad"])).unwrap(),
            true,
        ),
        (
            "binary data",
            one_state(&[("result", &[0xc3]), ("name", &[0xc4, 0x01, 0x00])]),
            false,
        ),
        (
            "invalid UTF-8",
            one_state(&[("result", &[0xc3]), ("comment", &[0xa1, 0xff])]),
            false,
        ),
        (
            "truncated",
            one_state(&[("result", &[0xc3])])[..10].to_vec(),
            false,
        ),
        // (A decode stops at the value's end; a frame's parse never
        // hands such bytes over.)
        (
            "a byte after",
            [one_state(&[("result", &[0xc3])]), vec![0xc0]].concat(),
            true,
        ),
    ];
    for (name, bytes, decodes) in &refused {
        let (packed, decoded) = highstate_both_ways("web1", bytes, &opts);
        assert_eq!(packed, None, "{name} printed from its bytes");
        assert_eq!(decoded.is_some(), *decodes, "{name}: decodes");
    }
}

/// Through a real master and swarm: `halite '*' state.apply`'s default
/// outputter, now printed from each return's bytes, prints for every
/// minion exactly what the job cache's decoded return of the same job
/// prints (`halite-run jobs.lookup_jid`, which renders a `Value`).
#[test]
fn a_fleets_highstate_text_is_what_its_decoded_returns_print() {
    if !can_run() {
        return;
    }
    const N: usize = 6;
    let fleet = Fleet::new();
    let roots = fleet.path("srv");
    std::fs::create_dir_all(&roots).unwrap();
    std::fs::write(
        roots.join("mixed.sls"),
        r#"{% for i in range(30) %}
ok {{ i }} on {{ grains['id'] }}:
  test.succeed_without_changes:
    - name: ünï "{{ i }}" ✓
{% endfor %}
changed:
  test.succeed_with_changes:
    - name: a change for {{ grains['id'] }}
failing:
  test.fail_without_changes:
    - comment: "line one\nline two"
after failing:
  test.succeed_without_changes:
    - require:
      - test: failing
configured:
  test.configurable_test_state:
    - changes: True
    - result: True
    - warnings: ["careful", "twice\nover"]
"#,
    )
    .unwrap();
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base:\n    - {}\n",
        roots.display()
    ));
    let _swarm = fleet.start_swarm(N, "");
    let (out, code) = fleet.halite(&["-v", "*", "state.apply", "mixed", "-t", "60"]);
    assert_eq!(code, 1, "a state failed: {out}");
    let jid = out
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("Executing job with jid "))
        .unwrap_or_else(|| panic!("no jid in {out}"))
        .to_string();
    let looked_up = fleet.cli("halite-run", &["jobs.lookup_jid", &jid, "--out", "json"]);
    let returns: Map<String, Value> = serde_json::from_slice(&looked_up.stdout).unwrap();
    assert_eq!(returns.len(), N, "{returns:?}");
    let mut printed = 0;
    for (host, ret) in &returns {
        assert_eq!(ret.as_object().map(Map::len), Some(34), "{host}: {ret}");
        let text = format!(
            "{}\n",
            highstate::format_host(host, ret, &OutputOptions::default())
        );
        assert!(
            out.contains(&text),
            "{host}'s text is not what its decoded return prints:\n{text}\nin\n{out}"
        );
        printed += text.len();
    }
    let msg = format!("Executing job with jid {jid}");
    let header = format!("{msg}\n{}\n\n", "-".repeat(msg.len()));
    assert_eq!(
        out.len(),
        header.len() + printed,
        "nothing else printed:\n{out}"
    );
}
