//! Salt's `schedule` execution module: lists and edits the running
//! minion's scheduler (through [`crate::minion_control`], as Salt's talks
//! to its minion over the event bus), or, with `offline=True`, the saved
//! schedule file `<config_dir>/minion.d/_schedule.conf` alone.
//!
//! Without a running minion (`halite-call --local`) and without
//! `offline=True`, Salt's functions find nobody listening: `list` is an
//! empty schedule and edits fail, as here.

use std::path::PathBuf;
use std::sync::Arc;

use halite_state::Value;
use serde_json::{json, Map};

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::minion_control::{self, MinionControl, ScheduleEdit};
use crate::Host;

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "schedule",
    functions: &[
        ExecFunction::new("list", list),
        ExecFunction::new("is_enabled", is_enabled),
        ExecFunction::new("build_schedule_item", build_schedule_item_fn),
        ExecFunction::new("add", add),
        ExecFunction::new("modify", modify),
        ExecFunction::new("delete", delete),
        ExecFunction::new("purge", purge),
        ExecFunction::new("enable_job", |a, h| enable_job(true, a, h)),
        ExecFunction::new("disable_job", |a, h| enable_job(false, a, h)),
        ExecFunction::new("enable", |a, h| enable_all(true, a, h)),
        ExecFunction::new("disable", |a, h| enable_all(false, a, h)),
        ExecFunction::new("save", save),
        ExecFunction::new("run_job", run_job),
        ExecFunction::new("show_next_fire_time", show_next_fire_time),
        ExecFunction::new("reload", reload),
        ExecFunction::new("postpone_job", postpone_job),
        ExecFunction::new("skip_job", skip_job),
        ExecFunction::new("move", |a, h| copy_to(true, a, h)),
        ExecFunction::new("copy", |a, h| copy_to(false, a, h)),
    ],
};

/// The item keys Salt's `schedule.list` shows (its `SCHEDULE_CONF`).
const SCHEDULE_CONF: &[&str] = &[
    "name",
    "maxrunning",
    "function",
    "splay",
    "range",
    "when",
    "once",
    "once_fmt",
    "returner",
    "jid_include",
    "args",
    "kwargs",
    "_seconds",
    "seconds",
    "minutes",
    "hours",
    "days",
    "enabled",
    "return_job",
    "metadata",
    "cron",
    "until",
    "after",
    "return_config",
    "return_kwargs",
    "run_on_start",
    "skip_during_range",
    "run_after_skip_range",
];

/// Top-level schedule keys that are settings, not items.
const HIDDEN: &[&str] = &["enabled", "skip_function", "skip_during_range"];

/// Where a function reads and edits the schedule.
enum Target {
    /// The running minion's scheduler.
    Live(Arc<dyn MinionControl>),
    /// `_schedule.conf` alone (`offline=True`).
    Offline(PathBuf),
    /// Nobody listens (no minion runs here): Salt's event goes unanswered.
    Nobody,
}

fn target(args: &Args, host: &Host) -> Target {
    if args.get_bool(usize::MAX, "offline", false) {
        return Target::Offline(schedule_file(host));
    }
    match minion_control::for_host(host) {
        Some(control) => Target::Live(control),
        None => Target::Nobody,
    }
}

/// `<config_dir>/minion.d/_schedule.conf`, as Salt's `persist`: the
/// config dir is the one of `conf_file` (`/etc/halite` by default).
pub fn schedule_file(host: &Host) -> PathBuf {
    schedule_file_of(&host.opts)
}

/// [`schedule_file`] from the opts alone (the minion's scheduler uses it).
pub fn schedule_file_of(opts: &Value) -> PathBuf {
    let dir = opts
        .get("conf_file")
        .and_then(Value::as_str)
        .and_then(|f| std::path::Path::new(f).parent().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/etc/halite"));
    dir.join("minion.d").join("_schedule.conf")
}

/// The items of the saved schedule file (empty when it does not exist).
pub fn read_saved(path: &std::path::Path) -> Result<Map<String, Value>, ExecError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
        Err(e) => {
            return Err(ExecError::Execution(format!(
                "cannot read the saved schedule {}: {e}",
                path.display()
            )))
        }
    };
    let doc = halite_render::yaml::load(&text).map_err(|e| {
        ExecError::Execution(format!(
            "the saved schedule {} is not valid YAML ({e}); fix or remove it",
            path.display()
        ))
    })?;
    Ok(doc
        .get("schedule")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default())
}

/// Writes `items` as `schedule:` to the saved schedule file (keys that
/// start with `_` are left out, as Salt's `persist` does).
pub fn write_saved(path: &std::path::Path, items: &Map<String, Value>) -> Result<(), String> {
    let mut clean = Map::new();
    for (name, item) in items {
        let item = match item {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(k, _)| !k.starts_with('_'))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            other => other.clone(),
        };
        clean.insert(name.clone(), item);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let text = halite_render::yaml::dump(&json!({ "schedule": clean }), true);
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The current schedule as Salt's `list_(return_yaml=False)` reads it.
fn current(target: &Target) -> Result<Map<String, Value>, ExecError> {
    match target {
        Target::Live(c) => Ok(c.schedule()),
        Target::Offline(path) => read_saved(path),
        Target::Nobody => Ok(Map::new()),
    }
}

/// `schedule.list [show_all=False] [show_disabled=True] [return_yaml=True] [offline=False]`.
fn list(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let show_all = args.get_bool(0, "show_all", false);
    let show_disabled = args.get_bool(1, "show_disabled", true);
    let return_yaml = args.get_bool(3, "return_yaml", true);
    let target = target(args, host);
    let mut schedule = current(&target)?;
    let saved = match &target {
        Target::Offline(_) => schedule.clone(),
        _ => read_saved(&schedule_file(host)).unwrap_or_default(),
    };
    let names: Vec<String> = schedule.keys().cloned().collect();
    for name in names {
        if HIDDEN.contains(&name.as_str()) {
            continue;
        }
        if name.starts_with("__") && !show_all {
            schedule.remove(&name);
            continue;
        }
        let Some(Value::Object(item)) = schedule.get_mut(&name) else {
            continue;
        };
        item.entry("enabled").or_insert(Value::Bool(true));
        item.retain(|k, v| SCHEDULE_CONF.contains(&k.as_str()) && !v.is_null());
        for v in item.values_mut() {
            match v.as_str() {
                Some("true") => *v = Value::Bool(true),
                Some("false") => *v = Value::Bool(false),
                _ => {}
            }
        }
        item.remove("_seconds");
        if !show_disabled && !halite_state::truthy(&item["enabled"]) {
            schedule.remove(&name);
        }
    }
    if !return_yaml {
        return Ok(Value::Object(schedule));
    }
    for (name, item) in schedule.iter_mut() {
        if let Value::Object(item) = item {
            item.insert("saved".into(), Value::Bool(saved.contains_key(name)));
        }
    }
    Ok(Value::from(halite_render::yaml::dump(
        &json!({ "schedule": schedule }),
        false,
    )))
}

/// The schedule as `list(show_all=True, return_yaml=False)` has it.
fn listed(args: &Args, host: &Host) -> Result<Map<String, Value>, ExecError> {
    let mut call = Args {
        positional: vec![],
        kwargs: Map::new(),
    };
    call.kwargs.insert("show_all".into(), Value::Bool(true));
    call.kwargs.insert("return_yaml".into(), Value::Bool(false));
    if let Some(offline) = args.kwargs.get("offline") {
        call.kwargs.insert("offline".into(), offline.clone());
    }
    match list(&call, host)? {
        Value::Object(m) => Ok(m),
        _ => Ok(Map::new()),
    }
}

/// `schedule.is_enabled [name]`: the item's settings (`{}` when unknown),
/// or without a name whether the scheduler runs at all.
fn is_enabled(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let mut call = Args {
        positional: vec![],
        kwargs: Map::new(),
    };
    call.kwargs.insert("return_yaml".into(), Value::Bool(false));
    let Value::Object(current) = list(&call, host)? else {
        return Ok(Value::Object(Map::new()));
    };
    match args.get_str(0, "name").filter(|n| !n.is_empty()) {
        None => Ok(current.get("enabled").cloned().unwrap_or(Value::Bool(true))),
        Some(name) => Ok(current
            .get(&name)
            .cloned()
            .unwrap_or_else(|| Value::Object(Map::new()))),
    }
}

/// A failed result: `{"comment": ..., "result": False}` (and `changes`).
fn failed(comment: &str, with_changes: bool) -> Value {
    let mut ret = json!({ "comment": comment, "result": false });
    if with_changes {
        ret["changes"] = json!({});
    }
    ret
}

/// The keyword arguments given by the user (not `__pub_*`).
fn user_kwargs(args: &Args) -> Map<String, Value> {
    args.kwargs
        .iter()
        .filter(|(k, _)| !k.starts_with("__"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Salt's `build_schedule_item`: the item's settings, or the error dict.
fn build_item(name: &str, kwargs: &Map<String, Value>) -> Result<Map<String, Value>, Value> {
    if name.is_empty() {
        return Err(json!({"comment": "Job name is required.", "result": false}));
    }
    let intervals = ["seconds", "minutes", "hours", "days"];
    let has = |k: &str| kwargs.contains_key(k);
    if intervals.iter().any(|k| has(k)) && (has("when") || has("cron")) {
        return Err(
            json!({"comment": "Unable to use \"seconds\", \"minutes\", \"hours\", or \"days\" with \"when\" or \"cron\" options.", "result": false}),
        );
    }
    if has("when") && has("cron") {
        return Err(
            json!({"comment": "Unable to use \"when\" and \"cron\" options together.  Ignoring.", "result": false}),
        );
    }
    let mut item = Map::new();
    item.insert(
        "function".into(),
        kwargs.get("function").cloned().unwrap_or(Value::Null),
    );
    for k in intervals {
        if let Some(v) = kwargs.get(k) {
            item.insert(k.into(), v.clone());
        }
    }
    for k in ["return_job", "metadata"] {
        if let Some(v) = kwargs.get(k) {
            item.insert(k.into(), v.clone());
        }
    }
    if let Some(v) = kwargs.get("job_args") {
        if !v.is_array() {
            return Err(
                json!({"comment": "job_args is not a list. please correct and try again.", "result": false}),
            );
        }
        item.insert("args".into(), v.clone());
    }
    if let Some(v) = kwargs.get("job_kwargs") {
        if !v.is_object() {
            return Err(
                json!({"comment": "job_kwargs is not a dict. please correct and try again.", "result": false}),
            );
        }
        item.insert("kwargs".into(), v.clone());
    }
    item.insert(
        "maxrunning".into(),
        kwargs.get("maxrunning").cloned().unwrap_or(json!(1)),
    );
    item.insert(
        "name".into(),
        kwargs.get("name").cloned().unwrap_or(json!(name)),
    );
    item.insert(
        "enabled".into(),
        kwargs.get("enabled").cloned().unwrap_or(json!(true)),
    );
    item.insert(
        "jid_include".into(),
        kwargs.get("jid_include").cloned().unwrap_or(json!(true)),
    );
    if let Some(v) = kwargs.get("splay") {
        item.insert("splay".into(), v.clone());
    }
    if let Some(when) = kwargs.get("when") {
        let whens: Vec<&Value> = match when {
            Value::Array(a) => a.iter().collect(),
            one => vec![one],
        };
        for w in whens {
            let text = w
                .as_str()
                .map(String::from)
                .unwrap_or_else(|| w.to_string());
            if crate::schedule_time::parse_when(&text, chrono::Local::now().naive_local()).is_none()
            {
                return Err(
                    json!({"comment": format!("Schedule item {text} for \"when\" in invalid."), "result": false}),
                );
            }
        }
    }
    for k in [
        "range",
        "when",
        "once",
        "once_fmt",
        "cron",
        "returner",
        "after",
        "return_config",
        "return_kwargs",
        "until",
        "run_on_start",
        "skip_during_range",
    ] {
        if let Some(v) = kwargs.get(k) {
            item.insert(k.into(), v.clone());
        }
    }
    if let Some(expr) = item.get("cron").and_then(Value::as_str) {
        if let Err(e) = crate::schedule_time::parse_cron(expr) {
            return Err(
                json!({"comment": format!("Invalid cron string {expr}: {e}"), "result": false}),
            );
        }
    }
    Ok(item)
}

/// `schedule.build_schedule_item name function=... seconds=...`.
fn build_schedule_item_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let name = args.get_str(0, "name").unwrap_or_default();
    Ok(build_item(&name, &user_kwargs(args)).map_or_else(|e| e, Value::Object))
}

fn persist_flag(args: &Args) -> bool {
    args.get_bool(usize::MAX, "persist", true)
}

fn test_flag(args: &Args) -> bool {
    args.get_bool(usize::MAX, "test", false)
}

/// Applies `edit` to the target: the live scheduler, or the saved file.
fn apply(target: &Target, edit: ScheduleEdit, persist: bool) -> Result<(), String> {
    match target {
        Target::Live(c) => c.edit_schedule(edit, persist),
        Target::Offline(path) => {
            let mut items = read_saved(path).map_err(|e| e.to_string())?;
            edit_items(&mut items, &edit);
            write_saved(path, &items)
        }
        Target::Nobody => Err("no minion is running here to take the change".into()),
    }
}

/// What `edit` does to a schedule map (the scheduler applies the same).
pub fn edit_items(items: &mut Map<String, Value>, edit: &ScheduleEdit) {
    match edit {
        ScheduleEdit::Put { name, item } => {
            items.insert(name.clone(), Value::Object(item.clone()));
        }
        ScheduleEdit::Delete { name } => {
            items.remove(name);
        }
        ScheduleEdit::EnableJob { name, enabled } => {
            if let Some(Value::Object(item)) = items.get_mut(name) {
                item.insert("enabled".into(), Value::Bool(*enabled));
            }
        }
        ScheduleEdit::EnableAll { enabled } => {
            items.insert("enabled".into(), Value::Bool(*enabled));
        }
        ScheduleEdit::Purge => items.retain(|k, _| k.starts_with("__") || k == "enabled"),
        ScheduleEdit::Reload { items: saved } => {
            items.extend(saved.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        ScheduleEdit::Skip {
            name,
            time,
            run_at,
            time_fmt,
        } => {
            let Some(Value::Object(item)) = items.get_mut(name) else {
                return;
            };
            let mut push = |key: &str, at: &str| {
                let entry = json!({"time": at, "time_fmt": time_fmt});
                match item.get_mut(key) {
                    Some(Value::Array(list)) => list.push(entry),
                    _ => {
                        item.insert(key.into(), Value::Array(vec![entry]));
                    }
                }
            };
            push("skip_explicit", time);
            if let Some(at) = run_at {
                push("run_explicit", at);
            }
        }
    }
}

/// `schedule.add name function=... [seconds=...] [offline=True]`.
fn add(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.get_str(0, "name").unwrap_or_default();
    let kwargs = user_kwargs(args);
    let current = listed(args, host)?;
    if current.contains_key(&name) {
        return Ok(
            json!({"comment": format!("Job {name} already exists in schedule."), "result": false, "changes": {}}),
        );
    }
    if name.is_empty() {
        return Ok(failed("Job name is required.", true));
    }
    let item = match build_item(&name, &kwargs) {
        Ok(item) => item,
        Err(e) => return Ok(e),
    };
    if test_flag(args) {
        return Ok(
            json!({"comment": format!("Job: {name} would be added to schedule."), "result": true, "changes": {}}),
        );
    }
    let target = target(args, host);
    match apply(
        &target,
        ScheduleEdit::Put {
            name: name.clone(),
            item,
        },
        persist_flag(args),
    ) {
        Ok(()) => Ok(
            json!({"comment": format!("Added job: {name} to schedule."), "result": true, "changes": {name.clone(): "added"}}),
        ),
        Err(e) => {
            tracing::warn!(%name, error = %e, "schedule.add failed");
            Ok(failed(
                &format!("Failed to add job {name} to schedule."),
                true,
            ))
        }
    }
}

/// `schedule.modify name function=... [seconds=...]`: replaces the item,
/// reporting the old and new settings as Salt's `changes`.
fn modify(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.get_str(0, "name").unwrap_or_default();
    let kwargs = user_kwargs(args);
    let current = listed(args, host)?;
    let Some(Value::Object(old)) = current.get(&name) else {
        return Ok(
            json!({"comment": format!("Job {name} does not exist in schedule."), "result": false, "changes": {}}),
        );
    };
    let mut old = old.clone();
    // The item as built: the old one's settings the call leaves alone.
    let mut merged = Map::new();
    if !kwargs.contains_key("function") {
        if let Some(f) = old.get("function") {
            merged.insert("function".into(), f.clone());
        }
    }
    merged.extend(kwargs);
    let new = match build_item(&name, &merged) {
        Ok(item) => item,
        Err(e) => return Ok(e),
    };
    old.remove("saved");
    if new == old {
        return Ok(
            json!({"comment": format!("Job {name} in correct state"), "result": true, "changes": {}}),
        );
    }
    let changes = json!({ name.clone(): { "old": old, "new": new } });
    if test_flag(args) {
        return Ok(
            json!({"comment": format!("Job: {name} would be modified in schedule."), "result": true, "changes": changes}),
        );
    }
    let target = target(args, host);
    match apply(
        &target,
        ScheduleEdit::Put {
            name: name.clone(),
            item: new,
        },
        persist_flag(args),
    ) {
        Ok(()) => Ok(
            json!({"comment": format!("Modified job: {name} in schedule."), "result": true, "changes": changes}),
        ),
        Err(_) => Ok(
            json!({"comment": format!("Failed to modify job {name} in schedule."), "result": false, "changes": changes}),
        ),
    }
}

/// `schedule.delete name`.
fn delete(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.get_str(0, "name").unwrap_or_default();
    if name.is_empty() {
        return Ok(failed("Job name is required.", true));
    }
    if test_flag(args) {
        return Ok(
            json!({"comment": format!("Job: {name} would be deleted from schedule."), "result": true, "changes": {}}),
        );
    }
    let current = listed(args, host)?;
    if !current.contains_key(&name) {
        return Ok(
            json!({"comment": format!("Job {name} does not exist."), "result": false, "changes": {}}),
        );
    }
    let target = target(args, host);
    match apply(
        &target,
        ScheduleEdit::Delete { name: name.clone() },
        persist_flag(args),
    ) {
        Ok(()) => Ok(
            json!({"comment": format!("Deleted Job {name} from schedule."), "result": true, "changes": {name.clone(): "removed"}}),
        ),
        Err(_) => Ok(failed(
            &format!("Failed to delete job {name} from schedule."),
            true,
        )),
    }
}

/// `schedule.purge`: deletes every item (not Salt's own `__` ones).
fn purge(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let current = listed(args, host)?;
    let mut comments = Vec::new();
    let mut changes = Map::new();
    let target = target(args, host);
    for name in current.keys() {
        if name == "enabled" || name.starts_with("__") {
            continue;
        }
        if test_flag(args) {
            comments.push(Value::from(format!(
                "Job: {name} would be deleted from schedule."
            )));
            continue;
        }
        match apply(
            &target,
            ScheduleEdit::Delete { name: name.clone() },
            persist_flag(args),
        ) {
            Ok(()) => {
                comments.push(Value::from(format!("Deleted job: {name} from schedule.")));
                changes.insert(name.clone(), Value::from("removed"));
            }
            Err(_) => comments.push(Value::from(format!(
                "Failed to delete job {name} from schedule."
            ))),
        }
    }
    Ok(json!({"comment": comments, "changes": changes, "result": true}))
}

/// `schedule.enable_job name` / `disable_job name` (`enabled`).
fn enable_job(enabled: bool, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let (verb, past) = if enabled {
        ("enable", "Enabled")
    } else {
        ("disable", "Disabled")
    };
    let name = args.get_str(0, "name").unwrap_or_default();
    if name.is_empty() {
        return Ok(failed("Job name is required.", true));
    }
    if test_flag(args) {
        return Ok(
            json!({"comment": format!("Job: {name} would be {verb}d in schedule."), "result": true, "changes": {}}),
        );
    }
    let current = listed(args, host)?;
    if !current.contains_key(&name) {
        return Ok(
            json!({"comment": format!("Job {name} does not exist."), "result": false, "changes": {}}),
        );
    }
    let target = target(args, host);
    match apply(
        &target,
        ScheduleEdit::EnableJob {
            name: name.clone(),
            enabled,
        },
        persist_flag(args),
    ) {
        Ok(()) => Ok(
            json!({"comment": format!("{past} Job {name} in schedule."), "result": true, "changes": {name.clone(): format!("{verb}d")}}),
        ),
        Err(_) => Ok(
            json!({"comment": format!("Failed to {verb} job {name} in schedule."), "result": false, "changes": {}}),
        ),
    }
}

/// `schedule.enable` / `schedule.disable` (`enabled`): the whole scheduler.
fn enable_all(enabled: bool, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let (verb, past) = if enabled {
        ("enable", "Enabled")
    } else {
        ("disable", "Disabled")
    };
    if test_flag(args) {
        return Ok(
            json!({"comment": format!("Schedule would be {verb}d."), "result": true, "changes": {}}),
        );
    }
    let target = target(args, host);
    match apply(
        &target,
        ScheduleEdit::EnableAll { enabled },
        persist_flag(args),
    ) {
        Ok(()) => Ok(
            json!({"comment": format!("{past} schedule on minion."), "result": true, "changes": {"schedule": format!("{verb}d")}}),
        ),
        Err(_) => Ok(
            json!({"comment": format!("Failed to {verb} schedule on minion."), "result": false, "changes": {}}),
        ),
    }
}

/// `schedule.save`: the non-pillar items to `minion.d/_schedule.conf`.
fn save(args: &Args, host: &Host) -> Result<Value, ExecError> {
    if test_flag(args) {
        return Ok(json!({"comment": "Schedule would be saved.", "result": true}));
    }
    match target(args, host) {
        Target::Live(c) => match c.save_schedule() {
            Ok(()) => Ok(json!({"comment": "Schedule (non-pillar items) saved.", "result": true})),
            Err(e) => {
                tracing::warn!(error = %e, "schedule.save failed");
                Ok(json!({"comment": "Failed to save schedule.", "result": false}))
            }
        },
        Target::Offline(_) => {
            Ok(json!({"comment": "Schedule (non-pillar items) saved.", "result": true}))
        }
        Target::Nobody => Ok(
            json!({"comment": "Event module not available. Schedule save failed.", "result": true}),
        ),
    }
}

/// `schedule.run_job name [force=False]`: runs the item now.
fn run_job(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.get_str(0, "name").unwrap_or_default();
    let force = args.get_bool(1, "force", false);
    if name.is_empty() {
        return Ok(json!({"comment": "Job name is required.", "result": false}));
    }
    let current = listed(args, host)?;
    let Some(item) = current.get(&name) else {
        return Ok(json!({"comment": format!("Job {name} does not exist."), "result": false}));
    };
    let enabled = item.get("enabled").is_none_or(halite_state::truthy);
    if !enabled && !force {
        return Ok(json!({"comment": format!("Job {name} is disabled."), "result": false}));
    }
    match target(args, host) {
        Target::Live(c) if c.run_schedule_job(&name).is_ok() => {
            Ok(json!({"comment": format!("Scheduling Job {name} on minion."), "result": true}))
        }
        _ => {
            Ok(json!({"comment": format!("Failed to run job {name} on minion."), "result": false}))
        }
    }
}

/// `schedule.show_next_fire_time name`.
fn show_next_fire_time(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.get_str(0, "name").unwrap_or_default();
    let mut ret = json!({ "result": true });
    if name.is_empty() {
        ret["comment"] = json!("Job name is required.");
        ret["result"] = json!(false);
    }
    match minion_control::for_host(host).and_then(|c| c.next_fire_time(&name)) {
        Some(t) => ret["next_fire_time"] = json!(t),
        None => ret["comment"] = json!("next fire time not available."),
    }
    Ok(ret)
}

/// `schedule.reload`: the pillar's items again (a pillar refresh, when the
/// pillar has `schedule:`) and the saved file's items merged into the
/// running schedule. Salt 3008 reads `minion.d/schedule.conf` here while
/// its `save` writes `_schedule.conf`; halite reloads the file it saves.
fn reload(_args: &Args, host: &Host) -> Result<Value, ExecError> {
    let mut comments = Vec::new();
    let mut result = true;
    let control = minion_control::for_host(host);
    if host.pillar.get("schedule").is_some() {
        match host.call("saltutil.refresh_pillar", &Args::default()) {
            Ok(v) if halite_state::truthy(&v) => {
                comments.push(json!("Reloaded schedule from pillar on minion."));
            }
            _ => {
                comments.push(json!("Failed to reload schedule from pillar on minion."));
                result = false;
            }
        }
    }
    let path = schedule_file(host);
    if path.is_file() {
        let items = match read_saved(&path) {
            Ok(items) => items,
            Err(e) => {
                comments.push(json!(format!("Unable to read existing schedule file: {e}")));
                Map::new()
            }
        };
        if items.is_empty() {
            comments.push(json!(
                "Failed to reload schedule on minion.  Saved file is empty or invalid."
            ));
            result = false;
        } else {
            let target = match control {
                Some(c) => Target::Live(c),
                None => Target::Nobody,
            };
            match apply(&target, ScheduleEdit::Reload { items }, false) {
                Ok(()) => comments.push(json!("Reloaded schedule on minion from schedule.conf.")),
                Err(e) => {
                    tracing::warn!(error = %e, "schedule.reload failed");
                    comments.push(json!(
                        "Failed to reload schedule on minion from schedule.conf."
                    ));
                    result = false;
                }
            }
        }
    }
    Ok(json!({"comment": comments, "result": result}))
}

/// Whether `text` reads as a time in Python's `strptime` format `fmt`.
fn parses(text: &str, fmt: &str) -> bool {
    chrono::NaiveDateTime::parse_from_str(text, fmt).is_ok()
}

/// `schedule.postpone_job name current_time new_time [time_fmt=...]`:
/// the run at `current_time` is skipped and one runs at `new_time`.
fn postpone_job(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.get_str(0, "name").unwrap_or_default();
    let time = args.get_str(1, "current_time").unwrap_or_default();
    let new_time = args.get_str(2, "new_time").unwrap_or_default();
    let fmt = time_fmt(args);
    let fail = |comment: &str| Ok(json!({"comment": comment, "result": false}));
    if name.is_empty() {
        return fail("Job name is required.");
    }
    if time.is_empty() {
        return fail("Job current time is required.");
    }
    if !parses(&time, &fmt) {
        tracing::error!(%new_time, %fmt, "Date string could not be parsed: {new_time}, {fmt}");
        return fail("Date string could not be parsed.");
    }
    if new_time.is_empty() {
        return fail("Job new_time is required.");
    }
    if !parses(&new_time, &fmt) {
        tracing::error!(%new_time, %fmt, "Date string could not be parsed: {new_time}, {fmt}");
        return fail("Date string could not be parsed.");
    }
    skip_or_postpone(
        args,
        host,
        &name,
        time,
        Some(new_time),
        fmt,
        "postpone",
        "Postponed Job",
    )
}

/// `schedule.skip_job name current_time [time_fmt=...]`: the run at
/// `current_time` is skipped.
fn skip_job(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.get_str(0, "name").unwrap_or_default();
    let time = args.get_str(1, "current_time").unwrap_or_default();
    let fmt = time_fmt(args);
    if time.is_empty() {
        return Ok(json!({"comment": "Job time is required.", "result": false}));
    }
    if !parses(&time, &fmt) {
        tracing::error!(%time, %fmt, "Date string could not be parsed: {time}, {fmt}");
        return Ok(json!({"comment": "Date string could not be parsed.", "result": false}));
    }
    if name.is_empty() {
        return Ok(json!({"comment": "Job name is required.", "result": false}));
    }
    skip_or_postpone(args, host, &name, time, None, fmt, "skip", "Added Skip Job")
}

/// `time_fmt=` of `postpone_job`/`skip_job` (Salt's default otherwise).
fn time_fmt(args: &Args) -> String {
    args.get_str(usize::MAX, "time_fmt")
        .filter(|f| !f.is_empty())
        .unwrap_or_else(|| "%Y-%m-%dT%H:%M:%S".to_string())
}

/// The common end of `postpone_job` (`verb` postpone) and `skip_job`:
/// test mode, the job's existence, the edit and Salt's comments (`done`
/// is the success comment's start).
#[allow(
    clippy::too_many_arguments,
    reason = "the two functions' shared phases, called twice"
)]
fn skip_or_postpone(
    args: &Args,
    host: &Host,
    name: &str,
    time: String,
    run_at: Option<String>,
    time_fmt: String,
    verb: &str,
    done: &str,
) -> Result<Value, ExecError> {
    if host.test_mode() || test_flag(args) {
        let past = if verb == "skip" {
            "skipped"
        } else {
            "postponed"
        };
        return Ok(
            json!({"comment": format!("Job: {name} would be {past} in schedule."), "result": true}),
        );
    }
    let current = listed(args, host)?;
    if !current.contains_key(name) {
        return Ok(json!({"comment": format!("Job {name} does not exist."), "result": false}));
    }
    let target = target(args, host);
    if matches!(target, Target::Nobody) {
        return Ok(
            json!({"comment": format!("Event module not available. Schedule {verb} job failed."), "result": true}),
        );
    }
    let edit = ScheduleEdit::Skip {
        name: name.to_string(),
        time,
        run_at,
        time_fmt,
    };
    let applied = apply(&target, edit, false);
    let enabled = current
        .get(name)
        .and_then(|item| item.get("enabled"))
        .is_none_or(halite_state::truthy);
    if applied.is_ok() && enabled {
        Ok(json!({"comment": format!("{done} {name} in schedule."), "result": true}))
    } else {
        Ok(json!({"comment": format!("Failed to {verb} job {name} in schedule."), "result": false}))
    }
}

/// `schedule.move name target` and `schedule.copy name target`: Salt's
/// publish the item as `schedule.add` to minion `target` through its
/// master (`publish.publish`, peer publishing), which halite's minion
/// cannot do yet; they answer Salt's comments for a missing job and test
/// mode, and otherwise say so without changing anything.
fn copy_to(moving: bool, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let name = args.get_str(0, "name").unwrap_or_default();
    let (verb, past) = if moving {
        ("move", "moved")
    } else {
        ("copy", "copied")
    };
    if name.is_empty() {
        return Ok(json!({"comment": "Job name is required.", "result": false}));
    }
    if test_flag(args) {
        return Ok(
            json!({"comment": format!("Job: {name} would be {past} from schedule."), "result": true}),
        );
    }
    if !listed(args, host)?.contains_key(&name) {
        return Ok(json!({"comment": format!("Job {name} does not exist."), "result": false}));
    }
    Ok(json!({
        "comment": format!("schedule.{verb} publishes schedule.add to the target minions through the master (Salt's publish.publish, peer publishing), which halite does not support yet; run schedule.add on the target with halite '<target>' schedule.add {name} ... instead"),
        "result": false,
    }))
}
