//! Remote sources on a real loopback HTTP(S) server: `file.managed` with
//! `https://` sources and hash files, lists with a 404, a redirect, a
//! server that stalls, a wrong hash (old file kept), TLS verified against
//! a CA the test makes. Expected comments are what Salt 3008.5 returned
//! for the same SLS against the same server (`salt-call --local` with
//! `ca_bundle` set), with the port substituted.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

mod support;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use halite_modules::exec::file::meta::{file_hash, HashType};
use halite_modules::host::LogEvents;
use halite_modules::{table, Args, Host, LocalFileClient};
use halite_state::{LowChunk, Map, StateCall, StateModule, StateResult, Value};
use serde_json::json;
use support::{make_certs, Server};

const GOOD_SHA: &str = "12543eb212bfaeb4ba048745a032a4d4ad9f61231c89f503ef57228d5af52c8a";

struct Fixture {
    _dir: tempfile::TempDir,
    www: PathBuf,
    out: PathBuf,
    cache: PathBuf,
    https: Server,
    http: Server,
    host: Host,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    let www = root.join("www");
    let out = root.join("out");
    let roots = root.join("roots");
    for d in [&www, &out, &roots] {
        fs::create_dir_all(d).expect("mkdir");
    }
    fs::write(www.join("good.txt"), "hello remote\n").expect("write");
    fs::create_dir_all(root.join("t/app")).expect("mkdir");
    fs::write(root.join("t/app/readme"), "hi\n").expect("write");
    let st = Command::new("tar")
        .arg("-czf")
        .arg(www.join("app.tar.gz"))
        .arg("-C")
        .arg(root.join("t"))
        .arg("app")
        .status()
        .expect("run tar");
    assert!(st.success());
    let app_sha = file_hash(&www.join("app.tar.gz"), HashType::Sha256).expect("hash");
    fs::write(
        www.join("SHA256SUMS"),
        format!(
            "{}  other.txt\n{GOOD_SHA}  good.txt\n{app_sha}  app.tar.gz\n",
            "0".repeat(64)
        ),
    )
    .expect("write");
    let (ca, cert, key) = make_certs(root);
    let https = Server::start(&www, Some((&cert, &key)));
    let http = Server::start(&www, None);
    let cache = root.join("cache");
    let mut file_roots = BTreeMap::new();
    file_roots.insert("base".to_string(), vec![roots]);
    let host = Host {
        opts: json!({
            "cachedir": cache.display().to_string(),
            "ca_bundle": ca.display().to_string(),
            "http_request_timeout": 2,
        }),
        grains: json!({}),
        pillar: json!({}),
        files: Arc::new(LocalFileClient::new(file_roots)),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    };
    Fixture {
        _dir: dir,
        www,
        out,
        cache,
        https,
        http,
        host,
    }
}

fn managed(host: &Host, name: &Path, args: Value) -> StateResult {
    managed_mode(host, name, args, false)
}

fn managed_mode(host: &Host, name: &Path, args: Value, test: bool) -> StateResult {
    let mut m = Map::new();
    m.insert("state".into(), json!("file"));
    m.insert("name".into(), json!(name.display().to_string()));
    m.insert("__env__".into(), json!("base"));
    m.insert("__id__".into(), json!("t"));
    m.insert("__sls__".into(), json!("t"));
    if let Value::Object(a) = args {
        m.extend(a);
    }
    m.insert("fun".into(), json!("managed"));
    let chunk = LowChunk::from(m);
    let call = StateCall {
        chunk: &chunk,
        test,
        env: host,
        sfun: None,
        reqs: None,
    };
    match halite_modules::states::file::MODULE.call("managed", &call) {
        Ok(r) => r,
        Err(e) => panic!("file.managed returned an error: {e}"),
    }
}

impl Fixture {
    fn https(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}/{path}", self.https.port)
    }
    fn http(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.http.port)
    }
}

#[test]
fn https_source_with_a_hash_file_is_downloaded_cached_and_written() {
    let f = fixture();
    let dest = f.out.join("good.txt");
    let r = managed(
        &f.host,
        &dest,
        json!({"source": f.https("good.txt"), "source_hash": f.https("SHA256SUMS")}),
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(r.comment, format!("File {} updated", dest.display()));
    assert_eq!(
        Value::Object(r.changes.clone()),
        json!({"diff": "New file", "mode": "0644"})
    );
    assert_eq!(fs::read_to_string(&dest).unwrap(), "hello remote\n");
    // Salt's extrn_files layout: <cachedir>/extrn_files/<saltenv>/<host><port>/<path>.
    let cached = f.cache.join(format!(
        "extrn_files/base/127.0.0.1{}/good.txt",
        f.https.port
    ));
    assert_eq!(fs::read_to_string(&cached).unwrap(), "hello remote\n");

    // The cached copy has the wanted hash: it is used without asking the
    // server (which no longer has the file).
    fs::remove_file(f.www.join("good.txt")).unwrap();
    let again = f.out.join("again.txt");
    let r = managed(
        &f.host,
        &again,
        json!({"source": f.https("good.txt"), "source_hash": GOOD_SHA}),
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(fs::read_to_string(&again).unwrap(), "hello remote\n");
}

#[test]
fn wrong_hash_fails_and_keeps_the_old_file() {
    let f = fixture();
    let dest = f.out.join("wrong.txt");
    fs::write(&dest, "old\n").unwrap();
    let bad = "1".repeat(64);
    let url = f.https("good.txt");
    let r = managed(
        &f.host,
        &dest,
        json!({"source": url, "source_hash": format!("sha256={bad}")}),
    );
    assert_eq!(r.result, Some(false));
    assert_eq!(r.comment, format!("Specified sha256 checksum for {url} ({bad}) does not match actual checksum ({GOOD_SHA}). If the 'source_hash' value refers to a remote file with multiple possible matches, then it may be necessary to set 'source_hash_name'."));
    assert!(r.changes.is_empty());
    assert_eq!(fs::read_to_string(&dest).unwrap(), "old\n");
}

#[test]
fn source_hash_name_picks_the_line_of_a_multi_file_hash_list() {
    let f = fixture();
    let dest = f.out.join("hashname.txt");
    let r = managed(
        &f.host,
        &dest,
        json!({"source": f.http("good.txt"), "source_hash": f.http("SHA256SUMS"),
               "source_hash_name": "other.txt"}),
    );
    assert_eq!(r.result, Some(false));
    assert_eq!(
        r.comment,
        format!(
            "Specified sha256 checksum for {} ({}) does not match actual checksum ({GOOD_SHA})",
            dest.display(),
            "0".repeat(64)
        )
    );
    assert!(!dest.exists());
}

#[test]
fn a_404_in_a_list_falls_through_to_the_next_source() {
    let f = fixture();
    let dest = f.out.join("listed.txt");
    let r = managed(
        &f.host,
        &dest,
        json!({"source": [f.https("missing.txt"), f.https("good.txt")], "source_hash": GOOD_SHA}),
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(fs::read_to_string(&dest).unwrap(), "hello remote\n");

    let none = f.out.join("allmissing.txt");
    let r = managed(
        &f.host,
        &none,
        json!({"source": [f.https("missing1.txt"), f.https("missing2.txt")], "skip_verify": true}),
    );
    assert_eq!(r.result, Some(false));
    assert_eq!(
        r.comment,
        "Unable to manage file: none of the specified sources were found"
    );
}

#[test]
fn a_missing_single_source_and_a_missing_hash_get_salts_errors() {
    let f = fixture();
    let url = f.https("missing.txt");
    let r = managed(
        &f.host,
        &f.out.join("onemissing.txt"),
        json!({"source": url, "skip_verify": true}),
    );
    assert_eq!(r.result, Some(false));
    // Salt prints the server's reason phrase ("File not found" from
    // python's http.server); halite prints the standard one.
    assert_eq!(
        r.comment,
        format!("Unable to manage file: Failed to cache {url}: Error: HTTP 404: Not Found reading /missing.txt")
    );

    let url = f.https("good.txt");
    let r = managed(&f.host, &f.out.join("nohash.txt"), json!({"source": url}));
    assert_eq!(r.result, Some(false));
    assert_eq!(r.comment, format!("Unable to manage file: Unable to verify upstream hash of source file {url}, please set source_hash or set skip_verify to True"));
}

#[test]
fn redirects_are_followed() {
    let f = fixture();
    let dest = f.out.join("redirected.txt");
    let r = managed(
        &f.host,
        &dest,
        json!({"source": f.https("redirect/good.txt"), "skip_verify": true}),
    );
    assert_eq!(r.result, Some(true), "{}", r.comment);
    assert_eq!(fs::read_to_string(&dest).unwrap(), "hello remote\n");
}

#[test]
fn a_stalled_server_times_out_with_salts_error() {
    let f = fixture();
    let url = f.http("stall/x");
    let dest = f.out.join("stalled.txt");
    let r = managed(&f.host, &dest, json!({"source": url, "skip_verify": true}));
    assert_eq!(r.result, Some(false));
    assert_eq!(
        r.comment,
        format!("Unable to manage file: Failed to cache {url}: Error: Timeout during request reading /stall/x")
    );
    assert!(!dest.exists());
}

#[test]
fn tls_is_verified_against_the_trusted_cas() {
    let f = fixture();
    // Without the test CA (only the system store) the server is refused.
    let mut host = f.host.clone();
    if let Value::Object(o) = &mut host.opts {
        o.remove("ca_bundle");
    }
    let dest = f.out.join("untrusted.txt");
    let r = managed(
        &host,
        &dest,
        json!({"source": f.https("good.txt"), "skip_verify": true}),
    );
    assert_eq!(r.result, Some(false));
    assert!(
        r.comment.contains("Failed to cache") && r.comment.to_lowercase().contains("certificate"),
        "{}",
        r.comment
    );
    assert!(!dest.exists());
}

fn extracted(host: &Host, name: &Path, args: Value, test: bool) -> Value {
    let mut kwargs = args.as_object().cloned().unwrap_or_default();
    if test {
        kwargs.insert("test".into(), json!(true));
    }
    let args = Args {
        positional: vec![
            json!("archive.extracted"),
            json!(name.display().to_string()),
        ],
        kwargs,
    };
    let ret = host.call("state.single", &args).expect("state.single");
    let obj = ret.as_object().expect("a state return");
    obj.values().next().cloned().expect("one state")
}

#[test]
fn archive_extracted_from_https_with_salts_comments() {
    let f = fixture();
    let url = f.https("app.tar.gz");
    let x1 = f.out.join("x1");
    // Test mode does not download (Salt's wording).
    let r = extracted(
        &f.host,
        &x1,
        json!({"source": url, "source_hash": f.https("SHA256SUMS")}),
        true,
    );
    assert_eq!(r["result"], Value::Null, "{r}");
    assert_eq!(r["comment"], json!(format!("Archive {url} would be cached (if necessary) and checked to discover if extraction is needed")));
    assert!(!f.cache.join("extrn_files").exists());

    let r = extracted(
        &f.host,
        &x1,
        json!({"source": url, "source_hash": f.https("SHA256SUMS")}),
        false,
    );
    assert_eq!(r["result"], json!(true), "{r}");
    assert_eq!(
        r["comment"],
        json!(format!(
            "{url} extracted to {}/, due to absence of one or more files/dirs",
            x1.display()
        ))
    );
    assert_eq!(
        r["changes"]["extracted_files"],
        json!(["app", "app/readme"])
    );
    assert_eq!(fs::read_to_string(x1.join("app/readme")).unwrap(), "hi\n");

    let bad = "1".repeat(64);
    let x2 = f.out.join("x2");
    let r = extracted(
        &f.host,
        &x2,
        json!({"source": url, "source_hash": format!("sha256={bad}")}),
        false,
    );
    assert_eq!(r["result"], json!(false));
    let cached = f.cache.join(format!(
        "extrn_files/base/127.0.0.1{}/app.tar.gz",
        f.https.port
    ));
    let app_sha = file_hash(&cached, HashType::Sha256).unwrap();
    assert_eq!(r["comment"], json!(format!("File is cached to {}, but the hash ({app_sha}) does not match the specified hash ({bad})", cached.display())));
    assert!(!x2.exists());

    let r = extracted(&f.host, &f.out.join("x3"), json!({"source": url}), false);
    assert_eq!(r["comment"], json!(format!("Unable to verify upstream hash of source file {url}, please set source_hash or set skip_verify or use_etag to True")));

    let r = extracted(
        &f.host,
        &f.out.join("x4"),
        json!({"source": f.https("nope.tar.gz"), "skip_verify": true}),
        false,
    );
    assert_eq!(r["result"], json!(false));
    assert_eq!(
        r["comment"],
        json!("Error: HTTP 404: Not Found reading /nope.tar.gz")
    );
}

fn call(host: &Host, fun: &str, positional: Vec<Value>) -> Result<Value, String> {
    let args = Args {
        positional,
        kwargs: Map::new(),
    };
    host.call(fun, &args).map_err(|e| e.to_string())
}

#[test]
fn cp_get_url_and_cache_file_fetch_urls() {
    let f = fixture();
    let url = f.https("good.txt");
    let cached = f.cache.join(format!(
        "extrn_files/base/127.0.0.1{}/good.txt",
        f.https.port
    ));
    // No destination: the cached copy, as Salt answers.
    let got = call(&f.host, "cp.get_url", vec![json!(url)]).unwrap();
    assert_eq!(got, json!(cached.display().to_string()));
    let dest = f.out.join("dl.txt");
    let got = call(
        &f.host,
        "cp.get_url",
        vec![json!(url), json!(dest.display().to_string())],
    )
    .unwrap();
    assert_eq!(got, json!(dest.display().to_string()));
    assert_eq!(fs::read_to_string(&dest).unwrap(), "hello remote\n");
    // A directory destination gets the URL's basename.
    let got = call(
        &f.host,
        "cp.get_url",
        vec![json!(url), json!(format!("{}/", f.out.display()))],
    )
    .unwrap();
    assert_eq!(got, json!(f.out.join("good.txt").display().to_string()));
    let got = call(&f.host, "cp.cache_file", vec![json!(url)]).unwrap();
    assert_eq!(got, json!(cached.display().to_string()));
    let got = call(&f.host, "cp.get_file_str", vec![json!(url)]).unwrap();
    assert_eq!(got, json!("hello remote\n"));
    // A 404 is an error with Salt's wording, and nothing is written.
    let err = call(
        &f.host,
        "cp.get_url",
        vec![
            json!(f.https("nope.txt")),
            json!(f.out.join("n.txt").display().to_string()),
        ],
    )
    .unwrap_err();
    assert!(
        err.contains("Error: HTTP 404: Not Found reading /nope.txt"),
        "{err}"
    );
    assert!(!f.out.join("n.txt").exists());
}

fn single(host: &Host, fun: &str, name: &str, args: Value, test: bool) -> Value {
    let mut kwargs = args.as_object().cloned().unwrap_or_default();
    if test {
        kwargs.insert("test".into(), json!(true));
    }
    let args = Args {
        positional: vec![json!(fun), json!(name)],
        kwargs,
    };
    let ret = host.call("state.single", &args).expect("state.single");
    ret.as_object()
        .and_then(|o| o.values().next().cloned())
        .expect("one state")
}

#[test]
fn http_query_exec_answers_salts_dict() {
    let f = fixture();
    let q = |args: Value| {
        let a = Args {
            positional: vec![],
            kwargs: args.as_object().cloned().unwrap_or_default(),
        };
        f.host.call("http.query", &a).expect("http.query")
    };
    assert_eq!(
        q(json!({"url": f.https("good.txt")})),
        json!({"body": "hello remote\n"})
    );
    assert_eq!(
        q(json!({"url": f.https("good.txt"), "status": true})),
        json!({"body": "hello remote\n", "status": 200})
    );
    let nope = q(json!({"url": f.https("nope.txt")}));
    assert_eq!(nope["status"], json!(404));
    assert_eq!(nope["error"], json!("HTTP 404: Not Found"));
    assert!(nope["body"].as_str().is_some_and(|b| b.contains("404")));
    // POST with a body, params and headers reach the server; JSON decodes.
    let echo = q(
        json!({"url": f.https("echo"), "method": "POST", "data": "abc",
                        "params": {"q": 1}, "header_dict": {"X-A": "b"},
                        "decode": true, "decode_type": "json", "status": true}),
    );
    assert_eq!(echo["status"], json!(200));
    assert_eq!(echo["dict"]["method"], json!("POST"));
    assert_eq!(echo["dict"]["path"], json!("/echo?q=1"));
    assert_eq!(echo["dict"]["body"], json!("abc"));
    assert_eq!(echo["dict"]["headers"]["x-a"], json!("b"));
    assert_eq!(
        echo["dict"]["headers"]["content-type"],
        json!("application/x-www-form-urlencoded")
    );
    // test=True without test_url asks nothing.
    assert_eq!(
        q(json!({"url": f.https("good.txt"), "test": true})),
        json!({})
    );
    // Nothing listening: an error entry, not a failure of the call.
    let down = q(json!({"url": "http://127.0.0.1:9/x"}));
    assert!(
        down["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{down}"
    );
}

#[test]
fn http_query_state_matches_salt() {
    let f = fixture();
    let good = f.https("good.txt");
    let nope = f.https("nope.txt");
    // (args, Salt 3008.5's result and comment for the same SLS and server)
    let cases = [
        (
            json!({"match": "hello", "status": 200}),
            json!(true),
            "Match text \"hello\" was found. Status 200 was found.",
        ),
        (
            json!({"match": "goodbye"}),
            json!(false),
            "Match text \"goodbye\" was not found.",
        ),
        (
            json!({"match": "hel+o\\s", "match_type": "pcre", "status": "2..", "status_type": "pcre"}),
            json!(true),
            "Match pattern \"hel+o\\s\" was found. Status pattern \"2..\" was found.",
        ),
        (
            json!({}),
            json!(false),
            " Either match text (match) or a status code (status) is required.",
        ),
    ];
    for (args, result, comment) in cases {
        let r = single(&f.host, "http.query", &good, args.clone(), false);
        assert_eq!(r["result"], result, "{args}: {r}");
        assert_eq!(r["comment"], json!(comment), "{args}");
        assert_eq!(r["changes"], json!({}));
    }
    let r = single(
        &f.host,
        "http.query",
        &good,
        json!({"match": "hello", "status": 200}),
        false,
    );
    assert_eq!(
        r["data"],
        json!({"body": "hello remote\n", "status": 200, "text": "hello remote\n"})
    );
    let r = single(&f.host, "http.query", &nope, json!({"status": 404}), false);
    assert_eq!(
        (r["result"].clone(), r["comment"].clone()),
        (json!(true), json!("Status 404 was found."))
    );
    let r = single(
        &f.host,
        "http.query",
        &nope,
        json!({"status": [200, 201], "status_type": "list"}),
        false,
    );
    assert_eq!(
        (r["result"].clone(), r["comment"].clone()),
        (json!(false), json!("Statuses [200, 201] were not found."))
    );
    // Test mode asks nothing and says so, as Salt does.
    let r = single(
        &f.host,
        "http.query",
        &good,
        json!({"match": "hello", "status": 200}),
        true,
    );
    assert_eq!(r["result"], Value::Null);
    assert_eq!(
        r["comment"],
        json!("Match text \"hello\" was not found. Status 200 was not found. (TEST MODE)")
    );
}

#[test]
fn wait_for_successful_query_returns_once_it_passes() {
    let f = fixture();
    // The file appears only after a first failed query.
    let www = f.www.clone();
    let later = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(500));
        fs::write(www.join("late.txt"), "now\n").expect("write");
    });
    let r = single(
        &f.host,
        "http.wait_for_successful_query",
        &f.https("late.txt"),
        json!({"status": 200, "wait_for": 60, "request_interval": 0.2}),
        false,
    );
    later.join().expect("writer");
    assert_eq!(r["result"], json!(true), "{r}");
    assert_eq!(r["comment"], json!("Status 200 was found."));
}

#[test]
fn proxy_keys_route_requests_and_no_proxy_bypasses_them() {
    let f = fixture();
    // The test server doubles as a forward proxy. The target host does not
    // exist: only the proxy can answer for it.
    let mut host = f.host.clone();
    host.opts = json!({
        "cachedir": f.cache.display().to_string(),
        "proxy_host": "127.0.0.1",
        "proxy_port": f.http.port,
    });
    let url = "http://halite-proxied.test/good.txt";
    let got = call(&host, "cp.get_url", vec![json!(url)]).expect("through the proxy");
    let cached = f
        .cache
        .join("extrn_files/base/halite-proxied.test/good.txt");
    assert_eq!(got, json!(cached.display().to_string()));
    assert_eq!(fs::read_to_string(&cached).unwrap(), "hello remote\n");
    let a = Args {
        positional: vec![json!(url)],
        kwargs: json!({"headers": true})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    };
    let q = host.call("http.query", &a).expect("http.query");
    assert_eq!(
        q["headers"]["X-Proxied"],
        json!("halite-proxied.test"),
        "{q}"
    );

    // A proxy nobody listens on: fetching fails, unless no_proxy names the host.
    host.opts = json!({
        "cachedir": f.cache.display().to_string(),
        "proxy_host": "127.0.0.1",
        "proxy_port": 9,
    });
    let direct = f.http("good.txt");
    assert!(call(&host, "cp.get_url", vec![json!(direct)]).is_err());
    host.opts["no_proxy"] = json!(["127.0.0.1"]);
    let got = call(&host, "cp.get_url", vec![json!(direct)]).expect("bypassing the proxy");
    assert!(
        got.as_str().is_some_and(|p| p.ends_with("/good.txt")),
        "{got}"
    );
}

#[test]
fn test_mode_predicts_from_the_download_without_checking_the_hash() {
    let f = fixture();
    let good = f.out.join("good.txt");
    let r = managed_mode(
        &f.host,
        &good,
        json!({"source": f.https("good.txt"), "source_hash": f.https("SHA256SUMS")}),
        true,
    );
    assert_eq!(r.result, None, "{}", r.comment);
    assert_eq!(r.comment, format!("The file {} is set to be changed\nNote: No changes made, actual changes may\nbe different due to other states.", good.display()));
    assert_eq!(
        Value::Object(r.changes),
        json!({"newfile": good.display().to_string()})
    );
    assert!(!good.exists());
    // Salt verifies the hash only when it writes: test mode shows the diff.
    let wrong = f.out.join("wrong.txt");
    fs::write(&wrong, "old\n").unwrap();
    let r = managed_mode(
        &f.host,
        &wrong,
        json!({"source": f.https("good.txt"), "source_hash": format!("sha256={}", "1".repeat(64))}),
        true,
    );
    assert_eq!(r.result, None, "{}", r.comment);
    assert_eq!(
        Value::Object(r.changes),
        json!({"diff": "--- \n+++ \n@@ -1 +1 @@\n-old\n+hello remote\n"})
    );
    assert_eq!(fs::read_to_string(&wrong).unwrap(), "old\n");
}

#[test]
fn cmd_script_runs_a_script_from_an_https_url() {
    let f = fixture();
    fs::write(
        f.www.join("hello.sh"),
        "#!/bin/sh\necho \"from the web $1\"\n",
    )
    .unwrap();
    let a = Args {
        positional: vec![json!(f.https("hello.sh")), json!("arg1")],
        kwargs: Map::new(),
    };
    let r = f.host.call("cmd.script", &a).expect("cmd.script");
    assert_eq!(r["retcode"], json!(0), "{r}");
    assert_eq!(r["stdout"], json!("from the web arg1"));
}
