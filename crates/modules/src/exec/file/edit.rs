//! In-place text edits with Salt's semantics: `replace`, `line`,
//! `blockreplace` and `comment_line`, shared by the `file` execution
//! module and the `file` states (which call them with `dry_run` in test
//! mode and put the returned diff into `changes['diff']`).

use std::fs;
use std::path::{Path, PathBuf};

use halite_state::Value;
use regex::{Regex, RegexBuilder};

use super::diff::{split_lines_keep_ends, unified_diff, unified_diff_lines};
use super::meta;

/// Why an edit could not be made; the message is what Salt says.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// Salt's SaltInvocationError / CommandExecutionError text.
    #[error("{0}")]
    Invalid(String),
    /// Reading or writing the file failed.
    #[error("Unable to {what} '{path}': {source}")]
    Io {
        /// What was being done (`read`, `write`...), for the message.
        what: &'static str,
        /// The file.
        path: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// Restoring owner/mode after the edit failed.
    #[error(transparent)]
    Meta(#[from] meta::MetaError),
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> EditError + 'a {
    move |source| EditError::Io {
        what,
        path: path.display().to_string(),
        source,
    }
}

/// Python `re` flags (Salt's `flags` argument: an int, a name or a list of names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReFlags {
    /// Python's `re.IGNORECASE`.
    pub ignore_case: bool,
    /// Python's `re.MULTILINE`: `^` and `$` match at every line.
    pub multi_line: bool,
    /// Python's `re.DOTALL`: `.` matches a newline too.
    pub dot_all: bool,
    /// Python's `re.VERBOSE`: whitespace and `#` comments in the pattern.
    pub verbose: bool,
}

impl ReFlags {
    /// Parses Salt's `flags` (default 8 = MULTILINE).
    pub fn parse(v: Option<&Value>) -> Result<Self, EditError> {
        let Some(v) = v else {
            return Ok(ReFlags::from_bits(8));
        };
        match v {
            Value::Null => Ok(ReFlags::from_bits(8)),
            Value::Number(n) => Ok(ReFlags::from_bits(n.as_u64().unwrap_or(0))),
            Value::String(s) => match s.parse::<u64>() {
                Ok(n) => Ok(ReFlags::from_bits(n)),
                Err(_) => Self::from_names(&[s.as_str()]),
            },
            Value::Array(items) => {
                let names: Vec<String> = items
                    .iter()
                    .map(|i| i.as_str().map(str::to_string).unwrap_or_else(|| i.to_string()))
                    .collect();
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                Self::from_names(&refs)
            }
            other => Err(EditError::Invalid(format!(
                "Invalid re flags: \"{other}\", must be given either as a single flag string, a list of strings, as an integer, or as an re flag"
            ))),
        }
    }
    fn from_bits(bits: u64) -> Self {
        ReFlags {
            ignore_case: bits & 2 != 0,
            multi_line: bits & 8 != 0,
            dot_all: bits & 16 != 0,
            verbose: bits & 64 != 0,
        }
    }
    fn from_names(names: &[&str]) -> Result<Self, EditError> {
        let mut f = ReFlags::default();
        for name in names {
            match name.to_ascii_uppercase().as_str() {
                "I" | "IGNORECASE" => f.ignore_case = true,
                "M" | "MULTILINE" => f.multi_line = true,
                "S" | "DOTALL" => f.dot_all = true,
                "X" | "VERBOSE" => f.verbose = true,
                "U" | "UNICODE" | "L" | "LOCALE" | "A" | "ASCII" => {}
                _ => return Err(EditError::Invalid(format!("Invalid re flag given: {name}"))),
            }
        }
        Ok(f)
    }
}

/// Compiles a Python-style regular expression with Salt's flags.
/// `\Z` (Python's end of string) is translated; look-around is not
/// supported and is reported as an invalid pattern.
pub fn compile(pattern: &str, flags: ReFlags) -> Result<Regex, EditError> {
    let translated = pattern.replace(r"\Z", r"\z");
    RegexBuilder::new(&translated)
        .case_insensitive(flags.ignore_case)
        .multi_line(flags.multi_line)
        .dot_matches_new_line(flags.dot_all)
        .ignore_whitespace(flags.verbose)
        .build()
        .map_err(|e| EditError::Invalid(format!("Invalid regular expression '{pattern}': {e}")))
}

/// Translates a Python replacement string (`\1`, `\g<name>`, `\n`) into
/// the `regex` crate's syntax (`${1}`, `${name}`, a newline), with `$`
/// kept literal as Python keeps it.
pub fn python_repl(repl: &str) -> String {
    let mut out = String::with_capacity(repl.len());
    let mut chars = repl.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' => out.push_str("$$"),
            '\\' => match chars.peek().copied() {
                Some(d) if d.is_ascii_digit() => {
                    let mut num = String::new();
                    while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                        if num.len() == 2 {
                            break;
                        }
                        num.push(d);
                        chars.next();
                    }
                    out.push_str(&format!("${{{num}}}"));
                }
                Some('g') => {
                    chars.next();
                    if chars.peek() == Some(&'<') {
                        chars.next();
                        let name: String = chars.by_ref().take_while(|c| *c != '>').collect();
                        out.push_str(&format!("${{{name}}}"));
                    } else {
                        out.push_str("\\g");
                    }
                }
                Some('n') => {
                    chars.next();
                    out.push('\n');
                }
                Some('t') => {
                    chars.next();
                    out.push('\t');
                }
                Some('r') => {
                    chars.next();
                    out.push('\r');
                }
                Some('\\') => {
                    chars.next();
                    out.push('\\');
                }
                _ => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    out
}

fn read_text(path: &Path) -> Result<String, EditError> {
    let bytes = fs::read(path).map_err(io_err("read", path))?;
    if super::diff::is_binary(&bytes) {
        return Err(EditError::Invalid(format!(
            "Cannot perform string replacements on a binary file: {}",
            path.display()
        )));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Writes `text` over `path` keeping its owner and mode, first saving the
/// old content to `path + backup` when a backup suffix is given.
fn commit(path: &Path, old: &str, text: &str, backup: Option<&str>) -> Result<(), EditError> {
    let before = meta::ownership(path, true)?;
    if let Some(suffix) = backup.filter(|s| !s.is_empty()) {
        let bak = PathBuf::from(format!("{}{suffix}", path.display()));
        fs::write(&bak, old).map_err(io_err("write backup", &bak))?;
        meta::chmod(&bak, &before.mode)?;
    }
    fs::write(path, text).map_err(io_err("write", path))?;
    meta::chmod(path, &before.mode)?;
    Ok(())
}

/// Arguments of `file.replace`.
#[derive(Debug, Clone, Default)]
pub struct ReplaceArgs {
    /// The regular expression searched for (Python syntax).
    pub pattern: String,
    /// The replacement (with `\1` group references unless `backslash_literal`).
    pub repl: String,
    /// 0 = every match.
    pub count: usize,
    /// The regular expression's flags.
    pub flags: ReFlags,
    /// Append `not_found_content` when the pattern is not found.
    pub append_if_not_found: bool,
    /// Prepend `not_found_content` when the pattern is not found.
    pub prepend_if_not_found: bool,
    /// What to add when the pattern is not found (default: `repl`).
    pub not_found_content: Option<String>,
    /// Backup suffix (Salt's default `.bak`); `None` for no backup.
    pub backup: Option<String>,
    /// Report what would change without writing.
    pub dry_run: bool,
    /// Only say whether the pattern is found.
    pub search_only: bool,
    /// Take `repl` literally (no group references).
    pub backslash_literal: bool,
}

/// What `replace` found: whether the file changes and the diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditOutcome {
    /// Whether the file changed (or would, in a dry run).
    pub changed: bool,
    /// The unified diff of the change.
    pub diff: String,
}

/// Salt's `file.replace` on an existing file (symlinks followed).
pub fn replace(path: &Path, args: &ReplaceArgs) -> Result<EditOutcome, EditError> {
    let real = fs::canonicalize(path)
        .map_err(|_| EditError::Invalid(format!("File not found: {}", path.display())))?;
    if args.search_only && (args.append_if_not_found || args.prepend_if_not_found) {
        return Err(EditError::Invalid(
            "search_only cannot be used with append/prepend_if_not_found".into(),
        ));
    }
    if args.append_if_not_found && args.prepend_if_not_found {
        return Err(EditError::Invalid(
            "Only one of append and prepend_if_not_found is permitted".into(),
        ));
    }
    let orig = read_text(&real)?;
    let re = compile(&args.pattern, args.flags)?;
    if args.search_only {
        return Ok(EditOutcome {
            changed: re.is_match(&orig),
            diff: String::new(),
        });
    }
    let repl = if args.backslash_literal {
        args.repl.replace('$', "$$")
    } else {
        python_repl(&args.repl)
    };
    let found_any = re.is_match(&orig);
    let result = re.replacen(&orig, args.count, repl.as_str()).into_owned();
    let mut found = found_any;
    let mut new_lines: Vec<String> = split_lines_keep_ends(&result)
        .into_iter()
        .map(str::to_string)
        .collect();
    if args.append_if_not_found || args.prepend_if_not_found {
        let content = args
            .not_found_content
            .clone()
            .unwrap_or_else(|| args.repl.clone());
        let line_re = format!("^{}(?:$|\r\n)", regex::escape(&content));
        if compile(&line_re, args.flags)?.is_match(&orig) {
            found = true;
        }
        if !found {
            if args.prepend_if_not_found {
                new_lines.insert(0, format!("{content}\n"));
            } else {
                if let Some(last) = new_lines.last_mut() {
                    if !last.ends_with('\n') {
                        last.push('\n');
                    }
                }
                new_lines.push(format!("{content}\n"));
            }
        }
    }
    let new_text: String = new_lines.concat();
    let orig_lines = split_lines_keep_ends(&orig);
    let new_refs: Vec<&str> = new_lines.iter().map(String::as_str).collect();
    let diff = unified_diff_lines(&orig_lines, &new_refs);
    let changed = orig != new_text;
    if changed && !args.dry_run {
        commit(&real, &orig, &new_text, args.backup.as_deref())?;
    }
    Ok(EditOutcome { changed, diff })
}

/// Where `file.line` puts or finds its line.
#[derive(Debug, Clone, Default)]
pub struct LineArgs {
    /// The line to put in (`mode` ensure/insert/replace).
    pub content: Option<String>,
    /// The regular expression that finds the line(s) acted on.
    pub match_: Option<String>,
    /// What to do: `ensure`, `replace`, `insert` or `delete`.
    pub mode: String,
    /// `start` or `end` for `insert` without `before`/`after`.
    pub location: Option<String>,
    /// A regular expression for the line the content goes before.
    pub before: Option<String>,
    /// A regular expression for the line the content goes after.
    pub after: Option<String>,
    /// Keep the indentation of the line matched.
    pub indent: bool,
    /// Back up to `path.<timestamp>` when changing.
    pub backup: bool,
    /// Report what would change without writing.
    pub dry_run: bool,
}

/// The line ending of `line` (`\r\n`, `\n`, `\r` or none).
fn eol(line: &str) -> &str {
    if line.ends_with("\r\n") {
        "\r\n"
    } else if line.ends_with('\n') {
        "\n"
    } else if line.ends_with('\r') {
        "\r"
    } else {
        ""
    }
}

fn with_eol_of(src: &str, line: &str) -> String {
    let ending = match eol(src) {
        "" => "\n",
        e => e,
    };
    format!("{}{ending}", line.trim_end())
}

fn with_indent_of(src: &str, line: &str, indent: bool) -> String {
    if !indent {
        return line.to_string();
    }
    let lead: String = src
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect();
    format!("{lead}{}", line.trim_start())
}

/// Lines matching `pattern` as a regex (dot matches newline) or containing it literally.
fn matching_lines(
    lines: &[String],
    pattern: Option<&str>,
) -> Result<Option<Vec<String>>, EditError> {
    let Some(pattern) = pattern.filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    if lines.is_empty() {
        return Ok(None);
    }
    let re = RegexBuilder::new(pattern)
        .dot_matches_new_line(true)
        .build()
        .map_err(|e| EditError::Invalid(format!("{e}: '{pattern}'")))?;
    Ok(Some(
        lines
            .iter()
            .filter(|l| re.is_match(l) || l.contains(pattern))
            .cloned()
            .collect(),
    ))
}

fn expect_one(found: &[String], what: &str) -> Result<(), EditError> {
    let msg = match found.len() {
        0 => "less than",
        1 => return Ok(()),
        _ => "more than",
    };
    Err(EditError::Invalid(format!(
        "Found {msg} expected occurrences in \"{what}\" expression"
    )))
}

fn index_of(lines: &[String], wanted: &str) -> usize {
    lines.iter().position(|l| l == wanted).unwrap_or(0)
}

fn set_line(mut lines: Vec<String>, a: &LineArgs) -> Result<Vec<String>, EditError> {
    let content = a.content.clone().unwrap_or_default();
    let match_pat =
        if a.match_.as_deref().is_none_or(str::is_empty) && a.before.is_none() && a.after.is_none()
        {
            a.content.clone()
        } else {
            a.match_.clone()
        };
    let after = matching_lines(&lines, a.after.as_deref())?;
    let before = matching_lines(&lines, a.before.as_deref())?;
    let matched = matching_lines(&lines, match_pat.as_deref())?.filter(|m| !m.is_empty());
    let mode = a.mode.as_str();
    if lines.is_empty() && matches!(mode, "delete" | "replace") {
        return Ok(Vec::new());
    }
    match mode {
        "delete" => {
            if let Some(m) = matched {
                lines.retain(|l| *l != m[0]);
            }
        }
        "replace" => {
            if let Some(m) = matched {
                let idx = index_of(&lines, &m[0]);
                let replaced = with_indent_of(&lines[idx], &content, a.indent);
                lines[idx] = replaced;
            }
        }
        "insert" => {
            if a.before.is_none() && a.after.is_none() && a.location.is_none() {
                return Err(EditError::Invalid(
                    "On insert either \"location\" or \"before/after\" conditions are required."
                        .into(),
                ));
            }
            if let Some(location) = a.location.as_deref().filter(|l| !l.is_empty()) {
                if location == "end" {
                    match lines.last() {
                        Some(last) => {
                            let l = with_indent_of(last, &content, a.indent);
                            lines.push(l);
                        }
                        None => lines.push(content.clone()),
                    }
                } else if location == "start" {
                    match lines.first() {
                        Some(first) => {
                            let l = with_eol_of(first, &content);
                            lines.insert(0, l);
                        }
                        None => lines = vec![format!("{content}\n")],
                    }
                }
            } else {
                let before = before.filter(|b| !b.is_empty());
                let after = after.filter(|b| !b.is_empty());
                match (before, after) {
                    (Some(b), Some(af)) => {
                        expect_one(&b, "before")?;
                        expect_one(&af, "after")?;
                        let last = index_of(&lines, &b[0]);
                        let l = with_indent_of(&lines[last], &content, a.indent);
                        lines.insert(last, l);
                    }
                    (None, Some(af)) => {
                        expect_one(&af, "after")?;
                        let idx = index_of(&lines, &af[0]);
                        let next_same = lines.get(idx + 1).is_some_and(|n| {
                            n.trim_end_matches(['\r', '\n'])
                                == content.trim_end_matches(['\r', '\n'])
                        });
                        if !next_same {
                            let l = with_indent_of(&lines[idx], &content, a.indent);
                            lines.insert(idx + 1, l);
                        }
                    }
                    (Some(b), None) => {
                        expect_one(&b, "before")?;
                        let idx = index_of(&lines, &b[0]);
                        let prev = if idx == 0 { lines.len() - 1 } else { idx - 1 };
                        if lines[prev].trim_end_matches(['\r', '\n'])
                            != content.trim_end_matches(['\r', '\n'])
                        {
                            let l = with_indent_of(&lines[idx], &content, a.indent);
                            lines.insert(idx, l);
                        }
                    }
                    (None, None) => {
                        return Err(EditError::Invalid(
                            "Neither before or after was found in file".into(),
                        ))
                    }
                }
            }
        }
        "ensure" => {
            let before = before.filter(|b| !b.is_empty());
            let after = after.filter(|b| !b.is_empty());
            match (before, after) {
                (Some(b), Some(af)) => {
                    expect_one(&af, "after")?;
                    expect_one(&b, "before")?;
                    let ai = index_of(&lines, &af[0]);
                    let bi = index_of(&lines, &b[0]);
                    if !lines.iter().any(|l| l.trim_start() == content) {
                        if ai + 1 == bi {
                            let l = with_indent_of(&lines[ai], &content, a.indent);
                            lines.insert(ai + 1, l);
                        } else if ai + 2 == bi {
                            lines[ai + 1] = with_indent_of(&lines[ai], &content, a.indent);
                        } else {
                            return Err(EditError::Invalid(
                                "Found more than one line between boundaries \"before\" and \"after\".".into(),
                            ));
                        }
                    }
                }
                (Some(b), None) => {
                    expect_one(&b, "before")?;
                    let bi = index_of(&lines, &b[0]);
                    let prev = if bi == 0 { lines.len() - 1 } else { bi - 1 };
                    if bi == 0 || lines[bi - 1].trim_end_matches(['\r', '\n']) != content.trim_end_matches(['\r', '\n']) {
                        let l = with_indent_of(&lines[prev], &content, a.indent);
                        lines.insert(bi, l);
                    }
                }
                (None, Some(af)) => {
                    expect_one(&af, "after")?;
                    let ai = index_of(&lines, &af[0]);
                    let is_last = ai + 1 >= lines.len();
                    if is_last || lines[ai + 1].trim_end_matches(['\r', '\n']) != content.trim_end_matches(['\r', '\n']) {
                        let l = with_indent_of(&lines[ai], &content, a.indent);
                        lines.insert(ai + 1, l);
                    }
                }
                (None, None) => {
                    return Err(EditError::Invalid(
                        "Wrong conditions? Unable to ensure line without knowing where to put it before and/or after."
                            .into(),
                    ))
                }
            }
        }
        "" => {
            return Err(EditError::Invalid(
                "Mode was not defined. How to process the file?".into(),
            ))
        }
        other => return Err(EditError::Invalid(format!("Unknown mode: \"{other}\""))),
    }
    Ok(lines)
}

/// Salt's `file.line`: edits one line of an existing file.
pub fn line(path: &Path, args: &LineArgs) -> Result<EditOutcome, EditError> {
    let real = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if !real.is_file() {
        return Err(EditError::Invalid(format!(
            "File \"{}\" does not exists or is not a file.",
            real.display()
        )));
    }
    let mode = args.mode.to_ascii_lowercase();
    if !matches!(mode.as_str(), "insert" | "ensure" | "delete" | "replace") {
        if mode.is_empty() {
            return Err(EditError::Invalid(
                "Mode was not defined. How to process the file?".into(),
            ));
        }
        return Err(EditError::Invalid(format!("Unknown mode: \"{mode}\"")));
    }
    if mode != "delete" && args.content.is_none() {
        return Err(EditError::Invalid(
            "Content can only be empty if mode is \"delete\"".into(),
        ));
    }
    let orig = read_text(&real)?;
    let mut body: Vec<String> = split_lines_keep_ends(&orig)
        .into_iter()
        .map(str::to_string)
        .collect();
    if body.last().is_some_and(|l| !eol(l).is_empty()) {
        body.push(String::new());
    }
    if orig.is_empty() && matches!(mode.as_str(), "delete" | "replace") {
        body.clear();
    }
    let mut a = args.clone();
    a.mode = mode;
    let mut body = set_line(body, &a)?;
    let n = body.len();
    for idx in 0..n {
        if eol(&body[idx]).is_empty() && idx + 1 < n {
            let prev = if idx == 0 { 1 } else { idx - 1 };
            let fixed = with_eol_of(&body[prev], &body[idx]);
            body[idx] = fixed;
        }
    }
    if body.last().is_some_and(String::is_empty) {
        body.pop();
    }
    let new_text = body.concat();
    let changed = new_text != orig;
    let diff = if changed {
        unified_diff(&orig, &new_text)
    } else {
        String::new()
    };
    if changed && !args.dry_run {
        if args.backup {
            let stamp = chrono::Local::now().format("%Y-%m-%d-%H-%M-%S");
            let bak = PathBuf::from(format!("{}.{stamp}", real.display()));
            fs::write(&bak, &orig).map_err(io_err("write backup", &bak))?;
        }
        commit(&real, &orig, &new_text, None)?;
    }
    Ok(EditOutcome { changed, diff })
}

/// Arguments of `file.blockreplace`.
#[derive(Debug, Clone, Default)]
pub struct BlockArgs {
    /// The line that starts the block.
    pub marker_start: String,
    /// The line that ends the block.
    pub marker_end: String,
    /// What goes between the markers.
    pub content: String,
    /// Append the block (with markers) when the markers are not found.
    pub append_if_not_found: bool,
    /// Prepend the block (with markers) when the markers are not found.
    pub prepend_if_not_found: bool,
    /// Put a missing block before the first line matching this.
    pub insert_before_match: Option<String>,
    /// Put a missing block after the first line matching this.
    pub insert_after_match: Option<String>,
    /// Whether the content ends with a newline (`None`: as Salt decides).
    pub append_newline: Option<bool>,
    /// Backup suffix; `None` for no backup.
    pub backup: Option<String>,
    /// Report what would change without writing.
    pub dry_run: bool,
}

/// Salt's `file.blockreplace`: replaces the text between two marker lines.
pub fn blockreplace(path: &Path, a: &BlockArgs) -> Result<EditOutcome, EditError> {
    if !path.exists() {
        return Err(EditError::Invalid(format!(
            "File not found: {}",
            path.display()
        )));
    }
    let orig = read_text(path)?;
    let append_newline = a.append_newline.unwrap_or(!a.content.ends_with('\n'));
    let split_content: Vec<&str> = a
        .content
        .split("\r\n")
        .flat_map(|l| l.split('\n'))
        .collect();
    let linesep = split_lines_keep_ends(&orig)
        .first()
        .map(|l| if l.ends_with("\r\n") { "\r\n" } else { "\n" })
        .unwrap_or("\n")
        .to_string();
    let add_content = |lines: &mut Vec<String>, include_start: bool, end_line: &str| {
        let end_line = format!("{}{linesep}", end_line.trim_end_matches(['\r', '\n']));
        if include_start {
            lines.push(format!("{}{linesep}", a.marker_start));
        }
        let count = split_content.len();
        for (index, content_line) in split_content.iter().enumerate() {
            if index + 1 != count {
                lines.push(format!("{content_line}{linesep}"));
            } else if append_newline {
                lines.push(format!("{content_line}{linesep}"));
                lines.push(end_line.clone());
            } else {
                lines.push(format!("{content_line}{end_line}"));
            }
        }
        if split_content.is_empty() {
            lines.push(end_line);
        }
    };
    let orig_lines: Vec<String> = split_lines_keep_ends(&orig)
        .into_iter()
        .map(str::to_string)
        .collect();
    let mut new_lines: Vec<String> = Vec::new();
    let mut in_block = false;
    let mut block_found = false;
    for line in &orig_lines {
        let mut keep = true;
        if line.contains(&a.marker_start) {
            in_block = true;
        } else if in_block {
            keep = false;
            if let Some(pos) = line.find(&a.marker_end) {
                in_block = false;
                block_found = true;
                add_content(&mut new_lines, false, &line[pos..]);
            }
        }
        if keep {
            new_lines.push(line.clone());
        }
    }
    if in_block {
        return Err(EditError::Invalid(
            "Unterminated marked block. End of file reached before marker_end.".into(),
        ));
    }
    if !block_found {
        if a.prepend_if_not_found {
            let mut block = Vec::new();
            add_content(&mut block, true, &a.marker_end);
            block.extend(new_lines);
            new_lines = block;
            block_found = true;
        } else if a.append_if_not_found {
            if let Some(last) = new_lines.last_mut() {
                if !last.ends_with(&linesep) {
                    last.push_str(&linesep);
                }
            }
            add_content(&mut new_lines, true, &a.marker_end);
            block_found = true;
        } else if let Some(pat) = a
            .insert_before_match
            .as_deref()
            .or(a.insert_after_match.as_deref())
        {
            let re = compile(pat, ReFlags::default())?;
            if let Some(mut idx) = orig_lines.iter().position(|l| re.is_match(l)) {
                let mut block = Vec::new();
                add_content(&mut block, true, &a.marker_end);
                let after = a.insert_before_match.is_none();
                for l in block {
                    if after {
                        idx += 1;
                    }
                    new_lines.insert(idx.min(new_lines.len()), l);
                    if !after {
                        idx += 1;
                    }
                }
                block_found = true;
            }
        }
    }
    if !block_found {
        return Err(EditError::Invalid(
            "Cannot edit marked block. Markers were not found in file.".into(),
        ));
    }
    let orig_refs: Vec<&str> = orig_lines.iter().map(String::as_str).collect();
    let new_refs: Vec<&str> = new_lines.iter().map(String::as_str).collect();
    let diff = unified_diff_lines(&orig_refs, &new_refs);
    let changed = !diff.is_empty();
    if changed && !a.dry_run {
        commit(path, &orig, &new_lines.concat(), a.backup.as_deref())?;
    }
    Ok(EditOutcome { changed, diff })
}

/// Salt's `file.comment_line`: comments (`comment = true`) or uncomments
/// the lines matching `regex`. The diff holds only the changed lines, as
/// Salt's does.
pub fn comment_line(
    path: &Path,
    regex: &str,
    ch: &str,
    comment: bool,
    backup: Option<&str>,
    dry_run: bool,
) -> Result<EditOutcome, EditError> {
    let inner = regex.trim_start_matches('^').trim_end_matches('$');
    let tail = if regex.ends_with('$') { "$" } else { "" };
    let pattern = if comment {
        format!(
            "{}({inner}){tail}",
            if regex.starts_with('^') { "^" } else { "" }
        )
    } else {
        format!(r"^{}\s*({inner}){tail}", regex::escape(ch))
    };
    let real = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if !real.is_file() {
        return Err(EditError::Invalid(format!(
            "File not found: {}",
            real.display()
        )));
    }
    let orig = read_text(&real)?;
    // Python's re.match anchors at the start of the line; `$` may match
    // before the line's newline.
    let re = compile(
        &format!(r"\A(?:{pattern})"),
        ReFlags {
            multi_line: true,
            ..ReFlags::default()
        },
    )?;
    let mut old_changed = Vec::new();
    let mut new_changed = Vec::new();
    let mut out = String::with_capacity(orig.len() + 16);
    for line in split_lines_keep_ends(&orig) {
        if re.is_match(line) {
            let new = if comment {
                format!("{ch}{line}")
            } else {
                line.trim_start_matches(|c| ch.contains(c)).to_string()
            };
            old_changed.push(line);
            out.push_str(&new);
            new_changed.push(new);
        } else {
            out.push_str(line);
        }
    }
    if old_changed.is_empty() {
        return Ok(EditOutcome {
            changed: false,
            diff: String::new(),
        });
    }
    let new_refs: Vec<&str> = new_changed.iter().map(String::as_str).collect();
    let diff = unified_diff_lines(&old_changed, &new_refs);
    if !dry_run {
        commit(&real, &orig, &out, backup)?;
    }
    Ok(EditOutcome {
        changed: true,
        diff,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_replacement_syntax_translates() {
        assert_eq!(python_repl(r"a\1b"), "a${1}b");
        assert_eq!(python_repl(r"\g<x>-$"), "${x}-$$");
        assert_eq!(python_repl(r"x\ny"), "x\ny");
    }

    #[test]
    fn flags_parse_ints_and_names() {
        assert_eq!(
            ReFlags::parse(None).ok(),
            Some(ReFlags {
                multi_line: true,
                ..Default::default()
            })
        );
        let f = ReFlags::parse(Some(&serde_json::json!(["IGNORECASE", "MULTILINE"]))).ok();
        assert_eq!(
            f,
            Some(ReFlags {
                ignore_case: true,
                multi_line: true,
                ..Default::default()
            })
        );
        assert!(ReFlags::parse(Some(&serde_json::json!("BOGUS"))).is_err());
    }
}
