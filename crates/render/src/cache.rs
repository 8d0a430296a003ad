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
//! (an SLS that embeds `grains['id']`) cost a hash each and fill nothing.
//! Memory is bounded: past [`MAX_ENTRIES`] entries or [`MAX_BYTES`] of
//! stored text the cache starts over.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::Value;

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
}

struct Entry {
    text: Arc<str>,
    data: Arc<Value>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<(Loader, u64), Entry>,
    seen: HashSet<(Loader, u64)>,
    bytes: usize,
}

/// Parsed documents by their text (see the module's documentation).
pub struct RenderCache {
    inner: Mutex<Inner>,
    enabled: AtomicBool,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl Default for RenderCache {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            enabled: AtomicBool::new(true),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
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

    /// Hits and misses since the process started.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
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
        parse: impl FnOnce(&str) -> Result<Value, E>,
    ) -> Result<Value, E> {
        if !self.enabled.load(Ordering::Relaxed) {
            return parse(text);
        }
        let key = (loader, hash_of(text));
        {
            let inner = self.lock();
            if let Some(entry) = inner.entries.get(&key) {
                if &*entry.text == text {
                    let data = entry.data.clone();
                    drop(inner);
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    return Ok((*data).clone());
                }
            }
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let data = parse(text)?;
        let mut inner = self.lock();
        if !inner.seen.contains(&key) {
            if inner.seen.len() >= MAX_SEEN {
                inner.seen.clear();
            }
            inner.seen.insert(key);
            return Ok(data);
        }
        if inner.entries.len() >= MAX_ENTRIES || inner.bytes + text.len() > MAX_BYTES {
            inner.entries.clear();
            inner.bytes = 0;
        }
        inner.bytes += text.len();
        let old = inner.entries.insert(
            key,
            Entry {
                text: Arc::from(text),
                data: Arc::new(data.clone()),
            },
        );
        if let Some(old) = old {
            inner.bytes = inner.bytes.saturating_sub(old.text.len());
        }
        Ok(data)
    }
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
        assert_eq!(cache.stats(), CacheStats { hits: 1, misses: 2 });
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
    fn disabled_it_always_parses() {
        let cache = RenderCache::default();
        cache.set_enabled(false);
        for _ in 0..3 {
            yaml(&cache, "a: 1\n");
        }
        assert_eq!(cache.stats().hits, 0);
    }
}
