//! halite-api against a real master and real minions on loopback: Salt's
//! REST contract (the shapes recorded from Salt 3008.5's salt-api in
//! tests/fixtures), `pepper` (PyPI's salt-pepper, installed into a venv
//! under the target dir), eauth `file`, `auto` and `pam` (a real local
//! user), ACL refusals per client, token expiry, revocation and restart,
//! the event stream, hooks, TLS, body and login limits.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on a broken fixture"
)]

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

const CLIENTS: &str =
    "netapi_enable_clients: [local, local_async, local_batch, runner, runner_async, wheel, wheel_async]\n";

fn file_eauth_config(f: &Fleet, extra_rest: &str) -> String {
    let users = f.path("users");
    std::fs::write(&users, "alice:wonderland\ntester:testpass\nweb:webpass\n").unwrap();
    format!(
        "{CLIENTS}token_expire_user_override: True\nrest_cherrypy:\n  port: {}\n  host: 127.0.0.1\n  disable_ssl: True\n  max_request_body_size: 65536\n  login_attempts: 8\n{extra_rest}external_auth:\n  file:\n    ^filename: {}\n    alice: ['.*', '@runner', '@wheel']\n    tester: ['test.*']\n    web: [{{'m1': ['test.*']}}]\n  auto:\n    'demo': ['test.ping']\n",
        f.api_port,
        users.display()
    )
}

/// A venv with salt-pepper, made once per target dir.
fn pepper() -> Option<PathBuf> {
    let venv = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pepper-venv");
    let bin = venv.join("bin/pepper");
    if bin.exists() {
        return Some(bin);
    }
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipping pepper: python3 -m venv failed (install python3-venv)");
        return None;
    }
    let pip = Command::new(venv.join("bin/pip"))
        .args(["install", "-q", "salt-pepper"])
        .status();
    if !pip.is_ok_and(|s| s.success()) {
        eprintln!("skipping pepper: pip install salt-pepper failed (no PyPI?)");
        return None;
    }
    Some(bin)
}

/// `POST /` of one `local` job on every minion (`tgt: '*'`) with `token`.
fn local_all(base: &str, token: &str, fun: &str, args: &[&str]) -> Answer {
    post_json(
        base,
        Some(token),
        &json!([{"client": "local", "tgt": "*", "fun": fun, "arg": args}]),
    )
}

/// pepper against one API as one user: its own HOME (for its token
/// cache) in the fleet's temp dir.
struct Pepper<'a> {
    bin: PathBuf,
    home: PathBuf,
    url: &'a str,
    user: &'a str,
    pass: &'a str,
    eauth: &'a str,
}

impl<'a> Pepper<'a> {
    /// `None` (and why, printed) when pepper cannot be installed.
    fn new(f: &Fleet, url: &'a str, user: &'a str, pass: &'a str, eauth: &'a str) -> Option<Self> {
        let bin = pepper()?;
        let home = f.path("pepper-home");
        std::fs::create_dir_all(&home).unwrap();
        Some(Self {
            bin,
            home,
            url,
            user,
            pass,
            eauth,
        })
    }

    /// The same pepper as another user.
    fn with_user(&self, user: &'a str, pass: &'a str) -> Self {
        Self {
            bin: self.bin.clone(),
            home: self.home.clone(),
            user,
            pass,
            ..*self
        }
    }

    /// `pepper --out json ARGS`: (exit code, stdout, stderr).
    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(&self.bin)
            .env("HOME", &self.home)
            .env("SALTAPI_URL", self.url)
            .env("SALTAPI_USER", self.user)
            .env("SALTAPI_PASS", self.pass)
            .env("SALTAPI_EAUTH", self.eauth)
            .arg("--non-interactive")
            .args(["--out", "json"])
            .args(args)
            .output()
            .expect("run pepper");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

#[test]
fn salt_api_contract_with_file_eauth() {
    if !can_run() {
        return;
    }
    let f = Fleet::new();
    let _master = f.start_master(&file_eauth_config(&f, ""));
    let _m1 = f.start_minion("m1", "");
    let _m2 = f.start_minion("m2", "");
    f.accept("m1");
    f.accept("m2");
    let mut api = f.start_api();
    let base = f.url("");

    // GET / and GET /login need no token.
    let a = get_json(&f.url("/"), None);
    assert_eq!(a.status, 200);
    assert_eq!(a.json()["return"], "Welcome");

    // Login: Salt's token document, header and cookie.
    let a = post_json(
        &f.url("/login"),
        None,
        &json!({"username": "alice", "password": "wonderland", "eauth": "file"}),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let doc = &a.json()["return"][0];
    let token = doc["token"].as_str().unwrap().to_string();
    assert_eq!(a.token_header.as_deref(), Some(token.as_str()));
    assert!(a
        .cookie
        .as_deref()
        .unwrap_or_default()
        .starts_with(&format!("session_id={token}")));
    assert_eq!(doc["user"], "alice");
    assert_eq!(doc["eauth"], "file");
    assert_eq!(doc["perms"], json!([".*", "@runner", "@wheel"]));
    let (start, expire) = (
        doc["start"].as_f64().unwrap(),
        doc["expire"].as_f64().unwrap(),
    );
    assert!(
        (expire - start - 43200.0).abs() < 1.0,
        "Salt's default token_expire"
    );

    // Each answer has the status and shape of Salt 3008.5's salt-api
    // (recorded by tests/fixtures/record.sh).
    let post = |body: Value, tok: Option<&str>| post_json(&base, tok, &body);
    assert_like_salt("index.json", &get_json(&f.url("/"), None));
    assert_like_salt("login_get.json", &get_json(&f.url("/login"), None));
    assert_like_salt("login.json", &a);
    assert_like_salt(
        "login_bad_eauth.json",
        &post_json(
            &f.url("/login"),
            None,
            &json!({"username": "alice", "password": "wonderland", "eauth": "nosuch"}),
        ),
    );
    assert_like_salt(
        "local.json",
        &post(
            json!([{"client": "local", "tgt": "*", "fun": "test.ping"}]),
            Some(&token),
        ),
    );
    assert_like_salt(
        "local_full_return.json",
        &post(
            json!([{"client": "local", "tgt": "*", "fun": "test.ping", "full_return": true}]),
            Some(&token),
        ),
    );
    let started = post(
        json!([{"client": "local_async", "tgt": "*", "fun": "test.ping"}]),
        Some(&token),
    );
    assert_like_salt("local_async.json", &started);
    let first_jid = started.json()["return"][0]["jid"]
        .as_str()
        .unwrap()
        .to_string();
    assert_like_salt(
        "local_batch.json",
        &post(
            json!([{"client": "local_batch", "tgt": "m1", "fun": "test.ping", "batch": "1"}]),
            Some(&token),
        ),
    );
    assert!(wait_for(Duration::from_secs(20), || {
        post(
            json!([{"client": "runner", "fun": "jobs.lookup_jid", "jid": first_jid}]),
            Some(&token),
        )
        .json()["return"][0]["m2"]
            == json!(true)
    }));
    assert_like_salt(
        "runner_lookup_jid.json",
        &post(
            json!([{"client": "runner", "fun": "jobs.lookup_jid", "jid": first_jid}]),
            Some(&token),
        ),
    );
    assert_like_salt(
        "runner_async.json",
        &post(
            json!([{"client": "runner_async", "fun": "jobs.list_jobs"}]),
            Some(&token),
        ),
    );
    assert_like_salt(
        "wheel_list_all.json",
        &post(
            json!([{"client": "wheel", "fun": "key.list_all"}]),
            Some(&token),
        ),
    );
    assert_like_salt(
        "wheel_finger.json",
        &post(
            json!([{"client": "wheel", "fun": "key.finger", "match": "m1"}]),
            Some(&token),
        ),
    );
    assert_like_salt(
        "no_token.json",
        &post(
            json!([{"client": "local", "tgt": "*", "fun": "test.ping"}]),
            None,
        ),
    );
    assert_like_salt(
        "bad_token.json",
        &post(
            json!([{"client": "local", "tgt": "*", "fun": "test.ping"}]),
            Some("deadbeef"),
        ),
    );
    assert_like_salt(
        "bad_client.json",
        &post(
            json!([{"client": "nosuch", "tgt": "*", "fun": "test.ping"}]),
            Some(&token),
        ),
    );
    assert_like_salt(
        "minions_post.json",
        &post_json(
            &f.url("/minions"),
            Some(&token),
            &json!([{"tgt": "m1", "fun": "test.ping"}]),
        ),
    );
    assert_like_salt(
        "jobs_jid.json",
        &get_json(&f.url(&format!("/jobs/{first_jid}")), Some(&token)),
    );
    assert_like_salt("keys.json", &get_json(&f.url("/keys"), Some(&token)));
    assert_like_salt("keys_mid.json", &get_json(&f.url("/keys/m1"), Some(&token)));
    assert_like_salt(
        "hook.json",
        &post_json(
            &f.url("/hook/ci/build"),
            Some(&token),
            &json!({"revision": "aa22"}),
        ),
    );
    assert_like_salt(
        "events_query_token.json",
        &get_json(&f.url(&format!("/events?token={token}")), None),
    );
    let minions = get_json(&f.url("/minions"), Some(&token));
    assert_eq!(minions.status, salt_recording("minions.json").0);

    // A form login works too (pepper and curl -d send forms).
    let form = http(
        "POST",
        &f.url("/login"),
        &[("Accept", "application/json")],
        Some((
            "application/x-www-form-urlencoded",
            "username=tester&password=testpass&eauth=file",
        )),
    );
    assert_eq!(form.status, 200, "{}", form.body);
    let tester = form.json()["return"][0]["token"]
        .as_str()
        .unwrap()
        .to_string();

    // Wrong passwords, unknown and empty eauth: 401 (CVE-2020-25592).
    for body in [
        json!({"username": "alice", "password": "nope", "eauth": "file"}),
        json!({"username": "alice", "password": "wonderland", "eauth": ""}),
        json!({"username": "alice", "password": "wonderland", "eauth": "nosuch"}),
        json!({"username": "alice", "password": "", "eauth": "file"}),
        json!({"username": "alice", "password": "wonderland"}),
    ] {
        let a = post_json(&f.url("/login"), None, &body);
        assert_eq!(a.status, 401, "{body}: {}", a.body);
    }

    // local: every minion's return.
    let a = local_all(&base, &token, "test.ping", &[]);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json(), json!({"return": [{"m1": true, "m2": true}]}));
    // The token may come in the body instead of the header.
    let a = post_json(
        &base,
        None,
        &json!([{"client": "local", "tgt": "m1", "fun": "test.arg", "arg": ["x"], "kwarg": {"k": "v"}, "token": token}]),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json()["return"][0]["m1"]["args"], json!(["x"]));
    // YAML by Accept.
    let y = http(
        "POST",
        &base,
        &[("Accept", "application/x-yaml"), ("X-Auth-Token", &token)],
        Some((
            "application/json",
            r#"[{"client":"local","tgt":"m1","fun":"test.ping"}]"#,
        )),
    );
    assert_eq!(y.status, 200);
    assert!(y.content_type.starts_with("application/x-yaml"));
    assert!(y.body.contains("m1: true"), "{}", y.body);
    // An Accept the API cannot answer is refused before any work is done
    // (every handler's extractor), in JSON.
    let refused = http(
        "POST",
        &base,
        &[("Accept", "image/png"), ("X-Auth-Token", &token)],
        Some((
            "application/json",
            r#"[{"client":"local","tgt":"m1","fun":"test.ping"}]"#,
        )),
    );
    assert_eq!(refused.status, 406, "{}", refused.body);
    assert!(refused.content_type.starts_with("application/json"));

    // local_async, then /jobs/<jid> once both returned.
    let a = post_json(
        &base,
        Some(&token),
        &json!([{"client": "local_async", "tgt": "*", "fun": "test.ping"}]),
    );
    let started = &a.json()["return"][0];
    let jid = started["jid"].as_str().unwrap().to_string();
    let mut minions: Vec<String> = serde_json::from_value(started["minions"].clone()).unwrap();
    minions.sort();
    assert_eq!(minions, ["m1", "m2"]);
    assert!(wait_for(Duration::from_secs(20), || {
        let j = get_json(&f.url(&format!("/jobs/{jid}")), Some(&token)).json();
        j["return"][0]["m1"] == json!(true) && j["return"][0]["m2"] == json!(true)
    }));
    let j = get_json(&f.url(&format!("/jobs/{jid}")), Some(&token)).json();
    assert_eq!(j["info"][0]["Function"], "test.ping");
    assert_eq!(j["info"][0]["jid"], json!(jid));
    let all = get_json(&f.url("/jobs"), Some(&token)).json();
    assert_eq!(all["return"][0][&jid]["Function"], "test.ping");

    // local_batch: one item per minion.
    let a = post_json(
        &base,
        Some(&token),
        &json!([{"client": "local_batch", "tgt": "*", "fun": "test.ping", "batch": "1"}]),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let mut got: Vec<String> = a.json()["return"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m.as_object().unwrap().keys().cloned().collect::<Vec<_>>())
        .collect();
    got.sort();
    assert_eq!(got, ["m1", "m2"]);

    // runner and wheel.
    let a = post_json(
        &base,
        Some(&token),
        &json!([{"client": "runner", "fun": "jobs.lookup_jid", "jid": jid}]),
    );
    assert_eq!(
        a.json()["return"][0],
        json!({"m1": true, "m2": true}),
        "{}",
        a.body
    );
    let a = post_json(
        &base,
        Some(&token),
        &json!([{"client": "wheel", "fun": "key.list_all"}]),
    );
    let w = &a.json()["return"][0];
    assert!(w["tag"].as_str().unwrap().starts_with("salt/wheel/"));
    assert_eq!(w["data"]["fun"], "wheel.key.list_all");
    assert_eq!(w["data"]["success"], true);
    assert_eq!(w["data"]["return"]["minions"], json!(["m1", "m2"]));
    let a = post_json(
        &base,
        Some(&token),
        &json!([{"client": "runner_async", "fun": "jobs.list_jobs"}]),
    );
    assert!(
        a.json()["return"][0]["tag"]
            .as_str()
            .unwrap()
            .starts_with("salt/run/"),
        "{}",
        a.body
    );

    // The convenience URLs.
    let m = get_json(&f.url("/minions"), Some(&token)).json();
    assert_eq!(
        m["return"][0]["m1"]["id"], "m1",
        "grains.items of every minion"
    );
    let m = get_json(&f.url("/minions/m2"), Some(&token)).json();
    assert_eq!(
        m["return"][0]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["m2"]
    );
    let p = post_json(
        &f.url("/minions"),
        Some(&token),
        &json!([{"tgt": "m1", "fun": "test.ping"}]),
    );
    assert_eq!(p.status, 202);
    let pj = p.json();
    let href = pj["_links"]["jobs"][0]["href"].as_str().unwrap();
    assert_eq!(
        href,
        format!("/jobs/{}", pj["return"][0]["jid"].as_str().unwrap())
    );
    let k = get_json(&f.url("/keys"), Some(&token)).json();
    assert_eq!(k["return"]["minions"], json!(["m1", "m2"]));
    assert_eq!(k["return"]["minions_pre"], json!([]));
    let k = get_json(&f.url("/keys/m1"), Some(&token)).json();
    assert!(k["return"]["minions"]["m1"].as_str().unwrap().contains(':'));
    let s = get_json(&f.url("/stats"), Some(&token));
    assert_eq!(s.status, 200);
    assert!(s.json()["halite-api"]["Requests"].as_u64().unwrap() > 0);

    // ACLs: tester may run test.* only; web may run test.* on m1 only.
    let a = local_all(&base, &tester, "test.ping", &[]);
    assert_eq!(a.status, 200);
    for (tok, chunk) in [
        (
            &tester,
            json!({"client": "local", "tgt": "*", "fun": "cmd.run", "arg": ["id"]}),
        ),
        (
            &tester,
            json!({"client": "local_async", "tgt": "*", "fun": "cmd.run", "arg": ["id"]}),
        ),
        (
            &tester,
            json!({"client": "local_batch", "tgt": "*", "fun": "cmd.run", "arg": ["id"]}),
        ),
        (
            &tester,
            json!({"client": "runner", "fun": "jobs.list_jobs"}),
        ),
        (
            &tester,
            json!({"client": "runner_async", "fun": "jobs.list_jobs"}),
        ),
        (&tester, json!({"client": "wheel", "fun": "key.list_all"})),
    ] {
        let a = post_json(&base, Some(tok), &json!([chunk]));
        assert_eq!(a.status, 401, "{chunk}: {}", a.body);
    }
    assert_eq!(get_json(&f.url("/jobs"), Some(&tester)).status, 401);
    assert_eq!(get_json(&f.url("/keys"), Some(&tester)).status, 401);
    let web = login(&base, "web", "webpass", "file");
    let a = post_json(
        &base,
        Some(&web),
        &json!([{"client": "local", "tgt": "m1", "fun": "test.ping"}]),
    );
    assert_eq!(a.json()["return"][0], json!({"m1": true}));
    let a = local_all(&base, &web, "test.ping", &[]);
    assert_eq!(a.status, 401, "m2 is outside web's target");
    let log = read(&f.path("api.log"));
    assert!(
        log.contains("refused") && log.contains("tester"),
        "refusals are logged with who: {log}"
    );

    // No token, a bad one, a non-hex one: 401 on every URL that needs one.
    for t in [None, Some("deadbeef"), Some("not-hex!")] {
        assert_eq!(
            post_json(
                &base,
                t,
                &json!([{"client": "local", "tgt": "*", "fun": "test.ping"}])
            )
            .status,
            401
        );
        for url in ["/minions", "/jobs", "/keys", "/stats"] {
            assert_eq!(get_json(&f.url(url), t).status, 401, "{url}");
        }
    }
    // Disabled / unknown clients: `ssh` as Salt refuses it when disabled.
    let a = post_json(
        &base,
        Some(&token),
        &json!([{"client": "ssh", "tgt": "*", "fun": "test.ping"}]),
    );
    assert_like_salt("ssh_disabled.json", &a);
    assert!(a.body.contains("Client disabled: 'ssh'"), "{}", a.body);

    // wheel_async answers {tag, jid} at once, like Salt's; the function's
    // return comes on the bus as salt/wheel/<jid>/ret.
    let tok3 = token.clone();
    let base3 = base.clone();
    let mut wheel_started = None;
    let lines = read_events(
        f.api_port,
        &token,
        Duration::from_secs(20),
        |l| l.starts_with("data: ") && l.contains("salt/wheel/") && l.contains("/ret"),
        || {
            let a = post_json(
                &base3,
                Some(&tok3),
                &json!([{"client": "wheel_async", "fun": "key.list_all"}]),
            );
            assert_like_salt("wheel_async.json", &a);
            wheel_started = Some(a.json()["return"][0].clone());
        },
    );
    let wheel_started = wheel_started.expect("wheel_async answered");
    let wheel_jid = wheel_started["jid"].as_str().unwrap();
    assert_eq!(wheel_started["tag"], format!("salt/wheel/{wheel_jid}"));
    let ret = lines
        .iter()
        .find(|l| l.starts_with("data: ") && l.contains(&format!("salt/wheel/{wheel_jid}/ret")))
        .expect("the wheel_async return event");
    let v: Value = serde_json::from_str(ret.trim_start_matches("data: ")).unwrap();
    assert_eq!(v["data"]["fun"], "wheel.key.list_all", "{v}");
    assert_eq!(v["data"]["success"], true, "{v}");
    assert!(
        v["data"]["return"]["minions"]
            .as_array()
            .is_some_and(|m| m.contains(&json!("m1"))),
        "{v}"
    );

    // Hooks fire salt/netapi/hook/<tag>; the event stream shows them.
    let port = f.api_port;
    let hook_url = f.url("/hook/ci/build/done");
    let tok2 = token.clone();
    let lines = read_events(
        port,
        &token,
        Duration::from_secs(20),
        |l| l.starts_with("data: ") && l.contains("salt/netapi/hook/ci/build/done"),
        || {
            let a = post_json(
                &hook_url,
                Some(&tok2),
                &json!({"revision": "aa22", "result": true}),
            );
            assert_eq!(a.json(), json!({"success": true}));
        },
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("tag: salt/netapi/hook/ci/build/done")),
        "{lines:?}"
    );
    let data = lines
        .iter()
        .find(|l| l.starts_with("data: ") && l.contains("aa22"))
        .expect("the hook's data line");
    let v: Value = serde_json::from_str(data.trim_start_matches("data: ")).unwrap();
    assert_eq!(
        v["data"]["post"],
        json!({"revision": "aa22", "result": true})
    );
    assert_eq!(v["tag"], "salt/netapi/hook/ci/build/done");
    // A refusal fires a salt/auth/api event naming who, what and why.
    let base2 = base.clone();
    let tester2 = tester.clone();
    let lines = read_events(
        port,
        &token,
        Duration::from_secs(20),
        |l| l.starts_with("data: ") && l.contains("\"refused\"") && l.contains("key.list_all"),
        || {
            let a = post_json(
                &base2,
                Some(&tester2),
                &json!([{"client": "wheel", "fun": "key.list_all"}]),
            );
            assert_eq!(a.status, 401);
        },
    );
    let refused = lines
        .iter()
        .find(|l| l.starts_with("data: ") && l.contains("key.list_all"))
        .unwrap_or_else(|| panic!("no salt/auth/api event: {lines:?}"));
    let v: Value = serde_json::from_str(refused.trim_start_matches("data: ")).unwrap();
    assert_eq!(v["tag"], "salt/auth/api");
    assert_eq!(v["data"]["user"], "tester");
    assert_eq!(v["data"]["reason"], "authorization");
    assert_eq!(v["data"]["what"], "wheel key.list_all");

    // POST /run: credentials in each chunk, no session.
    let a = post_json(
        &f.url("/run"),
        None,
        &json!([{"client": "local", "tgt": "m1", "fun": "test.ping", "username": "tester", "password": "testpass", "eauth": "file"}]),
    );
    assert_eq!(a.json(), json!({"return": [{"m1": true}]}), "{}", a.body);
    let a = post_json(
        &f.url("/run"),
        None,
        &json!([{"client": "local", "tgt": "m1", "fun": "test.ping", "username": "tester", "password": "nope", "eauth": "file"}]),
    );
    assert_eq!(a.status, 401);
    let a = post_json(
        &f.url("/run"),
        None,
        &json!([{"client": "local", "tgt": "m1", "fun": "test.ping"}]),
    );
    assert_eq!(a.status, 401);

    // Hooks need a token unless webhook_disable_auth.
    assert_eq!(post_json(&f.url("/hook/x"), None, &json!({})).status, 401);
    // No tokens in the query string (Salt 3008.5).
    assert_eq!(
        get_json(&f.url(&format!("/events?token={token}")), None).status,
        400
    );

    // Bodies over max_request_body_size are refused.
    let big =
        json!([{"client": "local", "tgt": "*", "fun": "test.arg", "arg": ["x".repeat(70000)]}]);
    assert_eq!(post_json(&base, Some(&token), &big).status, 413);

    // Tokens survive a restart of halite-api.
    api.kill();
    let mut api = f.start_api();
    let a = post_json(
        &base,
        Some(&token),
        &json!([{"client": "local", "tgt": "m1", "fun": "test.ping"}]),
    );
    assert_eq!(a.status, 200, "token lost across a restart: {}", a.body);

    // Logout revokes; --revoke-user revokes from the command line.
    let a = http(
        "POST",
        &f.url("/logout"),
        &[("X-Auth-Token", &token), ("Accept", "application/json")],
        None,
    );
    assert_eq!(a.json()["return"], "Your token has been cleared");
    assert_eq!(get_json(&f.url("/keys"), Some(&token)).status, 401);
    let out = Command::new(bin("halite-api"))
        .arg("-c")
        .arg(f.master_dir())
        .args(["--revoke-user", "tester"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("revoked 1"),
        "{out:?}"
    );
    assert_eq!(local_all(&base, &tester, "test.ping", &[]).status, 401);

    // Tokens expire (token_expire_user_override lets the user ask for 1 s).
    let a = post_json(
        &f.url("/login"),
        None,
        &json!({"username": "alice", "password": "wonderland", "eauth": "file", "token_expire": 1}),
    );
    let short = a.json()["return"][0]["token"].as_str().unwrap().to_string();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(get_json(&f.url("/keys"), Some(&short)).status, 401);

    // auto eauth (tests only): any password, its own ACL.
    let demo = login(&base, "demo", "anything", "auto");
    let a = local_all(&base, &demo, "test.ping", &[]);
    assert_eq!(a.status, 200);
    assert_eq!(local_all(&base, &demo, "test.version", &[]).status, 401);

    // pepper, the salt-api CLI, unchanged.
    if let Some(pepper) = Pepper::new(&f, &base, "alice", "wonderland", "file") {
        let (code, out, err) = pepper.run(&["*", "test.ping"]);
        assert_eq!(code, 0, "{out}{err}");
        let v: Value =
            serde_json::from_str(&out).unwrap_or_else(|_| panic!("pepper printed {out}{err}"));
        // pepper asks for full_return: Salt's {"ret", "retcode", "jid"} per minion.
        for id in ["m1", "m2"] {
            assert_eq!(v["return"][0][id]["ret"], json!(true), "{out}");
            assert_eq!(v["return"][0][id]["retcode"], json!(0), "{out}");
        }
        let (code, out, err) = pepper.run(&["--client", "runner", "jobs.list_jobs"]);
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains(&jid), "{out}{err}");
        let (code, out, err) = pepper.run(&["--client", "wheel", "key.list_all"]);
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("minions_pre"), "{out}{err}");
        // tester is outside the ACL of each client.
        for args in [
            vec!["*", "cmd.run", "id"],
            vec!["--client", "runner", "jobs.list_jobs"],
            vec!["--client", "wheel", "key.list_all"],
        ] {
            let (code, out, err) = pepper.with_user("tester", "testpass").run(&args);
            assert_ne!(code, 0, "{args:?}: {out}{err}");
            assert!(
                !out.contains("minions_pre") && !out.contains(&jid) && !out.contains("uid="),
                "{args:?}: {out}{err}"
            );
            assert!(
                err.contains("Authentication denied"),
                "{args:?}: {out}{err}"
            );
        }
    }

    // Failed logins are throttled per user (login_attempts: 8).
    for _ in 0..8 {
        post_json(
            &f.url("/login"),
            None,
            &json!({"username": "alice", "password": "bad", "eauth": "file"}),
        );
    }
    let a = post_json(
        &f.url("/login"),
        None,
        &json!({"username": "alice", "password": "wonderland", "eauth": "file"}),
    );
    assert_eq!(a.status, 429, "{}", a.body);
    api.kill();
}

struct LocalUser(String);

impl Drop for LocalUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").args(["-r", &self.0]).output();
    }
}

#[test]
fn pam_eauth_with_a_real_local_user() {
    if !can_run() {
        return;
    }
    let name = format!("hapi{}", std::process::id() % 100000);
    let made = Command::new("useradd")
        .args(["-M", "-s", "/bin/false", &name])
        .status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipping: useradd failed");
        return;
    }
    let user = LocalUser(name.clone());
    let mut chpasswd = Command::new("chpasswd")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        writeln!(chpasswd.stdin.take().unwrap(), "{name}:S3cret-pam").unwrap();
    }
    assert!(chpasswd.wait().unwrap().success());
    let f = Fleet::new();
    let _master = f.start_master(&format!(
        "{CLIENTS}rest_cherrypy:\n  port: {}\n  host: 127.0.0.1\n  disable_ssl: True\nexternal_auth:\n  pam:\n    {name}: ['test.*', '@runner', '@wheel']\n",
        f.api_port
    ));
    let _m1 = f.start_minion("m1", "");
    f.accept("m1");
    let _api = f.start_api();
    let base = f.url("");
    let bad = post_json(
        &f.url("/login"),
        None,
        &json!({"username": name, "password": "wrong", "eauth": "pam"}),
    );
    assert_eq!(bad.status, 401, "{}", bad.body);
    let token = login(&base, &name, "S3cret-pam", "pam");
    let a = local_all(&base, &token, "test.ping", &[]);
    assert_eq!(a.json(), json!({"return": [{"m1": true}]}));
    assert_eq!(local_all(&base, &token, "cmd.run", &["id"]).status, 401);
    if let Some(pepper) = Pepper::new(&f, &base, &name, "S3cret-pam", "pam") {
        let (code, out, err) = pepper.run(&["*", "test.ping"]);
        assert_eq!(code, 0, "{out}{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["return"][0]["m1"]["ret"], json!(true), "{out}");
        let (code, out, err) = pepper.run(&["--client", "wheel", "key.list_all"]);
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("\"m1\""), "{out}");
        let (code, out, err) = pepper.run(&["--client", "runner", "jobs.list_jobs"]);
        assert_eq!(code, 0, "{out}{err}");
    }
    drop(user);
}

#[test]
fn tls_with_a_test_certificate() {
    if !can_run() {
        return;
    }
    let f = Fleet::new();
    let (crt, key) = (f.path("api.crt"), f.path("api.key"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let _master = f.start_master(&format!(
        "{CLIENTS}rest_cherrypy:\n  port: {}\n  host: 127.0.0.1\n  ssl_crt: {}\n  ssl_key: {}\nexternal_auth:\n  auto:\n    demo: ['test.*']\n",
        f.api_port,
        crt.display(),
        key.display()
    ));
    let _api = f.start_api();
    let url = format!("https://127.0.0.1:{}/login", f.api_port);
    let out = Command::new("curl")
        .args(["-sS", "--cacert"])
        .arg(&crt)
        .args([
            "-H",
            "Accept: application/json",
            "-d",
            "username=demo",
            "-d",
            "password=x",
            "-d",
            "eauth=auto",
            &url,
        ])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{out:?}"));
    assert_eq!(v["return"][0]["user"], "demo");
    // Plain HTTP on the TLS port is not answered as HTTP.
    let plain = Command::new("curl")
        .args([
            "-sS",
            "-m",
            "5",
            &format!("http://127.0.0.1:{}/", f.api_port),
        ])
        .output()
        .unwrap();
    assert!(!plain.status.success() || !String::from_utf8_lossy(&plain.stdout).contains("Welcome"));
}
