//! Running ordered chunks with Salt's requisite semantics: the status of a
//! chunk's requisites decides whether it runs, is skipped, fires
//! `mod_watch`, or fails; prereq runs its target in test mode first;
//! `listen` fires at the end; `failhard` stops the run; `retry` re-runs.
//!
//! This file holds the executor and the types of a run; each concern is a
//! file of its own, and no file here imports one that imports it back:
//! - [`driver`]: the walk over the ordered chunks and through one chunk;
//! - [`requisites`]: the status of a chunk's requisites, and running the
//!   ones not run yet;
//! - [`conditions`]: `unless`, `onlyif`, `creates` and `check_cmd`;
//! - [`call`]: calling a state (argument checks, `retry`, `prereq`'s test
//!   run, `mod_watch`, the refresh after `reload_*`);
//! - [`invoke`]: one call of a state module's function, as a return dict;
//! - [`retry`]: the `retry` option;
//! - [`parallel`]: `parallel: True` states on a worker pool;
//! - [`listen`]: `listen`/`listen_in` at the end of the run;
//! - [`events`]: the job's progress events;
//! - [`clock`]: Salt's `start_time` and `duration`.

mod call;
mod clock;
mod conditions;
mod driver;
mod events;
mod invoke;
mod listen;
mod parallel;
mod requisites;
mod retry;

use std::collections::HashMap;

use indexmap::IndexMap;

use crate::chunk::LowChunk;
use crate::dict::SmallDict;
use crate::graph::Graph;
use crate::module::{truthy, StateEnv, StateModules};
use crate::requisite::py_str;
use crate::value::Value;
use rustc_hash::FxBuildHasher;

/// How a run behaves.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// `test=True`: predict, change nothing.
    pub test: bool,
    /// Global `failhard`.
    pub failhard: bool,
    /// Fire `salt/job/<jid>/prog/<id>/<n>` after each state.
    pub state_events: bool,
    /// The job id (for event tags).
    pub jid: String,
    /// The minion id (for event tags).
    pub minion_id: String,
    /// Requisite kinds disabled by `disabled_requisites`.
    pub disabled_requisites: Vec<String>,
    /// The run's `pillar=` argument, kept to merge over a pillar compiled
    /// again by `reload_pillar`.
    pub pillar_override: Option<Value>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            test: false,
            failhard: false,
            state_events: false,
            jid: String::new(),
            minion_id: "local".into(),
            disabled_requisites: Vec::new(),
            pillar_override: None,
        }
    }
}

/// One state's return, as Salt's dict (`name`, `changes`, `result`,
/// `comment`, and the run's bookkeeping keys).
pub type StateReturn = SmallDict;

/// The result of running a compiled state tree: tag -> state return,
/// in the order states finished.
pub type Running = IndexMap<String, StateReturn, FxBuildHasher>;

/// Executes a compiled, ordered graph.
pub struct Executor<'a> {
    graph: Graph,
    modules: &'a StateModules,
    env: &'a dyn StateEnv,
    /// The environment after a `reload_grains` / `reload_pillar` state:
    /// the states after it see its grains and pillar.
    refreshed: Option<Box<dyn StateEnv>>,
    opts: RunOptions,
    running: Running,
    pre: HashMap<String, StateReturn>,
    run_num: u64,
    total: usize,
    failhard_stop: bool,
    pool: Option<Pool>,
    /// What `file.accumulated` states charged during this run.
    accumulators: crate::accumulators::Accumulators,
}

/// Says once per run that `state_aggregate` / `aggregate: True` is read
/// but not acted on. Salt 3008.5's own aggregation of `pkg` states drops
/// the first state's package from the merged install and turns a
/// `version` into a duplicate-name error (checked side by side, see
/// docs/state-engine.md); halite runs each state on its own: the same
/// end state, in more package-manager calls.
fn warn_no_aggregation() {
    tracing::warn!(
        "State aggregation (state_aggregate / aggregate: True) is not supported: \
         each state runs on its own (the same end state, in one package-manager \
         call per pkg state). Remove the option to silence this warning."
    );
}

/// Set by [`leave_graphs_to_exit`].
static LEAVE_GRAPHS_TO_EXIT: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// For a process that exits right after its run (`halite-call`): a
/// finished run's graph is not freed but left for the exit to reclaim.
/// Freeing it is tens of thousands of small frees (~5 M instructions for
/// 10 000 states, several times that when another thread allocated
/// them); the system takes the whole heap back at once. Daemons never
/// call it.
pub fn leave_graphs_to_exit() {
    LEAVE_GRAPHS_TO_EXIT.store(true, std::sync::atomic::Ordering::Relaxed);
}

fn has_changes(ret: &StateReturn) -> bool {
    ret.get("changes").is_some_and(truthy)
}

/// Python's `str()` of a state result.
fn py_result(v: Option<&Value>) -> String {
    match v {
        Some(Value::Bool(true)) => "True".into(),
        Some(Value::Bool(false)) => "False".into(),
        Some(Value::Null) | None => "None".into(),
        Some(other) => py_str(other),
    }
}

impl<'a> Executor<'a> {
    /// An executor over an ordered graph.
    pub fn new(
        graph: Graph,
        modules: &'a StateModules,
        env: &'a dyn StateEnv,
        opts: RunOptions,
    ) -> Self {
        Executor {
            graph,
            modules,
            env,
            refreshed: None,
            opts,
            running: Running::default(),
            pre: HashMap::new(),
            run_num: 0,
            total: 0,
            failhard_stop: false,
            pool: None,
            accumulators: crate::accumulators::Accumulators::default(),
        }
    }

    /// Runs the chunks in `order` (from [`Graph::order`]), then the
    /// listeners; returns every state's return.
    pub fn run(mut self, order: &[usize]) -> Running {
        self.total = order.len();
        self.running.reserve(order.len());
        let (mut parallel, mut aggregate) = (false, false);
        for &ci in order {
            let chunk = &self.graph.chunks[ci];
            parallel = parallel || chunk.get("parallel").is_some_and(truthy);
            aggregate = aggregate || chunk.get("aggregate").is_some_and(truthy);
        }
        if aggregate || self.env.opts().get("state_aggregate").is_some_and(truthy) {
            warn_no_aggregation();
        }
        if !parallel {
            self.run_all(order);
            return self.finish();
        }
        self.run_on_pool(order);
        self.finish()
    }

    /// The returns; the graph is freed, or left to the process's exit
    /// (see [`leave_graphs_to_exit`]).
    fn finish(self) -> Running {
        let Executor { graph, running, .. } = self;
        if LEAVE_GRAPHS_TO_EXIT.load(std::sync::atomic::Ordering::Relaxed) {
            std::mem::forget(graph);
        }
        running
    }
}

/// A `parallel: True` state handed to the worker pool.
struct ParallelJob {
    tag: String,
    low: LowChunk,
    test: bool,
}

/// The worker pool of a run with `parallel: True` states.
struct Pool {
    jobs: std::sync::mpsc::Sender<ParallelJob>,
    results: std::sync::mpsc::Receiver<(String, StateReturn)>,
    pending: std::collections::HashSet<String>,
}
