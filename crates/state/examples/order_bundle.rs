//! Times what a minion does with a bundle's chunks before its first
//! state runs (issue 25): the chunks decoded from msgpack into the
//! engine's `LowChunk`s, and ordered (`pipeline::order_chunks`).
//!
//! The chunks are the fleet bench's tree (crates/cli/benches/highstate.rs)
//! as the master compiles them for one minion, or a `state.show_lowstate
//! --out json` file given as the first argument. Run it optimised:
//! `cargo run --release -p halite-state --example order_bundle [FILE] [ROUNDS]`.
//! It prints the median and fastest round of each step, and a digest of
//! the order and the ordered chunks, which must not change with the code.
//! It also times the order replayed from a kept one
//! (`pipeline::order_chunks_keeping`, a warm job of an unchanged bundle),
//! whose digest must be the fresh order's.
//! A third argument, `decode`, `order`, `kept` or `clone`, runs that step alone
//! (`order` orders a clone each time: `clone` is that part) and prints
//! nothing, for `perf stat` of one step on a loaded machine.

use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

halite_perf::fast_allocator!();

use halite_state::graph::{KeptOrder, OrderKeep};
use halite_state::module::StateModules;
use halite_state::pipeline::{order_chunks, order_chunks_keeping, Compiled};
use std::sync::{Arc, Mutex};

/// One kept order.
#[derive(Default)]
struct Keep(Mutex<Option<Arc<KeptOrder>>>);

impl OrderKeep for Keep {
    fn kept(&self) -> Option<Arc<KeptOrder>> {
        self.0.lock().ok()?.clone()
    }
    fn keep(&self, order: KeptOrder) {
        if let Ok(mut k) = self.0.lock() {
            *k = Some(Arc::new(order));
        }
    }
}

/// A digest of the order, the ordered chunks, their tags and dependencies.
fn digest_of(compiled: &Compiled) -> Result<u64, Box<dyn std::error::Error>> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    compiled.order.hash(&mut h);
    for &ci in &compiled.order {
        serde_json::to_string(&compiled.graph.chunks[ci])?.hash(&mut h);
        compiled.graph.tag(ci).hash(&mut h);
        for (kind, dep) in compiled.graph.dependencies(ci) {
            (kind.keyword(), dep).hash(&mut h);
        }
    }
    Ok(h.finish())
}
use halite_state::LowChunk;
use serde_json::{json, Value};

/// The fleet bench's chunks for minion `bench-0007`, as compiled.
fn bench_chunks() -> Vec<Value> {
    let out = "/srv/bench/out/bench-0007";
    let mut chunks = vec![
        json!({"state": "test", "name": "motd hello from the pillar",
        "__sls__": "bench", "__env__": "base", "__id__": "bench_motd", "order": 10000,
        "fun": "succeed_without_changes"}),
    ];
    for k in 0..50 {
        chunks.push(
            json!({"state": "file", "name": format!("{out}/f{k:02}.txt"),
            "__sls__": "bench", "__env__": "base", "__id__": format!("bench_file_{k:02}"),
            "source": format!("salt://files/f{k:02}.txt"), "makedirs": true,
            "order": 10001 + k, "fun": "managed"}),
        );
    }
    for i in 1..950 {
        let id = format!("bench_test_{i:03}");
        let mut c = json!({"state": "test", "name": id, "__sls__": "bench",
            "__env__": "base", "__id__": id});
        let mut reqs = Vec::new();
        if i % 10 == 9 {
            reqs.push(json!({"test": format!("bench_test_{:03}", i - 1)}));
        }
        if i % 50 == 0 {
            reqs.push(json!({"file": format!("bench_file_{:02}", (i / 50) % 50)}));
        }
        if let Some(m) = c.as_object_mut() {
            if !reqs.is_empty() {
                m.insert("require".into(), Value::Array(reqs));
            }
            m.insert("order".into(), json!(10050 + i));
            m.insert("fun".into(), json!("succeed_without_changes"));
        }
        chunks.push(c);
    }
    chunks
}

fn median(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[0])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let chunks: Vec<Value> = match args.get(1).filter(|a| a.as_str() != "-") {
        Some(path) => {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
            match v {
                Value::Object(mut m) => match m.remove("local") {
                    Some(Value::Array(a)) => a,
                    _ => return Err("no `local` list".into()),
                },
                Value::Array(a) => a,
                _ => return Err("not a list of chunks".into()),
            }
        }
        None => bench_chunks(),
    };
    let rounds: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(30);
    let per_round = 50;
    let bytes = rmp_serde::to_vec_named(&chunks)?;
    let modules = StateModules::new();
    let only = args.get(3).map(String::as_str);
    match only {
        Some("decode") => {
            for _ in 0..rounds * per_round {
                drop(rmp_serde::from_slice::<Vec<LowChunk>>(&bytes)?);
            }
            return Ok(());
        }
        Some("order") => {
            let chunks = rmp_serde::from_slice::<Vec<LowChunk>>(&bytes)?;
            for _ in 0..rounds * per_round {
                let compiled = order_chunks(chunks.iter().cloned(), &modules, &[])
                    .map_err(|e| e.join("; "))?;
                drop(compiled);
            }
            return Ok(());
        }
        Some("kept") => {
            let chunks = rmp_serde::from_slice::<Vec<LowChunk>>(&bytes)?;
            let keep = Keep::default();
            for _ in 0..rounds * per_round + 1 {
                let compiled = order_chunks_keeping(chunks.iter().cloned(), &modules, &[], &keep)
                    .map_err(|e| e.join("; "))?;
                drop(compiled);
            }
            return Ok(());
        }
        Some("clone") => {
            let chunks = rmp_serde::from_slice::<Vec<LowChunk>>(&bytes)?;
            for _ in 0..rounds * per_round {
                drop(chunks.to_vec());
            }
            return Ok(());
        }
        _ => {}
    }

    let (mut decode, mut order, mut clone) = (Vec::new(), Vec::new(), Vec::new());
    let mut replayed = Vec::new();
    let mut digest = 0u64;
    let mut kept_digest = 0u64;
    let keep = Keep::default();
    order_chunks_keeping(
        rmp_serde::from_slice::<Vec<LowChunk>>(&bytes)?,
        &modules,
        &[],
        &keep,
    )
    .map_err(|e| e.join("; "))?;
    for _ in 0..rounds {
        // As a minion does it: one bundle at a time, decoded, ordered,
        // dropped.
        let (mut d, mut c, mut o) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
        let mut k = Duration::ZERO;
        for i in 0..per_round {
            let start = Instant::now();
            let chunks = rmp_serde::from_slice::<Vec<LowChunk>>(&bytes)?;
            let decoded = Instant::now();
            let copy = chunks.clone();
            let copied = Instant::now();
            drop(copy);
            let dropped = Instant::now();
            let compiled = order_chunks(chunks, &modules, &[]).map_err(|e| e.join("; "))?;
            let done = Instant::now();
            d += decoded - start;
            c += copied - decoded;
            o += done - dropped;
            if i == 0 {
                digest = digest_of(&compiled)?;
            }
            drop(compiled);
            let chunks = rmp_serde::from_slice::<Vec<LowChunk>>(&bytes)?;
            let start = Instant::now();
            let compiled =
                order_chunks_keeping(chunks, &modules, &[], &keep).map_err(|e| e.join("; "))?;
            k += start.elapsed();
            if i == 0 {
                kept_digest = digest_of(&compiled)?;
            }
        }
        replayed.push(k / per_round as u32);
        decode.push(d / per_round as u32);
        clone.push(c / per_round as u32);
        order.push(o / per_round as u32);
    }
    let show = |what: &str, v: Vec<Duration>| {
        let (m, f) = median(v);
        println!(
            "{what:<28} median {:>7.1} µs  fastest {:>7.1} µs",
            m.as_secs_f64() * 1e6,
            f.as_secs_f64() * 1e6
        );
    };
    println!(
        "{} chunks, {} bytes encoded, {rounds} rounds of {per_round}",
        chunks.len(),
        bytes.len()
    );
    show("decode (rmp -> LowChunk)", decode);
    show("clone of the decoded chunks", clone);
    show("order_chunks", order);
    show("order replayed (kept)", replayed);
    println!("order digest {digest:016x}, replayed {kept_digest:016x}");
    Ok(())
}
