//! Jinja compiled once: Salt's environment (settings, filters, functions)
//! is built once per process, and each template version (its name and
//! text) is pre-passed and compiled once, then shared by every render of
//! it, for every minion. A render clones the environment that holds its
//! compiled template (the filters, globals and templates inside are
//! reference-counted, so the clone copies pointers) and adds what is its
//! own: the render context's globals and the loader over its file roots.
//!
//! The key is the template's text itself (a hash finds the entry, the
//! text is compared), so a changed file is a new entry and nothing needs
//! invalidating. Syntax errors are not kept: they are compiled, and
//! reported, on every render. Memory is bounded like the render cache's.
//! With the render cache turned off ([`crate::cache::RenderCache::set_enabled`])
//! every render compiles afresh, for comparing memoised and fresh compiles.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use minijinja::value::{Rest, ValueKind};
use minijinja::{AutoEscape, Environment, Error, ErrorKind, UndefinedBehavior, Value as MjValue};

use super::objects::make_mutable;
use super::{
    dict_function, filters, format_value, import_function, join_template_path, methods,
    parse_function, percent_format, prepass,
};
use crate::cache::RenderCache;

/// Most compiled template versions kept at once.
const MAX_ENTRIES: usize = 512;
/// Most bytes of template text kept at once (the compiled form is a few
/// times larger).
const MAX_BYTES: usize = 8 << 20;

/// One compiled template version: an environment holding it under its name.
struct Entry {
    name: Arc<str>,
    text: Arc<str>,
    env: Environment<'static>,
}

#[derive(Default)]
struct Store {
    entries: HashMap<u64, Entry>,
    bytes: usize,
}

/// Compiled templates by name and text (see the module's documentation).
pub(super) struct CompiledTemplates {
    store: Mutex<Store>,
}

impl CompiledTemplates {
    /// The process's compiled templates.
    pub(super) fn global() -> &'static CompiledTemplates {
        static TEMPLATES: OnceLock<CompiledTemplates> = OnceLock::new();
        TEMPLATES.get_or_init(|| CompiledTemplates {
            store: Mutex::new(Store::default()),
        })
    }

    /// An environment of its own for one render of `text` named `name`,
    /// holding the compiled template under `name` (compiled now when this
    /// version was not seen before), without globals or loader yet.
    pub(super) fn environment(
        &self,
        name: &str,
        text: &str,
    ) -> Result<Environment<'static>, Error> {
        if !RenderCache::global().is_enabled() {
            return compile(name, text);
        }
        let key = hash_of(name, text);
        {
            let store = self.lock();
            if let Some(entry) = store.entries.get(&key) {
                if &*entry.name == name && &*entry.text == text {
                    return Ok(entry.env.clone());
                }
            }
        }
        let env = compile(name, text)?;
        let mut store = self.lock();
        if store.entries.len() >= MAX_ENTRIES || store.bytes + text.len() > MAX_BYTES {
            store.entries.clear();
            store.bytes = 0;
        }
        store.bytes += text.len();
        let old = store.entries.insert(
            key,
            Entry {
                name: Arc::from(name),
                text: Arc::from(text),
                env: env.clone(),
            },
        );
        if let Some(old) = old {
            store.bytes = store.bytes.saturating_sub(old.text.len());
        }
        Ok(env)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The base environment with `text` (pre-passed) compiled in as `name`.
fn compile(name: &str, text: &str) -> Result<Environment<'static>, Error> {
    let mut env = base().clone();
    env.add_template_owned(name.to_string(), prepass::prepare(text))?;
    Ok(env)
}

fn hash_of(name: &str, text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    name.hash(&mut h);
    text.hash(&mut h);
    h.finish()
}

/// Salt's Jinja environment without anything of a render: strict
/// undefined, no autoescape, Jinja2's `keep_trailing_newline=False`,
/// Python-style printing, Salt's filters and the functions the pre-pass
/// rewrites to. Built once.
fn base() -> &'static Environment<'static> {
    static BASE: OnceLock<Environment<'static>> = OnceLock::new();
    BASE.get_or_init(build_base)
}

fn build_base() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_debug(true);
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    let syntax = minijinja::syntax::SyntaxConfig::builder()
        .keep_trailing_newline(false)
        .build();
    if let Ok(syntax) = syntax {
        env.set_syntax(syntax);
    }
    env.set_path_join_callback(|name, parent| join_template_path(name, parent).into());
    env.set_formatter(format_value);
    env.set_unknown_method_callback(methods::unknown_method);
    filters::register(&mut env);
    env.add_function(prepass::DICT_FUNCTION, |v: MjValue| make_mutable(v));
    env.add_function(prepass::LIST_FUNCTION, |v: MjValue| make_mutable(v));
    env.add_filter(prepass::PERCENT_FILTER, percent_format);
    env.add_filter(
        prepass::REPEAT_FILTER,
        |text: String, times: MjValue| -> Result<String, Error> {
            let count = match times.kind() {
                ValueKind::Bool => usize::from(times.is_true()),
                _ => times
                    .as_i64()
                    .map_or(Err(()), |n| Ok(n.max(0) as usize))
                    .map_err(|_| {
                        Error::new(
                            ErrorKind::InvalidOperation,
                            "can't multiply sequence by non-int",
                        )
                    })?,
            };
            // A render is text for a config file; refuse what would exhaust memory.
            const LIMIT: usize = 64 * 1024 * 1024;
            if text.len().saturating_mul(count) > LIMIT {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "string repetition result is too large (over 64 MiB)",
                ));
            }
            Ok(text.repeat(count))
        },
    );
    env.add_function("dict", dict_function);
    // Jinja2's cycler(*items) and joiner(sep=', ').
    env.add_function("cycler", |items: Rest<MjValue>| {
        minijinja_contrib::globals::cycler(items.to_vec())
    });
    env.add_function("joiner", |sep: Option<MjValue>| {
        minijinja_contrib::globals::joiner(sep)
    });
    env.add_function("odict", dict_function);
    env.add_function(prepass::IMPORT_FUNCTION, import_function);
    env.add_function(prepass::PARSE_FUNCTION, parse_function);
    env.add_function("raise", |message: String| -> Result<MjValue, Error> {
        Err(Error::new(ErrorKind::InvalidOperation, message))
    });
    env
}
