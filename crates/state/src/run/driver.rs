//! The walk over the ordered chunks and through one chunk: requisites,
//! then conditions, then the call, then bookkeeping, `failhard` and events.

use super::clock::now_time;
use super::invoke::stamp_identity;
use super::requisites::Status;
use super::{has_changes, Executor, StateReturn};
use crate::module::{truthy, StateEnv};
use crate::requisite::{py_str, RequisiteKind};
use crate::value::{Map, Value};

impl<'a> Executor<'a> {
    pub(super) fn run_all(&mut self, order: &[usize]) {
        self.call_chunks(order);
        self.wait_parallel(None);
        if !self.failhard_stop {
            self.call_listen(order);
        }
    }

    pub(super) fn call_chunks(&mut self, order: &[usize]) {
        for &ci in order {
            if self.failhard_stop {
                return;
            }
            if !self.running.contains_key(self.graph.tag(ci)) {
                self.call_chunk(ci, 0);
                if self.check_failhard(ci) {
                    self.failhard_stop = true;
                    return;
                }
            }
        }
    }

    pub(super) fn check_failhard(&self, ci: usize) -> bool {
        if self.opts.test {
            return false;
        }
        let low = &self.graph.chunks[ci];
        let failhard = low
            .get("failhard")
            .map(truthy)
            .unwrap_or(self.opts.failhard);
        if !failhard {
            return false;
        }
        match self.running.get(self.graph.tag(ci)) {
            Some(ret) => match ret.get("result") {
                Some(Value::Null) | None => false,
                Some(v) => !truthy(v),
            },
            None => false,
        }
    }

    pub(super) fn is_prereq(&self, ci: usize) -> bool {
        self.graph.chunks[ci].get("__prereq__") == Some(&Value::Bool(true))
    }

    pub(super) fn not_run(&mut self, ci: usize, tag: &str, result: bool, comment: &str) {
        let low = &self.graph.chunks[ci];
        let mut ret = StateReturn::new();
        ret.insert("changes", Value::Object(Map::new()));
        ret.insert("result", Value::Bool(result));
        ret.insert("duration", Value::from(0.0));
        ret.insert("start_time", Value::from(now_time()));
        ret.insert("comment", Value::from(comment));
        ret.insert("__state_ran__", Value::Bool(false));
        ret.insert("__run_num__", Value::from(self.run_num));
        stamp_identity(&mut ret, low);
        if self.is_prereq(ci) {
            self.pre.insert(tag.to_string(), ret.clone());
        }
        self.running.insert(tag.to_string(), ret);
        self.run_num += 1;
    }

    pub(super) fn call_chunk(&mut self, ci: usize, depth: u32) {
        if self.pool.as_ref().is_some_and(|p| !p.pending.is_empty()) {
            let deps: Vec<String> = self
                .graph
                .dependencies(ci)
                .into_iter()
                .map(|(_, d)| self.graph.tag(d).to_string())
                .collect();
            self.wait_parallel(Some(&deps));
        }
        let tag = self.graph.tag(ci).to_string();
        let prereq = self.is_prereq(ci);
        let (status, reqs) = self.check_requisites(ci);
        match status {
            Status::Unmet => {
                if self.call_unmet_requisites(ci, &tag, depth) {
                    return;
                }
            }
            Status::Met => {
                let ret = self.call(ci, None);
                self.store(tag, prereq, ret);
            }
            Status::SkipReq => self.not_run(
                ci,
                &tag,
                true,
                "State was not run because requisites were skipped by another state",
            ),
            Status::SkipWatch if !prereq => {
                let mut ret = self.call(ci, None);
                let c = ret.get("comment").map(py_str).unwrap_or_default();
                ret.insert("comment",
                    Value::from(c + " mod_watch was not run because requisites were skipped by another state"),
                );
                self.running.insert(tag, ret);
            }
            Status::Fail => {
                if let Some(mut pre) = self.pre.get(&tag).cloned() {
                    if pre.get("changes").is_some_and(truthy) {
                        pre.insert("changes", Value::Object(Map::new()));
                    }
                    pre.insert("__run_num__", Value::from(self.run_num));
                    let low = &self.graph.chunks[ci];
                    stamp_identity(&mut pre, low);
                    self.running.insert(tag, pre);
                    self.run_num += 1;
                } else {
                    let mut failed: Vec<String> = Vec::new();
                    for (_, deps) in &reqs {
                        for &dep in deps {
                            let dtag = self.graph.tag(dep).to_string();
                            let dret = self.pre.get(&dtag).or_else(|| self.running.get(&dtag));
                            if let Some(dret) = dret {
                                if dret.get("result") == Some(&Value::Bool(false)) {
                                    let d = &self.graph.chunks[dep];
                                    let key = format!("{}.{}", d.sls(), d.shown_id());
                                    if !failed.contains(&key) {
                                        failed.push(key);
                                    }
                                }
                            }
                        }
                    }
                    let comment = format!("One or more requisite failed: {}", failed.join(", "));
                    self.not_run(ci, &tag, false, &comment);
                }
            }
            Status::Change if !prereq => {
                let mut ret = self.call(ci, None);
                if !has_changes(&ret) && !ret.get("skip_watch").is_some_and(truthy) {
                    let mut reqs_map = Map::new();
                    // Salt's `__reqs__` holds every requisite kind; the
                    // mod_watch functions read the watch ones only, so only
                    // those are built (a fan-in state requires many more).
                    for (kind, deps) in reqs
                        .iter()
                        .filter(|(k, _)| k.base() == RequisiteKind::Watch)
                    {
                        let list: Vec<Value> = deps
                            .iter()
                            .map(|&d| {
                                // Salt passes the whole low chunk; mod_watch
                                // functions read only who it is and its
                                // changes, so a whole clone (requisite lists
                                // and all, per edge) would be wasted.
                                let low = &self.graph.chunks[d];
                                let mut m = Map::with_capacity(7);
                                for key in ["state", "__id__", "name", "fun", "__sls__", "__env__"]
                                {
                                    if let Some(v) = low.get(key) {
                                        m.insert(key.into(), v.clone());
                                    }
                                }
                                let dtag = self.graph.tag(d).to_string();
                                let changes = self
                                    .running
                                    .get(&dtag)
                                    .and_then(|r| r.get("changes").cloned())
                                    .unwrap_or(Value::Object(Map::new()));
                                m.insert("__changes__".into(), changes);
                                Value::Object(m)
                            })
                            .collect();
                        reqs_map.insert(kind.keyword().into(), Value::Array(list));
                    }
                    ret = self.call(ci, Some(reqs_map));
                }
                self.running.insert(tag, ret);
            }
            Status::Pre => self.not_run(ci, &tag, true, "No changes detected"),
            Status::Onfail => self.not_run(
                ci,
                &tag,
                true,
                "State was not run because onfail req did not change",
            ),
            Status::Onchanges => self.not_run(
                ci,
                &tag,
                true,
                "State was not run because none of the onchanges reqs changed",
            ),
            Status::SkipWatch | Status::Change => {
                let ret = self.call(ci, None);
                self.store(tag, prereq, ret);
            }
        }
        // The tag was moved into the records: read it from the graph.
        let tag = self.graph.tag(ci);
        let in_flight = self.pool.as_ref().is_some_and(|p| p.pending.contains(tag));
        if let (false, Some(ret)) = (in_flight, self.running.get(tag)) {
            self.fire_events(ci, ret);
        }
    }

    pub(super) fn store(&mut self, tag: String, prereq: bool, ret: StateReturn) {
        if prereq {
            self.pre.insert(tag, ret);
        } else {
            self.running.insert(tag, ret);
        }
    }

    /// The environment states run in now: the host's, or the one a
    /// `reload_grains` / `reload_pillar` state left.
    pub(super) fn env(&self) -> &dyn StateEnv {
        match &self.refreshed {
            Some(env) => env.as_ref(),
            None => self.env,
        }
    }
}
