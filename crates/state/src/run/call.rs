//! Calling one state: argument checks, `retry`, `prereq`'s test run,
//! `mod_watch`, and the refresh after `reload_*`.

use std::time::Instant;

use super::clock::{ms_since, now_time};
use super::invoke::{call_module, RunEnv};
use super::retry::{note_would_retry, RetrySpec};
use super::{py_result, Executor, ParallelJob, StateReturn};
use crate::chunk::LowChunk;
use crate::graph::chunk_tag;
use crate::module::truthy;
use crate::requisite::py_str;
use crate::value::{Map, Value};

impl<'a> Executor<'a> {
    pub(super) fn verify_data(&self, low: &LowChunk) -> Vec<String> {
        let mut errors = Vec::new();
        if !low.contains("state") {
            errors.push("Missing \"state\" data".to_string());
        }
        if !low.contains("fun") {
            errors.push("Missing \"fun\" data".to_string());
        }
        match low.get("name") {
            None => errors.push("Missing \"name\" data".to_string()),
            Some(Value::String(_)) | Some(Value::Null) => {}
            Some(v) if !truthy(v) => {}
            Some(v) => errors.push(format!(
                "ID '{}' in SLS '{}' is not formed as a string, but is a {}",
                py_str(v),
                low.sls(),
                crate::module::type_name(v)
            )),
        }
        if !errors.is_empty() {
            return errors;
        }
        if !self.modules.has(low.state(), low.fun()) {
            let full = format!("{}.{}", low.state(), low.fun());
            if low.contains("__sls__") {
                errors.push(format!(
                    "State '{full}' was not found in SLS '{}'",
                    low.sls()
                ));
                errors.push(format!("Reason: '{full}' is not available."));
            } else {
                errors.push(format!("Specified state '{full}' was not found"));
            }
        }
        errors
    }

    /// Salt's `State.call`: one state function, with unless/onlyif/creates,
    /// check_cmd and retry. `watch_reqs` set means this is the `mod_watch`
    /// call of a watching state.
    pub(super) fn call(&mut self, ci: usize, watch_reqs: Option<Map>) -> StateReturn {
        self.call_attempt(ci, watch_reqs, 1)
    }

    /// Salt's `check_refresh`: after a state with `reload_grains` or
    /// `reload_pillar` (whatever its result or changes), the states after
    /// it see grains detected again / the pillar compiled again. Called
    /// where Salt's `State.call` calls it: after each attempt's
    /// bookkeeping, so not for a prereq test run or a chunk that failed
    /// verification; `parallel: True` states keep the environment the run
    /// started with.
    pub(super) fn check_refresh(&mut self, ci: usize) {
        let low = &self.graph.chunks[ci];
        let grains = low.get("reload_grains").is_some_and(truthy);
        let pillar = low.get("reload_pillar").is_some_and(truthy);
        if !grains && !pillar {
            return;
        }
        match self
            .env()
            .refreshed(grains, pillar, self.opts.pillar_override.as_ref())
        {
            Some(env) => self.refreshed = Some(env),
            None => tracing::debug!("this run's environment cannot reload grains or pillar"),
        }
    }

    pub(super) fn call_attempt(
        &mut self,
        ci: usize,
        watch_reqs: Option<Map>,
        attempt: u64,
    ) -> StateReturn {
        let start = Instant::now();
        let start_time = now_time();
        // The chunk is taken out of the graph for the call (no per-call
        // clone) and put back before anything else reads it.
        let low = std::mem::take(&mut self.graph.chunks[ci]);
        let outcome = self.call_once(&low, watch_reqs.as_ref());
        let prereq = low.get("__prereq__") == Some(&Value::Bool(true));
        let retry = low.get("retry").map(RetrySpec::from_value);
        let sls = low.get("__sls__").cloned().unwrap_or(Value::Null);
        // Salt's `if low.get("no_log")`: Python truthiness.
        let no_log = low
            .get("no_log")
            .is_some_and(halite_salt_rules::truth::python_bool);
        let id = Value::from(low.id());
        self.graph.chunks[ci] = low;
        let mut ret = match outcome {
            Ok(ret) => ret,
            Err(early) => return early,
        };
        if prereq {
            self.graph.chunks[ci].insert("__prereq__", Value::Bool(false));
            return ret;
        }
        ret.insert("__sls__", sls);
        ret.insert("__run_num__", Value::from(self.run_num));
        self.run_num += 1;
        if no_log {
            no_log_mask(&mut ret);
        }
        ret.insert("start_time", Value::from(start_time));
        ret.insert("duration", Value::from(ms_since(start)));
        ret.insert("__id__", id);
        self.check_refresh(ci);
        let Some(retry) = retry else { return ret };
        if self
            .pool
            .as_ref()
            .is_some_and(|p| p.pending.contains(self.graph.tag(ci)))
        {
            // A parallel state retries inside its worker.
            return ret;
        }
        if self.opts.test {
            note_would_retry(&mut ret, &retry);
            return ret;
        }
        let result = ret.get("result").and_then(Value::as_bool);
        if result == Some(retry.until) || retry.attempts <= attempt {
            return ret;
        }
        let interval = retry.pause();
        let orig = ret;
        let mut again = self.call_attempt(ci, None, attempt + 1);
        let orig_comment = orig.get("comment").map(py_str).unwrap_or_default();
        let new_comment = again.get("comment").map(py_str).unwrap_or_default();
        again.insert("comment",
            Value::from(format!(
                "Attempt {attempt}: Returned a result of \"{}\", with the following comment: \"{orig_comment}\"\n{new_comment}",
                py_result(orig.get("result")),
            )),
        );
        let d = again.get("duration").and_then(Value::as_f64).unwrap_or(0.0)
            + orig.get("duration").and_then(Value::as_f64).unwrap_or(0.0)
            + (interval * 1000) as f64;
        again.insert("duration", Value::from(d));
        if attempt == 1 {
            if let Some(st) = orig.get("start_time") {
                again.insert("start_time", st.clone());
            }
        }
        again
    }

    /// Runs the checks and the state function once. `Err` is Salt's early
    /// return for a chunk that fails verification (it takes a run number
    /// but none of the bookkeeping keys).
    pub(super) fn call_once(
        &mut self,
        low: &LowChunk,
        watch_reqs: Option<&Map>,
    ) -> Result<StateReturn, StateReturn> {
        let errors = self.verify_data(low);
        if !errors.is_empty() {
            let mut ret = StateReturn::new();
            ret.insert("result", Value::Bool(false));
            ret.insert("name", low.get("name").cloned().unwrap_or(Value::Null));
            ret.insert("changes", Value::Object(Map::new()));
            ret.insert(
                "comment",
                Value::from(errors.iter().map(|e| format!("{e}\n")).collect::<String>()),
            );
            ret.insert("__run_num__", Value::from(self.run_num));
            self.run_num += 1;
            return Err(ret);
        }
        let prereq = low.get("__prereq__") == Some(&Value::Bool(true));
        let test = self.opts.test || prereq || low.get("test").is_some_and(truthy);
        // Without unless/onlyif/creates the state function runs and its
        // return replaces this map, so it is only built for the checks.
        let mut ret = StateReturn::new();
        let checked = ["unless", "onlyif", "creates"]
            .iter()
            .any(|k| low.contains(k));
        if checked {
            ret.insert("result", Value::Bool(false));
            ret.insert("name", low.get("name").cloned().unwrap_or(Value::Null));
            ret.insert("changes", Value::Object(Map::new()));
            for (k, v) in self.run_check(low) {
                ret.insert(k, v);
            }
        }
        let pending = !checked || ret.get("result") == Some(&Value::Bool(false));
        let parallel = !prereq && watch_reqs.is_none() && low.get("parallel").is_some_and(truthy);
        if parallel && pending {
            if let Some(pool) = self.pool.as_mut() {
                let tag = chunk_tag(low);
                let job = ParallelJob {
                    tag: tag.clone(),
                    low: low.clone(),
                    test,
                };
                if pool.jobs.send(job).is_ok() {
                    pool.pending.insert(tag);
                    let mut placeholder = StateReturn::new();
                    placeholder.insert("name", low.get("name").cloned().unwrap_or(Value::Null));
                    placeholder.insert("result", Value::Null);
                    placeholder.insert("changes", Value::Object(Map::new()));
                    placeholder.insert("comment", Value::from("Started in a separate process"));
                    return Ok(placeholder);
                }
            }
        }
        if pending {
            ret = match watch_reqs {
                Some(reqs) => {
                    let mut watch_low = low.clone();
                    watch_low.insert("fun", Value::from("mod_watch"));
                    self.call_module(&watch_low, test, Some(low.fun()), Some(reqs))
                }
                None => self.call_module(low, test, None, None),
            };
        }
        let own_check = || {
            self.modules
                .get(low.state())
                .is_some_and(|m| m.runs_own_check_cmd(low.fun()))
        };
        if low.contains("check_cmd") && !own_check() {
            for (k, v) in self.run_check_cmd(low) {
                ret.insert(k, v);
            }
        }
        Ok(ret)
    }

    pub(super) fn call_module(
        &self,
        low: &LowChunk,
        test: bool,
        sfun: Option<&str>,
        reqs: Option<&Map>,
    ) -> StateReturn {
        let env = RunEnv {
            inner: self.env(),
            lowstate: &self.graph.chunks,
            accumulators: &self.accumulators,
            modules: self.modules,
            running: Some(&self.running),
        };
        call_module(self.modules, &env, low, test, sfun, reqs)
    }
}

/// Salt's `no_log_mask` for a state with `no_log: True`: its `name`,
/// `comment` and `changes` shown as `**********` leaf by leaf (Salt's
/// `secret.serial`), before the return is logged, fired or stored. The
/// state's key keeps its name, as in Salt.
fn no_log_mask(ret: &mut StateReturn) {
    for key in ["name", "comment", "changes"] {
        if let Some(value) = ret.get(key) {
            let masked = halite_salt_rules::secret::serial(value);
            ret.insert(key, masked);
        }
    }
}
