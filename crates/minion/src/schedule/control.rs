//! The running minion's side of [`MinionControl`]: what `schedule.*` and
//! `saltutil.running`/`signal_job` reach, for one identity.

use std::sync::{Arc, Mutex};

use halite_modules::minion_control::{MinionControl, ScheduleEdit};
use serde_json::{Map, Value};

use super::Schedule;
use crate::link::JobStarter;
use crate::running::RunningJobs;

/// One identity's scheduler and running jobs, as its functions see them.
pub struct Control {
    /// The identity's schedule (shared with its scheduler loop).
    pub schedule: Arc<Mutex<Schedule>>,
    /// The identity's running jobs (shared with its link).
    pub running: RunningJobs,
    /// Where `schedule.run_job` starts a job.
    pub starter: JobStarter,
}

fn poisoned() -> String {
    "the minion's scheduler stopped after an internal error; restart the minion".into()
}

impl MinionControl for Control {
    fn schedule(&self) -> Map<String, Value> {
        self.schedule.lock().map(|s| s.merged()).unwrap_or_default()
    }

    fn edit_schedule(&self, edit: ScheduleEdit, persist: bool) -> Result<(), String> {
        self.schedule
            .lock()
            .map_err(|_| poisoned())?
            .edit(&edit, persist)
    }

    fn save_schedule(&self) -> Result<(), String> {
        self.schedule.lock().map_err(|_| poisoned())?.save()
    }

    fn run_schedule_job(&self, name: &str) -> Result<(), String> {
        let job = {
            let schedule = self.schedule.lock().map_err(|_| poisoned())?;
            let all = schedule.merged();
            let settings = all
                .get(name)
                .and_then(Value::as_object)
                .ok_or_else(|| format!("Job {name} does not exist."))?;
            schedule
                .job_of(name, settings)
                .ok_or_else(|| format!("schedule item {name} has no function"))?
        };
        if self.starter.start(job) {
            Ok(())
        } else {
            Err("the minion is stopping".into())
        }
    }

    fn next_fire_time(&self, name: &str) -> Option<String> {
        self.schedule.lock().ok()?.next_fire_time(name)
    }

    fn running(&self) -> Vec<Value> {
        let mut jobs: Vec<_> = self
            .running
            .all()
            .into_iter()
            .filter(|r| r.listed)
            .collect();
        jobs.sort_by(|a, b| a.job.jid.cmp(&b.job.jid));
        jobs.iter().map(|r| r.proc_data()).collect()
    }

    fn signal_job(&self, jid: &str, signal: i32) -> bool {
        if self.running.get(jid).is_none() {
            return false;
        }
        if halite_modules::job_procs::terminates(signal) {
            self.running.mark_signalled(jid, signal);
        }
        halite_modules::job_procs::signal_job(jid, signal);
        true
    }
}
