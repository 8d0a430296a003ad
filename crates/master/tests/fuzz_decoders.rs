//! A fuzz harness over every decoder that reads network input, run by
//! `cargo test` for a bounded number of cases (`cargo fuzz` needs
//! nightly): msgpack frames of every wire type, then what the daemons do
//! with what decodes (handshake messages, sealed payloads, publications,
//! returns and events through the intake limits, file requests against a
//! real fileserver root). Inputs are random bytes and valid messages with
//! bytes flipped, inserted, deleted or repeated. A panic, an allocation
//! abort or a stack overflow fails the test; proptest shrinks the input
//! and records it in `fuzz_decoders.proptest-regressions`, and the inputs
//! it found are kept below as explicit regression cases.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use std::collections::BTreeMap;
use std::path::Path;

use halite_master::fileserver::FileServer;
use halite_master::local::{LocalBody, LocalRequest};
use halite_proto::crypto::{MinionHandshake, PendingSession, PublicationOpener, Publisher};
use halite_proto::msg::{
    Confirm, Job, JobReturn, MasterMessage, MinionRequest, Publication, ReplyBody, RequestBody,
    Sealed, ToMaster, ToMinion,
};
use halite_proto::{decode, encode, Identity};
use proptest::prelude::*;
use serde_json::{json, Value};

/// Valid messages of every type a daemon decodes from the network.
fn seeds() -> Vec<Vec<u8>> {
    let identity = Identity::generate().expect("identity");
    let (_, hello) = MinionHandshake::start(&identity, "web1").expect("hello");
    let sealed = Sealed {
        session: 7,
        counter: 1,
        ciphertext: vec![0xab; 40],
    };
    let ret = JobReturn {
        jid: "20260101000000000001".into(),
        id: "web1".into(),
        fun: "state.apply".into(),
        fun_args: vec![json!("web"), json!({"test": true})],
        ret: json!({"file_|-x_|-/tmp/x_|-managed": {"result": true, "changes": {"diff": "+a"}}}),
        retcode: 0,
        success: true,
    };
    let job = Job {
        jid: "20260101000000000001".into(),
        fun: "test.arg".into(),
        arg: vec![json!(1), json!("two")],
        kwarg: Default::default(),
        tgt: "*".into(),
        tgt_type: "glob".into(),
        user: "root".into(),
        minions: vec!["web1".into()],
        progress_unwatched: false,
    };
    let mut publisher = Publisher::generate().expect("publisher");
    let publication = publisher
        .seal(&identity, &encode(&job).expect("job"))
        .expect("seal");
    let requests = [
        RequestBody::Bundle {
            jid: "20260101000000000001".into(),
            have: None,
            packed: false,
            kept_calls: false,
            synced: None,
        },
        RequestBody::Bundle {
            jid: "20260101000000000001".into(),
            have: Some("00".repeat(32)),
            packed: true,
            kept_calls: true,
            synced: None,
        },
        RequestBody::FileStat {
            saltenv: "base".into(),
            path: "top.sls".into(),
        },
        RequestBody::FileChunk {
            saltenv: "base".into(),
            path: "files/a.txt".into(),
            offset: 0,
            sha256: "00".repeat(32),
        },
        RequestBody::FileList {
            saltenv: "base".into(),
            prefix: String::new(),
            dirs: true,
        },
        RequestBody::FileEnvs,
        RequestBody::CallBundle {
            fun: "state.apply".into(),
            arg: vec![json!("web")],
            kwarg: Default::default(),
            grains: json!({"os": "Debian"}),
            kept_calls: true,
        },
    ];
    let mut out = vec![
        encode(&ToMaster::CallerHello(hello.clone())).expect("e"),
        encode(&ToMaster::Hello(hello)).expect("e"),
        encode(&ToMaster::Confirm(Confirm {
            session: 7,
            signature: vec![1; 64],
        }))
        .expect("e"),
        encode(&ToMaster::Sealed(sealed.clone())).expect("e"),
        encode(&ToMinion::Refused {
            id: "web1".into(),
            status: None,
            reason: "no".into(),
        })
        .expect("e"),
        encode(&ToMinion::Sealed(sealed)).expect("e"),
        encode(&ToMinion::UnknownSession { session: 9 }).expect("e"),
        encode(&MinionRequest::Return(ret)).expect("e"),
        encode(&MinionRequest::Start {
            grains: json!({"os": "Debian", "ipv4": ["127.0.0.1"], "nested": {"a": {"b": [1, 2]}}}),
        })
        .expect("e"),
        encode(&MinionRequest::Event {
            tag: "salt/job/20260101000000000001/prog/web1/0".into(),
            data: json!({"ret": {"x": 1}}),
        })
        .expect("e"),
        encode(&MinionRequest::RenderReply {
            call: 3,
            result: Ok(json!([1, {"a": null}])),
        })
        .expect("e"),
        encode(&MasterMessage::Reply {
            req: 1,
            body: ReplyBody::FileChunk(vec![1, 2, 3]),
        })
        .expect("e"),
        encode(&MasterMessage::Pong).expect("e"),
        encode(&publication).expect("e"),
        encode(&job).expect("e"),
        encode(&LocalRequest {
            key: "k".into(),
            body: LocalBody::Events {
                tagmatch: "*".into(),
            },
        })
        .expect("e"),
    ];
    for body in requests {
        out.push(encode(&MinionRequest::Request { req: 1, body }).expect("e"));
    }
    out
}

/// One edit of a byte string.
#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Repeat(usize, usize, usize),
}

fn apply(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for edit in edits {
        let len = bytes.len().max(1);
        match edit {
            Edit::Flip(at, mask) => {
                if let Some(b) = bytes.get_mut(at % len) {
                    *b ^= mask;
                }
            }
            Edit::Insert(at, more) => {
                let at = (at % len).min(bytes.len());
                bytes.splice(at..at, more.iter().copied());
            }
            Edit::Delete(at, n) => {
                let at = (at % len).min(bytes.len());
                let end = (at + n).min(bytes.len());
                bytes.drain(at..end);
            }
            Edit::Repeat(at, n, times) => {
                let at = (at % len).min(bytes.len());
                let end = (at + n).min(bytes.len());
                let piece = bytes[at..end].to_vec();
                for _ in 0..*times {
                    bytes.splice(at..at, piece.iter().copied());
                }
            }
        }
    }
    bytes
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(a, m)| Edit::Flip(a, m)),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..9))
            .prop_map(|(a, v)| Edit::Insert(a, v)),
        (any::<usize>(), 1usize..16).prop_map(|(a, n)| Edit::Delete(a, n)),
        (any::<usize>(), 1usize..8, 1usize..200).prop_map(|(a, n, t)| Edit::Repeat(a, n, t)),
    ]
}

/// Random bytes, or a valid message of some type with a few edits.
fn input() -> impl Strategy<Value = Vec<u8>> {
    let count = seeds().len();
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..256),
        (0..count, proptest::collection::vec(edit(), 1..6)).prop_map(|(i, edits)| {
            let seed = seeds().swap_remove(i);
            apply(seed, &edits)
        }),
    ]
}

/// A fileserver root with a file, a directory and symlinks out of it, and
/// a secret outside it.
fn fileserver(dir: &Path) -> FileServer {
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("files")).expect("root");
    std::fs::write(root.join("top.sls"), "base:\n  '*': []\n").expect("top");
    std::fs::write(root.join("files/a.txt"), "a\n").expect("a");
    std::fs::write(dir.join("secret"), "SECRET-OUTSIDE-ROOT").expect("secret");
    let _ = std::os::unix::fs::symlink(dir.join("secret"), root.join("files/link"));
    let _ = std::os::unix::fs::symlink(dir, root.join("up"));
    let mut roots = BTreeMap::new();
    roots.insert("base".to_string(), vec![root]);
    FileServer::new(roots, 4096)
}

/// Feeds `bytes` to every decoder and, for what decodes, to what the
/// daemons do next. Returns nothing: a panic is the failure.
fn exercise(bytes: &[u8], files: &FileServer) {
    let master = Identity::generate().expect("identity");
    if let Ok(msg) = decode::<ToMaster>(bytes) {
        match msg {
            ToMaster::Hello(hello) | ToMaster::CallerHello(hello) => {
                let _ = halite_proto::validate_minion_id(&hello.id);
                let _ = PendingSession::respond(&master, &hello, 1);
            }
            ToMaster::Confirm(confirm) => {
                let minion = Identity::generate().expect("identity");
                let (_, hello) = MinionHandshake::start(&minion, "m").expect("hello");
                if let Ok((pending, _)) = PendingSession::respond(&master, &hello, 1) {
                    let _ = pending.confirm(&confirm);
                }
            }
            ToMaster::Sealed(sealed) => {
                let minion = Identity::generate().expect("identity");
                let (state, hello) = MinionHandshake::start(&minion, "m").expect("hello");
                if let Ok((pending, welcome)) = PendingSession::respond(&master, &hello, 1) {
                    if let Ok((_, confirm)) = state.finish(&minion, &welcome) {
                        if let Ok(mut cipher) = pending.confirm(&confirm) {
                            let _ = cipher.open(&Sealed {
                                session: 1,
                                ..sealed
                            });
                        }
                    }
                }
            }
        }
    }
    if let Ok(ToMinion::Welcome(welcome)) = decode::<ToMinion>(bytes) {
        let minion = Identity::generate().expect("identity");
        let (state, _) = MinionHandshake::start(&minion, "m").expect("hello");
        let _ = MinionHandshake::master_key(&welcome);
        let _ = state.verify(&welcome);
        let _ = state.finish(&minion, &welcome);
    }
    let _ = decode::<MasterMessage>(bytes);
    let _ = decode::<Job>(bytes);
    let _ = decode::<LocalRequest>(bytes);
    if let Ok(value) = decode::<Value>(bytes) {
        // What was decoded can be measured, stored as JSON and read back.
        let _ = halite_proto::value_depth(&value);
    }
    if let Ok(publication) = decode::<Publication>(bytes) {
        let mut publisher = Publisher::generate().expect("publisher");
        if let Ok(mut opener) = PublicationOpener::new(master.public(), publisher.key()) {
            let _ = opener.open(&publication);
        }
        let _ = halite_proto::crypto::verify_publication(&master.public(), &publication);
        let _ = publisher.seal(&master, b"x");
    }
    if let Ok(request) = decode::<MinionRequest>(bytes) {
        if let Some(request) = halite_master::intake::bound_request("m", request) {
            if let MinionRequest::Return(ret) = &request {
                // An accepted return can be stored and read back.
                let text = serde_json::to_string(&ret.ret).expect("to json");
                serde_json::from_str::<Value>(&text).expect("reads back");
            }
            if let MinionRequest::Request { body, .. } = &request {
                let answer = files.answer(body);
                let shown = format!("{answer:?}");
                assert!(
                    !shown.contains("SECRET-OUTSIDE-ROOT")
                        && !matches!(&answer, ReplyBody::FileChunk(c) if c.windows(6).any(|w| w == b"SECRET")),
                    "the fileserver served a file outside its root for {body:?}"
                );
            }
        }
    }
}

/// Inputs that once failed, or that stand for a class that did.
const REGRESSIONS: &[&[u8]] = &[
    // A msgpack array claiming 4 billion elements.
    b"\xdd\xff\xff\xff\xff",
    // A map claiming 4 billion entries inside an enum.
    b"\x81\xa5Hello\xdf\xff\xff\xff\xff",
    // A str8/bin32 header claiming more bytes than follow.
    b"\xc6\xff\xff\xff\xff\x00",
    b"",
];

#[test]
fn regression_inputs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = fileserver(dir.path());
    for input in REGRESSIONS {
        exercise(input, &files);
    }
    // Nesting far past the decoder's limit, in every envelope.
    for prefix in [&b""[..], b"\x81\xa6Return", b"\x81\xa5Start\x81\xa6grains"] {
        let mut deep = prefix.to_vec();
        deep.extend(std::iter::repeat_n(0x91u8, 200_000));
        deep.push(0xc0);
        exercise(&deep, &files);
    }
    // Path escapes, as requests that decode.
    for path in [
        "../secret",
        "/etc/passwd",
        "files/link",
        "up/secret",
        "files/../../secret",
    ] {
        for body in [
            RequestBody::FileStat {
                saltenv: "base".into(),
                path: path.into(),
            },
            RequestBody::FileChunk {
                saltenv: "base".into(),
                path: path.into(),
                offset: 0,
                sha256: String::new(),
            },
            RequestBody::FileList {
                saltenv: "base".into(),
                prefix: path.into(),
                dirs: false,
            },
        ] {
            let bytes = encode(&MinionRequest::Request { req: 1, body }).expect("encode");
            exercise(&bytes, &files);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 400,
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_network_input_panics_a_decoder(bytes in input()) {
        thread_local! {
            static DIR: tempfile::TempDir = tempfile::tempdir().expect("tempdir");
        }
        DIR.with(|dir| {
            let files = fileserver(dir.path());
            exercise(&bytes, &files);
        });
    }
}
