//! The compile steps between rendered high data and a run, in Salt's order
//! (`State.call_high`): extend, structure checks, `_in` requisites,
//! exclude, chunks, requisite graph, order.

use crate::chunk::LowChunk;
use crate::compile::{
    apply_exclude, compile_high_chunks, compile_high_data, reconcile_extend, requisite_in,
    verify_high,
};
use crate::dict::KeySet;
use crate::graph::{ChunkKeys, Graph, OrderKeep};
use crate::module::StateEnv;
use crate::module::StateModules;
use crate::origins::StringOrigins;
use crate::run::{Executor, RunOptions, Running};
use crate::value::{Map, Value};

/// High data compiled into an ordered requisite graph.
#[derive(Debug)]
pub struct Compiled {
    /// The graph, holding the chunks.
    pub graph: Graph,
    /// The run order, as chunk indices (a prereq target appears twice).
    pub order: Vec<usize>,
}

impl Compiled {
    /// The chunks in run order, as `state.show_lowstate` prints them.
    pub fn low_chunks(&self) -> Vec<Value> {
        self.order
            .iter()
            .map(|&i| self.graph.chunks[i].to_value())
            .collect()
    }
}

/// Applies `extend`, checks the structure, applies the `_in` requisites
/// and `use`, then `exclude` (the part of `call_high` before chunks).
/// `origins` (from the render) learns the names `extend` set.
pub fn prepare_high(
    high: &mut Map,
    origins: &mut StringOrigins,
    disabled: &[String],
) -> Result<(), Vec<String>> {
    let mut errors = reconcile_extend(high, false, origins);
    errors.extend(verify_high(high, origins));
    if !errors.is_empty() {
        return Err(errors);
    }
    let errors = requisite_in(high, disabled);
    apply_exclude(high);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Turns `watch` into `require` for modules without `mod_watch`, as Salt's
/// `_reconcile_watch_req` does. A module `modules` does not know at all
/// keeps its `watch`: on a master that is a minion's custom state module
/// (`_states`), and the minion, which loaded it, reconciles it
/// ([`order_chunks`]); where it is missing the state fails as not found
/// before its requisites matter. Returns the chunks it changed (their
/// indices), which a kept order depends on ([`order_chunks_keeping`]).
fn reconcile_watch_req(chunks: &mut [LowChunk], modules: &StateModules) -> Vec<u32> {
    const WATCH: KeySet = KeySet::new(&["watch", "watch_any"]);
    let mut changed = Vec::new();
    for (ci, chunk) in chunks.iter_mut().enumerate() {
        // Most chunks watch nothing: answered by the dict's key filter,
        // before the module is looked up by name (issue 25: on every job).
        if !chunk.contains_any(&WATCH) {
            continue;
        }
        if modules.get(chunk.state()).is_none() || modules.has(chunk.state(), "mod_watch") {
            continue;
        }
        changed.push(ci as u32);
        for (from, to) in [("watch", "require"), ("watch_any", "require_any")] {
            if let Some(w) = chunk.shift_remove(from) {
                let items = match w {
                    Value::Array(a) => a,
                    other => vec![other],
                };
                if !chunk.contains(to) {
                    chunk.insert(to, Value::Array(Vec::new()));
                }
                let Some(entry) = chunk.get_mut(to) else {
                    continue;
                };
                match entry {
                    Value::Array(a) => a.extend(items),
                    other => {
                        let mut a = vec![other.clone()];
                        a.extend(items);
                        *other = Value::Array(a);
                    }
                }
            }
        }
    }
    changed
}

/// Compiles prepared high data into chunks, not yet ordered (Salt's
/// `compile_high_data`, with `watch` turned into `require` where the
/// module has no `mod_watch`). The high data is consumed.
pub fn compile_graph(high: Map, origins: &StringOrigins, modules: &StateModules) -> Graph {
    let mut graph = compile_high_data(high, origins);
    reconcile_watch_req(&mut graph.chunks, modules);
    graph
}

/// The chunks [`compile_graph`] gives, without its graph: compiled, not
/// ordered, and so without the requisite errors ordering finds. For the
/// master's bundle: the minion orders what it is sent ([`order_chunks`])
/// and returns those errors as a Salt minion does from its own compile
/// (issue 25: ordering on the master only to find them was a tenth of
/// its CPU per minion).
pub fn compile_unordered(
    high: Map,
    origins: &StringOrigins,
    modules: &StateModules,
) -> Vec<LowChunk> {
    let mut chunks = compile_high_chunks(high, origins);
    reconcile_watch_req(&mut chunks, modules);
    chunks
}

/// Chunks for a bundle, as the master sends them to a minion: unordered
/// (the minion orders them itself), with their yamlex marks
/// ([`crate::origins::wire_marks`]).
pub type BundleChunks = (Vec<Value>, Vec<(u32, u8)>);

/// The master's compile of rendered high data for a bundle: prepared
/// ([`prepare_high`]: its errors are the job's return), compiled to
/// chunks without ordering ([`compile_unordered`]), the chunks as
/// `Value`s with their yamlex marks. The high data is consumed.
pub fn compile_for_bundle(
    mut high: Map,
    mut origins: StringOrigins,
    modules: &StateModules,
    disabled: &[String],
) -> Result<BundleChunks, Vec<String>> {
    prepare_high(&mut high, &mut origins, disabled)?;
    // Not ordered here: the minion orders the chunks it is sent, as
    // compiled, and returns the requisite errors ordering finds (a
    // missing target, a cycle) as a Salt minion does from its own
    // compile, with its own modules and `disabled_requisites`.
    let chunks = compile_unordered(high, &origins, modules);
    let marks = crate::origins::wire_marks(&chunks);
    Ok((
        chunks.into_iter().map(LowChunk::into_value).collect(),
        marks,
    ))
}

/// Compiles prepared high data into ordered chunks (Salt's
/// `compile_high_data` + `order_chunks`).
/// The high data is consumed (its values move into the chunks).
pub fn compile_chunks(
    high: Map,
    origins: &StringOrigins,
    modules: &StateModules,
    disabled: &[String],
) -> Result<Compiled, Vec<String>> {
    let mut graph = compile_graph(high, origins, modules);
    let order = graph.order(disabled)?;
    Ok(Compiled { graph, order })
}

/// The most chunks [`order_chunks`] sizes its graph for from an
/// iterator's upper bound (a bound is not a count: past it, the tables grow).
const MAX_PRESIZED_CHUNKS: usize = 1 << 20;

/// Orders chunks compiled elsewhere (the master's bundle): the same
/// graph and order [`compile_chunks`] gives for the high data they came
/// from. `modules` are the registry of the host that runs them: `watch`
/// of modules the compiling side did not know is reconciled here.
pub fn order_chunks(
    chunks: impl IntoIterator<Item = LowChunk>,
    modules: &StateModules,
    disabled: &[String],
) -> Result<Compiled, Vec<String>> {
    let chunks = chunks.into_iter();
    // Sized for the bundle's chunks up front: the target index, the
    // node tables and the chunks are not rehashed and copied as they grow
    // (issue 25: a warm minion orders every bundle it runs). The upper
    // bound: the minion's chunks come through a filter (empty ones left
    // out), whose lower bound is 0.
    let (low, high) = chunks.size_hint();
    let mut graph = Graph::with_capacity(high.unwrap_or(low).min(MAX_PRESIZED_CHUNKS).max(low));
    for chunk in chunks {
        graph.add_chunk(chunk);
    }
    reconcile_watch_req(&mut graph.chunks, modules);
    let order = graph.order(disabled)?;
    Ok(Compiled { graph, order })
}

/// [`order_chunks`] for chunks ordered before: the order `keep` holds
/// for them is replayed ([`crate::graph::KeptOrder`], whose doc says why
/// that is the order [`order_chunks`] gives) when it fits, and a fresh
/// order is given to `keep` otherwise. `keep` answers for the chunks: the
/// minion keys it by the bundle's digest (the same bytes, the same chunks);
/// the `disabled_requisites` and the `watch` the host's modules reconcile
/// are checked here. Errors are found afresh on every call, never kept.
pub fn order_chunks_keeping(
    chunks: impl IntoIterator<Item = LowChunk>,
    modules: &StateModules,
    disabled: &[String],
    keep: &dyn OrderKeep,
) -> Result<Compiled, Vec<String>> {
    let kept = keep.kept();
    let chunks = chunks.into_iter();
    let (low, high) = chunks.size_hint();
    let mut graph = Graph::with_capacity(high.unwrap_or(low).min(MAX_PRESIZED_CHUNKS).max(low));
    // Tags only: the target index is built when the first requisite is
    // looked up (a replay looks none up), holding the same chunks in the
    // same order as one built chunk by chunk.
    for chunk in chunks {
        let keys = ChunkKeys::tag_only(&chunk);
        graph.add_keyed_chunk(chunk, keys);
    }
    let reconciled = reconcile_watch_req(&mut graph.chunks, modules);
    if let Some(order) = kept.and_then(|k| k.replay(&mut graph, disabled, &reconciled)) {
        return Ok(Compiled { graph, order });
    }
    let chunk_nodes = graph.node_count();
    graph.record_order();
    let order = graph.order(disabled)?;
    if let Some(kept) = graph.kept_order(chunk_nodes, disabled, reconciled, &order) {
        keep.keep(kept);
    }
    Ok(Compiled { graph, order })
}

/// Salt's `call_high`: prepares, compiles and runs high data (`origins`:
/// where its strings came from, [`crate::HighBuilder::into_origins`]).
pub fn call_high(
    mut high: Map,
    mut origins: StringOrigins,
    modules: &StateModules,
    env: &dyn StateEnv,
    opts: RunOptions,
) -> Result<Running, Vec<String>> {
    let start = std::time::Instant::now();
    prepare_high(&mut high, &mut origins, &opts.disabled_requisites)?;
    let prepared = start.elapsed();
    let compiled = compile_chunks(high, &origins, modules, &opts.disabled_requisites)?;
    let compiled_at = start.elapsed();
    let Compiled { graph, order } = compiled;
    let running = Executor::new(graph, modules, env, opts).run(&order);
    // `-l debug` shows where a run's time went (the render is logged by
    // the caller).
    tracing::debug!(
        target: "halite::timing",
        "{} states: prepare {:.1} ms, compile {:.1} ms, run {:.1} ms",
        order.len(),
        ms(prepared),
        ms(compiled_at - prepared),
        ms(start.elapsed() - compiled_at),
    );
    Ok(running)
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
