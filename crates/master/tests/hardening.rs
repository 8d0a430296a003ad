//! Issue 17, the protocol part, against running daemons on loopback: no
//! forged return through an event tag, no replay after a minion restart,
//! Hello floods bounded, quick reconnection after a master restart, and
//! the smaller rules (ids, temp files, handshakes, permissions).

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use halite_proto::crypto::{MinionHandshake, SessionCipher};
use halite_proto::msg::{MasterMessage, MinionRequest, ToMaster, ToMinion};
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
    async fn send(&mut self, msg: &ToMaster) {
        let bytes = encode(msg).expect("encode");
        self.socket
            .send(ZmqMessage::from(bytes))
            .await
            .expect("send");
    }
    async fn recv(&mut self, wait: Duration) -> Option<ToMinion> {
        let msg = tokio::time::timeout(wait, self.socket.recv())
            .await
            .ok()?
            .ok()?;
        decode(msg.get(0)?).ok()
    }
    /// Authenticates `id` with `identity`: its session cipher.
    async fn authenticate(&mut self, identity: &Identity, id: &str) -> SessionCipher {
        for _ in 0..50 {
            let (state, hello) = MinionHandshake::start(identity, id).expect("hello");
            self.send(&ToMaster::Hello(hello)).await;
            if let Some(ToMinion::Welcome(w)) = self.recv(Duration::from_secs(5)).await {
                let (mut cipher, confirm) = state.finish(identity, &w).expect("finish");
                self.send(&ToMaster::Confirm(confirm)).await;
                if let Some(ToMinion::Sealed(s)) = self.recv(Duration::from_secs(5)).await {
                    if let Ok(MasterMessage::Ready { .. }) = decode(&cipher.open(&s).expect("open"))
                    {
                        return cipher;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("could not authenticate {id}");
    }
    async fn request(&mut self, cipher: &mut SessionCipher, req: &MinionRequest) {
        let sealed = cipher.seal(&encode(req).expect("encode")).expect("seal");
        self.send(&ToMaster::Sealed(sealed)).await;
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The jid of the first job `fun` the minion logged as running.
fn running_jid(minion: &Daemon, fun: &str) -> Option<String> {
    let log = minion.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("running job") && l.contains(&format!("fun={fun}")))?;
    let at = line.find("jid=")? + 4;
    Some(line.get(at..at + 20)?.to_string())
}

#[test]
fn a_forged_tag_is_never_another_minions_return() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let master = fleet.start_master("auto_accept: True");
    let victim = fleet.start_minion("victim", "");
    fleet.wait_responding("victim");
    let events = fleet.watch_events();
    let cli = Command::new(bin("halite"))
        .arg("-c")
        .arg(fleet.master_dir())
        .args(["victim", "test.sleep", "3", "--out", "json"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("halite");
    let mut jid = None;
    assert!(wait_for(Duration::from_secs(10), || {
        jid = running_jid(&victim, "test.sleep");
        jid.is_some()
    }));
    let jid = jid.unwrap_or_default();
    runtime().block_on(async {
        let mut peer = Peer::connect(fleet.ret_port).await;
        let me = Identity::generate().expect("identity");
        let mut cipher = peer.authenticate(&me, "intruder").await;
        let forged = json!({"id": "victim", "jid": jid, "return": "FORGED", "retcode": 0,
            "success": true, "fun": "test.sleep", "fun_args": ["3"]});
        for tag in [
            format!("salt/job/{jid}/ret/victim/prog/intruder/0"),
            format!("salt/job/{jid}/ret/victim"),
            format!("salt/job/{jid}/prog/victim/0"),
        ] {
            let event = MinionRequest::Event {
                tag,
                data: forged.clone(),
            };
            peer.request(&mut cipher, &event).await;
        }
        // Its own progress and user events still pass.
        let own = MinionRequest::Event {
            tag: format!("myapp/{jid}/intruder-was-here"),
            data: json!({}),
        };
        peer.request(&mut cipher, &own).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    });
    let out = cli.wait_with_output().expect("halite");
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        !printed.contains("FORGED"),
        "the CLI printed a forged return: {printed}"
    );
    assert!(printed.contains("\"victim\": true"), "{printed}");
    let bus = events.stop();
    assert!(
        !bus.contains("FORGED"),
        "a forged event reached the bus: {bus}"
    );
    assert!(bus.contains("intruder-was-here"), "{bus}");
    assert!(master.log_text().contains("minion event dropped"));
}
