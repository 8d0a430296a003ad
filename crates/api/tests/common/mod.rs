//! A real master, real minions and a real halite-api on loopback, each in
//! a temp dir, for the API's tests.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub use halite_test_support::{can_run, free_port, wait_for, Daemon};

/// A workspace binary beside halite-api (build them with
/// `cargo build -p halite-master -p halite-minion -p halite-cli -p halite-api`).
pub fn bin(name: &str) -> PathBuf {
    let api = PathBuf::from(env!("CARGO_BIN_EXE_halite-api"));
    let path = api.with_file_name(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build -p halite-master -p halite-minion -p halite-cli` first",
        path.display()
    );
    path
}

/// A fleet: master config dir, ports, the API's port.
pub struct Fleet {
    pub root: tempfile::TempDir,
    pub publish_port: u16,
    pub ret_port: u16,
    pub api_port: u16,
}

impl Fleet {
    pub fn new() -> Self {
        Self {
            root: tempfile::tempdir().expect("tempdir"),
            publish_port: free_port(),
            ret_port: free_port(),
            api_port: free_port(),
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    pub fn master_dir(&self) -> PathBuf {
        self.path("master-conf")
    }

    /// Writes the master config (plus `extra` YAML, where `rest_cherrypy`
    /// and `external_auth` go) and starts the master.
    pub fn start_master(&self, extra: &str) -> Daemon {
        let dir = self.master_dir();
        std::fs::create_dir_all(&dir).expect("master conf dir");
        let root = self.root.path().display();
        let log = self.path("master.log");
        std::fs::write(
            dir.join("master"),
            format!(
                "interface: 127.0.0.1\npublish_port: {}\nret_port: {}\npki_dir: {root}/master-pki\ncachedir: {root}/master-cache\nsock_dir: {root}/master-sock\nlog_file: {}\nlog_level: debug\napi_logfile: {root}/api.log\ntimeout: 10\ngather_job_timeout: 2\n{extra}\n",
                self.publish_port,
                self.ret_port,
                log.display()
            ),
        )
        .expect("master config");
        let child = Command::new(bin("halite-master"))
            .arg("-c")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start halite-master");
        let daemon = Daemon { child, log };
        let sock = self.path("master-sock/master.sock");
        assert!(
            wait_for(Duration::from_secs(20), || sock.exists()),
            "the master did not start"
        );
        daemon
    }

    /// Starts a minion `id`.
    pub fn start_minion(&self, id: &str) -> Daemon {
        let dir = self.path(&format!("minion-{id}"));
        std::fs::create_dir_all(&dir).expect("minion dir");
        let log = dir.join("minion.log");
        std::fs::write(
            dir.join("minion"),
            format!(
                "master: 127.0.0.1\nmaster_port: {}\npublish_port: {}\nid: {id}\npki_dir: {d}/pki\ncachedir: {d}/cache\nsock_dir: {d}/sock\nlog_file: {}\nlog_level: debug\nacceptance_wait_time: 1\nauth_timeout: 2\nmaster_alive_interval: 1\nrecon_default: 200\nrecon_max: 1000\n",
                self.ret_port,
                self.publish_port,
                log.display(),
                d = dir.display()
            ),
        )
        .expect("minion config");
        let child = Command::new(bin("halite-minion"))
            .arg("-c")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start halite-minion");
        Daemon { child, log }
    }

    /// Waits for `id`'s key, accepts it with halite-key, waits until it answers.
    pub fn accept(&self, id: &str) {
        let listed = || {
            let out = Command::new(bin("halite-key"))
                .arg("-c")
                .arg(self.master_dir())
                .args(["-L", "--out", "json"])
                .output()
                .expect("halite-key");
            let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            v["minions_pre"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x == id))
        };
        assert!(
            wait_for(Duration::from_secs(20), listed),
            "{id} never became pending"
        );
        let out = Command::new(bin("halite-key"))
            .arg("-c")
            .arg(self.master_dir())
            .args(["-a", id, "-y"])
            .output()
            .expect("halite-key -a");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let answered = wait_for(Duration::from_secs(30), || {
            let out = Command::new(bin("halite"))
                .arg("-c")
                .arg(self.master_dir())
                .args(["-L", id, "test.ping", "-t", "2", "--out", "json"])
                .output()
                .expect("halite");
            String::from_utf8_lossy(&out.stdout).contains("true")
        });
        assert!(answered, "{id} never answered test.ping");
    }

    /// Starts halite-api on this fleet's master config; waits for its port.
    pub fn start_api(&self) -> Daemon {
        let log = self.path("api.stderr");
        let child = Command::new(bin("halite-api"))
            .arg("-c")
            .arg(self.master_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("api log"))
            .spawn()
            .expect("start halite-api");
        let port = self.api_port;
        assert!(
            wait_for(Duration::from_secs(20), || TcpStream::connect((
                "127.0.0.1",
                port
            ))
            .is_ok()),
            "halite-api did not listen: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        Daemon { child, log }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.api_port)
    }
}

/// An HTTP answer: status, headers we look at, body.
pub struct Answer {
    pub status: u16,
    pub content_type: String,
    pub token_header: Option<String>,
    pub cookie: Option<String>,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// One HTTP request with ureq (errors are answers too).
pub fn http(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<(&str, &str)>,
) -> Answer {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let result = match (method, body) {
        ("GET", _) => {
            let mut r = agent.get(url);
            for (k, v) in headers {
                r = r.header(*k, *v);
            }
            r.call()
        }
        (_, body) => {
            let mut r = agent.post(url);
            for (k, v) in headers {
                r = r.header(*k, *v);
            }
            match body {
                Some((ct, text)) => r.header("Content-Type", ct).send(text.as_bytes()),
                None => r.send_empty(),
            }
        }
    };
    let mut resp = result.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let h = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    };
    let status = resp.status().as_u16();
    let content_type = h("content-type").unwrap_or_default();
    let token_header = h("x-auth-token");
    let cookie = h("set-cookie");
    let body = resp.body_mut().read_to_string().unwrap_or_default();
    Answer {
        status,
        content_type,
        token_header,
        cookie,
        body,
    }
}

/// POSTs JSON.
pub fn post_json(url: &str, token: Option<&str>, body: &Value) -> Answer {
    let mut headers = vec![("Accept", "application/json")];
    if let Some(t) = token {
        headers.push(("X-Auth-Token", t));
    }
    http(
        "POST",
        url,
        &headers,
        Some(("application/json", &body.to_string())),
    )
}

/// GETs JSON.
pub fn get_json(url: &str, token: Option<&str>) -> Answer {
    let mut headers = vec![("Accept", "application/json")];
    if let Some(t) = token {
        headers.push(("X-Auth-Token", t));
    }
    http("GET", url, &headers, None)
}

/// Logs in; the token (panics when refused).
pub fn login(base: &str, user: &str, password: &str, eauth: &str) -> String {
    let a = post_json(
        &format!("{base}/login"),
        None,
        &serde_json::json!({"username": user, "password": password, "eauth": eauth}),
    );
    assert_eq!(a.status, 200, "login {user}/{eauth}: {}", a.body);
    a.json()["return"][0]["token"]
        .as_str()
        .expect("token")
        .to_string()
}

/// Reads SSE lines from `/events` on a raw socket until `until` sees a
/// line it wants or `limit` passes; the lines read.
pub fn read_events(
    port: u16,
    token: &str,
    limit: Duration,
    mut until: impl FnMut(&str) -> bool,
    mut after_connect: impl FnMut(),
) -> Vec<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(s, "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Auth-Token: {token}\r\nAccept: text/event-stream\r\n\r\n").expect("send");
    s.set_read_timeout(Some(limit)).expect("timeout");
    let mut reader = BufReader::new(s);
    let mut lines = Vec::new();
    let deadline = Instant::now() + limit;
    let mut connected = false;
    while Instant::now() < deadline {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let line = line.trim_end().to_string();
        if !connected && line.starts_with("retry:") {
            connected = true;
            after_connect();
        }
        let done = until(&line);
        lines.push(line);
        if done {
            break;
        }
    }
    lines
}

/// Reads a whole small file (the API's log, for failures).
pub fn read(path: &Path) -> String {
    let mut s = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut s);
    }
    s
}

/// A recording of Salt 3008.5's salt-api (tests/fixtures/salt-3008.5,
/// made by tests/fixtures/record.sh): its status and its body (JSON, or
/// CherryPy's HTML error page).
pub fn salt_recording(name: &str) -> (u16, Option<Value>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/salt-3008.5")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (status, body) = text.split_once('\n').expect("status line");
    (
        status.trim().parse().expect("status"),
        serde_json::from_str(body.trim()).ok(),
    )
}

/// The structure of a value: map keys (jids and minion ids replaced by
/// placeholders, so Salt's `jerry` and halite's `m1` agree), the shape of
/// a list's first item, and scalar types.
pub fn shape(v: &Value) -> Value {
    fn key(k: &str) -> String {
        if k.len() == 20 && k.bytes().all(|b| b.is_ascii_digit()) {
            "<jid>".into()
        } else if ["jerry", "m1", "m2"].contains(&k) {
            "<minion>".into()
        } else {
            k.to_string()
        }
    }
    match v {
        Value::Object(m) => {
            let mut out = serde_json::Map::new();
            let mut keys: Vec<(String, Value)> =
                m.iter().map(|(k, v)| (key(k), shape(v))).collect();
            keys.sort_by(|a, b| a.0.cmp(&b.0));
            for (k, v) in keys {
                out.insert(k, v);
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.first().map(shape).into_iter().collect()),
        Value::Null => Value::from("null"),
        Value::Bool(_) => Value::from("bool"),
        Value::Number(_) => Value::from("number"),
        Value::String(_) => Value::from("string"),
    }
}

/// Asserts that halite's answer has the status and the shape of Salt's
/// recorded one (the body's shape only when Salt answered JSON).
pub fn assert_like_salt(name: &str, answer: &Answer) {
    let (status, salt) = salt_recording(name);
    assert_eq!(
        answer.status, status,
        "{name}: status differs from Salt 3008.5's: {}",
        answer.body
    );
    if let Some(salt) = salt {
        assert_eq!(
            shape(&answer.json()),
            shape(&salt),
            "{name}: shape differs from Salt 3008.5's\nhalite: {}\nsalt:   {salt}",
            answer.body
        );
    }
}
