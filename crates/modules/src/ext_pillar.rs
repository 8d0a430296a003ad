//! The `ext_pillar` sources halite runs itself (Salt's
//! salt/pillar/cmd_json.py, cmd_yaml.py, file_tree.py, stack.py), built from the
//! master's `ext_pillar` option. `git` entries are built by halite-gitfs;
//! an entry naming another interface is logged as Salt logs it ("Specified
//! ext_pillar interface X is unavailable") and left out.

use std::sync::Arc;

use halite_state::{CmdOptions, Value};

use crate::pillar_source::{PillarPart, PillarSource};
use crate::Host;

mod file_tree;
mod stack;

pub use file_tree::FileTree;
pub use stack::Stack;

/// The interfaces built elsewhere (halite-gitfs builds `git`).
const BUILT_ELSEWHERE: &[&str] = &["git"];

/// Every `ext_pillar` entry of `opts` that this module runs, in order,
/// each knowing its position in the list.
pub fn sources_from_opts(opts: &Value) -> Vec<Arc<dyn PillarSource>> {
    let entries = match opts.get("ext_pillar") {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(entries)) => entries,
        Some(_) => return vec![Arc::new(Malformed)],
    };
    let mut out: Vec<Arc<dyn PillarSource>> = Vec::new();
    let excluded: Vec<&str> = match opts.get("exclude_ext_pillar") {
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    for (position, entry) in entries.iter().enumerate() {
        let Value::Object(map) = entry else {
            out.push(Arc::new(Malformed));
            continue;
        };
        for (key, val) in map {
            if excluded.contains(&key.as_str()) || BUILT_ELSEWHERE.contains(&key.as_str()) {
                continue;
            }
            match key.as_str() {
                "cmd_json" | "cmd_yaml" => out.push(Arc::new(CmdSource {
                    name: key.clone(),
                    command: command_of(val),
                    position,
                })),
                "file_tree" => out.push(Arc::new(FileTree::new(val, position))),
                "stack" => out.push(Arc::new(Stack::new(val, position))),
                other => {
                    tracing::error!("Specified ext_pillar interface {other} is unavailable");
                }
            }
        }
    }
    out
}

/// Salt passes a string entry as the one argument, a list's first item
/// likewise, and a mapping's `command` key as keyword.
fn command_of(val: &Value) -> String {
    match val {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.first().and_then(Value::as_str).unwrap_or("").to_string(),
        Value::Object(m) => m
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        _ => String::new(),
    }
}

/// An `ext_pillar` option that is not a list of mappings.
struct Malformed;

impl PillarSource for Malformed {
    fn name(&self) -> &str {
        "ext_pillar"
    }

    fn compile(&self, _host: &Host) -> PillarPart {
        PillarPart {
            data: Value::Object(Default::default()),
            errors: vec![
                "The \"ext_pillar\" option is malformed: it must be a list of mappings, each naming one interface (e.g. '- cmd_json: /usr/local/bin/pillar %s')".into(),
            ],
        }
    }

    fn position(&self) -> usize {
        0
    }
}

/// `cmd_json` / `cmd_yaml`: runs the command on the master through the
/// shell, `%s` replaced by the minion id, and loads its standard output.
struct CmdSource {
    name: String,
    command: String,
    position: usize,
}

impl CmdSource {
    /// The command's data, or an error naming this source and the command
    /// (never its output: that is pillar).
    fn load(&self, minion_id: &str) -> Result<Value, String> {
        let command = self.command.replace("%s", minion_id);
        let opts = CmdOptions {
            python_shell: true,
            ..CmdOptions::default()
        };
        let out = crate::command::run_command(&command, &opts).map_err(|e| {
            format!(
                "Failed to load ext_pillar {}: cannot run '{command}': {e}",
                self.name
            )
        })?;
        let parsed = if self.name == "cmd_json" {
            serde_json::from_str::<Value>(&out.stdout).map_err(|e| e.to_string())
        } else {
            halite_render::yaml::load(&out.stdout).map_err(|e| e.message)
        };
        let kind = if self.name == "cmd_json" {
            "JSON"
        } else {
            "YAML"
        };
        match parsed {
            Ok(Value::Object(m)) => Ok(Value::Object(m)),
            Ok(Value::Null) => Ok(Value::Object(Default::default())),
            Ok(_) => Err(format!(
                "Failed to load ext_pillar {}: {kind} data from '{command}' is not a mapping (exit code {})",
                self.name, out.retcode
            )),
            Err(_) => {
                tracing::error!(source = %self.name, %command, retcode = out.retcode, "{kind} data from {command} failed to parse");
                Err(format!(
                    "Failed to load ext_pillar {}: {kind} data from '{command}' failed to parse (exit code {}); run it on the master to see its output",
                    self.name, out.retcode
                ))
            }
        }
    }
}

impl PillarSource for CmdSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn compile(&self, host: &Host) -> PillarPart {
        let id = host.opts.get("id").and_then(Value::as_str).unwrap_or("");
        match self.load(id) {
            Ok(data) => PillarPart {
                data,
                errors: Vec::new(),
            },
            Err(e) => PillarPart {
                data: Value::Object(Default::default()),
                errors: vec![e],
            },
        }
    }

    fn position(&self) -> usize {
        self.position
    }
}
