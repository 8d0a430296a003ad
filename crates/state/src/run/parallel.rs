//! `parallel: True` states: run on a worker pool while the rest of the
//! run goes on; a state that depends on one waits for it.

use std::time::Instant;

use super::clock::{ms_since, now_time};
use super::invoke::call_module;
use super::retry::{note_would_retry, RetrySpec};
use super::{py_result, Executor, ParallelJob, Pool, StateReturn};
use crate::module::{StateEnv, StateModules};
use crate::requisite::py_str;
use crate::value::Value;

impl<'a> Executor<'a> {
    /// Runs `order` with its `parallel: True` states on a worker pool; the
    /// rest of the run goes on, and a state that depends on a running one
    /// waits for it.
    pub(super) fn run_on_pool(&mut self, order: &[usize]) {
        let workers = self
            .env
            .opts()
            .get("state_max_parallel")
            .and_then(Value::as_u64)
            .filter(|n| *n > 0)
            .unwrap_or(8) as usize;
        let modules = self.modules;
        let env = self.env;
        let (job_tx, job_rx) = std::sync::mpsc::channel::<ParallelJob>();
        let job_rx = std::sync::Mutex::new(job_rx);
        let (res_tx, res_rx) = std::sync::mpsc::channel::<(String, StateReturn)>();
        std::thread::scope(|scope| {
            for _ in 0..workers {
                let res_tx = res_tx.clone();
                let job_rx = &job_rx;
                scope.spawn(move || loop {
                    let job = match job_rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok(job) = job else { return };
                    let ret = run_parallel_job(modules, env, &job);
                    if res_tx.send((job.tag, ret)).is_err() {
                        return;
                    }
                });
            }
            drop(res_tx);
            self.pool = Some(Pool {
                jobs: job_tx,
                results: res_rx,
                pending: Default::default(),
            });
            self.run_all(order);
            self.wait_parallel(None);
            // Dropping the pool closes the job channel: the workers exit.
            self.pool = None;
        });
    }

    /// Waits for the parallel states in `tags` (all when `None`) and
    /// merges their results into the running dict, as Salt's
    /// `reconcile_procs` does.
    pub(super) fn wait_parallel(&mut self, tags: Option<&[String]>) {
        loop {
            let Some(pool) = self.pool.as_mut() else {
                return;
            };
            let waiting = match tags {
                None => !pool.pending.is_empty(),
                Some(t) => t.iter().any(|t| pool.pending.contains(t)),
            };
            if !waiting {
                return;
            }
            let Ok((tag, ret)) = pool.results.recv() else {
                // Workers gone: fail what is still pending rather than hang.
                let left: Vec<String> = pool.pending.drain().collect();
                for tag in left {
                    if let Some(r) = self.running.get_mut(&tag) {
                        r.insert("result", Value::Bool(false));
                        r.insert("comment", Value::from("Parallel process failed to return"));
                    }
                }
                return;
            };
            pool.pending.remove(&tag);
            if let Some(r) = self.running.get_mut(&tag) {
                for (k, v) in ret {
                    r.insert(k, v);
                }
            }
            if let (Some(ci), Some(r)) = (self.graph.chunk_index(&tag), self.running.get(&tag)) {
                let r = r.clone();
                self.fire_events(ci, &r);
            }
        }
    }
}

/// Runs one parallel job: the state function, with `retry` applied in the
/// worker as Salt's `_call_parallel_target` does.
pub(super) fn run_parallel_job(
    modules: &StateModules,
    env: &dyn StateEnv,
    job: &ParallelJob,
) -> StateReturn {
    let start = Instant::now();
    let start_time = now_time();
    let mut ret = call_module(modules, env, &job.low, job.test, None, None);
    if let Some(retry) = job.low.get("retry").map(RetrySpec::from_value) {
        let mut attempt = 1;
        if job.test {
            note_would_retry(&mut ret, &retry);
        } else {
            while retry.attempts >= attempt
                && ret.get("result").and_then(Value::as_bool) != Some(retry.until)
            {
                retry.pause();
                let orig = ret;
                ret = call_module(modules, env, &job.low, job.test, None, None);
                let c = ret.get("comment").map(py_str).unwrap_or_default();
                let note = if c.is_empty() {
                    String::new()
                } else {
                    format!(
                        "Attempt {attempt}: Returned a result of \"{}\", with the following comment: \"{c}\"",
                        py_result(ret.get("result"))
                    )
                };
                ret.insert(
                    "comment",
                    Value::from(format!(
                        "{}\n{note}",
                        orig.get("comment").map(py_str).unwrap_or_default()
                    )),
                );
                attempt += 1;
            }
        }
    }
    ret.insert("start_time", Value::from(start_time));
    ret.insert("duration", Value::from(ms_since(start)));
    ret.insert("__parallel__", Value::Bool(true));
    ret
}
