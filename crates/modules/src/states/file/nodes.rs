//! `file.mknod` (a fifo, character or block device node, with its owner
//! and mode) and `file.pruned` (an empty directory, or a tree's empty
//! directories, removed), with Salt 3008's comments and `changes`.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use halite_state::{StateCall, StateError, StateResult, Value};
use serde_json::json;

use super::perms::{self, Wanted};
use super::{error, owner_arg, target_name};
use crate::exec::file::rmdir;

/// The node kinds `file.mknod` makes: Salt's `ntype` letter, its name in
/// comments, and whether the node has a major/minor.
struct NodeKind {
    label: &'static str,
    is_device: bool,
    sflag: libc::mode_t,
}

fn node_kind(ntype: &str) -> Option<NodeKind> {
    match ntype {
        "c" => Some(NodeKind {
            label: "Character device",
            is_device: true,
            sflag: libc::S_IFCHR,
        }),
        "b" => Some(NodeKind {
            label: "Block device",
            is_device: true,
            sflag: libc::S_IFBLK,
        }),
        "p" => Some(NodeKind {
            label: "Fifo pipe",
            is_device: false,
            sflag: libc::S_IFIFO,
        }),
        _ => None,
    }
}

/// Whether `md` is a node of `kind`.
fn is_kind(md: &fs::Metadata, kind: &NodeKind) -> bool {
    let ft = md.file_type();
    match kind.sflag {
        libc::S_IFCHR => ft.is_char_device(),
        libc::S_IFBLK => ft.is_block_device(),
        _ => ft.is_fifo(),
    }
}

/// A number argument (`major`, `minor`), 0 when absent.
fn number_arg(call: &StateCall<'_>, key: &str) -> Result<u32, StateError> {
    match call.arg(key) {
        None | Some(Value::Null) => Ok(0),
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| StateError::BadArg(format!("{key} must be a device number: {n}"))),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map_err(|_| StateError::BadArg(format!("{key} must be a device number: {s}"))),
        Some(other) => Err(StateError::BadArg(format!(
            "{key} must be a device number: {other}"
        ))),
    }
}

/// `file.mknod name ntype [major] [minor] [user] [group] [mode=0600]`.
pub fn mknod(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(call, &["ntype", "major", "minor", "user", "group", "mode"])?;
    let name = target_name(call);
    let mut ret = StateResult::new(name.clone(), Some(false));
    if name.is_empty() {
        return error(ret, "Must provide name to file.mknod");
    }
    let ntype = call
        .arg("ntype")
        .and_then(crate::exec::user::scalar_text)
        .ok_or_else(|| StateError::MissingArg("ntype".into(), "file.mknod".into()))?;
    let Some(kind) = node_kind(&ntype) else {
        ret.comment = format!("Node type unavailable: '{ntype}'. Available node types are character ('c'), block ('b'), and pipe ('p')");
        return Ok(ret);
    };
    let (major, minor) = (number_arg(call, "major")?, number_arg(call, "minor")?);
    let user = owner_arg(call, "user")?;
    let group = owner_arg(call, "group")?;
    let mode = super::mode_arg(call, "mode")?.unwrap_or_else(|| "0600".into());
    let wanted = Wanted {
        user: user.as_deref(),
        group: group.as_deref(),
        mode: Some(&mode),
        follow_symlinks: false,
    };
    let path = Path::new(&name);
    let md = fs::metadata(path).ok();
    let short = match kind.sflag {
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        _ => "a fifo pipe",
    };
    if md.as_ref().is_some_and(fs::Metadata::is_file) {
        ret.comment = format!("File {name} exists and is not {short}. Refusing to continue");
        return Ok(ret);
    }
    match md.filter(|m| is_kind(m, &kind)) {
        None if call.test => {
            ret.result = None;
            ret.comment = format!("{} {name} is set to be created", kind.label);
        }
        None => {
            if let Err(e) = make_node(path, &kind, &mode, major, minor) {
                if e.raw_os_error() == Some(libc::EEXIST) {
                    ret.comment = format!("File {name} exists and cannot be overwritten");
                } else {
                    ret.comment = format!("Unable to create {} {name}: {e}", kind.label);
                    return Ok(ret);
                }
            } else {
                ret.result = Some(true);
                ret.changes.insert(
                    "new".into(),
                    json!(format!("{} {name} created.", kind.label)),
                );
            }
            // Salt's quick pass at the new node's owner and mode.
            let mut perms_ret = StateResult::new(name.clone(), Some(true));
            perms::check_perms(path, &mut perms_ret, wanted, false);
        }
        Some(m) => {
            let (devmaj, devmin) = (libc::major(m.rdev()), libc::minor(m.rdev()));
            if kind.is_device && (major, minor) != (devmaj, devmin) {
                ret.comment = format!(
                    "{} {name} exists and has a different major/minor {devmaj}/{devmin}. Refusing to continue",
                    kind.label
                );
                return Ok(ret);
            }
            ret.result = Some(true);
            perms::check_perms(path, &mut ret, wanted, call.test);
            if ret.changes.is_empty() && ret.result != Some(false) {
                ret.comment = format!("{} {name} is in the correct state", kind.label);
            }
        }
    }
    Ok(ret)
}

/// Makes the node with `mode` (as an octal string) and device numbers.
fn make_node(
    path: &Path,
    kind: &NodeKind,
    mode: &str,
    major: u32,
    minor: u32,
) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let bits =
        libc::mode_t::from_str_radix(mode.trim_start_matches(['0', 'o', 'O']), 8).unwrap_or(0o600);
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("the path holds a NUL byte"))?;
    let dev = libc::makedev(major, minor);
    // SAFETY: c_path is a valid NUL-terminated string for the call's duration.
    let rc = unsafe { libc::mknod(c_path.as_ptr(), bits | kind.sflag, dev) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `file.pruned name [recurse=False] [ignore_errors=False] [older_than]`:
/// the directory removed when empty; with `recurse`, its empty
/// subdirectories first (Salt's `file.rmdir`).
pub fn pruned(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    crate::states::signature::check(call, &["recurse", "ignore_errors", "older_than"])?;
    let name = target_name(call);
    let mut ret = StateResult::new(name.clone(), Some(true));
    let ignore_errors = call.arg_bool("ignore_errors", false);
    let recurse = ignore_errors || call.arg_bool("recurse", false);
    let older_than = call.arg("older_than").cloned();
    if !Path::new(&name).is_dir() {
        ret.comment = format!("Directory {name} is not present");
        return Ok(ret);
    }
    if call.test {
        ret.result = None;
        ret.changes.insert("deleted".into(), json!(name));
        ret.comment = format!("Directory {name} is set for removal");
        return Ok(ret);
    }
    let res = rmdir::rmdir(&name, recurse, older_than.as_ref())
        .map_err(|e| StateError::Other(e.to_string()))?;
    let mut deleted = res.deleted.clone();
    deleted.sort();
    if res.result {
        if recurse && !res.deleted.is_empty() {
            ret.comment = format!("Recursively removed empty directories under {name}");
            ret.changes.insert("deleted".into(), json!(deleted));
        } else if !recurse {
            ret.comment = format!("Removed directory {name}");
            ret.changes.insert("deleted".into(), json!(name));
        }
        return Ok(ret);
    }
    if ignore_errors && !res.deleted.is_empty() {
        ret.comment = format!("Recursively removed empty directories under {name}");
        ret.changes.insert("deleted".into(), json!(deleted));
        return Ok(ret);
    }
    ret.result = Some(false);
    ret.changes.insert("deleted".into(), json!(res.deleted));
    ret.changes.insert("errors".into(), json!(res.errors));
    ret.comment = format!("Failed to remove directory {name}");
    Ok(ret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_kinds_are_salts_letters() {
        assert_eq!(node_kind("p").map(|k| k.label), Some("Fifo pipe"));
        assert_eq!(node_kind("c").map(|k| k.label), Some("Character device"));
        assert_eq!(node_kind("b").map(|k| k.label), Some("Block device"));
        assert!(node_kind("x").is_none());
    }
}
