//! PillarStack (Salt's salt/pillar/stack.py): `ext_pillar: - stack: ...`.
//!
//! A stack config file lists YAML files (globs, relative to the config
//! file's directory; one per line, or a YAML list), each rendered with
//! Jinja and merged in order into the stack with the stack's own merge
//! strategies (`__: merge-last` (default), `merge-first`, `remove`,
//! `overwrite` as a mapping's key or a list's first item). The config files
//! come from the entry: a path, a list of paths, or a mapping of
//! `pillar:<key>` / `grains:<key>` / `opts:<key>` to `{value: cfg(s)}`
//! (`__env__` standing for the pillarenv). Templates see `stack` (what is
//! stacked so far), `pillar` (the pillar compiled before this source),
//! `minion_id`, `__opts__`, `__grains__`, `__stack__.cfg_path`,
//! `pillarenv` and, in the YAML files, `ymlpath`; as everywhere, `grains`,
//! `opts` and `salt[...]` too.
//!
//! The phases: [`Stack::config_files`] (resolve), [`Stack::process_cfg`]
//! (render and merge one config's files), [`merge_dict`]/[`merge_list`]
//! (the strategies).

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use halite_state::{Map, Value};

use crate::pillar_source::{PillarPart, PillarSource};
use crate::Host;

/// Salt's stack strategies.
const STRATEGIES: &[&str] = &["overwrite", "merge-first", "merge-last", "remove"];

/// One `stack` entry of `ext_pillar`.
pub struct Stack {
    conf: Value,
    position: usize,
}

impl Stack {
    /// The source configured by `conf` (the entry's value) at `position`.
    pub fn new(conf: &Value, position: usize) -> Self {
        Self {
            conf: conf.clone(),
            position,
        }
    }

    /// The stack config files for this minion, in order: the listed ones,
    /// then those the `pillar:`/`grains:`/`opts:` keys select.
    fn config_files(&self, host: &Host) -> Result<Vec<String>, String> {
        let opts = &host.opts;
        let pillarenv = ["pillarenv", "saltenv"]
            .iter()
            .filter_map(|k| opts.get(*k).and_then(Value::as_str))
            .find(|s| !s.is_empty())
            .unwrap_or("base")
            .to_string();
        let (listed, keyed): (Vec<Value>, Map) = match &self.conf {
            Value::Object(m) => (Vec::new(), m.clone()),
            Value::Array(a) => (a.clone(), Map::new()),
            Value::Null => (Vec::new(), Map::new()),
            other => (vec![other.clone()], Map::new()),
        };
        let mut files: Vec<String> = listed.iter().map(crate::exec::py_str).collect();
        for (matcher, matches) in &keyed {
            let Some((kind, key)) = matcher.split_once(':') else {
                return Err(format!(
                    "the key '{matcher}' must be pillar:<key>, grains:<key> or opts:<key>"
                ));
            };
            let data = match kind {
                "pillar" => &host.pillar,
                "grains" => &host.grains,
                "opts" => opts,
                other => {
                    return Err(format!(
                        "Unknown traverse option \"{other}\", should be one of pillar, grains, opts"
                    ))
                }
            };
            let Value::Object(matches) = matches else {
                return Err(format!("'{matcher}' must map values to stack config files"));
            };
            let Some(found) = crate::exec::pillar::traverse(data, key, ":") else {
                continue;
            };
            let found = crate::exec::py_str(found);
            let cfgs = matches
                .iter()
                .find(|(k, _)| {
                    let k = if *k == "__env__" { &pillarenv } else { *k };
                    *k == found
                })
                .map(|(_, v)| v);
            let cfgs = match cfgs {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a.clone(),
                Some(one) => vec![one.clone()],
            };
            files.extend(
                cfgs.iter()
                    .map(|c| crate::exec::py_str(c).replace("__env__", &pillarenv)),
            );
        }
        Ok(files)
    }

    /// Renders the config `cfg`, then each YAML file it lists (in glob
    /// order), merging each into `stack`.
    fn process_cfg(&self, host: &Host, cfg: &Path, stack: Value) -> Result<Value, String> {
        tracing::debug!("Pillar.stack config: {}", cfg.display());
        let basedir = cfg.parent().unwrap_or(Path::new("/")).to_path_buf();
        let text = std::fs::read_to_string(cfg)
            .map_err(|e| format!("cannot read stack config {}: {e}", cfg.display()))?;
        let ctx = self.context(host, &basedir, cfg, &stack, None);
        let listing = halite_render::render_text(&text, "jinja", &ctx).map_err(|e| {
            format!(
                "Stack pillar template render error in {}:\n\"{e}\"",
                cfg.display()
            )
        })?;
        let mut stack = stack;
        for item in parse_stack_cfg(&listing) {
            if item.trim().is_empty() {
                continue;
            }
            let pattern = basedir.join(&item);
            let options = glob::MatchOptions {
                require_literal_leading_dot: true,
                ..glob::MatchOptions::new()
            };
            let mut paths: Vec<PathBuf> = glob::glob_with(&pattern.to_string_lossy(), options)
                .map(|found| found.filter_map(Result::ok).collect())
                .unwrap_or_default();
            if paths.is_empty() {
                tracing::info!(
                    "Ignoring pillar stack template \"{item}\": can't find from root dir \"{}\"",
                    basedir.display()
                );
                continue;
            }
            paths.sort();
            for path in paths {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                let ctx = self.context(host, &basedir, cfg, &stack, Some(&path));
                let yaml = halite_render::render_text(&text, "jinja", &ctx).map_err(|e| {
                    format!(
                        "Stack pillar template render error in {}:\n\"{e}\"",
                        path.display()
                    )
                })?;
                // Salt adds the rendered text to this error; halite does
                // not, as it is pillar data.
                let obj = halite_render::yaml::load(&yaml).map_err(|e| {
                    format!(
                        "Stack pillar yaml parsing error in {}:\n{e}",
                        path.display()
                    )
                })?;
                if let Value::Object(obj) = obj {
                    stack = merge_dict(stack, obj)?;
                }
            }
        }
        Ok(stack)
    }

    /// The Jinja context of a stack config or YAML file.
    fn context(
        &self,
        host: &Host,
        basedir: &Path,
        cfg: &Path,
        stack: &Value,
        ymlpath: Option<&Path>,
    ) -> halite_render::RenderContext {
        let mut extra = Map::new();
        extra.insert("stack".into(), stack.clone());
        extra.insert(
            "minion_id".into(),
            host.opts.get("id").cloned().unwrap_or(Value::Null),
        );
        extra.insert("__opts__".into(), host.opts.clone());
        extra.insert("__grains__".into(), host.grains.clone());
        extra.insert(
            "__stack__".into(),
            serde_json::json!({"cfg_path": cfg.display().to_string()}),
        );
        extra.insert(
            "pillarenv".into(),
            host.opts.get("pillarenv").cloned().unwrap_or(Value::Null),
        );
        if let Some(p) = ymlpath {
            extra.insert("ymlpath".into(), Value::from(p.display().to_string()));
        }
        let source = ymlpath.unwrap_or(cfg).display().to_string();
        let mut ctx = host.render_context("base", "", &source, extra);
        ctx.files = Arc::new(BaseDirTemplates(basedir.to_path_buf()));
        ctx
    }
}

impl PillarSource for Stack {
    fn name(&self) -> &str {
        "stack"
    }

    fn compile(&self, host: &Host) -> PillarPart {
        let result = self.config_files(host).and_then(|cfgs| {
            let mut stack = Value::Object(Map::new());
            for cfg in cfgs {
                let path = Path::new(&cfg);
                if !path.is_file() {
                    tracing::info!("Ignoring pillar stack cfg \"{cfg}\": file does not exist");
                    continue;
                }
                stack = self.process_cfg(host, path, stack)?;
            }
            Ok(stack)
        });
        match result {
            Ok(data) => PillarPart {
                data,
                errors: Vec::new(),
            },
            Err(e) => {
                tracing::error!("Failed to load ext_pillar stack: {e}");
                PillarPart {
                    data: Value::Object(Map::new()),
                    errors: vec![format!("Failed to load ext_pillar stack: {e}")],
                }
            }
        }
    }

    fn position(&self) -> usize {
        self.position
    }
}

/// `{% include %}`/`{% import %}` in stack files: relative to the stack
/// config's directory (Salt's `FileSystemLoader(basedir)`), never above it.
struct BaseDirTemplates(PathBuf);

impl halite_render::TemplateSource for BaseDirTemplates {
    fn get(&self, path: &str, _saltenv: &str) -> Result<Option<String>, String> {
        let rel = Path::new(path.trim_start_matches('/'));
        if rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Ok(None);
        }
        match std::fs::read_to_string(self.0.join(rel)) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read {path}: {e}")),
        }
    }
}

/// `_parse_stack_cfg`: a YAML list, else one item per line.
fn parse_stack_cfg(content: &str) -> Vec<String> {
    if let Ok(Value::Array(items)) = halite_render::yaml::load(content) {
        return items.iter().map(crate::exec::py_str).collect();
    }
    content.lines().map(str::to_string).collect()
}

/// Python's `type()` of a value, for "types differ: overwrite".
fn py_type(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Number(n) if n.is_f64() => 2,
        Value::Number(_) => 3,
        Value::String(_) => 4,
        Value::Array(_) => 5,
        Value::Object(_) => 6,
    }
}

/// `_cleanup`: the strategy marks removed (a mapping's `__`, at any depth;
/// a list's leading `{__: ...}`).
fn cleanup(v: Value) -> Value {
    match v {
        Value::Object(mut m) => {
            m.shift_remove("__");
            Value::Object(m.into_iter().map(|(k, v)| (k, cleanup(v))).collect())
        }
        Value::Array(mut a) => {
            if a.first()
                .and_then(Value::as_object)
                .is_some_and(|m| m.contains_key("__"))
            {
                a.remove(0);
            }
            Value::Array(a)
        }
        other => other,
    }
}

/// A strategy mark's value, checked.
fn strategy_of(mark: Option<Value>) -> Result<String, String> {
    let s = match mark {
        None => return Ok("merge-last".into()),
        Some(v) => crate::exec::py_str(&v),
    };
    if STRATEGIES.contains(&s.as_str()) {
        Ok(s)
    } else {
        Err(format!(
            "Unknown strategy \"{s}\", should be one of ('overwrite', 'merge-first', 'merge-last', 'remove')"
        ))
    }
}

/// `_merge_dict`: `obj` merged into `stack` with `obj`'s strategy.
pub fn merge_dict(stack: Value, mut obj: Map) -> Result<Value, String> {
    let strategy = strategy_of(obj.shift_remove("__"))?;
    if strategy == "overwrite" {
        return Ok(cleanup(Value::Object(obj)));
    }
    let mut stack = match stack {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    for (k, v) in obj {
        if strategy == "remove" {
            stack.shift_remove(&k);
            continue;
        }
        let Some(current) = stack.get(&k).cloned() else {
            stack.insert(k, cleanup(v));
            continue;
        };
        // merge-first is merge-last the other way round: the stacked value
        // is merged over the new one.
        let (base, v) = if strategy == "merge-first" {
            (cleanup(v), current)
        } else {
            (current, v)
        };
        let merged = if py_type(&base) != py_type(&v) {
            tracing::debug!("Force overwrite, types differ");
            cleanup(v)
        } else {
            match v {
                Value::Object(m) => merge_dict(base, m)?,
                Value::Array(a) => merge_list(base, a)?,
                scalar => scalar,
            }
        };
        stack.insert(k, merged);
    }
    Ok(Value::Object(stack))
}

/// `_merge_list`: `obj` merged into `stack` with the strategy of `obj`'s
/// leading `{__: ...}` item.
fn merge_list(stack: Value, mut obj: Vec<Value>) -> Result<Value, String> {
    let mark = obj
        .first()
        .and_then(Value::as_object)
        .and_then(|m| m.get("__"))
        .cloned();
    if mark.is_some() {
        obj.remove(0);
    }
    let strategy = strategy_of(mark)?;
    let stack = match stack {
        Value::Array(a) => a,
        _ => Vec::new(),
    };
    Ok(Value::Array(match strategy.as_str() {
        "overwrite" => obj,
        "remove" => stack.into_iter().filter(|i| !obj.contains(i)).collect(),
        "merge-first" => obj.into_iter().chain(stack).collect(),
        _ => stack.into_iter().chain(obj).collect(),
    }))
}
