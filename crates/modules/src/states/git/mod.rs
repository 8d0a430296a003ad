//! Salt's `git` state module: `latest` (a checkout that follows a remote
//! rev), `detached` (a detached HEAD at a rev), `cloned` (cloned once,
//! optionally on a branch), `present` (an initialized, usually bare,
//! repository), `config_set`/`config_unset`, with Salt 3008's comments,
//! `changes` and `test=True` predictions, over [`crate::exec::git`].
//!
//! Like Salt's, the module has no `mod_watch`: `watch` acts as `require`.
//! `unless`/`onlyif` are the engine's (Salt's `mod_run_check`).

mod config;
mod detached;
mod latest;
mod present;

use halite_state::{StateCall, StateFunction, StateResult, StateTable, Value};

use crate::exec::git::run::Git;

/// The module's table.
pub const MODULE: StateTable = StateTable {
    name: "git",
    functions: &[
        StateFunction::new("latest", latest::latest),
        StateFunction::new("cloned", present::cloned),
        StateFunction::new("detached", detached::detached),
        StateFunction::new("present", present::present),
        StateFunction::new("config_set", config::config_set),
        StateFunction::new("config_unset", config::config_unset),
    ],
};

/// Salt's `_format_comments`: joined with ". ", a final "." when several.
fn format_comments(comments: &[String]) -> String {
    let mut s = comments.join(". ");
    if comments.len() > 1 {
        s.push('.');
    }
    s
}

/// Salt's `_fail`: result False, the changes already made appended.
fn fail(mut ret: StateResult, msg: impl Into<String>, comments: &[String]) -> StateResult {
    let mut msg = msg.into();
    if !comments.is_empty() {
        msg.push_str("\n\nChanges already made: ");
        msg.push_str(&format_comments(comments));
    }
    ret.result = Some(false);
    ret.comment = msg;
    ret
}

/// Salt's `_neutral_test`: result None with `comment`.
fn neutral(mut ret: StateResult, comment: impl Into<String>) -> StateResult {
    ret.result = None;
    ret.comment = comment.into();
    ret
}

/// A string argument the way Salt's git states coerce it (`str(x)`).
fn arg_string(call: &StateCall<'_>, key: &str) -> Option<String> {
    call.arg(key).map(crate::exec::py_str)
}

/// The runner for a state: its `user` argument.
fn git_for<'a>(call: &StateCall<'a>) -> Git<'a> {
    Git::new(call.env, arg_string(call, "user"))
}

/// A [`StateResult`] named after the call, result True, empty.
fn start(call: &StateCall<'_>) -> StateResult {
    StateResult::new(call.name(), Some(true))
}

/// Whether `path` is a directory that has entries.
fn non_empty_dir(path: &str) -> bool {
    std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_some())
}

/// Removes everything inside `dir` (Salt's `rm_rf` of each entry):
/// `(entry, error)` for each that could not be removed.
fn empty_dir(dir: &str) -> Vec<(String, std::io::Error)> {
    let mut errors = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => return vec![(dir.to_string(), e)],
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let removed = match entry.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path),
            _ => std::fs::remove_file(&path),
        };
        if let Err(e) = removed {
            if e.kind() != std::io::ErrorKind::NotFound {
                errors.push((path.display().to_string(), e));
            }
        }
    }
    errors
}

/// The value of an argument that must be a bool (`force`, `bare`...).
fn flag(call: &StateCall<'_>, key: &str, default: bool) -> bool {
    call.arg_bool(key, default)
}

/// Whether the value is Python's None or missing.
fn is_none(v: Option<&Value>) -> bool {
    v.is_none_or(Value::is_null)
}
