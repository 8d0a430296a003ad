//! The job's progress events (`state_events`) for each finished state.

use super::{Executor, StateReturn};
use crate::requisite::py_str;
use crate::value::{Map, Value};

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
            let run_num = ret.get("__run_num__").map(py_str).unwrap_or_default();
            let tag = format!(
                "salt/job/{}/prog/{}/{run_num}",
                self.opts.jid, self.opts.minion_id
            );
            self.env().fire_progress_event(&tag, ret, self.total);
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
