//! What one highstate return costs the master's job-cache writer, per
//! return, without sockets or SQLite (issue 25, session 24): the check of
//! its packed bytes ([`halite_proto::packed::check`]), the job cache's
//! zstd level 1 of them (what the master paid before the minion sent its
//! own frame), and the expansion of a minion's frame
//! ([`halite_proto::packed::unframe`]) that replaces it.
//!
//! `cargo run --release -p halite-proto --example return_cost -- [FILE] [N]`
//!
//! FILE: a return's packed value (msgpack), e.g. one read from a bench's
//! job cache (`sqlite3 jobs.sqlite "SELECT writefile('r.zst', ret) FROM
//! returns LIMIT 1"`, then `zstd -d r.zst -o r.msgpack`); without it, a
//! generated 1,000-state return of the bench's shape. N: rounds (200).

use std::hint::black_box;
use std::time::Instant;

use serde_json::{json, Map, Value};

/// A state run's return of `states` test states in the shape the
/// highstate bench's minions send (keys, comments, times, durations).
fn generated(states: usize) -> Value {
    let mut ret = Map::new();
    for n in 0..states {
        ret.insert(
            format!("test_|-state_{n:04}_|-/srv/app/web-{n}/conf_|-succeed_without_changes"),
            json!({
                "name": format!("/srv/app/web-{n}/conf"),
                "changes": {},
                "result": true,
                "comment": "Success!",
                "__sls__": format!("bench.part{}", n / 100),
                "__run_num__": n,
                "start_time": "15:29:41.123456",
                "duration": 0.123 + n as f64 / 1e4,
                "__id__": format!("state_{n:04}"),
            }),
        );
    }
    Value::Object(ret)
}

/// This thread's CPU time so far, in nanoseconds (`schedstat`'s first
/// field; the machine is shared, so wall time would count the others),
/// or `None` where the kernel does not say.
fn cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// Microseconds of this thread's CPU (of wall time where the kernel does
/// not give it) per round of `f` over `rounds` rounds.
fn per_round(rounds: u32, mut f: impl FnMut()) -> f64 {
    f();
    let (start, cpu) = (Instant::now(), cpu_ns());
    for _ in 0..rounds {
        f();
    }
    let spent = match (cpu, cpu_ns()) {
        (Some(a), Some(b)) => b.saturating_sub(a) as f64 / 1e3,
        _ => start.elapsed().as_secs_f64() * 1e6,
    };
    spent / f64::from(rounds)
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let first = args.next();
    let (bytes, rounds) = match first.as_deref().map(str::parse::<u32>) {
        Some(Ok(n)) => (halite_proto::packed::pack(&generated(1000))?, n),
        Some(Err(_)) => {
            let path = first.unwrap_or_default();
            let rounds = args.next().map(|n| n.parse()).transpose()?.unwrap_or(200);
            (std::fs::read(&path)?, rounds)
        }
        None => (halite_proto::packed::pack(&generated(1000))?, 200),
    };
    halite_proto::packed::check(&bytes)?;
    let frame = halite_proto::packed::frame(&bytes)?;
    println!(
        "return: {} bytes packed, {} as a zstd-1 frame (x{:.1})",
        bytes.len(),
        frame.len(),
        bytes.len() as f64 / frame.len() as f64
    );
    let check = per_round(rounds, || {
        let _ = black_box(halite_proto::packed::check(black_box(&bytes)));
    });
    let mut compressor = zstd::bulk::Compressor::new(halite_proto::packed::RETURN_ZSTD_LEVEL)?;
    let compress = per_round(rounds, || {
        let _ = black_box(compressor.compress(black_box(&bytes)));
    });
    let unframe = per_round(rounds, || {
        let _ = black_box(halite_proto::packed::unframe(
            black_box(&frame),
            halite_proto::packed::MAX_RETURN_BYTES,
        ));
    });
    println!("per return, µs of CPU: check {check:.0}, zstd-1 {compress:.0}, unframe {unframe:.0}");
    println!(
        "the writer's share before (check + zstd-1): {:.0} µs; after (unframe + check): {:.0} µs",
        check + compress,
        unframe + check
    );
    Ok(())
}
