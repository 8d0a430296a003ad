//! Issue 19's remote sources, system states and execution functions
//! through the master: a real master and minion on loopback, `halite '*'
//! state.sls` of a tree using `file.managed` from an `http://` source on a
//! loopback server, `host.present`, `sysctl.present` and `cron.present`
//! pointed at temp files or a throwaway user, render-time calls compiled on
//! the master and answered by the minion, and the new execution functions
//! called from the CLI, asserting what the CLI prints.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::{can_run, Fleet};
use serde_json::{json, Value};

use common::write_file as write;

/// The loopback file server the modules' remote-source tests use
/// (`crates/modules/tests/fixtures/http_server.py`), killed when dropped.
struct HttpServer {
    child: Child,
    port: u16,
}

impl HttpServer {
    fn start(dir: &Path) -> Self {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../modules/tests/fixtures/http_server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start python3 http server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("server stdout"))
            .read_line(&mut line)
            .expect("server port");
        let port = line.trim().parse().expect("server printed its port");
        HttpServer { child, port }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A user made for this test, removed with its crontab when dropped.
struct TestUser(String);

impl TestUser {
    fn new() -> Self {
        let name = format!("h19m{}", std::process::id());
        let ok = Command::new("useradd")
            .args(["-M", "-s", "/bin/sh", &name])
            .status()
            .expect("useradd")
            .success();
        assert!(ok, "useradd {name}");
        TestUser(name)
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        let _ = Command::new("crontab").args(["-u", &self.0, "-r"]).output();
        let _ = Command::new("userdel").args(["-f", &self.0]).output();
    }
}

/// The return of the state whose id is `id`.
fn by_id<'a>(states: &'a Value, id: &str) -> &'a Value {
    states
        .as_object()
        .and_then(|m| m.values().find(|r| r["__id__"] == id))
        .unwrap_or_else(|| panic!("no state {id} in {states}"))
}

fn sha256_hex(data: &[u8]) -> String {
    let out = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().expect("stdin").write_all(data)?;
            c.wait_with_output()
        })
        .expect("sha256sum");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .expect("a digest")
        .to_string()
}

struct Setup {
    out: PathBuf,
    hosts: PathBuf,
    sysctl_conf: PathBuf,
    swappiness: String,
    remote_sum: String,
}

/// The state tree: `sys.sls` uses every function the test checks.
fn tree(fleet: &Fleet, port: u16, user: &str) -> Setup {
    let out = fleet.path("out");
    std::fs::create_dir_all(&out).expect("out");
    let www = fleet.path("www");
    let remote = b"fetched over http\n";
    write(
        &www.join("remote.txt"),
        std::str::from_utf8(remote).expect("utf8"),
    );
    let remote_sum = sha256_hex(remote);
    write(
        &www.join("remote.txt.sha256"),
        &format!("{remote_sum}  remote.txt\n"),
    );
    let hosts = fleet.path("hosts");
    write(&hosts, "127.0.0.1\tlocalhost\n");
    let sysctl_conf = out.join("sysctl.conf");
    // The key's current value: the state then only writes the temp config
    // and leaves the host's setting as it is.
    let swappiness = std::fs::read_to_string("/proc/sys/vm/swappiness")
        .expect("vm.swappiness")
        .trim()
        .to_string();
    let salt = fleet.path("trees/salt");
    write(
        &salt.join("sys.sls"),
        &format!(
            r#"{out}/remote.txt:
  file.managed:
    - source: http://127.0.0.1:{port}/remote.txt
    - source_hash: http://127.0.0.1:{port}/remote.txt.sha256

{out}/listed.txt:
  file.managed:
    - source:
      - http://127.0.0.1:{port}/missing.txt
      - http://127.0.0.1:{port}/remote.txt
    - source_hash: sha256={remote_sum}

{out}/bad-hash.txt:
  file.managed:
    - source: http://127.0.0.1:{port}/remote.txt
    - source_hash: sha256={zeros}

app.example.test:
  host.present:
    - ip: 10.9.8.7

vm.swappiness:
  sysctl.present:
    - value: {swappiness}
    - config: {sysctl}

echo halite-h19:
  cron.present:
    - user: {user}
    - minute: 5
    - hour: 4

rendered:
  test.succeed_without_changes:
    - name: "{{{{ salt['hashutil.sha256_digest']('x') }}}} {{{{ salt['config.get']('hosts.file') }}}} {{{{ salt['file.check_hash']('{www}/remote.txt', 'sha256={remote_sum}') }}}}"
    - require:
      - file: {out}/remote.txt
"#,
            out = out.display(),
            www = www.display(),
            sysctl = sysctl_conf.display(),
            zeros = "0".repeat(64),
        ),
    );
    Setup {
        out,
        hosts,
        sysctl_conf,
        swappiness,
        remote_sum,
    }
}

#[test]
fn issue_19_functions_through_the_master() {
    if !can_run() {
        return;
    }
    let fleet = Fleet::new();
    let user = TestUser::new();
    let www = fleet.path("www");
    std::fs::create_dir_all(&www).expect("www");
    let server = HttpServer::start(&www);
    let Setup {
        out,
        hosts,
        sysctl_conf,
        swappiness,
        remote_sum,
    } = tree(&fleet, server.port, &user.0);
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base: [{}]\n",
        fleet.path("trees/salt").display()
    ));
    let _minion = fleet.start_minion("m1", &format!("hosts.file: {}\n", hosts.display()));
    fleet.wait_responding("m1");

    // The state run.
    let (rets, code) = fleet.halite_json(&["m1", "state.sls", "sys"]);
    let states = rets.get("m1").cloned().unwrap_or(Value::Null);
    assert_eq!(code, 1, "bad-hash.txt fails the run: {states}");

    let remote = by_id(&states, &format!("{}/remote.txt", out.display()));
    assert_eq!(remote["result"], true, "{remote}");
    // Salt reports the mode it gives a new file made from a source.
    assert_eq!(
        remote["changes"],
        json!({"diff": "New file", "mode": "0644"})
    );
    assert_eq!(
        std::fs::read_to_string(out.join("remote.txt")).expect("remote.txt"),
        "fetched over http\n"
    );
    let listed = by_id(&states, &format!("{}/listed.txt", out.display()));
    assert_eq!(listed["result"], true, "{listed}");
    assert_eq!(
        std::fs::read_to_string(out.join("listed.txt")).expect("listed.txt"),
        "fetched over http\n"
    );
    let bad = by_id(&states, &format!("{}/bad-hash.txt", out.display()));
    assert_eq!(bad["result"], false, "{bad}");
    assert!(
        bad["comment"]
            .as_str()
            .is_some_and(|c| c.contains("does not match actual checksum")),
        "{bad}"
    );
    assert!(!out.join("bad-hash.txt").exists());

    let host = by_id(&states, "app.example.test");
    assert_eq!(host["result"], true, "{host}");
    assert_eq!(host["comment"], "Added host app.example.test (10.9.8.7)");
    let hosts_text = std::fs::read_to_string(&hosts).expect("hosts");
    assert!(
        hosts_text
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["10.9.8.7", "app.example.test"]),
        "{hosts_text}"
    );

    let sysctl = by_id(&states, "vm.swappiness");
    assert_eq!(sysctl["result"], true, "{sysctl}");
    assert_eq!(
        sysctl["comment"],
        format!("Updated sysctl value vm.swappiness = {swappiness}")
    );
    let conf = std::fs::read_to_string(&sysctl_conf).expect("sysctl.conf");
    assert!(
        conf.lines()
            .any(|l| l == format!("vm.swappiness = {swappiness}")),
        "{conf}"
    );

    let cron = by_id(&states, "echo halite-h19");
    assert_eq!(cron["result"], true, "{cron}");
    assert_eq!(cron["changes"], json!({user.0.as_str(): "echo halite-h19"}));
    assert_eq!(
        cron["comment"],
        format!("Cron echo halite-h19 added to {}'s crontab", user.0)
    );
    let tab = Command::new("crontab")
        .args(["-u", &user.0, "-l"])
        .output()
        .expect("crontab -l");
    let tab = String::from_utf8_lossy(&tab.stdout);
    assert!(tab.contains("5 4 * * * echo halite-h19"), "{tab}");

    // Render-time calls: compiled on the master, answered by the minion.
    let rendered = by_id(&states, "rendered");
    assert_eq!(
        rendered["name"],
        format!("{} {} True", sha256_hex(b"x"), hosts.display()),
        "{rendered}"
    );

    // A second run changes nothing but the failing state.
    let (rets, _) = fleet.halite_json(&["m1", "state.sls", "sys"]);
    let states = rets.get("m1").cloned().unwrap_or(Value::Null);
    for (id, ret) in states.as_object().expect("states") {
        if id.contains("bad-hash") {
            continue;
        }
        assert_eq!(ret["changes"], json!({}), "{id}: {ret}");
        assert_eq!(ret["result"], true, "{id}: {ret}");
    }

    // Execution functions from the CLI.
    let call = |args: &[&str]| -> Value {
        let mut full = vec!["m1"];
        full.extend(args);
        let (rets, _) = fleet.halite_json(&full);
        rets.get("m1").cloned().unwrap_or(Value::Null)
    };
    assert_eq!(
        call(&["hashutil.sha256_digest", "x"]),
        json!(sha256_hex(b"x"))
    );
    assert_eq!(
        call(&["hashutil.base64_b64encode", "halite"]),
        json!("aGFsaXRl")
    );
    assert_eq!(
        call(&["config.get", "hosts.file"]),
        json!(hosts.display().to_string())
    );
    assert_eq!(call(&["config.option", "id"]), json!("m1"));
    let remote_path = out.join("remote.txt").display().to_string();
    assert_eq!(
        call(&["file.check_hash", &remote_path, &remote_sum]),
        json!(true)
    );
    assert_eq!(
        call(&[
            "file.check_hash",
            &remote_path,
            &format!("file_hash=sha256={}", "1".repeat(64))
        ]),
        json!(false)
    );
    assert_eq!(
        call(&["grains.setval", "h19_color", "blue"]),
        json!({"h19_color": "blue"})
    );
    assert_eq!(call(&["grains.get", "h19_color"]), json!("blue"));
    assert_eq!(call(&["grains.fetch", "h19_color"]), json!("blue"));
    assert_eq!(call(&["grains.equals", "h19_color", "blue"]), json!(true));
    assert_eq!(call(&["grains.equals", "h19_color", "red"]), json!(false));
    // A call Python would reject: Salt's minion words it as a TypeError.
    assert_eq!(
        call(&["hashutil.sha256_digest"]),
        json!("Passed invalid arguments to hashutil.sha256_digest: sha256_digest() missing 1 required positional argument: 'instr'\n")
    );
    assert_eq!(
        call(&["hosts.get_ip", "app.example.test"]),
        json!("10.9.8.7")
    );
    assert_eq!(call(&["sysctl.get", "vm.swappiness"]), json!(swappiness));
    let crons = call(&["cron.list_tab", &user.0]);
    assert_eq!(crons["crons"][0]["cmd"], "echo halite-h19", "{crons}");

    // The CLI's default output of one of them, as a user reads it.
    let (text, code) = fleet.halite(&["m1", "hashutil.sha256_digest", "x"]);
    assert_eq!(code, 0);
    assert_eq!(text, format!("m1:\n    {}\n", sha256_hex(b"x")));
    drop(server);
}

/// Peak resident memory (VmHWM) of process `pid`, in KiB.
fn vm_hwm_kib(pid: u32) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the minion's status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[test]
fn a_large_remote_source_is_streamed_into_place() {
    if !can_run() {
        return;
    }
    const SIZE: u64 = 200 * 1024 * 1024;
    let fleet = Fleet::new();
    let www = fleet.path("www");
    std::fs::create_dir_all(&www).expect("www");
    // Sparse: the server reads zeros without the disk holding them; the
    // last bytes differ so a truncated copy would not compare equal.
    let big = www.join("big.bin");
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::File::create(&big).expect("big.bin");
        f.set_len(SIZE - 8).expect("sparse");
        f.seek(SeekFrom::End(0)).expect("seek");
        f.write_all(b"the end\n").expect("tail");
    }
    let sum = Command::new("sha256sum")
        .arg(&big)
        .output()
        .expect("sha256sum");
    let sum = String::from_utf8_lossy(&sum.stdout)
        .split_whitespace()
        .next()
        .expect("digest")
        .to_string();
    let server = HttpServer::start(&www);
    let out = fleet.path("out");
    std::fs::create_dir_all(&out).expect("out");
    let dest = out.join("big.bin");
    write(
        &fleet.path("trees/salt/big.sls"),
        &format!(
            "{}:\n  file.managed:\n    - source: http://127.0.0.1:{}/big.bin\n    - source_hash: sha256={sum}\n",
            dest.display(),
            server.port
        ),
    );
    let _master = fleet.start_master(&format!(
        "auto_accept: True\nfile_roots:\n  base: [{}]\n",
        fleet.path("trees/salt").display()
    ));
    let minion = fleet.start_minion("big", "");
    fleet.wait_responding("big");

    let (rets, code) = fleet.halite_json(&["big", "state.sls", "big"]);
    let states = rets.get("big").cloned().unwrap_or(Value::Null);
    assert_eq!(code, 0, "{states}");
    let ret = by_id(&states, &dest.display().to_string());
    assert_eq!(ret["changes"]["diff"], "New file", "{ret}");
    assert_eq!(std::fs::metadata(&dest).expect("dest").len(), SIZE);
    let copied = Command::new("sha256sum")
        .arg(&dest)
        .output()
        .expect("sha256sum");
    assert!(String::from_utf8_lossy(&copied.stdout).starts_with(&sum));

    // Again: compared with the file in place a block at a time, unchanged.
    let (rets, code) = fleet.halite_json(&["big", "state.sls", "big"]);
    let states = rets.get("big").cloned().unwrap_or(Value::Null);
    assert_eq!(code, 0, "{states}");
    let ret = by_id(&states, &dest.display().to_string());
    assert_eq!(ret["changes"], json!({}), "{ret}");

    // A changed source replaces it, still without holding it.
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&big)
            .expect("big.bin");
        f.seek(SeekFrom::Start(SIZE / 2)).expect("seek");
        f.write_all(b"changed").expect("write");
    }
    let sum2 = Command::new("sha256sum")
        .arg(&big)
        .output()
        .expect("sha256sum");
    let sum2 = String::from_utf8_lossy(&sum2.stdout)
        .split_whitespace()
        .next()
        .expect("digest")
        .to_string();
    let sls = std::fs::read_to_string(fleet.path("trees/salt/big.sls")).expect("sls");
    write(&fleet.path("trees/salt/big.sls"), &sls.replace(&sum, &sum2));
    let (rets, code) = fleet.halite_json(&["big", "state.sls", "big"]);
    let states = rets.get("big").cloned().unwrap_or(Value::Null);
    assert_eq!(code, 0, "{states}");
    let ret = by_id(&states, &dest.display().to_string());
    assert_eq!(ret["changes"]["diff"], "Replace binary file", "{ret}");

    // The minion never held the file: its peak resident memory stays far
    // below the file's 200 MiB.
    let peak = vm_hwm_kib(minion.child.id());
    assert!(
        peak < 100 * 1024,
        "the minion's peak RSS reached {peak} KiB for a {} KiB file",
        SIZE / 1024
    );
    drop(server);
}
