//! A minion's compile given from its render's id forms, without its high
//! data (issue 25, session 24). Why it exists: on the master, each
//! minion's parse with its id put back (`id_form::substitute`), the high
//! data built from it (`HighBuilder`) and its comparison with a kept form
//! (`IdFormMemo`'s lockstep) were a fifth of the compile threads' CPU,
//! for a result the memo then dropped. This module is the one place of
//! that trick; anything it cannot prove goes through the full path.
//!
//! # What is recorded (once per form)
//!
//! A minion `A` compiled the full way whose compile came from an id form
//! `F` leaves an [`Entry`]: the top file's matches, the disabled
//! requisites, and each SLS render of its plan in order (SLS name,
//! saltenv, located file, and the loads the render made, told by
//! identity: `halite_render::cache::Load`). Its high data `H_A` is
//! rebuilt from the loads' stored data, the forms' parses with the
//! render's placeholder `Q` left in (`H_Q`, `HighBuilder` over a
//! [`Replay`]), and kept only when
//!
//! 1. every form's parse holds `Q` only in strings inside the argument
//!    values of state bodies: never a key, a function name, `include`,
//!    `extend`, `exclude` or any `_`-prefixed part. `HighBuilder` reads
//!    keys, function names and those parts, and compares bodies only for
//!    equality (an ID in two SLS), so it makes the same decisions on
//!    every minion's data of these forms, and carries the argument
//!    values as they are: `H_X = S_X(H_Q)` for every minion `X` whose
//!    loads are these (`S_X`: `Q` replaced by `X`);
//! 2. `S_A(H_Q) = H_A` (checked: the claim above, for the minion at
//!    hand, and no literal `Q` in an exact text's data);
//! 3. `H_Q` holds no U+E000 or `\x1f`, the strings with `Q` no `|`, so no
//!    minion's strings hold the compile's placeholder or a separator;
//! 4. the runs check below passes for `A`, so `unsubst_A(H_A)`, the high
//!    data `F` was compiled from, is `H_Q` with `Q` renamed U+E000 (`G`).
//!
//! # What is checked per minion `X`
//!
//! Its matches and disabled requisites equal the entry's; each render,
//! done again as a probe (`halite_render::cache::notes_begin`: the forms'
//! parses noted, not put back; no `salt[...]` call, external renderer or
//! yamlex may run), locates the same file and makes the same loads (the
//! same stored parses, compared by address: the cache compared the texts,
//! and the entry holds the parses so no other can take their address);
//! every string of the forms with `Q` reads back as a string with `X`
//! (what `substitute` checks, else `X`'s render parses its own text);
//! `X` is of the id class `[A-Za-z0-9_.-]` (so an occurrence of `X` in a
//! string lies inside one maximal run of those characters) and passes
//! the rules the key's walk reads from the id
//! (`halite_state::id_memo::id_admissible`); and the **runs check**:
//! `X` occurs in no run of `H_Q` without `Q` (an id written literally in
//! the tree, or made by an escape, fails here), and each distinct run
//! with `Q` gives itself back, U+E000 for `Q`, after `Q` is replaced by
//! `X` and `X` by U+E000. Then `unsubst_X(H_X) = G`, the key's walk of
//! `H_X` would pass as `A`'s did, and `F` with `X` put back is `X`'s
//! compile (`halite_state::id_memo`'s proof). Any failure: the full path.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use halite_render::cache::id_form::{self, PLACEHOLDER as Q};
use halite_render::cache::{notes_begin, notes_end, notes_take, Load};
use halite_salt_rules::is_pattern;
use halite_state::high::HighBuilder;
use halite_state::id_memo::{id_admissible, IdChunks, PLACEHOLDER as E};
use halite_state::module::StateModules;
use halite_state::{Map, Matches, RenderedSls, SlsSource, Value};

use crate::sls::FileSls;

/// How many entries are kept (a tree applied with a few variants).
const KEPT: usize = 16;

/// What a probe found.
pub(crate) enum Probe {
    /// The minion's compile, from a recorded form.
    Served(IdChunks),
    /// No recorded form has the minion's renders: its plan may be
    /// recorded.
    Differs,
    /// A recorded form has its renders, but its id fails a check: the
    /// full way, and no new record (it would be the same).
    IdRefused,
}

/// One SLS render of a plan: what was asked and what it loaded.
pub(crate) struct Step {
    sls: String,
    saltenv: String,
    /// The file it was rendered from.
    source: String,
    /// The loads, in order; the last one is the render's data.
    loads: Vec<Load>,
}

/// What a plan is keyed by besides its renders.
#[derive(Clone, PartialEq)]
pub(crate) struct PlanKey {
    highstate: bool,
    matches: Vec<(String, Vec<String>)>,
    disabled: Vec<String>,
    /// The state modules the compile looks functions up in.
    modules: Vec<&'static str>,
}

impl PlanKey {
    pub(crate) fn new(
        highstate: bool,
        matches: &Matches,
        disabled: &[String],
        modules: &StateModules,
    ) -> Self {
        PlanKey {
            highstate,
            matches: matches
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            disabled: disabled.to_vec(),
            modules: modules.names().collect(),
        }
    }
}

/// One recorded form (see the module's documentation).
struct Entry {
    key: PlanKey,
    steps: Vec<Step>,
    form: IdChunks,
    /// The distinct strings of the forms' parses holding `Q`.
    marked: Vec<String>,
    /// Every run without `Q`, each followed by `\n`.
    plain_runs: String,
    /// Each distinct run with `Q`, and it with U+E000 for `Q`.
    mixed_runs: Vec<(String, String)>,
    has_scalar: bool,
    /// Minions served from it, and probes that tried it and failed: a
    /// failed probe renders the minion's SLS once more than the full
    /// path alone, so an entry that mostly fails is no longer tried.
    served: AtomicU64,
    failed: AtomicU64,
}

impl Entry {
    /// Whether a probe should still try it (see [`Entry::failed`]).
    fn worth_trying(&self) -> bool {
        let served = self.served.load(Ordering::Relaxed);
        self.failed.load(Ordering::Relaxed) < 8 + 4 * served
    }
}

/// The recorded forms of one compiler (its state modules fixed, as
/// `IdFormMemo`'s). Why it exists: see the module's documentation.
#[derive(Default)]
pub struct HighForms {
    entries: Mutex<VecDeque<std::sync::Arc<Entry>>>,
    recorded: AtomicU64,
    probes_failed: AtomicU64,
}

/// [`HighForms`]' counters, for tests and profiles.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HighFormStats {
    /// Forms recorded.
    pub recorded: u64,
    /// Probes that found no entry for the minion (it went the full way).
    pub probes_failed: u64,
}

impl HighForms {
    /// No forms yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The counters so far.
    pub fn stats(&self) -> HighFormStats {
        HighFormStats {
            recorded: self.recorded.load(Ordering::Relaxed),
            probes_failed: self.probes_failed.load(Ordering::Relaxed),
        }
    }

    fn candidates(&self, key: &PlanKey) -> Vec<std::sync::Arc<Entry>> {
        self.entries
            .lock()
            .map(|e| {
                e.iter()
                    .rev()
                    .filter(|e| e.key == *key && e.worth_trying())
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Minion `id`'s compile from a recorded form, when every check of
    /// the module's documentation passes ([`Probe::Served`]); anything
    /// else sends it the full way.
    pub(crate) fn serve(&self, source: &FileSls, key: &PlanKey, id: &str) -> Probe {
        let mut alive = self.candidates(key);
        if alive.is_empty() {
            return Probe::Differs;
        }
        let tried = alive.clone();
        let served = self.probe(source, key, id, &mut alive);
        match &served {
            Probe::Served(_) => {
                for e in &alive {
                    e.served.fetch_add(1, Ordering::Relaxed);
                }
            }
            _ => {
                self.probes_failed.fetch_add(1, Ordering::Relaxed);
                for e in &tried {
                    e.failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        served
    }

    fn probe(
        &self,
        source: &FileSls,
        key: &PlanKey,
        id: &str,
        alive: &mut Vec<std::sync::Arc<Entry>>,
    ) -> Probe {
        if !id_form::id_is_inert(id) {
            return Probe::IdRefused;
        }
        if !key.matches.iter().all(|(env, _)| source.has_env(env)) {
            return Probe::Differs;
        }
        let _noting = Noting::begin(true);
        let mut step = 0;
        loop {
            // An entry whose renders end here is the minion's: the same
            // data makes the builder ask for the same renders.
            if let Some(i) = alive.iter().position(|e| e.steps.len() == step) {
                let done = alive.swap_remove(i);
                alive.clear();
                alive.push(done.clone());
                return match done.serves(id) {
                    true => Probe::Served(done.form.with_id(id)),
                    false => Probe::IdRefused,
                };
            }
            let Some((sls, saltenv)) = alive
                .first()
                .map(|e| (e.steps[step].sls.clone(), e.steps[step].saltenv.clone()))
            else {
                return Probe::Differs;
            };
            alive.retain(|e| e.steps[step].sls == sls && e.steps[step].saltenv == saltenv);
            notes_take();
            let rendered = source.render(&sls, &saltenv);
            let loads = notes_take();
            let Ok(Some(rendered)) = rendered else {
                return Probe::Differs;
            };
            if rendered.yamlex {
                return Probe::Differs;
            }
            alive.retain(|e| {
                let s = &e.steps[step];
                s.source == rendered.source
                    && s.loads.len() == loads.len()
                    && s.loads.iter().zip(&loads).all(|(a, b)| a.same(b))
            });
            if alive.is_empty() {
                return Probe::Differs;
            }
            step += 1;
        }
    }

    /// Records minion `id`'s plan (see the module's documentation):
    /// `high` its high data, `form` the compile it got.
    pub(crate) fn record(
        &self,
        source: &FileSls,
        auto_order: bool,
        (key, steps): (PlanKey, Vec<Step>),
        high: &Map,
        form: &IdChunks,
        id: &str,
    ) {
        let Some(entry) = Entry::new(source, auto_order, key, steps, high, form, id) else {
            return;
        };
        if let Ok(mut entries) = self.entries.lock() {
            if entries.len() == KEPT {
                entries.pop_front();
            }
            entries.push_back(std::sync::Arc::new(entry));
            self.recorded.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Entry {
    fn new(
        source: &FileSls,
        auto_order: bool,
        key: PlanKey,
        steps: Vec<Step>,
        high: &Map,
        form: &IdChunks,
        id: &str,
    ) -> Option<Entry> {
        // Which SLS a glob (in the top file's matches or an include) or
        // an include naming another saltenv renders depends on the
        // listing of the tree, which the loads do not show.
        if key
            .matches
            .iter()
            .flat_map(|(_, m)| m)
            .any(|m| is_pattern(m))
        {
            return None;
        }
        let mut marked = BTreeSet::new();
        for step in &steps {
            if !plain_includes(step.loads.last()?) {
                return None;
            }
            match step.loads.last()? {
                Load::Form(data) => {
                    if !confined(data) {
                        return None;
                    }
                    collect_marked(data, &mut marked);
                }
                Load::Exact(_) | Load::Reused(_) => {}
                Load::Opaque => return None,
            }
            if step.loads.iter().any(|l| matches!(l, Load::Opaque)) {
                return None;
            }
        }
        // H_Q: the builder over the loads' stored data.
        let replay = Replay {
            steps: &steps,
            next: Cell::new(0),
            inner: source,
            ok: Cell::new(true),
        };
        let matches: Matches = key.matches.iter().cloned().collect();
        let mut builder = HighBuilder::new(&replay, auto_order);
        let (high_q, errors) = builder.render_highstate(&matches);
        if !errors.is_empty()
            || !replay.ok.get()
            || replay.next.get() != steps.len()
            || !builder.into_origins().is_empty()
        {
            return None;
        }
        // 2: S_A(H_Q) = H_A.
        let high_q = Value::Object(high_q);
        if id_form::substitute(&high_q, id)? != Value::Object(high.clone()) {
            return None;
        }
        let mut runs = Runs::default();
        runs.value(&high_q)?;
        let entry = Entry {
            key,
            steps,
            form: form.clone(),
            marked: marked.into_iter().collect(),
            plain_runs: runs.plain.into_iter().fold(String::new(), |mut s, r| {
                s.push_str(&r);
                s.push('\n');
                s
            }),
            mixed_runs: runs
                .mixed
                .into_iter()
                .map(|r| {
                    let e = r.replace(Q, E.encode_utf8(&mut [0; 4]));
                    (r, e)
                })
                .collect(),
            has_scalar: runs.scalar,
            served: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        };
        entry.serves(id).then_some(entry)
    }

    /// The checks per minion that read its id (the module's documentation).
    fn serves(&self, id: &str) -> bool {
        id_form::id_is_inert(id)
            && id_admissible(id, self.has_scalar)
            && self.marked.iter().all(|s| id_form::string_puts_back(s, id))
            && !self.plain_runs.contains(id)
            && self.mixed_runs.iter().all(|(q, e)| {
                let mut placeholder = [0; 4];
                q.replace(Q, id)
                    .replace(id, E.encode_utf8(&mut placeholder))
                    == *e
            })
    }
}

/// Whether the `include` of a render's data, if any, is a list of SLS
/// names of its own saltenv without glob characters (what `HighBuilder`
/// resolves without reading the tree's listing).
fn plain_includes(load: &Load) -> bool {
    let (Load::Form(data) | Load::Exact(data) | Load::Reused(data)) = load else {
        return false;
    };
    match data.get("include") {
        None => true,
        Some(Value::Array(items)) => items
            .iter()
            .all(|i| i.as_str().is_some_and(|s| !is_pattern(s))),
        Some(_) => false,
    }
}

/// Whether a form's parse holds `Q` only in strings inside argument
/// values of state bodies (condition 1 of the module's documentation).
fn confined(data: &Value) -> bool {
    let Value::Object(top) = data else {
        return !holds(data, true);
    };
    top.iter().all(|(state_id, body)| {
        if state_id.contains(Q) {
            return false;
        }
        let special = state_id.starts_with('_')
            || matches!(state_id.as_str(), "include" | "extend" | "exclude");
        match body {
            Value::Object(decl) if !special => decl.iter().all(|(module, run)| {
                if module.contains(Q) {
                    return false;
                }
                match run {
                    Value::Array(args) if !module.starts_with('_') => {
                        args.iter().all(|arg| match arg {
                            Value::Object(arg) => {
                                arg.iter().all(|(k, v)| !k.contains(Q) && !holds(v, false))
                            }
                            other => !holds(other, true),
                        })
                    }
                    other => !holds(other, true),
                }
            }),
            other => !holds(other, true),
        }
    })
}

/// Whether `Q` is in a key of `v`, or (`strings`) in a string of it.
fn holds(v: &Value, strings: bool) -> bool {
    match v {
        Value::String(s) => strings && s.contains(Q),
        Value::Array(items) => items.iter().any(|i| holds(i, strings)),
        Value::Object(m) => m.iter().any(|(k, v)| k.contains(Q) || holds(v, strings)),
        _ => false,
    }
}

fn collect_marked(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::String(s) if s.contains(Q) => {
            out.insert(s.clone());
        }
        Value::Array(items) => items.iter().for_each(|i| collect_marked(i, out)),
        Value::Object(m) => m.values().for_each(|v| collect_marked(v, out)),
        _ => {}
    }
}

/// The maximal runs of id characters of `H_Q`'s strings and keys.
#[derive(Default)]
struct Runs {
    plain: HashSet<String>,
    mixed: HashSet<String>,
    scalar: bool,
}

impl Runs {
    /// `None` when `H_Q` fails condition 3.
    fn value(&mut self, v: &Value) -> Option<()> {
        match v {
            Value::String(s) => self.string(s),
            Value::Array(items) => items.iter().try_for_each(|i| self.value(i)),
            Value::Object(m) => m.iter().try_for_each(|(k, v)| {
                self.string(k)?;
                self.value(v)
            }),
            _ => {
                self.scalar = true;
                Some(())
            }
        }
    }

    fn string(&mut self, s: &str) -> Option<()> {
        if s.contains([E, '\x1f']) || (s.contains('|') && s.contains(Q)) {
            return None;
        }
        let id_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
        for run in s.split(|c: char| !id_char(c)).filter(|r| !r.is_empty()) {
            match run.contains(Q) {
                true if run != Q => {
                    self.mixed.insert(run.to_string());
                }
                true => {}
                false => {
                    if !self.plain.contains(run) {
                        self.plain.insert(run.to_string());
                    }
                }
            }
        }
        Some(())
    }
}

/// The SLS source the builder reads `H_Q` from: the recorded steps'
/// stored data, in order.
struct Replay<'a> {
    steps: &'a [Step],
    next: Cell<usize>,
    inner: &'a FileSls<'a>,
    ok: Cell<bool>,
}

impl SlsSource for Replay<'_> {
    fn render(&self, sls: &str, saltenv: &str) -> Result<Option<RenderedSls>, String> {
        let i = self.next.get();
        let data = self
            .steps
            .get(i)
            .filter(|s| s.sls == sls && s.saltenv == saltenv)
            .and_then(|s| match s.loads.last() {
                Some(Load::Form(d) | Load::Exact(d) | Load::Reused(d)) => Some((s, d)),
                _ => None,
            });
        let Some((step, data)) = data else {
            self.ok.set(false);
            return Err("not recorded".into());
        };
        self.next.set(i + 1);
        let data = match &**data {
            Value::Null => Value::Object(Map::new()),
            other => other.clone(),
        };
        Ok(Some(RenderedSls {
            data,
            source: step.source.clone(),
            yamlex: false,
        }))
    }

    fn available(&self, saltenv: &str) -> Vec<String> {
        self.inner.available(saltenv)
    }

    fn has_env(&self, saltenv: &str) -> bool {
        self.inner.has_env(saltenv)
    }
}

/// The real source, noting each render's loads (the full path of a
/// minion whose plan may be recorded).
pub(crate) struct Recorder<'a> {
    pub(crate) inner: FileSls<'a>,
    steps: RefCell<Vec<Step>>,
    valid: Cell<bool>,
}

impl<'a> Recorder<'a> {
    /// Starts noting the thread's loads until [`Recorder::finish`].
    pub(crate) fn new(inner: FileSls<'a>) -> Self {
        notes_begin(false);
        Recorder {
            inner,
            steps: RefCell::new(Vec::new()),
            valid: Cell::new(true),
        }
    }

    /// The renders noted, when every one can be told again.
    pub(crate) fn finish(self) -> Option<Vec<Step>> {
        notes_end();
        self.valid.get().then(|| self.steps.into_inner())
    }
}

impl SlsSource for Recorder<'_> {
    fn render(&self, sls: &str, saltenv: &str) -> Result<Option<RenderedSls>, String> {
        notes_take();
        let rendered = self.inner.render(sls, saltenv);
        let loads = notes_take();
        match &rendered {
            Ok(Some(r)) if !r.yamlex => self.steps.borrow_mut().push(Step {
                sls: sls.to_string(),
                saltenv: saltenv.to_string(),
                source: r.source.clone(),
                loads,
            }),
            _ => self.valid.set(false),
        }
        rendered
    }

    fn available(&self, saltenv: &str) -> Vec<String> {
        self.inner.available(saltenv)
    }

    fn has_env(&self, saltenv: &str) -> bool {
        self.inner.has_env(saltenv)
    }
}

/// Probing for as long as it lives.
struct Noting;

impl Noting {
    fn begin(probing: bool) -> Self {
        notes_begin(probing);
        Noting
    }
}

impl Drop for Noting {
    fn drop(&mut self) {
        notes_end();
    }
}
