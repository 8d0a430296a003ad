//! Salt's `salt.utils.dictupdate.merge` as pillar compilation uses it:
//! every rendered pillar SLS, every included SLS and every `ext_pillar`
//! source is folded into the pillar with the master's
//! `pillar_source_merging_strategy` (`smart`, `recurse`, `aggregate`,
//! `overwrite`, `none`) and `pillar_merge_lists`. Kept in one place so the
//! master's compiler, `halite-call --local` and a `file_client: local`
//! minion merge alike.

use halite_state::Value;

/// How pillar data is merged: the options Salt reads for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeOptions {
    /// `pillar_source_merging_strategy` (default `smart`).
    pub strategy: String,
    /// `renderer` (default `yaml`): `smart` becomes `aggregate` with `yamlex`.
    pub renderer: String,
    /// `pillar_merge_lists` (default false): lists under the same key are
    /// joined (new items appended) instead of replaced.
    pub merge_lists: bool,
}

impl Default for MergeOptions {
    fn default() -> Self {
        Self {
            strategy: "smart".into(),
            renderer: "yaml".into(),
            merge_lists: false,
        }
    }
}

impl MergeOptions {
    /// The merge options of the master's (or a local minion's) `opts`.
    pub fn from_opts(opts: &Value) -> Self {
        let text = |key: &str, default: &str| {
            opts.get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or(default)
                .to_string()
        };
        Self {
            strategy: text("pillar_source_merging_strategy", "smart"),
            renderer: text("renderer", "yaml"),
            merge_lists: opts
                .get("pillar_merge_lists")
                .is_some_and(halite_salt_rules::truth::python_bool),
        }
    }
}

/// `dictupdate.merge(a, b, strategy, renderer, merge_lists)`: `b` merged
/// over `a`, returned as a new value.
pub fn merge(a: &Value, b: &Value, opts: &MergeOptions) -> Value {
    let mut strategy = opts.strategy.as_str();
    if strategy == "smart" {
        let last = opts.renderer.rsplit('|').next().unwrap_or("");
        strategy = if last == "yamlex" || opts.renderer.starts_with("yamlex_") {
            "aggregate"
        } else {
            "recurse"
        };
    }
    match strategy {
        "recurse" => merge_recurse(a, b, opts.merge_lists),
        "aggregate" => aggregate_top(a, b),
        "overwrite" => {
            let mut a = a.clone();
            if let (Value::Object(am), Value::Object(bm)) = (&mut a, b) {
                for (k, v) in bm {
                    if let Some(slot) = am.get_mut(k) {
                        *slot = v.clone();
                    }
                }
            }
            merge_recurse(&a, b, opts.merge_lists)
        }
        // Salt: "there is only one pillar passed" (one top file): recurse,
        // without pillar_merge_lists.
        "none" => merge_recurse(a, b, false),
        other => {
            tracing::warn!("Unknown merging strategy '{other}', fallback to recurse");
            merge_recurse(a, b, false)
        }
    }
}

/// `merge_recurse`: a copy of `a` updated in depth by `b`.
fn merge_recurse(a: &Value, b: &Value, merge_lists: bool) -> Value {
    let mut out = a.clone();
    update(&mut out, b, merge_lists);
    out
}

/// `dictupdate.update`: mappings merged key by key, lists joined when
/// `merge_lists` (items of `upd` not already there appended), anything
/// else replaced by `upd`'s value.
fn update(dest: &mut Value, upd: &Value, merge_lists: bool) {
    let (Value::Object(d), Value::Object(u)) = (&mut *dest, upd) else {
        // Salt raises TypeError for non-dicts; pillar parts are always
        // mappings by the time they are merged, so the newer one wins.
        *dest = upd.clone();
        return;
    };
    for (key, val) in u {
        match (d.get_mut(key), val) {
            (Some(cur @ Value::Object(_)), Value::Object(_)) => update(cur, val, merge_lists),
            (Some(Value::Array(cur)), Value::Array(new)) if merge_lists => {
                for item in new {
                    if !cur.contains(item) {
                        cur.push(item.clone());
                    }
                }
            }
            _ => {
                d.insert(key.clone(), val.clone());
            }
        }
    }
}

/// `merge_aggregate` = yamlex's `merge_recursive(a, b, level=1)`: the top
/// mappings are aggregated (keys of both kept); below them two values are
/// aggregated only when both carry yamlex's `!aggregate` mark (lists joined
/// without duplicates, mappings merged), else a key both sides have takes
/// `b`'s value, mappings keeping only `b`'s keys (each merged the same way).
/// The marks below the top stay for the next merge; pillar compilation
/// strips them at the end (`pillar_render::compile_full`).
fn aggregate_top(a: &Value, b: &Value) -> Value {
    let mut merged = halite_render::yaml::yamlex::aggregate(a, b, 1);
    if let Value::Object(m) = &mut merged {
        m.shift_remove(halite_render::yaml::yamlex::MARK);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn opts(strategy: &str, merge_lists: bool) -> MergeOptions {
        MergeOptions {
            strategy: strategy.into(),
            merge_lists,
            ..MergeOptions::default()
        }
    }

    // Expected values are what Salt 3008.5's salt.utils.dictupdate.merge
    // returned for the same arguments (~/.venvs/salt, see docs/pillar.md).
    #[test]
    fn strategies_match_salts_dictupdate_merge() {
        let a = json!({"top": {"x": 1, "keep": 2, "deep": {"p": 1}}, "l": [1, 2], "only_a": 1});
        let b = json!({"top": {"x": 9, "deep": {"q": 2}}, "l": [2, 3], "only_b": 2});
        let cases = [
            (
                "smart",
                false,
                json!({"top": {"x": 9, "keep": 2, "deep": {"p": 1, "q": 2}}, "l": [2, 3], "only_a": 1, "only_b": 2}),
            ),
            (
                "recurse",
                true,
                json!({"top": {"x": 9, "keep": 2, "deep": {"p": 1, "q": 2}}, "l": [1, 2, 3], "only_a": 1, "only_b": 2}),
            ),
            (
                "aggregate",
                false,
                json!({"top": {"x": 9, "deep": {"q": 2}}, "l": [2, 3], "only_a": 1, "only_b": 2}),
            ),
            (
                "overwrite",
                false,
                json!({"top": {"x": 9, "deep": {"q": 2}}, "l": [2, 3], "only_a": 1, "only_b": 2}),
            ),
            (
                "none",
                true,
                json!({"top": {"x": 9, "keep": 2, "deep": {"p": 1, "q": 2}}, "l": [2, 3], "only_a": 1, "only_b": 2}),
            ),
        ];
        for (strategy, lists, want) in cases {
            assert_eq!(merge(&a, &b, &opts(strategy, lists)), want, "{strategy}");
        }
    }
}
