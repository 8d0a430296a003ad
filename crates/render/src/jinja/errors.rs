//! Render errors shaped as Salt prints them (salt/utils/templates.py and
//! `SaltRenderError`): a headline (`Jinja syntax error: ...`, `Jinja variable
//! '...' is undefined`, `Problem running salt function in Jinja template:
//! ...`, `Jinja error: ...`), then `; line N` and the surrounding lines with
//! the failing one marked.

use std::collections::HashMap;

use minijinja::{Error, ErrorKind};

/// The marker Salt appends to the failing line.
const MARKER: &str = "    <======================";

/// Builds Salt's message for a minijinja error.
pub fn salt_message(
    error: &Error,
    top_name: &str,
    sources: &HashMap<String, String>,
    salt_failure: Option<&str>,
) -> String {
    let inner = innermost(error);
    let name = innermost_name(error).unwrap_or(top_name);
    let line = innermost_line(error);
    let source = sources.get(name).or_else(|| sources.get(top_name));
    let mut detail = innermost_detail(error);
    if inner.kind() == ErrorKind::UndefinedError && !detail.contains('`') {
        // minijinja could not name the value (it came from another
        // template); the expression printed on that line usually is it.
        if let Some(expression) = source
            .zip(line)
            .and_then(|(text, n)| printed_expression(text, n))
        {
            detail = format!("`{expression}` is undefined");
        }
    }
    let headline = match inner.kind() {
        ErrorKind::SyntaxError if detail.starts_with("unexpected end of input") => {
            let wording = source
                .and_then(|text| unclosed_block_wording(text))
                .unwrap_or_else(|| jinja2_syntax_wording(&detail));
            format!("Jinja syntax error: {wording}")
        }
        ErrorKind::SyntaxError => format!("Jinja syntax error: {}", jinja2_syntax_wording(&detail)),
        ErrorKind::UndefinedError => format!("Jinja variable {}", undefined_message(&detail)),
        // Calling or using an undefined value: minijinja names it in backticks.
        _ if detail.contains("` is undefined") => {
            format!("Jinja variable {}", undefined_message(&detail))
        }
        ErrorKind::UnknownFunction => {
            format!("Jinja variable {}", unknown_function_message(&detail))
        }
        _ if salt_failure.is_some_and(|f| detail.contains(f)) => {
            format!(
                "Problem running salt function in Jinja template: {}",
                salt_failure.unwrap_or_default()
            )
        }
        _ => format!("Jinja error: {detail}"),
    };
    match (line, source) {
        (Some(line), Some(text)) if line > 0 && name != top_name && sources.contains_key(name) => {
            // Salt names the other file and its line instead of `; line N`.
            format!(
                "{headline}\n{name}({line}):\n{}",
                get_context(text, line, 5, MARKER)
            )
        }
        (Some(line), Some(text)) if line > 0 => {
            format!(
                "{headline}; line {line}\n\n{}",
                get_context(text, line, 5, MARKER)
            )
        }
        _ => headline,
    }
}

/// Jinja2's words for the syntax errors people make most, where minijinja's
/// differ; anything else keeps minijinja's wording.
fn jinja2_syntax_wording(detail: &str) -> String {
    if let Some(tag) = detail.strip_prefix("unknown statement ") {
        return format!("Encountered unknown tag '{tag}'.");
    }
    match detail {
        "unexpected end of block" => {
            "Expected an expression, got 'end of statement block'".to_string()
        }
        "unexpected `}`, expected end of variable block" => "unexpected '}'".to_string(),
        "unexpected end of variable block, expected identifier" => {
            "expected token 'name', got 'end of print statement'".to_string()
        }
        other => other.to_string(),
    }
}

/// Jinja2's message for a template that ends inside a block: which tags it
/// was looking for and which block is still open.
fn unclosed_block_wording(source: &str) -> Option<String> {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = source;
    while let Some(start) = rest.find("{%") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("%}") else { break };
        let tag = after[..end].trim_start_matches(['-', '+']).trim_start();
        let word: String = tag
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        match word.as_str() {
            "if" | "for" | "macro" | "call" | "filter" | "with" | "block" | "autoescape" => {
                stack.push(word)
            }
            // `{% set x = ... %}` is complete; only `{% set x %}` opens a block.
            "set" if !tag.contains('=') => stack.push(word),
            w if w.starts_with("end") => {
                stack.pop();
            }
            _ => {}
        }
        rest = &after[end + 2..];
    }
    let open = stack.last()?;
    let expected = match open.as_str() {
        "if" => "'elif' or 'else' or 'endif'".to_string(),
        "for" => "'endfor' or 'else'".to_string(),
        other => format!("'end{other}'"),
    };
    Some(format!(
        "Unexpected end of template. Jinja was looking for the following tags: {expected}. The innermost block that needs to be closed is '{open}'."
    ))
}

/// The single `{{ expression }}` printed on `line`, if there is one.
fn printed_expression(source: &str, line: usize) -> Option<String> {
    let text = source.lines().nth(line.checked_sub(1)?)?;
    let start = text.find("{{")? + 2;
    let end = start + text[start..].find("}}")?;
    let expression =
        text[start..end].trim_matches(|c: char| c.is_whitespace() || c == '-' || c == '+');
    let simple = !expression.is_empty()
        && expression
            .chars()
            .all(|c| c.is_alphanumeric() || "_.[]'\"".contains(c));
    simple.then(|| expression.to_string())
}

/// The error that started it all (minijinja chains errors through includes).
fn innermost(error: &Error) -> &Error {
    let mut current = error;
    while let Some(source) =
        std::error::Error::source(current).and_then(|s| s.downcast_ref::<Error>())
    {
        current = source;
    }
    current
}

fn innermost_detail(error: &Error) -> String {
    let inner = innermost(error);
    inner
        .detail()
        .map(str::to_string)
        .unwrap_or_else(|| inner.kind().to_string())
}

fn innermost_name(error: &Error) -> Option<&str> {
    innermost(error).name().or_else(|| error.name())
}

fn innermost_line(error: &Error) -> Option<usize> {
    innermost(error).line().or_else(|| error.line())
}

/// minijinja's "`a.b` is undefined" in Jinja2's words: `'a' is undefined`
/// or `'dict object' has no attribute 'b'`.
fn undefined_message(detail: &str) -> String {
    let expression = detail.split('`').nth(1).unwrap_or("");
    if expression.is_empty() {
        return "value is undefined".to_string();
    }
    if let Some(function) = salt_function_name(expression) {
        return format!(
            "'salt.utils.templates.AliasedLoader object' has no attribute '{function}'"
        );
    }
    let last_attr = expression.rfind(['.', '[']);
    match last_attr {
        None => format!("'{expression}' is undefined"),
        Some(at) => {
            let attribute = expression[at..]
                .trim_start_matches(['.', '['])
                .trim_end_matches(']');
            let attribute = attribute.trim_matches(['\'', '"']);
            format!("'dict object' has no attribute '{attribute}'")
        }
    }
}

/// `salt['mod.fun']` or `salt.mod.fun`: the function name.
fn salt_function_name(expression: &str) -> Option<String> {
    if let Some(rest) = expression.strip_prefix("salt[") {
        return Some(
            rest.trim_end_matches(']')
                .trim_matches(['\'', '"'])
                .to_string(),
        );
    }
    expression
        .strip_prefix("salt.")
        .filter(|rest| rest.contains('.'))
        .map(str::to_string)
}

fn unknown_function_message(detail: &str) -> String {
    let name = detail
        .trim_start_matches("unknown function")
        .trim_start_matches(':')
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_string();
    format!("'{name}' is undefined")
}

/// Salt's `get_context`: `num_lines` lines either side of `line`, `[...]`
/// where cut, the failing line marked, wrapped in `---` lines.
pub fn get_context(template: &str, line: usize, num_lines: usize, marker: &str) -> String {
    let lines: Vec<&str> = template.lines().collect();
    if line == 0 || line > lines.len() {
        return template.to_string();
    }
    let start = line.saturating_sub(num_lines + 1);
    let end = (line + num_lines).min(lines.len());
    let mut error_index = line - start - 1;
    let mut buffer: Vec<String> = Vec::new();
    if start > 0 {
        buffer.push("[...]".to_string());
        error_index += 1;
    }
    buffer.extend(lines[start..end].iter().map(|l| l.to_string()));
    if end < lines.len() {
        buffer.push("[...]".to_string());
    }
    if let Some(target) = buffer.get_mut(error_index) {
        target.push_str(marker);
    }
    format!("---\n{}\n---", buffer.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_marks_the_line_and_elides_far_lines() {
        let text = (1..=20)
            .map(|n| format!("l{n}"))
            .collect::<Vec<_>>()
            .join("\n");
        let context = get_context(&text, 10, 5, MARKER);
        assert_eq!(
            context,
            "---\n[...]\nl5\nl6\nl7\nl8\nl9\nl10    <======================\nl11\nl12\nl13\nl14\nl15\n[...]\n---"
        );
        assert_eq!(
            get_context("a\nb", 1, 5, MARKER),
            "---\na    <======================\nb\n---"
        );
    }

    #[test]
    fn undefined_messages_read_like_jinja2() {
        assert_eq!(
            undefined_message("`nope` is undefined"),
            "'nope' is undefined"
        );
        assert_eq!(
            undefined_message("`pillar.foo` is undefined"),
            "'dict object' has no attribute 'foo'"
        );
        assert_eq!(
            undefined_message("`d['k']` is undefined"),
            "'dict object' has no attribute 'k'"
        );
    }
}

#[cfg(test)]
mod unclosed_tests {
    use super::unclosed_block_wording;

    #[test]
    fn names_the_innermost_open_block_as_jinja2_does() {
        assert_eq!(
            unclosed_block_wording("{% if a %}\n{% for x in y %}{% endfor %}\n").as_deref(),
            Some("Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be closed is 'if'.")
        );
        assert_eq!(
            unclosed_block_wording("{%- set a = 1 %}{% for x in y -%}").as_deref(),
            Some("Unexpected end of template. Jinja was looking for the following tags: 'endfor' or 'else'. The innermost block that needs to be closed is 'for'.")
        );
        assert_eq!(
            unclosed_block_wording("{% macro m() %}").as_deref(),
            Some("Unexpected end of template. Jinja was looking for the following tags: 'endmacro'. The innermost block that needs to be closed is 'macro'.")
        );
        assert_eq!(unclosed_block_wording("{% if a %}{% endif %}"), None);
    }
}
