//! Compiling a minion's pillar from `pillar_roots`: the pillar top file,
//! then each matched SLS rendered (Jinja + YAML) and deep-merged in order.

use halite_render::yaml::yamlex;
use halite_state::target::MinionFacts;
use halite_state::{SlsSource, Value};

use std::sync::Arc;

use halite_state::FileClient;

use crate::pillar_merge::{merge, MergeOptions};
use crate::pillar_source::PillarSource;
use crate::sls::FileSls;
use crate::Host;

/// The whole pillar of the minion `host` is for, as Salt's
/// `Pillar.compile_pillar` builds it: `pillar_roots` (served by
/// `pillar_files`, when any) and the `ext_pillar` `sources` in their order,
/// merged with `pillar_source_merging_strategy`/`pillar_merge_lists`; with
/// `ext_pillar_first` the sources come first and the SLS templates see
/// their data. `host.pillar` is the starting pillar (the options'
/// `pillar`). The master's compiler and the masterless paths both call this.
pub fn compile_full(
    host: &Host,
    pillar_files: Option<Arc<dyn FileClient>>,
    sources: &[Arc<dyn PillarSource>],
) -> (Value, Vec<String>) {
    compile_full_with(host, pillar_files, sources, &FreshRoots)
}

/// Where the `pillar_roots` part of a pillar compile may come from a
/// remembered compile with the same inputs (the master's pillar record,
/// issue 25): the `ext_pillar` sources always run, since their output can
/// change between jobs without any file changing.
pub trait RootsMemo {
    /// The `pillar_roots` pillar of `pillar_host` (its `pillar` is the
    /// starting pillar the templates see, its files the pillar tree):
    /// `compile()`'s result, or one remembered for the same inputs.
    fn roots(
        &self,
        pillar_host: &Host,
        compile: &mut dyn FnMut() -> (Value, Vec<String>),
    ) -> (Value, Vec<String>);
}

/// A [`RootsMemo`] that remembers nothing: every compile renders.
pub struct FreshRoots;

impl RootsMemo for FreshRoots {
    fn roots(
        &self,
        _pillar_host: &Host,
        compile: &mut dyn FnMut() -> (Value, Vec<String>),
    ) -> (Value, Vec<String>) {
        compile()
    }
}

/// [`compile_full`], with the `pillar_roots` part asked of `memo` first.
pub fn compile_full_with(
    host: &Host,
    pillar_files: Option<Arc<dyn FileClient>>,
    sources: &[Arc<dyn PillarSource>],
    memo: &dyn RootsMemo,
) -> (Value, Vec<String>) {
    let opts = MergeOptions::from_opts(&host.opts);
    let mut sources: Vec<&Arc<dyn PillarSource>> = sources.iter().collect();
    sources.sort_by_key(|s| s.position());
    let ext_first = host
        .opts
        .get("ext_pillar_first")
        .is_some_and(halite_salt_rules::truth::python_bool);
    let mut errors = Vec::new();
    // yamlex's !aggregate marks travel in the data while SLS are merged;
    // what templates and sources see, and the result, has none.
    let _marks = yamlex::keep_marks();
    let roots = |start: &Value, errors: &mut Vec<String>| -> Option<Value> {
        let files = pillar_files.clone()?;
        let mut pillar_host = host.clone();
        pillar_host.pillar = yamlex::strip(start.clone());
        pillar_host.files = files;
        let (compiled, errs) = memo.roots(&pillar_host, &mut || compile_pillar(&pillar_host));
        errors.extend(errs);
        Some(compiled)
    };
    let run_sources = |mut pillar: Value, errors: &mut Vec<String>| -> Value {
        for source in &sources {
            let mut source_host = host.clone();
            source_host.pillar = yamlex::strip(pillar.clone());
            let part = source.compile(&source_host);
            if part.errors.is_empty() {
                tracing::debug!(source = source.name(), "ext_pillar compiled");
            }
            errors.extend(part.errors);
            if part.data.as_object().is_some_and(|m| !m.is_empty()) {
                pillar = merge(&pillar, &part.data, &opts);
            }
        }
        pillar
    };
    let pillar = if ext_first {
        let ext = run_sources(host.pillar.clone(), &mut errors);
        match roots(&ext, &mut errors) {
            Some(compiled) => merge(&ext, &compiled, &opts),
            None => ext,
        }
    } else {
        let start = match roots(&host.pillar, &mut errors) {
            Some(compiled) => merge(&host.pillar, &compiled, &opts),
            None => host.pillar.clone(),
        };
        run_sources(start, &mut errors)
    };
    (yamlex::strip(pillar), errors)
}

/// Renders the pillar of `host` from the file roots of `pillar_host`
/// (a host whose file client serves `pillar_roots`). Returns the pillar
/// and the errors (Salt puts them under `_errors`).
pub fn compile_pillar(pillar_host: &Host) -> (Value, Vec<String>) {
    let source = FileSls::new(pillar_host);
    let pillarenv = pillarenv_of(&pillar_host.opts);
    let envs = top_envs(
        &pillar_host.opts,
        pillarenv.as_deref(),
        pillar_host.files.envs(),
    );
    let mut errors = Vec::new();
    let top = match halite_state::top::get_top_worded(&source, &envs, |_, e| {
        format!("Rendering Primary Top file failed, render error:\n{e}")
    }) {
        // Rendered while yamlex marks are kept for the pillar SLS merge:
        // a yamlex top file (`renderer: jinja|yamlex`) would carry them.
        Ok(t) => match yamlex::strip(Value::Object(t)) {
            Value::Object(t) => t,
            _ => Default::default(),
        },
        Err(e) => return (Value::Object(Default::default()), e),
    };
    let id = pillar_host
        .opts
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let empty = Value::Object(Default::default());
    let facts = MinionFacts {
        id: &id,
        grains: &pillar_host.grains,
        pillar: &empty,
    };
    let matches = match halite_state::top::top_matches(&top, &facts, None) {
        Ok(m) => m,
        Err(e) => return (Value::Object(Default::default()), e),
    };
    let opts = MergeOptions::from_opts(&pillar_host.opts);
    let safe = pillar_host
        .opts
        .get("pillar_safe_render_error")
        .is_none_or(halite_salt_rules::truth::python_bool);
    let mut pillar = Value::Object(Default::default());
    let mut seen = std::collections::HashSet::new();
    for (env, slses) in matches {
        // Salt's top_matches: with a pillarenv, other saltenvs are skipped.
        if pillarenv.as_deref().is_some_and(|p| p != env) {
            continue;
        }
        for sls in slses {
            let walk = Walk {
                source: &source,
                opts: &opts,
                safe,
            };
            if let Some(state) = walk.render(&sls, &env, &mut errors, &mut seen) {
                pillar = merge(&pillar, &state, &opts);
            }
        }
    }
    (pillar, errors)
}

/// The `pillarenv` of `opts`, or with `pillarenv_from_saltenv` the
/// `saltenv` (Salt's `Pillar.__init__`).
fn pillarenv_of(opts: &Value) -> Option<String> {
    let text = |k: &str| {
        opts.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    text("pillarenv").or_else(|| {
        opts.get("pillarenv_from_saltenv")
            .is_some_and(halite_salt_rules::truth::python_bool)
            .then(|| text("saltenv"))
            .flatten()
    })
}

/// The saltenvs whose pillar top files are read (Salt's `get_tops`): the
/// `pillarenv` alone when set, the `saltenv` (default `base`) alone with
/// `pillar_source_merging_strategy: none`, else every saltenv.
fn top_envs(opts: &Value, pillarenv: Option<&str>, envs: Vec<String>) -> Vec<String> {
    let only = match pillarenv {
        Some(p) => p.to_string(),
        None if opts
            .get("pillar_source_merging_strategy")
            .and_then(Value::as_str)
            == Some("none") =>
        {
            opts.get("saltenv")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or("base")
                .to_string()
        }
        None => return envs,
    };
    envs.into_iter().filter(|e| *e == only).collect()
}

/// One SLS walk: what renders it and how its includes are merged.
struct Walk<'a, 'h> {
    source: &'a FileSls<'h>,
    opts: &'a MergeOptions,
    /// `pillar_safe_render_error`: errors name the SLS, not the template.
    safe: bool,
}

impl Walk<'_, '_> {
    /// The data of `sls` with its includes merged under it (Salt's
    /// `render_pstate`: the included SLS first, the including one last, so
    /// its values win), or `None` when it gave nothing.
    fn render(
        &self,
        sls: &str,
        env: &str,
        errors: &mut Vec<String>,
        seen: &mut std::collections::HashSet<String>,
    ) -> Option<Value> {
        if !seen.insert(format!("{env}:{sls}")) {
            return None;
        }
        match self.source.render(sls, env) {
            Ok(None) => {
                errors.push(format!(
                    "Specified SLS '{sls}' in environment '{env}' is not available on the salt master"
                ));
                None
            }
            Err(e) => {
                if self.safe {
                    tracing::error!("Rendering SLS '{sls}' failed, render error:\n{e}");
                    errors.push(format!(
                        "Rendering SLS '{sls}' failed. Please see master log for details."
                    ));
                } else {
                    errors.push(format!("Rendering SLS '{sls}' failed, render error:\n{e}"));
                }
                None
            }
            Ok(Some(r)) => match r.data {
                Value::Object(mut m) => {
                    let mut merged: Option<Value> = None;
                    if let Some(Value::Array(incs)) = m.shift_remove("include") {
                        let names: Vec<String> = incs
                            .iter()
                            .flat_map(|inc| match inc {
                                Value::String(s) => vec![s.clone()],
                                Value::Object(o) => o.keys().cloned().collect(),
                                _ => Vec::new(),
                            })
                            .collect();
                        for name in names {
                            if let Some(inc) = self.render(&name, env, errors, seen) {
                                merged = Some(match merged {
                                    None => inc,
                                    Some(cur) => merge(&cur, &inc, self.opts),
                                });
                            }
                        }
                    }
                    let state = Value::Object(m);
                    Some(match merged {
                        None => state,
                        Some(cur) => merge(&cur, &state, self.opts),
                    })
                }
                Value::Null => None,
                _ => {
                    errors.push(format!("SLS '{sls}' does not render to a dictionary"));
                    None
                }
            },
        }
    }
}
