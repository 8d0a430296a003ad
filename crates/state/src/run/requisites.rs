//! The status of a chunk's requisites, as Salt's `check_requisite`
//! computes it, and running the requisites not run yet.

use super::clock::now_time;
use super::invoke::stamp_identity;
use super::{has_changes, Executor, StateReturn};
use crate::module::truthy;
use crate::requisite::RequisiteKind;
use crate::value::{Map, Value};

/// A chunk's requisites grouped by kind, kinds in first-seen order.
pub(super) type ReqsByKind = Vec<(RequisiteKind, Vec<usize>)>;

/// What one requisite says about the chunk that requires it: Salt's
/// `req_stats` strings (`"met"`, `"onchangesmet"`...) as variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
enum Stat {
    /// Not run yet (`"unmet"`).
    Unmet = 1 << 0,
    /// Failed (`"fail"`).
    Fail = 1 << 1,
    /// Marked `skip_req` (`"skip_req"`).
    SkipReq = 1 << 2,
    /// An `onfail` whose target succeeded (`"onfail"`).
    Onfail = 1 << 3,
    /// An `onchanges` whose target did not change (`"onchanges"`).
    Onchanges = 1 << 4,
    /// An `onchanges` whose target changed (`"onchangesmet"`).
    OnchangesMet = 1 << 5,
    /// A `watch` whose target changed (`"change"`).
    Change = 1 << 6,
    /// A `prereq` target that would change (`"pre"`).
    Pre = 1 << 7,
    /// A `prereq` target that would not (`"premet"`).
    PreMet = 1 << 8,
    /// Satisfied (`"met"`).
    Met = 1 << 9,
}

/// A set of [`Stat`]s: Salt keeps them in a list and only asks whether one
/// is in it, so a bit set says the same without allocating.
#[derive(Debug, Clone, Copy, Default)]
struct Stats(u16);

impl Stats {
    fn add(&mut self, s: Stat) {
        self.0 |= s as u16;
    }
    fn remove(&mut self, s: Stat) {
        self.0 &= !(s as u16);
    }
    fn has(self, s: Stat) -> bool {
        self.0 & s as u16 != 0
    }
    fn merge(&mut self, other: Stats) {
        self.0 |= other.0;
    }
}

/// What the requisites of a chunk decide, as Salt's `check_requisite`
/// returns it: run it, skip it, fail it, fire `mod_watch`...
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    Unmet,
    Fail,
    SkipReq,
    SkipWatch,
    Pre,
    Met,
    Onfail,
    Onchanges,
    Change,
}

impl<'a> Executor<'a> {
    pub(super) fn check_requisites(&self, ci: usize) -> (Status, ReqsByKind) {
        // A few kinds at most: a list in first-seen order, no hashing.
        let mut reqs: ReqsByKind = Vec::new();
        for (kind, dep) in self.graph.dependencies(ci) {
            match reqs.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, deps)) => deps.push(dep),
                None => reqs.push((kind, vec![dep])),
            }
        }
        let mut fun_stats = Stats::default();
        for (kind, deps) in &reqs {
            let base = kind.base();
            let mut req_stats = Stats::default();
            for &dep in deps {
                let tag = self.graph.tag(dep);
                let ret = if base == RequisiteKind::Prereq {
                    self.pre.get(tag)
                } else {
                    self.running.get(tag)
                };
                let Some(ret) = ret else {
                    req_stats.add(Stat::Unmet);
                    continue;
                };
                if ret.get("skip_req").is_some_and(truthy) {
                    req_stats.add(Stat::SkipReq);
                }
                let result = ret.get("result");
                let is_false = result == Some(&Value::Bool(false));
                if base == RequisiteKind::Onfail {
                    if result == Some(&Value::Bool(true)) {
                        req_stats.add(Stat::Onfail);
                        continue;
                    }
                } else if base == RequisiteKind::Onchanges {
                    if is_false || !has_changes(ret) {
                        req_stats.add(Stat::Onchanges);
                    } else {
                        req_stats.add(Stat::OnchangesMet);
                    }
                    continue;
                } else if is_false {
                    req_stats.add(Stat::Fail);
                    continue;
                }
                if base == RequisiteKind::Watch && has_changes(ret) {
                    req_stats.add(Stat::Change);
                    continue;
                }
                if base == RequisiteKind::Prereq {
                    if matches!(result, Some(Value::Null) | None) {
                        req_stats.add(Stat::PreMet);
                    } else {
                        req_stats.add(Stat::Pre);
                    }
                } else if ret.get("__state_ran__").map(truthy).unwrap_or(true) {
                    req_stats.add(Stat::Met);
                }
            }
            if kind.is_any() || *kind == RequisiteKind::Onfail {
                if req_stats.has(Stat::Met) || req_stats.has(Stat::Change) {
                    req_stats.remove(Stat::Fail);
                }
                if req_stats.has(Stat::OnchangesMet) {
                    req_stats.remove(Stat::Onchanges);
                    req_stats.remove(Stat::Fail);
                }
                if req_stats.has(Stat::Onfail) && req_stats.has(Stat::Met) {
                    req_stats.remove(Stat::Onfail);
                }
            }
            if *kind == RequisiteKind::OnfailAll && req_stats.has(Stat::Onfail) {
                req_stats.remove(Stat::Met);
            }
            fun_stats.merge(req_stats);
        }
        let has = |s: Stat| fun_stats.has(s);
        let status = if has(Stat::Unmet) {
            Status::Unmet
        } else if has(Stat::Fail) {
            Status::Fail
        } else if has(Stat::SkipReq) && (has(Stat::OnchangesMet) || has(Stat::PreMet)) {
            Status::SkipReq
        } else if has(Stat::SkipReq) && has(Stat::Change) {
            Status::SkipWatch
        } else if has(Stat::Pre) {
            if has(Stat::PreMet) {
                Status::Met
            } else {
                Status::Pre
            }
        } else if has(Stat::Onfail) && !has(Stat::OnchangesMet) {
            Status::Onfail
        } else if has(Stat::Onchanges) && !has(Stat::OnchangesMet) {
            Status::Onchanges
        } else if has(Stat::Change) {
            Status::Change
        } else if has(Stat::Onfail) {
            Status::Onfail
        } else {
            Status::Met
        };
        (status, reqs)
    }

    /// Runs the requisites of `ci` that have not run, then `ci`. Returns
    /// true when failhard stopped the run.
    pub(super) fn call_unmet_requisites(&mut self, ci: usize, tag: &str, depth: u32) -> bool {
        for (_, dep) in self.graph.dependencies(ci) {
            let dtag = self.graph.tag(dep).to_string();
            if !self.running.contains_key(&dtag) {
                self.call_chunk(dep, 0);
                if self.failhard_stop || self.check_failhard(dep) {
                    self.failhard_stop = true;
                    return true;
                }
            }
        }
        if self.is_prereq(ci) {
            let (status, _) = self.check_requisites(ci);
            if status == Status::Pre {
                let low = &self.graph.chunks[ci];
                let mut ret = StateReturn::new();
                ret.insert("changes", Value::Object(Map::new()));
                ret.insert("result", Value::Bool(true));
                ret.insert("duration", Value::from(0.0));
                ret.insert("start_time", Value::from(now_time()));
                ret.insert("comment", Value::from("No changes detected"));
                ret.insert("__run_num__", Value::from(self.run_num));
                ret.insert("__state_ran__", Value::Bool(false));
                stamp_identity(&mut ret, low);
                self.pre.insert(tag.to_string(), ret);
                self.run_num += 1;
            } else {
                let mut ret = self.call(ci, None);
                if !has_changes(&ret) && status == Status::Change {
                    let mut ch = Map::new();
                    ch.insert("watch".into(), Value::from("watch"));
                    ret.insert("changes", Value::Object(ch));
                    ret.insert("result", Value::Null);
                }
                self.pre.insert(tag.to_string(), ret);
            }
        } else if depth + 1 >= 20 {
            let low = &self.graph.chunks[ci];
            let mut ret = StateReturn::new();
            ret.insert("changes", Value::Object(Map::new()));
            ret.insert("result", Value::Bool(false));
            ret.insert("comment", Value::from("Recursive requisite found"));
            ret.insert("__run_num__", Value::from(self.run_num));
            stamp_identity(&mut ret, low);
            self.running.insert(tag.to_string(), ret);
        } else {
            self.call_chunk(ci, depth + 1);
        }
        if self.check_failhard(ci) {
            self.failhard_stop = true;
            return true;
        }
        false
    }
}
