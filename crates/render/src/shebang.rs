//! The renderer pipeline named on an SLS file's first line (`#!jinja|yaml`).

use crate::RenderError;

/// A renderer of the pipeline: one halite implements, or one the host
/// may run outside this crate (`py`, a custom renderer from `_renderers`:
/// [`crate::SaltFunctions::render_external`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renderer {
    Jinja,
    Yaml,
    Json,
    /// Salt's `yamlex` (`yaml::yamlex`).
    Yamlex,
    External(String),
}

impl Renderer {
    pub fn name(&self) -> &str {
        match self {
            Renderer::Jinja => "jinja",
            Renderer::Yaml => "yaml",
            Renderer::Json => "json",
            Renderer::Yamlex => "yamlex",
            Renderer::External(name) => name,
        }
    }
}

/// Splits the shebang off `text`: the renderers in order, and the body.
/// Without a shebang the pipeline is Salt's default, `jinja|yaml`. The
/// shebang line is kept as an empty line so error line numbers still match.
pub fn split(text: &str) -> Result<(Vec<Renderer>, &str), RenderError> {
    let Some(rest) = text.strip_prefix("#!") else {
        return Ok((vec![Renderer::Jinja, Renderer::Yaml], text));
    };
    let (line, body) = match rest.find('\n') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, ""),
    };
    let mut pipeline = Vec::new();
    for name in line.split('|') {
        // Renderer arguments (`#!yaml strict`) are accepted and ignored.
        let name = name.split_whitespace().next().unwrap_or("").trim();
        pipeline.push(match name {
            "jinja" => Renderer::Jinja,
            "yaml" => Renderer::Yaml,
            "yamlex" => Renderer::Yamlex,
            "json" => Renderer::Json,
            "" => continue,
            other => Renderer::External(other.to_string()),
        });
    }
    if pipeline.is_empty() {
        pipeline = vec![Renderer::Jinja, Renderer::Yaml];
    }
    Ok((pipeline, body))
}
