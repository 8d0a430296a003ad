//! Whole-path states: `absent`, `exists`, `missing`, `symlink`, `copy`
//! and `touch`.

use std::fs;
use std::path::Path;

use halite_state::{StateCall, StateError, StateResult, Value};
use serde_json::json;

use super::perms::{self, Wanted};
use super::{dirname, error, opt_str, owner_arg, target_name};
use crate::exec::file::{self as fexec, meta};

/// `file.absent`: removes a file, a link or a whole directory tree.
pub fn absent(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    // As Salt's `str()` prints it: quoted when the yamlex name unchanged.
    let shown = call.chunk.shown_if_name(&name).into_owned();
    let mut ret = StateResult::new(name.clone(), Some(true));
    if name.is_empty() {
        return error(ret, "Must provide name to file.absent");
    }
    let path = Path::new(&name);
    if !path.is_absolute() {
        return error(
            ret,
            format!("Specified file {shown} is not an absolute path"),
        );
    }
    if name == "/" {
        return error(ret, "Refusing to make \"/\" absent");
    }
    let Ok(md) = fs::symlink_metadata(path) else {
        ret.comment = format!("File {shown} is not present");
        return Ok(ret);
    };
    let kind = if md.is_dir() { "Directory" } else { "File" };
    if call.test {
        ret.result = None;
        ret.changes.insert("removed".into(), json!(name));
        ret.comment = format!("{kind} {shown} is set for removal");
        return Ok(ret);
    }
    match fexec::remove(path) {
        Ok(()) => {
            ret.comment = format!("Removed {} {shown}", kind.to_lowercase());
            ret.changes.insert("removed".into(), json!(name));
            Ok(ret)
        }
        Err(e) if md.is_dir() => error(ret, format!("Failed to remove directory {shown}: {e}")),
        Err(e) => error(ret, format!("Could not remove '{shown}': {e}")),
    }
}

/// `file.exists`: fails unless the path exists.
pub fn exists(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    // As Salt's `str()` prints it: quoted when the yamlex name unchanged.
    let shown = call.chunk.shown_if_name(&name).into_owned();
    let mut ret = StateResult::new(name.clone(), Some(true));
    if name.is_empty() {
        return error(ret, "Must provide name to file.exists");
    }
    if !Path::new(&name).exists() {
        return error(ret, format!("Specified path {shown} does not exist"));
    }
    ret.comment = format!("Path {shown} exists");
    Ok(ret)
}

/// `file.missing`: fails if the path exists.
pub fn missing(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    // As Salt's `str()` prints it: quoted when the yamlex name unchanged.
    let shown = call.chunk.shown_if_name(&name).into_owned();
    let mut ret = StateResult::new(name.clone(), Some(true));
    if name.is_empty() {
        return error(ret, "Must provide name to file.missing");
    }
    if Path::new(&name).exists() {
        return error(ret, format!("Specified path {shown} exists"));
    }
    ret.comment = format!("Path {shown} is missing");
    Ok(ret)
}

fn time_arg(call: &StateCall<'_>, key: &str) -> Option<i64> {
    match call.arg(key) {
        Some(Value::Number(n)) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Some(Value::String(s)) => s.parse::<f64>().ok().map(|f| f as i64),
        _ => None,
    }
}

/// `file.touch`: creates an empty file or updates its times.
pub fn touch(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    let mut ret = StateResult::new(name.clone(), Some(true));
    if name.is_empty() {
        return error(ret, "Must provide name to file.touch");
    }
    let path = Path::new(&name);
    if !path.is_absolute() {
        return error(
            ret,
            format!("Specified file {name} is not an absolute path"),
        );
    }
    let (atime, mtime) = (time_arg(call, "atime"), time_arg(call, "mtime"));
    if call.test {
        ret.result = None;
        if !path.exists() {
            ret.comment = format!("File {name} is set to be created");
            ret.changes.insert("new".into(), json!(name));
        } else {
            let md = meta::metadata(path, false).map_err(|e| StateError::Other(e.to_string()))?;
            use std::os::unix::fs::MetadataExt;
            if atime.is_some_and(|a| a != md.atime()) || mtime.is_some_and(|m| m != md.mtime()) {
                ret.comment = format!("Times set to be updated on file {name}");
                ret.changes.insert("touched".into(), json!(name));
            } else {
                // Salt keeps its initial `{"new": name}` here even though
                // nothing will change.
                ret.result = Some(true);
                ret.comment = format!("File {name} exists and has the correct times");
                ret.changes.insert("new".into(), json!(name));
            }
        }
        return Ok(ret);
    }
    if call.arg_bool("makedirs", false) {
        if let Err(e) = perms::make_parent_dirs(path, None, None, None) {
            return error(ret, e);
        }
    }
    if !Path::new(&dirname(&name)).is_dir() {
        return error(ret, format!("Directory not present to touch file {name}"));
    }
    let extant = path.exists();
    if let Err(e) = fexec::touch(path, atime, mtime) {
        return error(ret, e.to_string());
    }
    if extant {
        let what = if path.is_dir() { "directory" } else { "file" };
        ret.comment = format!("Updated times on {what} {name}");
        ret.changes.insert("touched".into(), json!(name));
    } else {
        ret.comment = format!("Created empty file {name}");
        ret.changes.insert("new".into(), json!(name));
    }
    Ok(ret)
}

/// The user the run acts as and its primary group (Salt's defaults for
/// `symlink` and `copy` ownership).
fn current_user_and_group() -> (String, String) {
    // SAFETY: geteuid/getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    (meta::uid_to_user(uid), meta::gid_to_group(gid))
}

/// `file.symlink`: a symbolic link `name` -> `target`.
pub fn symlink(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    // As Salt's `str()` prints it: quoted when the yamlex name unchanged.
    let shown = call.chunk.shown_if_name(&name).into_owned();
    let mut ret = StateResult::new(name.clone(), Some(true));
    if name.is_empty() {
        return error(ret, "Must provide name to file.symlink");
    }
    let target = call.require_str("target")?;
    let starget = call.chunk.shown(&target).into_owned();
    let force = call.arg_bool("force", false);
    let makedirs = call.arg_bool("makedirs", false);
    let (def_user, def_group) = current_user_and_group();
    let user = owner_arg(call, "user")?.unwrap_or(def_user);
    let group = owner_arg(call, "group")?.unwrap_or(def_group);
    let mut preflight = Vec::new();
    if meta::user_to_uid(&user).is_err() {
        preflight.push(format!("User {user} does not exist"));
    }
    if meta::group_to_gid(&group).is_err() {
        preflight.push(format!("Group {group} does not exist"));
    }
    let path = Path::new(&name);
    if !path.is_absolute() {
        preflight.push(format!("Specified file {shown} is not an absolute path"));
    }
    if !preflight.is_empty() {
        let mut msg = preflight.join(". ");
        if preflight.len() > 1 {
            msg.push('.');
        }
        return error(ret, msg);
    }
    let link_owner = |p: &Path| meta::ownership(p, false).ok().map(|o| (o.user, o.group));
    let is_link = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let current_target = fs::read_link(path).ok().map(|t| t.display().to_string());
    // Prediction (Salt's _symlink_check).
    let mut tresult = None;
    let mut tcomment;
    let mut tchanges = halite_state::Map::new();
    if !is_link && !path.exists() {
        tchanges.insert("new".into(), json!(name));
        tcomment = format!("Symlink {shown} to {starget} is set for creation");
    } else if is_link {
        if current_target.as_deref() != Some(target.as_str()) {
            tchanges.insert("change".into(), json!(name));
            tcomment = format!("Link {shown} target is set to be changed to {starget}");
        } else {
            tresult = Some(true);
            tcomment = format!("The symlink {shown} is present");
            if let Some((u, g)) = link_owner(path).filter(|(u, g)| *u != user || *g != group) {
                tresult = None;
                tchanges.insert("ownership".into(), json!(format!("{u}:{g}")));
                tcomment.push_str(&format!(
                    ", but the ownership of the symlink would be changed from {u}:{g} to {user}:{group}"
                ));
            }
        }
    } else if force {
        tcomment = format!("The file or directory {shown} is set for removal to make way for a new symlink targeting {starget}");
    } else {
        tresult = Some(false);
        tcomment = format!("File or directory exists where the symlink {shown} should be. Did you mean to use force?");
    }
    let parent = dirname(&name);
    if !Path::new(&parent).is_dir() {
        if makedirs {
            if call.test {
                tcomment.push_str(&format!("\n{parent} will be created"));
            } else if let Err(e) = perms::make_parent_dirs(path, Some(&user), Some(&group), None) {
                return error(ret, e);
            }
        } else if call.test {
            tcomment.push_str(&format!("\nDirectory {parent} for symlink is not present"));
        } else {
            return error(
                ret,
                format!("Directory {parent} for symlink is not present"),
            );
        }
    }
    if call.test {
        ret.result = tresult;
        ret.comment = tcomment;
        ret.changes = tchanges;
        return Ok(ret);
    }
    if is_link {
        if current_target.as_deref().map(normpath) != Some(normpath(&target)) {
            fexec::remove(path)
                .map_err(|e| StateError::Other(format!("Could not remove '{shown}': {e}")))?;
        } else {
            if link_owner(path).is_some_and(|(u, g)| u == user && g == group) {
                ret.comment = format!("Symlink {shown} is present and owned by {user}:{group}");
            } else if meta::chown(path, Some(&user), Some(&group), false).is_ok() {
                ret.comment = format!("Set ownership of symlink {shown} to {user}:{group}");
                ret.changes
                    .insert("ownership".into(), json!(format!("{user}:{group}")));
            } else {
                ret.result = Some(false);
                ret.comment =
                    format!("Failed to set ownership of symlink {shown} to {user}:{group}");
            }
            return Ok(ret);
        }
    } else if fs::symlink_metadata(path).is_ok() {
        if let Some(backupname) = opt_str(call, "backupname")? {
            let backupname = if backupname.starts_with('/') {
                backupname
            } else if !backupname.contains('/') {
                format!("{}/{backupname}", dirname(&normpath(&name)))
            } else {
                return error(
                    ret,
                    format!("Backupname must be an absolute path or a file name: {backupname}"),
                );
            };
            let backup = Path::new(&backupname);
            if fs::symlink_metadata(backup).is_ok() {
                if !force {
                    return error(
                        ret,
                        format!(
                            "Symlink & backup dest exists and Force not set. {shown} -> {starget} - backup: {backupname}"
                        ),
                    );
                }
                if let Err(e) = fexec::remove(backup) {
                    return error(ret, format!("Could not remove '{backupname}': {e}"));
                }
            }
            if let Err(e) = fs::rename(path, backup) {
                return error(
                    ret,
                    format!("Unable to rename {shown} to backup {backupname} -> : {e}"),
                );
            }
        } else if !force {
            let kind = if path.is_file() {
                "File"
            } else if path.is_dir() {
                "Directory"
            } else {
                "File system entry"
            };
            return error(
                ret,
                format!("{kind} exists where the symlink {shown} should be"),
            );
        }
        if fs::symlink_metadata(path).is_ok() {
            if let Err(e) = fexec::remove(path) {
                return error(
                    ret,
                    format!("Unable to create new symlink {shown} -> {starget}: {e}"),
                );
            }
        }
    }
    if let Err(e) = std::os::unix::fs::symlink(&target, path) {
        ret.result = Some(false);
        ret.comment = format!("Unable to create new symlink {shown} -> {starget}: {e}");
        return Ok(ret);
    }
    ret.comment = format!("Created new symlink {shown} -> {starget}");
    ret.changes.insert("new".into(), json!(name));
    if link_owner(path).is_some_and(|(u, g)| u != user || g != group)
        && meta::chown(path, Some(&user), Some(&group), false).is_err()
    {
        ret.result = Some(false);
        ret.comment.push_str(&format!(
            ", but was unable to set ownership to {user}:{group}"
        ));
    }
    Ok(ret)
}

fn normpath(p: &str) -> String {
    let trimmed = p.trim_end_matches('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in trimmed.split('/') {
        match part {
            "" | "." if !parts.is_empty() => {}
            ".." if parts.last().is_some_and(|l| *l != ".." && !l.is_empty()) => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    if joined.is_empty() {
        if p.starts_with('/') {
            "/".into()
        } else {
            ".".into()
        }
    } else {
        joined
    }
}

/// Copies a directory tree (`shutil.copytree`); `file.rename` uses it across filesystems.
pub(super) fn copy_tree(src: &Path, dst: &Path) -> std::io::Result<()> {
    fs::create_dir(dst)?;
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let ft = entry.file_type()?;
        if ft.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&from)?, &to)?;
        } else if ft.is_dir() {
            copy_tree(&from, &to)?;
        } else {
            fs::copy(&from, &to)?;
        }
    }
    Ok(())
}

/// `file.copy`: copies `source` to `name` unless it exists (or `force`).
pub fn copy(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    let source = fexec::expand_user(&call.require_str("source")?);
    let mut ret = StateResult::ok(name.clone(), format!("Copied \"{source}\" to \"{name}\""));
    if name.is_empty() {
        return error(ret, "Must provide name to file.copy");
    }
    let force = call.arg_bool("force", false);
    let preserve = call.arg_bool("preserve", false);
    let mut dest = name.clone();
    if !Path::new(&name).is_absolute() {
        return error(
            ret,
            format!("Specified file {name} is not an absolute path"),
        );
    }
    let src_path = Path::new(&source);
    if !src_path.exists() {
        return error(ret, format!("Source file \"{source}\" is not present"));
    }
    let (user, group, mode) = if preserve {
        let o = meta::ownership(src_path, true).map_err(|e| StateError::Other(e.to_string()))?;
        (o.user, o.group, Some(o.mode))
    } else {
        let (def_user, def_group) = current_user_and_group();
        let user = owner_arg(call, "user")?.unwrap_or(def_user);
        let group = owner_arg(call, "group")?.unwrap_or(def_group);
        let u_check = perms::check_user(Some(&user), Some(&group), call.test);
        if !u_check.is_empty() {
            return error(ret, u_check);
        }
        let mode = super::mode_arg(call, "mode")?
            .or_else(|| meta::ownership(src_path, true).ok().map(|o| o.mode));
        (user, group, mode)
    };
    if Path::new(&dest).is_dir() && call.arg_bool("subdir", false) {
        let base = src_path
            .file_name()
            .map(|b| b.to_string_lossy().into_owned())
            .unwrap_or_default();
        dest = format!("{}/{base}", dest.trim_end_matches('/'));
        ret.name = name.clone();
    }
    let dest_path = Path::new(&dest).to_path_buf();
    let mut changed = true;
    if fs::symlink_metadata(&dest_path).is_ok() {
        if force && dest_path.is_file() {
            let same = meta::file_hash(&dest_path, meta::HashType::Sha256).ok()
                == meta::file_hash(src_path, meta::HashType::Sha256).ok();
            if same {
                ret.comment
                    .push_str(" - files are identical but force flag is set");
            }
        }
        if !force {
            changed = false;
        } else if !call.test {
            if let Err(e) = fexec::remove(&dest_path) {
                return error(
                    ret,
                    format!("Failed to delete \"{dest}\" in preparation for forced move: {e}"),
                );
            }
        }
    }
    if call.test {
        if changed {
            ret.comment = format!("File \"{source}\" is set to be copied to \"{dest}\"");
            ret.result = None;
        } else {
            ret.comment = format!("The target file \"{dest}\" exists and will not be overwritten");
        }
        return Ok(ret);
    }
    if !changed {
        ret.comment = format!("The target file \"{dest}\" exists and will not be overwritten");
        return Ok(ret);
    }
    let parent = dirname(&dest);
    if !Path::new(&parent).is_dir() {
        if call.arg_bool("makedirs", false) {
            let dir_mode = super::mode_arg(call, "dir_mode")?
                .or_else(|| mode.as_deref().map(perms::dir_mode_from_file_mode));
            if let Err(e) =
                perms::make_parent_dirs(&dest_path, Some(&user), Some(&group), dir_mode.as_deref())
            {
                return error(ret, e);
            }
        } else {
            return error(ret, format!("The target directory {parent} is not present"));
        }
    }
    let copied = if src_path.is_dir() {
        copy_tree(src_path, &dest_path).map(|_| {
            for entry in walkdir::WalkDir::new(&dest_path)
                .min_depth(1)
                .into_iter()
                .filter_map(Result::ok)
            {
                let _ = meta::chown(entry.path(), Some(&user), Some(&group), false);
            }
        })
    } else {
        fs::copy(src_path, &dest_path).map(|_| ())
    };
    if copied.is_err() {
        return error(ret, format!("Failed to copy \"{source}\" to \"{dest}\""));
    }
    ret.changes.insert(dest.clone(), json!(source));
    if preserve {
        let _ = meta::chown(&dest_path, Some(&user), Some(&group), true);
        if let Some(m) = &mode {
            let _ = meta::chmod(&dest_path, m);
        }
    } else {
        let mut check = ret.clone();
        perms::check_perms(
            &dest_path,
            &mut check,
            Wanted {
                user: Some(&user),
                group: Some(&group),
                mode: mode.as_deref(),
                follow_symlinks: true,
            },
            false,
        );
        if check.result != Some(true) {
            ret.result = check.result;
            ret.comment = check.comment;
        }
        ret.changes = check.changes;
    }
    Ok(ret)
}
