//! What every render of one compile read, for the master's compile record
//! (issue 25: a warm run skips the compile when nothing it read changed).
//!
//! A master compiling a minion's highstate runs [`watch`] around it; every
//! SLS render on that thread reports here what it read, whether it ran
//! (its [`crate::memo::ReadLog`]) or was answered by the render memo (the
//! reads stored with the data it reused). Only what the master cannot
//! compare by itself is kept:
//!
//! - the `opts` keys read, with their values (the master compares them
//!   with the next job's options: `opts['jid']` differs every job);
//! - whether the compile is *skippable* at all: it is not when a render
//!   called a `salt[...]` function that is not a pure lookup of the
//!   context (`cmd.run`, `mine.get`, anything answered by the minion or
//!   the master's stores, whose answer can change at any time), read the
//!   minion's own options (`config.get` on a master asks the minion),
//!   read the whole of `opts`, ran an external renderer (`py`, `gpg`,
//!   `_renderers`), failed, or rendered without read tracking (the render
//!   cache switched off, a text template).
//!
//! Grains, pillar and the files a render read (the SLS, its imports and
//! includes) are not kept here: the master compares digests of the whole
//! grains and pillar and a stamp of the whole state tree instead.

use std::cell::RefCell;

use crate::memo::{Read, ReadLog, Root};
use crate::{RenderContext, Value};

/// What the renders of one compile read that the master must check again
/// before it reuses the compile's result (see the module's documentation).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CompileReads {
    /// The `opts` keys read and the value each had (`None`: absent).
    pub opts: Vec<(String, Option<Value>)>,
    /// Why the compile cannot be reused (`None`: it can, given the
    /// same `opts` values, grains, pillar, tree and job).
    pub not_skippable: Option<&'static str>,
}

impl CompileReads {
    /// Whether the compile can be reused when its inputs are unchanged.
    pub fn skippable(&self) -> bool {
        self.not_skippable.is_none()
    }

    fn refuse(&mut self, why: &'static str) {
        self.not_skippable.get_or_insert(why);
    }

    fn opt(&mut self, key: &str, value: Option<&Value>) {
        if !self.opts.iter().any(|(k, _)| k == key) {
            self.opts.push((key.to_string(), value.cloned()));
        }
    }
}

thread_local! {
    static WATCH: RefCell<Option<CompileReads>> = const { RefCell::new(None) };
}

/// Runs `compile` and returns what its renders (on this thread) read.
/// Nested watches are not supported: an inner one sees its own renders
/// only, and the outer one is marked not skippable.
pub fn watch<R>(compile: impl FnOnce() -> R) -> (R, CompileReads) {
    let outer = WATCH.with(|w| w.borrow_mut().replace(CompileReads::default()));
    let result = compile();
    let reads = WATCH
        .with(|w| std::mem::replace(&mut *w.borrow_mut(), outer))
        .unwrap_or_default();
    // The outer watch did not see the inner compile's renders.
    with_watch(|outer| outer.refuse("a nested compile"));
    (result, reads)
}

fn with_watch(f: impl FnOnce(&mut CompileReads)) {
    WATCH.with(|w| {
        if let Some(reads) = w.borrow_mut().as_mut() {
            f(reads);
        }
    });
}

/// A render ran without read tracking (the memo is off, a text template).
pub(crate) fn untracked(why: &'static str) {
    with_watch(|reads| reads.refuse(why));
}

/// A render that ran: its reads in `ctx` (`log`), and whether it succeeded.
pub(crate) fn ran(log: &ReadLog, ok: bool, ctx: &RenderContext) {
    with_watch(|out| {
        if !ok {
            out.refuse("a render failed");
        }
        if log.is_volatile() {
            out.refuse(
                "a render called a function whose answer can change, or ran an external renderer",
            );
        }
        log.each_read(|read| note(out, read, ctx));
    });
}

/// A render answered by the memo with data whose reads are `reads`.
pub(crate) fn reused<'a>(reads: impl Iterator<Item = ReusedRead<'a>>) {
    with_watch(|out| {
        for read in reads {
            match read {
                ReusedRead::Opt(key, value) => out.opt(key, value),
                ReusedRead::AllOpts => out.refuse("a render read the whole of opts"),
                ReusedRead::Call => {
                    out.refuse("a render called a salt function whose answer can change")
                }
                ReusedRead::MinionOpts => out.refuse("a render read the minion's own options"),
                ReusedRead::Other => {}
            }
        }
    });
}

/// One read stored with reused data, as [`reused`] needs it.
pub(crate) enum ReusedRead<'a> {
    /// An `opts` key and its value.
    Opt(&'a str, Option<&'a Value>),
    /// The whole of `opts`.
    AllOpts,
    /// A `salt[...]` call.
    Call,
    /// The minion's own options.
    MinionOpts,
    /// Grains, pillar, files, `salt` having a function: compared by the
    /// master as a whole.
    Other,
}

fn note(out: &mut CompileReads, read: &Read, ctx: &RenderContext) {
    match read {
        Read::Key(Root::Opts, key) => out.opt(key, ctx.opts.get(key)),
        Read::All(Root::Opts) => out.refuse("a render read the whole of opts"),
        Read::Call { .. } => out.refuse("a render called a salt function whose answer can change"),
        Read::MinionOpts(_) => out.refuse("a render read the minion's own options"),
        Read::Key(..) | Read::All(..) | Read::Has(..) | Read::File { .. } => {}
    }
}
