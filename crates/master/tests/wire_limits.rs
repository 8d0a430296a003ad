//! Issue 17, the transport: what an unauthenticated peer can send to a
//! daemon's ZeroMQ ports without crashing it or growing its memory without
//! bound. Raw ZMTP over TCP, as an attacker would write it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use common::*;
use halite_master::jobcache::JobCache;
use halite_proto::crypto::{MinionHandshake, SessionCipher};
use halite_proto::msg::{
    JobReturn, MasterMessage, MinionRequest, PackedReturn, ToMaster, ToMinion,
};
use halite_proto::testing::nested;
use halite_proto::{encode, Identity};
use zeromq::{DealerSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

/// A ZMTP 3.0 greeting with the NULL mechanism.
fn greeting(as_server: bool) -> Vec<u8> {
    let mut g = vec![0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3, 0];
    let mut mechanism = b"NULL".to_vec();
    mechanism.resize(20, 0);
    g.extend(mechanism);
    g.push(u8::from(as_server));
    g.resize(64, 0);
    g
}

/// The READY command of a socket of type `kind`.
fn ready(kind: &str) -> Vec<u8> {
    let mut body = vec![5];
    body.extend(b"READY");
    body.push(11);
    body.extend(b"Socket-Type");
    body.extend((kind.len() as u32).to_be_bytes());
    body.extend(kind.as_bytes());
    let mut frame = vec![0x04, body.len() as u8];
    frame.extend(body);
    frame
}

/// A long frame header claiming `len` bytes (a command when `command`).
fn long_header(len: u64, command: bool) -> Vec<u8> {
    let mut h = vec![if command { 0x06 } else { 0x02 }];
    h.extend(len.to_be_bytes());
    h
}

/// One short message frame.
fn frame(payload: &[u8], more: bool) -> Vec<u8> {
    let mut f = Vec::new();
    if payload.len() > 255 {
        f.push(0x02 | u8::from(more));
        f.extend((payload.len() as u64).to_be_bytes());
    } else {
        f.push(u8::from(more));
        f.push(payload.len() as u8);
    }
    f.extend(payload);
    f
}

/// `VmRSS` and `VmPeak` of `pid` in kB.
fn memory_kb(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmPeak:"))
}

/// Sends `bytes` on a fresh connection to `port` and keeps it open a moment.
fn probe(port: u16, bytes: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let _ = s.write_all(bytes);
    s
}

const CLAIMS: [u64; 2] = [1 << 62, 1 << 40];

#[test]
fn huge_frame_headers_do_not_crash_the_master() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let mut master = fleet.start_master("auto_accept: True");
    let mut held = Vec::new();
    for (port, kind) in [(fleet.ret_port, "DEALER"), (fleet.publish_port, "SUB")] {
        for claim in CLAIMS {
            // As the first frame after the greeting (a command)...
            let mut bytes = greeting(false);
            bytes.extend(long_header(claim, true));
            held.push(probe(port, &bytes));
            // ...and as a message after a complete handshake.
            let mut bytes = greeting(false);
            bytes.extend(ready(kind));
            bytes.extend(long_header(claim, false));
            held.push(probe(port, &bytes));
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        master.alive(),
        "the master died: {}",
        master
            .log_text()
            .lines()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let (_, peak) = memory_kb(master.child.id());
    assert!(
        peak < 4 * 1024 * 1024,
        "the master reserved {peak} kB of virtual memory for a claimed length"
    );
    // And it still serves: a minion authenticates and answers.
    let _minion = fleet.start_minion("after-probe", "");
    fleet.wait_responding("after-probe");
    drop(held);
}

/// Accepts one connection on `listener` within a few seconds.
fn accept(listener: &TcpListener) -> Option<TcpStream> {
    listener.set_nonblocking(true).ok()?;
    for _ in 0..200 {
        if let Ok((s, _)) = listener.accept() {
            s.set_nonblocking(false).ok()?;
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[test]
fn huge_frame_headers_from_a_fake_master_do_not_crash_a_minion() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let ret = TcpListener::bind(("127.0.0.1", fleet.ret_port)).expect("bind ret");
    let publish = TcpListener::bind(("127.0.0.1", fleet.publish_port)).expect("bind pub");
    let mut minion = fleet.start_minion("target", "");
    for (ret_claim, pub_claim) in [(CLAIMS[0], CLAIMS[1]), (CLAIMS[1], CLAIMS[0])] {
        // The minion's DEALER gets a handshake and its SUB a huge frame;
        // then the DEALER gets one too. Before any key is checked.
        let mut r = accept(&ret).expect("the minion never connected its DEALER");
        let mut bytes = greeting(true);
        bytes.extend(ready("ROUTER"));
        r.write_all(&bytes).expect("write");
        let mut p = accept(&publish).expect("the minion never connected its SUB");
        let mut bytes = greeting(true);
        bytes.extend(ready("PUB"));
        bytes.extend(long_header(pub_claim, false));
        p.write_all(&bytes).expect("write");
        std::thread::sleep(Duration::from_millis(300));
        let _ = r.write_all(&long_header(ret_claim, false));
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            minion.alive(),
            "the minion died: {}",
            minion
                .log_text()
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .join("\n")
        );
        let (_, peak) = memory_kb(minion.child.id());
        assert!(peak < 4 * 1024 * 1024, "the minion reserved {peak} kB");
    }
    // Still trying to reach its master: it connects again.
    let mut again = accept(&ret).expect("the minion did not reconnect");
    let mut hello = [0u8; 10];
    again.read_exact(&mut hello).expect("a greeting");
    assert_eq!(hello[0], 0xff);
    assert!(minion.alive());
}

#[test]
fn peers_that_do_not_read_their_replies_cost_bounded_memory() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let mut master = fleet.start_master("");
    let _minion = fleet.start_minion("real", "");
    fleet.accept("real");
    let (rss_before, _) = memory_kb(master.child.id());
    // 100 peers, each sending Hellos whose invalid 256 KiB id a Refused
    // reply would echo, and never reading a byte.
    let rogue = Identity::generate().expect("identity");
    let bad_id = format!("x/{}", "y".repeat(256 * 1024));
    let (_, hello) = MinionHandshake::start(&rogue, &bad_id).expect("hello");
    let hello = encode(&ToMaster::Hello(hello)).expect("encode");
    let mut message = Vec::new();
    for _ in 0..20 {
        message.extend(frame(&hello, false));
    }
    let mut handshake = greeting(false);
    handshake.extend(ready("DEALER"));
    let mut peers = Vec::new();
    for _ in 0..100 {
        let mut s = TcpStream::connect(("127.0.0.1", fleet.ret_port)).expect("connect");
        s.write_all(&handshake).expect("handshake");
        peers.push(s);
    }
    let writers: Vec<_> = peers
        .iter()
        .map(|s| {
            let mut s = s.try_clone().expect("clone");
            let message = message.clone();
            std::thread::spawn(move || {
                let _ = s.set_write_timeout(Some(Duration::from_secs(20)));
                let _ = s.write_all(&message);
            })
        })
        .collect();
    for w in writers {
        let _ = w.join();
    }
    std::thread::sleep(Duration::from_secs(2));
    let (rss_after, _) = memory_kb(master.child.id());
    eprintln!("master RSS: {rss_before} kB before, {rss_after} kB with 100 non-reading peers");
    assert!(master.alive());
    assert!(
        rss_after < rss_before + 150 * 1024,
        "the master grew from {rss_before} kB to {rss_after} kB"
    );
    // The real minion is still served while they hang on.
    fleet.wait_responding("real");
    drop(peers);
}

fn job_return(jid: &str, id: &str, ret: serde_json::Value) -> JobReturn {
    JobReturn {
        jid: jid.into(),
        id: id.into(),
        fun: "test.arg".into(),
        fun_args: vec![],
        ret,
        retcode: 0,
        success: true,
    }
}

/// An authenticated session on the master's ROUTER, driven by hand.
async fn authenticate(port: u16, identity: &Identity, id: &str) -> (DealerSocket, SessionCipher) {
    let mut socket = DealerSocket::new();
    socket
        .connect(&format!("tcp://127.0.0.1:{port}"))
        .await
        .expect("connect");
    for _ in 0..50 {
        let (state, hello) = MinionHandshake::start(identity, id).expect("hello");
        let bytes = encode(&ToMaster::Hello(hello)).expect("encode");
        socket.send(ZmqMessage::from(bytes)).await.expect("send");
        if let Some(ToMinion::Welcome(w)) = recv(&mut socket).await {
            let (cipher, confirm) = state.finish(identity, &w).expect("finish");
            let bytes = encode(&ToMaster::Confirm(confirm)).expect("encode");
            socket.send(ZmqMessage::from(bytes)).await.expect("send");
            if let Some(ToMinion::Sealed(_)) = recv(&mut socket).await {
                return (socket, cipher);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("could not authenticate {id}");
}

async fn recv(socket: &mut DealerSocket) -> Option<ToMinion> {
    let msg = tokio::time::timeout(Duration::from_secs(5), socket.recv())
        .await
        .ok()?
        .ok()?;
    halite_proto::decode(msg.get(0)?).ok()
}

/// Sends `request` sealed, with the nesting `plain` already encoded.
async fn send_sealed(socket: &mut DealerSocket, cipher: &mut SessionCipher, plain: &[u8]) {
    let sealed = cipher.seal(plain).expect("seal");
    let bytes = encode(&ToMaster::Sealed(sealed)).expect("encode");
    socket.send(ZmqMessage::from(bytes)).await.expect("send");
}

/// Sends each of `sent` sealed, then reads the master's acknowledgements
/// until there is one per message (or nothing came for 5 s): the jids
/// acknowledged.
async fn send_collecting_acks(
    socket: &mut DealerSocket,
    cipher: &mut SessionCipher,
    sent: &[Vec<u8>],
) -> Vec<String> {
    for plain in sent {
        send_sealed(socket, cipher, plain).await;
    }
    let mut acked = Vec::new();
    while acked.len() < sent.len() {
        let Some(ToMinion::Sealed(sealed)) = recv(socket).await else {
            break;
        };
        let plain = cipher.open(&sealed).expect("open");
        if let Ok(MasterMessage::Ack { jid }) = halite_proto::decode(&plain) {
            acked.push(jid);
        }
    }
    acked
}

/// msgpack of `{"Return": {...}}` whose `ret` is nested `levels` deep,
/// written by hand: rmp-serde would refuse to build one past its limit.
fn deep_return_msgpack(jid: &str, id: &str, levels: usize) -> Vec<u8> {
    let mut shallow = encode(&MinionRequest::Return(job_return(
        jid,
        id,
        serde_json::json!("X"),
    )))
    .expect("encode");
    // Replace the msgpack string "X" (0xa1 0x58) by the deep array.
    let at = shallow
        .windows(2)
        .position(|w| w == [0xa1, b'X'])
        .expect("the placeholder");
    let mut deep = vec![0x91u8; levels - 1];
    deep.push(0x01);
    shallow.splice(at..at + 2, deep);
    shallow
}

#[test]
fn deep_values_neither_stop_a_restart_nor_break_lookups() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    // Recent jids: the restart's keep_jobs cleanup must not remove them.
    let jids = halite_proto::JidGenerator::new();
    let jid: Vec<String> = (0..5).map(|_| jids.next_jid()).collect();
    let mut master = fleet.start_master("auto_accept: True");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let me = Identity::generate().expect("identity");
        let (mut socket, mut cipher) = authenticate(fleet.ret_port, &me, "deep").await;
        // Grains 100 deep: refused where they arrive.
        let start = MinionRequest::Start {
            grains: nested(100),
        };
        send_sealed(&mut socket, &mut cipher, &encode(&start).expect("encode")).await;
        // A return 100 deep: kept as an error return (and acknowledged).
        let plain = deep_return_msgpack(&jid[1], "deep", 100);
        send_sealed(&mut socket, &mut cipher, &plain).await;
        // A return 300 deep: past the decoder's limit, dropped.
        let plain = deep_return_msgpack(&jid[2], "deep", 300);
        send_sealed(&mut socket, &mut cipher, &plain).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    });
    master.kill();
    // What a master before the limits could have stored: values past
    // serde_json's recursion limit, next to another minion's good ones.
    {
        let mut cache =
            JobCache::open(&fleet.path("master-cache/jobs.sqlite")).expect("open the cache");
        cache.store_grains("deep", &nested(300)).expect("grains");
        cache
            .store_returns(&[
                job_return(&jid[3], "deep", nested(300)),
                job_return(&jid[3], "fine", serde_json::json!("ok3")),
                job_return(&jid[4], "fine", serde_json::json!("ok4")),
            ])
            .expect("returns");
    }
    let _ = std::fs::remove_file(fleet.path("master-sock/master.sock"));
    let mut master = fleet.start_master("auto_accept: True");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        master.alive(),
        "the master did not restart: {}",
        master.log_text()
    );
    let lookup = |jid: &str| {
        let out = fleet.cli("halite-run", &["jobs.lookup_jid", jid, "--out", "json"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let good = lookup(&jid[4]);
    assert!(good.contains("ok4"), "{good}");
    let mixed = lookup(&jid[3]);
    assert!(mixed.contains("ok3"), "{mixed}");
    let refused = lookup(&jid[1]);
    assert!(refused.contains("nested more than 64"), "{refused}");
    assert!(!lookup(&jid[2]).contains("deep"));
    assert!(master.log_text().contains("cannot be read; skipped"));
    // And it still serves.
    let _minion = fleet.start_minion("after-restart", "");
    fleet.wait_responding("after-restart");
}

#[test]
fn bad_packed_returns_are_stored_as_errors_with_a_log_line_and_the_master_serves_on() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let jids = halite_proto::JidGenerator::new();
    let jid: Vec<String> = (0..4).map(|_| jids.next_jid()).collect();
    let master = fleet.start_master("auto_accept: True");
    let packed = |jid: &str, bytes: Vec<u8>| {
        let mut ret =
            PackedReturn::pack(job_return(jid, "badpack", serde_json::json!("x"))).expect("pack");
        ret.ret = serde_bytes::ByteBuf::from(bytes);
        encode(&MinionRequest::PackedReturn(ret)).expect("encode")
    };
    let value = serde_json::json!({"duration": 0.1 + 0.2, "comment": "Succès ✓"});
    let sent = [
        // Truncated, binary data, 65 levels deep; then a good one.
        packed(&jid[0], vec![0x92, 0x01]),
        packed(&jid[1], vec![0xc4, 0x01, 0x00]),
        packed(
            &jid[2],
            halite_proto::packed::pack(&nested(65)).expect("pack"),
        ),
        packed(&jid[3], halite_proto::packed::pack(&value).expect("pack")),
    ];
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let acked = runtime.block_on(async {
        let me = Identity::generate().expect("identity");
        let (mut socket, mut cipher) = authenticate(fleet.ret_port, &me, "badpack").await;
        // Every one acknowledged: the minion would not resend them forever.
        send_collecting_acks(&mut socket, &mut cipher, &sent).await
    });
    assert_eq!(acked.len(), sent.len(), "acknowledged: {acked:?}");
    let lookup = |jid: &str| -> serde_json::Value {
        let out = fleet.cli("halite-run", &["jobs.lookup_jid", jid, "--out", "json"]);
        serde_json::from_slice(&out.stdout).expect("json")
    };
    for bad in &jid[..3] {
        let stored = lookup(bad)["badpack"].clone();
        let text = stored.as_str().unwrap_or_default();
        assert!(text.contains("refused by the master"), "{bad}: {stored}");
    }
    assert!(lookup(&jid[2])["badpack"]
        .as_str()
        .is_some_and(|t| t.contains("nested more than 64")));
    assert_eq!(lookup(&jid[3])["badpack"], value);
    assert!(
        master.log_text().contains("packed return refused"),
        "{}",
        master.log_text()
    );
    // And it still serves.
    let _minion = fleet.start_minion("after-bad", "");
    fleet.wait_responding("after-bad");
}

/// Issue 25, session 24: a return whose value comes as the minion's zstd
/// frame is stored as that frame and reads back (`jobs.lookup_jid`, JSON
/// and the default output) as the same return sent plain; a frame that
/// expands past the master's limit, that is not zstd, that holds bytes the
/// check refuses, or that is followed by a second frame, is stored as an
/// error return, the job's other returns unharmed, the master serving on.
#[test]
fn a_framed_return_is_stored_as_its_frame_and_bad_frames_are_refused_the_job_unharmed() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let jids = halite_proto::JidGenerator::new();
    let jid: Vec<String> = (0..6).map(|_| jids.next_jid()).collect();
    let master = fleet.start_master("auto_accept: True");
    let value = serde_json::json!({"test_|-a_|-a_|-succeed_with_changes": {
        "comment": "Succès ✓ 😀 ".repeat(400), "duration": 0.1 + 0.2, "big": u64::MAX,
        "changes": {"testing": {"old": "Unchanged", "new": "Something pretended to change"}},
        "result": true, "__run_num__": 0}});
    let packed = |jid: &str, id: &str, value: &serde_json::Value| {
        PackedReturn::pack(job_return(jid, id, value.clone())).expect("pack")
    };
    let framed = |jid: &str, id: &str, bytes: Vec<u8>| {
        let mut ret = packed(jid, id, &serde_json::json!(null));
        ret.ret = serde_bytes::ByteBuf::from(bytes);
        ret.zstd = true;
        encode(&MinionRequest::PackedReturn(ret)).expect("encode")
    };
    let frame = |bytes: &[u8]| halite_proto::packed::frame(bytes).expect("frame");
    // Framed at level 19, not the job cache's own level 1: a frame the
    // master compressed again would not be this one.
    let mut good = packed(&jid[0], "zgood", &value);
    good.ret = serde_bytes::ByteBuf::from(zstd::bulk::compress(&good.ret, 19).expect("zstd"));
    good.zstd = true;
    let sent_frame = good.ret.to_vec();
    assert_ne!(
        sent_frame,
        frame(&halite_proto::packed::pack(&value).expect("pack"))
    );
    let bomb = frame(&vec![0xc0; halite_proto::packed::MAX_RETURN_BYTES + 1]);
    assert!(bomb.len() < 4096, "{}", bomb.len());
    let two = [frame(&[0xc0]), frame(&[0xc0])].concat();
    let bad = [
        // Past the limit, in the good return's job.
        framed(&jid[0], "zbad", bomb),
        framed(&jid[1], "zbad", vec![0x92, 0x01]),
        framed(&jid[2], "zbad", frame(&[0xc4, 0x01, 0x00])),
        framed(&jid[3], "zbad", two),
    ];
    let good_sent = [
        encode(&MinionRequest::PackedReturn(good)).expect("encode"),
        // The same value plain, in another job.
        encode(&MinionRequest::PackedReturn(packed(
            &jid[4], "zgood", &value,
        )))
        .expect("encode"),
    ];
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let acked = runtime.block_on(async {
        let mut acked = Vec::new();
        for (id, sent) in [("zbad", &bad[..]), ("zgood", &good_sent[..])] {
            let me = Identity::generate().expect("identity");
            let (mut socket, mut cipher) = authenticate(fleet.ret_port, &me, id).await;
            let mine = send_collecting_acks(&mut socket, &mut cipher, sent).await;
            acked.extend(mine.into_iter().map(|jid| (id, jid)));
        }
        acked
    });
    assert_eq!(
        acked.len(),
        bad.len() + good_sent.len(),
        "acknowledged: {acked:?}"
    );
    let lookup = |jid: &str, out: &str| {
        let out = fleet.cli("halite-run", &["jobs.lookup_jid", jid, "--out", out]);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).expect("utf-8")
    };
    let json = |jid: &str| -> serde_json::Value {
        serde_json::from_str(&lookup(jid, "json")).expect("json")
    };
    // The frame and the plain bytes read back as the same return.
    let (framed_job, plain_job) = (json(&jid[0]), json(&jid[4]));
    assert_eq!(framed_job["zgood"], value);
    assert_eq!(plain_job["zgood"], value);
    let printed = lookup(&jid[4], "nested");
    assert!(
        printed.contains("Something pretended to change"),
        "{printed}"
    );
    assert!(lookup(&jid[0], "nested").contains(&printed), "{printed}");
    // Stored as the minion's own frame; the plain one compressed here.
    let conn = rusqlite::Connection::open(fleet.path("master-cache/jobs.sqlite")).expect("open");
    let column = |jid: &str| -> Vec<u8> {
        conn.query_row(
            "SELECT ret FROM returns WHERE jid = ?1 AND id = 'zgood'",
            [jid],
            |r| r.get(0),
        )
        .expect("row")
    };
    assert_eq!(column(&jid[0]), sent_frame);
    assert_eq!(
        zstd::decode_all(&column(&jid[4])[..]).expect("zstd"),
        zstd::decode_all(&sent_frame[..]).expect("zstd")
    );
    // Each bad frame is an error return that says why.
    for (jid, why) in [
        (&jid[0], "past the 16777216-byte limit"),
        (&jid[1], "zstd frame"),
        (&jid[2], "binary"),
        (&jid[3], "bytes after the frame"),
    ] {
        let stored = json(jid)["zbad"].clone();
        let text = stored.as_str().unwrap_or_default();
        assert!(
            text.contains("refused by the master") && text.contains(why),
            "{jid}: {stored}"
        );
    }
    let stats = fleet.master_stats()["returns"].clone();
    assert_eq!(stats["zstd"], 5, "{stats}");
    assert!(master.log_text().contains("packed return refused"));
    // And it still serves.
    let _minion = fleet.start_minion("after-frames", "");
    fleet.wait_responding("after-frames");
}

#[test]
fn a_subscription_flood_on_the_publish_port_costs_bounded_memory() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let mut master = fleet.start_master("");
    let (rss_before, _) = memory_kb(master.child.id());
    // 2000 subscriptions of 64 KiB each (125 MiB), kept by the PUB forever
    // before the subscription limits.
    let mut s = TcpStream::connect(("127.0.0.1", fleet.publish_port)).expect("connect");
    let mut bytes = greeting(false);
    bytes.extend(ready("SUB"));
    s.write_all(&bytes).expect("handshake");
    let mut subscription = vec![1u8];
    subscription.extend(std::iter::repeat_n(b's', 64 * 1024));
    let one = frame(&subscription, false);
    for _ in 0..2000 {
        if s.write_all(&one).is_err() {
            break;
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    let (rss_after, _) = memory_kb(master.child.id());
    eprintln!("master RSS: {rss_before} kB before, {rss_after} kB after 2000 subscriptions");
    assert!(master.alive());
    assert!(
        rss_after < rss_before + 50 * 1024,
        "the master grew from {rss_before} kB to {rss_after} kB"
    );
    drop(s);
}
