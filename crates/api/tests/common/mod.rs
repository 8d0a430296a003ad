//! A real master, real minions and a real halite-api on loopback, each in
//! a temp dir, for the API's tests.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub use halite_test_support::{can_run, free_port, wait_for, Daemon};

pub use halite_test_support::fleet::bin;

/// The shared test fleet (halite-test-support's: master, minions, keys)
/// and the API's port; its master configs log the API to `api.log`.
pub struct Fleet {
    /// The master and its minions.
    pub base: halite_test_support::fleet::Fleet,
    /// Where halite-api listens (127.0.0.1); the tests' `rest_cherrypy`.
    pub api_port: u16,
}

impl std::ops::Deref for Fleet {
    type Target = halite_test_support::fleet::Fleet;
    fn deref(&self) -> &Self::Target {
        &self.base
    }
}

impl Fleet {
    pub fn new() -> Self {
        let mut base = halite_test_support::fleet::Fleet::new();
        base.master_base = format!("api_logfile: {}", base.path("api.log").display());
        Self {
            base,
            api_port: free_port(),
        }
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
    /// Every header, names in lower case.
    pub headers: Vec<(String, String)>,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// The value of header `name` (lower case), empty when absent.
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map_or("", |(_, v)| v.as_str())
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
    let all = resp
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_ascii_lowercase(),
                v.to_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let body = resp.body_mut().read_to_string().unwrap_or_default();
    Answer {
        status,
        content_type,
        token_header,
        cookie,
        body,
        headers: all,
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
