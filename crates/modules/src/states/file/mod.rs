//! Salt's `file` state module: files, directories, links and in-place
//! edits, with Salt's comments and `changes` shapes so existing state
//! trees and the tooling that reads their results keep working.
//!
//! Every function honours test mode: it predicts (`result: None` with the
//! changes it would make) and leaves the disk alone.
//!
//! Like Salt's, this module has no `mod_watch`: a `watch` on a `file` state
//! behaves as `require`.

mod edits;
pub(crate) mod managed;
mod paths;
mod perms;
pub(crate) mod remote;
mod serialize;
mod tree;

use halite_state::{StateCall, StateError, StateModule, StateResult, Value};

use crate::exec::file::expand_user;

/// The `file` state module.
pub struct FileState;

const FUNCTIONS: &[&str] = &[
    "managed",
    "directory",
    "absent",
    "exists",
    "missing",
    "append",
    "prepend",
    "replace",
    "line",
    "blockreplace",
    "comment",
    "uncomment",
    "symlink",
    "recurse",
    "copy",
    "touch",
    "serialize",
];

impl StateModule for FileState {
    fn name(&self) -> &'static str {
        "file"
    }
    fn functions(&self) -> Vec<&'static str> {
        FUNCTIONS.to_vec()
    }
    fn runs_own_check_cmd(&self, fun: &str) -> bool {
        matches!(fun, "managed" | "serialize")
    }
    fn call(&self, fun: &str, call: &StateCall<'_>) -> Result<StateResult, StateError> {
        match fun {
            "managed" => managed::managed(call),
            "directory" => tree::directory(call),
            "recurse" => tree::recurse(call),
            "absent" => paths::absent(call),
            "exists" => paths::exists(call),
            "missing" => paths::missing(call),
            "symlink" => paths::symlink(call),
            "copy" => paths::copy(call),
            "touch" => paths::touch(call),
            "append" => edits::append(call),
            "prepend" => edits::prepend(call),
            "replace" => edits::replace(call),
            "line" => edits::line(call),
            "blockreplace" => edits::blockreplace(call),
            "comment" => edits::comment(call),
            "uncomment" => edits::uncomment(call),
            "serialize" => serialize::serialize(call),
            other => Err(StateError::Other(format!("file.{other} is not available"))),
        }
    }
}

/// The `name` argument with `~` expanded (Salt's `os.path.expanduser`).
pub(crate) fn target_name(call: &StateCall<'_>) -> String {
    expand_user(call.name())
}

/// A string argument where `None`/absent and the empty string both mean unset.
pub(crate) fn opt_str(call: &StateCall<'_>, key: &str) -> Result<Option<String>, StateError> {
    Ok(call.arg_str(key)?.filter(|s| !s.is_empty()))
}

/// The `user`/`group` argument: names or numeric ids (YAML may load `0` as an int).
pub(crate) fn owner_arg(call: &StateCall<'_>, key: &str) -> Result<Option<String>, StateError> {
    match call.arg(key) {
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        _ => opt_str(call, key),
    }
}

/// A mode argument normalized as Salt does (`644`, `"0644"`, `"0o644"` ->
/// `"0644"`), refused with a clear message when it is not octal. `keep`
/// (file.managed's "mode of the source") reads as no mode here.
pub(crate) fn mode_arg(call: &StateCall<'_>, key: &str) -> Result<Option<String>, StateError> {
    let Some(raw) = call.arg(key) else {
        return Ok(None);
    };
    if raw.as_str().is_some_and(|s| s.eq_ignore_ascii_case("keep")) {
        return Ok(None);
    }
    let Some(mode) = crate::exec::file::meta::normalize_mode(raw) else {
        return Ok(None);
    };
    crate::exec::file::meta::parse_mode(&mode).map_err(|e| StateError::BadArg(e.to_string()))?;
    Ok(Some(mode))
}

/// A result whose `result` is False with `comment` (Salt's `_error`).
pub(crate) fn error(
    mut ret: StateResult,
    comment: impl Into<String>,
) -> Result<StateResult, StateError> {
    ret.result = Some(false);
    ret.comment = comment.into();
    Ok(ret)
}

/// The parent directory of a path as Python's `os.path.dirname` gives it.
pub(crate) fn dirname(path: &str) -> String {
    match path.rfind('/') {
        Some(0) => "/".to_string(),
        Some(i) => {
            let head = path[..i].trim_end_matches('/');
            if head.is_empty() {
                "/".to_string()
            } else {
                head.to_string()
            }
        }
        None => String::new(),
    }
}

/// This module, as registered.
pub const MODULE: FileState = FileState;
