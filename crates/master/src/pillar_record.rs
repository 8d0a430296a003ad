//! The pillar record (issue 25): what each minion's last `pillar_roots`
//! compile read, so that the next job for that minion reuses that pillar
//! instead of matching the pillar top file and rendering its SLS again.
//!
//! Every job compiles each minion's pillar (the compile record,
//! [`crate::compile_record`], compares the result); on a warm fleet run
//! that compile was most of what the master still did per minion. The
//! `pillar_roots` part of it is a function of:
//!
//! - the minion's id and whole grains (top-file matching, templates);
//! - the starting pillar the templates see (the options' `pillar`, or the
//!   `ext_pillar` data with `ext_pillar_first`: the sources run every job,
//!   so a `cmd_json` whose output changed gives another start);
//! - the job's `saltenv` / `pillarenv` (they choose the top files), the
//!   master's other options being fixed for the life of the compiler;
//! - the pillar tree: a stamp ([`crate::compile_record::dirs_stamp`]) of
//!   every file and directory of every `pillar_roots` directory, taken once
//!   per job (before that job's first pillar compile, so an edit made after
//!   the stamp gives the next job another stamp);
//! - the `opts` values its renders read (compared by value: a template that
//!   reads `opts['jid']` is rendered every job).
//!
//! A compile whose renders did anything else the master cannot compare (a
//! `salt[...]` call other than a pure lookup, the minion's own options, the
//! whole of `opts`, an external renderer such as `gpg`, an error) is never
//! recorded ([`halite_render::watch`]); neither is one with render errors.
//! So gpg cleartexts are never held here, and a pillar that reads the mine
//! or runs a command is rendered every time. Records live in memory only,
//! at most [`crate::compile_record::MAX_RECORDS`] (dropped whole when full).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use halite_modules::pillar_render::RootsMemo;
use halite_modules::Host;
use serde::Serialize;
use serde_json::Value;

use crate::compile_record::{digest_of, dirs_stamp};
use crate::minion_records::MinionRecords;

/// Most jobs whose pillar tree stamp is remembered at once.
const MAX_STAMPS: usize = 16;

/// One minion's last recorded `pillar_roots` compile.
struct Record {
    inputs: String,
    opts: Vec<(String, Option<Value>)>,
    pillar: Value,
}

/// The inputs of one `pillar_roots` compile (see the module's documentation).
#[derive(Serialize)]
struct Inputs<'a> {
    id: &'a str,
    grains: &'a Value,
    start: &'a Value,
    saltenv: Option<&'a Value>,
    pillarenv: Option<&'a Value>,
    tree: &'a str,
}

/// The pillar records of every minion, and the pillar tree's stamps of the
/// last jobs.
pub struct PillarRecords {
    dirs: Vec<PathBuf>,
    records: MinionRecords<Record>,
    stamps: Mutex<VecDeque<(String, String)>>,
    reused: AtomicU64,
}

impl PillarRecords {
    /// Records over the pillar tree in `dirs` (every `pillar_roots` directory).
    pub fn new(dirs: Vec<PathBuf>) -> Self {
        Self {
            dirs,
            records: MinionRecords::default(),
            stamps: Mutex::new(VecDeque::new()),
            reused: AtomicU64::new(0),
        }
    }

    /// The pillar tree's stamp for job `jid`: taken at its first pillar
    /// compile and reused by the job's others. A compile outside a job
    /// (`jid` empty: the mine functions) stamps the tree now.
    fn stamp(&self, jid: &str) -> String {
        if jid.is_empty() {
            return dirs_stamp(&self.dirs);
        }
        let mut stamps = self.stamps.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, stamp)) = stamps.iter().find(|(j, _)| j == jid) {
            return stamp.clone();
        }
        let stamp = dirs_stamp(&self.dirs);
        if stamps.len() >= MAX_STAMPS {
            stamps.pop_front();
        }
        stamps.push_back((jid.to_string(), stamp.clone()));
        stamp
    }

    /// How many pillar compiles were answered from a record.
    pub fn reused(&self) -> u64 {
        self.reused.load(Ordering::Relaxed)
    }

    /// How many minions have a record.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no minion has a record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

impl RootsMemo for PillarRecords {
    fn roots(
        &self,
        pillar_host: &Host,
        compile: &mut dyn FnMut() -> (Value, Vec<String>),
    ) -> (Value, Vec<String>) {
        let opt = |key: &str| pillar_host.opts.get(key).and_then(Value::as_str);
        let (Some(id), jid) = (opt("id"), opt("jid").unwrap_or("")) else {
            return compile();
        };
        let tree = self.stamp(jid);
        let inputs = digest_of(&Inputs {
            id,
            grains: &pillar_host.grains,
            start: &pillar_host.pillar,
            saltenv: pillar_host.opts.get("saltenv"),
            pillarenv: pillar_host.opts.get("pillarenv"),
            tree: &tree,
        });
        let reused = self.records.find(id, |r| {
            let same = r.inputs == inputs
                && r.opts
                    .iter()
                    .all(|(key, value)| pillar_host.opts.get(key) == value.as_ref());
            same.then(|| r.pillar.clone())
        });
        if let Some(pillar) = reused {
            tracing::debug!(%id, "pillar_roots compile reused: inputs unchanged");
            self.reused.fetch_add(1, Ordering::Relaxed);
            return (pillar, Vec::new());
        }
        let ((pillar, errors), reads) = halite_render::watch::watch(&mut *compile);
        if !errors.is_empty() || !reads.skippable() {
            self.records.remove(id);
        } else {
            self.records.insert(
                id,
                Record {
                    inputs,
                    opts: reads.opts,
                    pillar: pillar.clone(),
                },
            );
        }
        (pillar, errors)
    }
}
