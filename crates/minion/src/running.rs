//! The jobs one minion identity runs now, shared between the link that
//! starts them and the functions that ask about them (`saltutil.running`,
//! `find_job`, `kill_job`, the scheduler's `maxrunning`); and the jobs a
//! minion starts by itself (its scheduler) on their way to the link.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use halite_proto::msg::Job;
use serde_json::{json, Value};

/// A job this identity runs.
#[derive(Clone)]
pub struct RunningJob {
    /// The job as published (or as the scheduler built it).
    pub job: Arc<Job>,
    /// The schedule item that started it, if any.
    pub schedule: Option<String>,
    /// Whether its return goes to the master (`return_job`).
    pub return_job: bool,
    /// Whether `saltutil.running` lists it (`jid_include`).
    pub listed: bool,
    /// The signal `saltutil.signal_job` sent it, if any.
    pub signalled: Option<i32>,
}

impl RunningJob {
    /// A job the master published: returned, listed.
    pub fn published(job: Arc<Job>) -> Self {
        Self {
            job,
            schedule: None,
            return_job: true,
            listed: true,
            signalled: None,
        }
    }

    /// Salt's proc-file data for this job (`saltutil.running`, `find_job`).
    pub fn proc_data(&self) -> Value {
        let job = &self.job;
        let mut data = json!({
            "jid": job.jid,
            "fun": job.fun,
            "arg": job.arg,
            "tgt": job.tgt,
            "tgt_type": job.tgt_type,
            "user": job.user,
            "ret": "",
            "pid": std::process::id(),
        });
        if let Some(name) = &self.schedule {
            data["schedule"] = json!(name);
            data["fun_args"] = json!(job.arg);
            data["id"] = json!(job.tgt);
        }
        data
    }
}

/// The running jobs of one identity, by jid. Cheap to clone (shared).
#[derive(Clone, Default)]
pub struct RunningJobs(Arc<Mutex<HashMap<String, RunningJob>>>);

impl RunningJobs {
    /// Records a job that starts.
    pub fn insert(&self, job: RunningJob) {
        if let Ok(mut map) = self.0.lock() {
            map.insert(job.job.jid.clone(), job);
        }
    }

    /// Forgets a job that ended, giving back what was known of it.
    pub fn remove(&self, jid: &str) -> Option<RunningJob> {
        self.0.lock().ok()?.remove(jid)
    }

    /// The job `jid`, if it runs.
    pub fn get(&self, jid: &str) -> Option<RunningJob> {
        self.0.lock().ok()?.get(jid).cloned()
    }

    /// Every running job.
    pub fn all(&self) -> Vec<RunningJob> {
        self.0
            .lock()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// How many jobs of schedule item `name` run now (its `maxrunning`).
    pub fn of_schedule(&self, name: &str) -> usize {
        self.0
            .lock()
            .map(|m| {
                m.values()
                    .filter(|r| r.schedule.as_deref() == Some(name))
                    .count()
            })
            .unwrap_or(0)
    }

    /// Marks job `jid` as signalled; false when it does not run.
    pub fn mark_signalled(&self, jid: &str, signal: i32) -> bool {
        let Ok(mut map) = self.0.lock() else {
            return false;
        };
        match map.get_mut(jid) {
            Some(r) => {
                r.signalled = Some(signal);
                true
            }
            None => false,
        }
    }
}

/// A job the minion starts by itself, sent to the link that runs it.
#[derive(Clone)]
pub struct LocalJob {
    /// The job, targeted at this identity alone, with a fresh jid.
    pub job: Job,
    /// The schedule item that started it (Salt's `schedule` key).
    pub schedule: Option<String>,
    /// Whether its return goes to the master's job cache.
    pub return_job: bool,
    /// Whether `saltutil.running` lists it (`jid_include`).
    pub listed: bool,
}
