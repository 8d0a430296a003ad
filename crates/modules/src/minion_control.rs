//! How execution functions reach the minion daemon that runs them.
//!
//! Salt's `schedule.*` and `saltutil.running`/`kill_job`/`refresh_pillar`
//! talk to the running minion over its local event bus. halite's minion
//! registers a [`MinionControl`] per identity at start; a function finds
//! it by the host's minion id ([`for_host`]). In a process with no minion
//! (`halite-call --local`) there is none, and the functions say so or fall
//! back to what Salt does without a minion (the saved schedule file).
//!
//! A registry rather than a field of [`Host`]: the control is per-daemon
//! state, like Salt's minion event bus, and a `Host` is built per run in
//! many places that have no daemon.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

use serde_json::{Map, Value};

use crate::Host;

/// A change asked of the running scheduler (Salt's `manage_schedule` event).
#[derive(Debug, Clone, PartialEq)]
pub enum ScheduleEdit {
    /// Adds (or replaces, with `modify`) item `name`.
    Put {
        /// The item's name.
        name: String,
        /// Its settings, as `schedule:` in the config has them.
        item: Map<String, Value>,
    },
    /// Removes item `name`.
    Delete {
        /// The item's name.
        name: String,
    },
    /// Enables or disables item `name`.
    EnableJob {
        /// The item's name.
        name: String,
        /// Whether it runs.
        enabled: bool,
    },
    /// Enables or disables the whole schedule.
    EnableAll {
        /// Whether anything runs.
        enabled: bool,
    },
    /// Removes every item that is not from pillar.
    Purge,
    /// Merges the saved schedule file's items into the schedule
    /// (`schedule.reload`, Salt's `reload` of the scheduler).
    Reload {
        /// The saved items.
        items: Map<String, Value>,
    },
    /// Skips item `name`'s run at `time` and, with `run_at`, runs it then
    /// instead (`schedule.skip_job`, `schedule.postpone_job`): Salt's
    /// `skip_explicit` and `run_explicit` entries of the item.
    Skip {
        /// The item's name.
        name: String,
        /// The run to skip, written in `time_fmt`.
        time: String,
        /// When to run it instead (`postpone_job`), in `time_fmt`.
        run_at: Option<String>,
        /// The `strptime` format of the times.
        time_fmt: String,
    },
}

/// What the minion daemon offers its execution functions.
pub trait MinionControl: Send + Sync {
    /// The scheduler's items (name -> settings), with a top-level
    /// `enabled: false` when the whole schedule is disabled (Salt's shape).
    fn schedule(&self) -> Map<String, Value>;
    /// Applies `edit`, then writes the non-pillar items to
    /// `minion.d/_schedule.conf` when `persist`; the error says what to do.
    fn edit_schedule(&self, edit: ScheduleEdit, persist: bool) -> Result<(), String>;
    /// Writes the non-pillar items to `minion.d/_schedule.conf` (`schedule.save`).
    fn save_schedule(&self) -> Result<(), String>;
    /// Runs item `name` now, whatever its timing.
    fn run_schedule_job(&self, name: &str) -> Result<(), String>;
    /// When item `name` fires next (`%Y-%m-%dT%H:%M:%S`, local time).
    fn next_fire_time(&self, name: &str) -> Option<String>;
    /// The jobs this identity runs now, in the shape of Salt's
    /// `saltutil.running` (jid, fun, arg, tgt, tgt_type, user, pid...).
    fn running(&self) -> Vec<Value>;
    /// Sends `signal` to running job `jid`; false when it runs no more.
    fn signal_job(&self, jid: &str, signal: i32) -> bool;
}

type Controls = RwLock<HashMap<String, Arc<dyn MinionControl>>>;

fn controls() -> &'static Controls {
    static CONTROLS: OnceLock<Controls> = OnceLock::new();
    CONTROLS.get_or_init(Controls::default)
}

/// Registers the control of minion identity `id` (done once at start).
pub fn register(id: &str, control: Arc<dyn MinionControl>) {
    if let Ok(mut map) = controls().write() {
        map.insert(id.to_string(), control);
    }
}

/// The control of the minion running on `host`, if a daemon runs it.
pub fn for_host(host: &Host) -> Option<Arc<dyn MinionControl>> {
    let id = host.opts.get("id").and_then(Value::as_str)?;
    controls().read().ok()?.get(id).cloned()
}
