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

use std::collections::HashSet;
use std::time::{Duration, Instant};

use halite_proto::msg::Job;
use serde_json::{json, Value};

/// What one job still waiting for returns tells redelivery.
pub struct Waiting<'a> {
    /// The job as published.
    pub job: &'a Job,
    /// The minions it still waits for.
    pub waiting: &'a HashSet<String>,
    /// When it was published.
    pub started: Instant,
}

/// The publications owed to the minions of `started` (one batch's
/// starts; an id may appear twice): for each job of `active` younger than
/// `window` that waits for some of them, a copy of it for those minions
/// alone, oldest job first. The copy's `minions` is all that differs: a
/// minion sees the job's own target, as first published.
pub fn missed<'a>(
    active: impl IntoIterator<Item = Waiting<'a>>,
    started: &[String],
    window: Duration,
) -> Vec<Job> {
    if started.is_empty() {
        return Vec::new();
    }
    // In order, each once.
    let mut seen = HashSet::new();
    let started: Vec<&String> = started.iter().filter(|id| seen.insert(*id)).collect();
    let mut jobs: Vec<Job> = active
        .into_iter()
        .filter(|w| w.started.elapsed() < window)
        .filter_map(|w| {
            let minions: Vec<String> = started
                .iter()
                .filter(|id| w.waiting.contains(id.as_str()))
                .map(|id| (*id).clone())
                .collect();
            (!minions.is_empty()).then(|| for_minions(w.job, minions))
        })
        .collect();
    // jids are timestamps: the order the jobs were published in.
    jobs.sort_by(|a, b| a.jid.cmp(&b.jid));
    jobs
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
    }
}

/// Redeliveries made, for `halite-run master.stats` (and the test that
/// proves a batch of starts costs one publication per job): publications
/// sent, and the minions they were for.
#[derive(Debug, Default)]
pub struct RedeliveryCounts {
    /// Publications of missed jobs.
    pub publications: u64,
    /// Minions those publications were for (one per minion and job).
    pub minions: u64,
}

impl RedeliveryCounts {
    /// Counts one publication of `job`.
    pub fn count(&mut self, job: &Job) {
        self.publications += 1;
        self.minions += job.minions.len() as u64;
    }

    /// The counters as `master.stats` shows them.
    pub fn snapshot(&self) -> Value {
        json!({"publications": self.publications, "minions": self.minions})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    fn job(jid: &str, minions: &[&str]) -> Job {
        Job {
            jid: jid.into(),
            fun: "test.ping".into(),
            arg: vec![],
            kwarg: Map::new(),
            tgt: "web*".into(),
            tgt_type: "glob".into(),
            user: "root".into(),
            minions: minions.iter().map(|m| m.to_string()).collect(),
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
        let jobs = missed(active(), &started, Duration::from_secs(60));
        // Oldest first; each job once, for the started minions it waits
        // for, in the order they started, each once.
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].jid, old.jid);
        assert_eq!(jobs[0].minions, ["b", "a"]);
        assert_eq!(jobs[1].jid, new.jid);
        assert_eq!(jobs[1].minions, ["d", "b"]);
        // Everything else as published.
        assert_eq!(jobs[0].tgt, "web*");
        assert_eq!(jobs[0].fun, "test.ping");
        // Past the window, or no start: nothing.
        assert!(missed(active(), &started, Duration::ZERO).is_empty());
        assert!(missed(active(), &[], Duration::from_secs(60)).is_empty());
        let mut counts = RedeliveryCounts::default();
        jobs.iter().for_each(|j| counts.count(j));
        assert_eq!(counts.snapshot(), json!({"publications": 2, "minions": 4}));
    }
}
