//! The renderer pipeline named on an SLS file's first line (`#!jinja|yaml`).

use crate::RenderError;

/// A renderer halite implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renderer {
    Jinja,
    Yaml,
    Json,
}

impl Renderer {
    pub fn name(self) -> &'static str {
        match self {
            Renderer::Jinja => "jinja",
            Renderer::Yaml => "yaml",
            Renderer::Json => "json",
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
            "yaml" | "yamlex" => Renderer::Yaml,
            "json" => Renderer::Json,
            "" => continue,
            other => {
                return Err(RenderError::Other(format!(
                    "The renderer '{other}' named in the shebang '#!{line}' is not available in halite; use jinja, yaml or json"
                )))
            }
        });
    }
    if pipeline.is_empty() {
        pipeline = vec![Renderer::Jinja, Renderer::Yaml];
    }
    Ok((pipeline, body))
}
