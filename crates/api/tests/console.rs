//! The web console in a real browser: headless Chromium (Debian's
//! `chromium` and `chromium-driver`) driven over WebDriver with
//! fantoccini, against a real master, three real minions and a pending
//! one on loopback. It logs in, runs a state apply and watches it progress
//! live minion by minion (a state waits for a gate file the test creates
//! only after the browser has shown the first states), opens the failed
//! state in the highstate view, accepts the pending key, filters the jobs,
//! draws the requisite graph, checks that minion-provided markup renders
//! as text, and that a `test.*`-only user sees no forbidden button and is
//! refused by the server; a user whose ACL grants functions for some
//! arguments only gets exactly the buttons and runs the API allows, and
//! confirms a key reject or delete first. Each page's screenshot goes to
//! target/console-screenshots (printed).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on a broken fixture"
)]

mod common;

use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use fantoccini::{Client, ClientBuilder, Locator};
use futures_util::FutureExt;
use serde_json::{json, Value};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The markup a minion returns in the escaping checks: it must show as
/// text, and nothing of it may run.
const EVIL: &str = "<img src=x onerror=\"window.__xss=1\"><script>window.__xss=2</script>";

fn browser_present() -> bool {
    if !Path::new(CHROMIUM).exists() || !Path::new(CHROMEDRIVER).exists() {
        eprintln!(
            "skipping: {CHROMIUM} or {CHROMEDRIVER} is missing (apt-get install chromium chromium-driver; scripts/install-deps.sh does)"
        );
        return false;
    }
    true
}

/// chromedriver on a loopback port, killed when dropped.
fn start_chromedriver(f: &Fleet) -> (Daemon, u16) {
    let port = free_port();
    let log = f.path("chromedriver.log");
    let child = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .arg("--allowed-ips=127.0.0.1")
        .arg(format!("--log-path={}", log.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver");
    let daemon = Daemon { child, log };
    assert!(
        wait_for(Duration::from_secs(20), || std::net::TcpStream::connect((
            "127.0.0.1",
            port
        ))
        .is_ok()),
        "chromedriver did not listen: {}",
        daemon.log_text()
    );
    (daemon, port)
}

async fn browser(driver_port: u16, profile: &Path) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": CHROMIUM,
            "args": [
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--window-size=1280,900",
                format!("--user-data-dir={}", profile.display()),
            ]
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{driver_port}"))
        .await
        .expect("a WebDriver session in headless Chromium")
}

/// Waits until the page's JavaScript expression `cond` is true; fails
/// with `what` and the page's text when it never is.
async fn until(c: &Client, what: &str, cond: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v = c
            .execute(&format!("return !!({cond});"), vec![])
            .await
            .unwrap_or(Value::Bool(false));
        if v == Value::Bool(true) {
            return;
        }
        if Instant::now() > deadline {
            let text = c
                .execute("return document.body.innerText;", vec![])
                .await
                .unwrap_or_default();
            panic!(
                "never: {what} ({cond})\npage:\n{}",
                text.as_str().unwrap_or("")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn js(c: &Client, script: &str) -> Value {
    c.execute(script, vec![]).await.expect(script)
}

/// How many elements of the page match `css`.
async fn count(c: &Client, css: &str) -> Value {
    js(
        c,
        &format!("return document.querySelectorAll({css:?}).length;"),
    )
    .await
}

/// Minion-provided markup ([`EVIL`]) rendered as text: no element of it
/// in the page, none of its script ran.
async fn assert_nothing_ran(c: &Client) {
    assert_eq!(count(c, "main img, main script").await, json!(0));
    assert_eq!(
        js(c, "return window.__xss === undefined;").await,
        json!(true)
    );
}

/// The key buttons drawn, as "fun id".
async fn key_buttons(c: &Client) -> Value {
    js(
        c,
        "return [...document.querySelectorAll('button.key-action')].map(b => b.dataset.fun + ' ' + b.dataset.id);",
    )
    .await
}

fn shots_dir() -> PathBuf {
    // target/<profile>/halite-api → target/console-screenshots
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_halite-api"));
    let dir = bin
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .join("console-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

async fn shot(c: &Client, name: &str) {
    let png = c.screenshot().await.expect("screenshot");
    let path = shots_dir().join(format!("{name}.png"));
    std::fs::write(&path, png).expect("write screenshot");
    // Straight to the process's stderr, past libtest's capture, so the
    // paths show in a passing run too.
    let _ = writeln!(std::io::stderr(), "screenshot: {}", path.display());
}

async fn fill_in(c: &Client, css: &str, text: &str) {
    let e = c.find(Locator::Css(css)).await.expect(css);
    e.clear().await.expect("clear");
    e.send_keys(text).await.expect("type");
}

/// One step of a form: the `(css, text)` fields to fill, then what to
/// wait for (`what`, `cond`), as [`fill_until`] takes them.
type FormStep<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);

/// Fills each `(css, text)` field, then waits until `cond` holds
/// ([`until`]; `what` names it when it never does).
async fn fill_until(c: &Client, fields: &[(&str, &str)], what: &str, cond: &str) {
    for (css, text) in fields {
        fill_in(c, css, text).await;
    }
    until(c, what, cond).await;
}

async fn click(c: &Client, css: &str) {
    c.find(Locator::Css(css))
        .await
        .expect(css)
        .click()
        .await
        .expect("click");
}

/// Clicks a form's submit button once the page has enabled it (the
/// server said it would run the call).
async fn submit(c: &Client, css: &str) {
    until(
        c,
        &format!("{css} enabled"),
        &format!("!document.querySelector({css:?}).disabled"),
    )
    .await;
    click(c, css).await;
}

async fn log_in(c: &Client, base: &str, user: &str, password: &str) {
    c.goto(&format!("{base}/console/#/login"))
        .await
        .expect("goto");
    until(
        c,
        "the login form",
        "document.querySelector('#login-eauth option')",
    )
    .await;
    fill_in(c, "#login-user", user).await;
    fill_in(c, "#login-pass", password).await;
    click(c, "#login-eauth option[value=file]").await;
    click(c, "#login-submit").await;
    until(c, "the minions page", "document.querySelector('#minions')").await;
}

fn config(f: &Fleet, srv: &Path) -> String {
    let users = f.path("users");
    std::fs::write(
        &users,
        "admin:adminpass\ntester:testpass\nweb:webpass\nops:opspass\n",
    )
    .unwrap();
    format!(
        "netapi_enable_clients: [local, local_async, runner, wheel]\nfile_roots:\n  base:\n    - {}\nrest_cherrypy:\n  port: {}\n  host: 127.0.0.1\n  disable_ssl: True\nexternal_auth:\n  file:\n    ^filename: {}\n    admin: ['.*', '@runner', '@wheel']\n    tester: ['test.*']\n    web: [{{'m1': ['test.*', 'grains.items']}}]\n    ops: [{{'m1': [{{'state.apply': {{args: ['app']}}}}]}}, {{'@wheel': ['key.list_all', {{'key.reject': {{args: ['newbie']}}}}, {{'key.delete': {{args: ['newbie']}}}}]}}]\n  auto:\n    nobody: ['test.ping']\n",
        srv.display(),
        f.api_port,
        users.display()
    )
}

/// The SLS of the live run: a change, a state that waits for `gate`, a
/// failure whose name is markup, and a state after the gate.
fn app_sls(gate: &Path) -> String {
    format!(
        "first:\n  test.succeed_with_changes: []\ngate:\n  cmd.run:\n    - name: 'while [ ! -e {gate} ]; do sleep 0.1; done; echo open'\n    - require:\n      - test: first\nbroken:\n  test.fail_without_changes:\n    - name: '{EVIL}'\n    - require:\n      - cmd: gate\nafter:\n  test.nop:\n    - require:\n      - cmd: gate\n",
        gate = gate.display()
    )
}

#[test]
fn console_in_a_real_browser() {
    if !can_run() || !browser_present() {
        return;
    }
    let f = Fleet::new();
    let srv = f.path("srv");
    std::fs::create_dir_all(&srv).unwrap();
    let gate = f.path("gate");
    std::fs::write(srv.join("app.sls"), app_sls(&gate)).unwrap();
    let _master = f.start_master(&config(&f, &srv));
    let minions: Vec<Daemon> = ["m1", "m2", "m3"]
        .iter()
        .map(|id| f.start_minion(id, ""))
        .collect();
    for id in ["m1", "m2", "m3"] {
        f.accept(id);
    }
    let _newbie = f.start_minion("newbie", "");
    let _api = f.start_api();
    let base = f.url("");

    // Server side, without a browser: the headers and the CSRF rule.
    let page = http("GET", &f.url("/console/"), &[], None);
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("/console/assets/app.js"),
        "{}",
        page.body
    );
    for path in ["/console/", "/console/assets/app.js", "/console/api/eauth"] {
        let resp = ureq::get(&f.url(path)).call().expect(path);
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        let csp = header("content-security-policy");
        assert!(
            csp.starts_with("default-src 'self'; script-src 'self'; style-src 'self';"),
            "{path}: {csp}"
        );
        assert!(!csp.contains("unsafe-inline"), "{path}: {csp}");
        assert_eq!(header("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(header("x-frame-options"), "DENY", "{path}");
    }
    let admin_token = login(&base, "admin", "adminpass", "file");
    let cookie_only = http(
        "POST",
        &f.url("/"),
        &[
            ("Accept", "application/json"),
            ("Cookie", &format!("session_id={admin_token}")),
        ],
        Some((
            "application/json",
            r#"[{"client":"local","tgt":"*","fun":"test.ping"}]"#,
        )),
    );
    assert_eq!(
        cookie_only.status, 401,
        "a session cookie alone must not run a job (CSRF): {}",
        cookie_only.body
    );
    // A job whose return is markup, for the jobs page's escaping check.
    let echoed = post_json(
        &f.url("/"),
        Some(&admin_token),
        &json!([{"client": "local", "tgt": "m2", "fun": "test.echo", "arg": [EVIL]}]),
    );
    assert_eq!(
        echoed.json()["return"][0]["m2"],
        json!(EVIL),
        "{}",
        echoed.body
    );

    let (_driver, driver_port) = start_chromedriver(&f);
    let profile = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let outcome = rt.block_on(async {
        let c = browser(driver_port, profile.path()).await;
        // A failed assertion still ends the WebDriver session, so that
        // chromedriver closes Chromium (killing chromedriver alone would
        // leave the browser running).
        let outcome = AssertUnwindSafe(drive(&c, &f, &base, &gate))
            .catch_unwind()
            .await;
        let _ = c.close().await;
        outcome
    });
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
    drop(minions);
}

/// The console's security headers, on every answer of its own.
fn assert_console_headers(a: &Answer, what: &str) {
    assert!(
        a.header("content-security-policy")
            .starts_with("default-src 'self'; script-src 'self'; style-src 'self';"),
        "{what}: {:?}",
        a.headers
    );
    assert_eq!(a.header("x-content-type-options"), "nosniff", "{what}");
    assert_eq!(a.header("x-frame-options"), "DENY", "{what}");
    assert_eq!(a.header("referrer-policy"), "no-referrer", "{what}");
}

/// A body `POST /console/api/allowed` cannot read (not JSON, not a list,
/// no JSON content type) gets the console's JSON error with its security
/// headers, not axum's plain-text rejection; the caller is authenticated
/// first, and a good body is still answered. No browser needed.
#[test]
fn allowed_answers_a_malformed_body_with_the_consoles_json_error() {
    if !can_run() {
        return;
    }
    let f = Fleet::new();
    let srv = f.path("srv");
    std::fs::create_dir_all(&srv).unwrap();
    let _master = f.start_master(&config(&f, &srv));
    let _api = f.start_api();
    let token = login(&f.url(""), "admin", "adminpass", "file");
    let url = f.url("/console/api/allowed");
    let ask = |token: &str, body: Option<(&str, &str)>| {
        http(
            "POST",
            &url,
            &[("Accept", "application/json"), ("X-Auth-Token", token)],
            body,
        )
    };
    for (what, body) in [
        ("broken JSON", Some(("application/json", "[{\"client\": "))),
        (
            "not a list",
            Some(("application/json", r#"{"client": "local"}"#)),
        ),
        ("no JSON content type", Some(("text/plain", "[]"))),
        ("no body", None),
    ] {
        let a = ask(&token, body);
        assert_eq!(a.status, 400, "{what}: {}", a.body);
        assert!(
            a.content_type.starts_with("application/json"),
            "{what}: {}",
            a.content_type
        );
        let v = a.json();
        assert_eq!(v["status"], 400, "{what}: {v}");
        let text = v["return"].as_str().unwrap_or_default();
        assert!(
            text.contains("JSON list of lowstate chunks"),
            "{what}: {text}"
        );
        assert_console_headers(&a, what);
    }
    // Without a valid token the answer is the login error, not the body's.
    let a = ask("not-a-token", Some(("application/json", "[{")));
    assert_eq!(a.status, 401, "{}", a.body);
    assert_console_headers(&a, "no token");
    // A good body is answered as before.
    let a = ask(
        &token,
        Some((
            "application/json",
            r#"[{"client": "local", "tgt": "*", "fun": "test.ping"}]"#,
        )),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json(), json!({"allowed": [true]}));
    assert_console_headers(&a, "a good body");
}

async fn drive(c: &Client, f: &Fleet, base: &str, gate: &Path) {
    // The login page offers the configured backends.
    c.goto(&format!("{base}/console/")).await.expect("goto");
    until(
        c,
        "the login form",
        "document.querySelector('#login-eauth option')",
    )
    .await;
    let backends = js(
        c,
        "return [...document.querySelectorAll('#login-eauth option')].map(o => o.value);",
    )
    .await;
    assert_eq!(backends, json!(["auto", "file"]));
    shot(c, "login").await;
    log_in(c, base, "admin", "adminpass").await;

    // Minions: three accepted, one pending, with grains and last seen.
    until(
        c,
        "four minions listed",
        "document.querySelectorAll('#minions tbody tr').length === 4",
    )
    .await;
    let keys = js(
        c,
        "return Object.fromEntries([...document.querySelectorAll('#minions tbody tr')].map(r => [r.dataset.minion, r.querySelector('td.key').innerText]));",
    )
    .await;
    assert_eq!(
        keys,
        json!({"m1": "accepted", "m2": "accepted", "m3": "accepted", "newbie": "pending"})
    );
    let seen = js(
        c,
        "return document.querySelector('tr[data-minion=m1] td.seen').innerText;",
    )
    .await;
    assert!(seen.as_str().unwrap().ends_with("UTC"), "{seen}");
    click(c, "tr[data-minion=m1] details summary").await;
    let grains = js(
        c,
        "return document.querySelector('tr[data-minion=m1] details pre').innerText;",
    )
    .await;
    assert!(
        grains.as_str().unwrap().contains("\"id\": \"m1\""),
        "{grains}"
    );
    shot(c, "minions").await;

    // Live: start state.apply app on m* from the page and watch it.
    c.goto(&format!("{base}/console/#/live"))
        .await
        .expect("goto");
    until(c, "the run form and a live stream", "document.querySelector('#run-form') && document.querySelector('#stream-status').dataset.status === 'live'").await;
    fill_in(c, "#run-tgt", "m*").await;
    fill_in(c, "#run-sls", "app").await;
    submit(c, "#run-submit").await;
    // Each minion has finished `first` and waits at the gate: the page
    // shows them running with one state done, before any returned.
    until(
        c,
        "three minions running with their first state shown",
        "[...document.querySelectorAll('.minion-run')].filter(m => m.dataset.status === 'running' && m.querySelector('li.state-row.changed')).length === 3",
    )
    .await;
    let running = js(
        c,
        "return document.querySelector('.job-run .totals .minions-done').innerText;",
    )
    .await;
    assert_eq!(running, json!("0/3 minions finished"));
    shot(c, "live-running").await;
    std::fs::write(gate, "open").unwrap();
    until(
        c,
        "all three minions finished with a failure",
        "[...document.querySelectorAll('.minion-run')].filter(m => m.dataset.status === 'failed').length === 3",
    )
    .await;
    let rows = js(
        c,
        "return [...document.querySelectorAll('.minion-run[data-minion=m1] li.state-row')].map(li => li.className.replace('state-row ', ''));",
    )
    .await;
    assert_eq!(
        rows,
        json!(["failed", "changed", "changed", "ok"]),
        "failures first, then by run order"
    );
    let counts = js(
        c,
        "return document.querySelector('.minion-run[data-minion=m1] .counters').innerText;",
    )
    .await;
    assert_eq!(counts, json!("4/4 done · 1 ok · 2 changed · 1 failed"));
    let totals = js(
        c,
        "return document.querySelector('.job-run .totals').innerText;",
    )
    .await;
    assert!(
        totals.as_str().unwrap().starts_with("3/3 minions finished"),
        "{totals}"
    );
    // Minion-provided markup shows as text; nothing of it ran.
    let comment = js(
        c,
        "return document.querySelector('.minion-run[data-minion=m1] li.failed').innerText;",
    )
    .await;
    assert!(comment.as_str().unwrap().contains("Failure!"), "{comment}");
    shot(c, "live-done").await;

    // The failed state in the highstate view.
    click(c, ".minion-run[data-minion=m1] li.state-row.failed a").await;
    until(
        c,
        "the highstate view",
        "document.querySelector('pre.highstate .state.selected')",
    )
    .await;
    let block = js(
        c,
        "return document.querySelector('pre.highstate .state.selected').innerText;",
    )
    .await;
    let block = block.as_str().unwrap();
    assert!(block.contains("Result: False"), "{block}");
    assert!(
        block.contains("Function: test.fail_without_changes"),
        "{block}"
    );
    assert!(block.contains(&format!("Name: {EVIL}")), "{block}");
    let summary = js(
        c,
        "return document.querySelector('pre.highstate').innerText;",
    )
    .await;
    assert!(
        summary.as_str().unwrap().contains("Failed:    1"),
        "{summary}"
    );
    assert_nothing_ran(c).await;
    shot(c, "highstate-failed").await;

    // Jobs: the filters, and a return that is markup shows as text.
    c.goto(&format!("{base}/console/#/jobs"))
        .await
        .expect("goto");
    until(
        c,
        "the jobs list",
        "document.querySelectorAll('#jobs tbody tr').length >= 2",
    )
    .await;
    let filters: [FormStep; 2] = [
        (
            &[("#f-fun", "test.echo")],
            "only the test.echo job",
            "[...document.querySelectorAll('#jobs tbody td.fun')].every(td => td.innerText === 'test.echo') && document.querySelectorAll('#jobs tbody tr').length === 1",
        ),
        (
            &[("#f-fun", "state.*"), ("#f-user", "admin")],
            "the state.apply job by admin",
            "document.querySelectorAll('#jobs tbody tr').length === 1 && document.querySelector('#jobs tbody td.fun').innerText === 'state.apply'",
        ),
    ];
    for (fields, what, cond) in filters {
        fill_until(c, fields, what, cond).await;
    }
    shot(c, "jobs").await;
    // The time filter: the job started before 2099 and after 2000 (UTC).
    let set_from = |when: &str| {
        format!("const e = document.querySelector('#f-from'); e.value = '{when}'; e.dispatchEvent(new Event('input', {{bubbles: true}}));")
    };
    js(c, &set_from("2099-01-01T00:00")).await;
    until(
        c,
        "no job after 2099",
        "document.querySelectorAll('#jobs tbody tr').length === 0",
    )
    .await;
    js(c, &set_from("2000-01-01T00:00")).await;
    until(
        c,
        "the job after 2000",
        "document.querySelectorAll('#jobs tbody tr').length === 1",
    )
    .await;
    fill_until(
        c,
        &[("#f-fun", "test.echo"), ("#f-user", "")],
        "the test.echo job",
        "document.querySelector('#jobs tbody td.fun')?.innerText === 'test.echo'",
    )
    .await;
    click(c, "#jobs tbody tr a").await;
    until(
        c,
        "m2's return",
        "document.querySelector('section.return[data-minion=m2] pre')",
    )
    .await;
    let ret = js(
        c,
        "return document.querySelector('section.return[data-minion=m2] pre').innerText;",
    )
    .await;
    assert_eq!(ret, json!(EVIL));
    assert_nothing_ran(c).await;
    shot(c, "job-return-escaped").await;

    // The requisite graph of app.sls on m1.
    c.goto(&format!("{base}/console/#/graph"))
        .await
        .expect("goto");
    until(c, "the graph form", "document.querySelector('#graph-form')").await;
    fill_in(c, "#g-tgt", "m1").await;
    fill_in(c, "#g-sls", "app").await;
    submit(c, "#g-submit").await;
    until(c, "the graph", "document.querySelector('svg.graph')").await;
    assert_eq!(count(c, "svg.graph g.node").await, json!(4));
    assert_eq!(count(c, "svg.graph g.edge").await, json!(3));
    // `first` is drawn above `gate`, and `gate` above its two dependents.
    let ys = js(
        c,
        "return Object.fromEntries([...document.querySelectorAll('svg.graph g.node')].map(g => [g.querySelector('title').textContent.split('_|-')[1], g.getBBox().y + g.transform.baseVal[0].matrix.f]));",
    )
    .await;
    let y = |k: &str| ys[k].as_f64().unwrap();
    assert!(y("first") < y("gate") && y("gate") < y("after"), "{ys}");
    assert_eq!(y("after"), y("broken"), "{ys}");
    shot(c, "graph").await;

    // Accept the pending key from the minions page.
    c.goto(&format!("{base}/console/#/minions"))
        .await
        .expect("goto");
    until(
        c,
        "newbie's accept button",
        "document.querySelector('button.accept[data-id=newbie]')",
    )
    .await;
    click(c, "button.accept[data-id=newbie]").await;
    until(
        c,
        "newbie accepted",
        "document.querySelector('tr[data-minion=newbie] td.key')?.innerText === 'accepted'",
    )
    .await;
    assert!(f.key_listed("minions", "newbie"));
    shot(c, "minions-accepted").await;

    // A test.*-only user: no key buttons, no run form, no jobs or graph
    // pages; and the server refuses a state run sent with their token.
    click(c, "#logout").await;
    until(c, "the login page", "document.querySelector('#login')").await;
    log_in(c, base, "tester", "testpass").await;
    assert_eq!(count(c, "button.key-action").await, json!(0));
    assert_eq!(
        js(
            c,
            "return [...document.querySelectorAll('#nav a')].map(a => a.innerText);"
        )
        .await,
        json!(["Minions", "Live"])
    );
    assert_eq!(
        count(c, "#minions tbody tr").await,
        json!(4),
        "the accepted minions, without key states"
    );
    shot(c, "tester-minions").await;
    c.goto(&format!("{base}/console/#/live"))
        .await
        .expect("goto");
    until(
        c,
        "the live page",
        "document.querySelector('#stream-status')",
    )
    .await;
    assert_eq!(
        js(c, "return document.querySelector('#run-form');").await,
        Value::Null
    );
    let refused = js(
        c,
        "const s = JSON.parse(sessionStorage.getItem('halite-console-session')); return fetch('/', {method: 'POST', headers: {'X-Auth-Token': s.token, 'Content-Type': 'application/json', Accept: 'application/json'}, body: JSON.stringify([{client: 'local', tgt: '*', fun: 'state.apply', arg: ['app']}])}).then(r => r.status);",
    )
    .await;
    assert_eq!(refused, json!(401));
    let refused = js(
        c,
        "const s = JSON.parse(sessionStorage.getItem('halite-console-session')); return fetch('/', {method: 'POST', headers: {'X-Auth-Token': s.token, 'Content-Type': 'application/json', Accept: 'application/json'}, body: JSON.stringify([{client: 'wheel', fun: 'key.delete', match: 'newbie'}])}).then(r => r.status);",
    )
    .await;
    assert_eq!(refused, json!(401));
    shot(c, "tester-live").await;

    // A user whose ACL names a target sees only that minion, with grains.
    click(c, "#logout").await;
    until(c, "the login page", "document.querySelector('#login')").await;
    log_in(c, base, "web", "webpass").await;
    assert_eq!(
        js(c, "return [...document.querySelectorAll('#minions tbody tr')].map(r => r.dataset.minion);").await,
        json!(["m1"])
    );
    assert_eq!(
        js(
            c,
            "return !!document.querySelector('tr[data-minion=m1] details pre');"
        )
        .await,
        json!(true)
    );
    assert_eq!(count(c, "button.key-action").await, json!(0));

    ops_with_argument_conditions(c, f, base).await;
}

/// A user whose ACL grants functions for some arguments only (`ops`:
/// `state.apply app` on m1, `key.reject`/`key.delete` of newbie): the
/// console draws the buttons and enables the run exactly where the API
/// would allow them, and asks before a reject or a delete.
async fn ops_with_argument_conditions(c: &Client, f: &Fleet, base: &str) {
    click(c, "#logout").await;
    until(c, "the login page", "document.querySelector('#login')").await;
    log_in(c, base, "ops", "opspass").await;
    until(
        c,
        "four minions listed",
        "document.querySelectorAll('#minions tbody tr').length === 4",
    )
    .await;
    assert_eq!(
        key_buttons(c).await,
        json!(["key.reject newbie", "key.delete newbie"]),
        "only newbie's buttons: the key functions are granted for newbie alone"
    );
    shot(c, "ops-minions").await;

    // Delete asks first; cancelled, nothing happens.
    click(c, "button.delete[data-id=newbie]").await;
    until(
        c,
        "the confirm dialog",
        "document.querySelector('dialog#confirm[open]')",
    )
    .await;
    let question = js(
        c,
        "return document.querySelector('dialog#confirm .question').innerText;",
    )
    .await;
    assert!(
        question
            .as_str()
            .unwrap()
            .contains("Delete the key of newbie?"),
        "{question}"
    );
    shot(c, "ops-confirm-delete").await;
    click(c, "#confirm-no").await;
    until(
        c,
        "the dialog closed",
        "!document.querySelector('dialog#confirm')",
    )
    .await;
    assert!(
        f.key_listed("minions", "newbie"),
        "a cancelled delete acted"
    );
    assert_eq!(
        key_buttons(c).await,
        json!(["key.reject newbie", "key.delete newbie"])
    );

    // Reject, confirmed: the key is rejected, and only delete is left
    // (accepting is not in ops's list).
    click(c, "button.reject[data-id=newbie]").await;
    until(
        c,
        "the confirm dialog",
        "document.querySelector('dialog#confirm[open]')",
    )
    .await;
    click(c, "#confirm-yes").await;
    until(
        c,
        "newbie rejected",
        "document.querySelector('tr[data-minion=newbie] td.key')?.innerText === 'rejected'",
    )
    .await;
    assert!(f.key_listed("minions_rejected", "newbie"));
    assert_eq!(key_buttons(c).await, json!(["key.delete newbie"]));

    // The run form: enabled only for what ops may run (app on m1).
    c.goto(&format!("{base}/console/#/live"))
        .await
        .expect("goto");
    until(c, "the run form", "document.querySelector('#run-form')").await;
    const REFUSED: &str = "document.querySelector('#run-submit').disabled";
    const ALLOWED: &str = "!document.querySelector('#run-submit').disabled";
    let steps: [FormStep; 4] = [
        (
            &[("#run-tgt", "m1"), ("#run-sls", "other")],
            "the run refused before it is sent",
            "document.querySelector('#run-submit').disabled && !document.querySelector('#run-denied').hidden",
        ),
        (
            &[("#run-sls", "app")],
            "the run allowed",
            "!document.querySelector('#run-submit').disabled && document.querySelector('#run-denied').hidden",
        ),
        (&[("#run-tgt", "m*")], "m* refused: m2 and m3 are not ops's", REFUSED),
        (&[("#run-tgt", "m1")], "the run allowed again", ALLOWED),
    ];
    for (n, (fields, what, cond)) in steps.into_iter().enumerate() {
        fill_until(c, fields, what, cond).await;
        if n == 0 {
            shot(c, "ops-run-denied").await;
        }
    }
    submit(c, "#run-submit").await;
    until(
        c,
        "m1's run finished",
        "[...document.querySelectorAll('.minion-run[data-minion=m1]')].some(m => m.dataset.status !== 'running')",
    )
    .await;
    shot(c, "ops-run-done").await;
}
