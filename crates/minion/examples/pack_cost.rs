//! What a 1,000-state job's output costs the minion, per job, without
//! sockets (issue 25, session 25): its 1,000 progress events and its
//! return, with each state's return encoded twice (no keeping: the
//! event's and the return's own) or once (`packing::keep_rets`: the
//! return written from the events' bytes), and the return's zstd frame
//! the link makes of it, for scale.
//!
//! `cargo run --release --example pack_cost -- [N]` (N rounds, 300)
//!
//! It compiles `src/packing.rs` itself, so it measures exactly the code
//! the minion runs.

// The minion's allocator, tuned as its swarm mode is.
halite_perf::fast_allocator!(bursty);

#[allow(dead_code)]
#[path = "../src/packing.rs"]
mod packing;

use std::hint::black_box;
use std::time::{Duration, Instant};

use halite_modules::exec::state::StateOutput;
use halite_state::{Running, SmallDict};
use serde_json::{json, Value};

use packing::{framed_return, keep_rets, pack_outcome, progress_event, Outcome, ReturnMeta};

/// A highstate's records in the fleet bench's shape: 950 test states and
/// 50 `file.managed`, keys and values as the engine leaves them.
fn records() -> Running {
    let mut running = Running::default();
    for n in 0..1000u64 {
        let mut ret = SmallDict::new();
        let (key, name) = if n % 20 == 0 {
            let path = format!("/srv/halite-bench/web-0001/managed/f{n:04}.conf");
            ret.insert("changes", json!({}));
            ret.insert(
                "comment",
                Value::from(format!("File {path} is in the correct state")),
            );
            (format!("file_|-managed_{n:04}_|-{path}_|-managed"), path)
        } else {
            let name = format!("state_{n:04}_web-0001_bench");
            ret.insert("changes", json!({}));
            ret.insert("comment", Value::from("Success!"));
            (
                format!("test_|-state_{n:04}_|-{name}_|-succeed_without_changes"),
                name,
            )
        };
        ret.insert("name", Value::from(name));
        ret.insert("result", Value::Bool(true));
        ret.insert("__sls__", Value::from(format!("bench.part{:02}", n / 50)));
        ret.insert("__run_num__", Value::from(n));
        ret.insert(
            "start_time",
            Value::from(format!("19:20:{:02}.{:06}", n / 100, n * 37)),
        );
        ret.insert("duration", json!(0.031 + n as f64 / 1000.0));
        ret.insert("__id__", Value::from(format!("state_{n:04}")));
        running.insert(key, ret);
    }
    running
}

fn meta() -> ReturnMeta {
    ReturnMeta {
        jid: "20261127192000000001".into(),
        id: "web-0001".into(),
        fun: "state.apply".into(),
        fun_args: vec![],
        retcode: 0,
    }
}

/// One job's events, its return and the return's frame, timed apart.
fn job(outcome: &Outcome, keep: bool) -> [Duration; 3] {
    let Outcome::State(StateOutput::Ran(running)) = outcome else {
        unreachable!("the records are a state run's")
    };
    let start = Instant::now();
    let kept = keep.then(keep_rets);
    let mut tag = String::new();
    for ret in running.values() {
        tag.clear();
        tag.push_str("salt/job/20261127192000000001/prog/web-0001/");
        tag.push_str(
            &ret.get("__run_num__")
                .map(ToString::to_string)
                .unwrap_or_default(),
        );
        black_box(progress_event(&tag, ret, running.len()));
    }
    let events = start.elapsed();
    let start = Instant::now();
    let packed = pack_outcome(meta(), outcome);
    drop(kept);
    let packing = start.elapsed();
    let start = Instant::now();
    black_box(framed_return(&packed));
    [events, packing, start.elapsed()]
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1000.0
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    let outcome = Outcome::State(StateOutput::Ran(records()));
    let size = pack_outcome(meta(), &outcome).ret.len();
    let mut times: [[Vec<Duration>; 3]; 2] = Default::default();
    for _ in 0..rounds {
        for (keep, times) in [false, true].into_iter().zip(times.iter_mut()) {
            for (t, d) in times.iter_mut().zip(job(&outcome, keep)) {
                t.push(d);
            }
        }
    }
    println!("1,000 states, a {size}-byte return, {rounds} rounds: medians, ms per job");
    println!("                       events  return  (zstd frame)");
    for (name, [events, packing, frame]) in ["encoded twice", "encoded once"].iter().zip(times) {
        println!(
            "{name:>20}  {:>7.3} {:>7.3}  ({:.3})",
            median(events),
            median(packing),
            median(frame)
        );
    }
}
