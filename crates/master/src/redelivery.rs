//! Jobs a minion missed while it was away, published again when it
//! (re)starts: **one publication per job for all the minions that
//! started in the same batch**, not one per minion and job.
//!
//! Why (issue 25, 10,000 minions): while a fleet comes up, every
//! `test.ping` round and its `saltutil.find_job` round target the whole
//! fleet, and each identity that connects afterwards is owed both. One
//! publication per minion and job made thousands of publications, each
//! carrying the job's whole target (a `find_job` of 7,600 ids is ~80 KB)
//! and each going to every subscriber of the PUB: the master's memory
//! grew by hundreds of MB and the swarm's publication queue filled until
//! the next round's own `test.ping` was dropped. Grouped, the cost per
//! batch is one publication per missed job, whatever the batch's size.
//!
//! **What is not owed** (issue 25, session 19; docs/master-minion.md,
//! "Differences from Salt"). Salt owes a minion that connects after a
//! publication nothing (its PUB is fire-and-forget); halite's redelivery
//! is there so that a job published while a minion reconnects (a
//! `state.apply` during a master restart) still runs. Two kinds of job ask
//! a question about the moment they were published, and a late answer is
//! wrong or useless, while thousands of them fill a starting swarm's job
//! slots ahead of the jobs that matter (10,000 minions starting at once:
//! readiness rounds that answered none):
//! - [`NEVER_OWED`]: `saltutil.find_job` asks whether a job runs *now*,
//!   for a CLI that waits `gather_job_timeout` (10 s); a minion that just
//!   started runs nothing from before, so its answer could only be "no",
//!   and the CLI reads no answer as "no" already.
//! - [`NEWEST_OWED`]: of several `test.ping`s waiting for a minion only the
//!   newest is owed: each asks "are you there?", and one answer tells the
//!   newest asker what the older ones wanted to know, at the age a late
//!   answer to an older one would have had anyway.
//!
//! Everything else is owed as before, including a job whose CLI has given
//! up: Salt's `-t` is not a cancellation (the job runs on, its returns go
//! to the job cache for `jobs.lookup_jid`), and `--async` jobs have no CLI
//! at all.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use halite_proto::msg::Job;
use serde_json::{json, Value};

/// Functions never redelivered: questions about what a minion does at
/// the moment they are published (see the module's doc).
pub const NEVER_OWED: &[&str] = &["saltutil.find_job"];

/// Functions of which only the newest job waiting for a minion is
/// redelivered to it (see the module's doc).
pub const NEWEST_OWED: &[&str] = &["test.ping"];

/// What one job still waiting for returns tells redelivery.
pub struct Waiting<'a> {
    /// The job as published.
    pub job: &'a Job,
    /// The minions it still waits for.
    pub waiting: &'a HashSet<String>,
    /// When it was published.
    pub started: Instant,
}

/// What one batch of starts is owed: the publications, and the
/// minion-jobs left out because they are not owed ([`NEVER_OWED`],
/// [`NEWEST_OWED`]).
#[derive(Debug, Default)]
pub struct Missed {
    /// One publication per job, oldest job first.
    pub jobs: Vec<Job>,
    /// Minion-jobs waiting and within the window but not owed.
    pub not_owed: u64,
}

/// The publications owed to the minions of `started` (one batch's
/// starts; an id may appear twice): for each job of `active` younger than
/// `window` that waits for some of them, a copy of it for those minions
/// alone, oldest job first, less what is not owed ([`NEVER_OWED`],
/// [`NEWEST_OWED`]). The copy's `minions` is all that differs: a minion
/// sees the job's own target, as first published.
pub fn missed<'a>(
    active: impl IntoIterator<Item = Waiting<'a>>,
    started: &[String],
    window: Duration,
) -> Missed {
    if started.is_empty() {
        return Missed::default();
    }
    // In order, each once.
    let mut seen = HashSet::new();
    let started: Vec<&String> = started.iter().filter(|id| seen.insert(*id)).collect();
    let mut waiting: Vec<Waiting<'a>> = active
        .into_iter()
        .filter(|w| w.started.elapsed() < window)
        .collect();
    // Newest first, so that the first job of a NEWEST_OWED function a
    // minion is seen waiting for is the one it is owed. jids are
    // timestamps: the order the jobs were published in.
    waiting.sort_by(|a, b| b.job.jid.cmp(&a.job.jid));
    let mut not_owed = 0;
    // (function, minion) already owed its newest job.
    let mut owed_newest: HashSet<(&str, &str)> = HashSet::new();
    let mut jobs = Vec::new();
    for w in &waiting {
        let fun = w.job.fun.as_str();
        let never = NEVER_OWED.contains(&fun);
        let newest_only = NEWEST_OWED.contains(&fun);
        let mut minions = Vec::new();
        for id in started.iter().filter(|id| w.waiting.contains(id.as_str())) {
            if never || (newest_only && !owed_newest.insert((fun, id.as_str()))) {
                not_owed += 1;
            } else {
                minions.push((*id).clone());
            }
        }
        if !minions.is_empty() {
            jobs.push(for_minions(w.job, minions));
        }
    }
    jobs.reverse();
    Missed { jobs, not_owed }
}

/// `job` for `minions` only, built without copying the job's own list of
/// minions (10,000 ids for a fleet's job).
fn for_minions(job: &Job, minions: Vec<String>) -> Job {
    Job {
        jid: job.jid.clone(),
        fun: job.fun.clone(),
        arg: job.arg.clone(),
        kwarg: job.kwarg.clone(),
        tgt: job.tgt.clone(),
        tgt_type: job.tgt_type.clone(),
        user: job.user.clone(),
        minions,
        progress_unwatched: job.progress_unwatched,
    }
}

/// Redeliveries made, for `halite-run master.stats` (and the test that
/// proves a batch of starts costs one publication per job): publications
/// sent, the minions they were for, and the minion-jobs not owed.
#[derive(Debug, Default)]
pub struct RedeliveryCounts {
    /// Publications of missed jobs.
    pub publications: u64,
    /// Minions those publications were for (one per minion and job).
    pub minions: u64,
    /// Minion-jobs waiting within the window but not owed
    /// ([`NEVER_OWED`], [`NEWEST_OWED`]).
    pub not_owed: u64,
}

impl RedeliveryCounts {
    /// Counts one publication of `job`.
    pub fn count(&mut self, job: &Job) {
        self.publications += 1;
        self.minions += job.minions.len() as u64;
    }

    /// The counters as `master.stats` shows them.
    pub fn snapshot(&self) -> Value {
        json!({"publications": self.publications, "minions": self.minions, "not_owed": self.not_owed})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    fn job(jid: &str, minions: &[&str]) -> Job {
        Job {
            jid: jid.into(),
            fun: "test.arg".into(),
            arg: vec![],
            kwarg: Map::new(),
            tgt: "web*".into(),
            tgt_type: "glob".into(),
            user: "root".into(),
            minions: minions.iter().map(|m| m.to_string()).collect(),
            progress_unwatched: false,
        }
    }

    #[test]
    fn one_publication_per_job_for_every_minion_of_the_batch() {
        let old = job("20260101000000000001", &["a", "b", "c"]);
        let new = job("20260101000000000002", &["b", "c", "d"]);
        let done = job("20260101000000000003", &["a"]);
        let waiting_old: HashSet<String> = ["a", "b", "c"].map(String::from).into();
        let waiting_new: HashSet<String> = ["b", "d"].map(String::from).into();
        let waiting_done: HashSet<String> = HashSet::new();
        let now = Instant::now();
        let active = || {
            [
                Waiting {
                    job: &new,
                    waiting: &waiting_new,
                    started: now,
                },
                Waiting {
                    job: &done,
                    waiting: &waiting_done,
                    started: now,
                },
                Waiting {
                    job: &old,
                    waiting: &waiting_old,
                    started: now,
                },
            ]
        };
        let started: Vec<String> = ["d", "b", "a", "b", "x"].map(String::from).into();
        let Missed { jobs, not_owed } = missed(active(), &started, Duration::from_secs(60));
        assert_eq!(not_owed, 0);
        // Oldest first; each job once, for the started minions it waits
        // for, in the order they started, each once.
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].jid, old.jid);
        assert_eq!(jobs[0].minions, ["b", "a"]);
        assert_eq!(jobs[1].jid, new.jid);
        assert_eq!(jobs[1].minions, ["d", "b"]);
        // Everything else as published.
        assert_eq!(jobs[0].tgt, "web*");
        assert_eq!(jobs[0].fun, "test.arg");
        // Past the window, or no start: nothing.
        assert!(missed(active(), &started, Duration::ZERO).jobs.is_empty());
        assert!(missed(active(), &[], Duration::from_secs(60))
            .jobs
            .is_empty());
        let mut counts = RedeliveryCounts::default();
        jobs.iter().for_each(|j| counts.count(j));
        assert_eq!(
            counts.snapshot(),
            json!({"publications": 2, "minions": 4, "not_owed": 0})
        );
    }

    #[test]
    fn find_job_is_never_owed_and_of_pings_only_the_newest() {
        let fun = |jid: &str, fun: &str, minions: &[&str]| Job {
            fun: fun.into(),
            ..job(jid, minions)
        };
        let ping1 = fun("20260101000000000001", "test.ping", &["a", "b"]);
        let find = fun("20260101000000000002", "saltutil.find_job", &["a", "b"]);
        let apply = fun("20260101000000000003", "state.apply", &["a", "b"]);
        let ping2 = fun("20260101000000000004", "test.ping", &["a"]);
        let both: HashSet<String> = ["a", "b"].map(String::from).into();
        let only_a: HashSet<String> = ["a"].map(String::from).into();
        let now = Instant::now();
        let w = |job, waiting| Waiting {
            job,
            waiting,
            started: now,
        };
        let active = [
            w(&ping1, &both),
            w(&find, &both),
            w(&apply, &both),
            w(&ping2, &only_a),
        ];
        let started: Vec<String> = ["a", "b"].map(String::from).into();
        let Missed { jobs, not_owed } = missed(active, &started, Duration::from_secs(60));
        let got: Vec<(&str, &[String])> = jobs
            .iter()
            .map(|j| (j.fun.as_str(), j.minions.as_slice()))
            .collect();
        // b's only ping is its newest; a's older ping and both find_jobs
        // are not owed; the state.apply is, oldest first as before.
        assert_eq!(
            got,
            [
                ("test.ping", &["b".to_string()][..]),
                ("state.apply", &["a".to_string(), "b".to_string()][..]),
                ("test.ping", &["a".to_string()][..]),
            ]
        );
        assert_eq!(not_owed, 3);
    }
}
