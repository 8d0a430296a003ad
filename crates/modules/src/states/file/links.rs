//! `file.rename` (move a file into place once) and `file.hardlink`, with
//! Salt's comments and `changes`.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use halite_state::{StateCall, StateError, StateResult};
use serde_json::json;

use super::{dirname, error, mode_arg, owner_arg, perms, target_name};
use crate::exec::file::{self as fexec, expand_user, meta};

/// Python's `os.path.expandvars`: `$NAME` and `${NAME}` replaced by the
/// environment variable, left as written when it is unset.
fn expand_vars(text: &str) -> String {
    if !text.contains('$') {
        return text.to_string();
    }
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (var, consumed) = if let Some(inner) = after.strip_prefix('{') {
            match inner.find('}') {
                Some(end) => (&inner[..end], end + 2),
                None => ("", 0),
            }
        } else {
            let end = after.find(|c| !is_name(c)).unwrap_or(after.len());
            (&after[..end], end)
        };
        match (var.is_empty(), std::env::var(var)) {
            (false, Ok(value)) => out.push_str(&value),
            _ => out.push_str(&rest[at..at + 1 + consumed]),
        }
        rest = &after[consumed..];
    }
    out.push_str(rest);
    out
}

/// `file.rename`: moves `source` to `name` unless it was moved already.
pub fn rename(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = expand_vars(&target_name(call));
    let source = expand_vars(&expand_user(&call.require_str("source")?));
    let force = call.arg_bool("force", false);
    let mut ret = StateResult::new(name.clone(), Some(true));
    if name.is_empty() {
        return error(ret, "Must provide name to file.rename");
    }
    if !Path::new(&name).is_absolute() {
        return error(
            ret,
            format!("Specified file {name} is not an absolute path"),
        );
    }
    let lexists = |p: &str| fs::symlink_metadata(p).is_ok();
    if !lexists(&source) {
        ret.comment = format!("Source file \"{source}\" has already been moved out of place");
        return Ok(ret);
    }
    if lexists(&name) {
        if !force {
            ret.comment = format!("The target file \"{name}\" exists and will not be overwritten");
            return Ok(ret);
        }
        if !call.test && fexec::remove(Path::new(&name)).is_err() {
            return error(
                ret,
                format!("Failed to delete \"{name}\" in preparation for forced move"),
            );
        }
    }
    if call.test {
        ret.comment = format!("File \"{source}\" is set to be moved to \"{name}\"");
        ret.result = None;
        return Ok(ret);
    }
    let dname = dirname(&name);
    if !Path::new(&dname).is_dir() {
        if !call.arg_bool("makedirs", false) {
            return error(ret, format!("The target directory {dname} is not present"));
        }
        if let Err(e) = perms::make_parent_dirs(Path::new(&name), None, None, None) {
            return error(ret, e);
        }
    }
    let moved = match fs::read_link(&source) {
        Ok(linkto) => {
            std::os::unix::fs::symlink(&linkto, &name).and_then(|()| fs::remove_file(&source))
        }
        Err(_) => move_path(Path::new(&source), Path::new(&name)),
    };
    if moved.is_err() {
        return error(ret, format!("Failed to move \"{source}\" to \"{name}\""));
    }
    ret.comment = format!("Moved \"{source}\" to \"{name}\"");
    ret.changes.insert(name, json!(source));
    Ok(ret)
}

/// Python's `shutil.move`: a rename, or a copy and delete across
/// filesystems.
fn move_path(source: &Path, dest: &Path) -> std::io::Result<()> {
    match fs::rename(source, dest) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            if source.is_dir() {
                super::paths::copy_tree(source, dest)?;
            } else {
                fs::copy(source, dest)?;
            }
            fexec::remove(source)
        }
        Err(e) => Err(e),
    }
}

/// Whether `path` has more than one hard link (Salt's `file.is_hardlink`).
fn is_hardlink(path: &str) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.nlink() > 1)
}

/// Whether both paths are the same inode (Salt's `_hardlink_same`).
fn same_inode(a: &str, b: &str) -> bool {
    match (fs::symlink_metadata(a), fs::symlink_metadata(b)) {
        (Ok(x), Ok(y)) => x.ino() == y.ino() && x.dev() == y.dev(),
        _ => false,
    }
}

/// Salt's `_hardlink_check`: the test-mode prediction.
fn hardlink_check(name: &str, target: &str, force: bool, ret: &mut StateResult) {
    let (result, comment) = if !Path::new(target).exists() {
        (
            Some(false),
            format!("Target {target} for hard link does not exist"),
        )
    } else if Path::new(target).is_dir() {
        (
            Some(false),
            format!("Unable to hard link from directory {target}"),
        )
    } else if Path::new(name).is_dir() {
        (
            Some(false),
            format!("Unable to hard link to directory {name}"),
        )
    } else if !Path::new(name).exists() {
        ret.changes.insert("new".into(), json!(name));
        (
            None,
            format!("Hard link {name} to {target} is set for creation"),
        )
    } else if is_hardlink(name) {
        if same_inode(name, target) {
            (
                Some(true),
                format!("The hard link {name} is presently targetting {target}"),
            )
        } else {
            ret.changes.insert("change".into(), json!(name));
            (
                None,
                format!("Link {name} target is set to be changed to {target}"),
            )
        }
    } else if force {
        (
            None,
            format!("The file or directory {name} is set for removal to make way for a new hard link targeting {target}"),
        )
    } else {
        (
            Some(false),
            format!("File or directory exists where the hard link {name} should be. Did you mean to use force?"),
        )
    };
    ret.result = result;
    ret.comment = comment;
}

/// `file.hardlink`: `name` is a hard link of the file `target`.
pub fn hardlink(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    let target = call.require_str("target")?;
    let force = call.arg_bool("force", false);
    let mut ret = StateResult::new(name.clone(), Some(true));
    if name.is_empty() {
        return error(ret, "Must provide name to file.hardlink");
    }
    // SAFETY: geteuid cannot fail.
    let user =
        owner_arg(call, "user")?.unwrap_or_else(|| meta::uid_to_user(unsafe { libc::geteuid() }));
    let group = match owner_arg(call, "group")? {
        Some(g) => g,
        None => nix::unistd::User::from_name(&user)
            .ok()
            .flatten()
            .and_then(|u| nix::unistd::Group::from_gid(u.gid).ok().flatten())
            .map_or_else(|| user.clone(), |g| g.name),
    };
    let mut preflight = Vec::new();
    if meta::user_to_uid(&user).is_err() {
        preflight.push(format!("User {user} does not exist"));
    }
    if meta::group_to_gid(&group).is_err() {
        preflight.push(format!("Group {group} does not exist"));
    }
    if !Path::new(&name).is_absolute() {
        preflight.push(format!("Specified file {name} is not an absolute path"));
    }
    if !Path::new(&target).is_absolute() {
        preflight.push(format!("Specified target {target} is not an absolute path"));
    }
    if !preflight.is_empty() {
        let mut msg = preflight.join(". ");
        if preflight.len() > 1 {
            msg.push('.');
        }
        return error(ret, msg);
    }
    if call.test {
        hardlink_check(&name, &target, force, &mut ret);
        return Ok(ret);
    }
    for (direction, item) in [("to", &name), ("from", &target)] {
        if Path::new(item).is_dir() {
            return error(
                ret,
                format!("Unable to hard link {direction} directory {item}"),
            );
        }
    }
    if !Path::new(&target).exists() {
        return error(ret, format!("Target {target} for hard link does not exist"));
    }
    let dname = dirname(&name);
    if !Path::new(&dname).is_dir() {
        if !call.arg_bool("makedirs", false) {
            return error(
                ret,
                format!("Directory {dname} for hard link is not present"),
            );
        }
        let dir_mode = mode_arg(call, "dir_mode")?;
        if let Err(e) = perms::make_parent_dirs(
            Path::new(&name),
            Some(user.as_str()),
            Some(group.as_str()),
            dir_mode.as_deref(),
        ) {
            return error(ret, e);
        }
    }
    if Path::new(&name).is_file() && !is_hardlink(&name) {
        if !force {
            return error(
                ret,
                format!("File exists where the hard link {name} should be"),
            );
        }
        if let Err(e) = fs::remove_file(&name) {
            return error(ret, format!("Could not remove '{name}': {e}"));
        }
        ret.changes.insert(
            "forced".into(),
            json!("File for hard link was forcibly replaced"),
        );
    }
    if is_hardlink(&name) {
        if same_inode(&name, &target) {
            ret.comment = format!("Target of hard link {name} is already pointing to {target}");
            return Ok(ret);
        }
        if let Err(e) = fs::remove_file(&name).and_then(|()| fs::hard_link(&target, &name)) {
            return error(
                ret,
                format!("Unable to set target of hard link {name} -> {target}: {e}"),
            );
        }
        ret.comment = format!("Set target of hard link {name} -> {target}");
        ret.changes.insert("new".into(), json!(name));
    } else if !Path::new(&name).exists() {
        if let Err(e) = fs::hard_link(&target, &name) {
            return error(
                ret,
                format!("Unable to create new hard link {name} -> {target}: {e}"),
            );
        }
        ret.comment = format!("Created new hard link {name} -> {target}");
        ret.changes.insert("new".into(), json!(name));
    }
    Ok(ret)
}

#[cfg(test)]
mod tests {
    use super::expand_vars;

    #[test]
    fn expand_vars_is_pythons() {
        std::env::set_var("HALITE_T_EV", "x");
        assert_eq!(expand_vars("/a/$HALITE_T_EV/${HALITE_T_EV}b"), "/a/x/xb");
        assert_eq!(
            expand_vars("/a/$HALITE_T_UNSET_Q/c"),
            "/a/$HALITE_T_UNSET_Q/c"
        );
        assert_eq!(expand_vars("/a/${open"), "/a/${open");
        assert_eq!(expand_vars("$"), "$");
    }
}
