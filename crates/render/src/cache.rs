//! The render cache: the one place where work shared by many renders is
//! remembered, so a master compiling the same tree for a fleet parses
//! each distinct text once instead of once per minion.
//!
//! What is remembered is the result of a pure function of the text alone:
//! the YAML (or JSON) data a rendered SLS loads to. The key is the text
//! itself (a hash finds the entry; the stored text is compared before a
//! hit is used), so a changed file, a template whose output differs per
//! minion, or a different pillar can never be served another text's data:
//! correctness does not depend on invalidation. A top file, a pillar SLS
//! or a state SLS that renders to the same text for many minions (no
//! per-minion Jinja in it) is parsed once.
//!
//! A text is stored only the second time it is seen, so per-minion texts
//! cost a hash each and fill nothing.
//!
//! Texts that differ only by the minion's id (an SLS that builds paths
//! from `grains['id']`, the fleet benchmark's shape) share one parse
//! through [`RenderCache::load_varying`]: see [`crate::cache::id_form`]
//! for why that parse, with the id put back into its strings, is exactly
//! the parse of each minion's own text, and when it is refused.
//! Memory is bounded: past [`MAX_ENTRIES`] entries or [`MAX_BYTES`] of
//! stored text the cache starts over.

use std::cell::{Cell, RefCell};
use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::Value;

pub mod id_form;

/// Most parsed documents kept at once.
pub const MAX_ENTRIES: usize = 1024;
/// Most bytes of source text kept at once. The parsed data of a YAML text
/// takes several times its size in memory (maps of `Value`s), so this
/// keeps a long-running daemon's cache to some tens of megabytes.
pub const MAX_BYTES: usize = 8 << 20;
/// Most texts remembered as seen once before the set starts over.
const MAX_SEEN: usize = 64 * 1024;

/// Which loader produced an entry: the same text loads differently as
/// YAML and as JSON.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Loader {
    /// Salt's YAML rules ([`crate::yaml::load`]).
    Yaml,
    /// JSON (`#!json`, `jinja|json`).
    Json,
}

/// How often the cache answered, for benchmarks and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Loads answered from the cache.
    pub hits: u64,
    /// Loads that parsed.
    pub misses: u64,
    /// Loads answered from another minion's parse through the id form.
    pub id_form: u64,
}

/// A stored parse. `data` is `None` for an id form that cannot be
/// substituted into ([`id_form::parse`] refused it), so later minions go
/// straight to their own parse instead of trying again.
struct Entry {
    text: Arc<str>,
    data: Option<Arc<Value>>,
}

/// What an entry's text is: a minion's rendered text itself, or its id
/// form (the id replaced by [`id_form::PLACEHOLDER`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Form {
    Exact,
    IdForm,
}

type Key = (Loader, Form, u64);

#[derive(Default)]
struct Inner {
    entries: HashMap<Key, Entry>,
    seen: HashSet<Key>,
    bytes: usize,
}

/// What a lookup found.
enum Lookup {
    /// A stored parse (or a stored refusal).
    Stored(Option<Arc<Value>>),
    /// Nothing stored; this is the first time the text is seen.
    First,
    /// Nothing stored; seen before, so the next parse is stored.
    Again,
}

/// Parsed documents by their text (see the module's documentation).
pub struct RenderCache {
    inner: Mutex<Inner>,
    enabled: AtomicBool,
    hits: AtomicU64,
    misses: AtomicU64,
    id_form: AtomicU64,
}

impl Default for RenderCache {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            enabled: AtomicBool::new(true),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            id_form: AtomicU64::new(0),
        }
    }
}

impl RenderCache {
    /// The process's cache, used by [`crate::render_sls`].
    pub fn global() -> &'static RenderCache {
        static CACHE: OnceLock<RenderCache> = OnceLock::new();
        CACHE.get_or_init(RenderCache::default)
    }

    /// Turns the cache on or off (off: every load parses; for comparing
    /// memoised and fresh compiles). Turning it off empties it.
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::SeqCst);
        if !on {
            *self.lock() = Inner::default();
        }
    }

    /// Whether the cache is on; the compiled Jinja templates follow it.
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Hits and misses since the process started.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            id_form: self.id_form.load(Ordering::Relaxed),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The data `text` loads to with `loader`, from the cache or by
    /// calling `parse` (whose errors are returned and never cached).
    pub fn load<E>(
        &self,
        loader: Loader,
        text: &str,
        parse: impl Fn(&str) -> Result<Value, E>,
    ) -> Result<Value, E> {
        if !self.enabled.load(Ordering::Relaxed) {
            note(Load::Opaque);
            return parse(text);
        }
        let key = (loader, Form::Exact, hash_of(text));
        note_load(key.2, false);
        match self.lookup(key, text) {
            Lookup::Stored(Some(data)) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                let out = (*data).clone();
                note(Load::Exact(data));
                return Ok(out);
            }
            Lookup::Stored(None) | Lookup::First => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                note(Load::Opaque);
                return parse(text);
            }
            Lookup::Again => {}
        }
        note(Load::Opaque);
        self.misses.fetch_add(1, Ordering::Relaxed);
        let data = parse(text)?;
        self.store(key, text, Some(Arc::new(data.clone())));
        Ok(data)
    }

    /// [`RenderCache::load`] for a text rendered for the minion `id`:
    /// when the text holds the id, its id form is looked up instead, so
    /// minions whose texts differ only by their ids share one parse
    /// (YAML only; see [`id_form`] for the rules that keep it exact).
    /// Falls back to [`RenderCache::load`] whenever the id form cannot
    /// serve this minion.
    pub fn load_varying<E>(
        &self,
        loader: Loader,
        text: &str,
        id: Option<&str>,
        parse: impl Fn(&str) -> Result<Value, E>,
    ) -> Result<Value, E> {
        let usable = self.enabled.load(Ordering::Relaxed) && loader == Loader::Yaml;
        let Some(id) = id.filter(|id| usable && id_form::applies(text, id)) else {
            return self.load(loader, text, parse);
        };
        let form = id_form::of(text, id);
        let key = (loader, Form::IdForm, hash_of(&form));
        note_load(key.2, true);
        let shared = match self.lookup(key, &form) {
            Lookup::Stored(shared) => shared,
            Lookup::First => None,
            Lookup::Again => {
                // Its parse errors are not the minion's (the minion's own
                // text gives those below): a form that fails is refused.
                let shared = id_form::parse(&form, &parse).map(Arc::new);
                self.store(key, &form, shared.clone());
                shared
            }
        };
        // While probing ([`notes_begin`]) the form's parse is noted and
        // not put back: the caller reads the note, never the data.
        if let Some(shared) = shared.as_ref().filter(|_| probing()) {
            note(Load::Form(shared.clone()));
            return Ok(Value::Null);
        }
        match shared.and_then(|data| Some((id_form::substitute(&data, id)?, data))) {
            Some((data, form)) => {
                self.id_form.fetch_add(1, Ordering::Relaxed);
                note(Load::Form(form));
                Ok(data)
            }
            // The minion's own text, not noted: its trace is its form's.
            None => {
                let trace = TRACE.with(Cell::take);
                let data = self.load(loader, text, parse);
                TRACE.with(|t| t.set(trace));
                data
            }
        }
    }

    /// The entry of `key` if its text is `text`, or whether the text was
    /// seen before (marking it seen).
    fn lookup(&self, key: Key, text: &str) -> Lookup {
        let mut inner = self.lock();
        if let Some(entry) = inner.entries.get(&key) {
            if &*entry.text == text {
                return Lookup::Stored(entry.data.clone());
            }
        }
        if inner.seen.contains(&key) {
            return Lookup::Again;
        }
        if inner.seen.len() >= MAX_SEEN {
            inner.seen.clear();
        }
        inner.seen.insert(key);
        Lookup::First
    }

    /// Stores `data` for `text` under `key`, starting over when full.
    fn store(&self, key: Key, text: &str, data: Option<Arc<Value>>) {
        let mut inner = self.lock();
        if inner.entries.len() >= MAX_ENTRIES || inner.bytes + text.len() > MAX_BYTES {
            inner.entries.clear();
            inner.bytes = 0;
        }
        inner.bytes += text.len();
        let old = inner.entries.insert(
            key,
            Entry {
                text: Arc::from(text),
                data,
            },
        );
        if let Some(old) = old {
            inner.bytes = inner.bytes.saturating_sub(old.text.len());
        }
    }
}

thread_local! {
    /// The loads of the plan this thread is rendering ([`begin_trace`]).
    static TRACE: Cell<Option<u64>> = const { Cell::new(None) };
    /// The loads noted since [`notes_begin`], and whether this thread is
    /// probing.
    static NOTES: RefCell<Option<Notes>> = const { RefCell::new(None) };
}

/// What one step of a render gave, told by identity, for the master's
/// plan memo (issue 25, session 24: a minion whose renders load exactly
/// the id forms another minion's did is given that minion's compile with
/// its own id, without building its high data). Why it exists: the
/// render knows which stored parse it served; nothing downstream can
/// tell two parses apart without walking them.
#[derive(Clone, Debug)]
pub enum Load {
    /// A stored id form's parse ([`RenderCache::load_varying`]): the data
    /// is it with the minion's id put back into its strings.
    Form(Arc<Value>),
    /// A stored parse of the exact text ([`RenderCache::load`]).
    Exact(Arc<Value>),
    /// A whole render the render memo reused.
    Reused(Arc<Value>),
    /// Anything not told by identity: a parse, a `salt[...]` call, an
    /// external renderer, yamlex. Never the same as another load.
    Opaque,
}

impl Load {
    /// Whether `self` and `other` are the same stored data, reached the
    /// same way (an [`Load::Opaque`] is never the same).
    pub fn same(&self, other: &Load) -> bool {
        match (self, other) {
            (Load::Form(a), Load::Form(b))
            | (Load::Exact(a), Load::Exact(b))
            | (Load::Reused(a), Load::Reused(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

struct Notes {
    probing: bool,
    loads: Vec<Load>,
}

/// Starts noting, on this thread, every load the renders make
/// ([`Load`]). `probing`: the renders are a probe whose data is thrown
/// away: an id form's parse is noted, not put back (its data is `null`),
/// a reused render is not copied, nothing is stored in the render memo,
/// and a `salt[...]` call, an external renderer or yamlex fails the
/// render before it runs (a probe must have no effect).
pub fn notes_begin(probing: bool) {
    NOTES.with(|n| {
        *n.borrow_mut() = Some(Notes {
            probing,
            loads: Vec::new(),
        })
    });
}

/// The loads noted since [`notes_begin`] or the last take (noting goes on).
pub fn notes_take() -> Vec<Load> {
    NOTES.with(|n| {
        n.borrow_mut()
            .as_mut()
            .map(|n| std::mem::take(&mut n.loads))
            .unwrap_or_default()
    })
}

/// Stops noting (and probing).
pub fn notes_end() {
    NOTES.with(|n| *n.borrow_mut() = None);
}

/// Whether this thread's renders are a probe ([`notes_begin`]).
pub fn probing() -> bool {
    NOTES.with(|n| n.borrow().as_ref().is_some_and(|n| n.probing))
}

/// Notes `load` when noting.
pub(crate) fn note(load: Load) {
    NOTES.with(|n| {
        if let Some(n) = n.borrow_mut().as_mut() {
            n.loads.push(load);
        }
    });
}

/// Notes a step that cannot be told by identity; `true` when probing,
/// and the render must stop before it has an effect.
pub(crate) fn note_opaque() -> bool {
    note(Load::Opaque);
    probing()
}

/// Starts noting, on this thread, which texts the render loads: each
/// one's hash, as its id form when it was served through one
/// ([`RenderCache::load_varying`]), so minions whose texts differ only by
/// their ids note the same. Why it exists: the master's compile picks the
/// kept id form to compare a minion's high data with by it (issue 25,
/// session 23); it is a hint, never a proof (the comparison is exact).
pub fn begin_trace() {
    TRACE.with(|t| t.set(Some(0xcbf2_9ce4_8422_2325)));
}

/// What this thread loaded since [`begin_trace`] (and stops noting);
/// `None` without a `begin_trace`.
pub fn end_trace() -> Option<u64> {
    TRACE.with(Cell::take)
}

/// Notes one load's hash (`form`: an id form's) in the trace, if any.
fn note_load(hash: u64, form: bool) {
    TRACE.with(|t| {
        if let Some(h) = t.get() {
            let h = (h.rotate_left(17) ^ hash ^ u64::from(form)).wrapping_mul(0x0100_0000_01b3);
            t.set(Some(h));
        }
    });
}

fn hash_of(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn yaml(cache: &RenderCache, text: &str) -> Value {
        cache.load(Loader::Yaml, text, crate::yaml::load).unwrap()
    }

    #[test]
    fn a_text_seen_twice_is_parsed_twice_then_served() {
        let cache = RenderCache::default();
        for _ in 0..3 {
            assert_eq!(yaml(&cache, "a: 1\n"), json!({"a": 1}));
        }
        assert_eq!(
            cache.stats(),
            CacheStats {
                hits: 1,
                misses: 2,
                id_form: 0
            }
        );
    }

    #[test]
    fn different_texts_and_loaders_never_share_an_entry() {
        let cache = RenderCache::default();
        for _ in 0..2 {
            assert_eq!(yaml(&cache, "a: 1\n"), json!({"a": 1}));
            assert_eq!(yaml(&cache, "a: 2\n"), json!({"a": 2}));
        }
        // `yes` is a boolean in YAML 1.1 and an error in JSON.
        assert_eq!(yaml(&cache, "yes"), json!(true));
        let json: Result<Value, serde_json::Error> =
            cache.load(Loader::Json, "yes", |s| serde_json::from_str(s));
        assert!(json.is_err());
    }

    #[test]
    fn errors_are_returned_every_time() {
        let cache = RenderCache::default();
        for _ in 0..3 {
            assert!(cache
                .load(Loader::Yaml, "a: [1\n", crate::yaml::load)
                .is_err());
        }
        assert_eq!(cache.stats().hits, 0);
    }

    #[test]
    fn texts_that_differ_only_by_the_id_trace_alike() {
        let cache = RenderCache::default();
        let trace = |text: &str, id: &str| {
            begin_trace();
            cache
                .load_varying(Loader::Yaml, text, Some(id), crate::yaml::load)
                .unwrap();
            cache
                .load(Loader::Yaml, "top: 1\n", crate::yaml::load)
                .unwrap();
            end_trace()
        };
        let web1 = trace("web1_x:\n  test.nop: []\n", "web1");
        let web2 = trace("web2_x:\n  test.nop: []\n", "web2");
        let other = trace("web2_y:\n  test.nop: []\n", "web2");
        assert!(web1.is_some());
        assert_eq!(web1, web2);
        assert_ne!(web2, other);
        assert_eq!(end_trace(), None);
    }

    #[test]
    fn disabled_it_always_parses() {
        let cache = RenderCache::default();
        cache.set_enabled(false);
        for _ in 0..3 {
            yaml(&cache, "a: 1\n");
        }
        assert_eq!(cache.stats().hits, 0);
    }
}
