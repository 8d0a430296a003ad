//! Salt's `state` execution module: apply SLS or the highstate, and the
//! `show_*` views of the compiler.

use halite_state::graph::{KeepNone, OrderKeep};
use halite_state::high::HighBuilder;
use halite_state::id_memo::{Compiled, IdChunks, IdFormMemo};
use halite_state::origins::StringOrigins;
use halite_state::pipeline::{call_high, compile_chunks, compile_for_bundle, prepare_high};
use halite_state::run::{Executor, RunOptions};
use halite_state::target::MinionFacts;
use halite_state::{LowChunk, Map, Matches, Value};

use crate::exec::{py_str, Args, ExecError, ExecFunction, ExecModule, ExecTable};
use crate::high_form::{HighForms, PlanKey, Probe, Recorder};
use crate::sls::FileSls;
use crate::Host;

/// The `state.*` entry points the minion, the master and `halite-call`
/// call directly (planning on the master, running planned chunks on the
/// minion); the module's table ([`MODULE`]) dispatches to them too.
pub struct StateExec;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "state",
    functions: &[
        ExecFunction::new("apply", |a, h| apply_fn("apply", a, h)),
        ExecFunction::new("sls", |a, h| apply_fn("sls", a, h)),
        ExecFunction::new("highstate", |a, h| apply_fn("highstate", a, h)),
        ExecFunction::new("single", |a, h| StateExec::single(h, a)),
        ExecFunction::new("show_sls", show_sls),
        ExecFunction::new("show_low_sls", |a, h| {
            StateExec::low_sls(h, a).map(StateOutput::into_value)
        }),
        ExecFunction::new("show_highstate", show_highstate),
        ExecFunction::new("show_lowstate", |a, h| {
            StateExec::lowstate(h, a).map(StateOutput::into_value)
        }),
        ExecFunction::new("show_top", show_top),
        ExecFunction::new("show_states", show_states),
        ExecFunction::new("sls_exists", sls_exists),
        ExecFunction::new("graph", graph),
        ExecFunction::new("test", |a, h| apply_fn("test", a, h)),
    ],
};

/// The return code Salt sets for a `state.*` function's return: 1 for a
/// compile error list, 2 when a state failed (or nothing ran), else 0.
pub fn retcode(fun: &str, ret: &Value) -> i32 {
    let f = fun.strip_prefix("state.").unwrap_or(fun);
    match f {
        "show_lowstate" | "graph" => 0,
        "show_sls" | "show_low_sls" | "show_highstate" | "show_top" | "show_states" => {
            i32::from(is_error_list(ret))
        }
        "apply" | "sls" | "highstate" | "single" | "top" | "test" => match ret {
            Value::Array(_) | Value::String(_) => 1,
            Value::Object(m) => ran_retcode(m.is_empty(), m.values().map(|r| r.get("result"))),
            _ => 0,
        },
        _ => 0,
    }
}

/// Salt's return code for states that ran, from their `result`s: 2 when
/// none ran or one failed, else 0.
fn ran_retcode<'a>(empty: bool, mut results: impl Iterator<Item = Option<&'a Value>>) -> i32 {
    if empty || results.any(|r| r == Some(&Value::Bool(false))) {
        2
    } else {
        0
    }
}

/// Whether a return is Salt's compile-error list (strings), not data such
/// as `show_low_sls`'s list of chunks.
fn is_error_list(ret: &Value) -> bool {
    matches!(ret, Value::Array(a) if !a.is_empty() && a.iter().all(Value::is_string))
}

fn split_mods(v: Option<&Value>) -> Vec<String> {
    match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.iter().map(py_str).collect(),
        Some(v) => py_str(v)
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    }
}

fn errors_value(errors: Vec<String>) -> Value {
    Value::Array(errors.into_iter().map(Value::from).collect())
}

/// A host prepared for one state run: pillar override merged, test mode set.
fn run_host(host: &Host, args: &Args) -> Result<Host, ExecError> {
    let mut h = host.clone();
    if let Some(p) = args.kwargs.get("pillar") {
        match p {
            Value::Object(_) => crate::exec::pillar::deep_merge(&mut h.pillar, p),
            Value::Null => {}
            _ => return Err(ExecError::Invocation(
                "Pillar data must be formatted as a dictionary, unless pillar_enc is specified."
                    .into(),
            )),
        }
    }
    let test = match args.kwargs.get("test") {
        Some(v) => halite_state::truthy(v),
        None => host.test_mode(),
    };
    if let Value::Object(o) = &mut h.opts {
        o.insert("test".into(), Value::Bool(test));
    }
    Ok(h)
}

fn saltenv(host: &Host, args: &Args) -> String {
    args.kwargs
        .get("saltenv")
        .or_else(|| host.opts.get("saltenv"))
        .filter(|v| !v.is_null())
        .map(py_str)
        .unwrap_or_else(|| "base".into())
}

fn run_options(host: &Host, args: &Args) -> RunOptions {
    let opt = |k: &str| host.opts.get(k);
    // Prog events are on by default for a master's job (the minion sets
    // `jid`), off for `halite-call`; `state_events` decides either way.
    let from_master = opt("jid").is_some_and(|j| !j.is_null());
    RunOptions {
        pillar_override: args.kwargs.get("pillar").filter(|p| p.is_object()).cloned(),
        test: host.test_mode(),
        failhard: opt("failhard").is_some_and(halite_state::truthy),
        state_events: opt("state_events")
            .map(halite_state::truthy)
            .unwrap_or(from_master),
        jid: args
            .kwargs
            .get("__pub_jid")
            .or_else(|| opt("__jid__"))
            .or_else(|| opt("jid"))
            .map(py_str)
            .unwrap_or_else(new_jid),
        minion_id: opt("id").map(py_str).unwrap_or_else(|| "local".into()),
        disabled_requisites: match opt("disabled_requisites") {
            Some(Value::Array(a)) => a.iter().map(py_str).collect(),
            Some(Value::String(s)) => vec![s.clone()],
            _ => Vec::new(),
        },
    }
}

/// A Salt job id for now: `YYYYMMDDhhmmssffffff` (UTC).
pub fn new_jid() -> String {
    chrono::Utc::now().format("%Y%m%d%H%M%S%6f").to_string()
}

fn auto_order(host: &Host) -> bool {
    host.opts
        .get("state_auto_order")
        .map(halite_state::truthy)
        .unwrap_or(true)
}

/// High data as rendered, with where its strings came from (which SLS
/// were yamlex), and the render errors.
type Rendered = (Map, StringOrigins, Vec<String>);

/// Renders `mods` of `saltenv` into high data (Salt's `render_highstate`).
fn render_mods(host: &Host, saltenv: &str, mods: Vec<String>) -> Rendered {
    let mut matches: Matches = Matches::new();
    matches.insert(saltenv.to_string(), mods);
    render_highstate(host, &matches)
}

/// The top-file matches of this host (`only_env`: a highstate's
/// `saltenv=`), also read by a minion before its master compiles its
/// highstate, to sync the saltenvs the run uses ([`crate::dynamic`]).
pub(crate) fn top_matches(host: &Host, only_env: Option<&str>) -> Result<Matches, Vec<String>> {
    let source = FileSls::new(host);
    let envs = host.files.envs();
    let top = halite_state::top::get_top(&source, &envs)?;
    let id = host.opts.get("id").map(py_str).unwrap_or_default();
    let facts = MinionFacts {
        id: &id,
        grains: &host.grains,
        pillar: &host.pillar,
    };
    halite_state::top::top_matches(&top, &facts, only_env)
}

fn render_highstate(host: &Host, matches: &Matches) -> Rendered {
    let source = FileSls::new(host);
    let mut builder = HighBuilder::new(&source, auto_order(host));
    let (high, errors) = builder.render_highstate(matches);
    (high, builder.into_origins(), errors)
}

fn add_exclude(high: &mut Map, args: &Args) {
    let exclude = split_mods(args.kwargs.get("exclude"));
    if exclude.is_empty() {
        return;
    }
    let entry = high
        .entry("__exclude__")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(a) = entry {
        a.extend(exclude.into_iter().map(Value::from));
    }
}

fn run_high(host: &Host, args: &Args, (high, origins): (Map, StringOrigins)) -> StateOutput {
    let opts = run_options(host, args);
    match call_high(high, origins, &host.states, host, opts) {
        Ok(running) => StateOutput::Ran(running),
        Err(errors) => StateOutput::Data(errors_value(errors)),
    }
}

/// What a state run (`state.apply`/`sls`/`highstate`/`test`) or a
/// compile view (`state.show_lowstate`/`show_low_sls`) returns, kept in
/// the engine's own records until it is printed or sent: they serialize
/// to the same JSON as the Salt data they stand for, without first
/// becoming one map per state (at 10 000 states that conversion was a
/// tenth of a run's time, and its peak memory).
#[derive(Debug)]
pub enum StateOutput {
    /// The states ran: tag -> state return.
    Ran(halite_state::Running),
    /// The compiled low chunks, printed in run order.
    Low(Box<halite_state::Compiled>),
    /// Anything else: compile errors, Salt's "No States" return...
    Data(Value),
}

impl StateOutput {
    /// The return as Salt data.
    pub fn into_value(self) -> Value {
        match self {
            StateOutput::Ran(running) => running_value(running),
            StateOutput::Low(compiled) => Value::Array(compiled.low_chunks()),
            StateOutput::Data(v) => v,
        }
    }

    /// The return code Salt sets for `state.<fun>`'s return (see [`retcode`]).
    pub fn retcode(&self, fun: &str) -> i32 {
        match self {
            StateOutput::Low(_) => 0,
            StateOutput::Ran(running) => ran_retcode(
                running.is_empty(),
                running.values().map(|r| r.get("result")),
            ),
            StateOutput::Data(v) => retcode(fun, v),
        }
    }
}

impl serde::Serialize for StateOutput {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            StateOutput::Ran(running) => {
                use serde::ser::SerializeMap;
                let mut map = serializer.serialize_map(Some(running.len()))?;
                for (tag, ret) in running {
                    map.serialize_entry(tag, ret)?;
                }
                map.end()
            }
            StateOutput::Low(compiled) => {
                use serde::ser::SerializeSeq;
                let mut seq = serializer.serialize_seq(Some(compiled.order.len()))?;
                for &ci in &compiled.order {
                    seq.serialize_element(&compiled.graph.chunks[ci])?;
                }
                seq.end()
            }
            StateOutput::Data(v) => v.serialize(serializer),
        }
    }
}

/// A run's results as the return value (tag -> state return).
fn running_value(running: halite_state::Running) -> Value {
    Value::Object(
        running
            .into_iter()
            .map(|(k, v)| (k, Value::from(v)))
            .collect(),
    )
}

/// Whether `state.<f>` applies the highstate (the top file) rather than
/// named SLS: `highstate`/`top`, or `apply`/`test` without `mods`.
fn runs_highstate(f: &str, args: &Args) -> bool {
    match f {
        "highstate" | "top" => true,
        "sls" => false,
        _ => split_mods(args.get(0, "mods")).is_empty(),
    }
}

/// The high data a state run applies: the highstate's (top file matches)
/// or `mods`', with `exclude`. `Err` is the run's whole return instead:
/// render errors, or Salt's "No States" result.
///
/// Custom modules are synced first as Salt does: all kinds over the
/// matched saltenvs before a highstate (`autoload_dynamic_modules`), the
/// kinds of `sync_mods=` before named SLS ([`crate::dynamic`]).
///
/// A highstate notes the saltenvs its top file matched in `matched`
/// (empty when the top file failed or matched nothing): a master names
/// them in the bundle, so the minion syncs them without reading the top
/// file itself.
fn high_data(
    host: &mut Host,
    args: &Args,
    highstate: bool,
    matched: &mut Option<Vec<String>>,
) -> Result<(Map, StringOrigins), Value> {
    let render = |host: &Host, matches: &Matches| {
        Ok::<_, std::convert::Infallible>(render_highstate(host, matches))
    };
    match high_data_with(host, args, highstate, matched, render)? {
        Ok(high) => Ok(high),
        Err(never) => match never {},
    }
}

/// [`high_data`] with the render of the matches done by `render`, which
/// may answer something else instead (`Err(T)`, handed back as it is).
fn high_data_with<T>(
    host: &mut Host,
    args: &Args,
    highstate: bool,
    matched: &mut Option<Vec<String>>,
    render: impl FnOnce(&Host, &Matches) -> Result<Rendered, T>,
) -> Result<Result<(Map, StringOrigins), T>, Value> {
    let rendered = if highstate {
        let only = args.kwargs.get("saltenv").map(py_str);
        *matched = Some(Vec::new());
        let matches = top_matches(host, only.as_deref()).map_err(errors_value)?;
        *matched = Some(matches.keys().cloned().collect());
        if matches.is_empty() {
            return Err(no_states(
                "No Top file or master_tops data matches found. Please see master log for details.",
            ));
        }
        let envs: Vec<String> = matches.keys().cloned().collect();
        crate::dynamic::load_dynamic(host, &envs);
        render(host, &matches)
    } else {
        let env = saltenv(host, args);
        // On a master the minion synced before asking for the bundle.
        if host.exec.is_remote() {
            crate::dynamic::learn_remote_functions(host);
        } else if let Some(grains) = crate::dynamic::sync_mods(host, args, &env) {
            crate::dynamic::refresh(host, grains);
        }
        let mut matches: Matches = Matches::new();
        matches.insert(env, split_mods(args.get(0, "mods")));
        render(host, &matches)
    };
    let (mut high, origins, errors) = match rendered {
        Ok(rendered) => rendered,
        Err(other) => return Ok(Err(other)),
    };
    if !errors.is_empty() {
        return Err(errors_value(errors));
    }
    if highstate && high.is_empty() {
        return Err(no_states("No states found for this minion"));
    }
    add_exclude(&mut high, args);
    Ok(Ok((high, origins)))
}

fn no_states(comment: &str) -> Value {
    let mut ret = Map::new();
    ret.insert("result".into(), Value::Bool(false));
    ret.insert("comment".into(), Value::from(comment));
    ret.insert("name".into(), Value::from("No States"));
    ret.insert("changes".into(), Value::Object(Map::new()));
    ret.insert("__run_num__".into(), Value::from(0));
    let mut m = Map::new();
    m.insert("no_|-states_|-states_|-None".into(), Value::Object(ret));
    Value::Object(m)
}

/// What a master's plan for one minion compiles through (issue 25): the
/// compile once per id form ([`IdFormMemo`]) and the forms its renders
/// recorded ([`HighForms`]: a minion whose renders load a recorded
/// plan's forms gets its compile without building its high data), for
/// the minion `id`. Why it exists: both are kept by the master's
/// compiler across minions; a plan borrows them.
#[derive(Clone, Copy)]
pub struct PlanMemo<'a> {
    /// The compile per id form.
    pub ids: &'a IdFormMemo,
    /// The recorded plans (`None`: every minion's high data built).
    pub forms: Option<&'a HighForms>,
    /// The minion's id.
    pub id: &'a str,
}

/// What compiling a `state.*` job for a minion gave, with what the
/// minion needs to know about it besides ([`StateExec::plan_noting`]).
#[derive(Debug)]
pub struct Planned {
    /// The chunks to run, or the job's whole return.
    pub plan: StatePlan,
    /// For a highstate, the saltenvs its top file matched for this minion
    /// (empty when none): the minion syncs its custom modules from them,
    /// as Salt's `load_dynamic`, without rendering the top file again.
    /// `None` for anything else.
    pub saltenvs: Option<Vec<String>>,
}

/// What compiling a `state.*` job for a minion gave: chunks for the
/// minion to run, or the job's whole return (a view, an error).
#[derive(Debug)]
pub enum StatePlan {
    /// Compiled low chunks, before ordering, for [`StateExec::run_planned`],
    /// with their yamlex strings ([`halite_state::origins::wire_marks`]).
    Run(Vec<Value>, Vec<(u32, u8)>),
    /// The return of the job, computed where it was compiled.
    Return(Value),
    /// Compiled low chunks as [`StatePlan::Run`]'s, given as the id
    /// form's chunks and the minion's id (only through
    /// [`StateExec::plan_memoised`]): the master writes them into the
    /// bundle's bytes without a copy per minion (issue 25).
    IdForm(IdChunks),
}

/// Whether `fun` is a state run the master compiles and the minion
/// executes (as opposed to a view the master answers itself).
pub fn is_state_run(fun: &str) -> bool {
    matches!(
        fun,
        "state.apply"
            | "state.sls"
            | "state.highstate"
            | "state.test"
            | "state.top"
            | "state.single"
    )
}

impl StateExec {
    /// Renders and compiles `state.<fun>` without running it: the master's
    /// half of a job. Views (`show_*`, `graph`...) come back whole.
    pub fn plan(host: &Host, fun: &str, args: &Args) -> Result<StatePlan, ExecError> {
        Self::plan_noting(host, fun, args).map(|p| p.plan)
    }

    /// [`StateExec::plan`], noting the saltenvs a highstate's top file
    /// matched ([`Planned::saltenvs`]).
    pub fn plan_noting(host: &Host, fun: &str, args: &Args) -> Result<Planned, ExecError> {
        Self::plan_memoised(host, fun, args, None)
    }

    /// [`StateExec::plan_noting`] for minion `id` on a master: the high
    /// data compiled to chunks through `memo`, once per id form
    /// ([`IdFormMemo`]: the same chunks as the full compile, given as
    /// [`StatePlan::IdForm`] when they come from the id form). The memo's
    /// owner keeps `host.states` the same for every plan.
    pub fn plan_memoised(
        host: &Host,
        fun: &str,
        args: &Args,
        memo: Option<PlanMemo<'_>>,
    ) -> Result<Planned, ExecError> {
        let mut saltenvs = None;
        let plan = Self::plan_into(host, fun, args, &mut saltenvs, memo)?;
        Ok(Planned { plan, saltenvs })
    }

    fn plan_into(
        host: &Host,
        fun: &str,
        args: &Args,
        saltenvs: &mut Option<Vec<String>>,
        memo: Option<PlanMemo<'_>>,
    ) -> Result<StatePlan, ExecError> {
        let f = fun.strip_prefix("state.").unwrap_or(fun);
        let mut args = args.clone();
        let mut ran_on: Option<Host> = None;
        let mut record = None;
        let high = match f {
            "apply" | "test" | "sls" | "highstate" | "top" => {
                if f == "test" {
                    args.kwargs.insert("test".into(), Value::Bool(true));
                }
                let disabled = run_options(host, &args).disabled_requisites;
                // The compile's table (the plan's host's, as below).
                let host_states = &host.states;
                let run_on = ran_on.insert(run_host(host, &args)?);
                if memo.is_some() {
                    halite_render::cache::begin_trace();
                }
                let highstate = runs_highstate(f, &args);
                let exclude = args.kwargs.contains_key("exclude");
                let forms = memo.and_then(|m| Some((m.forms?, m.id)));
                let render = |host: &Host, matches: &Matches| match forms {
                    Some((forms, id)) if !exclude => {
                        let key = PlanKey::new(highstate, matches, &disabled, host_states);
                        match forms.serve(&FileSls::new(host), &key, id) {
                            Probe::Served(chunks) => return Err(chunks),
                            Probe::IdRefused => return Ok(render_highstate(host, matches)),
                            Probe::Differs => {}
                        }
                        let source = Recorder::new(FileSls::new(host));
                        let mut builder = HighBuilder::new(&source, auto_order(host));
                        let (high, errors) = builder.render_highstate(matches);
                        let origins = builder.into_origins();
                        record = source.finish().map(|steps| (key, steps));
                        Ok((high, origins, errors))
                    }
                    _ => Ok(render_highstate(host, matches)),
                };
                let high = high_data_with(run_on, &args, highstate, saltenvs, render);
                let trace = halite_render::cache::end_trace();
                match high {
                    Ok(Ok(high)) => (high, trace),
                    Ok(Err(chunks)) => {
                        if let Some(memo) = memo {
                            memo.ids.count_through_render();
                        }
                        return Ok(StatePlan::IdForm(chunks));
                    }
                    Err(ret) => return Ok(StatePlan::Return(ret)),
                }
            }
            "single" => {
                let ret = Self::single_chunk(host, &args)?;
                return Ok(match ret {
                    Ok(chunk) => StatePlan::Run(vec![Value::Object(chunk)], Vec::new()),
                    Err(ret) => StatePlan::Return(ret),
                });
            }
            _ => return Ok(StatePlan::Return(MODULE.call(f, &args, host)?)),
        };
        let disabled = run_options(host, &args).disabled_requisites;
        let ((high, origins), trace) = high;
        let compiled = match memo {
            Some(memo) => {
                let (compiled, high) =
                    memo.ids
                        .compile(memo.id, high, origins, &host.states, &disabled, trace);
                let at = memo.forms.zip(ran_on.as_ref());
                if let (Ok(Compiled::Form(chunks)), Some(high), Some(plan), Some((forms, on))) =
                    (&compiled, high, record, at)
                {
                    let source = FileSls::new(on);
                    forms.record(&source, auto_order(on), plan, &high, chunks, memo.id);
                }
                compiled
            }
            None => compile_for_bundle(high, origins, &host.states, &disabled).map(Compiled::Full),
        };
        Ok(match compiled {
            Ok(Compiled::Full((chunks, marks))) => StatePlan::Run(chunks, marks),
            Ok(Compiled::Form(chunks)) => StatePlan::IdForm(chunks),
            Err(errors) => StatePlan::Return(errors_value(errors)),
        })
    }

    /// Runs chunks compiled by [`StateExec::plan`] on this host: the
    /// minion's half of a job (`yamlex`: the plan's marks). The chunks
    /// come as the minion decoded them from its bundle, indexed as the
    /// master compiled them. The states' records come back as the engine
    /// kept them ([`StateOutput::Ran`]; anything else as
    /// [`StateOutput::Data`]): a minion encodes them for the wire
    /// straight from there, never as one `Value` map per state first
    /// (issue 25: that copy and its walk were a tenth of a warm swarm).
    pub fn run_planned(
        host: &Host,
        fun: &str,
        args: &Args,
        chunks: Vec<LowChunk>,
        yamlex: &[(u32, u8)],
    ) -> StateOutput {
        Self::run_planned_keeping(host, fun, args, chunks, yamlex, &KeepNone)
    }

    /// [`StateExec::run_planned`] with the chunks' order kept in `keep`
    /// between jobs ([`halite_state::pipeline::order_chunks_keeping`]): the
    /// minion keys it by identity and bundle digest, so a warm job of an
    /// unchanged bundle replays the order its last job made.
    pub fn run_planned_keeping(
        host: &Host,
        fun: &str,
        args: &Args,
        mut chunks: Vec<LowChunk>,
        yamlex: &[(u32, u8)],
        keep: &dyn OrderKeep,
    ) -> StateOutput {
        let mut args = args.clone();
        if fun == "state.test" {
            args.kwargs.insert("test".into(), Value::Bool(true));
        }
        let host = match run_host(host, &args) {
            Ok(h) => h,
            Err(e) => return StateOutput::Data(Value::String(e.to_string())),
        };
        // A minion's job is a state run like any other: one at a time.
        let _lock = match lock_state_run(&host, &args, fun) {
            Ok(lock) => lock,
            Err(running) => {
                return StateOutput::Data(Value::Array(
                    running.into_iter().map(Value::from).collect(),
                ))
            }
        };
        let opts = run_options(&host, &args);
        halite_state::origins::apply_wire_marks(&mut chunks, yamlex);
        let chunks = chunks.into_iter().filter(|c| !c.is_empty());
        match halite_state::pipeline::order_chunks_keeping(
            chunks,
            &host.states,
            &opts.disabled_requisites,
            keep,
        ) {
            Ok(compiled) => StateOutput::Ran(
                Executor::new(compiled.graph, &host.states, &host, opts).run(&compiled.order),
            ),
            Err(errors) => StateOutput::Data(errors_value(errors)),
        }
    }

    /// `state.sls` (`highstate` false) or `state.highstate`, run here
    /// (`fun` is the name it was called by, for the state-run lock).
    fn apply(
        host: &Host,
        args: &Args,
        highstate: bool,
        fun: &str,
    ) -> Result<StateOutput, ExecError> {
        let mut host = run_host(host, args)?;
        // One state run at a time on this host (Salt's _check_queue).
        let _lock = match lock_state_run(&host, args, fun) {
            Ok(lock) => lock,
            Err(running) => {
                return Ok(StateOutput::Data(Value::Array(
                    running.into_iter().map(Value::from).collect(),
                )))
            }
        };
        let start = std::time::Instant::now();
        let high = high_data(&mut host, args, highstate, &mut None);
        tracing::debug!(
            target: "halite::timing",
            "render (top file, SLS, includes) {:.1} ms",
            start.elapsed().as_secs_f64() * 1000.0
        );
        Ok(match high {
            Ok(high) => run_high(&host, args, high),
            Err(ret) => StateOutput::Data(ret),
        })
    }

    /// `state.apply`/`sls`/`highstate`/`test` run here, returning the
    /// executor's records ([`StateOutput`]); `None` for any other
    /// function. `Host::call` gives the same run as Salt data.
    pub fn run(host: &Host, fun: &str, args: &Args) -> Option<Result<StateOutput, ExecError>> {
        let f = fun.strip_prefix("state.")?;
        match f {
            "apply" | "test" | "sls" | "highstate" => {
                let mut args = args.clone();
                if f == "test" {
                    args.kwargs.insert("test".into(), Value::Bool(true));
                }
                Some(Self::apply(host, &args, runs_highstate(f, &args), fun))
            }
            "show_low_sls" => Some(Self::low_sls(host, args)),
            "show_lowstate" => Some(Self::lowstate(host, args)),
            _ => None,
        }
    }

    /// `state.show_low_sls`: the named SLS compiled to ordered chunks.
    fn low_sls(host: &Host, args: &Args) -> Result<StateOutput, ExecError> {
        let host = run_host(host, args)?;
        let mods = split_mods(args.get(0, "mods"));
        let (high, origins, mut errors) = render_mods(&host, &saltenv(&host, args), mods);
        errors.extend(halite_state::compile::verify_high(&high, &origins));
        if !errors.is_empty() {
            return Ok(StateOutput::Data(errors_value(errors)));
        }
        Ok(match compile_chunks(high, &origins, &host.states, &[]) {
            Ok(c) => StateOutput::Low(Box::new(c)),
            Err(e) => StateOutput::Data(errors_value(e)),
        })
    }

    /// `state.show_lowstate`: the highstate compiled to ordered chunks.
    fn lowstate(host: &Host, args: &Args) -> Result<StateOutput, ExecError> {
        let host = run_host(host, args)?;
        let (high, origins) = match Self::prepared(&host, args) {
            Ok(h) => h,
            Err(e) => return Ok(StateOutput::Data(errors_value(e))),
        };
        Ok(match compile_chunks(high, &origins, &host.states, &[]) {
            Ok(c) => StateOutput::Low(Box::new(c)),
            Err(e) => StateOutput::Data(errors_value(e)),
        })
    }

    /// The highstate's (or `mods`') high data after extend/_in/exclude.
    fn prepared(host: &Host, args: &Args) -> Result<(Map, StringOrigins), Vec<String>> {
        let mods = split_mods(args.get(0, "mods"));
        let (mut high, mut origins, errors) = if mods.is_empty() {
            let matches = top_matches(host, None)?;
            render_highstate(host, &matches)
        } else {
            render_mods(host, &saltenv(host, args), mods)
        };
        let mut errors = errors;
        if let Err(e) = prepare_high(&mut high, &mut origins, &[]) {
            errors.extend(e);
        }
        if errors.is_empty() {
            Ok((high, origins))
        } else {
            Err(errors)
        }
    }

    /// The one chunk of `state.single`, or its error return.
    fn single_chunk(host: &Host, args: &Args) -> Result<Result<Map, Value>, ExecError> {
        let fun = args.require_str(0, "fun", "state.single")?;
        let Some((state, f)) = fun.split_once('.') else {
            return Ok(Err(Value::from("Invalid function passed")));
        };
        let name = args.get(1, "name").map(py_str).ok_or_else(|| {
            ExecError::Invocation(
                "state.single() missing 1 required positional argument: 'name'".into(),
            )
        })?;
        let mut chunk = Map::new();
        for (k, v) in &args.kwargs {
            if k == "test" || k == "pillar" || k == "queue" || k.starts_with("__pub") {
                continue;
            }
            chunk.insert(k.clone(), v.clone());
        }
        chunk.insert("state".into(), Value::from(state));
        chunk.insert("fun".into(), Value::from(f));
        chunk.insert("__id__".into(), Value::from(name.clone()));
        chunk.insert("name".into(), Value::from(name));
        if !host.states.has(state, f) {
            return Ok(Err(errors_value(vec![format!(
                "Specified state '{fun}' was not found"
            )])));
        }
        Ok(Ok(chunk))
    }

    fn single(host: &Host, args: &Args) -> Result<Value, ExecError> {
        let host = run_host(host, args)?;
        let chunk = match Self::single_chunk(&host, args)? {
            Ok(chunk) => chunk,
            Err(ret) => return Ok(ret),
        };
        let mut graph = halite_state::graph::Graph::new();
        let ci = graph.add_chunk(LowChunk::from(chunk));
        let opts = run_options(&host, args);
        Ok(running_value(
            Executor::new(graph, &host.states, &host, opts).run(&[ci]),
        ))
    }
}

/// `state.apply`, `state.sls`, `state.highstate` and `state.test` (`fun`):
/// renders and runs states (`test` with `test=True`).
fn apply_fn(fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let mut args = args.clone();
    if fun == "test" {
        args.kwargs.insert("test".into(), Value::Bool(true));
    }
    StateExec::apply(
        host,
        &args,
        runs_highstate(fun, &args),
        &format!("state.{fun}"),
    )
    .map(StateOutput::into_value)
}

/// Takes the host's state-run lock (crate::state_lock) for `fun`, unless
/// `concurrent=True`; `queue=True` (or the `state_queue` option) waits for
/// a run in progress, otherwise the lines of Salt's refusal come back.
fn lock_state_run(
    host: &Host,
    args: &Args,
    fun: &str,
) -> Result<crate::state_lock::StateRunLock, Vec<String>> {
    use crate::state_lock::{acquire, WhenBusy};
    let flag = |key: &str| {
        args.kwargs
            .get(key)
            .or_else(|| {
                host.opts
                    .get(if key == "queue" { "state_queue" } else { key })
            })
            .is_some_and(halite_state::truthy)
    };
    if flag("concurrent") {
        return acquire(None, fun, "", WhenBusy::Refuse);
    }
    let when_busy = if flag("queue") {
        WhenBusy::Queue
    } else {
        WhenBusy::Refuse
    };
    let dir = crate::state_lock::lock_dir(&host.opts);
    acquire(dir, fun, &run_options(host, args).jid, when_busy)
}

/// `state.show_sls <mods>`: the high data of SLS files.
fn show_sls(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let host = run_host(host, args)?;
    let mods = split_mods(args.get(0, "mods"));
    let (high, origins, mut errors) = render_mods(&host, &saltenv(&host, args), mods);
    errors.extend(halite_state::compile::verify_high(&high, &origins));
    if !errors.is_empty() {
        return Ok(errors_value(errors));
    }
    Ok(Value::Object(high))
}

/// `state.show_highstate`: the high data of the highstate.
fn show_highstate(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let host = run_host(host, args)?;
    let matches = match top_matches(&host, None) {
        Ok(m) => m,
        Err(e) => return Ok(errors_value(e)),
    };
    let (high, _, errors) = render_highstate(&host, &matches);
    if errors.is_empty() {
        Ok(Value::Object(high))
    } else {
        Ok(errors_value(errors))
    }
}

/// `state.graph [format=dot|mermaid|json]`: the requisite graph of the run
/// (`json`: `{nodes, edges}` data for a client that draws it itself).
fn graph(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let host = run_host(host, args)?;
    let (high, origins) = match StateExec::prepared(&host, args) {
        Ok(h) => h,
        Err(e) => return Ok(errors_value(e)),
    };
    match compile_chunks(high, &origins, &host.states, &[]) {
        Ok(c) => {
            let format = args
                .kwargs
                .get("format")
                .map(py_str)
                .unwrap_or_else(|| "dot".into());
            Ok(match format.as_str() {
                "mermaid" => Value::from(c.graph.to_mermaid()),
                "json" => c.graph.to_json(),
                _ => Value::from(c.graph.to_dot()),
            })
        }
        Err(e) => Ok(errors_value(e)),
    }
}

/// `state.show_top`: the SLS the top file gives this minion, by saltenv.
fn show_top(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let host = run_host(host, args)?;
    match top_matches(&host, None) {
        Ok(m) => Ok(Value::Object(
            m.into_iter()
                .map(|(k, v)| (k, Value::Array(v.into_iter().map(Value::from).collect())))
                .collect(),
        )),
        Err(e) => Ok(errors_value(e)),
    }
}

/// `state.show_states`: the SLS the run would apply.
fn show_states(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let host = run_host(host, args)?;
    let (high, _) = match StateExec::prepared(&host, args) {
        Ok(h) => h,
        Err(e) => return Ok(errors_value(e)),
    };
    let mut sls: Vec<String> = high
        .values()
        .filter_map(|b| b.get("__sls__").and_then(Value::as_str).map(String::from))
        .collect();
    sls.dedup();
    Ok(Value::Array(sls.into_iter().map(Value::from).collect()))
}

/// `state.sls_exists <mods>`: whether every SLS exists.
fn sls_exists(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let mods = split_mods(args.get(0, "mods"));
    let source = FileSls::new(host);
    let env = saltenv(host, args);
    Ok(Value::Bool(
        !mods.is_empty() && mods.iter().all(|m| source.locate(m, &env).is_some()),
    ))
}
