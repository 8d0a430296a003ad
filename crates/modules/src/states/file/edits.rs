//! In-place edit states: `replace`, `line`, `blockreplace`, `comment`,
//! `uncomment`, `append` and `prepend`. The editing itself lives in
//! [`crate::exec::file::edit`]; these wrap it with Salt's state comments.

use std::fs;
use std::path::Path;

use halite_state::{StateCall, StateError, StateResult, Value};
use serde_json::json;

use super::{error, opt_str, target_name};
use crate::exec::file::diff::{is_binary, unified_diff_pieces};
use crate::exec::file::edit::{self, ReFlags};
use crate::exec::file::{backup_suffix, touch};

/// Salt's `_check_file`: absolute and existing. Its messages print the
/// path with `str()`: quoted when it is the state's yamlex name unchanged.
fn check_file(call: &StateCall<'_>, name: &str) -> Result<(), String> {
    let p = Path::new(name);
    let shown = || call.chunk.shown_if_name(name);
    if !p.is_absolute() {
        return Err(format!(
            "Specified file {} is not an absolute path",
            shown()
        ));
    }
    if !p.exists() {
        return Err(format!("{}: file not found", shown()));
    }
    Ok(())
}

fn diff_result(
    mut ret: StateResult,
    test: bool,
    changed: bool,
    diff: String,
    would: &str,
) -> StateResult {
    if changed {
        ret.changes.insert("diff".into(), json!(diff));
        if test {
            ret.result = None;
            ret.comment = would.to_string();
        } else {
            ret.result = Some(true);
            ret.comment = "Changes were made".into();
        }
    } else {
        ret.result = Some(true);
        ret.comment = "No changes needed to be made".into();
    }
    ret
}

/// `file.replace`.
pub fn replace(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    let ret = StateResult::new(name.clone(), Some(true));
    if name.is_empty() {
        return error(ret, "Must provide name to file.replace");
    }
    if let Err(msg) = check_file(call, &name) {
        if call.arg_bool("ignore_if_missing", false) && msg.contains("file not found") {
            return Ok(ret.with_comment("No changes needed to be made"));
        }
        return error(ret, msg);
    }
    let args = edit::ReplaceArgs {
        pattern: call.require_str("pattern")?,
        repl: call.require_str("repl")?,
        count: call.arg("count").and_then(Value::as_u64).unwrap_or(0) as usize,
        flags: ReFlags::parse(call.arg("flags")).map_err(|e| StateError::BadArg(e.to_string()))?,
        append_if_not_found: call.arg_bool("append_if_not_found", false),
        prepend_if_not_found: call.arg_bool("prepend_if_not_found", false),
        not_found_content: call.arg_str("not_found_content")?,
        backup: backup_suffix(call.arg("backup"), ".bak"),
        dry_run: call.test,
        search_only: false,
        backslash_literal: call.arg_bool("backslash_literal", false),
    };
    match edit::replace(Path::new(&name), &args) {
        Ok(out) => {
            let diff = if call.arg_bool("show_changes", true) {
                out.diff
            } else {
                "True".into()
            };
            Ok(diff_result(
                ret,
                call.test,
                out.changed,
                diff,
                "Changes would have been made",
            ))
        }
        Err(e) => error(ret, e.to_string()),
    }
}

/// `file.line`.
pub fn line(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    let ret = StateResult::new(name.clone(), Some(true));
    if name.is_empty() {
        return error(ret, "Must provide name to file.line");
    }
    let path = Path::new(&name);
    if call.arg_bool("create", false) && !path.exists() && path.is_absolute() && !call.test {
        if let Err(e) = touch(path, None, None) {
            return error(ret, e.to_string());
        }
    }
    // Salt first runs `file.managed(replace=False)` with these, so owner and
    // mode are enforced (silently) on the file being edited.
    let user = super::owner_arg(call, "user")?;
    let group = super::owner_arg(call, "group")?;
    let file_mode = super::mode_arg(call, "file_mode")?;
    if path.is_file() && (user.is_some() || group.is_some() || file_mode.is_some()) {
        let wanted = super::perms::Wanted {
            user: user.as_deref(),
            group: group.as_deref(),
            mode: file_mode.as_deref(),
            follow_symlinks: true,
        };
        let mut scratch = StateResult::new(name.clone(), Some(true));
        super::perms::check_perms(path, &mut scratch, wanted, call.test);
    }
    if let Err(msg) = check_file(call, &name) {
        return error(ret, msg);
    }
    let Some(mode) = opt_str(call, "mode")?.map(|m| m.to_lowercase()) else {
        return error(ret, "Mode was not defined. How to process the file?");
    };
    let content = call.arg_str("content")?;
    if mode != "delete" && content.is_none() {
        return error(ret, "Content can only be empty if mode is ['delete']");
    }
    let args = edit::LineArgs {
        content,
        match_: call.arg_str("match")?,
        mode,
        location: call.arg_str("location")?,
        before: call.arg_str("before")?,
        after: call.arg_str("after")?,
        indent: call.arg_bool("indent", true),
        backup: call.arg_bool("backup", false),
        dry_run: call.test,
    };
    match edit::line(path, &args) {
        Ok(out) => {
            let diff = if call.arg_bool("show_changes", true) {
                out.diff
            } else {
                "True".into()
            };
            Ok(diff_result(
                ret,
                call.test,
                out.changed,
                diff,
                "Changes would be made",
            ))
        }
        Err(e) => error(ret, e.to_string()),
    }
}

/// `file.blockreplace`.
pub fn blockreplace(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    let ret = StateResult::new(name.clone(), Some(false));
    if name.is_empty() {
        return error(ret, "Must provide name to file.blockreplace");
    }
    if let Err(msg) = check_file(call, &name) {
        return error(ret, msg);
    }
    let mut content = call.arg_str("content")?.unwrap_or_default();
    super::accumulated::extend_block_content(call, &name, &mut content);
    if let Some(source) = call.arg("source") {
        let saltenv = if call.chunk.env().is_empty() {
            "base"
        } else {
            call.chunk.env()
        };
        match super::managed::resolve_source(call, source, saltenv) {
            Ok((_, local)) => {
                let text = fs::read_to_string(&local).map_err(|e| {
                    StateError::Other(format!("Unable to read {}: {e}", local.display()))
                })?;
                let text = match opt_str(call, "template")? {
                    Some(t) => {
                        let ctx =
                            super::managed::template_context(call).map_err(StateError::BadArg)?;
                        super::managed::render(call, &text, &t, &ctx, saltenv)
                            .map_err(StateError::Other)?
                    }
                    None => text,
                };
                content.push_str(&text);
            }
            Err(e) => return error(ret, e),
        }
    }
    let args = edit::BlockArgs {
        marker_start: call
            .arg_str("marker_start")?
            .unwrap_or_else(|| "#-- start managed zone --".into()),
        marker_end: call
            .arg_str("marker_end")?
            .unwrap_or_else(|| "#-- end managed zone --".into()),
        content,
        append_if_not_found: call.arg_bool("append_if_not_found", false),
        prepend_if_not_found: call.arg_bool("prepend_if_not_found", false),
        insert_before_match: call.arg_str("insert_before_match")?,
        insert_after_match: call.arg_str("insert_after_match")?,
        append_newline: call.arg("append_newline").map(halite_state::truthy),
        backup: backup_suffix(call.arg("backup"), ".bak"),
        dry_run: call.test,
    };
    match edit::blockreplace(Path::new(&name), &args) {
        Ok(out) => {
            let diff = if call.arg_bool("show_changes", true) {
                out.diff
            } else {
                "True".into()
            };
            Ok(diff_result(
                ret,
                call.test,
                out.changed,
                diff,
                "Changes would be made",
            ))
        }
        Err(e) => error(
            ret,
            format!("Encountered error managing block: {e}. See the log for details."),
        ),
    }
}

/// Salt's `file.search(name, pattern, multiline=True)`: the pattern anywhere in
/// the file, `^`/`$` at line boundaries (an invalid regex is matched literally).
fn search(name: &str, pattern: &str) -> bool {
    let Ok(text) = fs::read(name) else {
        return false;
    };
    // Salt's `file.search(..., multiline=True)` adds MULTILINE only.
    let flags = ReFlags {
        multi_line: true,
        ..ReFlags::default()
    };
    match edit::compile(pattern, flags) {
        Ok(re) => re.is_match(&String::from_utf8_lossy(&text)),
        Err(_) => String::from_utf8_lossy(&text).contains(pattern),
    }
}

/// Python's `splitlines(True)` on a file's text.
fn read_lines(name: &str) -> Vec<String> {
    let text = fs::read(name)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    text.split_inclusive('\n').map(str::to_string).collect()
}

fn joined_diff(old: &[String], new: &[String], sep: &str) -> String {
    let a: Vec<&str> = old.iter().map(String::as_str).collect();
    let b: Vec<&str> = new.iter().map(String::as_str).collect();
    unified_diff_pieces(&a, &b).join(sep)
}

/// The regex with Salt's anchors and inline flags removed (`comment`).
fn unanchor(regex: &str) -> String {
    let mut r = regex;
    if r.starts_with("(?") && r.len() >= 4 && r.as_bytes()[3] == b')' {
        r = &r[4..];
    }
    let r = r.strip_prefix('^').unwrap_or(r);
    r.strip_suffix('$').unwrap_or(r).to_string()
}

/// `file.comment`.
pub fn comment(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    let mut ret = StateResult::new(name.clone(), Some(false));
    if name.is_empty() {
        return error(ret, "Must provide name to file.comment");
    }
    if let Err(msg) = check_file(call, &name) {
        return error(ret, msg);
    }
    let regex = call.require_str("regex")?;
    let ch = call.arg_str("char")?.unwrap_or_else(|| "#".into());
    let backup = backup_suffix(call.arg("backup"), ".bak");
    let unanchored = unanchor(&regex);
    // Salt's `^(?!\s*#)\s*<regex>`: an uncommented line matching the regex.
    let uncommented_re = edit::compile(&format!(r"^\s*(?:{unanchored})"), ReFlags::default())
        .map_err(|e| StateError::BadArg(e.to_string()))?;
    let has_uncommented = read_lines(&name)
        .iter()
        .any(|l| !l.trim_start().starts_with(ch.as_str()) && uncommented_re.is_match(l));
    let comment_regex = format!("{}{unanchored}", regex::escape(&ch));
    if !has_uncommented {
        if search(&name, &comment_regex) {
            ret.result = Some(true);
            ret.comment = "Pattern already commented".into();
            return Ok(ret);
        }
        if call.arg_bool("ignore_missing", false) {
            ret.result = Some(true);
            ret.comment = "Pattern not found and ignore_missing set to True".into();
            return Ok(ret);
        }
        return error(ret, format!("{unanchored}: Pattern not found"));
    }
    if call.test {
        ret.changes.insert(name.clone(), json!("updated"));
        ret.comment = format!("File {name} is set to be updated");
        ret.result = None;
        return Ok(ret);
    }
    let before = read_lines(&name);
    edit::comment_line(
        Path::new(&name),
        &regex,
        &ch,
        true,
        backup.as_deref(),
        false,
    )
    .map_err(|e| StateError::Other(e.to_string()))?;
    let after = read_lines(&name);
    ret.result = Some(search(&name, &comment_regex));
    if before != after {
        let diff = if is_binary(&fs::read(&name).unwrap_or_default()) {
            "Replace binary file".into()
        } else {
            joined_diff(&before, &after, "")
        };
        ret.changes.insert("diff".into(), json!(diff));
    }
    ret.comment = if ret.result == Some(true) {
        "Commented lines successfully"
    } else {
        "Expected commented lines not found"
    }
    .into();
    Ok(ret)
}

/// `file.uncomment`.
pub fn uncomment(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    let mut ret = StateResult::new(name.clone(), Some(false));
    if name.is_empty() {
        return error(ret, "Must provide name to file.uncomment");
    }
    if let Err(msg) = check_file(call, &name) {
        return error(ret, msg);
    }
    let regex = call.require_str("regex")?;
    let ch = call.arg_str("char")?.unwrap_or_else(|| "#".into());
    let backup = backup_suffix(call.arg("backup"), ".bak");
    let bare = regex.trim_start_matches('^');
    let uncommented = format!("^[ \t]*{bare}");
    if search(&name, &format!("{}[ \t]*{bare}", regex::escape(&ch))) {
        // There is something to uncomment.
    } else if search(&name, &uncommented) {
        ret.result = Some(true);
        ret.comment = "Pattern already uncommented".into();
        return Ok(ret);
    } else {
        return error(ret, format!("{regex}: Pattern not found"));
    }
    if call.test {
        ret.changes.insert(name.clone(), json!("updated"));
        ret.comment = format!("File {name} is set to be updated");
        ret.result = None;
        return Ok(ret);
    }
    let before = read_lines(&name);
    edit::comment_line(
        Path::new(&name),
        &regex,
        &ch,
        false,
        backup.as_deref(),
        false,
    )
    .map_err(|e| StateError::Other(e.to_string()))?;
    let after = read_lines(&name);
    ret.result = Some(search(&name, &uncommented));
    if before != after {
        ret.changes
            .insert("diff".into(), json!(joined_diff(&before, &after, "")));
    }
    ret.comment = if ret.result == Some(true) {
        "Uncommented lines successfully"
    } else {
        "Expected uncommented lines not found"
    }
    .into();
    Ok(ret)
}

/// The `text` argument as chunks (a string or a list of strings).
fn text_chunks(call: &StateCall<'_>) -> Result<Vec<String>, StateError> {
    let mut out = Vec::new();
    for v in call.arg_list("text") {
        match v {
            Value::String(s) => out.push(s),
            Value::Null => {}
            other => out.push(other.to_string()),
        }
    }
    if let Some(source) = call.arg("source").or_else(|| call.arg("sources")) {
        let saltenv = if call.chunk.env().is_empty() {
            "base"
        } else {
            call.chunk.env()
        };
        let (_, local) =
            super::managed::resolve_source(call, source, saltenv).map_err(StateError::Other)?;
        let text = fs::read_to_string(&local)
            .map_err(|e| StateError::Other(format!("Unable to read {}: {e}", local.display())))?;
        let text = match opt_str(call, "template")? {
            Some(t) => {
                let ctx = super::managed::template_context(call).map_err(StateError::BadArg)?;
                super::managed::render(call, &text, &t, &ctx, saltenv).map_err(StateError::Other)?
            }
            None => text,
        };
        out = vec![text];
    }
    Ok(out)
}

/// Salt's `build_whitespace_split_regex`: the chunk's words with any
/// whitespace between them, one line each.
fn whitespace_split_regex(chunk: &str) -> String {
    let mut re = String::new();
    for line in chunk.lines() {
        let parts: Vec<String> = line.split_whitespace().map(regex::escape).collect();
        re.push_str(&format!(
            r"(?:[\s]+)?{}(?:[\s]+)?",
            parts.join(r"(?:[\s]+)?")
        ));
    }
    format!("(?m)^{re}$")
}

/// Shared start of `append`/`prepend`: makedirs, create the file when missing.
fn ensure_file(call: &StateCall<'_>, name: &str, ret: &mut StateResult) -> Option<StateResult> {
    let path = Path::new(name);
    if call.arg_bool("makedirs", false) {
        let dir = super::dirname(name);
        if call.test {
            ret.comment = format!("Directory {dir} is set to be updated");
            ret.result = None;
        } else if !Path::new(&dir).is_dir() {
            if let Err(e) = super::perms::make_parent_dirs(path, None, None, None) {
                return Some(StateResult::fail(name, e));
            }
        }
    }
    if let Err(msg) = check_file(call, name) {
        if !path.is_absolute() {
            return Some(StateResult::fail(name, msg));
        }
        if call.test {
            let mut r = StateResult::new(name, None);
            r.comment = format!("File {name} is set to be created");
            r.changes.insert("new".into(), json!(name));
            return Some(r);
        }
        if !Path::new(&super::dirname(name)).is_dir() {
            return Some(StateResult::fail(name, msg));
        }
        if touch(path, None, None).is_err() {
            return Some(StateResult::fail(name, msg));
        }
    }
    None
}

/// `file.append`: adds the text chunks not already in the file at its end.
pub fn append(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    let mut ret = StateResult::new(name.clone(), Some(false));
    if name.is_empty() {
        return error(ret, "Must provide name to file.append");
    }
    if let Some(early) = ensure_file(call, &name, &mut ret) {
        return Ok(early);
    }
    let chunks = text_chunks(call)?;
    let ignore_ws = call.arg_bool("ignore_whitespace", true);
    let show_changes = call.arg_bool("show_changes", true);
    let text = fs::read(&name)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let slines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut append_lines = Vec::new();
    for chunk in &chunks {
        let present = if ignore_ws {
            search(&name, &whitespace_split_regex(chunk))
        } else {
            search(&name, chunk)
        };
        if present {
            continue;
        }
        append_lines.extend(chunk.lines().map(str::to_string));
    }
    let binary = is_binary(text.as_bytes());
    let diff_of = |old: &[String], new: &[String]| {
        if binary {
            "Replace binary file".to_string()
        } else if !show_changes {
            "<show_changes=False>".to_string()
        } else {
            joined_diff(old, new, "\n")
        }
    };
    if call.test {
        let mut nlines = slines.clone();
        nlines.extend(append_lines.iter().cloned());
        if nlines != slines {
            ret.comment = format!("File {name} is set to be updated");
            ret.result = None;
            ret.changes
                .insert("diff".into(), json!(diff_of(&slines, &nlines)));
        } else {
            ret.comment = format!("File {name} is in correct state");
            ret.result = Some(true);
        }
        return Ok(ret);
    }
    if !append_lines.is_empty() {
        let mut new_text = text.clone();
        if !new_text.is_empty() && !new_text.ends_with('\n') {
            new_text.push('\n');
        }
        for l in &append_lines {
            new_text.push_str(l);
            new_text.push('\n');
        }
        super::managed::write_atomic(Path::new(&name), new_text.as_bytes(), 0o644)
            .map_err(|e| StateError::Other(format!("Unable to write {name}: {e}")))?;
        ret.comment = format!("Appended {} lines", append_lines.len());
    } else {
        ret.comment = format!("File {name} is in correct state");
    }
    let after = fs::read(&name)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let nlines: Vec<String> = after.lines().map(str::to_string).collect();
    if nlines != slines {
        ret.changes
            .insert("diff".into(), json!(diff_of(&slines, &nlines)));
    }
    ret.result = Some(true);
    Ok(ret)
}

/// `file.prepend`: adds the text chunks not already in the file at its start.
pub fn prepend(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    let mut ret = StateResult::new(name.clone(), Some(false));
    if name.is_empty() {
        return error(ret, "Must provide name to file.prepend");
    }
    if let Some(early) = ensure_file(call, &name, &mut ret) {
        return Ok(early);
    }
    let chunks = text_chunks(call)?;
    let header = call.arg_bool("header", false);
    let show_changes = call.arg_bool("show_changes", true);
    let slines = read_lines(&name);
    let mut preface: Vec<String> = Vec::new();
    for chunk in &chunks {
        if !header && search(&name, &whitespace_split_regex(chunk)) {
            continue;
        }
        preface.extend(chunk.lines().map(str::to_string));
    }
    let mut count = preface.len();
    let binary = is_binary(&fs::read(&name).unwrap_or_default());
    let diff_of = |old: &[String], new: &[String]| {
        if binary {
            "Replace binary file".to_string()
        } else if !show_changes {
            "<show_changes=False>".to_string()
        } else {
            joined_diff(old, new, "")
        }
    };
    if header {
        let head: Vec<String> = slines
            .iter()
            .take(preface.len())
            .map(|l| l.trim_end_matches(['\r', '\n']).to_string())
            .collect();
        if head == preface {
            count = 0;
            preface.clear();
        }
    }
    let mut nlines: Vec<String> = preface.iter().map(|l| format!("{l}\n")).collect();
    nlines.extend(slines.iter().cloned());
    if call.test {
        if nlines != slines {
            ret.comment = format!("File {name} is set to be updated");
            ret.result = None;
            ret.changes
                .insert("diff".into(), json!(diff_of(&slines, &nlines)));
        } else {
            ret.comment = format!("File {name} is in correct state");
            ret.result = Some(true);
        }
        return Ok(ret);
    }
    if nlines != slines {
        super::managed::write_atomic(Path::new(&name), nlines.concat().as_bytes(), 0o644)
            .map_err(|e| StateError::Other(format!("Unable to write {name}: {e}")))?;
        ret.changes
            .insert("diff".into(), json!(diff_of(&slines, &nlines)));
    }
    ret.comment = if count > 0 {
        format!("Prepended {count} lines")
    } else {
        format!("File {name} is in correct state")
    };
    ret.result = Some(true);
    Ok(ret)
}
