//! Running one job on this host: the function comes from the module
//! registry of `halite-modules`, on a [`halite_modules::Host`] built for
//! the minion identity that received the job. State runs, pillar and
//! `salt://` come from the master: the job asks it for its compiled
//! bundle and fetches files through the [`MasterChannel`].

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use halite_modules::exec::state::StateExec;
use halite_modules::host::EventSink;
use halite_modules::{Args, ExecError, ExecModules, Host, LocalFileClient};
use halite_proto::msg::{BundleAction, Job, PackedReturn, ReplyBody, RequestBody, SyncedModules};
use halite_state::{FileClient, LowChunk, StateModules};
use serde_json::{Map, Value};

use crate::bundles::BundleStore;
use crate::channel::MasterChannel;
use crate::orders::KeptOrders;
use crate::packing::{pack_outcome, Outcome, ReturnMeta};
use crate::remote_files::{Manifest, RemoteFileClient};

/// Runs jobs for minion identities. Synchronous: called on a blocking thread.
pub trait JobRunner: Send + Sync {
    /// Runs `job` as minion `id` with `grains`; events go to `events`,
    /// requests (bundle, files) to `master`. The return comes encoded, on
    /// the job's own thread (the link is one task for all of a swarm's
    /// identities): as it is kept and sent.
    fn run(
        &self,
        id: &str,
        grains: &Value,
        job: &Job,
        events: Arc<dyn EventSink>,
        master: MasterChannel,
    ) -> PackedReturn;
    /// Runs `fun` for the master while it renders a template for `id`
    /// (a render-time call such as `salt['cmd.run'](...)`).
    fn render_call(
        &self,
        id: &str,
        grains: &Value,
        fun: &str,
        args: Args,
        master: MasterChannel,
    ) -> Result<Value, String>;
    /// The grains of identity `id` (recomputed by `saltutil.refresh_grains`).
    fn grains(&self, id: &str) -> Value;
    /// The pillar identity `id` last received (its scheduler reads the
    /// pillar's `schedule:` from it); `None` before any.
    fn pillar(&self, _id: &str) -> Option<Value> {
        None
    }
}

/// The real runner: halite's execution and state modules on this host.
pub struct HostRunner {
    opts: Value,
    exec: ExecModules,
    states: StateModules,
    /// `file_client: local`: this minion compiles its own states from its
    /// own `file_roots` and `pillar_roots` (Salt's masterless minion).
    local: Option<LocalCompile>,
    /// `cachedir/files`, the sha256-addressed `salt://` cache.
    file_cache: PathBuf,
    /// The pillar each identity last received from the master.
    pillar: RwLock<HashMap<String, Value>>,
    /// The bundle each identity last received (`cachedir/bundles`): the
    /// master does not send it again while its compile gives the same.
    bundles: BundleStore,
    /// Grains added over the detected ones per identity (swarm mode).
    grain_overrides: BTreeMap<String, Map<String, Value>>,
    /// Swarm mode: identity `id`'s state-run lock is under `<this>/<id>`,
    /// as if each identity were a host of its own.
    lock_root: Option<PathBuf>,
    /// The saltenvs each identity's last highstate matched, by the job's
    /// `saltenv=`: synced before the next highstate's compile, so a
    /// changed custom module is seen by that one compile.
    highstate_envs: Mutex<HashMap<HighstateKey, Vec<String>>>,
    /// The order of each identity's bundle, kept by its digest: a warm
    /// job of an unchanged bundle replays it ([`KeptOrders`]).
    orders: KeptOrders,
}

/// An identity and its highstate's `saltenv=` (the top files it reads).
type HighstateKey = (String, Option<String>);

/// The trees of a minion that compiles for itself.
struct LocalCompile {
    files: Arc<dyn FileClient>,
    pillar_roots: BTreeMap<String, Vec<PathBuf>>,
}

/// Functions that need this identity's pillar fresh from the master.
pub fn needs_bundle(fun: &str) -> bool {
    fun.starts_with("state.")
        || fun.starts_with("pillar.")
        || fun.starts_with("config.")
        || fun == "saltutil.refresh_pillar"
}

impl HostRunner {
    /// A runner with the full module table and `opts` (the minion config).
    pub fn new(opts: Value) -> Self {
        // Salt's defaults when the minion config names no trees.
        let roots = |key: &str, default: &str| {
            let roots = halite_modules::local::roots_of(&opts, key);
            if roots.is_empty() {
                BTreeMap::from([("base".to_string(), vec![PathBuf::from(default)])])
            } else {
                roots
            }
        };
        let local = (opts.get("file_client").and_then(Value::as_str) == Some("local")).then(|| {
            LocalCompile {
                files: Arc::new(LocalFileClient::new(roots("file_roots", "/srv/salt"))),
                pillar_roots: roots("pillar_roots", "/srv/pillar"),
            }
        });
        let cachedir = opts
            .get("cachedir")
            .and_then(Value::as_str)
            .unwrap_or("/var/cache/halite/minion");
        Self {
            exec: halite_modules::table::exec_modules(),
            states: halite_modules::table::state_modules(),
            local,
            file_cache: PathBuf::from(cachedir).join("files"),
            pillar: RwLock::new(HashMap::new()),
            bundles: BundleStore::new(PathBuf::from(cachedir).join("bundles")),
            grain_overrides: BTreeMap::new(),
            lock_root: None,
            highstate_envs: Mutex::new(HashMap::new()),
            orders: KeptOrders::default(),
            opts,
        }
    }

    /// Grains that identity `id` reports on top of the host's (swarm mode).
    pub fn with_grains(mut self, id: &str, grains: Map<String, Value>) -> Self {
        self.grain_overrides.insert(id.to_string(), grains);
        self
    }

    /// Swarm mode: each identity takes its own state-run lock under
    /// `root/<id>` instead of the one host lock of the shared cachedir, so
    /// identities applying at once do not refuse each other (each stands
    /// for a host; one identity's runs still exclude each other).
    pub fn with_state_run_locks(mut self, root: PathBuf) -> Self {
        self.lock_root = Some(root);
        self
    }

    fn opts_for(&self, id: &str, jid: Option<&str>) -> Value {
        let mut opts = self.opts.clone();
        if let Value::Object(map) = &mut opts {
            map.insert("id".into(), Value::String(id.to_string()));
            if let Some(root) = &self.lock_root {
                map.insert(
                    halite_modules::state_lock::LOCK_DIR_OPT.into(),
                    Value::String(root.join(id).to_string_lossy().into_owned()),
                );
            }
            if let Some(jid) = jid {
                map.insert("jid".into(), Value::String(jid.to_string()));
            }
        }
        opts
    }

    /// The host a job of `id` runs on: pillar as last received, files
    /// from the master (or the local trees of a `file_client: local` minion).
    fn host(
        &self,
        id: &str,
        jid: Option<&str>,
        grains: &Value,
        events: Arc<dyn EventSink>,
        master: &MasterChannel,
        manifest: Manifest,
    ) -> Host {
        let files: Arc<dyn FileClient> = match &self.local {
            Some(local) => local.files.clone(),
            None => Arc::new(RemoteFileClient::new(
                master.clone(),
                self.file_cache.clone(),
                manifest,
            )),
        };
        let received = self.pillar.read().ok().and_then(|p| p.get(id).cloned());
        let exec = match &self.local {
            Some(_) => self.exec.clone(),
            None => self.exec.clone().with_mine(crate::mine::MinionMine::link(
                master.clone(),
                received.clone(),
            )),
        };
        let pillar = received
            .or_else(|| self.opts.get("pillar").cloned())
            .unwrap_or_else(|| Value::Object(Map::new()));
        let mut host = Host {
            opts: self.opts_for(id, jid),
            grains: grains.clone(),
            pillar,
            files,
            exec,
            states: self.states.clone(),
            events,
        };
        // Custom Python modules (synced to extmods, or the local roots).
        halite_modules::python::add_custom_modules(&mut host);
        host
    }

    /// A `file_client: local` minion's pillar, compiled from its own roots.
    fn local_pillar(&self, host: &mut Host) -> Vec<String> {
        let Some(local) = &self.local else {
            return Vec::new();
        };
        let sources = halite_modules::ext_pillar::sources_from_opts(&host.opts);
        let has_roots = local.pillar_roots.values().flatten().any(|d| d.is_dir());
        if !has_roots && sources.is_empty() {
            return Vec::new();
        }
        let files = has_roots.then(|| {
            Arc::new(LocalFileClient::new(local.pillar_roots.clone()))
                as Arc<dyn halite_state::FileClient>
        });
        let (pillar, errors) = halite_modules::pillar_render::compile_full(host, files, &sources);
        host.pillar = pillar;
        errors
    }

    /// The master's bundle for `job`: asked with the digest of the one this
    /// identity holds, so an unchanged bundle is not sent again; a bundle
    /// received is kept for the next job. `synced`: the custom modules a
    /// warm highstate says it holds ([`halite_modules::dynamic::synced_for_master`]).
    fn fetch_bundle(
        &self,
        id: &str,
        host: &Host,
        job: &Job,
        master: &MasterChannel,
        synced: Option<&SyncedModules>,
    ) -> Result<Fetched, ExecError> {
        // A call of the minion's own (halite-call) has no published job:
        // the master compiles it from the call itself.
        let caller = job.jid == halite_proto::jid::CALLER_JID;
        let mut have = if caller {
            None
        } else {
            self.bundles.digest(id)
        };
        // Twice at most: once more in full when the bundle held is gone.
        loop {
            let ask = if caller {
                RequestBody::CallBundle {
                    fun: job.fun.clone(),
                    arg: job.arg.clone(),
                    kwarg: job.kwarg.clone(),
                    grains: host.grains.clone(),
                    kept_calls: true,
                }
            } else {
                RequestBody::Bundle {
                    jid: job.jid.clone(),
                    have: have.clone(),
                    packed: true,
                    kept_calls: true,
                    synced: synced.cloned(),
                }
            };
            let unreadable = |e: String| {
                ExecError::Execution(format!(
                    "the master's bundle for job {} cannot be read: {e}",
                    job.jid
                ))
            };
            return match master.request(ask) {
                Ok(ReplyBody::Bundle(b)) => Ok(Fetched::Bundle(
                    Box::new(Held {
                        bundle: b.map_chunks(chunk_of),
                        digest: None,
                    }),
                    false,
                )),
                Ok(ReplyBody::PackedBundle {
                    digest,
                    zstd,
                    bytes,
                    modules_unchanged,
                }) => self
                    .bundles
                    .receive(id, &job.jid, &digest, zstd, bytes)
                    .map(|bundle| {
                        let digest = Some(digest);
                        Fetched::Bundle(Box::new(Held { bundle, digest }), modules_unchanged)
                    })
                    .map_err(|e| unreadable(e.to_string())),
                Ok(ReplyBody::SameBundle {
                    digest,
                    modules_unchanged,
                }) if have.as_deref() == Some(&digest) => {
                    match self.bundles.load(id, &job.jid, &digest) {
                        Some(bundle) => {
                            tracing::debug!(%id, jid = %job.jid, %digest, "bundle unchanged: the one held is used");
                            let digest = Some(digest);
                            let held = Box::new(Held { bundle, digest });
                            Ok(Fetched::Bundle(held, modules_unchanged))
                        }
                        None => {
                            have = None;
                            continue;
                        }
                    }
                }
                Ok(ReplyBody::SameBundle { digest, .. }) => Err(unreadable(format!(
                    "it names bundle {digest}, which this minion did not say it holds"
                ))),
                Ok(ReplyBody::SyncFirst) if synced.is_some() => Ok(Fetched::SyncFirst),
                Ok(other) => Err(ExecError::Execution(format!(
                    "unexpected answer from the master: {other:?}"
                ))),
                Err(e) => Err(ExecError::Execution(format!(
                    "cannot get the compiled states from the master: {e}"
                ))),
            };
        }
    }

    /// The sync phase and the bundle of a job that needs one: the custom
    /// modules Salt syncs before a state run's render (a warm highstate
    /// says what it synced in its bundle request and the master checks
    /// it, one round trip; anything else syncs first, as Salt's), then
    /// the master's bundle, asked again when a sync after it changed what
    /// its compile read.
    fn synced_bundle(
        &self,
        id: &str,
        host: &mut Host,
        job: &Job,
        master: &MasterChannel,
        args: &Args,
        state_run: bool,
    ) -> Result<Held, ExecError> {
        // Salt syncs custom modules before a state run's render (named
        // SLS' sync_mods=; a highstate's saltenvs, known from its last run).
        let envs_key = (
            id.to_string(),
            args.kwargs.get("saltenv").map(halite_modules::exec::py_str),
        );
        tracing::debug!(%id, jid = %job.jid, "job starts: sync before the compile, then the bundle");
        let last = state_run
            .then(|| {
                self.highstate_envs
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(&envs_key)
                    .cloned()
            })
            .flatten();
        // A warm highstate says what it synced and the master checks it
        // (one round trip); anything else syncs before asking, as Salt's.
        let one_trip =
            halite_modules::dynamic::synced_for_master(host, &job.fun, args, last.as_deref())
                // A call of the minion's own (halite-call) asks CallBundle, which
                // has no such field.
                .filter(|_| job.jid != halite_proto::jid::CALLER_JID)
                .map(|(saltenvs, digest)| SyncedModules { saltenvs, digest });
        let mut synced_before = match &one_trip {
            Some(_) => None,
            None if state_run => halite_modules::dynamic::before_master_compile(
                host,
                &job.fun,
                args,
                last.as_deref(),
            ),
            None => None,
        };
        tracing::debug!(%id, jid = %job.jid, "asking the master for the bundle");
        // Whether the bundle was compiled before a sync that changed what
        // a compile reads: then it is asked for again.
        let mut stale = false;
        let mut held = match (
            self.fetch_bundle(id, host, job, master, one_trip.as_ref())?,
            one_trip,
        ) {
            (Fetched::Bundle(bundle, true), Some(synced)) => {
                tracing::debug!(%id, jid = %job.jid, "custom modules unchanged on the master: no sync");
                synced_before = Some(synced.saltenvs);
                *bundle
            }
            (Fetched::Bundle(bundle, _), Some(synced)) => {
                // A master that does not check (older): Salt's sync now;
                // a compile it changed is asked for again.
                stale = halite_modules::dynamic::load_dynamic(host, &synced.saltenvs);
                synced_before = Some(synced.saltenvs);
                *bundle
            }
            (Fetched::SyncFirst, Some(synced)) => {
                tracing::debug!(%id, jid = %job.jid, "custom modules changed on the master: synced, then the bundle");
                halite_modules::dynamic::load_dynamic(host, &synced.saltenvs);
                synced_before = Some(synced.saltenvs);
                self.fetch_bundle(id, host, job, master, None)?.bundle()?
            }
            (fetched, None) => fetched.bundle()?,
        };
        // From now on this identity's logs and spooled returns mask the
        // secrets its pillar holds (a job echoing one, at any log level).
        // Added, never replaced: two jobs may run with pillars of two
        // pillarenvs, and masking a value rotated out costs nothing.
        halite_logging::redact::add_secrets(id, &held.bundle.secrets);
        // A highstate syncs the saltenvs the master's top file render
        // matched (unless synced just before); when that copied a module,
        // the compile made before it may have missed it, so it is asked
        // for again.
        if let (true, Some(envs)) = (state_run, &held.bundle.saltenvs) {
            self.highstate_envs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(envs_key, envs.clone());
        }
        if state_run
            && (halite_modules::dynamic::after_master_compile(
                host,
                &job.fun,
                args,
                held.bundle.saltenvs.as_deref(),
                synced_before.as_deref(),
            ) || stale)
        {
            tracing::debug!(%id, jid = %job.jid, "custom modules synced: the bundle is compiled again");
            held = self.fetch_bundle(id, host, job, master, None)?.bundle()?;
            halite_logging::redact::add_secrets(id, &held.bundle.secrets);
        }
        Ok(held)
    }

    /// Runs `job` on `host`, through the master's bundle when it needs one.
    fn execute(
        &self,
        id: &str,
        host: &mut Host,
        job: &Job,
        master: &MasterChannel,
    ) -> Result<Outcome, ExecError> {
        let args = Args {
            positional: job.arg.clone(),
            kwargs: job.kwarg.clone(),
        };
        if self.local.is_some() {
            // A masterless minion decrypts its gpg pillar itself: its logs
            // and spooled returns mask what it decrypted, as with a master.
            halite_modules::gpg::take_decrypted();
            let errors = self.local_pillar(host);
            halite_logging::redact::add_secrets(id, &halite_modules::gpg::take_decrypted());
            if !errors.is_empty() && job.fun.starts_with("state.") {
                let mut errs = vec![Value::from(
                    "Pillar failed to render with the following messages:",
                )];
                errs.extend(errors.into_iter().map(Value::from));
                return Ok(Outcome::Value(Value::Array(errs)));
            }
            return host.call(&job.fun, &args).map(Outcome::Value);
        }
        if !needs_bundle(&job.fun) {
            return host.call(&job.fun, &args).map(Outcome::Value);
        }
        let state_run = halite_modules::exec::state::is_state_run(&job.fun);
        let Held { bundle, digest } =
            self.synced_bundle(id, host, job, master, &args, state_run)?;
        if !bundle.commits.is_empty() {
            tracing::info!(jid = %job.jid, commits = ?bundle.commits, "states compiled from git commits");
        }
        host.pillar = bundle.pillar.clone();
        if let Ok(mut cache) = self.pillar.write() {
            cache.insert(id.to_string(), bundle.pillar);
        }
        match bundle.action {
            BundleAction::Return { ret } => Ok(Outcome::Value(ret)),
            BundleAction::Call if job.fun == "saltutil.refresh_pillar" => {
                Ok(Outcome::Value(Value::Bool(true)))
            }
            BundleAction::Call => host.call(&job.fun, &args).map(Outcome::Value),
            BundleAction::Run {
                chunks,
                files,
                yamlex,
            } => {
                // The master's compile may have synced custom modules here
                // (a highstate's autoload, sync_mods): this job's host was
                // built before, so it loads them now.
                halite_modules::python::add_custom_modules(host);
                host.files = Arc::new(RemoteFileClient::new(
                    master.clone(),
                    self.file_cache.clone(),
                    files,
                ));
                // The order is kept by the digest of the bytes the chunks
                // came from (none from an older master's unpacked bundle).
                Ok(Outcome::State(match digest.as_deref() {
                    Some(digest) => StateExec::run_planned_keeping(
                        host,
                        &job.fun,
                        &args,
                        chunks,
                        &yamlex,
                        &self.orders.for_bundle(id, digest),
                    ),
                    None => StateExec::run_planned(host, &job.fun, &args, chunks, &yamlex),
                }))
            }
        }
    }
}

/// A job's bundle and the digest of the bytes it was decoded from (`None`:
/// an older master's bundle, sent unpacked).
struct Held {
    bundle: halite_proto::msg::Bundle<LowChunk>,
    digest: Option<String>,
}

/// The master's answer to a bundle request.
enum Fetched {
    /// The bundle, and whether the master found the custom modules the
    /// request said were synced unchanged (false when it did not check).
    Bundle(Box<Held>, bool),
    /// The custom modules changed: sync, then ask again (nothing compiled).
    SyncFirst,
}

impl Fetched {
    /// The bundle; "sync first" only answers a request that said what it
    /// synced, so to another it is the master's error.
    fn bundle(self) -> Result<Held, ExecError> {
        match self {
            Fetched::Bundle(held, _) => Ok(*held),
            Fetched::SyncFirst => Err(ExecError::Execution(
                "the master asked for a sync before the bundle again; run the job again".into(),
            )),
        }
    }
}

/// A low chunk of a bundle that came as `Value`s (a call's bundle):
/// a non-map entry (never sent) stays as an empty chunk, so the chunks
/// keep the master's numbering (the yamlex marks refer to it).
fn chunk_of(value: Value) -> LowChunk {
    match value {
        Value::Object(m) => LowChunk::from(m),
        _ => LowChunk::new(),
    }
}

/// The returners `job` names (`--return`), and the job without them
/// when it named any.
fn take_returners(job: &Job) -> (Option<halite_modules::returners::ReturnSpec>, Option<Job>) {
    let mut kwarg = job.kwarg.clone();
    match halite_modules::returners::ReturnSpec::take_from(&mut kwarg) {
        Some(spec) => (
            Some(spec),
            Some(Job {
                kwarg,
                ..job.clone()
            }),
        ),
        None => (None, None),
    }
}

/// A job nobody watched the progress of when the master published it
/// ([`Job::progress_unwatched`]) fires no progress events, unless the
/// minion's config sets `state_events` itself (Salt's option: its value
/// holds, as in Salt). `fire_event` states fire theirs either way.
fn no_progress_unless_configured(opts: &mut Value) {
    if let Value::Object(map) = opts {
        map.entry("state_events").or_insert(Value::Bool(false));
    }
}

impl JobRunner for HostRunner {
    fn run(
        &self,
        id: &str,
        grains: &Value,
        job: &Job,
        events: Arc<dyn EventSink>,
        master: MasterChannel,
    ) -> PackedReturn {
        // A call of the minion's own (halite-call, jid `req`) runs under a
        // jid made here, as salt-call's: its commands, its state run and
        // its returners see that one; the master gives the return its own.
        let run_jid = if job.jid == halite_proto::jid::CALLER_JID {
            halite_proto::JidGenerator::new().next_jid()
        } else {
            job.jid.clone()
        };
        // The job's commands are recorded under its jid (saltutil.kill_job).
        let _scope = halite_modules::job_procs::JobScope::enter(&run_jid);
        // User and group names from NSS sources other than the files
        // (LDAP, systemd) are looked up again by each job.
        halite_modules::exec::file::owner_names::forget_all();
        // `--return`: the returners are the minion's to call, never the
        // function's arguments.
        let (returners, stripped) = take_returners(job);
        let job = stripped.as_ref().unwrap_or(job);
        let mut host = self.host(id, Some(&run_jid), grains, events, &master, Manifest::new());
        if job.progress_unwatched {
            no_progress_unless_configured(&mut host.opts);
        }
        halite_modules::exec::clear_retcode();
        // The states' returns its progress events encode are kept for
        // its return (encoded once), until this job's end.
        let _kept = crate::packing::keep_rets();
        let outcome = self.execute(id, &mut host, job, &master);
        let failed = |text: String| (Outcome::Value(Value::String(text)), 1);
        let (ret, retcode) = match outcome {
            Ok(ret) => {
                let code = ret.retcode(&job.fun);
                (ret, code)
            }
            Err(ExecError::NotAvailable(f)) => failed(format!("'{f}' is not available.")),
            // Salt's minion: a call Python rejects (TypeError) is "Passed
            // invalid arguments to <fun>: <error>" and the docstring (none here).
            Err(ExecError::Invocation(msg))
                if halite_modules::exec::signature::is_python_type_error(&msg) =>
            {
                failed(format!("Passed invalid arguments to {}: {msg}\n", job.fun))
            }
            Err(ExecError::Invocation(msg)) => {
                failed(format!("ERROR executing '{}': {msg}", job.fun))
            }
            Err(ExecError::Execution(msg)) => failed(format!("ERROR: {msg}")),
        };
        let meta = ReturnMeta {
            jid: job.jid.clone(),
            id: id.to_string(),
            fun: job.fun.clone(),
            fun_args: job.arg.clone(),
            retcode,
        };
        let Some(spec) = returners else {
            return pack_outcome(meta, &ret);
        };
        // `--return`: the returners read the value itself.
        let value = ret.into_value();
        let dict = halite_modules::returners::return_dict(
            &run_jid,
            &meta.id,
            &meta.fun,
            &meta.fun_args,
            &value,
            meta.retcode,
            meta.retcode == 0,
        );
        let dict = halite_modules::returners::masked(
            dict,
            halite_logging::redact::secrets_of(id).as_deref(),
        );
        // Failures are logged by send; the master still gets the return.
        let _ = halite_modules::returners::send(&host, &spec, dict);
        pack_outcome(meta, &Outcome::Value(value))
    }

    fn render_call(
        &self,
        id: &str,
        grains: &Value,
        fun: &str,
        args: Args,
        master: MasterChannel,
    ) -> Result<Value, String> {
        let events: Arc<dyn EventSink> = Arc::new(halite_modules::host::LogEvents);
        let host = self.host(id, None, grains, events, &master, Manifest::new());
        host.call(fun, &args).map_err(|e| e.to_string())
    }

    fn pillar(&self, id: &str) -> Option<Value> {
        self.pillar.read().ok()?.get(id).cloned()
    }

    fn grains(&self, id: &str) -> Value {
        let opts = self.opts_for(id, None);
        let mut grains = halite_modules::grains::grains_for(&opts);
        grains.insert("id".into(), Value::String(id.to_string()));
        let core = Value::Object(grains.clone());
        grains.extend(halite_modules::python::custom_grains(&opts, &core));
        if let Some(extra) = self.grain_overrides.get(id) {
            for (k, v) in extra {
                grains.insert(k.clone(), v.clone());
            }
        }
        Value::Object(grains)
    }
}

#[cfg(test)]
mod tests {
    use halite_modules::exec::{clear_retcode, retcode, set_retcode};
    use serde_json::json;

    #[test]
    fn retcodes_follow_salt() {
        clear_retcode();
        assert_eq!(retcode("test.ping", &json!(true)), 0);
        assert_eq!(retcode("x.y", &json!({"result": false})), 1);
        assert_eq!(retcode("x.y", &json!({"success": false})), 1);
        assert_eq!(retcode("state.apply", &json!({"a": {"result": false}})), 2);
        assert_eq!(retcode("state.apply", &json!(["Rendering SLS failed"])), 1);
        assert_eq!(retcode("state.apply", &json!({"a": {"result": true}})), 0);
        // A function's own retcode (cmd.run of a failing command) wins,
        // and is used once.
        set_retcode(3);
        assert_eq!(retcode("cmd.run", &json!("")), 3);
        assert_eq!(retcode("cmd.run", &json!("")), 0);
        // State runs keep their own rule whatever a state's command set.
        set_retcode(7);
        assert_eq!(retcode("state.apply", &json!({"a": {"result": true}})), 0);
        assert_eq!(retcode("test.ping", &json!(true)), 0);
    }
}
