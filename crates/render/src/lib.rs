//! Salt-compatible rendering: Jinja with Salt's environment, then YAML with
//! Salt's loader rules.
//!
//! This crate knows nothing about states: it turns the text of an SLS file
//! (or of a `file.managed` template) into data (or text), calling back into
//! the host through [`SaltFunctions`] for `salt['mod.fun']()` and reading
//! imported templates through [`TemplateSource`].

use std::sync::Arc;

pub mod cache;
mod jinja;
pub mod memo;
pub mod watch;
/// Python's `str()`/`repr()`/`json.dumps` of values, from the leaf crate of
/// Salt's rules (the renderer's filters and YAML dumper print with them).
pub use halite_salt_rules::pyfmt;
mod shebang;
pub mod yaml;

/// Salt data: JSON-like values whose maps keep insertion order.
pub type Value = serde_json::Value;
/// An insertion-ordered map of Salt data.
pub type Map = serde_json::Map<String, Value>;

/// Runs Salt's `config.get` or `config.option` (`fun`) on plain data, with
/// the same code templates use, for the `config` execution module.
/// `None` when `fun` is neither.
pub fn config_call(
    fun: &str,
    opts: &Value,
    grains: &Value,
    pillar: &Value,
    args: &[Value],
    kwargs: &Map,
) -> Option<Value> {
    jinja::config_call(fun, opts, grains, pillar, args, kwargs)
}

/// Execution functions a template may call as `salt['mod.fun'](...)`.
///
/// Pure lookups (`pillar.get`, `grains.filter_by`, `config.get`,
/// `defaults.merge`, `slsutil.merge`...) are answered by this crate from the
/// context; everything else is forwarded here.
pub trait SaltFunctions: Send + Sync {
    /// Whether `fun` (`mod.fun`) exists; an unknown one is undefined in Jinja.
    fn has(&self, fun: &str) -> bool;
    /// Calls `fun`; `Err` carries a message for the render error.
    fn call(&self, fun: &str, args: &[Value], kwargs: &Map) -> Result<Value, String>;
    /// The options `config.get` and `config.option` read first, when they
    /// are not the template's `opts`: a master compiling for a minion
    /// answers them from the minion's own options, as Salt (which renders
    /// on the minion) does. `None`: the template's `opts`.
    fn opts(&self) -> Option<Value> {
        None
    }

    /// Whether calling `fun` again gives its result for the same minion
    /// without any effect (a lookup answered where the render runs), so a
    /// render that called it can be reused for a context where the call
    /// gives the same result ([`memo`]). Anything that runs on the
    /// minion, writes or logs is not. Default: none is.
    fn replayable(&self, fun: &str) -> bool {
        let _ = fun;
        false
    }

    /// Runs a renderer this crate does not implement (`py`, a custom
    /// renderer from `_renderers`) over `input` (text, or the data of the
    /// renderer before it); `None` when the host has no such renderer.
    fn render_external(
        &self,
        renderer: &str,
        input: &Value,
        ctx: &RenderContext,
    ) -> Option<Result<Value, String>> {
        let _ = (renderer, input, ctx);
        None
    }
}

/// Where `{% import %}`, `{% include %}` and `import_yaml` read templates
/// from: the file roots of a saltenv.
pub trait TemplateSource: Send + Sync {
    /// The text of `path` (relative to the root, `/`-separated), `None` when absent.
    fn get(&self, path: &str, saltenv: &str) -> Result<Option<String>, String>;
}

/// Everything a template sees.
#[derive(Clone)]
pub struct RenderContext {
    /// The minion's grains (`grains` in templates).
    pub grains: Value,
    /// The minion's pillar (`pillar` in templates).
    pub pillar: Value,
    /// The minion's config (`opts`, `salt['config.get']`).
    pub opts: Value,
    /// The environment rendered (`saltenv`).
    pub saltenv: String,
    /// The SLS name being rendered (`apache.config`); empty for non-SLS templates.
    pub sls: String,
    /// The template's path relative to the file root (`apache/config.sls`);
    /// `tpldir`, `tplfile`, `tplpath`... derive from it.
    pub source_path: String,
    /// Extra top-level variables (file.managed `context`/`defaults`, FORMULA variables).
    pub extra: Map,
    /// Where `salt['mod.fun']()` calls go.
    pub salt: Arc<dyn SaltFunctions>,
    /// Where `{% include %}`/`{% import %}` read templates.
    pub files: Arc<dyn TemplateSource>,
}

/// Why rendering failed. `Display` gives a Salt-shaped message body
/// (the caller prefixes `Rendering SLS 'env:sls' failed: `).
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// A Jinja error, worded as Salt words it.
    #[error("{0}")]
    Jinja(String),
    /// A YAML error.
    #[error("{0}")]
    Yaml(#[from] yaml::YamlError),
    /// Anything else (a renderer pipe, a shebang).
    #[error("{0}")]
    Other(String),
}

/// Renders an SLS file: honours the shebang (`#!jinja|yaml` default,
/// `#!yaml`, `#!jinja|json`, `#!json`, `#!yaml|jinja`-style pipelines of
/// those), returns the loaded data. An SLS that renders to nothing (only
/// comments or whitespace) gives an empty map, as Salt's YAML renderer does.
///
/// A render is reused for every context whose inputs it read are equal
/// ([`memo::RenderMemo`]).
pub fn render_sls(text: &str, ctx: &RenderContext) -> Result<Value, RenderError> {
    memo::RenderMemo::global().render(text, ctx, |log| render_sls_now(text, ctx, log))
}

/// Why a probe's render stopped ([`cache::notes_begin`]): it would have
/// run something with a possible effect. Never shown to a user: the
/// prober renders again without probing.
pub const PROBE_STOPPED: &str = "a probe render stopped before a call";

/// [`render_sls`] without reuse, recording its reads in `log`.
fn render_sls_now(
    text: &str,
    ctx: &RenderContext,
    log: Option<Arc<memo::ReadLog>>,
) -> Result<Value, RenderError> {
    let (pipeline, body) = shebang::split(text, default_renderer(ctx, log.as_deref()))?;
    let mut current = Stage::Text(body.to_string());
    for renderer in pipeline {
        current = match (renderer, current) {
            // Text without a Jinja tag renders to itself (the data loader
            // after it ignores the one trailing newline Jinja may drop).
            (shebang::Renderer::Jinja, Stage::Text(source)) if !has_jinja_tags(&source) => {
                Stage::Text(source)
            }
            (shebang::Renderer::Jinja, Stage::Text(source)) => {
                Stage::Text(jinja::render(&source, ctx, log.clone())?)
            }
            (shebang::Renderer::Yaml, Stage::Text(source)) => Stage::Data(load_yaml(&source, ctx)?),
            (shebang::Renderer::Json, Stage::Text(source)) => Stage::Data(load_json(&source)?),
            (shebang::Renderer::Yamlex, Stage::Text(_)) if cache::note_opaque() => {
                return Err(RenderError::Other(PROBE_STOPPED.into()))
            }
            (shebang::Renderer::Yamlex, Stage::Text(source)) => {
                Stage::Data(yaml::yamlex::render(&source)?)
            }
            (shebang::Renderer::External(_), _) if cache::note_opaque() => {
                return Err(RenderError::Other(PROBE_STOPPED.into()))
            }
            (shebang::Renderer::External(name), stage) => {
                if let Some(log) = &log {
                    log.volatile();
                }
                let input = match stage {
                    Stage::Text(source) => Value::String(source),
                    Stage::Data(data) => data,
                };
                match ctx.salt.render_external(&name, &input, ctx) {
                    Some(Ok(Value::String(text))) => Stage::Text(text),
                    Some(Ok(data)) => Stage::Data(data),
                    Some(Err(e)) => return Err(RenderError::Other(e)),
                    None => {
                        return Err(RenderError::Other(format!(
                            "The renderer '{name}' named in the shebang or the `renderer` option is not available in halite; use jinja, yaml, yamlex, json, py or a renderer of _renderers"
                        )))
                    }
                }
            }
            (renderer, Stage::Data(_)) => {
                return Err(RenderError::Other(format!(
                    "The '{}' renderer needs text, but the renderer before it produced data; put it first in the shebang",
                    renderer.name()
                )))
            }
        };
    }
    Ok(match current {
        Stage::Data(Value::Null) => Value::Object(Map::new()),
        Stage::Data(data) => data,
        // A pipeline of text renderers only (`#!jinja`): Salt would hand the
        // text to the state compiler, which needs data, so load it as YAML.
        Stage::Text(source) => match load_yaml(&source, ctx)? {
            Value::Null => Value::Object(Map::new()),
            data => data,
        },
    })
}

/// The `renderer` option of the context (the pipeline of a file without
/// a shebang), noted as a read of the render.
fn default_renderer<'a>(ctx: &'a RenderContext, log: Option<&memo::ReadLog>) -> Option<&'a str> {
    if let Some(log) = log {
        log.note(memo::Read::Key(memo::Root::Opts, "renderer".into()));
    }
    ctx.opts.get("renderer").and_then(Value::as_str)
}

/// Whether the data `text` renders to holds Salt's yamlex strings (whose
/// `str()` is quoted): its pipeline, from its shebang or the `renderer`
/// option of `opts`, ends in `yamlex`.
pub fn renders_yamlex_strings(text: &str, opts: &Value) -> bool {
    let default = opts.get("renderer").and_then(Value::as_str);
    shebang::split(text, default).is_ok_and(|(pipeline, _)| shebang::yields_yamlex(&pipeline))
}

/// Whether `text` has a Jinja tag opener (`{{`, `{%` or `{#`): without
/// one, Jinja has nothing to do.
fn has_jinja_tags(text: &str) -> bool {
    text.as_bytes()
        .windows(2)
        .any(|w| w[0] == b'{' && matches!(w[1], b'{' | b'%' | b'#'))
}

/// What a renderer stage produced.
enum Stage {
    Text(String),
    Data(Value),
}

/// Salt's YAML load of a rendered SLS, through the [`cache::RenderCache`]
/// (texts that differ only by the minion's id share one parse).
fn load_yaml(source: &str, ctx: &RenderContext) -> Result<Value, yaml::YamlError> {
    cache::RenderCache::global().load_varying(
        cache::Loader::Yaml,
        source,
        minion_id(ctx),
        yaml::load,
    )
}

/// The id of the minion a render is for (`opts['id']`, else `grains['id']`).
fn minion_id(ctx: &RenderContext) -> Option<&str> {
    ctx.opts
        .get("id")
        .and_then(Value::as_str)
        .or_else(|| ctx.grains.get("id").and_then(Value::as_str))
}

fn load_json(source: &str) -> Result<Value, RenderError> {
    if source.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    cache::RenderCache::global()
        .load(cache::Loader::Json, source, |s| serde_json::from_str(s))
        .map_err(|e| RenderError::Other(format!("{e}; line {}", e.line())))
}

/// Renders a text template (`engine` is `jinja`) with the context.
pub fn render_text(text: &str, engine: &str, ctx: &RenderContext) -> Result<String, RenderError> {
    match engine {
        "jinja" => {
            watch::untracked("a text template rendered without read tracking");
            jinja::render(text, ctx, None)
        }
        other => Err(RenderError::Other(format!(
            "The template engine '{other}' is not supported; halite renders 'jinja' templates only"
        ))),
    }
}
