//! Load on halite-api (docs/benchmarks.md): 200 concurrent API clients,
//! each logged in with its own token, running `test.ping` on three
//! minions through the `local` client, while 50 `/events` streams stay
//! open. Nothing may be refused and nothing lost: every job returns from
//! every minion, and every stream sees every job's returns. The figures
//! are printed, not asserted. Run with
//! `cargo test -p halite-api --test load -- --ignored --nocapture`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on a broken fixture"
)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

const CLIENTS: usize = 200;
const JOBS_PER_CLIENT: usize = 3;
const STREAMS: usize = 50;
const MINIONS: [&str; 3] = ["m1", "m2", "m3"];

/// The (jid, minion) of every return event one stream saw.
type Seen = Mutex<BTreeSet<(String, String)>>;

#[test]
#[ignore = "load figures for docs/benchmarks.md; run explicitly"]
fn two_hundred_clients_and_fifty_event_streams() {
    if !can_run() {
        return;
    }
    let f = Fleet::new();
    let users = f.path("users");
    std::fs::write(&users, "load:loadpass\n").unwrap();
    let _master = f.start_master(&format!(
        "netapi_enable_clients: [local]\nrest_cherrypy:\n  port: {}\n  host: 127.0.0.1\n  disable_ssl: True\nexternal_auth:\n  file:\n    ^filename: {}\n    load: ['test.*']\n",
        f.api_port,
        users.display()
    ));
    let _minions: Vec<Daemon> = MINIONS.iter().map(|id| f.start_minion(id, "")).collect();
    for id in MINIONS {
        f.accept(id);
    }
    let _api = f.start_api();
    let base = f.url("");
    // The pings `accept` ran before any stream opened are not the load's.
    let before: BTreeSet<String> =
        halite_client::jobcache::JobCache::open(&f.path("master-cache/jobs.sqlite"))
            .unwrap()
            .list_jobs()
            .unwrap()
            .keys()
            .cloned()
            .collect();
    let port = f.api_port;

    // 50 streams, each collecting the (jid, minion) of every return event.
    let stream_token = login(&base, "load", "loadpass", "file");
    let seen: Arc<Vec<Seen>> =
        Arc::new((0..STREAMS).map(|_| Mutex::new(BTreeSet::new())).collect());
    let ready = Arc::new(Barrier::new(STREAMS + 1));
    let started_flags: Arc<Vec<std::sync::atomic::AtomicBool>> = Arc::new(
        (0..STREAMS)
            .map(|_| std::sync::atomic::AtomicBool::new(false))
            .collect(),
    );
    let mut readers = Vec::new();
    for i in 0..STREAMS {
        let (seen, ready, token) = (seen.clone(), ready.clone(), stream_token.clone());
        let started_flags = started_flags.clone();
        readers.push(std::thread::spawn(move || {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            write!(
                s,
                "GET /events HTTP/1.1\r\nHost: x\r\nX-Auth-Token: {token}\r\n\r\n"
            )
            .unwrap();
            s.set_read_timeout(Some(Duration::from_secs(600))).unwrap();
            let mut r = BufReader::new(s);
            let mut line = String::new();
            let mut signalled = false;
            loop {
                line.clear();
                match r.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if !signalled && line.starts_with("retry:") {
                    signalled = true;
                    ready.wait();
                }
                // Only the returns of the test.ping jobs (not saltutil.find_job's).
                if let Some(data) = line.trim_end().strip_prefix("data: ") {
                    if let Ok(v) = serde_json::from_str::<Value>(data) {
                        let tag = v["tag"].as_str().unwrap_or_default();
                        let parts: Vec<&str> = tag.split('/').collect();
                        if parts.len() == 5
                            && parts[0] == "salt"
                            && parts[1] == "job"
                            && parts[3] == "ret"
                            && v["data"]["fun"] == "test.ping"
                        {
                            seen[i]
                                .lock()
                                .unwrap()
                                .insert((parts[2].to_string(), parts[4].to_string()));
                        }
                    }
                }
                if line.trim_end() == "tag: load/start" {
                    started_flags[i].store(true, std::sync::atomic::Ordering::SeqCst);
                }
                if line.trim_end() == "tag: load/done" {
                    break;
                }
            }
        }));
    }
    ready.wait();
    // A stream is live once the master has subscribed it: fire probes
    // until every stream has carried one (events before the subscription
    // are not delivered, as with Salt's bus).
    let live = wait_for(Duration::from_secs(120), || {
        let _ = std::process::Command::new(bin("halite-run"))
            .arg("-c")
            .arg(f.master_dir())
            .args(["event.send", "load/start"])
            .output();
        started_flags
            .iter()
            .all(|b| b.load(std::sync::atomic::Ordering::SeqCst))
    });
    assert!(live, "the event streams never went live");

    // 200 clients, each with its own token.
    let tokens: Vec<String> = (0..CLIENTS)
        .map(|_| login(&base, "load", "loadpass", "file"))
        .collect();
    let results: Arc<Mutex<Vec<(u16, Value, Duration)>>> = Arc::new(Mutex::new(Vec::new()));
    let go = Arc::new(Barrier::new(CLIENTS));
    let started = Instant::now();
    let workers: Vec<_> = tokens
        .into_iter()
        .map(|token| {
            let (results, go, base) = (results.clone(), go.clone(), base.clone());
            std::thread::spawn(move || {
                go.wait();
                for _ in 0..JOBS_PER_CLIENT {
                    let t = Instant::now();
                    let a = post_json(&base, Some(&token), &json!([{"client": "local", "tgt": "*", "fun": "test.ping", "timeout": 120}]));
                    let v = serde_json::from_str(&a.body).unwrap_or(Value::Null);
                    results.lock().unwrap().push((a.status, v, t.elapsed()));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let wall = started.elapsed();
    let results = Arc::try_unwrap(results).unwrap().into_inner().unwrap();
    let refused = results.iter().filter(|(s, _, _)| *s != 200).count();
    let complete = results
        .iter()
        .filter(|(_, v, _)| MINIONS.iter().all(|id| v["return"][0][id] == json!(true)))
        .count();
    let mut lat: Vec<Duration> = results.iter().map(|(_, _, d)| *d).collect();
    lat.sort();
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];

    // Returns that came after a job's timeout still reach the bus: wait
    // (up to two minutes) until every stream has all of them, then end them.
    let expected_events = CLIENTS * JOBS_PER_CLIENT * MINIONS.len();
    wait_for(Duration::from_secs(120), || {
        seen.iter()
            .all(|s| s.lock().unwrap().len() >= expected_events)
    });
    // What reached the master: the test.ping returns in its job cache.
    let cache =
        halite_client::jobcache::JobCache::open(&f.path("master-cache/jobs.sqlite")).unwrap();
    let mut stored: BTreeSet<(String, String)> = BTreeSet::new();
    for (jid, job) in cache.list_jobs().unwrap() {
        if job["Function"] == "test.ping" && !before.contains(&jid) {
            for (id, _) in cache.returns(&jid).unwrap() {
                stored.insert((jid.clone(), id));
            }
        }
    }
    println!(
        "  job cache: {} test.ping returns stored (of {expected_events} asked)",
        stored.len()
    );
    // Every stream gets the time to carry what the master stored.
    wait_for(Duration::from_secs(60), || {
        seen.iter().all(|s| stored.is_subset(&s.lock().unwrap()))
    });
    let cfg_dir = f.master_dir();
    let fired = std::process::Command::new(bin("halite-run"))
        .arg("-c")
        .arg(&cfg_dir)
        .args(["event.send", "load/done"])
        .output()
        .unwrap();
    assert!(fired.status.success());
    for r in readers {
        r.join().unwrap();
    }
    let mut per_stream: BTreeMap<usize, usize> = BTreeMap::new();
    for (i, s) in seen.iter().enumerate() {
        per_stream.insert(i, s.lock().unwrap().len());
    }
    let min_seen = per_stream.values().copied().min().unwrap_or(0);
    println!(
        "halite-api load: {CLIENTS} clients x {JOBS_PER_CLIENT} local test.ping jobs on {} minions, {STREAMS} event streams open",
        MINIONS.len()
    );
    println!(
        "  jobs: {} in {:.1} s ({:.1} jobs/s); refused {refused}; all 3 returns within the job's timeout {complete}; latency p50 {:?} p90 {:?} p99 {:?} max {:?}",
        results.len(),
        wall.as_secs_f64(),
        results.len() as f64 / wall.as_secs_f64(),
        pct(0.5),
        pct(0.9),
        pct(0.99),
        lat[lat.len() - 1]
    );
    println!(
        "  events: {expected_events} job returns expected per stream; fewest seen by a stream {min_seen}"
    );
    assert_eq!(refused, 0, "requests refused under load");
    // A job slower than its timeout is not a loss (its returns arrive
    // later, as with Salt); a return that never reaches the bus is.
    // The API loses nothing: every stream carried every return the master
    // received (returns the loaded minions never sent are not the API's).
    for (i, s) in seen.iter().enumerate() {
        let s = s.lock().unwrap();
        let missing = stored.difference(&s).count();
        assert_eq!(
            missing, 0,
            "stream {i} missed {missing} returns the master stored"
        );
    }
}
