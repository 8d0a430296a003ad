//! The renderer pipeline of an SLS file: the one named on its first line
//! (`#!jinja|yaml`), else the `renderer` option's (Salt's default,
//! `jinja|yaml`).

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

/// Salt's default `renderer` option.
pub const DEFAULT_PIPELINE: &str = "jinja|yaml";

/// Salt's `OLD_STYLE_RENDERERS` (salt/template.py): one-word names of
/// pipelines that older configs still use as `renderer`.
const OLD_STYLE: &[(&str, &str)] = &[
    ("yaml_jinja", "jinja|yaml"),
    ("yaml_mako", "mako|yaml"),
    ("yaml_wempy", "wempy|yaml"),
    ("json_jinja", "jinja|json"),
    ("json_mako", "mako|json"),
    ("json_wempy", "wempy|json"),
    ("yamlex_jinja", "jinja|yamlex"),
];

/// Salt's `check_render_pipe_str`: the renderers of `pipe` (`jinja|yaml`,
/// or an old-style name such as `yaml_jinja`), their arguments
/// (`#!yaml strict`) accepted and ignored.
fn parse_pipe(pipe: &str) -> Vec<Renderer> {
    let pipe = pipe.trim();
    let pipe = OLD_STYLE
        .iter()
        .find(|(old, _)| *old == pipe)
        .map_or(pipe, |(_, new)| new);
    let mut pipeline = Vec::new();
    for part in pipe.split('|') {
        let name = part.split_whitespace().next().unwrap_or("");
        pipeline.push(match name {
            "jinja" => Renderer::Jinja,
            "yaml" => Renderer::Yaml,
            "yamlex" => Renderer::Yamlex,
            "json" => Renderer::Json,
            "" => continue,
            other => Renderer::External(other.to_string()),
        });
    }
    pipeline
}

/// Splits the shebang off `text`: the renderers in order, and the body.
/// Without a shebang (a first line of `#!/...` is a path, not one) the
/// pipeline is `default`, the `renderer` option (`None`: Salt's
/// `jinja|yaml`). The shebang line is kept as an empty line so error line
/// numbers still match.
pub fn split<'a>(
    text: &'a str,
    default: Option<&str>,
) -> Result<(Vec<Renderer>, &'a str), RenderError> {
    let default_pipeline = || {
        let pipeline = parse_pipe(default.unwrap_or(DEFAULT_PIPELINE));
        if pipeline.is_empty() {
            parse_pipe(DEFAULT_PIPELINE)
        } else {
            pipeline
        }
    };
    let Some(rest) = text.strip_prefix("#!").filter(|r| !r.starts_with('/')) else {
        return Ok((default_pipeline(), text));
    };
    let (line, body) = match rest.find('\n') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, ""),
    };
    let mut pipeline = parse_pipe(line);
    if pipeline.is_empty() {
        pipeline = default_pipeline();
    }
    Ok((pipeline, body))
}

/// Whether the data a pipeline gives holds Salt's yamlex strings: its
/// last data renderer is `yamlex` (Jinja after it only prints).
pub fn yields_yamlex(pipeline: &[Renderer]) -> bool {
    pipeline
        .iter()
        .rev()
        .find(|r| **r != Renderer::Jinja)
        .is_some_and(|r| *r == Renderer::Yamlex)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str, default: Option<&str>) -> Vec<String> {
        let (pipeline, _) = split(text, default).expect("a pipeline");
        pipeline.iter().map(|r| r.name().to_string()).collect()
    }

    #[test]
    fn the_shebang_wins_over_the_renderer_option() {
        assert_eq!(names("#!yaml\na: 1", Some("jinja|yamlex")), ["yaml"]);
        assert_eq!(names("a: 1", Some("jinja|yamlex")), ["jinja", "yamlex"]);
        assert_eq!(names("a: 1", Some("yamlex_jinja")), ["jinja", "yamlex"]);
        assert_eq!(names("a: 1", Some(" yaml ")), ["yaml"]);
        assert_eq!(names("a: 1", Some("mako|yaml")), ["mako", "yaml"]);
        assert_eq!(names("a: 1", None), ["jinja", "yaml"]);
        assert_eq!(names("#!/usr/bin/env x\na: 1", Some("yaml")), ["yaml"]);
        assert_eq!(names("#!yaml_jinja\na: 1", None), ["jinja", "yaml"]);
    }

    #[test]
    fn yamlex_strings_come_from_a_pipeline_ending_in_yamlex() {
        let yields = |pipe: &str| yields_yamlex(&parse_pipe(pipe));
        assert!(yields("jinja|yamlex"));
        assert!(yields("yamlex"));
        assert!(yields("yamlex|jinja"));
        assert!(!yields("jinja|yaml"));
        assert!(!yields("yamlex|py"));
    }
}
