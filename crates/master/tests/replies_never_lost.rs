//! Issue 25, session 16: a minion's request the master never answered.
//! A swarm's one connection carries every identity's `salt://` chunks;
//! when its queue on the master was full the reply was dropped and the
//! job waited 600 s ("the master did not answer within 600 s"). Here the
//! master's queue for a connection holds one message and nothing may wait
//! past it (`reply_queue_messages: 1`, `reply_overflow_bytes: 0`), so
//! replies are dropped for real; the minions ask again after
//! `request_channel_timeout` and every file arrives. Without the repeat
//! the run misses the minions whose answer was lost.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use common::{can_run, write_file as write, Fleet};
use serde_json::Value;

const N: usize = 20;
const FILES: usize = 3;
const FILE_BYTES: usize = 1024 * 1024;

#[test]
fn replies_dropped_on_a_full_connection_are_asked_for_again() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let root = fleet.root.path();
    write(&root.join("salt/top.sls"), "base:\n  '*':\n    - files\n");
    write(
        &root.join("salt/files.sls"),
        &format!(
            "{{% for i in range({FILES}) %}}\nfile_{{{{ i }}}}:\n  file.managed:\n    - name: {}/out/{{{{ grains['id'] }}}}/f{{{{ i }}}}\n    - source: salt://big/{{{{ grains['id'] }}}}/f{{{{ i }}}}\n    - makedirs: True\n{{% endfor %}}\n",
            root.display()
        ),
    );
    // Different content per identity: no cache on the minion side saves a fetch.
    for n in 0..N {
        for i in 0..FILES {
            let mut body = vec![b'x'; FILE_BYTES];
            body[..16].copy_from_slice(format!("{n:08}{i:08}").as_bytes());
            let path = root.join(format!("salt/big/swarm-{n}/f{i}"));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, body).unwrap();
        }
    }
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base:\n    - {}/salt\nreply_queue_messages: 1\nreply_overflow_bytes: 0\n",
        root.display()
    ));
    let _swarm = fleet.start_swarm(N, "request_channel_timeout: 2");
    let (rets, _) = fleet.halite_json(&["*", "state.apply", "-t", "300"]);
    let stats = fleet.master_stats()["replies"].clone();
    let count = |key: &str| stats[key].as_u64().unwrap_or(0);
    assert!(
        count("dropped") > 0,
        "the test must lose replies to mean anything: {stats}"
    );
    assert_eq!(rets.len(), N, "every identity returns: {stats}");
    for (id, ret) in &rets {
        let states = ret.as_object().expect("a state return");
        assert_eq!(states.len(), FILES, "{id}: {ret}");
        for (key, state) in states {
            assert_eq!(state["result"], Value::Bool(true), "{id} {key}: {state}");
        }
        for i in 0..FILES {
            let got = std::fs::read(root.join(format!("out/{id}/f{i}"))).unwrap();
            let want = std::fs::read(root.join(format!("salt/big/{id}/f{i}"))).unwrap();
            assert!(got == want, "{id} f{i} differs from the master's");
        }
    }
}
