//! Live progress of a state run in `halite`: one bar per minion, fed by
//! the `salt/job/<jid>/prog/<minion>/<run_num>` events a minion fires
//! after each state, drawn on stderr while the returns are awaited.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{IsTerminal, Write};
use std::sync::{mpsc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};
use serde_json::Value;

/// How often the elapsed times are redrawn when no event arrives.
const TICK: Duration = Duration::from_millis(250);

/// The widest minion id column; longer ids are cut by the bar template.
const MAX_ID_WIDTH: usize = 40;

/// Whether `fun`'s return is a state run, which is all progress can show.
pub use halite_modules::exec::state::is_state_run;

/// Whether stderr and stdout are both terminals: progress is on by
/// default only then (a pipe or a file gets the returns alone).
pub fn terminals() -> bool {
    std::io::stderr().is_terminal() && std::io::stdout().is_terminal()
}

/// Whether to draw progress: `flag` is `--progress` (`Some(true)`) or
/// `--no-progress` (`Some(false)`), `ttys` what [`terminals`] says.
/// Never for `--async` (nothing is awaited) nor for a function that is
/// not a state run.
pub fn wanted(flag: Option<bool>, fun: &str, asynchronous: bool, ttys: bool) -> bool {
    !asynchronous && is_state_run(fun) && flag.unwrap_or(ttys)
}

/// One prog event, as parsed from its tag and payload.
#[derive(Debug, Clone, PartialEq)]
struct Prog {
    minion: String,
    run_num: u64,
    /// States in this run (`len`).
    len: u64,
    /// The state's return (`__id__`, `result`, `comment`, ...).
    ret: serde_json::Map<String, Value>,
    /// The state function (`pkg.installed`), when the event names it.
    fun: Option<String>,
}

/// Parses `salt/job/<jid>/prog/<minion>/<run_num>` and its payload;
/// `None` for another jid, another tag or a payload without `ret`/`len`.
/// The payload is Salt's bus shape (`{"cmd": "_minion_event", "data":
/// {"len", "ret"}, ...}`) or the bare `{"len", "ret"}` a minion sends.
fn parse_prog(jid: &str, tag: &str, data: &Value) -> Option<Prog> {
    let halite_proto::tags::Tag::JobProg {
        jid: tag_jid,
        minion,
        run_num,
    } = halite_proto::tags::parse(tag)
    else {
        return None;
    };
    if tag_jid != jid {
        return None;
    }
    let inner = match data.get("data") {
        Some(inner @ Value::Object(m)) if m.contains_key("ret") => inner,
        _ => data,
    };
    let ret = inner.get("ret")?.as_object()?.clone();
    let len = inner.get("len")?.as_u64()?;
    let fun = inner.get("fun").and_then(Value::as_str).map(str::to_string);
    Some(Prog {
        minion: minion.to_string(),
        run_num,
        len,
        ret,
        fun,
    })
}

/// The first non-empty line of a state's comment (a string, or Salt's
/// list of strings).
fn first_comment_line(comment: Option<&Value>) -> String {
    let text = match comment {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .find(|s| !s.trim().is_empty())
            .unwrap_or_default(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .to_string()
}

/// The line printed above the bars when a state fails (`result: false`):
/// `web1: FAILED nginx (pkg.installed): <first line of the comment>`;
/// `None` when the state did not fail (`true`, or `null` in test mode).
pub fn failure_line(
    minion: &str,
    ret: &serde_json::Map<String, Value>,
    fun: Option<&str>,
) -> Option<String> {
    if ret.get("result") != Some(&Value::Bool(false)) {
        return None;
    }
    let id = ret
        .get("__id__")
        .or_else(|| ret.get("name"))
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .unwrap_or_else(|| "?".into());
    let mut line = format!("{minion}: FAILED {id}");
    if let Some(fun) = fun.filter(|f| !f.is_empty()) {
        line.push_str(&format!(" ({fun})"));
    }
    let comment = first_comment_line(ret.get("comment"));
    if !comment.is_empty() {
        line.push_str(": ");
        line.push_str(&comment);
    }
    Some(line)
}

/// What is known of one minion's run.
struct MinionState {
    bar: ProgressBar,
    /// The `__run_num__`s seen (a repeated event is counted once).
    seen: BTreeSet<u64>,
    /// The largest `len` seen; `None` until the first event.
    total: Option<u64>,
    failed: u64,
    returned: bool,
}

/// Why this exists: a highstate on a fleet prints nothing until each
/// minion returns, which can take minutes. `Progress` turns the prog
/// events the master streams into one bar per minion (states done of
/// `len`, elapsed), prints a line at once when a state fails, and clears
/// a minion's bar before its return is printed so the output and the
/// bars never interleave.
pub struct Progress {
    jid: String,
    multi: MultiProgress,
    minions: BTreeMap<String, MinionState>,
    /// The failure lines printed above the bars, in order.
    printed: Vec<String>,
    /// The minion id column's width.
    width: usize,
    /// Whether failure lines go straight to stderr when the bars are
    /// hidden (`TERM=dumb`); off for the targets tests give.
    echo_hidden: bool,
    /// Redraws the elapsed times; stopped by dropping the sender.
    ticker: Option<(mpsc::Sender<()>, JoinHandle<()>)>,
}

impl Progress {
    /// Progress for `jid` over `minions`, drawn on stderr. `force`
    /// (`--progress`) draws even when stderr is not a terminal.
    pub fn stderr(jid: &str, minions: &[String], force: bool) -> Self {
        let target = if std::io::stderr().is_terminal() || !force {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::term_like_with_hz(Box::new(PlainTerm::stderr()), 20)
        };
        let mut progress = Self::new(jid, minions, target);
        progress.echo_hidden = true;
        progress
    }

    /// Progress for `jid` over `minions`, drawn on `target` (hidden in tests).
    pub fn new(jid: &str, minions: &[String], target: ProgressDrawTarget) -> Self {
        let multi = MultiProgress::with_draw_target(target);
        let width = minions
            .iter()
            .map(|m| m.chars().count())
            .max()
            .unwrap_or(1)
            .clamp(1, MAX_ID_WIDTH);
        let sorted: BTreeSet<&String> = minions.iter().collect();
        let mut states = BTreeMap::new();
        for id in sorted {
            let bar = multi.add(
                ProgressBar::no_length()
                    .with_style(waiting_style(width))
                    .with_prefix(id.clone()),
            );
            bar.set_message("waiting");
            states.insert(
                id.clone(),
                MinionState {
                    bar,
                    seen: BTreeSet::new(),
                    total: None,
                    failed: 0,
                    returned: false,
                },
            );
        }
        let mut progress = Self {
            jid: jid.to_string(),
            multi,
            minions: states,
            printed: Vec::new(),
            width,
            echo_hidden: false,
            ticker: None,
        };
        if !progress.multi.is_hidden() {
            progress.ticker = Some(spawn_ticker(
                progress.minions.values().map(|m| m.bar.clone()).collect(),
            ));
        }
        progress
    }

    /// Feeds one event from the job's stream; true when it was a prog
    /// event of this job for one of its minions. Anything else (another
    /// jid, a malformed payload, an unknown minion) is ignored.
    pub fn event(&mut self, tag: &str, data: &Value) -> bool {
        let Some(prog) = parse_prog(&self.jid, tag, data) else {
            return false;
        };
        let width = self.width;
        let Some(state) = self.minions.get_mut(&prog.minion) else {
            return false;
        };
        if state.returned {
            return true;
        }
        let first = state.total.is_none();
        let fresh = state.seen.insert(prog.run_num);
        let done = state.seen.len() as u64;
        // A listener run (`listen`/`mod_watch`) comes after the main one
        // with its own smaller `len`: the total never shrinks below what is done.
        let total = state.total.unwrap_or(0).max(prog.len).max(done);
        state.total = Some(total);
        if first {
            state.bar.set_style(running_style(width));
            state.bar.set_message("");
        }
        state.bar.set_length(total);
        state.bar.set_position(done);
        if !fresh {
            return true;
        }
        if let Some(line) = failure_line(&prog.minion, &prog.ret, prog.fun.as_deref()) {
            state.failed += 1;
            state.bar.set_message(format!("{} failed", state.failed));
            self.print_line(line);
        }
        true
    }

    /// `minion` returned: its bar is finished and cleared, so its
    /// output can be printed (through [`Progress::suspend`]).
    pub fn finish(&mut self, minion: &str) {
        if let Some(state) = self.minions.get_mut(minion) {
            if !state.returned {
                state.returned = true;
                state.bar.finish_and_clear();
                self.multi.remove(&state.bar);
            }
        }
    }

    /// Runs `f` (which prints to stdout or stderr) with the bars hidden,
    /// then redraws them.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.multi.suspend(f)
    }

    /// States done and the total (`None` while waiting) for `minion`.
    pub fn counts(&self, minion: &str) -> Option<(u64, Option<u64>)> {
        self.minions
            .get(minion)
            .map(|m| (m.seen.len() as u64, m.total))
    }

    /// The failure lines printed so far.
    pub fn printed(&self) -> &[String] {
        &self.printed
    }

    /// Prints `line` above the bars (straight to stderr when the bars
    /// are hidden, e.g. `TERM=dumb`).
    fn print_line(&mut self, line: String) {
        let drawn = !self.multi.is_hidden() && self.multi.println(&line).is_ok();
        if !drawn && self.echo_hidden {
            // Best effort: a closed stderr must not stop the run.
            let _ = writeln!(std::io::stderr(), "{line}");
        }
        self.printed.push(line);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some((stop, handle)) = self.ticker.take() {
            drop(stop);
            let _ = handle.join();
        }
        for state in self.minions.values() {
            if !state.bar.is_finished() {
                state.bar.finish_and_clear();
            }
        }
        let _ = self.multi.clear();
    }
}

/// A minion whose first prog event has not arrived.
fn waiting_style(width: usize) -> ProgressStyle {
    ProgressStyle::with_template(&format!("{{prefix:<{width}!}} {{msg}} {{elapsed:>4}}"))
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
}

/// A minion that is running states.
fn running_style(width: usize) -> ProgressStyle {
    ProgressStyle::with_template(&format!(
        "{{prefix:<{width}!}} [{{bar:30}}] {{pos:>3}}/{{len:<3}} {{elapsed:>4}} {{msg}}"
    ))
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| ProgressStyle::default_bar())
}

/// Ticks the bars so their elapsed times move between events.
fn spawn_ticker(bars: Vec<ProgressBar>) -> (mpsc::Sender<()>, JoinHandle<()>) {
    let (stop, stopped) = mpsc::channel::<()>();
    let handle = std::thread::spawn(move || {
        while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(TICK) {
            for bar in bars.iter().filter(|b| !b.is_finished()) {
                bar.tick();
            }
        }
    });
    (stop, handle)
}

/// Stderr (or, in tests, a buffer) as a terminal even when it is not
/// one (`--progress` into a pipe or a file), drawn with plain ANSI
/// sequences; its size comes from `COLUMNS`/`LINES`, else 80x24.
struct PlainTerm {
    width: u16,
    height: u16,
    sink: Mutex<Box<dyn Write + Send>>,
}

impl std::fmt::Debug for PlainTerm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainTerm")
            .field("width", &self.width)
            .field("height", &self.height)
            .finish_non_exhaustive()
    }
}

impl PlainTerm {
    fn stderr() -> Self {
        let size = |var: &str, default: u16| {
            std::env::var(var)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .filter(|n: &u16| *n > 0)
                .unwrap_or(default)
        };
        Self {
            width: size("COLUMNS", 80),
            height: size("LINES", 24),
            sink: Mutex::new(Box::new(std::io::stderr())),
        }
    }

    fn write(&self, s: &str) -> std::io::Result<()> {
        let mut sink = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        sink.write_all(s.as_bytes())
    }

    /// `ESC [ n <code>`: a cursor move, nothing for 0.
    fn cursor(&self, n: usize, code: char) -> std::io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        self.write(&format!("\x1b[{n}{code}"))
    }
}

impl TermLike for PlainTerm {
    fn width(&self) -> u16 {
        self.width
    }
    fn height(&self) -> u16 {
        self.height
    }
    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        self.cursor(n, 'A')
    }
    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        self.cursor(n, 'B')
    }
    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        self.cursor(n, 'C')
    }
    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        self.cursor(n, 'D')
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.write(&format!("{s}\n"))
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.write(s)
    }
    fn clear_line(&self) -> std::io::Result<()> {
        self.write("\r\x1b[2K")
    }
    fn flush(&self) -> std::io::Result<()> {
        let mut sink = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        sink.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const JID: &str = "20261121200824874023";

    fn minions(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    fn hidden(ids: &[&str]) -> Progress {
        Progress::new(JID, &minions(ids), ProgressDrawTarget::hidden())
    }

    fn tag(minion: &str, run_num: u64) -> String {
        format!("salt/job/{JID}/prog/{minion}/{run_num}")
    }

    /// The payload as it is on the bus (shared/reference/salt-events.txt).
    fn bus_event(minion: &str, run_num: u64, len: u64, result: Value, comment: &str) -> Value {
        json!({
            "_stamp": "2026-11-21T20:08:25.396360+00:00",
            "cmd": "_minion_event",
            "data": {
                "len": len,
                "ret": {
                    "__id__": format!("state{run_num}"),
                    "__run_num__": run_num,
                    "__sls__": "fire",
                    "changes": {},
                    "comment": comment,
                    "duration": 0.224,
                    "name": format!("state{run_num}"),
                    "result": result,
                    "start_time": "20:08:25.351001"
                }
            },
            "id": minion,
            "jid": JID,
            "tag": tag(minion, run_num),
            "ts": 1795291705
        })
    }

    #[test]
    fn only_state_runs_show_progress() {
        for fun in [
            "state.apply",
            "state.sls",
            "state.highstate",
            "state.test",
            "state.single",
            "state.top",
        ] {
            assert!(is_state_run(fun));
        }
        assert!(!is_state_run("test.ping"));
        assert!(!is_state_run("cmd.run"));
        assert!(!is_state_run("state.show_sls"));
    }

    #[test]
    fn flags_tty_and_async_decide() {
        assert!(wanted(None, "state.apply", false, true));
        assert!(!wanted(None, "state.apply", false, false));
        assert!(wanted(Some(true), "state.apply", false, false));
        assert!(!wanted(Some(false), "state.apply", false, true));
        assert!(!wanted(Some(true), "state.apply", true, true));
        assert!(!wanted(Some(true), "test.ping", false, true));
    }

    #[test]
    fn minions_wait_until_their_first_event() {
        let p = hidden(&["web2", "web1"]);
        assert_eq!(p.counts("web1"), Some((0, None)));
        assert_eq!(p.counts("web2"), Some((0, None)));
        assert_eq!(p.counts("db1"), None);
        assert_eq!(p.minions["web1"].bar.message(), "waiting");
        assert_eq!(p.minions["web1"].bar.prefix(), "web1");
    }

    #[test]
    fn counts_states_done_per_minion() {
        let mut p = hidden(&["web1", "web2"]);
        for n in 0..3 {
            assert!(p.event(&tag("web1", n), &bus_event("web1", n, 5, json!(true), "ok")));
        }
        assert!(p.event(
            &tag("web2", 0),
            &bus_event("web2", 0, 2, json!(null), "would")
        ));
        assert_eq!(p.counts("web1"), Some((3, Some(5))));
        assert_eq!(p.counts("web2"), Some((1, Some(2))));
        let bar = &p.minions["web1"].bar;
        assert_eq!((bar.position(), bar.length()), (3, Some(5)));
        assert_eq!(bar.message(), "");
        assert!(p.printed().is_empty());
    }

    #[test]
    fn a_repeated_event_counts_once_and_the_total_never_shrinks() {
        let mut p = hidden(&["web1"]);
        p.event(&tag("web1", 0), &bus_event("web1", 0, 2, json!(true), ""));
        p.event(&tag("web1", 0), &bus_event("web1", 0, 2, json!(true), ""));
        assert_eq!(p.counts("web1"), Some((1, Some(2))));
        p.event(&tag("web1", 1), &bus_event("web1", 1, 2, json!(true), ""));
        // A listener run after the main one: its own `len` of 1.
        p.event(&tag("web1", 2), &bus_event("web1", 2, 1, json!(true), ""));
        assert_eq!(p.counts("web1"), Some((3, Some(3))));
    }

    #[test]
    fn bare_minion_payloads_are_read_too() {
        let mut p = hidden(&["web1"]);
        let data = json!({"len": 4, "ret": {"__id__": "a", "__run_num__": 0, "result": true}});
        assert!(p.event(&tag("web1", 0), &data));
        assert_eq!(p.counts("web1"), Some((1, Some(4))));
    }

    #[test]
    fn a_failed_state_prints_one_line_at_once() {
        let mut p = hidden(&["web1"]);
        let mut data = bus_event(
            "web1",
            1,
            3,
            json!(false),
            "Package nginx-full is not available\nsecond line",
        );
        data["data"]["ret"]["__id__"] = json!("nginx");
        data["data"]["fun"] = json!("pkg.installed");
        assert!(p.event(&tag("web1", 1), &data));
        assert_eq!(
            p.printed(),
            ["web1: FAILED nginx (pkg.installed): Package nginx-full is not available"]
        );
        assert_eq!(p.minions["web1"].bar.message(), "1 failed");
        // The same event again is not a second failure.
        p.event(&tag("web1", 1), &data);
        assert_eq!(p.printed().len(), 1);
    }

    #[test]
    fn failure_lines() {
        let ret = |v: Value| v.as_object().cloned().unwrap_or_default();
        assert_eq!(
            failure_line(
                "web1",
                &ret(json!({"__id__": "nginx", "result": false, "comment": "no\nmore"})),
                Some("pkg.installed")
            )
            .as_deref(),
            Some("web1: FAILED nginx (pkg.installed): no")
        );
        // Salt's event carries no function: the line goes without it.
        assert_eq!(
            failure_line(
                "db1",
                &ret(json!({"__id__": "pg", "result": false, "comment": ["", "  boom  "]})),
                None
            )
            .as_deref(),
            Some("db1: FAILED pg: boom")
        );
        assert_eq!(
            failure_line(
                "db1",
                &ret(json!({"name": "/etc/x", "result": false})),
                None
            )
            .as_deref(),
            Some("db1: FAILED /etc/x")
        );
        assert_eq!(
            failure_line(
                "db1",
                &ret(json!({"result": false, "comment": ""})),
                Some("")
            )
            .as_deref(),
            Some("db1: FAILED ?")
        );
        assert_eq!(
            failure_line("db1", &ret(json!({"result": true})), None),
            None
        );
        assert_eq!(
            failure_line("db1", &ret(json!({"result": null})), None),
            None
        );
        assert_eq!(failure_line("db1", &ret(json!({})), None), None);
    }

    #[test]
    fn other_jobs_and_malformed_events_are_ignored() {
        let mut p = hidden(&["web1"]);
        let good = bus_event("web1", 0, 5, json!(false), "x");
        let other_jid = "salt/job/20990101000000000000/prog/web1/0";
        assert!(!p.event(other_jid, &good));
        assert!(!p.event(&format!("salt/job/{JID}/ret/web1"), &good));
        assert!(!p.event(&format!("salt/job/{JID}/prog/web1/one"), &good));
        assert!(!p.event(&format!("salt/job/{JID}/prog/web1"), &good));
        assert!(!p.event(&format!("salt/job/{JID}/prog//0"), &good));
        assert!(!p.event(&format!("salt/job/{JID}0/prog/web1/0"), &good));
        assert!(!p.event(&tag("web9", 0), &bus_event("web9", 0, 5, json!(false), "x")));
        assert!(!p.event(&tag("web1", 0), &json!(null)));
        assert!(!p.event(&tag("web1", 0), &json!("text")));
        assert!(!p.event(&tag("web1", 0), &json!({"cmd": "_minion_event"})));
        assert!(!p.event(&tag("web1", 0), &json!({"data": {"len": 5}})));
        assert!(!p.event(&tag("web1", 0), &json!({"data": {"len": 5, "ret": "no"}})));
        let mut no_len = good.clone();
        no_len["data"].as_object_mut().map(|m| m.remove("len"));
        assert!(!p.event(&tag("web1", 0), &no_len));
        let mut text_len = good.clone();
        text_len["data"]["len"] = json!("5");
        assert!(!p.event(&tag("web1", 0), &text_len));
        assert_eq!(p.counts("web1"), Some((0, None)));
        assert!(p.printed().is_empty());
    }

    #[test]
    fn a_return_finishes_the_bar_and_later_events_change_nothing() {
        let mut p = hidden(&["web1", "web2"]);
        p.event(&tag("web1", 0), &bus_event("web1", 0, 2, json!(true), ""));
        p.finish("web1");
        p.finish("web1");
        p.finish("nobody");
        assert!(p.minions["web1"].bar.is_finished());
        assert!(!p.minions["web2"].bar.is_finished());
        assert!(p.event(
            &tag("web1", 1),
            &bus_event("web1", 1, 2, json!(false), "late")
        ));
        assert_eq!(p.counts("web1"), Some((1, Some(2))));
        assert!(p.printed().is_empty());
        let printed = p.suspend(|| 42);
        assert_eq!(printed, 42);
    }

    // A `Write` the test keeps a handle on.
    use halite_test_support::SharedBuffer as Shared;

    #[test]
    fn draws_bars_and_failure_lines_on_a_plain_terminal() {
        let screen = Shared::default();
        let term = PlainTerm {
            width: 100,
            height: 10,
            sink: Mutex::new(Box::new(screen.clone())),
        };
        let target = ProgressDrawTarget::term_like(Box::new(term));
        let mut p = Progress::new(JID, &minions(&["web1.example.org", "db1"]), target);
        assert!(p.ticker.is_some());
        p.event(&tag("db1", 0), &bus_event("db1", 0, 2, json!(true), ""));
        p.event(
            &tag("db1", 1),
            &bus_event("db1", 1, 2, json!(false), "nope\nmore"),
        );
        let drawn = screen.text();
        assert!(drawn.contains("web1.example.org waiting"), "{drawn:?}");
        assert!(drawn.contains("db1              [="), "{drawn:?}");
        assert!(drawn.contains("2/2"), "{drawn:?}");
        assert!(drawn.contains("1 failed"), "{drawn:?}");
        assert!(drawn.contains("db1: FAILED state1: nope"), "{drawn:?}");
        assert!(!drawn.contains("more"), "{drawn:?}");
        p.finish("db1");
        let before = screen.text().len();
        p.suspend(|| screen.clone().write_all(b"<db1's highstate>").unwrap());
        let after = screen.text();
        let output = after[before..].find("<db1's highstate>").unwrap();
        // The bars were cleared before the output and drawn again after it,
        // without db1's bar.
        assert!(after[before..before + output].contains("\x1b[2K"));
        assert!(after[before + output..].contains("web1.example.org waiting"));
        assert!(!after[before + output..].contains("db1  "));
        assert_eq!(p.printed(), ["db1: FAILED state1: nope"]);
    }

    #[test]
    fn no_minions_is_fine() {
        let mut p = hidden(&[]);
        assert!(!p.event(&tag("web1", 0), &bus_event("web1", 0, 1, json!(true), "")));
    }
}
