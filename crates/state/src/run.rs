//! Running ordered chunks with Salt's requisite semantics: the status of a
//! chunk's requisites decides whether it runs, is skipped, fires
//! `mod_watch`, or fails; prereq runs its target in test mode first;
//! `listen` fires at the end; `failhard` stops the run; `retry` re-runs.

use std::collections::HashMap;
use std::time::Instant;

use indexmap::IndexMap;

use crate::graph::{chunk_tag, name_str, Graph};
use crate::module::{truthy, CmdOptions, StateCall, StateEnv, StateError, StateModules};
use crate::requisite::{py_str, RequisiteKind, REQUISITE_KEYWORDS};
use crate::{LowChunk, Map, SmallDict, Value};
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

/// A chunk's requisites grouped by kind, kinds in first-seen order.
type ReqsByKind = Vec<(RequisiteKind, Vec<usize>)>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Unmet,
    Fail,
    SkipReq,
    SkipWatch,
    Pre,
    Met,
    Onfail,
    Onchanges,
    Change,
}

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
    accumulators: crate::Accumulators,
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

/// The local UTC offset, looked up once per process (the timezone does
/// not change during a run; chrono's lookup is the costly part).
fn local_offset_secs() -> i64 {
    static OFFSET: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *OFFSET.get_or_init(|| i64::from(chrono::Local::now().offset().local_minus_utc()))
}

/// Salt's `start_time`: local wall-clock time as `HH:MM:SS.ffffff`.
fn now_time() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = (now.as_secs() as i64 + local_offset_secs()).rem_euclid(86_400) as u32;
    clock_text(secs, now.subsec_micros())
}

/// `HH:MM:SS.ffffff` of a second of the day and its microseconds, written
/// digit by digit (once per state: `format!` costs ten times as much).
fn clock_text(secs: u32, micros: u32) -> String {
    let mut b = *b"00:00:00.000000";
    let mut put = |at: usize, width: usize, mut v: u32| {
        for i in (at..at + width).rev() {
            b[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 2, secs / 3600);
    put(3, 2, secs / 60 % 60);
    put(6, 2, secs % 60);
    put(9, 6, micros);
    // ASCII digits and separators: always UTF-8.
    std::str::from_utf8(&b).unwrap_or_default().to_owned()
}

fn ms_since(start: Instant) -> f64 {
    (start.elapsed().as_secs_f64() * 1_000_000.0).round() / 1000.0
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
            accumulators: crate::Accumulators::default(),
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
        // `parallel: True` states run on a worker pool; the rest of the run
        // goes on, and a state that depends on a running one waits for it.
        let workers = self
            .env
            .opts()
            .get("state_max_parallel")
            .and_then(Value::as_u64)
            .filter(|n| *n > 0)
            .unwrap_or(8) as usize;
        let modules = self.modules;
        let env = self.env;
        let (job_tx, job_rx) = std::sync::mpsc::channel::<ParallelJob>();
        let job_rx = std::sync::Mutex::new(job_rx);
        let (res_tx, res_rx) = std::sync::mpsc::channel::<(String, StateReturn)>();
        std::thread::scope(|scope| {
            for _ in 0..workers {
                let res_tx = res_tx.clone();
                let job_rx = &job_rx;
                scope.spawn(move || loop {
                    let job = match job_rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok(job) = job else { return };
                    let ret = run_parallel_job(modules, env, &job);
                    if res_tx.send((job.tag, ret)).is_err() {
                        return;
                    }
                });
            }
            drop(res_tx);
            self.pool = Some(Pool {
                jobs: job_tx,
                results: res_rx,
                pending: Default::default(),
            });
            self.run_all(order);
            self.wait_parallel(None);
            // Dropping the pool closes the job channel: the workers exit.
            self.pool = None;
        });
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

    fn run_all(&mut self, order: &[usize]) {
        self.call_chunks(order);
        self.wait_parallel(None);
        if !self.failhard_stop {
            self.call_listen(order);
        }
    }

    /// Waits for the parallel states in `tags` (all when `None`) and
    /// merges their results into the running dict, as Salt's
    /// `reconcile_procs` does.
    fn wait_parallel(&mut self, tags: Option<&[String]>) {
        loop {
            let Some(pool) = self.pool.as_mut() else {
                return;
            };
            let waiting = match tags {
                None => !pool.pending.is_empty(),
                Some(t) => t.iter().any(|t| pool.pending.contains(t)),
            };
            if !waiting {
                return;
            }
            let Ok((tag, ret)) = pool.results.recv() else {
                // Workers gone: fail what is still pending rather than hang.
                let left: Vec<String> = pool.pending.drain().collect();
                for tag in left {
                    if let Some(r) = self.running.get_mut(&tag) {
                        r.insert("result", Value::Bool(false));
                        r.insert("comment", Value::from("Parallel process failed to return"));
                    }
                }
                return;
            };
            pool.pending.remove(&tag);
            if let Some(r) = self.running.get_mut(&tag) {
                for (k, v) in ret {
                    r.insert(k, v);
                }
            }
            if let (Some(ci), Some(r)) = (self.graph.chunk_index(&tag), self.running.get(&tag)) {
                let r = r.clone();
                self.fire_events(ci, &r);
            }
        }
    }

    fn call_chunks(&mut self, order: &[usize]) {
        for &ci in order {
            if self.failhard_stop {
                return;
            }
            if !self.running.contains_key(self.graph.tag(ci)) {
                self.call_chunk(ci, 0);
                if self.check_failhard(ci) {
                    self.failhard_stop = true;
                    return;
                }
            }
        }
    }

    fn check_failhard(&self, ci: usize) -> bool {
        if self.opts.test {
            return false;
        }
        let low = &self.graph.chunks[ci];
        let failhard = low
            .get("failhard")
            .map(truthy)
            .unwrap_or(self.opts.failhard);
        if !failhard {
            return false;
        }
        match self.running.get(self.graph.tag(ci)) {
            Some(ret) => match ret.get("result") {
                Some(Value::Null) | None => false,
                Some(v) => !truthy(v),
            },
            None => false,
        }
    }

    fn is_prereq(&self, ci: usize) -> bool {
        self.graph.chunks[ci].get("__prereq__") == Some(&Value::Bool(true))
    }

    fn check_requisites(&self, ci: usize) -> (Status, ReqsByKind) {
        // A few kinds at most: a list in first-seen order, no hashing.
        let mut reqs: ReqsByKind = Vec::new();
        for (kind, dep) in self.graph.dependencies(ci) {
            match reqs.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, deps)) => deps.push(dep),
                None => reqs.push((kind, vec![dep])),
            }
        }
        let mut fun_stats: Vec<&'static str> = Vec::new();
        for (kind, deps) in &reqs {
            let base = kind.base();
            let mut req_stats: Vec<&'static str> = Vec::new();
            let add = |s: &mut Vec<&'static str>, v: &'static str| {
                if !s.contains(&v) {
                    s.push(v);
                }
            };
            for &dep in deps {
                let tag = self.graph.tag(dep);
                let ret = if base == RequisiteKind::Prereq {
                    self.pre.get(tag)
                } else {
                    self.running.get(tag)
                };
                let Some(ret) = ret else {
                    add(&mut req_stats, "unmet");
                    continue;
                };
                if ret.get("skip_req").is_some_and(truthy) {
                    add(&mut req_stats, "skip_req");
                }
                let result = ret.get("result");
                let is_false = result == Some(&Value::Bool(false));
                if base == RequisiteKind::Onfail {
                    if result == Some(&Value::Bool(true)) {
                        add(&mut req_stats, "onfail");
                        continue;
                    }
                } else if base == RequisiteKind::Onchanges {
                    if is_false || !has_changes(ret) {
                        add(&mut req_stats, "onchanges");
                    } else {
                        add(&mut req_stats, "onchangesmet");
                    }
                    continue;
                } else if is_false {
                    add(&mut req_stats, "fail");
                    continue;
                }
                if base == RequisiteKind::Watch && has_changes(ret) {
                    add(&mut req_stats, "change");
                    continue;
                }
                if base == RequisiteKind::Prereq {
                    if matches!(result, Some(Value::Null) | None) {
                        add(&mut req_stats, "premet");
                    } else {
                        add(&mut req_stats, "pre");
                    }
                } else if ret.get("__state_ran__").map(truthy).unwrap_or(true) {
                    add(&mut req_stats, "met");
                }
            }
            let remove = |s: &mut Vec<&'static str>, v: &'static str| s.retain(|x| *x != v);
            if kind.is_any() || *kind == RequisiteKind::Onfail {
                if req_stats.contains(&"met") || req_stats.contains(&"change") {
                    remove(&mut req_stats, "fail");
                }
                if req_stats.contains(&"onchangesmet") {
                    remove(&mut req_stats, "onchanges");
                    remove(&mut req_stats, "fail");
                }
                if req_stats.contains(&"onfail") && req_stats.contains(&"met") {
                    remove(&mut req_stats, "onfail");
                }
            }
            if *kind == RequisiteKind::OnfailAll && req_stats.contains(&"onfail") {
                remove(&mut req_stats, "met");
            }
            for s in req_stats {
                if !fun_stats.contains(&s) {
                    fun_stats.push(s);
                }
            }
        }
        let has = |s: &str| fun_stats.contains(&s);
        let status = if has("unmet") {
            Status::Unmet
        } else if has("fail") {
            Status::Fail
        } else if has("skip_req") && (has("onchangesmet") || has("premet")) {
            Status::SkipReq
        } else if has("skip_req") && has("change") {
            Status::SkipWatch
        } else if has("pre") {
            if has("premet") {
                Status::Met
            } else {
                Status::Pre
            }
        } else if has("onfail") && !has("onchangesmet") {
            Status::Onfail
        } else if has("onchanges") && !has("onchangesmet") {
            Status::Onchanges
        } else if has("change") {
            Status::Change
        } else if has("onfail") {
            Status::Onfail
        } else {
            Status::Met
        };
        (status, reqs)
    }

    fn not_run(&mut self, ci: usize, tag: &str, result: bool, comment: &str) {
        let low = &self.graph.chunks[ci];
        let mut ret = StateReturn::new();
        ret.insert("changes", Value::Object(Map::new()));
        ret.insert("result", Value::Bool(result));
        ret.insert("duration", Value::from(0.0));
        ret.insert("start_time", Value::from(now_time()));
        ret.insert("comment", Value::from(comment));
        ret.insert("__state_ran__", Value::Bool(false));
        ret.insert("__run_num__", Value::from(self.run_num));
        stamp_identity(&mut ret, low);
        if self.is_prereq(ci) {
            self.pre.insert(tag.to_string(), ret.clone());
        }
        self.running.insert(tag.to_string(), ret);
        self.run_num += 1;
    }

    fn call_chunk(&mut self, ci: usize, depth: u32) {
        if self.pool.as_ref().is_some_and(|p| !p.pending.is_empty()) {
            let deps: Vec<String> = self
                .graph
                .dependencies(ci)
                .into_iter()
                .map(|(_, d)| self.graph.tag(d).to_string())
                .collect();
            self.wait_parallel(Some(&deps));
        }
        let tag = self.graph.tag(ci).to_string();
        let prereq = self.is_prereq(ci);
        let (status, reqs) = self.check_requisites(ci);
        match status {
            Status::Unmet => {
                if self.call_unmet_requisites(ci, &tag, depth) {
                    return;
                }
            }
            Status::Met => {
                let ret = self.call(ci, None);
                self.store(tag, prereq, ret);
            }
            Status::SkipReq => self.not_run(
                ci,
                &tag,
                true,
                "State was not run because requisites were skipped by another state",
            ),
            Status::SkipWatch if !prereq => {
                let mut ret = self.call(ci, None);
                let c = ret.get("comment").map(py_str).unwrap_or_default();
                ret.insert("comment",
                    Value::from(c + " mod_watch was not run because requisites were skipped by another state"),
                );
                self.running.insert(tag, ret);
            }
            Status::Fail => {
                if let Some(mut pre) = self.pre.get(&tag).cloned() {
                    if pre.get("changes").is_some_and(truthy) {
                        pre.insert("changes", Value::Object(Map::new()));
                    }
                    pre.insert("__run_num__", Value::from(self.run_num));
                    let low = &self.graph.chunks[ci];
                    stamp_identity(&mut pre, low);
                    self.running.insert(tag, pre);
                    self.run_num += 1;
                } else {
                    let mut failed: Vec<String> = Vec::new();
                    for (_, deps) in &reqs {
                        for &dep in deps {
                            let dtag = self.graph.tag(dep).to_string();
                            let dret = self.pre.get(&dtag).or_else(|| self.running.get(&dtag));
                            if let Some(dret) = dret {
                                if dret.get("result") == Some(&Value::Bool(false)) {
                                    let d = &self.graph.chunks[dep];
                                    let key = format!("{}.{}", d.sls(), d.id());
                                    if !failed.contains(&key) {
                                        failed.push(key);
                                    }
                                }
                            }
                        }
                    }
                    let comment = format!("One or more requisite failed: {}", failed.join(", "));
                    self.not_run(ci, &tag, false, &comment);
                }
            }
            Status::Change if !prereq => {
                let mut ret = self.call(ci, None);
                if !has_changes(&ret) && !ret.get("skip_watch").is_some_and(truthy) {
                    let mut reqs_map = Map::new();
                    // Salt's `__reqs__` holds every requisite kind; the
                    // mod_watch functions read the watch ones only, so only
                    // those are built (a fan-in state requires many more).
                    for (kind, deps) in reqs
                        .iter()
                        .filter(|(k, _)| k.base() == RequisiteKind::Watch)
                    {
                        let list: Vec<Value> = deps
                            .iter()
                            .map(|&d| {
                                // Salt passes the whole low chunk; mod_watch
                                // functions read only who it is and its
                                // changes, so a whole clone (requisite lists
                                // and all, per edge) would be wasted.
                                let low = &self.graph.chunks[d];
                                let mut m = Map::with_capacity(7);
                                for key in ["state", "__id__", "name", "fun", "__sls__", "__env__"]
                                {
                                    if let Some(v) = low.get(key) {
                                        m.insert(key.into(), v.clone());
                                    }
                                }
                                let dtag = self.graph.tag(d).to_string();
                                let changes = self
                                    .running
                                    .get(&dtag)
                                    .and_then(|r| r.get("changes").cloned())
                                    .unwrap_or(Value::Object(Map::new()));
                                m.insert("__changes__".into(), changes);
                                Value::Object(m)
                            })
                            .collect();
                        reqs_map.insert(kind.keyword().into(), Value::Array(list));
                    }
                    ret = self.call(ci, Some(reqs_map));
                }
                self.running.insert(tag, ret);
            }
            Status::Pre => self.not_run(ci, &tag, true, "No changes detected"),
            Status::Onfail => self.not_run(
                ci,
                &tag,
                true,
                "State was not run because onfail req did not change",
            ),
            Status::Onchanges => self.not_run(
                ci,
                &tag,
                true,
                "State was not run because none of the onchanges reqs changed",
            ),
            Status::SkipWatch | Status::Change => {
                let ret = self.call(ci, None);
                self.store(tag, prereq, ret);
            }
        }
        // The tag was moved into the records: read it from the graph.
        let tag = self.graph.tag(ci);
        let in_flight = self.pool.as_ref().is_some_and(|p| p.pending.contains(tag));
        if let (false, Some(ret)) = (in_flight, self.running.get(tag)) {
            self.fire_events(ci, ret);
        }
    }

    fn store(&mut self, tag: String, prereq: bool, ret: StateReturn) {
        if prereq {
            self.pre.insert(tag, ret);
        } else {
            self.running.insert(tag, ret);
        }
    }

    /// Runs the requisites of `ci` that have not run, then `ci`. Returns
    /// true when failhard stopped the run.
    fn call_unmet_requisites(&mut self, ci: usize, tag: &str, depth: u32) -> bool {
        for (_, dep) in self.graph.dependencies(ci) {
            let dtag = self.graph.tag(dep).to_string();
            if !self.running.contains_key(&dtag) {
                self.call_chunk(dep, 0);
                if self.failhard_stop || self.check_failhard(dep) {
                    self.failhard_stop = true;
                    return true;
                }
            }
        }
        if self.is_prereq(ci) {
            let (status, _) = self.check_requisites(ci);
            if status == Status::Pre {
                let low = &self.graph.chunks[ci];
                let mut ret = StateReturn::new();
                ret.insert("changes", Value::Object(Map::new()));
                ret.insert("result", Value::Bool(true));
                ret.insert("duration", Value::from(0.0));
                ret.insert("start_time", Value::from(now_time()));
                ret.insert("comment", Value::from("No changes detected"));
                ret.insert("__run_num__", Value::from(self.run_num));
                ret.insert("__state_ran__", Value::Bool(false));
                stamp_identity(&mut ret, low);
                self.pre.insert(tag.to_string(), ret);
                self.run_num += 1;
            } else {
                let mut ret = self.call(ci, None);
                if !has_changes(&ret) && status == Status::Change {
                    let mut ch = Map::new();
                    ch.insert("watch".into(), Value::from("watch"));
                    ret.insert("changes", Value::Object(ch));
                    ret.insert("result", Value::Null);
                }
                self.pre.insert(tag.to_string(), ret);
            }
        } else if depth + 1 >= 20 {
            let low = &self.graph.chunks[ci];
            let mut ret = StateReturn::new();
            ret.insert("changes", Value::Object(Map::new()));
            ret.insert("result", Value::Bool(false));
            ret.insert("comment", Value::from("Recursive requisite found"));
            ret.insert("__run_num__", Value::from(self.run_num));
            stamp_identity(&mut ret, low);
            self.running.insert(tag.to_string(), ret);
        } else {
            self.call_chunk(ci, depth + 1);
        }
        if self.check_failhard(ci) {
            self.failhard_stop = true;
            return true;
        }
        false
    }

    fn verify_data(&self, low: &LowChunk) -> Vec<String> {
        let mut errors = Vec::new();
        if !low.contains("state") {
            errors.push("Missing \"state\" data".to_string());
        }
        if !low.contains("fun") {
            errors.push("Missing \"fun\" data".to_string());
        }
        match low.get("name") {
            None => errors.push("Missing \"name\" data".to_string()),
            Some(Value::String(_)) | Some(Value::Null) => {}
            Some(v) if !truthy(v) => {}
            Some(v) => errors.push(format!(
                "ID '{}' in SLS '{}' is not formed as a string, but is a {}",
                py_str(v),
                low.sls(),
                crate::type_name(v)
            )),
        }
        if !errors.is_empty() {
            return errors;
        }
        if !self.modules.has(low.state(), low.fun()) {
            let full = format!("{}.{}", low.state(), low.fun());
            if low.contains("__sls__") {
                errors.push(format!(
                    "State '{full}' was not found in SLS '{}'",
                    low.sls()
                ));
                errors.push(format!("Reason: '{full}' is not available."));
            } else {
                errors.push(format!("Specified state '{full}' was not found"));
            }
        }
        errors
    }

    /// Salt's `State.call`: one state function, with unless/onlyif/creates,
    /// check_cmd and retry. `watch_reqs` set means this is the `mod_watch`
    /// call of a watching state.
    fn call(&mut self, ci: usize, watch_reqs: Option<Map>) -> StateReturn {
        self.call_attempt(ci, watch_reqs, 1)
    }

    /// The environment states run in now: the host's, or the one a
    /// `reload_grains` / `reload_pillar` state left.
    fn env(&self) -> &dyn StateEnv {
        match &self.refreshed {
            Some(env) => env.as_ref(),
            None => self.env,
        }
    }

    /// Salt's `check_refresh`: after a state with `reload_grains` or
    /// `reload_pillar` (whatever its result or changes), the states after
    /// it see grains detected again / the pillar compiled again. Called
    /// where Salt's `State.call` calls it: after each attempt's
    /// bookkeeping, so not for a prereq test run or a chunk that failed
    /// verification; `parallel: True` states keep the environment the run
    /// started with.
    fn check_refresh(&mut self, ci: usize) {
        let low = &self.graph.chunks[ci];
        let grains = low.get("reload_grains").is_some_and(truthy);
        let pillar = low.get("reload_pillar").is_some_and(truthy);
        if !grains && !pillar {
            return;
        }
        match self
            .env()
            .refreshed(grains, pillar, self.opts.pillar_override.as_ref())
        {
            Some(env) => self.refreshed = Some(env),
            None => tracing::debug!("this run's environment cannot reload grains or pillar"),
        }
    }

    fn call_attempt(&mut self, ci: usize, watch_reqs: Option<Map>, attempt: u64) -> StateReturn {
        let start = Instant::now();
        let start_time = now_time();
        // The chunk is taken out of the graph for the call (no per-call
        // clone) and put back before anything else reads it.
        let low = std::mem::take(&mut self.graph.chunks[ci]);
        let outcome = self.call_once(&low, watch_reqs.as_ref());
        let prereq = low.get("__prereq__") == Some(&Value::Bool(true));
        let retry = low.get("retry").map(RetrySpec::from_value);
        let sls = low.get("__sls__").cloned().unwrap_or(Value::Null);
        let id = Value::from(low.id());
        self.graph.chunks[ci] = low;
        let mut ret = match outcome {
            Ok(ret) => ret,
            Err(early) => return early,
        };
        if prereq {
            self.graph.chunks[ci].insert("__prereq__", Value::Bool(false));
            return ret;
        }
        ret.insert("__sls__", sls);
        ret.insert("__run_num__", Value::from(self.run_num));
        self.run_num += 1;
        ret.insert("start_time", Value::from(start_time));
        ret.insert("duration", Value::from(ms_since(start)));
        ret.insert("__id__", id);
        self.check_refresh(ci);
        let Some(retry) = retry else { return ret };
        if self
            .pool
            .as_ref()
            .is_some_and(|p| p.pending.contains(self.graph.tag(ci)))
        {
            // A parallel state retries inside its worker.
            return ret;
        }
        if self.opts.test {
            note_would_retry(&mut ret, &retry);
            return ret;
        }
        let result = ret.get("result").and_then(Value::as_bool);
        if result == Some(retry.until) || retry.attempts <= attempt {
            return ret;
        }
        let mut interval = retry.interval;
        if retry.splay > 0 {
            interval += pseudo_random(retry.splay);
        }
        if interval > 0 {
            std::thread::sleep(std::time::Duration::from_secs(interval));
        }
        let orig = ret;
        let mut again = self.call_attempt(ci, None, attempt + 1);
        let orig_comment = orig.get("comment").map(py_str).unwrap_or_default();
        let new_comment = again.get("comment").map(py_str).unwrap_or_default();
        again.insert("comment",
            Value::from(format!(
                "Attempt {attempt}: Returned a result of \"{}\", with the following comment: \"{orig_comment}\"\n{new_comment}",
                py_result(orig.get("result")),
            )),
        );
        let d = again.get("duration").and_then(Value::as_f64).unwrap_or(0.0)
            + orig.get("duration").and_then(Value::as_f64).unwrap_or(0.0)
            + (interval * 1000) as f64;
        again.insert("duration", Value::from(d));
        if attempt == 1 {
            if let Some(st) = orig.get("start_time") {
                again.insert("start_time", st.clone());
            }
        }
        again
    }

    /// Runs the checks and the state function once. `Err` is Salt's early
    /// return for a chunk that fails verification (it takes a run number
    /// but none of the bookkeeping keys).
    fn call_once(
        &mut self,
        low: &LowChunk,
        watch_reqs: Option<&Map>,
    ) -> Result<StateReturn, StateReturn> {
        let errors = self.verify_data(low);
        if !errors.is_empty() {
            let mut ret = StateReturn::new();
            ret.insert("result", Value::Bool(false));
            ret.insert("name", low.get("name").cloned().unwrap_or(Value::Null));
            ret.insert("changes", Value::Object(Map::new()));
            ret.insert(
                "comment",
                Value::from(errors.iter().map(|e| format!("{e}\n")).collect::<String>()),
            );
            ret.insert("__run_num__", Value::from(self.run_num));
            self.run_num += 1;
            return Err(ret);
        }
        let prereq = low.get("__prereq__") == Some(&Value::Bool(true));
        let test = self.opts.test || prereq || low.get("test").is_some_and(truthy);
        // Without unless/onlyif/creates the state function runs and its
        // return replaces this map, so it is only built for the checks.
        let mut ret = StateReturn::new();
        let checked = ["unless", "onlyif", "creates"]
            .iter()
            .any(|k| low.contains(k));
        if checked {
            ret.insert("result", Value::Bool(false));
            ret.insert("name", low.get("name").cloned().unwrap_or(Value::Null));
            ret.insert("changes", Value::Object(Map::new()));
            for (k, v) in self.run_check(low) {
                ret.insert(k, v);
            }
        }
        let pending = !checked || ret.get("result") == Some(&Value::Bool(false));
        let parallel = !prereq && watch_reqs.is_none() && low.get("parallel").is_some_and(truthy);
        if parallel && pending {
            if let Some(pool) = self.pool.as_mut() {
                let tag = chunk_tag(low);
                let job = ParallelJob {
                    tag: tag.clone(),
                    low: low.clone(),
                    test,
                };
                if pool.jobs.send(job).is_ok() {
                    pool.pending.insert(tag);
                    let mut placeholder = StateReturn::new();
                    placeholder.insert("name", low.get("name").cloned().unwrap_or(Value::Null));
                    placeholder.insert("result", Value::Null);
                    placeholder.insert("changes", Value::Object(Map::new()));
                    placeholder.insert("comment", Value::from("Started in a separate process"));
                    return Ok(placeholder);
                }
            }
        }
        if pending {
            ret = match watch_reqs {
                Some(reqs) => {
                    let mut watch_low = low.clone();
                    watch_low.insert("fun", Value::from("mod_watch"));
                    self.call_module(&watch_low, test, Some(low.fun()), Some(reqs))
                }
                None => self.call_module(low, test, None, None),
            };
        }
        let own_check = || {
            self.modules
                .get(low.state())
                .is_some_and(|m| m.runs_own_check_cmd(low.fun()))
        };
        if low.contains("check_cmd") && !own_check() {
            for (k, v) in self.run_check_cmd(low) {
                ret.insert(k, v);
            }
        }
        Ok(ret)
    }

    fn call_module(
        &self,
        low: &LowChunk,
        test: bool,
        sfun: Option<&str>,
        reqs: Option<&Map>,
    ) -> StateReturn {
        let env = RunEnv {
            inner: self.env(),
            lowstate: &self.graph.chunks,
            accumulators: &self.accumulators,
        };
        call_module(self.modules, &env, low, test, sfun, reqs)
    }

    fn cmd_options(&self, low: &LowChunk) -> CmdOptions {
        let excluded: Vec<String> = match low.get("cmd_opts_exclude") {
            Some(Value::Array(a)) => a.iter().map(py_str).collect(),
            Some(v) => vec![py_str(v)],
            None => Vec::new(),
        };
        let get = |k: &str| {
            if excluded.iter().any(|e| e == k) {
                None
            } else {
                low.get(k).filter(|v| !v.is_null()).map(py_str)
            }
        };
        let mut env = Vec::new();
        if !excluded.iter().any(|e| e == "env") {
            match low.get("env") {
                Some(Value::Object(m)) => env.extend(m.iter().map(|(k, v)| (k.clone(), py_str(v)))),
                Some(Value::Array(a)) => {
                    for item in a {
                        if let Value::Object(m) = item {
                            env.extend(m.iter().map(|(k, v)| (k.clone(), py_str(v))));
                        }
                    }
                }
                _ => {}
            }
        }
        CmdOptions {
            cwd: get("cwd"),
            runas: get("runas"),
            shell: get("shell").or_else(|| {
                self.env()
                    .grains()
                    .get("shell")
                    .and_then(Value::as_str)
                    .map(String::from)
            }),
            env,
            stdin: None,
            python_shell: true,
            timeout_secs: get("timeout").and_then(|t| t.parse().ok()),
        }
    }

    fn retcode(&self, cmd: &str, opts: &CmdOptions) -> i32 {
        match self.env().run_cmd(cmd, opts) {
            Ok(out) => out.retcode,
            Err(e) => {
                tracing::debug!("command {cmd:?} could not run: {e}");
                127
            }
        }
    }

    fn run_check_function(&self, entry: &Map) -> Result<Value, String> {
        let fun = entry.get("fun").map(py_str).unwrap_or_default();
        let args: Vec<Value> = match entry.get("args") {
            Some(Value::Array(a)) => a.clone(),
            Some(v) => vec![v.clone()],
            None => Vec::new(),
        };
        let kwargs: Map = entry
            .iter()
            .filter(|(k, _)| *k != "fun" && *k != "args" && *k != "get_return")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut result = self.env().call_function(&fun, &args, &kwargs)?;
        if let Some(path) = entry.get("get_return").map(py_str) {
            for part in path.split(':') {
                result = match result {
                    Value::Object(m) => m.get(part).cloned().unwrap_or(Value::Null),
                    Value::Array(a) => part
                        .parse::<usize>()
                        .ok()
                        .and_then(|i| a.get(i).cloned())
                        .unwrap_or(Value::Null),
                    _ => Value::Null,
                };
            }
        }
        Ok(result)
    }

    /// Evaluates one `onlyif`/`unless` entry: a shell command (exit 0
    /// holds) or a `fun:` mapping (a truthy return holds).
    fn eval_condition(&self, entry: &Value, cmd_opts: &CmdOptions) -> Condition {
        match entry {
            Value::Object(m) if !m.contains_key("fun") => {
                Condition::NoFun(crate::requisite::py_dict(m))
            }
            Value::Object(m) => match self.run_check_function(m) {
                Ok(v) if truthy(&v) => Condition::Holds,
                _ => Condition::Fails(false),
            },
            Value::Null | Value::Array(_) => Condition::BadType,
            other => {
                if self.retcode(&py_str(other), cmd_opts) == 0 {
                    Condition::Holds
                } else {
                    Condition::Fails(true)
                }
            }
        }
    }

    /// Salt's `_run_check`: unless / onlyif / creates.
    fn run_check(&self, low: &LowChunk) -> StateReturn {
        let mut comments: Vec<String> = Vec::new();
        let mut result = false;
        let mut skip_watch: Option<bool> = None;
        let cmd_opts = self.cmd_options(low);
        let list = |v: &Value| match v {
            Value::Array(a) => a.clone(),
            other => vec![other.clone()],
        };
        if let Some(onlyif) = low.get("onlyif") {
            let mut r = false;
            let mut comment = String::new();
            for entry in list(onlyif) {
                match self.eval_condition(&entry, &cmd_opts) {
                    Condition::NoFun(m) => {
                        comment = format!("no `fun` argument in onlyif: {m}");
                        break;
                    }
                    Condition::BadType => {
                        comment = "onlyif execution failed, bad type passed".into();
                        r = false;
                        break;
                    }
                    Condition::Holds => {
                        comment = "onlyif condition is true".into();
                        r = false;
                    }
                    Condition::Fails(_) => {
                        comment = "onlyif condition is false".into();
                        skip_watch = Some(true);
                        r = true;
                        break;
                    }
                }
            }
            result = r;
            comments.push(comment);
        }
        if let Some(unless) = low.get("unless") {
            let mut r = false;
            let mut comment = String::new();
            let mut sw: Option<bool> = None;
            for entry in list(unless) {
                match self.eval_condition(&entry, &cmd_opts) {
                    Condition::NoFun(m) => {
                        comment = format!("no `fun` argument in unless: {m}");
                        break;
                    }
                    Condition::BadType => {
                        comment = "unless condition is false, bad type passed".into();
                        r = false;
                    }
                    Condition::Holds => {
                        comment = "unless condition is true".into();
                        sw = Some(true);
                        r = true;
                    }
                    Condition::Fails(from_command) => {
                        // Salt drops skip_watch for a failing command, and
                        // keeps it for a failing function.
                        if from_command {
                            sw = None;
                        }
                        comment = "unless condition is false".into();
                        r = false;
                        break;
                    }
                }
            }
            result = r || result;
            comments.push(comment);
            if let Some(s) = sw {
                skip_watch = Some(s || skip_watch.unwrap_or(false));
            }
        }
        if let Some(creates) = low.get("creates") {
            let (r, comment) = match creates {
                Value::String(p) if std::path::Path::new(p).exists() => {
                    (true, format!("{p} exists"))
                }
                Value::Array(a) if a.iter().all(|p| std::path::Path::new(&py_str(p)).exists()) => {
                    (true, "All files in creates exist".to_string())
                }
                _ => (false, "Creates files not found".to_string()),
            };
            if r {
                skip_watch = Some(true);
            }
            result = r || result;
            comments.push(comment);
        }
        let mut ret = StateReturn::new();
        ret.insert("result", Value::Bool(result));
        ret.insert("comment", Value::from(comments.join("\n")));
        stamp_identity(&mut ret, low);
        if let Some(sw) = skip_watch {
            ret.insert("skip_watch", Value::Bool(sw));
        }
        ret
    }

    /// Salt's `_run_check_cmd`.
    fn run_check_cmd(&self, low: &LowChunk) -> StateReturn {
        let mut ret = StateReturn::new();
        let mut result = false;
        let mut opts = CmdOptions {
            python_shell: true,
            ..Default::default()
        };
        opts.shell = self
            .env
            .grains()
            .get("shell")
            .and_then(Value::as_str)
            .map(String::from);
        let cmds = match low.get("check_cmd") {
            Some(Value::Array(a)) => a.iter().map(py_str).collect(),
            Some(v) => vec![py_str(v)],
            None => Vec::new(),
        };
        for cmd in cmds {
            let rc = self.retcode(&cmd, &opts);
            if rc == 0 && !result {
                ret.insert(
                    "comment",
                    Value::from("check_cmd determined the state succeeded"),
                );
                result = true;
            } else if rc != 0 {
                ret.insert(
                    "comment",
                    Value::from("check_cmd determined the state failed"),
                );
                result = false;
                break;
            }
        }
        ret.insert("result", Value::Bool(result));
        stamp_identity(&mut ret, low);
        ret
    }

    fn fire_events(&self, ci: usize, ret: &StateReturn) {
        let low = &self.graph.chunks[ci];
        let fire = low.get("fire_event");
        let wants_result = matches!(fire, Some(Value::Bool(true)))
            || matches!(fire, Some(Value::String(s)) if !s.is_empty());
        if !wants_result && !self.opts.state_events {
            return;
        }
        let mut data = Map::new();
        data.insert("ret".into(), ret.to_value());
        match fire {
            Some(Value::Bool(true)) => {
                let tag = format!(
                    "salt/state_result/{}/{}/{}",
                    self.opts.jid,
                    self.opts.minion_id,
                    ret.get("name").map(py_str).unwrap_or_default()
                );
                self.env().fire_event(&tag, &Value::Object(data.clone()));
            }
            Some(Value::String(custom)) if !custom.is_empty() => {
                let tag = format!(
                    "salt/state_result/{}/{}/{custom}",
                    self.opts.jid, self.opts.minion_id
                );
                self.env().fire_event(&tag, &Value::Object(data.clone()));
            }
            _ => {}
        }
        if self.opts.state_events {
            let run_num = ret.get("__run_num__").map(py_str).unwrap_or_default();
            let tag = format!(
                "salt/job/{}/prog/{}/{run_num}",
                self.opts.jid, self.opts.minion_id
            );
            data.insert("len".into(), Value::from(self.total));
            self.env().fire_event(&tag, &Value::Object(data));
        }
    }

    /// Salt's `call_listen`: `mod_watch` of every listener whose listened
    /// state changed, at the end of the run.
    fn call_listen(&mut self, order: &[usize]) {
        let listens = |ci: &usize| {
            let c = &self.graph.chunks[*ci];
            c.contains("listen") || c.contains("listen_in")
        };
        if !order.iter().any(listens) {
            // Nothing listens: no listener run (which would start empty).
            self.total = 0;
            return;
        }
        let mut crefs: IndexMap<(String, String, String), usize> = IndexMap::new();
        let mut listeners: Vec<((String, String, String), Vec<Value>)> = Vec::new();
        for &ci in order {
            let c = &self.graph.chunks[ci];
            let key = (c.state().to_string(), c.id().to_string(), name_str(c));
            crefs.entry(key.clone()).or_insert(ci);
            if let Some(l) = c.get("listen") {
                let items = match l {
                    Value::Array(a) => a.clone(),
                    other => vec![other.clone()],
                };
                listeners.push((key.clone(), items));
            }
            if let Some(Value::Array(l_in)) = c.get("listen_in") {
                for item in l_in {
                    if let Value::Object(m) = item {
                        for (k, v) in m {
                            let mut src = Map::new();
                            src.insert(c.state().to_string(), Value::from(c.id()));
                            listeners.push((
                                (k.clone(), py_str(v), "lookup".into()),
                                vec![Value::Object(src)],
                            ));
                        }
                    }
                }
            }
        }
        let in_cref =
            |cref: &(String, String, String), v: &str| cref.0 == v || cref.1 == v || cref.2 == v;
        let mut mod_watchers: Vec<usize> = Vec::new();
        let mut errors: IndexMap<String, StateReturn> = IndexMap::new();
        let l_error = |lkey: &str, lval: &str| {
            let tag = crate::state_tag(
                "Listen_Error",
                &format!("listen_{lval}"),
                &format!("listen_{lkey}"),
                "Listen_Error",
            );
            let mut m = StateReturn::new();
            m.insert(
                "comment",
                Value::from(format!("Referenced state {lkey}: {lval} does not exist")),
            );
            m.insert("name", Value::from(format!("listen_{lkey}:{lval}")));
            m.insert("result", Value::Bool(false));
            m.insert("changes", Value::Object(Map::new()));
            (tag, m)
        };
        for (key, vals) in listeners {
            for listen_to in vals {
                let listen_to: Map = match listen_to {
                    Value::Object(m) => m,
                    other => {
                        let s = py_str(&other);
                        let mut found = None;
                        for &ci in order {
                            let c = &self.graph.chunks[ci];
                            if c.id() == s || name_str(c) == s {
                                let mut m = Map::new();
                                m.insert(c.state().to_string(), Value::from(c.id()));
                                found = Some(m);
                            }
                        }
                        match found {
                            Some(m) => m,
                            None => continue,
                        }
                    }
                };
                for (lkey, lval) in listen_to {
                    let lval = py_str(&lval);
                    if !crefs.keys().any(|c| c.0 == lkey && in_cref(c, &lval)) {
                        let (t, m) = l_error(&lkey, &lval);
                        errors.insert(t, m);
                        continue;
                    }
                    let to_tags: Vec<String> = crefs
                        .iter()
                        .filter(|(c, _)| c.0 == lkey && in_cref(c, &lval))
                        .map(|(_, &ci)| self.graph.tag(ci).to_string())
                        .collect();
                    for to_tag in to_tags {
                        let Some(r) = self.running.get(&to_tag) else {
                            continue;
                        };
                        if !has_changes(r) {
                            continue;
                        }
                        if !crefs.keys().any(|c| key.0 == c.0 && in_cref(c, &key.1)) {
                            let (t, m) = l_error(&key.0, &key.1);
                            errors.insert(t, m);
                            continue;
                        }
                        let new: Vec<usize> = crefs
                            .iter()
                            .filter(|(c, _)| key.0 == c.0 && in_cref(c, &key.1))
                            .map(|(_, &ci)| ci)
                            .collect();
                        for ci in new {
                            let mut low = self.graph.chunks[ci].clone();
                            let fun = low.fun().to_string();
                            low.insert("sfun", Value::from(fun));
                            low.insert("fun", Value::from("mod_watch"));
                            let id = format!("listener_{}", low.id());
                            low.insert("__id__", Value::from(id));
                            for r in REQUISITE_KEYWORDS {
                                low.shift_remove(r);
                            }
                            low.shift_remove("__prereq__");
                            let tag = chunk_tag(&low);
                            let idx = match self.graph.chunk_index(&tag) {
                                Some(i) => i,
                                None => self.graph.add_chunk(low),
                            };
                            mod_watchers.push(idx);
                        }
                    }
                }
            }
        }
        // The listeners run as a fresh run whose results join the main one.
        let saved = std::mem::take(&mut self.running);
        self.total = mod_watchers.len();
        self.call_chunks(&mod_watchers);
        let listened = std::mem::replace(&mut self.running, saved);
        for (k, v) in listened {
            self.running.insert(k, v);
        }
        for (tag, mut m) in errors {
            m.insert("__run_num__", Value::from(self.run_num));
            self.run_num += 1;
            self.running.insert(tag, m);
        }
    }
}

/// Calls the state function of `low` and shapes its return as Salt's dict.
fn call_module(
    modules: &StateModules,
    env: &dyn StateEnv,
    low: &LowChunk,
    test: bool,
    sfun: Option<&str>,
    reqs: Option<&Map>,
) -> StateReturn {
    let name = low.get("name").cloned().unwrap_or(Value::Null);
    let Some(module) = modules.get(low.state()) else {
        let mut ret = StateReturn::new();
        ret.insert("result", Value::Bool(false));
        ret.insert("name", name);
        ret.insert("changes", Value::Object(Map::new()));
        ret.insert(
            "comment",
            Value::from(format!("State '{}' is not available", low.state())),
        );
        return ret;
    };
    let sfun = sfun.or_else(|| low.get("sfun").and_then(Value::as_str));
    let call = StateCall {
        chunk: low,
        test,
        env,
        sfun,
        reqs,
    };
    let mut ret;
    match module.call(low.fun(), &call) {
        Ok(r) => {
            // Room for the executor's five bookkeeping keys (no regrowth).
            ret = StateReturn::with_capacity(9 + r.extra.len());
            ret.insert("name", Value::from(r.name));
            ret.insert("changes", Value::Object(r.changes));
            ret.insert(
                "result",
                match r.result {
                    Some(b) => Value::Bool(b),
                    None => Value::Null,
                },
            );
            ret.insert("comment", Value::from(r.comment));
            for (k, v) in r.extra {
                ret.insert(k, v);
            }
        }
        Err(e) => {
            ret = StateReturn::with_capacity(9);
            ret.insert("result", Value::Bool(false));
            ret.insert("name", name);
            ret.insert("changes", Value::Object(Map::new()));
            let comment = match e {
                StateError::MissingArg(..) => format!("{e}\n"),
                _ => format!("An exception occurred in this state: {e}"),
            };
            ret.insert("comment", Value::from(comment));
        }
    }
    ret
}

/// A `parallel: True` state handed to the worker pool.
struct ParallelJob {
    tag: String,
    low: LowChunk,
    test: bool,
}

/// Runs one parallel job: the state function, with `retry` applied in the
/// worker as Salt's `_call_parallel_target` does.
fn run_parallel_job(modules: &StateModules, env: &dyn StateEnv, job: &ParallelJob) -> StateReturn {
    let start = Instant::now();
    let start_time = now_time();
    let mut ret = call_module(modules, env, &job.low, job.test, None, None);
    if let Some(retry) = job.low.get("retry").map(RetrySpec::from_value) {
        let mut attempt = 1;
        if job.test {
            note_would_retry(&mut ret, &retry);
        } else {
            while retry.attempts >= attempt
                && ret.get("result").and_then(Value::as_bool) != Some(retry.until)
            {
                let mut interval = retry.interval;
                if retry.splay > 0 {
                    interval += pseudo_random(retry.splay);
                }
                std::thread::sleep(std::time::Duration::from_secs(interval));
                let orig = ret;
                ret = call_module(modules, env, &job.low, job.test, None, None);
                let c = ret.get("comment").map(py_str).unwrap_or_default();
                let note = if c.is_empty() {
                    String::new()
                } else {
                    format!(
                        "Attempt {attempt}: Returned a result of \"{}\", with the following comment: \"{c}\"",
                        py_result(ret.get("result"))
                    )
                };
                ret.insert(
                    "comment",
                    Value::from(format!(
                        "{}\n{note}",
                        orig.get("comment").map(py_str).unwrap_or_default()
                    )),
                );
                attempt += 1;
            }
        }
    }
    ret.insert("start_time", Value::from(start_time));
    ret.insert("duration", Value::from(ms_since(start)));
    ret.insert("__parallel__", Value::Bool(true));
    ret
}

/// The worker pool of a run with `parallel: True` states.
struct Pool {
    jobs: std::sync::mpsc::Sender<ParallelJob>,
    results: std::sync::mpsc::Receiver<(String, StateReturn)>,
    pending: std::collections::HashSet<String>,
}

/// The host as a state function sees it during a run: the real host plus
/// the run's low chunks (for modules that resolve requisites themselves).
struct RunEnv<'a> {
    inner: &'a dyn StateEnv,
    lowstate: &'a [LowChunk],
    accumulators: &'a crate::Accumulators,
}

impl StateEnv for RunEnv<'_> {
    fn opts(&self) -> &Value {
        self.inner.opts()
    }
    fn grains(&self) -> &Value {
        self.inner.grains()
    }
    fn pillar(&self) -> &Value {
        self.inner.pillar()
    }
    fn run_cmd(&self, cmd: &str, opts: &CmdOptions) -> std::io::Result<crate::CmdOutput> {
        self.inner.run_cmd(cmd, opts)
    }
    fn call_function(&self, fun: &str, args: &[Value], kwargs: &Map) -> Result<Value, String> {
        self.inner.call_function(fun, args, kwargs)
    }
    fn file_client(&self) -> &dyn crate::FileClient {
        self.inner.file_client()
    }
    fn render_template(
        &self,
        text: &str,
        engine: &str,
        context: &Map,
        saltenv: &str,
    ) -> Result<String, String> {
        self.inner.render_template(text, engine, context, saltenv)
    }
    fn fire_event(&self, tag: &str, data: &Value) {
        self.inner.fire_event(tag, data)
    }
    fn lowstate(&self) -> &[LowChunk] {
        self.lowstate
    }
    fn accumulators(&self) -> Option<&crate::Accumulators> {
        Some(self.accumulators)
    }
    fn has_function(&self, fun: &str) -> bool {
        self.inner.has_function(fun)
    }
}

/// Adds the keys every return of a chunk carries: `__sls__`, `__id__`, `name`.
fn stamp_identity(ret: &mut StateReturn, low: &LowChunk) {
    ret.insert(
        "__sls__",
        low.get("__sls__").cloned().unwrap_or(Value::Null),
    );
    ret.insert("__id__", Value::from(low.id()));
    ret.insert("name", low.get("name").cloned().unwrap_or(Value::Null));
}

/// The outcome of one `onlyif`/`unless` entry; `Fails` tells whether it
/// came from a shell command (rather than a `fun:` call).
enum Condition {
    Holds,
    Fails(bool),
    BadType,
    NoFun(String),
}

/// A validated `retry` argument (Salt's `verify_retry_data`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetrySpec {
    /// `until` (Salt's default `True`): the result that ends the retries.
    pub until: bool,
    /// How many times to try at most.
    pub attempts: u64,
    /// Seconds between attempts.
    pub interval: u64,
    /// Up to this many extra seconds at random between attempts.
    pub splay: u64,
}

impl RetrySpec {
    /// Salt's defaults and validation: wrong types fall back to defaults.
    pub fn from_value(v: &Value) -> RetrySpec {
        let defaults = RetrySpec {
            until: true,
            attempts: 2,
            interval: 30,
            splay: 0,
        };
        match v {
            Value::Object(m) => RetrySpec {
                until: m
                    .get("until")
                    .and_then(Value::as_bool)
                    .unwrap_or(defaults.until),
                attempts: m
                    .get("attempts")
                    .and_then(Value::as_u64)
                    .unwrap_or(defaults.attempts),
                interval: m
                    .get("interval")
                    .and_then(Value::as_u64)
                    .unwrap_or(defaults.interval),
                splay: m
                    .get("splay")
                    .and_then(Value::as_u64)
                    .unwrap_or(defaults.splay),
            },
            Value::Bool(false) => RetrySpec {
                attempts: 0,
                ..defaults
            },
            _ => defaults,
        }
    }
}

/// A number in `0..=max` without pulling in a RNG crate: splay only needs
/// to spread retries, not to be unpredictable.
fn pseudo_random(max: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(0);
    nanos % (max + 1)
}

/// Salt's comment for a state with `retry` in test mode.
fn note_would_retry(ret: &mut StateReturn, retry: &RetrySpec) {
    let c = ret.get("comment").map(py_str).unwrap_or_default();
    ret.insert("comment",
        Value::from(format!(
            "{c}  The state would be retried every {} seconds (with a splay of up to {} seconds) a maximum of {} times or until a result of {} is returned",
            retry.interval,
            retry.splay,
            retry.attempts,
            if retry.until { "True" } else { "False" }
        )),
    );
}

#[cfg(test)]
mod tests {
    use super::clock_text;

    #[test]
    fn clock_text_is_salts_start_time() {
        assert_eq!(clock_text(0, 0), "00:00:00.000000");
        assert_eq!(clock_text(13 * 3600 + 5 * 60 + 9, 42), "13:05:09.000042");
        assert_eq!(clock_text(86_399, 999_999), "23:59:59.999999");
    }
}
