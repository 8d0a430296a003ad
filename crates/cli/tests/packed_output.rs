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

use halite_cli::output::{self, json::write_packed_keyed, OutputOptions, Outputter};
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
        // As deep as a minion's value may be, and one level more.
        ("64 levels", nested_arrays(64), true),
        ("65 levels", nested_arrays(65), false),
    ];
    cases.extend(raw.into_iter().map(|(n, b, t)| (n.to_string(), b, t)));
    for id in ["web1", "wéb \"2\" 😀"] {
        for (name, ret, transcoded) in &cases {
            let frame = frame(id, ret);
            let before = printed_decoded(&frame).unwrap_or_else(|e| panic!("{name}: {e}"));
            let (now, was_transcoded) = printed_packed(frame).unwrap();
            assert_eq!(
                String::from_utf8_lossy(&now),
                String::from_utf8_lossy(&before),
                "{name} for {id}"
            );
            assert_eq!(now, before, "{name} for {id}");
            assert_eq!(was_transcoded, *transcoded, "{name}: transcoded or not");
        }
    }

    // What a decode refuses is refused by both ways, with the decode's error.
    let refused: Vec<(&str, Vec<u8>)> = vec![
        ("binary", vec![0xc4, 0x02, 0x01, 0x02]),
        ("extension data", vec![0xd4, 0x01, 0x00]),
        ("an integer key", vec![0x81, 0x01, 0x02]),
        ("invalid UTF-8", vec![0xa2, 0xff, 0xfe]),
        ("an invalid UTF-8 key", vec![0x81, 0xa2, 0xff, 0xfe, 0x01]),
        ("a reserved marker", vec![0xc1]),
    ];
    for (name, ret) in refused {
        let frame = frame("web1", &ret);
        let before = printed_decoded(&frame).expect_err(name);
        let now = printed_packed(frame).expect_err(name);
        assert_eq!(now, before, "{name}");
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
