//! The job's progress events (`state_events`) for each finished state.

use super::{Executor, StateReturn};
use crate::requisite::py_str;
use crate::value::{Map, Value};

thread_local! {
    /// The tag of the progress event being fired, built in place: one
    /// buffer per job thread instead of a `String` per state (issue 25:
    /// 1,000 per highstate on every minion).
    static PROGRESS_TAG: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// `salt/job/<jid>/prog/<minion id>/<run number>` into `tag` (emptied
/// first), the run number as `str()` gives it.
fn progress_tag(tag: &mut String, jid: &str, minion_id: &str, ret: &StateReturn) {
    use std::fmt::Write as _;
    tag.clear();
    tag.push_str("salt/job/");
    tag.push_str(jid);
    tag.push_str("/prog/");
    tag.push_str(minion_id);
    tag.push('/');
    match ret.get("__run_num__") {
        Some(Value::Number(n)) if n.is_u64() || n.is_i64() => {
            let _ = write!(tag, "{n}");
        }
        Some(other) => tag.push_str(&py_str(other)),
        None => {}
    }
}

impl<'a> Executor<'a> {
    pub(super) fn fire_events(&self, ci: usize, ret: &StateReturn) {
        let low = &self.graph.chunks[ci];
        let fire = low.get("fire_event");
        let wants_result = matches!(fire, Some(Value::Bool(true)))
            || matches!(fire, Some(Value::String(s)) if !s.is_empty());
        if !wants_result && !self.opts.state_events {
            return;
        }
        if wants_result {
            self.fire_result_event(fire, ret);
        }
        if self.opts.state_events {
            let fire = |tag: &mut String| {
                progress_tag(tag, &self.opts.jid, &self.opts.minion_id, ret);
                self.env().fire_progress_event(tag, ret, self.total);
            };
            PROGRESS_TAG.with(|buffer| match buffer.try_borrow_mut() {
                Ok(mut tag) => fire(&mut tag),
                // A run fired from inside an event's sink (never so far):
                // its tags are built in a buffer of their own.
                Err(_) => fire(&mut String::new()),
            });
        }
    }

    /// The state's own event (`fire_event: True` or a custom tag).
    fn fire_result_event(&self, fire: Option<&Value>, ret: &StateReturn) {
        let mut data = Map::new();
        data.insert("ret".into(), ret.to_value());
        match fire {
            Some(Value::Bool(true)) => {
                let tag = format!(
                    "salt/state_result/{}/{}/{}",
                    self.opts.jid,
                    self.opts.minion_id,
                    ret.get("name").map(py_str).unwrap_or_default()
                );
                self.env().fire_event_owned(&tag, Value::Object(data));
            }
            Some(Value::String(custom)) if !custom.is_empty() => {
                let tag = format!(
                    "salt/state_result/{}/{}/{custom}",
                    self.opts.jid, self.opts.minion_id
                );
                self.env().fire_event_owned(&tag, Value::Object(data));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tag built in place is the one `format!` of `str()` gave.
    #[test]
    fn a_progress_tag_is_the_formatted_one() {
        let mut tag = String::from("left over from the last state");
        for run_num in [
            Some(Value::from(0u64)),
            Some(Value::from(999u64)),
            Some(Value::from(u64::MAX)),
            Some(Value::from(-3i64)),
            Some(Value::from(2.5f64)),
            Some(Value::from("7")),
            Some(Value::Null),
            None,
        ] {
            let mut ret = StateReturn::new();
            if let Some(n) = &run_num {
                ret.insert("__run_num__", n.clone());
            }
            progress_tag(&mut tag, "20261127064000000001", "web-ü1", &ret);
            let shown = run_num.as_ref().map(py_str).unwrap_or_default();
            assert_eq!(
                tag,
                format!("salt/job/20261127064000000001/prog/web-ü1/{shown}")
            );
        }
    }
}
