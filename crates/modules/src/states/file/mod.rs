//! Salt's `file` state module: files, directories, links and in-place
//! edits, with Salt's comments and `changes` shapes so existing state
//! trees and the tooling that reads their results keep working.
//!
//! Every function honours test mode: it predicts (`result: None` with the
//! changes it would make) and leaves the disk alone.
//!
//! Like Salt's, this module has no `mod_watch`: a `watch` on a `file` state
//! behaves as `require`.

mod accumulated;
mod cached;
mod content;
mod decode;
mod edits;
mod keyvalue;
mod links;
pub(crate) mod managed;
mod nodes;
mod patch;
mod paths;
mod perms;
pub(crate) mod remote;
mod same_memo;
mod serialize;
mod tidied;
mod tree;

use halite_state::{StateCall, StateError, StateFunction, StateResult, StateTable, Value};

use crate::exec::file::expand_user;

/// The module's table. `managed` and `serialize` check the new content
/// with `check_cmd` themselves, in a temp file before writing it.
pub const MODULE: StateTable = StateTable {
    name: "file",
    functions: &[
        StateFunction::new("managed", managed::managed).with_own_check_cmd(),
        StateFunction::new("directory", tree::directory),
        StateFunction::new("absent", paths::absent),
        StateFunction::new("exists", paths::exists),
        StateFunction::new("missing", paths::missing),
        StateFunction::new("append", edits::append),
        StateFunction::new("prepend", edits::prepend),
        StateFunction::new("replace", edits::replace),
        StateFunction::new("line", edits::line),
        StateFunction::new("blockreplace", edits::blockreplace),
        StateFunction::new("comment", edits::comment),
        StateFunction::new("uncomment", edits::uncomment),
        StateFunction::new("symlink", paths::symlink),
        StateFunction::new("recurse", tree::recurse),
        StateFunction::new("copy", paths::copy),
        StateFunction::new("touch", paths::touch),
        StateFunction::new("serialize", serialize::serialize).with_own_check_cmd(),
        StateFunction::new("keyvalue", keyvalue::keyvalue),
        StateFunction::new("rename", links::rename),
        StateFunction::new("hardlink", links::hardlink),
        StateFunction::new("tidied", tidied::tidied),
        StateFunction::new("accumulated", accumulated::accumulated),
        StateFunction::new("cached", cached::cached),
        StateFunction::new("not_cached", cached::not_cached),
        StateFunction::new("decode", decode::decode),
        StateFunction::new("patch", patch::patch),
        StateFunction::new("mknod", nodes::mknod),
        StateFunction::new("pruned", nodes::pruned),
    ],
};

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
