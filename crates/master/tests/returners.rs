//! Returners (`--return`) end to end: a real master and minion on
//! loopback, the minion sending a job's return to the `syslog` returner
//! as well as to the master, read from a syslog socket this test listens
//! on; `--return_config` and `--return_kwargs`; `halite-call --return`
//! masterless; a returner that does not exist loses nothing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{bin, can_run, Fleet};
use serde_json::Value;

/// A syslog socket: the datagrams a returner sends to `path`.
struct Syslog {
    sock: UnixDatagram,
}

impl Syslog {
    fn listen(path: &Path) -> Self {
        let sock = UnixDatagram::bind(path).expect("bind the syslog socket");
        sock.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        Self { sock }
    }

    /// The next line, split into (priority, ident, the return as JSON).
    fn next(&self) -> (u32, String, Value) {
        let mut buf = vec![0u8; 1 << 20];
        let n = self.sock.recv(&mut buf).expect("a syslog datagram");
        let line = String::from_utf8_lossy(&buf[..n]).into_owned();
        let (pri, rest) = line[1..].split_once('>').expect("<PRI>");
        // `Mmm dd hh:mm:ss ident: message`: the stamp is 15 characters.
        let (ident, message) = rest[16..].split_once(": ").expect("ident: message");
        (
            pri.parse().expect("a number"),
            ident.to_string(),
            serde_json::from_str(message).unwrap_or_else(|e| panic!("{e}: {line}")),
        )
    }
}

/// `halite-run jobs.list_job <jid>` as JSON.
fn list_job(fleet: &Fleet, jid: &str) -> Value {
    let out = fleet.cli("halite-run", &["jobs.list_job", jid, "--out", "json"]);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn the_minion_sends_a_jobs_return_to_syslog_too() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let socket = fleet.path("syslog.sock");
    let log = Syslog::listen(&socket);
    std::fs::create_dir_all(fleet.path("salt")).unwrap();
    std::fs::write(
        fleet.path("salt/one.sls"),
        "one:\n  test.succeed_without_changes\n",
    )
    .unwrap();
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base:\n    - {}\n",
        fleet.path("salt").display()
    ));
    let _web = fleet.start_minion(
        "web1",
        &format!(
            "syslog.socket: {}\nsyslog.tag: halite-test\nsyslog.facility: LOG_LOCAL0\nalt.syslog.tag: alt-tag\nalt.syslog.level: LOG_ERR\nrawfile_json.filename: {}\n",
            socket.display(),
            fleet.path("raw.jsonl").display()
        ),
    );
    fleet.wait_responding("web1");

    let (rets, code) = fleet.halite_json(&["web1", "test.echo", "hello", "--return", "syslog"]);
    assert_eq!(rets.get("web1"), Some(&Value::from("hello")), "{rets:?}");
    assert_eq!(code, 0);
    let (pri, ident, ret) = log.next();
    assert_eq!(pri, 128 + 6, "LOG_LOCAL0 | LOG_INFO");
    assert_eq!(ident, "halite-test");
    assert_eq!(ret["id"], "web1");
    assert_eq!(ret["fun"], "test.echo");
    assert_eq!(ret["fun_args"], serde_json::json!(["hello"]));
    assert_eq!(ret["return"], "hello");
    assert_eq!(ret["retcode"], 0);
    assert_eq!(ret["success"], true);
    assert_eq!(ret["jid"].as_str().map(str::len), Some(20), "{ret}");
    // The job's own return is in the master's job cache as always.
    let cached = fleet.cli(
        "halite-run",
        &[
            "jobs.lookup_jid",
            ret["jid"].as_str().unwrap(),
            "--out",
            "json",
        ],
    );
    let cached: Value = serde_json::from_slice(&cached.stdout).expect("JSON");
    assert_eq!(cached["web1"], "hello");
    // The returner is the load's `ret`, not an argument: Salt 3008.5's
    // `jobs.list_job` shows the call's arguments only.
    let listed = list_job(&fleet, ret["jid"].as_str().unwrap());
    assert_eq!(
        listed["Arguments"],
        serde_json::json!(["hello"]),
        "{listed}"
    );

    // --return_config: the `alt` profile's options win.
    let (rets, _) = fleet.halite_json(&[
        "web1",
        "test.ping",
        "--return",
        "syslog",
        "--return_config",
        "alt",
    ]);
    assert_eq!(rets.get("web1"), Some(&Value::Bool(true)));
    let (pri, ident, ret) = log.next();
    assert_eq!((pri, ident.as_str()), (128 + 3, "alt-tag"));
    assert_eq!(ret["ret_config"], "alt");

    // --return_kwargs: over the configured options.
    let (rets, _) = fleet.halite_json(&[
        "web1",
        "test.ping",
        "--return",
        "syslog",
        "--return_kwargs",
        r#"{"tag": "kw-tag"}"#,
    ]);
    assert_eq!(rets.get("web1"), Some(&Value::Bool(true)));
    let (_, ident, ret) = log.next();
    assert_eq!(ident, "kw-tag");
    assert_eq!(ret["ret_kwargs"]["tag"], "kw-tag");
    let listed = list_job(&fleet, ret["jid"].as_str().unwrap());
    assert_eq!(listed["Arguments"], serde_json::json!([]), "{listed}");
    assert_eq!(listed["Function"], "test.ping", "{listed}");

    // A state run compiled by the master: the returner keys do not reach
    // the compile nor the states, and the run's return goes to syslog.
    let (rets, code) = fleet.halite_json(&["web1", "state.apply", "one", "--return", "syslog"]);
    assert_eq!(code, 0, "{rets:?}");
    let run = rets["web1"].as_object().expect("a state run");
    assert_eq!(run.len(), 1, "{rets:?}");
    assert!(run.values().all(|s| s["result"] == true), "{rets:?}");
    let (_, _, ret) = log.next();
    assert_eq!(ret["fun"], "state.apply");
    assert_eq!(ret["return"], rets["web1"]);

    // rawfile_json: one JSON line per return in its file; two at once.
    let (rets, _) = fleet.halite_json(&[
        "web1",
        "test.echo",
        "raw",
        "--return",
        "rawfile_json,syslog",
    ]);
    assert_eq!(rets.get("web1"), Some(&Value::from("raw")));
    let (_, _, ret) = log.next();
    assert_eq!(ret["return"], "raw");
    let raw = std::fs::read_to_string(fleet.path("raw.jsonl")).expect("rawfile_json's file");
    let line: Value = serde_json::from_str(raw.lines().next().unwrap()).unwrap();
    assert_eq!(line["return"], "raw");
    assert_eq!(line["id"], "web1");

    // halite-call through the master: the minion's runner calls them.
    let call = Command::new(bin("halite-call"))
        .arg("-c")
        .arg(fleet.path("minion-web1"))
        .args([
            "test.echo",
            "viacall",
            "--return",
            "syslog",
            "--out",
            "json",
        ])
        .output()
        .expect("halite-call");
    assert!(
        call.status.success(),
        "{}",
        String::from_utf8_lossy(&call.stderr)
    );
    let (_, _, ret) = log.next();
    assert_eq!(ret["return"], "viacall");
    assert_eq!(ret["id"], "web1");
    // A jid made on the minion, as salt-call's returners get (not `req`).
    let call_jid = ret["jid"].as_str().unwrap_or_default();
    assert!(
        call_jid.len() == 20 && call_jid.bytes().all(|b| b.is_ascii_digit()),
        "{ret}"
    );

    // A returner halite does not have: logged, the return still arrives.
    let (rets, code) = fleet.halite_json(&["web1", "test.ping", "--return", "nosuch"]);
    assert_eq!(rets.get("web1"), Some(&Value::Bool(true)));
    assert_eq!(code, 0);
    let minion_log =
        std::fs::read_to_string(fleet.path("minion-web1/minion.log")).unwrap_or_default();
    assert!(
        minion_log.contains("Returner nosuch.returner could not be loaded"),
        "{minion_log}"
    );
}

#[test]
fn halite_call_local_return_sends_to_syslog() {
    if !can_run() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("syslog.sock");
    let log = Syslog::listen(&socket);
    std::fs::write(
        dir.path().join("minion"),
        format!(
            "id: caller1\ncachedir: {}/cache\nsyslog:\n  socket: {}\n  options: [LOG_PID]\n",
            dir.path().display(),
            socket.display()
        ),
    )
    .unwrap();
    let out = Command::new(bin("halite-call"))
        .arg("--local")
        .arg("-c")
        .arg(dir.path())
        .args(["test.echo", "hi", "--return", "syslog", "--out", "json"])
        .output()
        .expect("halite-call");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(printed["local"], "hi");
    let (pri, ident, ret) = log.next();
    assert_eq!(pri, 8 + 6, "LOG_USER | LOG_INFO, Salt's defaults");
    // No tag: the program's name, and LOG_PID adds the pid.
    assert!(ident.starts_with("halite-call["), "{ident}");
    assert_eq!(ret["id"], "caller1");
    assert_eq!(ret["fun"], "test.echo");
    assert_eq!(ret["return"], "hi");
}

#[test]
fn scheduled_jobs_and_reactions_name_returners_too() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let socket = fleet.path("syslog.sock");
    let log = Syslog::listen(&socket);
    let reactor = fleet.path("reactor/ping.sls");
    std::fs::create_dir_all(reactor.parent().unwrap()).unwrap();
    std::fs::write(
        &reactor,
        "ping:\n  local.test.echo:\n    - tgt: web1\n    - arg:\n      - from-reactor\n    - ret: syslog\n",
    )
    .unwrap();
    let orch = fleet.path("salt/orch/ret.sls");
    std::fs::create_dir_all(orch.parent().unwrap()).unwrap();
    std::fs::write(
        &orch,
        "step:\n  salt.function:\n    - name: test.echo\n    - tgt: web1\n    - arg:\n      - from-orchestration\n    - ret: syslog\n",
    )
    .unwrap();
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base:\n    - {}\nreactor:\n  - 'myco/ping':\n    - {}\n",
        fleet.path("salt").display(),
        reactor.display()
    ));
    // A scheduled job with `returner:` (Salt's key) and its return_config.
    let _web = fleet.start_minion(
        "web1",
        &format!(
            "syslog.socket: {}\nsched.syslog.tag: from-schedule\nschedule:\n  echo:\n    function: test.echo\n    args: [scheduled]\n    seconds: 1\n    maxrunning: 1\n    returner: syslog\n    return_config: sched\n",
            socket.display()
        ),
    );
    let (_, ident, ret) = log.next();
    assert_eq!(ident, "from-schedule");
    assert_eq!(ret["fun"], "test.echo");
    assert_eq!(ret["return"], "scheduled");
    assert_eq!(ret["id"], "web1");
    fleet.wait_responding("web1");
    // The reactor's `ret:`: the reaction's job goes to syslog as well.
    let sent = fleet.cli("halite-run", &["event.send", "myco/ping"]);
    assert!(sent.status.success());
    let seen = (0..20)
        .map(|_| log.next())
        .find(|(_, _, r)| r["return"] == "from-reactor");
    let (_, _, ret) = seen.expect("the reaction's return in syslog");
    assert_eq!(ret["fun"], "test.echo");
    assert_eq!(ret["id"], "web1");
    // An orchestration step's `ret:`.
    let run = fleet.cli("halite-run", &["state.orchestrate", "orch.ret"]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stdout)
    );
    let seen = (0..20)
        .map(|_| log.next())
        .find(|(_, _, r)| r["return"] == "from-orchestration");
    assert!(seen.is_some(), "the step's return never reached syslog");
}

/// A shop's own returner: `_returners/filer.py` in the master's file
/// roots, synced to the minion by `saltutil.sync_returners` (and listed
/// by `sync_all`), then named by `--return` like a native one; its
/// `__opts__` is the minion's.
#[test]
fn a_custom_python_returner_synced_from_the_master_gets_the_return() {
    if !can_run() {
        return;
    }
    if halite_modules::grains::hw::which("python3").is_none() {
        println!("skipped: needs python3 for the Python host");
        return;
    }
    let fleet = Fleet::new();
    let salt = fleet.path("salt");
    let out = fleet.path("out/returns.jsonl");
    std::fs::create_dir_all(salt.join("_returners")).unwrap();
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    std::fs::write(
        salt.join("_returners/filer.py"),
        "import json\n\n__virtualname__ = 'filer'\n\n\ndef __virtual__():\n    return __virtualname__\n\n\ndef returner(ret):\n    with open(__opts__['filer.path'], 'a') as f:\n        f.write(json.dumps(ret) + '\\n')\n",
    )
    .unwrap();
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base:\n    - {}\n",
        salt.display()
    ));
    let _web = fleet.start_minion("web1", &format!("filer.path: {}\n", out.display()));
    fleet.wait_responding("web1");
    let (rets, _) = fleet.halite_json(&["web1", "saltutil.sync_returners"]);
    assert_eq!(
        rets.get("web1"),
        Some(&serde_json::json!(["returners.filer"])),
        "{rets:?}"
    );
    let (rets, _) = fleet.halite_json(&["web1", "saltutil.sync_all"]);
    assert_eq!(rets["web1"]["returners"], serde_json::json!([]), "{rets:?}");

    let (rets, code) = fleet.halite_json(&["web1", "test.echo", "custom", "--return", "filer"]);
    assert_eq!(rets.get("web1"), Some(&Value::from("custom")));
    assert_eq!(code, 0);
    let written = std::fs::read_to_string(&out).expect("the returner wrote its file");
    let ret: Value = serde_json::from_str(written.lines().next().unwrap()).unwrap();
    assert_eq!(ret["id"], "web1");
    assert_eq!(ret["fun"], "test.echo");
    assert_eq!(ret["return"], "custom");
    assert_eq!(ret["success"], true);
}
