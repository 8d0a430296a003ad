//! Pre/post install states: the FORMULA's `pre_local_state`,
//! `post_local_state` (and `*_tgt_state`) sections are templates rendered
//! with the FORMULA's variables, then applied by halite's state engine.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::config::SpmConfig;
use crate::error::{Result, SpmError};
use crate::formula::Formula;

/// Which hook is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// `pre_local_state`/`pre_tgt_state`: before the files are installed.
    Pre,
    /// `post_local_state`/`post_tgt_state`: after.
    Post,
}

impl Stage {
    /// The FORMULA key of the local section (`pre_local_state`).
    pub fn local_key(self) -> &'static str {
        match self {
            Stage::Pre => "pre_local_state",
            Stage::Post => "post_local_state",
        }
    }
}

/// How a state run went.
#[derive(Debug, Clone)]
pub struct StateRunOutcome {
    /// Every state succeeded (and the run itself did not error).
    pub success: bool,
    /// What to tell the user: the failing states' comments, or a count.
    pub summary: String,
}

/// Applies SLS text on this host. The engine lives elsewhere (the binary
/// runs `halite-call`); SPM only hands it rendered SLS.
pub trait LocalStateRunner {
    /// Applies `sls_text` (a complete SLS with its shebang) with
    /// `saltenv_root` as the file root; `Err` when the run could not happen.
    fn apply(&self, sls_text: &str, saltenv_root: &Path) -> Result<StateRunOutcome, String>;
}

/// Renders a pre/post section to SLS text ready for the engine: Jinja is
/// applied here (with the FORMULA's variables and `opts`), and the data
/// format the renderer names is kept as the shebang.
pub fn render_section(
    formula: &Formula,
    section: &str,
    stage: Stage,
    config: &SpmConfig,
) -> Result<String> {
    let renderer = formula
        .renderer
        .clone()
        .unwrap_or_else(|| config.renderer.clone());
    let render_err = |message: String| SpmError::Render {
        package: formula.name.clone(),
        stage: stage.local_key().to_string(),
        message,
    };
    let steps: Vec<&str> = renderer
        .split(['|', '_'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let data_format = if steps.contains(&"json") {
        "json"
    } else if steps.contains(&"yaml") {
        "yaml"
    } else {
        return Err(render_err(format!(
            "renderer '{renderer}' is not supported here (use jinja|yaml, yaml or json)"
        )));
    };
    if let Some(other) = steps
        .iter()
        .find(|s| !matches!(**s, "jinja" | "yaml" | "json"))
    {
        return Err(render_err(format!(
            "renderer '{other}' (from '{renderer}') is not supported"
        )));
    }
    let body = if steps.contains(&"jinja") {
        let mut extra: Map<String, Value> = formula.variables.clone();
        extra.insert("opts".to_string(), config.as_value());
        let ctx = halite_render::RenderContext {
            grains: Value::Object(Map::new()),
            pillar: Value::Object(Map::new()),
            opts: config.as_value(),
            saltenv: "base".to_string(),
            sls: String::new(),
            source_path: String::new(),
            extra,
            salt: Arc::new(NoFunctions),
            files: Arc::new(NoTemplates),
        };
        halite_render::render_text(section, "jinja", &ctx).map_err(|e| render_err(e.to_string()))?
    } else {
        section.to_string()
    };
    Ok(format!("#!{data_format}\n{body}"))
}

/// Renders and applies one local section; a failed run is an error.
pub fn run_local(
    formula: &Formula,
    section: &str,
    stage: Stage,
    config: &SpmConfig,
    runner: &dyn LocalStateRunner,
) -> Result<StateRunOutcome> {
    let sls = render_section(formula, section, stage, config)?;
    let failed = |message: String| SpmError::StateFailed {
        package: formula.name.clone(),
        stage: stage.local_key().to_string(),
        message,
    };
    let outcome = runner.apply(&sls, &config.formula_path).map_err(failed)?;
    if !outcome.success {
        return Err(failed(outcome.summary));
    }
    Ok(outcome)
}

/// `*_tgt_state` sections need a master to publish through; halite-spm
/// does not talk to one yet.
pub fn refuse_targeted(formula: &Formula) -> Result<()> {
    for (key, section) in [
        ("pre_tgt_state", &formula.pre_tgt_state),
        ("post_tgt_state", &formula.post_tgt_state),
    ] {
        if let Some(section) = section {
            return Err(SpmError::NoMaster(format!(
                "{} has a {key} for target '{}' ({}), which must be published through a master; \
                 install it on the master, or move the state to {}",
                formula.name,
                section.tgt,
                section.tgt_type,
                key.replace("tgt", "local")
            )));
        }
    }
    Ok(())
}

/// Template calls to `salt[...]` are not available while installing.
struct NoFunctions;

impl halite_render::SaltFunctions for NoFunctions {
    fn has(&self, _fun: &str) -> bool {
        false
    }
    fn call(
        &self,
        fun: &str,
        _args: &[Value],
        _kwargs: &Map<String, Value>,
    ) -> Result<Value, String> {
        Err(format!("{fun} is not available in SPM pre/post states"))
    }
}

/// Pre/post sections are self-contained: no imports.
struct NoTemplates;

impl halite_render::TemplateSource for NoTemplates {
    fn get(&self, _path: &str, _saltenv: &str) -> Result<Option<String>, String> {
        Ok(None)
    }
}

/// Runs sections through `halite-call --local ... state.apply` in a
/// private temporary file root.
#[derive(Debug, Clone)]
pub struct HaliteCallRunner {
    /// The `halite-call` binary that applies the states.
    pub halite_call: PathBuf,
    /// The cachedir the hooks' runs use (their state-run lock lives
    /// there): SPM's own, as Salt's SPM runs its hooks with its own opts;
    /// `None` leaves halite-call's configured one.
    pub cachedir: Option<PathBuf>,
}

impl HaliteCallRunner {
    /// Finds `halite-call` next to the running executable, else on PATH.
    pub fn locate() -> Option<Self> {
        let beside = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(|dir| dir.join("halite-call")));
        if let Some(path) = beside.filter(|p| p.is_file()) {
            return Some(HaliteCallRunner {
                halite_call: path,
                cachedir: None,
            });
        }
        let path_var = std::env::var_os("PATH")?;
        std::env::split_paths(&path_var)
            .map(|dir| dir.join("halite-call"))
            .find(|p| p.is_file())
            .map(|halite_call| HaliteCallRunner {
                halite_call,
                cachedir: None,
            })
    }

    /// The same runner, its hooks using `cachedir` (see [`Self::cachedir`]).
    pub fn with_cachedir(mut self, cachedir: PathBuf) -> Self {
        self.cachedir = Some(cachedir);
        self
    }
}

impl LocalStateRunner for HaliteCallRunner {
    fn apply(&self, sls_text: &str, _saltenv_root: &Path) -> Result<StateRunOutcome, String> {
        let root =
            tempfile::tempdir().map_err(|e| format!("cannot create a temporary file root: {e}"))?;
        let sls_path = root.path().join("spm_hook.sls");
        std::fs::write(&sls_path, sls_text)
            .map_err(|e| format!("cannot write {}: {e}", sls_path.display()))?;
        let mut command = Command::new(&self.halite_call);
        if let Some(dir) = &self.cachedir {
            // halite-call's config layers read HALITE_<key>.
            command.env("HALITE_CACHEDIR", dir);
        }
        let output = command
            .arg("--local")
            .arg("--file-root")
            .arg(root.path())
            // queue=True: a hook waits for a state run already holding
            // the host's state-run lock instead of failing the install.
            .args(["--out", "json", "state.apply", "spm_hook", "queue=True"])
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.halite_call.display()))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let parsed: Option<Value> = serde_json::from_str(&stdout).ok();
        let (all_ok, summary) = match parsed.as_ref().and_then(|v| v.get("local")) {
            Some(Value::Object(results)) => summarize(results),
            Some(Value::Array(errors)) => (
                false,
                errors
                    .iter()
                    .map(|e| e.as_str().unwrap_or_default().to_string())
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            _ => (
                false,
                format!(
                    "halite-call gave no state return: {}",
                    String::from_utf8_lossy(&output.stderr).trim()
                ),
            ),
        };
        Ok(StateRunOutcome {
            success: all_ok && output.status.success(),
            summary,
        })
    }
}

/// All results true (or None, a test run), and the comments of failures.
fn summarize(results: &Map<String, Value>) -> (bool, String) {
    let failures: Vec<String> = results
        .iter()
        .filter(|(_, ret)| ret.get("result") == Some(&Value::Bool(false)))
        .map(|(key, ret)| {
            format!(
                "{key}: {}",
                ret.get("comment").map(comment_text).unwrap_or_default()
            )
        })
        .collect();
    if failures.is_empty() {
        (true, format!("{} state(s) succeeded", results.len()))
    } else {
        (false, failures.join("; "))
    }
}

fn comment_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(comment_text).collect::<Vec<_>>().join(" "),
        other => other.to_string(),
    }
}
