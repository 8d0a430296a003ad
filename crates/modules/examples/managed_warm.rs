//! Warm `file.managed` in one process, as a minion daemon (or the swarm)
//! runs it job after job: `N` identities × the fleet bench's 50 files (48
//! of 2-6 KB, 2 of 1 MB; `--big 0` for none), each target already holding
//! its source's bytes. Pass 1 reads every pair (and records it in the
//! verified-same memo, issue 25); later passes find the stamps unchanged
//! and read nothing. Prints the time of each pass and per state.
//!
//! `cargo run --example managed_warm -- [--identities 200] [--big 2]
//! [--passes 3] [--dir /tmp/x]` (the files are removed at the end).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a measurement: a failure stops it with its message"
)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use halite_modules::host::LogEvents;
use halite_modules::{table, Host, LocalFileClient};
use halite_state::{LowChunk, StateCall};
use serde_json::{json, Map, Value};

/// Files per identity, as in the fleet bench.
const FILES: usize = 50;

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

/// Source `k`'s bytes: ~1 MB for the last `big`, 2-6 KB for the others.
fn source_bytes(k: usize, big: usize) -> Vec<u8> {
    let size = if k >= FILES - big {
        1 << 20
    } else {
        2048 + (k * 997) % 4096
    };
    let line = format!("source {k:02}: the quick brown fox jumps over the lazy dog\n");
    line.repeat(size / line.len() + 1).into_bytes()
}

fn managed(host: &Host, target: &Path, source: &Path) {
    let mut chunk = Map::new();
    chunk.insert("state".into(), json!("file"));
    chunk.insert("name".into(), json!(target.display().to_string()));
    chunk.insert("__id__".into(), json!(target.display().to_string()));
    chunk.insert("source".into(), json!(source.display().to_string()));
    chunk.insert("fun".into(), json!("managed"));
    let chunk = LowChunk::from(chunk);
    let call = StateCall {
        chunk: &chunk,
        test: false,
        env: host,
        sfun: None,
        reqs: None,
    };
    let r = host
        .states
        .get("file")
        .unwrap()
        .call("managed", &call)
        .unwrap();
    assert!(
        r.result == Some(true) && r.changes.is_empty(),
        "{}: {} {:?}",
        target.display(),
        r.comment,
        r.changes
    );
}

fn main() {
    let identities: usize = arg("--identities", "200").parse().unwrap();
    let big: usize = arg("--big", "2").parse().unwrap();
    let passes: usize = arg("--passes", "3").parse().unwrap();
    let base = arg("--dir", "/tmp");
    let dir = tempfile::tempdir_in(base).unwrap();
    let sources: Vec<_> = (0..FILES)
        .map(|k| {
            let p = dir.path().join(format!("src{k:02}.txt"));
            std::fs::write(&p, source_bytes(k, big)).unwrap();
            p
        })
        .collect();
    let mut pairs = Vec::new();
    for i in 0..identities {
        let d = dir.path().join(format!("id{i:05}"));
        std::fs::create_dir(&d).unwrap();
        for (k, src) in sources.iter().enumerate() {
            let t = d.join(format!("f{k:02}.txt"));
            std::fs::copy(src, &t).unwrap();
            pairs.push((t, src.clone(), k >= FILES - big));
        }
    }
    let host = Host {
        opts: json!({}),
        grains: json!({}),
        pillar: Value::Object(Map::new()),
        files: Arc::new(LocalFileClient::default()),
        exec: table::exec_modules(),
        states: table::state_modules(),
        events: Arc::new(LogEvents),
    };
    // Older than the memo's two-second margin, as a minion's files are
    // between two highstates.
    std::thread::sleep(Duration::from_millis(2200));
    println!(
        "{} states ({identities} identities x {FILES} files, {big} of 1 MB each)",
        pairs.len()
    );
    for pass in 1..=passes {
        let (mut small, mut large) = (Duration::ZERO, Duration::ZERO);
        let all = Instant::now();
        for (t, s, is_big) in &pairs {
            let one = Instant::now();
            managed(&host, t, s);
            if *is_big {
                large += one.elapsed();
            } else {
                small += one.elapsed();
            }
        }
        let n_big = identities * big;
        let n_small = pairs.len() - n_big;
        println!(
            "pass {pass}: {:.1} ms, {:.1} us a state; small {:.1} us, 1 MB {:.1} us",
            all.elapsed().as_secs_f64() * 1e3,
            all.elapsed().as_secs_f64() * 1e6 / pairs.len() as f64,
            small.as_secs_f64() * 1e6 / n_small.max(1) as f64,
            large.as_secs_f64() * 1e6 / n_big.max(1) as f64,
        );
    }
}
