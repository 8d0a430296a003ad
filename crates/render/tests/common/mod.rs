//! Shared fixtures: a template tree in a temp dir, read through a real
//! `TemplateSource`, and a small set of host functions.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use halite_render::{Map, RenderContext, SaltFunctions, TemplateSource, Value};
use serde_json::json;

/// Reads templates from a directory, as a master's file_roots would.
pub struct DirSource {
    pub root: PathBuf,
}

impl TemplateSource for DirSource {
    fn get(&self, path: &str, _saltenv: &str) -> Result<Option<String>, String> {
        if path.split('/').any(|p| p == "..") {
            return Err(format!("refusing path outside the file root: {path}"));
        }
        match std::fs::read_to_string(self.root.join(path)) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Host functions: `test.echo`, `cmd.run` (really runs `sh -c`), and
/// `test.fail` which always fails.
pub struct HostFunctions;

impl SaltFunctions for HostFunctions {
    fn has(&self, fun: &str) -> bool {
        matches!(fun, "test.echo" | "cmd.run" | "test.fail" | "test.kwargs")
    }

    fn call(&self, fun: &str, args: &[Value], kwargs: &Map) -> Result<Value, String> {
        match fun {
            "test.echo" => Ok(args.first().cloned().unwrap_or(Value::Null)),
            "test.kwargs" => Ok(Value::Object(kwargs.clone())),
            "cmd.run" => {
                let command = args
                    .first()
                    .and_then(Value::as_str)
                    .ok_or("cmd.run needs a command")?;
                let output = std::process::Command::new("sh")
                    .arg("-c")
                    .arg(command)
                    .output()
                    .map_err(|e| e.to_string())?;
                Ok(Value::String(
                    String::from_utf8_lossy(&output.stdout)
                        .trim_end()
                        .to_string(),
                ))
            }
            "test.fail" => Err("the function failed on purpose".to_string()),
            other => Err(format!("'{other}' is not available")),
        }
    }
}

/// A file tree in a temp dir.
pub struct Tree {
    pub dir: tempfile::TempDir,
}

impl Tree {
    pub fn new(files: &[(&str, &str)]) -> Tree {
        let dir = tempfile::tempdir().expect("temp dir");
        for (path, text) in files {
            let full = dir.path().join(path);
            if let Some(parent) = full.parent() {
                std::fs::create_dir_all(parent).expect("mkdir");
            }
            std::fs::write(full, text).expect("write fixture");
        }
        Tree { dir }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// A context for rendering `sls` (read from `<sls as path>.sls`).
    pub fn context(&self, sls: &str, source_path: &str) -> RenderContext {
        RenderContext {
            grains: json!({"os": "Debian", "os_family": "Debian", "id": "web1", "saltversioninfo": [3008, 5],
                           "roles": ["web", "db"], "num_cpus": 2}),
            pillar: json!({"apache": {"port": 8080, "modules": ["ssl"]}, "users": {"alice": {"uid": 1001}},
                           "master": {"from_master": "m"}}),
            opts: json!({"__cli": "salt-call", "file_client": "local", "id": "web1"}),
            saltenv: "base".into(),
            sls: sls.into(),
            source_path: source_path.into(),
            extra: Map::new(),
            salt: Arc::new(HostFunctions),
            files: Arc::new(DirSource {
                root: self.root().to_path_buf(),
            }),
        }
    }

    /// Renders the SLS file at `path` (its SLS name derived from it).
    pub fn render_sls(&self, path: &str) -> Result<Value, halite_render::RenderError> {
        let sls = path
            .trim_end_matches(".sls")
            .trim_end_matches("/init")
            .replace('/', ".");
        let text = std::fs::read_to_string(self.root().join(path)).expect("read sls");
        halite_render::render_sls(&text, &self.context(&sls, path))
    }
}

/// Renders a Jinja snippet with the default context (no files).
pub fn jinja(text: &str) -> Result<String, halite_render::RenderError> {
    let tree = Tree::new(&[]);
    halite_render::render_text(text, "jinja", &tree.context("", ""))
}

/// Renders a snippet that must succeed.
pub fn ok(text: &str) -> String {
    match jinja(text) {
        Ok(out) => out,
        Err(e) => panic!("render of {text:?} failed: {e}"),
    }
}

/// Renders a snippet that must fail; returns the message.
pub fn err(text: &str) -> String {
    match jinja(text) {
        Ok(out) => panic!("render of {text:?} should fail, gave {out:?}"),
        Err(e) => e.to_string(),
    }
}
