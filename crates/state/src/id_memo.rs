//! The master's compile done once per *id form* (issue 25): a fleet whose
//! high data differs per minion only by the minion's id (paths and IDs
//! built from `grains['id']`) compiles that data once, with a placeholder
//! where the id was, and each minion gets the compiled chunks with its id
//! put back. This module is the one place of the trick
//! ([`IdFormMemo::compile`]); everything it cannot prove equal goes
//! through the full compile ([`crate::pipeline::compile_for_bundle`]).
//!
//! # The id form
//!
//! Let `I` be the minion's id and `P` the placeholder [`PLACEHOLDER`], a
//! private-use character. `unsubst(s)` replaces every occurrence of `I`
//! in `s`, left to right without overlaps, by `P`; `subst(t)` replaces
//! every `P` in `t` by `I`. The memo is keyed by the sha256 of a canonical
//! walk of `unsubst(H)` (every string and key of the high data `H`, fed to
//! the hash piece by piece, never built), of the disabled requisites and
//! of the state module table's names. An id form is compiled when a
//! second minion has it (the first compiles its own), so a fleet whose
//! high data differs by more than the id pays the key's walk alone.
//!
//! * **subst(unsubst(s)) = s** when `s` holds no `P` (checked for every
//!   string and key of `H`, and for `I`): the `P`s of `unsubst(s)` are
//!   exactly the occurrences it replaced, and `subst` puts `I` back there.
//! * **Equality is preserved both ways** between strings of `H`: `s1 = s2`
//!   gives `unsubst(s1) = unsubst(s2)` (a function), and the converse
//!   follows by applying `subst` to both sides. So `subst` is injective on
//!   the strings of `unsubst(H)` (on the image of `unsubst`, where
//!   `unsubst` is its left inverse). It is *not* injective on strings
//!   outside that image, which is what concatenation can build: with
//!   `I = "ab"`, the id form's `"a" + "b"` and `"P"` both give `"ab"`.
//!   The compile compares two concatenations only (below), and both are
//!   split back into their parts unambiguously, which reduces them to the
//!   parts' equality.
//! * `subst` is a homomorphism for concatenation (`P` is one character,
//!   so no `P` spans two pieces): every string the compile *builds* from
//!   the id form's strings (tags, lookup keys, copies) gives, with the id
//!   put back, the string the minion's own compile builds. So if every
//!   *decision* of the compile is the same on `unsubst(H)` as on `H`, the
//!   chunks of `H` are `subst` of the chunks of `unsubst(H)`.
//!
//! # Every comparison of the compile that is not equality of data
//!
//! High data to chunks (`prepare_high`: `extend`, `verify_high`,
//! `requisite_in` with `use`/`use_in`/`prereq_in`, `exclude`;
//! `compile_graph`: `names`, chunks, requisite resolution; `check_order`),
//! and what this module does about each ([`Refusal`] names the fall-back):
//!
//! 1. **Comparisons with the compiler's own constants**: state module and
//!    function names looked up in the table, argument keys against
//!    `names`/`name`/`order`/the requisite keywords, `__`-prefixed keys,
//!    `.` in a module key (split into module and function), `order`
//!    values against `first`/`last`, whitespace in a function name.
//!    `P != "require"` while `I` may be `require`, so `P` may appear only
//!    where no constant is compared: the state IDs (top-level keys and
//!    `extend`'s), and values that are names, arguments or requisite
//!    targets. The id in any other key, in a function name or in an
//!    `order` value falls back. The `__` prefix of an ID: an id starting
//!    with `_` falls back (`"_" + I` could start with `__`).
//! 2. **Globs** (`fnmatch`): requisite targets with a metacharacter
//!    (`*?[]`, by ID, name or `sls:`) and `exclude` patterns. The matched
//!    strings may hold the id (`web*` matches `web1` but not `P`): any
//!    requisite target or exclude entry with a metacharacter falls back,
//!    and so does an id holding one (it would make a target a glob).
//! 3. **Python `str()` of non-strings** compared with strings: a requisite
//!    `- 123`, a `name: 123` matched against the ID `"123"`. The id form
//!    has `P` where the minion has `"123"`, while `str(123)` has no `P`.
//!    An id made only of characters such scalars print (digits, `.+-`,
//!    the letters of `True`/`False`/`None`/`inf`/`nan`/exponents) falls
//!    back when the high data holds any number, boolean or null; and a
//!    `name`, a `names` item or a requisite target that is a list or a
//!    dict holding the id falls back (its `repr` escapes `P`).
//! 4. **Concatenations compared**: the graph's lookup keys
//!    `kind + "\x1f" + target` and the run tags
//!    `state + "_|-" + id + "_|-" + name + "_|-" + fun` (and the prereq
//!    twins, tag + `"_|-__prereq_test__"`). A string of `H` holding
//!    `"\x1f"` or `"_|-"` falls back; then no part holds its separator (a
//!    part is a string of `H`, or `str()` of a scalar, or a constant),
//!    `"_|-"` cannot straddle a part and a separator (its `|` is the
//!    separator's own), and `unsubst` cannot create a separator (the
//!    three characters of one are consecutive characters of the string it
//!    came from). Each key or tag splits back into its parts the same way
//!    in both forms: equal keys mean equal parts, which item (2) of the
//!    proof above preserves.
//! 5. **Errors** (`prepare_high`'s: `extend` of a missing ID, a
//!    malformed state, an `_in` to a missing target): their text names
//!    the strings, and the order in which they are found may follow
//!    names. **Any error in the id form's compile makes that id form
//!    fall back for every minion**: each minion's errors come from its
//!    own compile, so their text is its own; and a compile without errors
//!    in the id form has none in the minion's. The master does not order
//!    the chunks (issue 25, session 20: the minion orders what it is
//!    sent and finds the requisite errors itself, from the chunks with
//!    its id in them).
//! 6. **Hash maps**: the graph's indexes are insertion-ordered
//!    (`IndexMap`); the one scan over them (glob targets) falls back.
//! 7. **Where strings came from** ([`StringOrigins`]): a yamlex SLS marks
//!    strings by SLS name; any yamlex SLS in the compile falls back.
//!
//! Lengths and prefixes of data strings are read nowhere in the compile
//! except in error messages (which fall back) and the `__` prefix above.
//!
//! # Finding a kept form without the key
//!
//! The key's walk and sha256 of every minion's high data were a tenth of
//! the master's cold CPU (issue 25, session 22). A kept form also keeps
//! the high data it was compiled from, `G = unsubst(H0)`, and a minion's
//! high data `H` is first compared with those of the last [`CANDIDATES`]
//! forms whose first minion's render loaded the same texts up to the id
//! (the render's trace, a hint that spares a fleet of many forms the
//! comparisons that would fail), in [`Lockstep`]: a hit when `unsubst(H) = G` and `H` holds no
//! placeholder or separator, i.e. exactly when `H`'s key would be `G`'s
//! and the walk would pass `H` (its other rules read `G`, which passed
//! them, or the id alone: [`id_refusal`], [`Refusal::Printed`] when `G`
//! holds a scalar). Per string that is one `memcmp`: a string of `G`
//! without the placeholder is its own `unsubst` when the id is in none
//! of them (one search of the id in all of them joined, per minion), and
//! only the strings with the placeholder are put through `unsubst`. A
//! minion the comparison does not place goes to the key as before.
//!
//! # The chunks handed back
//!
//! A minion of a known id form gets [`IdChunks`]: the form's chunks and
//! its id, not a copy. The master writes them straight into the bundle's
//! msgpack ([`IdChunks::write_msgpack`], [`crate::id_bytes`]: the form
//! encoded once, each string holding [`PLACEHOLDER`] written again with
//! the id), so no `Value` tree is built per minion (session 19's copy
//! cost nearly what the compile did). What differs per minion besides its
//! chunks (the `salt://` manifest, the saltenvs) is read from the form's
//! strings put back one by one ([`IdChunks::put_back`]), as from the
//! minion's own chunks.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use halite_salt_rules::fnmatch::is_pattern;
use memchr::memmem::Finder;
use serde_json::Number;
use sha2::{Digest, Sha256};

use crate::id_bytes::IdBytes;
use crate::module::StateModules;
use crate::origins::StringOrigins;
use crate::pipeline::{compile_for_bundle, BundleChunks};
use crate::requisite::{REQUISITE_IN_KEYWORDS, REQUISITE_KEYWORDS};
use crate::value::{Map, Value};

/// The placeholder put where the id was: a private-use character (checked
/// absent from the id and the high data).
pub const PLACEHOLDER: char = '\u{E000}';

/// How many id forms are kept (a tree or two being applied at once, each
/// with a few variants by grains or pillar); the oldest goes first.
const KEPT: usize = 16;

/// How many keys seen once are remembered (32 bytes each).
const SEEN: usize = 256;

/// Why a minion's compile did not use the id form (the `master.stats`
/// reasons: every one is the full compile, never a wrong bundle).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refusal {
    /// The id is empty, starts with `_`, holds a glob metacharacter, the
    /// placeholder, `"\x1f"` or `"_|-"`.
    Id,
    /// The placeholder, `"\x1f"` or `"_|-"` in a string of the high data.
    Separator,
    /// The id in a map key other than a state ID, in a function name or
    /// an `order` value (compared with the compiler's constants).
    Constant,
    /// A requisite target or `exclude` entry that is a glob.
    Glob,
    /// A number, boolean or null in the high data that could print as the
    /// id, or a list or dict holding the id where `str()` is taken of it.
    Printed,
    /// A yamlex SLS in the compile.
    Yamlex,
    /// The id form's compile had errors: every minion's are its own.
    Errors,
}

impl Refusal {
    /// The name `master.stats` shows.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::Id => "id",
            Refusal::Separator => "separator",
            Refusal::Constant => "constant",
            Refusal::Glob => "glob",
            Refusal::Printed => "printed",
            Refusal::Yamlex => "yamlex",
            Refusal::Errors => "errors",
        }
    }
}

/// What one id form compiled to.
enum Entry {
    /// The chunks, with [`PLACEHOLDER`] where the id goes.
    Chunks(Arc<Form>),
    /// The compile had errors: minions of this id form compile their own.
    Refused,
}

/// The compile of one id form: its chunks and marks with
/// [`PLACEHOLDER`] where the id goes, and their encoding.
#[derive(Debug)]
struct Form {
    chunks: Vec<Value>,
    marks: Vec<(u32, u8)>,
    bytes: IdBytes,
}

/// What [`IdFormMemo::compile`] gives for one minion.
#[derive(Debug)]
pub enum Compiled {
    /// The minion's own full compile (the memo refused, or had not seen
    /// the id form before).
    Full(BundleChunks),
    /// The id form's chunks with the minion's id to put back.
    Form(IdChunks),
}

/// One minion's chunks as its id form's and its id: what
/// [`compile_for_bundle`] gives for the minion, put back on demand
/// ([`IdChunks::values`]) or written straight into the bundle's msgpack
/// ([`IdChunks::write_msgpack`]). Why it exists: the copy per minion cost
/// nearly what the compile did (issue 25, session 19); the bytes do not.
#[derive(Debug, Clone)]
pub struct IdChunks {
    form: Arc<Form>,
    id: String,
}

impl IdChunks {
    /// The id form's chunks, [`PLACEHOLDER`] where the id goes: read
    /// their strings through [`IdChunks::put_back`].
    pub fn form_chunks(&self) -> &[Value] {
        &self.form.chunks
    }

    /// The yamlex marks (the same for every minion of the form).
    pub fn marks(&self) -> &[(u32, u8)] {
        &self.form.marks
    }

    /// The minion's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// A string of [`IdChunks::form_chunks`] as the minion's chunks hold it.
    pub fn put_back<'s>(&self, s: &'s str) -> std::borrow::Cow<'s, str> {
        match s.contains(PLACEHOLDER) {
            true => std::borrow::Cow::Owned(s.replace(PLACEHOLDER, &self.id)),
            false => std::borrow::Cow::Borrowed(s),
        }
    }

    /// [`IdChunks::put_back`] of `s` when it starts with `prefix`, `None`
    /// (and nothing built) when it does not.
    pub fn put_back_if_prefixed<'s>(
        &self,
        s: &'s str,
        prefix: &str,
    ) -> Option<std::borrow::Cow<'s, str>> {
        let mut rest = prefix.as_bytes();
        for (i, piece) in s.split(PLACEHOLDER).enumerate() {
            if rest.is_empty() {
                break;
            }
            let id: &[u8] = if i > 0 { self.id.as_bytes() } else { b"" };
            for part in [id, piece.as_bytes()] {
                let n = rest.len().min(part.len());
                if part[..n] != rest[..n] {
                    return None;
                }
                rest = &rest[n..];
            }
        }
        rest.is_empty().then(|| self.put_back(s))
    }

    /// The minion's chunks as `Value`s (one copy).
    pub fn values(&self) -> Vec<Value> {
        let text = IdText::new(&self.id);
        self.form
            .chunks
            .iter()
            .map(|c| text.map(c, Direction::In))
            .collect()
    }

    /// Appends the minion's chunks as the msgpack list `rmp-serde` writes
    /// for [`IdChunks::values`].
    pub fn write_msgpack(&self, out: &mut Vec<u8>) {
        self.form.bytes.write(&self.id, out);
    }

    /// The same form's chunks for minion `id` (a new handle, no copy):
    /// for a caller that has shown by other means that `id`'s high data
    /// has this form (issue 25, session 24: the render's forms).
    pub fn with_id(&self, id: &str) -> IdChunks {
        IdChunks {
            form: self.form.clone(),
            id: id.to_string(),
        }
    }

    /// The size of the encoded chunks, about (a capacity hint).
    pub fn encoded_len(&self) -> usize {
        self.form.bytes.len()
    }
}

/// Compiled chunks kept per id form of the high data, for the master's
/// compiler (one per [`StateModules`] table: its names are in the key
/// all the same). Why it exists: the master's cold compile per minion is
/// the same work for every minion of a fleet whose high data differs only
/// by the id (issue 25).
#[derive(Default)]
pub struct IdFormMemo {
    entries: Mutex<VecDeque<([u8; 32], Arc<Entry>)>>,
    /// Keys seen once: an id form is compiled from its second minion on,
    /// so a fleet whose high data differs by more than the id pays the
    /// key alone, not a compile of the id form and two copies.
    seen: Mutex<VecDeque<[u8; 32]>>,
    /// The high data of the last [`CANDIDATES`] forms compiled, for
    /// finding a minion's form by comparison (a copy each: not kept for
    /// all [`KEPT`] forms).
    highs: Mutex<VecDeque<Candidate>>,
    hits: AtomicU64,
    compiled: AtomicU64,
    first_seen: AtomicU64,
    compared: AtomicU64,
    through_render: AtomicU64,
    refused: Mutex<BTreeMap<Refusal, u64>>,
    /// Every minion's form found by its key alone (the walk and sha256),
    /// never by comparison with a kept form ([`IdFormMemo::keyed_only`]).
    keyed_only: bool,
}

/// The memo's counters (`master.stats`' `id_form`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdFormStats {
    /// Minions given the chunks of an id form compiled before.
    pub hits: u64,
    /// Id forms compiled (the minion that asked gets its chunks too).
    pub compiled: u64,
    /// Minions compiled in full because their id form was new (it is
    /// compiled when a second minion has it).
    pub first_seen: u64,
    /// Minions compiled in full, by reason.
    pub refused: BTreeMap<&'static str, u64>,
    /// Of the hits, those found by comparing the minion's high data with
    /// a kept form's ([`Lockstep`]), without the key's walk and hash.
    pub compared: u64,
    /// Of the hits, those given by the render's forms (issue 25, session
    /// 24: the minion's high data never built).
    pub through_render: u64,
}

impl IdFormMemo {
    /// An empty memo.
    pub fn new() -> Self {
        Self::default()
    }

    /// The counters so far.
    pub fn stats(&self) -> IdFormStats {
        let refused = self
            .refused
            .lock()
            .map(|r| r.iter().map(|(k, v)| (k.name(), *v)).collect())
            .unwrap_or_default();
        IdFormStats {
            hits: self.hits.load(Ordering::Relaxed),
            compiled: self.compiled.load(Ordering::Relaxed),
            first_seen: self.first_seen.load(Ordering::Relaxed),
            refused,
            compared: self.compared.load(Ordering::Relaxed),
            through_render: self.through_render.load(Ordering::Relaxed),
        }
    }

    /// This memo finding every minion's form by its key alone, as before
    /// issue 25's session 23 (for comparing the two in a profile).
    pub fn keyed_only(mut self) -> Self {
        self.keyed_only = true;
        self
    }

    /// The kept form whose high data is minion `id`'s with the id taken
    /// out, found by comparison ([`Lockstep`]; the caller checks that no
    /// yamlex SLS is in it); `None` sends the minion to the key
    /// ([`IdFormMemo::key`]), which decides as before.
    fn compared(
        &self,
        id: &str,
        high: &Map,
        modules: &StateModules,
        disabled: &[String],
        trace: Option<u64>,
    ) -> Option<Arc<Form>> {
        if id_refusal(id).is_some() {
            return None;
        }
        let candidates: Vec<Candidate> = self
            .highs
            .lock()
            .ok()?
            .iter()
            .rev()
            .filter(|(.., kept)| trace.is_none() || *kept == trace)
            .cloned()
            .collect();
        let id_text = IdText::new(id);
        let scalar_like = is_scalar_like(id);
        let mut names = None;
        let (form, ..) = candidates.into_iter().find(|(_, kept, _)| {
            if kept.disabled != disabled
                || (scalar_like && kept.has_scalar)
                || id_text.contains(&kept.plain)
            {
                return false;
            }
            let names = names.get_or_insert_with(|| modules.names().collect::<Vec<_>>());
            if kept.modules != *names {
                return false;
            }
            Lockstep {
                id: &id_text,
                marked: &kept.marked,
                next: 0,
                ordinal: 0,
            }
            .map(high, &kept.high)
        })?;
        Some(form)
    }

    /// [`compile_for_bundle`] of minion `id`'s high data: the same
    /// result, from the id form's compile when the module doc's conditions
    /// hold, else from the full compile. `trace`: the render's trace of
    /// the texts the high data was loaded from
    /// (`halite_render::cache::end_trace`): only the kept forms whose first
    /// minion's trace was the same are compared with it (a hint: the
    /// comparison decides), so a fleet of many forms does not pay
    /// comparisons that fail; `None`: every kept form.
    ///
    /// The high data comes back beside the result when the minion got
    /// an id form's chunks, for a caller that learns from it what the
    /// form's high data is (issue 25, session 24); else it was consumed.
    pub fn compile(
        &self,
        id: &str,
        high: Map,
        origins: StringOrigins,
        modules: &StateModules,
        disabled: &[String],
        trace: Option<u64>,
    ) -> (Result<Compiled, Vec<String>>, Option<Map>) {
        let comparable = origins.is_empty() && !self.keyed_only;
        if let Some(form) = comparable
            .then(|| self.compared(id, &high, modules, disabled, trace))
            .flatten()
        {
            self.hits.fetch_add(1, Ordering::Relaxed);
            self.compared.fetch_add(1, Ordering::Relaxed);
            let chunks = IdChunks {
                form,
                id: id.to_string(),
            };
            return (Ok(Compiled::Form(chunks)), Some(high));
        }
        let key = match self.key(id, &high, &origins, modules, disabled) {
            Ok(key) => key,
            Err(why) => return (self.refuse(why, high, origins, modules, disabled), None),
        };
        let kept = self.entries.lock().ok().and_then(|entries| {
            entries
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, e)| e.clone())
        });
        let entry = match kept {
            Some(entry) => {
                if matches!(*entry, Entry::Chunks(_)) {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                }
                entry
            }
            None if !self.seen_before(key) => {
                self.first_seen.fetch_add(1, Ordering::Relaxed);
                let full = compile_for_bundle(high, origins, modules, disabled);
                return (full.map(Compiled::Full), None);
            }
            None => {
                self.compiled.fetch_add(1, Ordering::Relaxed);
                let form = IdText::new(id).map_map(&high, Direction::Out);
                // Kept for the next minions' comparison (one copy per
                // form compiled, not per minion).
                let high_form = (!self.keyed_only).then(|| form.clone());
                let entry = Arc::new(
                    match compile_for_bundle(form, origins.clone(), modules, disabled) {
                        Ok((chunks, marks)) => Entry::Chunks(Arc::new(Form {
                            bytes: IdBytes::new(&chunks, PLACEHOLDER),
                            chunks,
                            marks,
                        })),
                        Err(_) => Entry::Refused,
                    },
                );
                if let Ok(mut entries) = self.entries.lock() {
                    if entries.len() == KEPT {
                        entries.pop_front();
                    }
                    entries.push_back((key, entry.clone()));
                }
                if let (Entry::Chunks(form), Some(high)) = (&*entry, high_form) {
                    if let Ok(mut highs) = self.highs.lock() {
                        if highs.len() == CANDIDATES {
                            highs.pop_front();
                        }
                        let high = Arc::new(FormHigh::new(high, modules, disabled));
                        highs.push_back((form.clone(), high, trace));
                    }
                }
                entry
            }
        };
        match &*entry {
            Entry::Chunks(form) => {
                let chunks = IdChunks {
                    form: form.clone(),
                    id: id.to_string(),
                };
                (Ok(Compiled::Form(chunks)), Some(high))
            }
            Entry::Refused => {
                let full = self.refuse(Refusal::Errors, high, origins, modules, disabled);
                (full, None)
            }
        }
    }

    /// Counts a minion given a form's chunks by a caller that proved it
    /// by other means ([`IdChunks::with_id`]): a hit, and one of
    /// [`IdFormStats::through_render`].
    pub fn count_through_render(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
        self.through_render.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether `key` was seen before (noting it if not).
    fn seen_before(&self, key: [u8; 32]) -> bool {
        let Ok(mut seen) = self.seen.lock() else {
            return false;
        };
        if seen.contains(&key) {
            return true;
        }
        if seen.len() == SEEN {
            seen.pop_front();
        }
        seen.push_back(key);
        false
    }

    /// The full compile, counted under `why`.
    fn refuse(
        &self,
        why: Refusal,
        high: Map,
        origins: StringOrigins,
        modules: &StateModules,
        disabled: &[String],
    ) -> Result<Compiled, Vec<String>> {
        if let Ok(mut refused) = self.refused.lock() {
            *refused.entry(why).or_default() += 1;
        }
        compile_for_bundle(high, origins, modules, disabled).map(Compiled::Full)
    }

    /// The id form's key, or why this minion compiles in full.
    fn key(
        &self,
        id: &str,
        high: &Map,
        origins: &StringOrigins,
        modules: &StateModules,
        disabled: &[String],
    ) -> Result<[u8; 32], Refusal> {
        if !origins.is_empty() {
            return Err(Refusal::Yamlex);
        }
        if let Some(why) = id_refusal(id) {
            return Err(why);
        }
        let mut walk = Walk {
            id: IdText::new(id),
            scalar_like: is_scalar_like(id),
            hash: Sha256::new(),
        };
        walk.tag(b'H');
        walk.len(high.len());
        for (key, body) in high {
            walk.text(key)?;
            match key.as_str() {
                "__extend__" => walk.extend(body)?,
                "__exclude__" => walk.value(body, Role::Target).map(drop)?,
                k if k.starts_with("__") => walk.value(body, Role::Opaque).map(drop)?,
                _ => walk.body(body)?,
            }
        }
        walk.tag(b'D');
        for d in disabled {
            walk.hash.update(d.as_bytes());
            walk.tag(0xff);
        }
        walk.tag(b'M');
        for name in modules.names() {
            walk.hash.update(name.as_bytes());
            walk.tag(0xff);
        }
        Ok(walk.hash.finalize().into())
    }
}

/// Characters Python's `str()` of a number, boolean or null can print.
const SCALAR_CHARS: &str = "0123456789.+-eEinfaINFTrueFalsNone";

/// How many kept forms a minion's high data is compared with before its
/// key is computed (a tree applied with a few variants by grains or
/// pillar; a comparison with another form stops at its first difference).
const CANDIDATES: usize = 4;

/// A kept form for the comparison: its compile, its high data, and the
/// render's trace of its first minion ([`IdFormMemo::compile`]).
type Candidate = (Arc<Form>, Arc<FormHigh>, Option<u64>);

/// Whether the rules the key's walk reads from the id alone pass for
/// `id` ([`Refusal::Id`], and [`Refusal::Printed`] for a form whose high
/// data holds a number, boolean or null: `has_scalar`).
pub fn id_admissible(id: &str, has_scalar: bool) -> bool {
    id_refusal(id).is_none() && !(has_scalar && is_scalar_like(id))
}

/// [`Refusal::Id`] when `id` itself rules the id form out.
fn id_refusal(id: &str) -> Option<Refusal> {
    (id.is_empty()
        || id.starts_with('_')
        || is_pattern(id)
        || id.contains([PLACEHOLDER, '\x1f'])
        || id.contains("_|-"))
    .then_some(Refusal::Id)
}

/// Whether `str()` of a number, boolean or null could print `id`.
fn is_scalar_like(id: &str) -> bool {
    id.chars().all(|c| SCALAR_CHARS.contains(c))
}

/// What a kept form needs to be found by comparison: its high data (the
/// `unsubst` of the minion's it was compiled from, which passed the key's
/// walk), and what the walk decided from the minion's id rather than from
/// the form. Why it exists: the key's walk and sha256 of every minion's
/// high data were a tenth of the master's cold CPU (issue 25, session 22);
/// comparing with a kept form is a `memcmp` per string.
#[derive(Debug)]
struct FormHigh {
    high: Map,
    /// Every string and key of `high` without [`PLACEHOLDER`], joined by
    /// it: a minion whose id occurs in none of them has, in its own high
    /// data, the id exactly where `high` has the placeholder.
    plain: String,
    /// The ordinals, in [`Lockstep`]'s order, of the strings and keys of
    /// `high` that hold [`PLACEHOLDER`].
    marked: Vec<u32>,
    /// Whether `high` holds a number, boolean or null
    /// ([`Refusal::Printed`] for an id such a scalar could print).
    has_scalar: bool,
    /// The key's other inputs.
    disabled: Vec<String>,
    modules: Vec<&'static str>,
}

impl FormHigh {
    fn new(high: Map, modules: &StateModules, disabled: &[String]) -> Self {
        let mut kept = FormHigh {
            high: Map::new(),
            plain: String::new(),
            marked: Vec::new(),
            has_scalar: false,
            disabled: disabled.to_vec(),
            modules: modules.names().collect(),
        };
        let mut ordinal = 0;
        for (k, v) in &high {
            kept.note_string(k, &mut ordinal);
            kept.note(v, &mut ordinal);
        }
        kept.high = high;
        kept
    }

    fn note_string(&mut self, s: &str, ordinal: &mut u32) {
        if s.contains(PLACEHOLDER) {
            self.marked.push(*ordinal);
        } else {
            self.plain.push_str(s);
            self.plain.push(PLACEHOLDER);
        }
        *ordinal += 1;
    }

    fn note(&mut self, v: &Value, ordinal: &mut u32) {
        match v {
            Value::String(s) => self.note_string(s, ordinal),
            Value::Array(items) => items.iter().for_each(|i| self.note(i, ordinal)),
            Value::Object(m) => {
                for (k, v) in m {
                    self.note_string(k, ordinal);
                    self.note(v, ordinal);
                }
            }
            Value::Number(_) | Value::Bool(_) | Value::Null => self.has_scalar = true,
        }
    }
}

/// The comparison of a minion's high data `H` with a kept form's `G`:
/// true when `unsubst(H) = G` (the same shape, numbers, booleans, nulls,
/// and every string of `H` put to `G`'s by `unsubst`) and no string of
/// `H` holds the placeholder or a separator, which is what the key's walk
/// checks of `H` and hashes; the walk's other rules read `G` alone (where
/// the placeholder is) or the id ([`id_refusal`], [`Refusal::Printed`]).
///
/// A string of `G` without the placeholder, when the id is in none of
/// them ([`FormHigh::plain`], one search per minion), is `unsubst` of
/// itself alone, and free of separators (it is its first minion's string,
/// which the walk checked): `H`'s must equal it. A string with the
/// placeholder is checked in full.
struct Lockstep<'a> {
    id: &'a IdText<'a>,
    marked: &'a [u32],
    next: usize,
    ordinal: u32,
}

impl Lockstep<'_> {
    fn string(&mut self, h: &str, g: &str) -> bool {
        let ordinal = self.ordinal;
        self.ordinal += 1;
        if self.marked.get(self.next) != Some(&ordinal) {
            return h == g;
        }
        self.next += 1;
        let separator = memchr::memchr3(b'|', 0x1f, 0xee, h.as_bytes()).is_some()
            && (h.contains([PLACEHOLDER, '\x1f']) || h.contains("_|-"));
        !separator && self.id.string(h, Direction::Out) == g
    }

    fn value(&mut self, h: &Value, g: &Value) -> bool {
        match (h, g) {
            (Value::String(h), Value::String(g)) => self.string(h, g),
            (Value::Number(h), Value::Number(g)) => same_number(h, g),
            (Value::Bool(h), Value::Bool(g)) => h == g,
            (Value::Null, Value::Null) => true,
            (Value::Array(h), Value::Array(g)) => {
                h.len() == g.len() && h.iter().zip(g).all(|(h, g)| self.value(h, g))
            }
            (Value::Object(h), Value::Object(g)) => self.map(h, g),
            _ => false,
        }
    }

    fn map(&mut self, h: &Map, g: &Map) -> bool {
        h.len() == g.len()
            && h.iter()
                .zip(g)
                .all(|((hk, hv), (gk, gv))| self.string(hk, gk) && self.value(hv, gv))
    }
}

/// Whether the key's walk hashes `a` and `b` alike ([`Walk::number`]).
fn same_number(a: &Number, b: &Number) -> bool {
    match (a.as_u64(), b.as_u64(), a.as_i64(), b.as_i64()) {
        (Some(a), Some(b), _, _) => a == b,
        (None, None, Some(a), Some(b)) => a == b,
        (None, None, None, None) => {
            a.as_f64().unwrap_or_default().to_bits() == b.as_f64().unwrap_or_default().to_bits()
        }
        _ => false,
    }
}

/// Which way [`IdText::map`] goes.
#[derive(Clone, Copy)]
enum Direction {
    /// `unsubst`: the id out, the placeholder in.
    Out,
    /// `subst`: the placeholder out, the id in.
    In,
}

/// The id and its searcher.
struct IdText<'a> {
    id: &'a str,
    finder: Finder<'a>,
}

impl<'a> IdText<'a> {
    fn new(id: &'a str) -> Self {
        Self {
            id,
            finder: Finder::new(id.as_bytes()),
        }
    }

    fn contains(&self, s: &str) -> bool {
        self.finder.find(s.as_bytes()).is_some()
    }

    /// `unsubst` or `subst` of one string.
    fn string(&self, s: &str, way: Direction) -> String {
        match way {
            Direction::Out if self.contains(s) => {
                let mut placeholder = [0; 4];
                s.replace(self.id, PLACEHOLDER.encode_utf8(&mut placeholder))
            }
            Direction::In if s.contains(PLACEHOLDER) => s.replace(PLACEHOLDER, self.id),
            _ => s.to_string(),
        }
    }

    /// `unsubst` or `subst` of a value (keys too): one copy.
    fn map(&self, v: &Value, way: Direction) -> Value {
        match v {
            Value::String(s) => Value::String(self.string(s, way)),
            Value::Array(items) => Value::Array(items.iter().map(|i| self.map(i, way)).collect()),
            Value::Object(m) => Value::Object(self.map_map(m, way)),
            other => other.clone(),
        }
    }

    fn map_map(&self, m: &Map, way: Direction) -> Map {
        let mut out = Map::with_capacity(m.len());
        for (k, v) in m {
            out.insert(self.string(k, way), self.map(v, way));
        }
        out
    }
}

/// What a value is to the compile, for the rules of the module doc.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Carried, compared for equality at most: the id may be in its
    /// strings, not in its keys.
    Opaque,
    /// A requisite target or an `exclude` entry: no glob, and no list or
    /// dict holding the id.
    Target,
    /// `name` or an item of `names`: no list or dict holding the id.
    Name,
    /// Compared with the compiler's constants: no id at all.
    Constant,
}

/// The canonical walk of the id form, hashed, with the rules checked.
struct Walk<'a> {
    id: IdText<'a>,
    /// Whether the id could be printed by `str()` of a scalar.
    scalar_like: bool,
    hash: Sha256,
}

impl Walk<'_> {
    fn tag(&mut self, t: u8) {
        self.hash.update([t]);
    }

    fn len(&mut self, n: usize) {
        self.hash.update((n as u64).to_le_bytes());
    }

    /// A string of the id form, fed piece by piece and ended by `0xff`
    /// (never a byte of UTF-8); `Err` for the separators and placeholder.
    fn text(&mut self, s: &str) -> Result<bool, Refusal> {
        let bytes = s.as_bytes();
        if memchr::memchr3(b'|', 0x1f, 0xee, bytes).is_some()
            && (s.contains([PLACEHOLDER, '\x1f']) || s.contains("_|-"))
        {
            return Err(Refusal::Separator);
        }
        let mut placeholder = [0; 4];
        let placeholder = PLACEHOLDER.encode_utf8(&mut placeholder).as_bytes();
        let mut at = 0;
        let mut found = false;
        while let Some(i) = self.id.finder.find(&bytes[at..]) {
            found = true;
            self.hash.update(&bytes[at..at + i]);
            self.hash.update(placeholder);
            at += i + self.id.id.len();
        }
        self.hash.update(&bytes[at..]);
        self.tag(0xff);
        Ok(found)
    }

    /// A key other than a state ID: the id in it falls back.
    fn key(&mut self, k: &str) -> Result<(), Refusal> {
        match self.text(k)? {
            true => Err(Refusal::Constant),
            false => Ok(()),
        }
    }

    fn number(&mut self, n: &Number) {
        if let Some(u) = n.as_u64() {
            self.tag(b'u');
            self.hash.update(u.to_le_bytes());
        } else if let Some(i) = n.as_i64() {
            self.tag(b'i');
            self.hash.update(i.to_le_bytes());
        } else {
            self.tag(b'f');
            self.hash
                .update(n.as_f64().unwrap_or_default().to_bits().to_le_bytes());
        }
    }

    /// Any value in `role`; `Ok(true)` when the id is in it.
    fn value(&mut self, v: &Value, role: Role) -> Result<bool, Refusal> {
        match v {
            Value::String(s) => {
                self.tag(b's');
                let found = self.text(s)?;
                if found && role == Role::Constant {
                    return Err(Refusal::Constant);
                }
                if role == Role::Target && is_pattern(s) {
                    return Err(Refusal::Glob);
                }
                Ok(found)
            }
            Value::Number(n) => {
                self.scalar()?;
                self.number(n);
                Ok(false)
            }
            Value::Bool(b) => {
                self.scalar()?;
                self.tag(if *b { b't' } else { b'F' });
                Ok(false)
            }
            Value::Null => {
                self.scalar()?;
                self.tag(b'n');
                Ok(false)
            }
            Value::Array(items) => {
                self.tag(b'a');
                self.len(items.len());
                let mut found = false;
                for item in items {
                    found |= self.value(item, role)?;
                }
                self.composite(found, role)
            }
            Value::Object(m) => {
                self.tag(b'o');
                self.len(m.len());
                let mut found = false;
                for (k, item) in m {
                    self.key(k)?;
                    found |= self.value(item, role)?;
                }
                self.composite(found, role)
            }
        }
    }

    fn scalar(&mut self) -> Result<(), Refusal> {
        match self.scalar_like {
            true => Err(Refusal::Printed),
            false => Ok(()),
        }
    }

    fn composite(&mut self, found: bool, role: Role) -> Result<bool, Refusal> {
        match (found, role) {
            (true, Role::Target | Role::Name) => Err(Refusal::Printed),
            _ => Ok(found),
        }
    }

    /// `__extend__`: a list of `{ID: body}`; the IDs may hold the id.
    fn extend(&mut self, v: &Value) -> Result<(), Refusal> {
        let Value::Array(items) = v else {
            self.value(v, Role::Opaque)?;
            return Ok(());
        };
        self.tag(b'E');
        self.len(items.len());
        for item in items {
            let Value::Object(m) = item else {
                self.value(item, Role::Opaque)?;
                continue;
            };
            self.tag(b'o');
            self.len(m.len());
            for (state_id, body) in m {
                self.text(state_id)?;
                self.body(body)?;
            }
        }
        Ok(())
    }

    /// A state ID's body: `{module: [function, {arg: value}...]}` and its
    /// `__sls__`-like stamps.
    fn body(&mut self, body: &Value) -> Result<(), Refusal> {
        let Value::Object(b) = body else {
            self.value(body, Role::Opaque)?;
            return Ok(());
        };
        self.tag(b'B');
        self.len(b.len());
        for (module, run) in b {
            self.key(module)?;
            if module.starts_with("__") {
                self.value(run, Role::Opaque)?;
                continue;
            }
            let Value::Array(run) = run else {
                self.value(run, Role::Constant)?;
                continue;
            };
            self.tag(b'r');
            self.len(run.len());
            for arg in run {
                let Value::Object(arg) = arg else {
                    // A function name.
                    self.value(arg, Role::Constant)?;
                    continue;
                };
                self.tag(b'o');
                self.len(arg.len());
                for (k, v) in arg {
                    self.key(k)?;
                    match k.as_str() {
                        "order" => self.value(v, Role::Constant)?,
                        "name" => self.value(v, Role::Name)?,
                        "names" => self.names(v)?,
                        k if REQUISITE_KEYWORDS.contains(&k)
                            || REQUISITE_IN_KEYWORDS.contains(&k)
                            || k == "use"
                            || k == "use_in" =>
                        {
                            self.requisites(v)?
                        }
                        _ => self.value(v, Role::Opaque)?,
                    };
                }
            }
        }
        Ok(())
    }

    /// A requisite's value: a list of targets (`- id` or `- module:
    /// target`), or the `_in` form's one `{module: target}`.
    fn requisites(&mut self, v: &Value) -> Result<bool, Refusal> {
        let one = |walk: &mut Self, item: &Value| -> Result<(), Refusal> {
            match item {
                Value::Object(m) => {
                    walk.tag(b'o');
                    walk.len(m.len());
                    for (k, target) in m {
                        walk.key(k)?;
                        walk.value(target, Role::Target)?;
                    }
                }
                other => {
                    walk.value(other, Role::Target)?;
                }
            }
            Ok(())
        };
        match v {
            Value::Array(items) => {
                self.tag(b'R');
                self.len(items.len());
                for item in items {
                    one(self, item)?;
                }
            }
            other => one(self, other)?,
        }
        Ok(false)
    }

    /// `names`: a list of names, or of `{name: [args]}` (whose keys may
    /// not hold the id, as any other key).
    fn names(&mut self, v: &Value) -> Result<bool, Refusal> {
        let Value::Array(items) = v else {
            return self.value(v, Role::Name);
        };
        self.tag(b'N');
        self.len(items.len());
        for item in items {
            match item {
                Value::Object(m) => {
                    self.tag(b'o');
                    self.len(m.len());
                    for (name, args) in m {
                        self.key(name)?;
                        self.value(args, Role::Opaque)?;
                    }
                }
                other => {
                    self.value(other, Role::Name)?;
                }
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_recognised_after_the_id_is_put_back() {
        let chunks = |id: &str| IdChunks {
            form: Arc::new(Form {
                chunks: Vec::new(),
                marks: Vec::new(),
                bytes: IdBytes::new(&[], PLACEHOLDER),
            }),
            id: id.to_string(),
        };
        let p = PLACEHOLDER;
        let url = |id: &str, s: &str| {
            chunks(id)
                .put_back_if_prefixed(s, "salt://")
                .map(|c| c.into_owned())
        };
        // The id makes the prefix, or part of it, or sits after it.
        assert_eq!(
            url("salt", &format!("{p}://f")).as_deref(),
            Some("salt://f")
        );
        assert_eq!(
            url("sa", &format!("{p}lt://{p}")).as_deref(),
            Some("salt://sa")
        );
        assert_eq!(
            url("web1", &format!("salt://f/{p}")).as_deref(),
            Some("salt://f/web1")
        );
        assert_eq!(url("s", &format!("{p}{p}")), None);
        assert_eq!(url("salt://", &p.to_string()).as_deref(), Some("salt://"));
        assert_eq!(url("web1", &format!("/srv/{p}")), None);
        assert_eq!(url("web1", "salt:/"), None);
    }

    #[test]
    fn subst_of_unsubst_is_the_string_and_the_key_ignores_only_the_id() {
        let text = IdText::new("aa");
        for s in ["aaa", "aaaa", "xaay", "", "a", "ba_aab"] {
            let out = text.string(s, Direction::Out);
            assert_eq!(text.string(&out, Direction::In), s);
        }
        assert_eq!(
            text.string("aaa", Direction::Out),
            format!("{PLACEHOLDER}a")
        );
        let memo = IdFormMemo::new();
        let modules = StateModules::new();
        let key = |id: &str, high: serde_json::Value| {
            let serde_json::Value::Object(high) = high else {
                unreachable!()
            };
            memo.key(id, &high, &StringOrigins::new(), &modules, &[])
        };
        let web1 = key(
            "web1",
            serde_json::json!({"web1_x": {"test": ["nop", {"name": "/srv/web1"}]}}),
        );
        let web2 = key(
            "web2",
            serde_json::json!({"web2_x": {"test": ["nop", {"name": "/srv/web2"}]}}),
        );
        let other = key(
            "web2",
            serde_json::json!({"web2_x": {"test": ["nop", {"name": "/srv/web1"}]}}),
        );
        assert!(web1.is_ok());
        assert_eq!(web1, web2);
        assert_ne!(web1, other);
        // The id where a constant is compared, a glob target, a number
        // that prints as the id: the full compile.
        assert_eq!(
            key("nop", serde_json::json!({"x": {"test": ["nop"]}})),
            Err(Refusal::Constant)
        );
        assert_eq!(
            key(
                "web1",
                serde_json::json!({"x": {"test": ["nop", {"require": [{"test": "w*"}]}]}})
            ),
            Err(Refusal::Glob)
        );
        assert_eq!(
            key(
                "12",
                serde_json::json!({"x": {"test": ["nop", {"order": 12}]}})
            ),
            Err(Refusal::Printed)
        );
    }
}
