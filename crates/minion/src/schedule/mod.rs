//! The minion's scheduler (Salt 3008's `salt/utils/schedule.py`): the
//! items of `schedule:` in the minion config (with `minion.d/_schedule.conf`)
//! and in the minion's pillar, checked every second; a due item starts a
//! job of the minion's own, with a fresh jid, on the link as a published
//! job runs (so a scheduled `state.apply` compiles through the master and
//! obeys the state-run lock), and its return goes to the master's job
//! cache unless `return_job: False`.
//!
//! Settings read: `function`, `args`, `kwargs`, `seconds`/`minutes`/
//! `hours`/`days`, `when`, `cron`, `once` (`once_fmt`), `splay`, `range`,
//! `maxrunning` (1), `return_job` (True), `run_on_start`, `enabled`,
//! `jid_include` (True), and the schedule-wide `enabled`.

pub mod control;
pub mod item;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use chrono::{DateTime, Local};
use halite_modules::minion_control::ScheduleEdit;
use halite_proto::msg::Job;
use serde_json::{Map, Value};

use crate::link::JobStarter;
use crate::runner::JobRunner;
use crate::running::{LocalJob, RunningJobs};
use item::Timing;

/// How often items are checked (Salt's `loop_interval` default).
const LOOP_INTERVAL: StdDuration = StdDuration::from_secs(1);
/// [`LOOP_INTERVAL`] as a span of time (`skip_explicit`/`run_explicit`).
fn check_window() -> chrono::Duration {
    chrono::Duration::from_std(LOOP_INTERVAL).unwrap_or(chrono::Duration::seconds(1))
}

/// What the scheduler remembers of one item between checks.
#[derive(Default)]
struct ItemState {
    /// The settings this state was computed for (an edit starts afresh).
    settings: Map<String, Value>,
    /// When it fires next (splay included).
    next_fire: Option<DateTime<Local>>,
    /// When it last fired (its timing's time, splay excluded).
    last: Option<DateTime<Local>>,
    /// Whether it was looked at since the minion started (`run_on_start`).
    seen: bool,
    /// The last error logged for it, so it is logged once.
    error: Option<String>,
}

/// The schedule of one minion identity.
pub struct Schedule {
    id: String,
    /// Salt's `opts["schedule"]`: the config's items and the runtime edits
    /// (and the schedule-wide `enabled`).
    opts_items: Map<String, Value>,
    /// The items of the pillar's `schedule:`.
    pillar_items: Map<String, Value>,
    states: HashMap<String, ItemState>,
    /// `minion.d/_schedule.conf`.
    save_path: PathBuf,
    /// `schedule_returner`: returners every scheduled job's return goes to.
    returner: Option<Value>,
}

impl Schedule {
    /// The schedule of identity `id` from the minion's opts.
    pub fn new(id: &str, opts: &Value) -> Self {
        let opts_items = opts
            .get("schedule")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        Self {
            id: id.to_string(),
            opts_items,
            pillar_items: Map::new(),
            states: HashMap::new(),
            save_path: halite_modules::exec::schedule::schedule_file_of(opts),
            returner: opts.get("schedule_returner").cloned(),
        }
    }

    /// Every item (pillar's, then the config's over them, as Salt merges).
    pub fn merged(&self) -> Map<String, Value> {
        let mut all = self.pillar_items.clone();
        for (k, v) in &self.opts_items {
            all.insert(k.clone(), v.clone());
        }
        all
    }

    /// Whether the whole schedule runs (`schedule.disable` stops it).
    fn enabled(&self) -> bool {
        self.merged()
            .get("enabled")
            .is_none_or(halite_state::truthy)
    }

    /// Takes the pillar's `schedule:` (after a pillar refresh).
    pub fn set_pillar(&mut self, pillar: &Value) {
        let items = pillar
            .get("schedule")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if items != self.pillar_items {
            tracing::info!(id = %self.id, items = items.len(), "schedule items from pillar updated");
            self.pillar_items = items;
        }
    }

    /// Applies an edit of `schedule.*`; writes the saved file when `persist`.
    pub fn edit(&mut self, edit: &ScheduleEdit, persist: bool) -> Result<(), String> {
        use halite_modules::exec::schedule::edit_items;
        match edit {
            // A pillar item deleted or toggled is so until the next refresh, as Salt's.
            ScheduleEdit::Delete { name } => {
                self.pillar_items.remove(name);
            }
            ScheduleEdit::Skip { name, .. } if !self.opts_items.contains_key(name) => {
                tracing::warn!(%name, "Cannot modify job {name}, it's in the pillar!");
                return Ok(());
            }
            ScheduleEdit::EnableJob { name, .. } if !self.opts_items.contains_key(name) => {
                edit_items(&mut self.pillar_items, edit);
                return if persist { self.save() } else { Ok(()) };
            }
            _ => {}
        }
        edit_items(&mut self.opts_items, edit);
        if persist {
            self.save()
        } else {
            Ok(())
        }
    }

    /// Writes the config's and runtime items (not pillar's) to the saved file.
    pub fn save(&self) -> Result<(), String> {
        halite_modules::exec::schedule::write_saved(&self.save_path, &self.opts_items)
    }

    /// When item `name` fires next, as Salt shows it.
    pub fn next_fire_time(&self, name: &str) -> Option<String> {
        self.states
            .get(name)
            .and_then(|s| s.next_fire)
            .map(|t| t.format("%Y-%m-%dT%H:%M:%S").to_string())
    }

    /// The returners of an item, as Salt's scheduler reads them: its
    /// `returner` (halite also takes `return`), then `schedule_returner`,
    /// each once, with the item's `return_config` and `return_kwargs`.
    fn returners_of(
        &self,
        settings: &Map<String, Value>,
    ) -> Option<halite_modules::returners::ReturnSpec> {
        let mut names = Vec::new();
        for v in [
            settings.get("returner").or_else(|| settings.get("return")),
            self.returner.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            match v {
                Value::Array(a) => names.extend(a.iter().cloned()),
                Value::String(_) => names.push(v.clone()),
                _ => {}
            }
        }
        let mut spec = halite_modules::returners::ReturnSpec::from_names(&Value::Array(names))?;
        spec.ret_config = settings
            .get("return_config")
            .and_then(Value::as_str)
            .map(String::from);
        if let Some(Value::Object(k)) = settings.get("return_kwargs") {
            spec.ret_kwargs = k.clone();
        }
        Some(spec)
    }

    /// The job item `name` runs, with a fresh jid.
    pub fn job_of(&self, name: &str, settings: &Map<String, Value>) -> Option<LocalJob> {
        let fun = settings.get("function").and_then(Value::as_str)?;
        let arg = match settings.get("args") {
            Some(Value::Array(a)) => a.clone(),
            Some(Value::Null) | None => Vec::new(),
            Some(one) => vec![one.clone()],
        };
        let mut kwarg = settings
            .get("kwargs")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if let Some(spec) = self.returners_of(settings) {
            // The runner calls them after the job, as for `--return`.
            spec.to_kwargs(&mut kwarg);
        }
        Some(LocalJob {
            job: Job {
                jid: halite_proto::jid::JidGenerator::new().next_jid(),
                fun: fun.to_string(),
                arg,
                kwarg,
                tgt: self.id.clone(),
                tgt_type: "glob".into(),
                user: "root".into(),
                minions: vec![self.id.clone()],
                progress_unwatched: false,
            },
            schedule: Some(name.to_string()),
            return_job: item::flag(settings, "return_job", true),
            listed: item::flag(settings, "jid_include", true),
        })
    }

    /// The jobs due at `now`, their items' next times moved on. An item
    /// running `maxrunning` jobs already (see `running`) is skipped this time.
    pub fn due(&mut self, now: DateTime<Local>, running: &RunningJobs) -> Vec<LocalJob> {
        let all = self.merged();
        self.states.retain(|name, _| all.contains_key(name));
        if !self.enabled() {
            return Vec::new();
        }
        let mut jobs = Vec::new();
        for (name, settings) in &all {
            let Some(settings) = settings.as_object() else {
                continue;
            };
            if ["enabled", "skip_function", "skip_during_range"].contains(&name.as_str()) {
                continue;
            }
            let state = self.states.entry(name.clone()).or_default();
            if state.settings != *settings {
                *state = ItemState {
                    settings: settings.clone(),
                    ..ItemState::default()
                };
            }
            if !item::flag(settings, "enabled", true) {
                state.next_fire = None;
                continue;
            }
            let timing = match check(name, settings) {
                Ok(t) => t,
                Err(e) => {
                    if state.error.as_deref() != Some(e.as_str()) {
                        tracing::error!(%name, error = %e, "schedule item not run");
                        state.error = Some(e);
                    }
                    state.next_fire = None;
                    continue;
                }
            };
            let first = !state.seen;
            state.seen = true;
            if first {
                let on_start = item::flag(settings, "run_on_start", false);
                state.next_fire = if on_start {
                    Some(now)
                } else {
                    first_fire(&timing, now)
                };
                if let (Some(t), false) = (state.next_fire, on_start) {
                    state.next_fire = Some(t + item::splay(settings));
                }
            }
            if state.next_fire.is_none() && matches!(timing, Timing::When(_)) {
                // `5:00pm` is read as today's: tomorrow it names a new time.
                state.next_fire =
                    item::next_after(&timing, now - chrono::Duration::seconds(1), state.last);
            }
            if item::explicit_at(settings, "run_explicit", now, check_window()) {
                // `postpone_job`'s new time: a run of its own, the
                // item's own timing left as it is.
                if let Some(job) = self.job_of(name, settings) {
                    jobs.push(job);
                }
                continue;
            }
            let Some(at) = state.next_fire else {
                continue;
            };
            if at > now {
                continue;
            }
            // Due: the next time is counted from this one, as Salt's.
            let fired = at;
            state.last = Some(fired);
            state.next_fire =
                item::next_after(&timing, now, Some(fired)).map(|t| t + item::splay(settings));
            if item::explicit_at(settings, "skip_explicit", now, check_window())
                || item::explicit_at(settings, "skip_explicit", fired, check_window())
            {
                tracing::info!(%name, "schedule item skipped: skip_explicit (schedule.skip_job/postpone_job)");
                continue;
            }
            match item::in_range(settings, now) {
                Ok(true) => {}
                Ok(false) => {
                    tracing::debug!(%name, "schedule item outside its range: skipped");
                    continue;
                }
                Err(e) => {
                    tracing::error!(%name, error = %e, "schedule item not run");
                    continue;
                }
            }
            let max = settings
                .get("maxrunning")
                .and_then(Value::as_u64)
                .unwrap_or(1) as usize;
            if running.of_schedule(name) >= max {
                tracing::info!(%name, max, "schedule item skipped: maxrunning reached");
                continue;
            }
            if let Some(job) = self.job_of(name, settings) {
                jobs.push(job);
            }
        }
        jobs
    }
}

/// The item's timing, or why it cannot run.
fn check(name: &str, settings: &Map<String, Value>) -> Result<Timing, String> {
    if settings.get("function").and_then(Value::as_str).is_none() {
        return Err(item::ItemError::NoFunction(name.to_string()).to_string());
    }
    item::timing(name, settings).map_err(|e| e.to_string())
}

/// When an item first fires once the minion runs (after one interval).
fn first_fire(timing: &Timing, now: DateTime<Local>) -> Option<DateTime<Local>> {
    match timing {
        // A `when`/`once` time that is now (within a check) is not missed.
        Timing::When(_) | Timing::Once(_) => {
            item::next_after(timing, now - chrono::Duration::seconds(1), None)
        }
        _ => item::next_after(timing, now, None),
    }
}

/// Starts what the minion runs for identity `id` beside its jobs: its
/// scheduler, the control its functions reach ([`control::Control`],
/// registered under its id), and a first `saltutil.refresh_pillar` once a
/// master answers, so the minion (and the pillar's schedule items) and the
/// master's pillar cache (`-I` targeting) have its pillar from the start.
/// `running` is the identity's running jobs (shared with its links),
/// `starter` where its own jobs start (the first link with a session).
pub fn start(
    opts: &Value,
    id: &str,
    running: RunningJobs,
    starter: JobStarter,
    runner: Arc<dyn JobRunner>,
    shutdown: &halite_transport::Shutdown,
) {
    let id = id.to_string();
    let schedule = Arc::new(Mutex::new(Schedule::new(&id, opts)));
    halite_modules::minion_control::register(
        &id,
        Arc::new(control::Control {
            schedule: schedule.clone(),
            running: running.clone(),
            starter: starter.clone(),
        }),
    );
    let masterless = opts.get("file_client").and_then(Value::as_str) == Some("local");
    if !masterless {
        // One per master (hot multi-master): each fills its pillar cache.
        let jids = halite_proto::jid::JidGenerator::new();
        let refresh = || LocalJob {
            job: Job {
                jid: jids.next_jid(),
                fun: "saltutil.refresh_pillar".into(),
                arg: Vec::new(),
                kwarg: Map::new(),
                tgt: id.clone(),
                tgt_type: "glob".into(),
                user: "root".into(),
                minions: vec![id.clone()],
                progress_unwatched: false,
            },
            schedule: None,
            // Returned, so the master's record of it completes.
            return_job: true,
            listed: false,
        };
        starter.start_on_each(refresh);
    }
    tokio::spawn(run(
        schedule,
        id,
        runner,
        running,
        starter,
        shutdown.clone(),
    ));
}

/// Runs the scheduler of identity `id` until the minion stops: every
/// second, takes the pillar's items from `runner`'s pillar and starts
/// what is due through `starter`.
pub async fn run(
    schedule: Arc<Mutex<Schedule>>,
    id: String,
    runner: Arc<dyn JobRunner>,
    running: RunningJobs,
    starter: JobStarter,
    shutdown: halite_transport::Shutdown,
) {
    let mut tick = tokio::time::interval(LOOP_INTERVAL);
    let stop = shutdown.triggered();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => return,
            _ = tick.tick() => {}
        }
        let pillar = runner.pillar(&id);
        let due = match schedule.lock() {
            Ok(mut s) => {
                if let Some(p) = &pillar {
                    s.set_pillar(p);
                }
                s.due(Local::now(), &running)
            }
            Err(_) => return,
        };
        for job in due {
            tracing::info!(%id, schedule = ?job.schedule, fun = %job.job.fun, jid = %job.job.jid, "scheduled job starts");
            if !starter.start(job) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use chrono::Timelike;
    use serde_json::json;

    #[test]
    fn due_items_fire_after_their_interval_and_obey_enabled_and_maxrunning() {
        let opts = json!({"schedule": {
            "ping": {"function": "test.ping", "seconds": 10},
            "start": {"function": "test.ping", "seconds": 3600, "run_on_start": true},
            "off": {"function": "test.ping", "seconds": 1, "enabled": false},
        }});
        let mut s = Schedule::new("m1", &opts);
        let running = RunningJobs::default();
        let t0 = Local::now();
        let names = |jobs: Vec<LocalJob>| {
            let mut n: Vec<String> = jobs.into_iter().filter_map(|j| j.schedule).collect();
            n.sort();
            n
        };
        assert_eq!(names(s.due(t0, &running)), ["start"]);
        assert!(s
            .due(t0 + chrono::Duration::seconds(5), &running)
            .is_empty());
        let fired = s.due(t0 + chrono::Duration::seconds(10), &running);
        assert_eq!(fired[0].job.tgt, "m1");
        assert_eq!(fired[0].job.minions, ["m1"]);
        assert!(fired[0].return_job);
        // maxrunning 1: the ping still runs, the next one is skipped.
        running.insert(crate::running::RunningJob {
            job: Arc::new(fired[0].job.clone()),
            schedule: Some("ping".into()),
            return_job: true,
            listed: true,
            signalled: None,
        });
        assert!(s
            .due(t0 + chrono::Duration::seconds(20), &running)
            .is_empty());
        s.edit(&ScheduleEdit::EnableAll { enabled: false }, false)
            .unwrap();
        assert!(s
            .due(t0 + chrono::Duration::seconds(40), &running)
            .is_empty());
        assert_eq!(s.merged()["enabled"], json!(false));
    }

    #[test]
    fn skip_job_and_postpone_job_move_a_run() {
        let mut s = Schedule::new(
            "m1",
            &json!({"schedule": {"ping": {"function": "test.ping", "seconds": 10}}}),
        );
        let running = RunningJobs::default();
        let t0 = Local::now().with_nanosecond(0).unwrap();
        let fmt = "%Y-%m-%dT%H:%M:%S";
        let at = |secs: i64| {
            (t0 + chrono::Duration::seconds(secs))
                .format(fmt)
                .to_string()
        };
        let ran = |s: &mut Schedule, secs: i64| {
            !s.due(t0 + chrono::Duration::seconds(secs), &running)
                .is_empty()
        };
        assert!(!ran(&mut s, 0));
        // The run at +10 is skipped, the one at +20 is not.
        s.edit(
            &ScheduleEdit::Skip {
                name: "ping".into(),
                time: at(10),
                run_at: None,
                time_fmt: fmt.into(),
            },
            false,
        )
        .unwrap();
        assert_eq!(
            s.merged()["ping"]["skip_explicit"][0]["time"],
            json!(at(10))
        );
        assert!(!ran(&mut s, 10));
        assert!(ran(&mut s, 20));
        // Postponed from +30 to +35.
        s.edit(
            &ScheduleEdit::Skip {
                name: "ping".into(),
                time: at(30),
                run_at: Some(at(35)),
                time_fmt: fmt.into(),
            },
            false,
        )
        .unwrap();
        assert!(!ran(&mut s, 30));
        assert!(ran(&mut s, 35));
        assert!(ran(&mut s, 40));
    }

    #[test]
    fn reload_merges_the_saved_items() {
        let mut s = Schedule::new(
            "m1",
            &json!({"schedule": {"a": {"function": "test.ping", "seconds": 5}}}),
        );
        let mut items = Map::new();
        items.insert("b".into(), json!({"function": "test.true", "minutes": 1}));
        s.edit(&ScheduleEdit::Reload { items }, false).unwrap();
        let all = s.merged();
        assert_eq!(all["a"]["seconds"], 5);
        assert_eq!(all["b"]["function"], "test.true");
    }

    #[test]
    fn pillar_items_join_and_config_wins() {
        let mut s = Schedule::new(
            "m1",
            &json!({"schedule": {"a": {"function": "test.ping", "seconds": 5}}}),
        );
        s.set_pillar(&json!({"schedule": {
            "a": {"function": "test.true", "seconds": 5},
            "b": {"function": "test.ping", "minutes": 1},
        }}));
        let all = s.merged();
        assert_eq!(all["a"]["function"], "test.ping");
        assert_eq!(all["b"]["minutes"], 1);
        s.edit(&ScheduleEdit::Delete { name: "b".into() }, false)
            .unwrap();
        assert!(!s.merged().contains_key("b"));
    }
}
