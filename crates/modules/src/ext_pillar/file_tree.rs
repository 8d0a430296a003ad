//! `file_tree` (Salt's salt/pillar/file_tree.py): every file under
//! `<root_dir>/hosts/<minion id>/` becomes a pillar key whose value is the
//! file's content, directories becoming nested mappings.

use std::path::{Path, PathBuf};

use halite_state::Value;
use serde_json::Map;

use crate::pillar_source::{PillarPart, PillarSource};
use crate::Host;

/// One `file_tree` entry of `ext_pillar`, with Salt's options.
pub struct FileTree {
    root_dir: String,
    follow_dir_links: bool,
    /// `keep_newline`: `true`/`false`, or globs of `<dir>/<file>` paths
    /// (relative to the host's directory) that keep their last newline.
    keep_newline: Value,
    render_default: Option<String>,
    blacklist: Vec<String>,
    whitelist: Vec<String>,
    template: bool,
    position: usize,
}

impl FileTree {
    /// The source configured by `conf` (the entry's mapping) at `position`.
    pub fn new(conf: &Value, position: usize) -> Self {
        let s = |k: &str| conf.get(k).and_then(Value::as_str).map(str::to_string);
        let b = |k: &str| {
            conf.get(k)
                .is_some_and(halite_salt_rules::truth::python_bool)
        };
        let list = |k: &str| match conf.get(k) {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            Some(Value::String(s)) => s.split(',').map(|x| x.trim().to_string()).collect(),
            _ => Vec::new(),
        };
        Self {
            root_dir: s("root_dir").unwrap_or_default(),
            follow_dir_links: b("follow_dir_links"),
            keep_newline: conf
                .get("keep_newline")
                .cloned()
                .unwrap_or(Value::Bool(false)),
            render_default: s("render_default"),
            blacklist: list("renderer_blacklist"),
            whitelist: list("renderer_whitelist"),
            template: conf.get("template") == Some(&Value::Bool(true)),
            position,
        }
    }

    /// The directories to read: `root_dir` itself, or when relative, under
    /// each `pillar_roots` directory of the `pillarenv` (as Salt does).
    fn roots(&self, opts: &Value) -> Result<Vec<PathBuf>, String> {
        if self.root_dir.is_empty() {
            return Err("Failed to load ext_pillar file_tree: no root_dir specified".into());
        }
        let root = Path::new(&self.root_dir);
        if root.is_absolute() {
            return Ok(vec![root.to_path_buf()]);
        }
        let Some(env) = opts.get("pillarenv").and_then(Value::as_str) else {
            return Err(format!(
                "Failed to load ext_pillar file_tree: root_dir '{}' is relative but pillarenv is not set",
                self.root_dir
            ));
        };
        let Some(Value::Array(dirs)) = opts.get("pillar_roots").and_then(|r| r.get(env)) else {
            return Err(format!(
                "Failed to load ext_pillar file_tree: root_dir is relative but no pillar_roots are specified for pillarenv {env}"
            ));
        };
        Ok(dirs
            .iter()
            .filter_map(Value::as_str)
            .map(|d| Path::new(d).join(root))
            .collect())
    }

    /// Whether the file at `rel` (relative to the host directory) drops its
    /// one trailing newline.
    fn strips_newline(&self, rel: &str) -> bool {
        match &self.keep_newline {
            Value::Array(globs) => !globs
                .iter()
                .filter_map(Value::as_str)
                .any(|g| halite_salt_rules::fnmatch(rel, g)),
            other => !halite_salt_rules::truth::python_bool(other),
        }
    }

    /// The file's content as its pillar value, rendered when `template`.
    fn value_of(&self, host: &Host, path: &Path, rel: &str) -> Result<Value, String> {
        let mut bytes = std::fs::read(path).map_err(|e| {
            format!(
                "Failed to load ext_pillar file_tree: cannot read {}: {e}",
                path.display()
            )
        })?;
        if bytes.ends_with(b"\n") && self.strips_newline(rel) {
            bytes.pop();
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if !self.template {
            return Ok(Value::String(text));
        }
        let pipeline: Vec<&str> = self
            .render_default
            .as_deref()
            .unwrap_or("jinja")
            .split('|')
            .map(str::trim)
            .filter(|r| !self.blacklist.iter().any(|b| b == r))
            .filter(|r| self.whitelist.is_empty() || self.whitelist.iter().any(|w| w == r))
            .collect();
        let ctx = host.render_context("base", "", &path.display().to_string(), Default::default());
        let fail = |e: halite_render::RenderError| {
            format!(
                "Failed to load ext_pillar file_tree: rendering {} failed: {e}",
                path.display()
            )
        };
        match pipeline.as_slice() {
            [] => Ok(Value::String(text)),
            ["jinja"] => halite_render::render_text(&text, "jinja", &ctx)
                .map(Value::String)
                .map_err(fail),
            more => {
                let source = format!("#!{}\n{text}", more.join("|"));
                halite_render::render_sls(&source, &ctx).map_err(fail)
            }
        }
    }

    /// The pillar of one host directory.
    fn read_tree(
        &self,
        host: &Host,
        dir: &Path,
        rel: &str,
        out: &mut Map<String, Value>,
        errors: &mut Vec<String>,
    ) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            errors.push(format!(
                "Failed to load ext_pillar file_tree: cannot list {}",
                dir.display()
            ));
            return;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            let child_rel = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let is_link = entry.file_type().is_ok_and(|t| t.is_symlink());
            if path.is_dir() {
                if is_link && !self.follow_dir_links {
                    // os.walk lists it among the directories, does not descend.
                    out.insert(name, Value::Object(Map::new()));
                    continue;
                }
                let mut sub = Map::new();
                self.read_tree(host, &path, &child_rel, &mut sub, errors);
                out.insert(name, Value::Object(sub));
            } else if path.is_file() {
                match self.value_of(host, &path, &child_rel) {
                    Ok(v) => {
                        out.insert(name, v);
                    }
                    Err(e) => errors.push(e),
                }
            } else {
                tracing::error!("file_tree: {}: not a regular file", path.display());
            }
        }
    }
}

impl PillarSource for FileTree {
    fn name(&self) -> &str {
        "file_tree"
    }

    fn compile(&self, host: &Host) -> PillarPart {
        let id = host.opts.get("id").and_then(Value::as_str).unwrap_or("");
        let mut part = PillarPart {
            data: Value::Object(Map::new()),
            errors: Vec::new(),
        };
        let roots = match self.roots(&host.opts) {
            Ok(r) => r,
            Err(e) => {
                part.errors.push(e);
                return part;
            }
        };
        if id.is_empty() || id.contains('/') || id == ".." {
            return part;
        }
        for root in roots {
            if !root.is_dir() {
                tracing::error!(
                    "file_tree: root_dir {} does not exist or is not a directory",
                    root.display()
                );
                continue;
            }
            let host_dir = root.join("hosts").join(id);
            if !host_dir.is_dir() {
                continue;
            }
            let mut tree = Map::new();
            self.read_tree(host, &host_dir, "", &mut tree, &mut part.errors);
            let recurse = crate::pillar_merge::MergeOptions {
                strategy: "recurse".into(),
                ..Default::default()
            };
            part.data = crate::pillar_merge::merge(&part.data, &Value::Object(tree), &recurse);
        }
        part
    }

    fn position(&self) -> usize {
        self.position
    }
}
