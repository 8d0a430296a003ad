//! The reactor SLS files of one event into its reactions, as Salt's
//! `Reactor.reactions` does: each reference is a path, a path glob or a
//! `salt://` URL (from the master's file roots); each file is rendered
//! with the master's renderers (Jinja + YAML by default, shebangs honoured)
//! with `tag` and `data` in the context besides the master's `salt`,
//! `opts` and `grains`; the files' IDs are merged (a later file's ID wins)
//! and compiled. A file that is missing or fails to render is skipped
//! with its error; a compile error runs nothing of the event, as in Salt.

use std::path::PathBuf;

use halite_modules::Host;
use serde_json::{Map, Value};

use super::compile::{self, Reaction};

/// A failure while reacting to an event.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The SLS reference it concerns.
    pub sls: String,
    /// `render` or `compile`.
    pub stage: &'static str,
    /// What went wrong, worded for the log.
    pub error: String,
}

/// An event's reactions, and what failed on the way.
#[derive(Debug, Default)]
pub struct Rendered {
    /// The reactions to run, in order.
    pub reactions: Vec<Reaction>,
    /// The files that could not be rendered, or the compile errors.
    pub errors: Vec<Failure>,
}

/// The files a reference names: a `salt://` URL from the file roots, a
/// glob of paths (the `glob` crate, Python's `glob.glob`), or a path.
fn files_of(host: &Host, reference: &str) -> Vec<PathBuf> {
    if reference.starts_with("salt://") {
        let Some((path, env)) = halite_state::strip_salt_url(reference) else {
            return Vec::new();
        };
        return match host.files.cache_file(path, env.unwrap_or("base")) {
            Ok(Some(p)) => vec![p],
            _ => Vec::new(),
        };
    }
    match glob::glob(reference) {
        Ok(paths) => {
            let mut found: Vec<PathBuf> = paths.filter_map(Result::ok).collect();
            found.sort();
            found
        }
        Err(_) => {
            let p = PathBuf::from(reference);
            if p.is_file() {
                vec![p]
            } else {
                Vec::new()
            }
        }
    }
}

/// Renders one file with `tag` and `data` in the context.
fn render_file(
    host: &Host,
    path: &std::path::Path,
    tag: &str,
    data: &Value,
) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
    let mut extra = Map::new();
    extra.insert("tag".into(), Value::from(tag));
    extra.insert("data".into(), data.clone());
    let shown = path.display().to_string();
    let ctx = host.render_context("base", &shown, &shown, extra);
    halite_render::render_sls(&text, &ctx).map_err(|e| e.to_string())
}

/// Renders the reactor SLS `references` for the event (`tag`, `data`).
pub fn reactions(host: &Host, references: &[String], tag: &str, data: &Value) -> Rendered {
    let mut out = Rendered::default();
    let mut high = Map::new();
    let mut origin: Map<String, Value> = Map::new();
    for reference in references {
        let files = files_of(host, reference);
        if files.is_empty() {
            out.errors.push(Failure {
                sls: reference.clone(),
                stage: "render",
                error: format!(
                    "Can not render SLS {reference} for tag {tag}. File missing or not found."
                ),
            });
        }
        for file in files {
            let shown = file.display().to_string();
            match render_file(host, &file, tag, data) {
                Ok(Value::Object(ids)) => {
                    for (id, body) in ids {
                        origin.insert(id.clone(), Value::from(shown.as_str()));
                        high.insert(id, body);
                    }
                }
                Ok(other) => out.errors.push(Failure {
                    sls: shown.clone(),
                    stage: "render",
                    error: format!(
                        "Failed to render \"{shown}\": it rendered to {other}, not a mapping of reaction IDs"
                    ),
                }),
                Err(e) => out.errors.push(Failure {
                    sls: shown.clone(),
                    stage: "render",
                    error: format!("Failed to render \"{shown}\": {e}"),
                }),
            }
        }
    }
    if high.is_empty() {
        return out;
    }
    // Compiled per ID so each reaction knows its file.
    let mut reactions = Vec::new();
    let mut errors = Vec::new();
    for (id, body) in high {
        let sls = origin
            .get(&id)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let mut one = Map::new();
        one.insert(id, body);
        let (rs, es) = compile::reactions(&Value::Object(one), &sls);
        reactions.extend(rs);
        errors.extend(es.into_iter().map(|e| (sls.clone(), e)));
    }
    if !errors.is_empty() {
        // Salt runs nothing of the event when its reactions do not compile.
        let listed: Vec<String> = errors.iter().map(|(_, e)| e.clone()).collect();
        out.errors.push(Failure {
            sls: errors[0].0.clone(),
            stage: "compile",
            error: format!(
                "Unable to render reactions for event {tag} due to errors ({}) in one or more of the sls files ({})",
                listed.join("; "),
                references.join(", ")
            ),
        });
        return out;
    }
    reactions.sort_by_key(|r| {
        r.opts
            .get("order")
            .and_then(Value::as_i64)
            .unwrap_or(i64::MAX)
    });
    out.reactions = reactions;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MasterConfig;
    use std::sync::Arc;

    fn host(roots: &std::path::Path) -> Host {
        let mut cfg = MasterConfig::default();
        cfg.file_roots
            .insert("base".into(), vec![roots.to_path_buf()]);
        halite_runners::orchestrate::master_host(&cfg, Arc::new(halite_modules::host::LogEvents))
    }

    #[test]
    fn salt_urls_globs_and_render_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let roots = dir.path().join("srv");
        let globbed = dir.path().join("reactor");
        std::fs::create_dir_all(roots.join("reactor")).expect("mkdir");
        std::fs::create_dir_all(&globbed).expect("mkdir");
        std::fs::write(
            roots.join("reactor/start.sls"),
            "hi:\n  local.test.echo:\n    - tgt: {{ data['id'] }}\n    - arg:\n      - {{ tag }}\n",
        )
        .expect("write");
        std::fs::write(
            globbed.join("a.sls"),
            "orch:\n  runner.state.orchestrate:\n    - mods: orch.{{ data['id'] }}\n",
        )
        .expect("write");
        std::fs::write(globbed.join("b.sls"), "{% if %}\n").expect("write");
        let refs = vec![
            "salt://reactor/start.sls".to_string(),
            format!("{}/*.sls", globbed.display()),
            "/nonexistent/x.sls".to_string(),
        ];
        let out = reactions(
            &host(&roots),
            &refs,
            "salt/minion/web1/start",
            &serde_json::json!({"id": "web1"}),
        );
        let ids: Vec<&str> = out.reactions.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["hi", "orch"]);
        assert_eq!(out.reactions[0].opts["tgt"], "web1");
        assert_eq!(
            out.reactions[0].opts["arg"],
            serde_json::json!(["salt/minion/web1/start"])
        );
        assert_eq!(out.reactions[1].opts["mods"], "orch.web1");
        let stages: Vec<(&str, bool)> = out
            .errors
            .iter()
            .map(|f| {
                (
                    f.stage,
                    f.sls.ends_with("b.sls") || f.sls.ends_with("x.sls"),
                )
            })
            .collect();
        assert_eq!(
            stages,
            [("render", true), ("render", true)],
            "{:?}",
            out.errors
        );
        assert!(out.errors[1].error.contains("File missing or not found"));
    }

    #[test]
    fn a_non_reaction_runs_nothing_of_the_event() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("r.sls");
        std::fs::write(
            &file,
            "ok:\n  local.test.ping:\n    - tgt: '*'\nbad:\n  file.managed:\n    - name: /tmp/x\n",
        )
        .expect("write");
        let out = reactions(
            &host(dir.path()),
            &[file.display().to_string()],
            "t",
            &serde_json::json!({}),
        );
        assert!(out.reactions.is_empty());
        assert_eq!(out.errors.len(), 1);
        assert_eq!(out.errors[0].stage, "compile");
    }
}
