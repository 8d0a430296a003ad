//! Top files: which SLS apply to which minion, per saltenv (Salt's
//! `get_tops` / `merge_tops` with the default `merge` strategy, and
//! `top_matches`).

use indexmap::IndexMap;

use crate::high::{Matches, SlsSource};
use crate::requisite::py_str;
use crate::target::{matches, MinionFacts};
use crate::value::{Map, Value};

/// Renders `top.sls` of every saltenv and merges them: the first top that
/// defines a saltenv wins it (`top_file_merging_strategy: merge`, with
/// `base` first).
pub fn get_top(source: &dyn SlsSource, envs: &[String]) -> Result<Map, Vec<String>> {
    get_top_worded(source, envs, |env, e| {
        format!("Rendering SLS '{env}:top' failed: {e}")
    })
}

/// [`get_top`], a top file's render error worded by `render_error(saltenv,
/// message)` (the pillar's top says `Rendering Primary Top file failed`).
pub fn get_top_worded(
    source: &dyn SlsSource,
    envs: &[String],
    render_error: impl Fn(&str, &str) -> String,
) -> Result<Map, Vec<String>> {
    let mut ordered: Vec<&String> = envs.iter().filter(|e| e.as_str() == "base").collect();
    ordered.extend(envs.iter().filter(|e| e.as_str() != "base"));
    let mut merged = Map::new();
    let mut errors = Vec::new();
    for env in ordered {
        match source.render("top", env) {
            Ok(Some(r)) => match r.data {
                Value::Object(m) => {
                    for (saltenv, body) in m {
                        if saltenv == "include" {
                            continue;
                        }
                        if !merged.contains_key(&saltenv) {
                            merged.insert(saltenv, body);
                        }
                    }
                }
                Value::Null => {}
                _ => errors.push(format!(
                    "Top file in saltenv '{env}' does not render to a dictionary"
                )),
            },
            Ok(None) => {}
            Err(e) => errors.push(render_error(env, &e)),
        }
    }
    if errors.is_empty() {
        Ok(merged)
    } else {
        Err(errors)
    }
}

/// Salt's `top_matches`: the SLS each saltenv applies to this minion.
pub fn top_matches(
    top: &Map,
    facts: &MinionFacts<'_>,
    only_env: Option<&str>,
) -> Result<Matches, Vec<String>> {
    let mut out: Matches = IndexMap::new();
    let mut errors = Vec::new();
    for (saltenv, body) in top {
        if only_env.is_some_and(|e| e != saltenv) {
            continue;
        }
        let Value::Object(body) = body else {
            errors.push(format!(
                "Top data for saltenv '{saltenv}' is not a dictionary"
            ));
            continue;
        };
        for (tgt, data) in body {
            let items: Vec<Value> = match data {
                Value::Array(a) => a.clone(),
                Value::String(s) => vec![Value::from(s.clone())],
                _ => continue,
            };
            // Salt's `confirm_top`: a target without `match:` is compound.
            let mut tgt_type = "compound".to_string();
            for item in &items {
                if let Value::Object(m) = item {
                    if let Some(t) = m.get("match") {
                        tgt_type = py_str(t);
                    }
                }
            }
            let hit = match tgt_type.as_str() {
                "nodegroup" => false,
                t => match matches(&Value::from(tgt.clone()), t, facts) {
                    Ok(b) => b,
                    Err(e) => {
                        errors.push(e.to_string());
                        false
                    }
                },
            };
            if !hit {
                continue;
            }
            let list = out.entry(saltenv.clone()).or_default();
            for item in items {
                if let Value::String(s) = item {
                    if !list.contains(&s) {
                        list.push(s);
                    }
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}
