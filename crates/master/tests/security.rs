//! The wire refuses what it must (the class of Salt's
//! CVE-2020-11651/11652): unauthenticated requests, path-like ids,
//! replayed and tampered messages, jobs forged by a peer that holds the
//! publish key, garbage and oversized frames. Both daemons stay up.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::time::Duration;

use common::*;
use halite_proto::crypto::{MinionHandshake, Publisher, SessionCipher};
use halite_proto::msg::{
    Job, JobReturn, KeyStatus, MasterMessage, MinionRequest, PublishKey, Sealed, ToMaster, ToMinion,
};
use halite_proto::{decode, encode, Identity};
use serde_json::json;
use zeromq::{DealerSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

/// A hand-driven peer on the master's ROUTER port.
struct Peer {
    socket: DealerSocket,
}

impl Peer {
    async fn connect(port: u16) -> Self {
        let mut socket = DealerSocket::new();
        socket
            .connect(&format!("tcp://127.0.0.1:{port}"))
            .await
            .expect("connect");
        Self { socket }
    }
    async fn send_raw(&mut self, frames: Vec<Vec<u8>>) {
        let mut msg = ZmqMessage::from(frames[0].clone());
        for f in &frames[1..] {
            msg.push_back(f.clone().into());
        }
        self.socket.send(msg).await.expect("send");
    }
    async fn send(&mut self, msg: &ToMaster) {
        self.send_raw(vec![encode(msg).expect("encode")]).await;
    }
    /// The next reply, or `None` after `wait`.
    async fn recv(&mut self, wait: Duration) -> Option<ToMinion> {
        let msg = tokio::time::timeout(wait, self.socket.recv())
            .await
            .ok()?
            .ok()?;
        decode(msg.get(0)?).ok()
    }
    /// Authenticates `id` with `identity`; the session and the publish key.
    async fn authenticate(&mut self, identity: &Identity, id: &str) -> (SessionCipher, PublishKey) {
        for _ in 0..50 {
            let (state, hello) = MinionHandshake::start(identity, id).expect("hello");
            self.send(&ToMaster::Hello(hello)).await;
            match self.recv(Duration::from_secs(5)).await {
                Some(ToMinion::Welcome(w)) => {
                    let (mut cipher, confirm) = state.finish(identity, &w).expect("finish");
                    self.send(&ToMaster::Confirm(confirm)).await;
                    if let Some(ToMinion::Sealed(s)) = self.recv(Duration::from_secs(5)).await {
                        if let Ok(MasterMessage::Ready { publish_key, .. }) =
                            decode(&cipher.open(&s).expect("open"))
                        {
                            return (cipher, publish_key);
                        }
                    }
                }
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        panic!("could not authenticate {id}");
    }
}

fn sealed(cipher: &mut SessionCipher, req: &MinionRequest) -> Sealed {
    cipher.seal(&encode(req).expect("encode")).expect("seal")
}

fn ret(jid: &str, id: &str) -> MinionRequest {
    MinionRequest::Return(JobReturn {
        jid: jid.into(),
        id: id.into(),
        fun: "test.ping".into(),
        fun_args: vec![],
        ret: json!(true),
        retcode: 0,
        success: true,
    })
}

/// The first sealed master message `pick` accepts within `wait` each.
async fn next_message<T>(
    peer: &mut Peer,
    cipher: &mut SessionCipher,
    wait: Duration,
    pick: impl Fn(MasterMessage) -> Option<T>,
) -> Option<T> {
    while let Some(msg) = peer.recv(wait).await {
        if let ToMinion::Sealed(s) = msg {
            if let Some(found) = decode(&cipher.open(&s).ok()?).ok().and_then(&pick) {
                return Some(found);
            }
        }
    }
    None
}

async fn next_ack(peer: &mut Peer, cipher: &mut SessionCipher, wait: Duration) -> Option<String> {
    next_message(peer, cipher, wait, |m| match m {
        MasterMessage::Ack { jid } => Some(jid),
        _ => None,
    })
    .await
}

#[test]
fn the_wire_refuses_what_it_must() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let mut master = fleet.start_master("auto_accept: True");
    let mut victim = fleet.start_minion("victim", "");
    fleet.wait_responding("victim");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut peer = Peer::connect(fleet.ret_port).await;

        // Garbage, empty, multi-frame and oversized frames are dropped silently.
        peer.send_raw(vec![b"\xc1\xc1garbage".to_vec()]).await;
        peer.send_raw(vec![vec![]]).await;
        peer.send_raw(vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()])
            .await;
        assert!(peer.recv(Duration::from_millis(500)).await.is_none());
        // An oversized frame disconnects its sender (ZMQ_MAXMSGSIZE): it gets
        // nothing, and everyone else is served.
        let mut big = Peer::connect(fleet.ret_port).await;
        big.send_raw(vec![vec![0x92; 17 * 1024 * 1024]]).await;
        assert!(big.recv(Duration::from_millis(500)).await.is_none());

        // Unauthenticated sealed requests and confirms: refused, no effect.
        let forged = Sealed {
            session: 42,
            counter: 1,
            ciphertext: vec![1, 2, 3],
        };
        peer.send(&ToMaster::Sealed(forged)).await;
        assert_eq!(
            peer.recv(Duration::from_secs(5)).await,
            Some(ToMinion::UnknownSession { session: 42 })
        );
        peer.send(&ToMaster::Confirm(halite_proto::msg::Confirm {
            session: 7,
            signature: vec![0; 64],
        }))
        .await;
        assert_eq!(
            peer.recv(Duration::from_secs(5)).await,
            Some(ToMinion::UnknownSession { session: 7 })
        );

        // Path-like ids are refused before any file is written.
        let rogue = Identity::generate().expect("identity");
        for bad in ["../../etc/evil", "a/b", "..", "nul\0id"] {
            let (_, hello) = MinionHandshake::start(&rogue, bad).expect("hello");
            peer.send(&ToMaster::Hello(hello)).await;
            match peer.recv(Duration::from_secs(5)).await {
                Some(ToMinion::Refused { status: None, .. }) => {}
                other => panic!("id {bad:?} was not refused: {other:?}"),
            }
        }
        assert!(!fleet.path("etc").exists() && !fleet.path("master-pki/etc").exists());
        assert!(!fleet.path("master-pki/evil").exists());

        // An authenticated peer: replayed and tampered messages are refused.
        let me = Identity::generate().expect("identity");
        let (mut cipher, publish_key) = peer.authenticate(&me, "intruder").await;
        let first = sealed(&mut cipher, &ret("20260101000000000001", "intruder"));
        peer.send(&ToMaster::Sealed(first.clone())).await;
        assert_eq!(
            next_ack(&mut peer, &mut cipher, Duration::from_secs(5))
                .await
                .as_deref(),
            Some("20260101000000000001")
        );
        peer.send(&ToMaster::Sealed(first)).await;
        assert_eq!(
            next_ack(&mut peer, &mut cipher, Duration::from_millis(800)).await,
            None,
            "a replay was accepted"
        );
        let second = sealed(&mut cipher, &ret("20260101000000000002", "intruder"));
        let mut tampered = second.clone();
        if let Some(b) = tampered.ciphertext.get_mut(3) {
            *b ^= 0x40;
        }
        peer.send(&ToMaster::Sealed(tampered)).await;
        assert_eq!(
            next_ack(&mut peer, &mut cipher, Duration::from_millis(800)).await,
            None,
            "a tampered message was accepted"
        );
        peer.send(&ToMaster::Sealed(second)).await;
        assert_eq!(
            next_ack(&mut peer, &mut cipher, Duration::from_secs(5))
                .await
                .as_deref(),
            Some("20260101000000000002")
        );

        // A return in another minion's name is dropped.
        let spoof = sealed(&mut cipher, &ret("20260101000000000003", "victim"));
        peer.send(&ToMaster::Sealed(spoof)).await;
        assert_eq!(
            next_ack(&mut peer, &mut cipher, Duration::from_millis(800)).await,
            None
        );

        // Holding the publish key does not let a peer make the victim run a job:
        // a publication it encrypts but signs with its own key is refused, and
        // the ROUTER has no way to carry one at all.
        let mut forger = Publisher::generate().expect("publisher");
        let job = Job {
            jid: "20260101000000000009".into(),
            fun: "test.arg".into(),
            arg: vec![json!("forged")],
            kwarg: Default::default(),
            tgt: "victim".into(),
            tgt_type: "glob".into(),
            user: "root".into(),
            minions: vec!["victim".into()],
            progress_unwatched: false,
        };
        let _ = &publish_key;
        let publication = forger
            .seal(&me, &encode(&job).expect("encode"))
            .expect("seal");
        peer.send_raw(vec![encode(&publication).expect("encode")])
            .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    });
    assert!(
        !victim.log_text().contains("fun=test.arg"),
        "the victim ran a forged job"
    );
    let out = fleet.cli(
        "halite-run",
        &["jobs.lookup_jid", "20260101000000000003", "--out", "json"],
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("victim"));
    let out = fleet.cli(
        "halite-run",
        &["jobs.lookup_jid", "20260101000000000002", "--out", "json"],
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("intruder"));

    // The local socket refuses a wrong root key: no publication, no key change.
    std::fs::write(fleet.path("bad_key"), "not-the-key").expect("write");
    let mut client = halite_master::local::LocalClient::connect(
        &fleet.path("master-sock/master.sock"),
        &fleet.path("bad_key"),
    )
    .expect("connect");
    let refused = client.call(halite_master::local::LocalBody::Publish {
        tgt: "*".into(),
        tgt_type: "glob".into(),
        fun: "test.arg".into(),
        arg: vec![json!("via-local")],
        kwarg: Default::default(),
        user: "root".into(),
        watch: false,
        progress: false,
    });
    assert!(refused.is_err());
    let out = fleet.cli("halite-run", &["jobs.list_jobs", "--out", "json"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("via-local"));

    // Both daemons are still up and serve.
    assert!(master.alive() && victim.alive());
    let (rets, code) = fleet.halite_json(&["victim", "test.ping"]);
    assert_eq!((rets.get("victim"), code), (Some(&json!(true)), 0));
    assert!(fleet.key_listed("minions", "intruder"));
    let _ = KeyStatus::Accepted;
}

/// Sends request `req` and waits for the master's `Reply` to it.
async fn ask(
    peer: &mut Peer,
    cipher: &mut SessionCipher,
    req: u64,
    body: halite_proto::msg::RequestBody,
) -> Option<halite_proto::msg::ReplyBody> {
    let msg = sealed(cipher, &MinionRequest::Request { req, body });
    peer.send(&ToMaster::Sealed(msg)).await;
    next_message(peer, cipher, Duration::from_secs(5), |m| match m {
        MasterMessage::Reply { req: r, body } if r == req => Some(body),
        _ => None,
    })
    .await
}

#[test]
fn bundles_and_files_go_to_whom_they_belong() {
    use halite_proto::msg::{ReplyBody, RequestBody};
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let srv = fleet.path("srv");
    let pillar = fleet.path("pillar");
    let outside = fleet.path("outside");
    for dir in [&srv, &pillar, &outside] {
        std::fs::create_dir_all(dir).expect("dir");
    }
    std::fs::write(srv.join("app.sls"), "app:\n  test.nop: []\n").expect("sls");
    std::fs::write(srv.join("motd"), "public motd\n").expect("motd");
    std::fs::write(outside.join("secret"), "outside-root\n").expect("secret");
    std::os::unix::fs::symlink(outside.join("secret"), srv.join("escape")).expect("symlink");
    std::fs::write(pillar.join("top.sls"), "base:\n  victim:\n    - secret\n").expect("top");
    std::fs::write(pillar.join("secret.sls"), "password: victim-only\n").expect("pillar");
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base: [{}]\npillar_roots:\n  base: [{}]\n",
        srv.display(),
        pillar.display()
    ));
    let mut victim = fleet.start_minion("victim", "");
    fleet.wait_responding("victim");
    // With the victim gone, its state job stays active on the master.
    victim.kill();
    let (text, _) = fleet.halite(&["victim", "state.apply", "app", "--async"]);
    let jid = text.trim().rsplit(' ').next().expect("jid").to_string();
    assert!(halite_proto::jid::is_jid(&jid), "{text}");

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut peer = Peer::connect(fleet.ret_port).await;
        let me = Identity::generate().expect("identity");
        let (mut cipher, _) = peer.authenticate(&me, "intruder").await;
        let (p, c) = (&mut peer, &mut cipher);

        // Another minion's bundle (and so its pillar) is refused.
        match ask(
            p,
            c,
            1,
            RequestBody::Bundle {
                jid: jid.clone(),
                have: None,
                packed: false,
                kept_calls: false,
                synced: None,
            },
        )
        .await
        {
            Some(ReplyBody::Error(e)) => {
                assert!(e.contains("not running for minion intruder"), "{e}")
            }
            other => panic!("another minion's bundle was served: {other:?}"),
        }

        // Paths outside the file roots are refused; a file inside is served.
        let mut req = 10;
        for path in [
            "../outside/secret",
            "/etc/passwd",
            "escape",
            "a/../../outside/secret",
        ] {
            req += 2;
            let stat = RequestBody::FileStat {
                saltenv: "base".into(),
                path: path.into(),
            };
            let reply = ask(p, c, req, stat).await;
            assert!(
                matches!(reply, Some(ReplyBody::Error(_))),
                "{path}: {reply:?}"
            );
            let chunk = RequestBody::FileChunk {
                saltenv: "base".into(),
                path: path.into(),
                offset: 0,
                sha256: String::new(),
            };
            let reply = ask(p, c, req + 1, chunk).await;
            assert!(
                matches!(reply, Some(ReplyBody::Error(_))),
                "{path}: {reply:?}"
            );
        }
        let stat = RequestBody::FileStat {
            saltenv: "base".into(),
            path: "motd".into(),
        };
        let Some(ReplyBody::FileStat(Some(stat))) = ask(p, c, 100, stat).await else {
            panic!("motd was not served");
        };
        let chunk = RequestBody::FileChunk {
            saltenv: "base".into(),
            path: "motd".into(),
            offset: 0,
            sha256: stat.sha256,
        };
        assert_eq!(
            ask(p, c, 101, chunk).await,
            Some(ReplyBody::FileChunk(b"public motd\n".to_vec()))
        );
        let list = RequestBody::FileList {
            saltenv: "base".into(),
            prefix: String::new(),
            dirs: false,
        };
        assert_eq!(
            ask(p, c, 102, list).await,
            Some(ReplyBody::List(vec!["app.sls".into(), "motd".into()]))
        );
    });
}
