//! Render reuse by what a render read: a master compiling one tree for a
//! fleet renders each SLS once per distinct set of inputs the SLS actually
//! looks at, not once per minion.
//!
//! While an SLS renders, a [`ReadLog`] records what it reads: each
//! top-level key of `grains`, `pillar` and `opts` it looks up (or the whole
//! of one when it iterates, prints or copies it), the minion's options
//! `config.get` reads, the `salt[...]` functions it asks for and the
//! results of the ones it calls, and the templates it imports or includes.
//! A later render of the same text (same path, SLS name, saltenv and extra
//! variables) whose context gives the same value for every one of those
//! reads gets the stored data: the template is a deterministic function of
//! what it read (no filter or function of this crate reads the clock or a
//! random source), so it would render the same.
//!
//! A render is never reused (it is *volatile*) when it called a function
//! the host cannot replay without effect ([`crate::SaltFunctions::replayable`]:
//! anything that runs on the minion, or writes, or logs), ran a renderer
//! of the host, or failed. Replayable calls are checked by calling them
//! again for the new context (a `mine.get` answered from the master's
//! mine), so changed mine data is a different input.
//!
//! A set of reads is remembered first without data; the data is kept when
//! a second context matches it, so per-minion renders (an SLS that reads
//! `grains['id']`) store no data. Bounded: a few read sets per text, and
//! the whole memo starts over past [`MAX_TEXTS`] texts.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::cache::RenderCache;
use crate::watch::ReusedRead;
use crate::{Map, RenderContext, RenderError, Value};

/// Most texts remembered at once.
pub const MAX_TEXTS: usize = 1024;
/// Most bytes of text whose rendered data is kept at once.
pub const MAX_BYTES: usize = 8 << 20;
/// Most read sets remembered per text (the oldest goes first).
const MAX_VARIANTS: usize = 8;

/// Which input of the context a read is of.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Root {
    Grains,
    Pillar,
    Opts,
}

/// One thing a render read, as recorded while it renders.
#[derive(Clone, Debug)]
pub(crate) enum Read {
    /// A top-level key of grains, pillar or opts.
    Key(Root, String),
    /// The whole of grains, pillar or opts.
    All(Root),
    /// Whether `salt` has a function.
    Has(String, bool),
    /// A replayable function's call and its result.
    Call {
        fun: String,
        args: Vec<Value>,
        kwargs: Map,
        result: Value,
    },
    /// The minion's options as `config.get` reads them.
    MinionOpts(Option<Value>),
    /// A template read through the loader (`None`: absent).
    File {
        name: String,
        saltenv: String,
        text: Option<String>,
    },
}

/// What one render read (see the module's documentation).
#[derive(Default, Debug)]
pub struct ReadLog {
    reads: Mutex<Vec<Read>>,
    keys: Mutex<HashSet<(Root, String)>>,
    volatile: AtomicBool,
}

impl ReadLog {
    pub(crate) fn note(&self, read: Read) {
        if let Read::Key(root, key) = &read {
            let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
            if !keys.insert((*root, key.clone())) {
                return;
            }
        }
        self.reads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(read);
    }

    /// Marks the render as not reusable.
    pub(crate) fn volatile(&self) {
        self.volatile.store(true, Ordering::Relaxed);
    }

    pub(crate) fn is_volatile(&self) -> bool {
        self.volatile.load(Ordering::Relaxed)
    }

    /// Calls `f` with each read recorded so far.
    pub(crate) fn each_read(&self, mut f: impl FnMut(&Read)) {
        for read in self
            .reads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            f(read);
        }
    }

    fn take(&self) -> Vec<Read> {
        std::mem::take(&mut *self.reads.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// A read with the value it had, checked against a new context.
#[derive(Debug)]
enum Stored {
    Key(Root, String, Option<Value>),
    All(Root, Value),
    Has(String, bool),
    MinionOpts(Option<Value>),
    File {
        name: String,
        saltenv: String,
        text: Option<String>,
    },
    Call {
        fun: String,
        args: Vec<Value>,
        kwargs: Map,
        result: Value,
    },
}

fn root_of(ctx: &RenderContext, root: Root) -> &Value {
    match root {
        Root::Grains => &ctx.grains,
        Root::Pillar => &ctx.pillar,
        Root::Opts => &ctx.opts,
    }
}

impl Stored {
    fn from_read(read: Read, ctx: &RenderContext) -> Stored {
        match read {
            Read::Key(root, key) => {
                let value = root_of(ctx, root).get(&key).cloned();
                Stored::Key(root, key, value)
            }
            Read::All(root) => Stored::All(root, root_of(ctx, root).clone()),
            Read::Has(fun, has) => Stored::Has(fun, has),
            Read::MinionOpts(opts) => Stored::MinionOpts(opts),
            Read::File {
                name,
                saltenv,
                text,
            } => Stored::File {
                name,
                saltenv,
                text,
            },
            Read::Call {
                fun,
                args,
                kwargs,
                result,
            } => Stored::Call {
                fun,
                args,
                kwargs,
                result,
            },
        }
    }

    /// Cheap checks first, calls last.
    fn rank(&self) -> u8 {
        match self {
            Stored::Key(..) | Stored::Has(..) => 0,
            Stored::All(..) | Stored::MinionOpts(..) => 1,
            Stored::File { .. } => 2,
            Stored::Call { .. } => 3,
        }
    }

    /// This read as the compile watch sees it ([`crate::watch`]).
    fn for_watch(&self) -> ReusedRead<'_> {
        match self {
            Stored::Key(Root::Opts, key, value) => ReusedRead::Opt(key, value.as_ref()),
            Stored::All(Root::Opts, _) => ReusedRead::AllOpts,
            Stored::Call { .. } => ReusedRead::Call,
            Stored::MinionOpts(_) => ReusedRead::MinionOpts,
            Stored::Key(..) | Stored::All(..) | Stored::Has(..) | Stored::File { .. } => {
                ReusedRead::Other
            }
        }
    }

    fn holds_for(&self, ctx: &RenderContext) -> bool {
        match self {
            Stored::Key(root, key, value) => root_of(ctx, *root).get(key) == value.as_ref(),
            Stored::All(root, value) => root_of(ctx, *root) == value,
            Stored::Has(fun, has) => ctx.salt.has(fun) == *has,
            Stored::MinionOpts(opts) => ctx.salt.opts() == *opts,
            Stored::File {
                name,
                saltenv,
                text,
            } => ctx.files.get(name, saltenv).ok().as_ref() == Some(text),
            Stored::Call {
                fun,
                args,
                kwargs,
                result,
            } => {
                ctx.salt.replayable(fun)
                    && ctx.salt.call(fun, args, kwargs).ok().as_ref() == Some(result)
            }
        }
    }
}

/// One set of reads of a text, and its data once a second context matched it.
struct Variant {
    reads: Vec<Stored>,
    data: Mutex<Option<Arc<Value>>>,
}

impl Variant {
    fn holds_for(&self, ctx: &RenderContext) -> bool {
        self.reads.iter().all(|read| read.holds_for(ctx))
    }
}

/// What identifies a text's renders besides what they read.
struct Slot {
    text: Arc<str>,
    source_path: String,
    sls: String,
    saltenv: String,
    extra: Map,
    variants: Vec<Arc<Variant>>,
}

impl Slot {
    fn is_for(&self, text: &str, ctx: &RenderContext) -> bool {
        &*self.text == text
            && self.source_path == ctx.source_path
            && self.sls == ctx.sls
            && self.saltenv == ctx.saltenv
            && self.extra == ctx.extra
    }
}

/// How often the memo answered, for benchmarks and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoStats {
    /// Renders answered with another render's data.
    pub reused: u64,
    /// Renders that ran.
    pub rendered: u64,
    /// Renders that could not be kept (volatile or failed).
    pub volatile: u64,
}

/// Rendered SLS data by text and reads (see the module's documentation).
#[derive(Default)]
pub struct RenderMemo {
    slots: Mutex<HashMap<u64, Slot>>,
    reused: AtomicU64,
    rendered: AtomicU64,
    volatile: AtomicU64,
    /// Bytes of text whose data is kept.
    kept: AtomicU64,
}

impl RenderMemo {
    /// The process's memo, used by [`crate::render_sls`]. Off when the
    /// render cache is off ([`RenderCache::set_enabled`]).
    pub fn global() -> &'static RenderMemo {
        static MEMO: OnceLock<RenderMemo> = OnceLock::new();
        MEMO.get_or_init(RenderMemo::default)
    }

    /// Counts since the process started.
    pub fn stats(&self) -> MemoStats {
        MemoStats {
            reused: self.reused.load(Ordering::Relaxed),
            rendered: self.rendered.load(Ordering::Relaxed),
            volatile: self.volatile.load(Ordering::Relaxed),
        }
    }

    /// The data of `text` for `ctx`: another render's when one read the
    /// same inputs, else `render`'s (given the log to record its reads in).
    pub(crate) fn render(
        &self,
        text: &str,
        ctx: &RenderContext,
        render: impl FnOnce(Option<Arc<ReadLog>>) -> Result<Value, RenderError>,
    ) -> Result<Value, RenderError> {
        if !RenderCache::global().is_enabled() {
            crate::watch::untracked("the render cache is off");
            return render(None);
        }
        let key = hash_of(text, ctx);
        let variants: Vec<Arc<Variant>> = {
            let slots = self.lock();
            match slots.get(&key) {
                Some(slot) if slot.is_for(text, ctx) => slot.variants.clone(),
                _ => Vec::new(),
            }
        };
        let matched = variants.into_iter().find(|v| v.holds_for(ctx));
        if let Some(variant) = &matched {
            let data = variant
                .data
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if let Some(data) = data {
                crate::watch::reused(variant.reads.iter().map(Stored::for_watch));
                self.reused.fetch_add(1, Ordering::Relaxed);
                // A probe reads the note, not the data (no copy).
                let out = match crate::cache::probing() {
                    true => Value::Null,
                    false => (*data).clone(),
                };
                crate::cache::note(crate::cache::Load::Reused(data));
                return Ok(out);
            }
        }
        self.rendered.fetch_add(1, Ordering::Relaxed);
        let log = Arc::new(ReadLog::default());
        let result = render(Some(log.clone()));
        // A probe stopped before a call is rendered again for real, which
        // reports its reads.
        if !(result.is_err() && crate::cache::probing()) {
            crate::watch::ran(&log, result.is_ok(), ctx);
        }
        let Ok(data) = &result else {
            self.volatile.fetch_add(1, Ordering::Relaxed);
            return result;
        };
        if log.is_volatile() {
            self.volatile.fetch_add(1, Ordering::Relaxed);
            return result;
        }
        // A probe's data is not the render's (an id form's parse is left
        // out of it): never kept.
        if crate::cache::probing() {
            return result;
        }
        match matched {
            // A second context with these reads: keep the data now.
            Some(variant) => {
                let kept = self.kept.fetch_add(text.len() as u64, Ordering::Relaxed);
                if kept as usize + text.len() > MAX_BYTES {
                    self.lock().clear();
                    self.kept.store(0, Ordering::Relaxed);
                } else {
                    *variant.data.lock().unwrap_or_else(PoisonError::into_inner) =
                        Some(Arc::new(data.clone()));
                }
            }
            None => self.remember(key, text, ctx, log.take()),
        }
        result
    }

    /// Adds a read set (without data) for `text`.
    fn remember(&self, key: u64, text: &str, ctx: &RenderContext, reads: Vec<Read>) {
        let mut reads: Vec<Stored> = reads
            .into_iter()
            .map(|read| Stored::from_read(read, ctx))
            .collect();
        reads.sort_by_key(Stored::rank);
        let variant = Arc::new(Variant {
            reads,
            data: Mutex::new(None),
        });
        let mut slots = self.lock();
        if !slots.contains_key(&key) && slots.len() >= MAX_TEXTS {
            slots.clear();
            self.kept.store(0, Ordering::Relaxed);
        }
        let slot = slots.entry(key).or_insert_with(|| Slot {
            text: Arc::from(text),
            source_path: ctx.source_path.clone(),
            sls: ctx.sls.clone(),
            saltenv: ctx.saltenv.clone(),
            extra: ctx.extra.clone(),
            variants: Vec::new(),
        });
        if !slot.is_for(text, ctx) {
            *slot = Slot {
                text: Arc::from(text),
                source_path: ctx.source_path.clone(),
                sls: ctx.sls.clone(),
                saltenv: ctx.saltenv.clone(),
                extra: ctx.extra.clone(),
                variants: Vec::new(),
            };
        }
        if slot.variants.len() >= MAX_VARIANTS {
            slot.variants.remove(0);
        }
        slot.variants.push(variant);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Slot>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn hash_of(text: &str, ctx: &RenderContext) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    ctx.source_path.hash(&mut h);
    ctx.sls.hash(&mut h);
    ctx.saltenv.hash(&mut h);
    h.finish()
}
