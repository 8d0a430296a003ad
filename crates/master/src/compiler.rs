//! Per-minion compilation on the master: the pillar of one minion from
//! `pillar_roots`, its top file matches and SLS from `file_roots`, all
//! rendered with that minion's cached grains, into the one [`Bundle`] the
//! minion receives for a job. Template calls that need the minion's host
//! go to it through a [`RemoteExec`]; lookups are answered here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use halite_modules::exec::state::{PlanMemo, StateExec, StatePlan};
use halite_modules::exec::{MineLink, RemoteExec};
use halite_modules::high_form::{HighFormStats, HighForms};
use halite_modules::host::LogEvents;
use halite_modules::pillar_source::PillarSource;
use halite_modules::{Args, ExecError, ExecModules, Host, LocalFileClient};
use halite_proto::msg::{Bundle, BundleAction, Job, ReplyBody};
use halite_state::id_memo::{IdChunks, IdFormMemo, IdFormStats};
use halite_state::{FileClient, StateModules};
use serde_json::{Map, Value};

use crate::bundles::{BundleAnswer, BundleStats};
use crate::compile_record::{recorded_function, CompileRecords, Inputs};
use crate::fileserver::{FileServer, JobFiles};
use crate::id_form_bundle::{pack_id_form, FormReads, FormStrings};
use crate::pillar_cache::PillarCache;
use crate::pillar_record::PillarRecords;

/// What the master needs to compile for any minion: its options, the
/// module tables, the state tree (through the fileserver) and the pillar tree.
pub struct Compiler {
    opts: Value,
    exec: ExecModules,
    states: StateModules,
    files: Arc<FileServer>,
    pillar_files: Arc<LocalFileClient>,
    /// Where each compiled pillar is remembered for pillar targets.
    pillar_cache: Option<Arc<PillarCache>>,
    /// `ext_pillar` sources, merged after `pillar_roots` in their order.
    pillar_sources: Vec<Arc<dyn PillarSource>>,
    /// The mine templates read (`salt['mine.get']`), made per minion.
    mine: Option<MineFactory>,
    /// What each minion's last highstate compile read (issue 25).
    records: CompileRecords,
    /// What each minion's last `pillar_roots` compile read (issue 25).
    pillar_records: PillarRecords,
    /// Whether the pillar record is used (on unless a profile or test
    /// turns it off to compare).
    reuse: bool,
    /// Chunks compiled once per id form of the high data and written
    /// into each minion's bundle bytes (issue 25); `states` is fixed for
    /// the compiler's life, as it needs. `None` when a profile or test
    /// turns it off to compare.
    id_forms: Option<IdFormMemo>,
    /// The plans recorded with their renders' id forms, for minions whose
    /// high data need not be built (issue 25, session 24; only with
    /// `id_forms`).
    high_forms: Option<HighForms>,
    /// What the manifest and saltenvs read from each id form's chunks,
    /// read once per form (used only with `id_forms`).
    form_reads: FormReads,
}

/// Makes the mine a compile for a minion id reads.
pub type MineFactory = Arc<dyn Fn(&str) -> Arc<dyn MineLink> + Send + Sync>;

/// Salt's message before pillar render errors in a state return.
const PILLAR_FAILED: &str = "Pillar failed to render with the following messages:";

impl Compiler {
    /// A compiler over `files` (file_roots) and `pillar_roots`, with the
    /// master's `opts`.
    pub fn new(
        opts: Value,
        files: Arc<FileServer>,
        pillar_roots: BTreeMap<String, Vec<PathBuf>>,
    ) -> Self {
        let pillar_dirs = pillar_roots.values().flatten().cloned().collect();
        Self {
            opts,
            exec: halite_modules::table::exec_modules(),
            states: halite_modules::table::state_modules(),
            files,
            pillar_files: Arc::new(LocalFileClient::new(pillar_roots)),
            pillar_cache: None,
            pillar_sources: Vec::new(),
            mine: None,
            records: CompileRecords::default(),
            pillar_records: PillarRecords::new(pillar_dirs),
            reuse: true,
            id_forms: Some(IdFormMemo::new()),
            high_forms: Some(HighForms::new()),
            form_reads: FormReads::default(),
        }
    }

    /// Turns the compile per id form off (`false`): every minion's high
    /// data compiled to chunks and encoded in full, as before issue 25's
    /// session 21; for profiles and tests that compare the two.
    pub fn with_id_forms(mut self, on: bool) -> Self {
        self.id_forms = on.then(IdFormMemo::new);
        self.high_forms = on.then(HighForms::new);
        self
    }

    /// Turns the plans served from their renders' id forms off (`false`):
    /// every minion's high data built, as before issue 25's session 24;
    /// for profiles that compare the two.
    pub fn with_high_forms(mut self, on: bool) -> Self {
        self.high_forms = on.then(HighForms::new);
        self
    }

    /// The compile per id form's counters (`master.stats`' `id_form`).
    pub fn id_form_stats(&self) -> IdFormStats {
        self.id_forms
            .as_ref()
            .map(IdFormMemo::stats)
            .unwrap_or_default()
    }

    /// The recorded plans' counters (issue 25, session 24).
    pub fn high_form_stats(&self) -> HighFormStats {
        self.high_forms
            .as_ref()
            .map(HighForms::stats)
            .unwrap_or_default()
    }

    /// Adds the `ext_pillar` sources, compiled after `pillar_roots` for
    /// every minion, in this order.
    pub fn with_pillar_sources(mut self, sources: Vec<Arc<dyn PillarSource>>) -> Self {
        self.pillar_sources = sources;
        self
    }

    /// Turns the pillar record off (`false`): every pillar compile runs,
    /// as before issue 25's session 16; for profiles and tests that
    /// compare the two.
    pub fn with_reuse(mut self, reuse: bool) -> Self {
        self.reuse = reuse;
        self
    }

    /// Lets templates read the mine through the links `mine` makes.
    pub fn with_mine(mut self, mine: MineFactory) -> Self {
        self.mine = Some(mine);
        self
    }

    /// Remembers every pillar this compiler renders in `cache`.
    pub fn with_pillar_cache(mut self, cache: Arc<PillarCache>) -> Self {
        self.pillar_cache = Some(cache);
        self
    }

    /// The minions' compile records (how many are kept, for tests and stats).
    pub fn records(&self) -> &CompileRecords {
        &self.records
    }

    /// The minions' pillar records (how many are kept, for tests and stats).
    pub fn pillar_records(&self) -> &PillarRecords {
        &self.pillar_records
    }

    /// The cache of compiled pillars, when one is kept.
    pub fn pillar_cache(&self) -> Option<&PillarCache> {
        self.pillar_cache.as_deref()
    }

    /// The host templates see while compiling for minion `id`.
    fn host_for(&self, id: &str, jid: &str, grains: &Value, remote: Arc<dyn RemoteExec>) -> Host {
        let mut opts = self.opts.clone();
        if let Value::Object(map) = &mut opts {
            map.insert("id".into(), Value::from(id));
            map.insert("jid".into(), Value::from(jid));
            map.insert("__role".into(), Value::from("minion"));
            // config.get reads the minion's own options, not these.
            map.insert(
                halite_modules::exec::config::COMPILED_ON_MASTER.into(),
                Value::Bool(true),
            );
            map.entry("pillar")
                .or_insert_with(|| Value::Object(Map::new()));
        }
        let mut grains = grains.clone();
        if let Value::Object(g) = &mut grains {
            g.entry("id").or_insert_with(|| Value::from(id));
        } else {
            grains = serde_json::json!({ "id": id });
        }
        Host {
            pillar: opts
                .get("pillar")
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new())),
            opts,
            grains,
            files: Arc::new(self.files.client().clone()),
            exec: match &self.mine {
                Some(mine) => self.exec.with_remote(remote).with_mine(mine(id)),
                None => self.exec.with_remote(remote),
            },
            states: self.states.clone(),
            events: Arc::new(LogEvents),
        }
    }

    /// The pillar of the minion `host` is for, and the render errors
    /// (the one pillar compile halite has: `pillar_render::compile_full`).
    fn pillar(&self, host: &Host) -> (Value, Vec<String>) {
        // Counted by tests (one start-up compile per minion).
        tracing::debug!(id = %host.grains.get("id").map(halite_salt_rules::pyfmt::python_str).unwrap_or_default(), "pillar compiled");
        let roots = self
            .pillar_files
            .envs()
            .iter()
            .any(|env| self.pillar_files.roots(env).iter().any(|dir| dir.is_dir()))
            .then(|| self.pillar_files.clone() as Arc<dyn FileClient>);
        halite_modules::pillar_render::compile_full_with(
            host,
            roots,
            &self.pillar_sources,
            match self.reuse {
                true => &self.pillar_records,
                false => &halite_modules::pillar_render::FreshRoots,
            },
        )
    }

    /// The `mine_functions` of minion `id`'s pillar, compiled now (`{}`
    /// when none or when the pillar fails to render: the minion then runs
    /// its config's alone). Not stored in the pillar cache: pillar targets
    /// keep seeing the pillar of the last job.
    pub fn mine_functions(&self, id: &str, grains: &Value, remote: Arc<dyn RemoteExec>) -> Value {
        let host = self.host_for(id, "", grains, remote);
        halite_modules::gpg::take_decrypted();
        let (pillar, errors) = self.pillar(&host);
        // The mine data this minion sends may hold them: the mine store
        // masks them on disk (mine.rs).
        if let Some(cache) = &self.pillar_cache {
            cache.add_secrets(id, &halite_modules::gpg::take_decrypted());
        }
        if !errors.is_empty() {
            tracing::warn!(%id, ?errors, "pillar failed to render; mine_functions of the pillar are not sent");
            return Value::Object(Map::new());
        }
        match pillar.get("mine_functions") {
            Some(Value::Object(functions)) => Value::Object(functions.clone()),
            _ => Value::Object(Map::new()),
        }
    }

    /// Compiles `job` for minion `id` with its cached `grains`.
    pub fn bundle(
        &self,
        id: &str,
        grains: &Value,
        job: &Job,
        remote: Arc<dyn RemoteExec>,
    ) -> Bundle {
        let prepared = self.prepare(id, grains, job, remote);
        self.finish(prepared, job).into_bundle()
    }

    /// The reply to minion `id`'s request for `job`'s bundle: "you have
    /// it" without a render or compile when the minion holds the bundle of
    /// its last compile and none of that compile's inputs changed
    /// ([`crate::compile_record`]); else the bundle compiled now, its
    /// inputs recorded for the next job.
    pub fn answer(
        &self,
        id: &str,
        grains: &Value,
        job: &Job,
        remote: Arc<dyn RemoteExec>,
        answer: &BundleAnswer,
        stats: &BundleStats,
    ) -> ReplyBody {
        if !answer.packed || !recorded_function(&job.fun) {
            let prepared = self.prepare(id, grains, job, remote);
            return self.finish(prepared, job).reply(answer, stats);
        }
        let remote = Arc::new(AskedRemote::new(remote));
        // resolve: the pillar is compiled again for every job.
        let prepared = self.prepare(id, grains, job, remote.clone());
        // check: the record of the last compile against these inputs.
        let inputs = prepared.errors.is_empty().then(|| {
            let tree = self.records.tree_stamp(&job.jid, self.files.client());
            Inputs {
                id,
                fun: &job.fun,
                arg: &job.arg,
                kwarg: &job.kwarg,
                grains,
                pillar: &prepared.host.pillar,
                secrets: &prepared.decrypted,
                tree: &tree,
            }
            .digest()
        });
        if let Some(inputs) = &inputs {
            let held = self
                .records
                .unchanged(id, inputs, &prepared.host.opts)
                .and_then(|digest| answer.already_held(&digest, stats));
            if let Some(reply) = held {
                tracing::debug!(%id, jid = %job.jid, "compile skipped: inputs unchanged");
                return reply;
            }
        }
        // act: compile, watching what the renders read.
        remote.reset();
        let (finished, reads) = halite_render::watch::watch(|| self.finish(prepared, job));
        let asked_minion = remote.asked();
        let reply = finished.reply(answer, stats);
        // report: the record for the next job.
        match (&reply, inputs) {
            (
                ReplyBody::PackedBundle { digest, .. } | ReplyBody::SameBundle { digest, .. },
                Some(inputs),
            ) if !asked_minion => self.records.keep(id, inputs, reads, digest.clone()),
            _ => self.records.forget(id),
        }
        reply
    }

    /// The host, pillar and render errors of minion `id` for `job`
    /// (the pillar stored in the pillar cache).
    fn prepare(
        &self,
        id: &str,
        grains: &Value,
        job: &Job,
        remote: Arc<dyn RemoteExec>,
    ) -> Prepared {
        let mut host = self.host_for(id, &job.jid, grains, remote);
        // The job's saltenv=/pillarenv= choose the pillar top files
        // (pillarenv, pillarenv_from_saltenv) as in Salt.
        if let Value::Object(opts) = &mut host.opts {
            for key in ["saltenv", "pillarenv"] {
                if let Some(v) = job.kwarg.get(key).filter(|v| v.is_string()) {
                    opts.insert(key.into(), v.clone());
                }
            }
        }
        halite_modules::gpg::take_decrypted();
        let (pillar, errors) = self.pillar(&host);
        let mut decrypted = halite_modules::gpg::take_decrypted();
        // In a stable order: they count in the bundle's digest.
        decrypted.sort();
        decrypted.dedup();
        // A pillar that failed to render keeps the last good one cached;
        // what the gpg renderer decrypted is masked in everything the
        // master writes to disk for this minion (pillar_cache.rs).
        if let Some(cache) = &self.pillar_cache {
            if errors.is_empty() {
                cache.store(id, &pillar, &decrypted);
            } else {
                cache.add_secrets(id, &decrypted);
            }
        }
        host.pillar = pillar;
        Prepared {
            host,
            errors,
            decrypted,
        }
    }

    /// The bundle of a prepared host: its states rendered and compiled.
    fn finish(&self, prepared: Prepared, job: &Job) -> Finished {
        let Prepared {
            mut host,
            errors,
            decrypted,
        } = prepared;
        // A highstate's matched saltenvs, for the minion's sync.
        let mut saltenvs = None;
        let mut id_form = None;
        let action = if !job.fun.starts_with("state.") {
            BundleAction::Call
        } else if !errors.is_empty() {
            let mut ret = vec![Value::from(PILLAR_FAILED)];
            ret.extend(errors.into_iter().map(Value::from));
            BundleAction::Return {
                ret: Value::Array(ret),
            }
        } else {
            let args = Args {
                positional: job.arg.clone(),
                kwargs: job.kwarg.clone(),
            };
            // The job's one version of the tree: which SLS exist is
            // listed, and its sources are resolved, once for all its
            // minions.
            let tree = self.records.tree_stamp(&job.jid, self.files.client());
            host.files = Arc::new(JobFiles::new(self.files.clone(), tree.clone()));
            let id = host
                .opt("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let memo = self.id_forms.as_ref().map(|ids| PlanMemo {
                ids,
                forms: self.high_forms.as_ref(),
                id: id.as_str(),
            });
            match StateExec::plan_memoised(&host, &job.fun, &args, memo) {
                Ok(planned) => {
                    saltenvs = planned.saltenvs;
                    match planned.plan {
                        StatePlan::Run(chunks, yamlex) => {
                            let files = self.files.manifest(&chunks, Some(&tree));
                            BundleAction::Run {
                                chunks,
                                files,
                                yamlex,
                            }
                        }
                        StatePlan::IdForm(chunks) => {
                            let reads = self.form_reads.of(&chunks);
                            let files = self.files.manifest_of(
                                &reads.sources,
                                Some(&tree),
                                &|s| chunks.put_back(s),
                                &|s| chunks.put_back_if_prefixed(s, "salt://"),
                            );
                            let yamlex = chunks.marks().to_vec();
                            id_form = Some((chunks, reads));
                            // The chunks go into the bytes (or back into
                            // `Value`s) from `id_form`: see `Finished`.
                            BundleAction::Run {
                                chunks: Vec::new(),
                                files,
                                yamlex,
                            }
                        }
                        StatePlan::Return(ret) => BundleAction::Return { ret },
                    }
                }
                Err(e) => BundleAction::Return {
                    ret: Value::String(error_text(&job.fun, e)),
                },
            }
        };
        let envs = saltenvs_of(job, &action, id_form.as_ref());
        let id_form = id_form.map(|(chunks, _)| chunks);
        let commits = self.files.client().commits(&envs);
        Finished {
            bundle: Bundle {
                jid: job.jid.clone(),
                pillar: host.pillar,
                action,
                commits,
                saltenvs,
                // The minion masks them in what it writes to its disk and logs.
                secrets: decrypted,
            },
            id_form,
        }
    }
}

/// A minion's compiled bundle, whose chunks may be an id form's (issue
/// 25): then `bundle`'s `Run` has no chunks of its own, and they are
/// written straight into the packed bytes ([`pack_id_form`]), or put
/// back into `Value`s for a minion that reads only plain bundles.
struct Finished {
    bundle: Bundle,
    id_form: Option<IdChunks>,
}

impl Finished {
    /// The bundle with its chunks as `Value`s.
    fn into_bundle(self) -> Bundle {
        let Finished {
            mut bundle,
            id_form,
        } = self;
        if let (Some(form), BundleAction::Run { chunks, .. }) = (id_form, &mut bundle.action) {
            *chunks = form.values();
        }
        bundle
    }

    /// The reply for this bundle ([`BundleAnswer::reply`]), packed from
    /// the id form's bytes when it has one and the minion reads packed
    /// bundles.
    fn reply(self, answer: &BundleAnswer, stats: &BundleStats) -> ReplyBody {
        match &self.id_form {
            Some(form) if answer.packed => match pack_id_form(&self.bundle, form) {
                Ok(packed) => answer.reply_packed(&self.bundle.jid, packed, stats),
                Err(e) => {
                    tracing::warn!(jid = %self.bundle.jid, error = %e, "cannot pack an id form's bundle; packing it from its chunks");
                    answer.reply(self.into_bundle(), stats)
                }
            },
            _ => answer.reply(self.into_bundle(), stats),
        }
    }
}

/// A minion's host with its pillar compiled for a job, before its states.
struct Prepared {
    host: Host,
    /// The pillar's render errors (the bundle then returns them).
    errors: Vec<String>,
    /// What the gpg renderer decrypted for the pillar, sorted.
    decrypted: Vec<String>,
}

/// The minion's side of a compile, noting whether the compile asked it
/// anything: such a compile read something the master cannot compare, so
/// it is not recorded.
struct AskedRemote {
    inner: Arc<dyn RemoteExec>,
    asked: AtomicBool,
}

impl AskedRemote {
    fn new(inner: Arc<dyn RemoteExec>) -> Self {
        Self {
            inner,
            asked: AtomicBool::new(false),
        }
    }

    /// Forgets the calls so far (the pillar's: its result is compared).
    fn reset(&self) {
        self.asked.store(false, Ordering::Relaxed);
    }

    fn asked(&self) -> bool {
        self.asked.load(Ordering::Relaxed)
    }
}

impl RemoteExec for AskedRemote {
    fn call(&self, fun: &str, args: &Args) -> Result<Value, String> {
        self.asked.store(true, Ordering::Relaxed);
        self.inner.call(fun, args)
    }
}

/// The saltenvs a bundle was compiled from: `base` (top files), the job's
/// `saltenv=`, and each chunk's.
fn saltenvs_of(
    job: &Job,
    action: &BundleAction,
    id_form: Option<&(IdChunks, Arc<FormStrings>)>,
) -> BTreeSet<String> {
    let mut envs = BTreeSet::from(["base".to_string()]);
    if let Some(env) = job.kwarg.get("saltenv").and_then(Value::as_str) {
        envs.insert(env.to_string());
    }
    if let BundleAction::Run { chunks, .. } = action {
        envs.extend(
            chunks
                .iter()
                .filter_map(|c| c.get("__env__").and_then(Value::as_str))
                .map(str::to_string),
        );
    }
    if let Some((form, reads)) = id_form {
        envs.extend(reads.envs.iter().map(|env| form.put_back(env).into_owned()));
    }
    envs
}

/// Salt's wording for a function that could not be called.
fn error_text(fun: &str, e: ExecError) -> String {
    match e {
        ExecError::NotAvailable(f) => format!("'{f}' is not available."),
        ExecError::Invocation(msg) => format!("ERROR executing '{fun}': {msg}"),
        ExecError::Execution(msg) => format!("ERROR: {msg}"),
    }
}
