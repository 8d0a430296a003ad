//! The `file` execution functions templates and `module.run` reach for
//! beside the editing ones: hashes (`check_hash`, `get_sum`), listing and
//! inspection (`readdir`, `lstat`, `is_link`, `access`, `contains_regex`)
//! and changes (`copy`, `rename`, `chown`, `set_mode`, `makedirs`), with
//! Salt 3008's return values and error texts.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use halite_state::{Map, Value};
use serde_json::json;

use super::meta::{self, HashType};
use super::{exec_err, expand_user};
use crate::exec::{Args, ExecError};
use crate::Host;

fn invocation(msg: impl Into<String>) -> ExecError {
    ExecError::Invocation(msg.into())
}

/// A path argument with `~` expanded (Salt's `os.path.expanduser`).
fn path(args: &Args, i: usize, key: &str, fun: &str) -> Result<PathBuf, ExecError> {
    Ok(PathBuf::from(expand_user(&args.require_str(i, key, fun)?)))
}

/// An absolute path argument; `what` is Salt's word in its error.
fn absolute(args: &Args, i: usize, key: &str, fun: &str, msg: &str) -> Result<PathBuf, ExecError> {
    let p = path(args, i, key, fun)?;
    if !p.is_absolute() {
        return Err(invocation(msg));
    }
    Ok(p)
}

/// Hash names and lengths as Salt's `HASHES_REVMAP` lists them in errors.
const SUPPORTED_LENGTHS: &str =
    "md5 (32), sha1 (40), sha224 (56), sha256 (64), sha384 (96), sha512 (128)";

/// `file.check_hash <path> <file_hash>`: whether the file has that hash;
/// `type:hex`, `type=hex` or a bare hex digest whose length names the type.
pub fn check_hash(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = path(args, 0, "path", "check_hash")?;
    let Some(Value::String(file_hash)) = args.get(1, "file_hash") else {
        return match args.get(1, "file_hash") {
            None => Err(invocation(
                "check_hash() missing 1 required positional argument: 'file_hash'",
            )),
            Some(_) => Err(invocation("hash must be a string")),
        };
    };
    let (kind, want) = match [':', '='].iter().find_map(|sep| file_hash.split_once(*sep)) {
        Some((kind, want)) => (HashType::parse(kind).map_err(exec_err)?, want),
        None => match HashType::from_hex_len(file_hash.len()) {
            Some(kind) => (kind, file_hash.as_str()),
            None => {
                return Err(invocation(format!(
                    "Hash {file_hash} (length: {}) could not be matched to a supported hash type. \
                     The supported hash types and lengths are: {SUPPORTED_LENGTHS}",
                    file_hash.len()
                )))
            }
        },
    };
    Ok(json!(meta::file_hash(&p, kind).map_err(exec_err)? == want))
}

/// `file.get_sum <path> [form=sha256]`: the file's hex digest, or
/// `"File not found"` when it is not a regular file.
pub fn get_sum(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = path(args, 0, "path", "get_sum")?;
    let form = args.get_str(1, "form").unwrap_or_else(|| "sha256".into());
    if !p.is_file() {
        return Ok(json!("File not found"));
    }
    let kind = HashType::parse(&form).map_err(exec_err)?;
    Ok(json!(meta::file_hash(&p, kind).map_err(exec_err)?))
}

/// `file.readdir <path>`: `.`, `..` and the directory's entries.
pub fn readdir(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = absolute(args, 0, "path", "readdir", "Dir path must be absolute.")?;
    if !p.is_dir() {
        return Err(invocation(format!(
            "A valid directory was not specified: {}",
            p.display()
        )));
    }
    let mut out = vec![json!("."), json!("..")];
    for entry in fs::read_dir(&p).map_err(|e| exec_err(format!("{}: {e}", p.display())))? {
        let entry = entry.map_err(|e| exec_err(format!("{}: {e}", p.display())))?;
        out.push(json!(entry.file_name().to_string_lossy()));
    }
    Ok(Value::Array(out))
}

/// `file.contains_regex <path> <regex> [lchar]`: whether a line (with
/// leading `lchar` characters stripped) matches; false for a missing file.
pub fn contains_regex(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = path(args, 0, "path", "contains_regex")?;
    let regex = args.require_str(1, "regex", "contains_regex")?;
    let lchar = args.get_str(2, "lchar").unwrap_or_default();
    let re = regex::Regex::new(&regex)
        .map_err(|e| invocation(format!("Invalid regular expression {regex:?}: {e}")))?;
    let Ok(bytes) = fs::read(&p) else {
        return Ok(json!(false));
    };
    let text = String::from_utf8_lossy(&bytes);
    let strip: Vec<char> = lchar.chars().collect();
    Ok(json!(text.split_inclusive('\n').any(
        |line| re.is_match(line.trim_start_matches(strip.as_slice()))
    )))
}

/// Copies the tree `src` into `dst`, overwriting files of the same path
/// and keeping the others (Salt's `recursive_copy`).
fn copy_tree(src: &Path, dst: &Path) -> std::io::Result<()> {
    for entry in walkdir::WalkDir::new(src).min_depth(0) {
        let entry = entry.map_err(std::io::Error::other)?;
        let rel = entry
            .path()
            .strip_prefix(src)
            .map_err(std::io::Error::other)?;
        let target = dst.join(rel);
        if entry.file_type().is_dir() {
            fs::create_dir_all(&target)?;
        } else {
            fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// `file.copy <src> <dst> [recurse=False] [remove_existing=False]`: a file,
/// or with `recurse` a directory; `dst` gets `src`'s owner, group and mode.
pub fn copy(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let src = absolute(args, 0, "src", "copy", "File path must be absolute.")?;
    let dst = path(args, 1, "dst", "copy")?;
    let recurse = args.get_bool(2, "recurse", false);
    let remove_existing = args.get_bool(3, "remove_existing", false);
    let src_md = fs::metadata(&src).map_err(|_| {
        ExecError::Execution(format!("No such file or directory '{}'", src.display()))
    })?;
    let failed = |_| {
        ExecError::Execution(format!(
            "Could not copy '{}' to '{}'",
            src.display(),
            dst.display()
        ))
    };
    if dst.is_dir() || src_md.is_dir() {
        if !recurse {
            return Err(invocation(
                "Cannot copy overwriting a directory without recurse flag set to true!",
            ));
        }
        if remove_existing && dst.exists() {
            fs::remove_dir_all(&dst).map_err(failed)?;
        }
        copy_tree(&src, &dst).map_err(failed)?;
    } else {
        fs::copy(&src, &dst).map_err(failed)?;
    }
    std::os::unix::fs::chown(&dst, Some(src_md.uid()), Some(src_md.gid())).map_err(failed)?;
    meta::chmod(&dst, &meta::mode_string(src_md.mode())).map_err(exec_err)?;
    Ok(json!(true))
}

/// `file.rename <src> <dst>`: moves a file or directory (one `rename(2)`).
pub fn rename(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let src = absolute(args, 0, "src", "rename", "File path must be absolute.")?;
    let dst = path(args, 1, "dst", "rename")?;
    fs::rename(&src, &dst).map_err(|_| {
        ExecError::Execution(format!(
            "Could not rename '{}' to '{}'",
            src.display(),
            dst.display()
        ))
    })?;
    Ok(json!(true))
}

/// `file.chown <path> <user> <group>`: `None` on success; Salt's messages
/// ("User does not exist\n", "File not found") as the return otherwise.
pub fn chown(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = path(args, 0, "path", "chown")?;
    let user = args.require_str(1, "user", "chown")?;
    let group = args.require_str(2, "group", "chown")?;
    let mut err = String::new();
    let uid = match user.as_str() {
        "" => None,
        u => meta::user_to_uid(u)
            .map_err(|_| err.push_str("User does not exist\n"))
            .ok(),
    };
    let gid = match group.as_str() {
        "" => None,
        g => meta::group_to_gid(g)
            .map_err(|_| err.push_str("Group does not exist\n"))
            .ok(),
    };
    if fs::symlink_metadata(&p).is_err() || (!p.exists() && !err.is_empty()) {
        err.push_str("File not found");
    } else if !p.exists() {
        // a broken symlink is chowned itself
        if std::os::unix::fs::lchown(&p, uid, gid).is_ok() {
            return Ok(Value::Null);
        }
        err.push_str("File not found");
    }
    if !err.is_empty() {
        return Ok(json!(err));
    }
    std::os::unix::fs::chown(&p, uid, gid)
        .map_err(|e| exec_err(format!("Unable to change owner of {}: {e}", p.display())))?;
    Ok(Value::Null)
}

/// `file.set_mode <path> <mode>`: the new mode (`"0640"`), or
/// `"Invalid Mode <mode>"` when it is not octal.
pub fn set_mode(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = path(args, 0, "path", "set_mode")?;
    let raw = args
        .get(1, "mode")
        .map(crate::exec::py_str)
        .ok_or_else(|| invocation("set_mode() missing 1 required positional argument: 'mode'"))?;
    let mut mode = raw.trim_start_matches(['0', 'O', 'o']).to_string();
    if mode.is_empty() {
        mode = "0".into();
    }
    if !p.exists() {
        return Err(ExecError::Execution(format!(
            "{}: File not found",
            p.display()
        )));
    }
    let Ok(bits) = u32::from_str_radix(&mode, 8) else {
        return Ok(json!(format!("Invalid Mode {mode}")));
    };
    fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(bits))
        .map_err(|e| exec_err(format!("Unable to change mode of {}: {e}", p.display())))?;
    let md = fs::metadata(&p).map_err(exec_err)?;
    Ok(json!(meta::mode_string(md.mode())))
}

/// `file.makedirs <path> [user] [group] [mode]`: creates the directories
/// leading to `path` (all of it when it ends in `/`), each with the owner
/// and mode given; a message when the parent already exists.
pub fn makedirs(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let raw = expand_user(&args.require_str(0, "path", "makedirs")?);
    let user = args.get_str(1, "user");
    let group = args.get_str(2, "group");
    let mode = args.get(3, "mode").and_then(meta::normalize_mode);
    // os.path.normpath(os.path.dirname(path))
    let dir: PathBuf = match raw.rfind('/') {
        Some(at) => Path::new(&raw[..at.max(1)]).components().collect(),
        None => PathBuf::from("."),
    };
    let dir = dir.display().to_string();
    let dirname = PathBuf::from(&dir);
    if dirname.is_dir() {
        return Ok(json!(format!("Directory '{dir}' already exists")));
    }
    if dirname.exists() {
        return Ok(json!(format!(
            "The path '{dir}' already exists and is not a directory"
        )));
    }
    if !dirname.is_absolute() {
        return Err(invocation(
            "Recursive creation for path '' would result in an infinite loop. Please use an absolute path.",
        ));
    }
    let mut to_create: Vec<&Path> = dirname.ancestors().take_while(|d| !d.is_dir()).collect();
    to_create.reverse();
    for d in to_create {
        fs::create_dir(d)
            .map_err(|e| exec_err(format!("Unable to create {}: {e}", d.display())))?;
        if user.is_some() || group.is_some() {
            meta::chown(d, user.as_deref(), group.as_deref(), true).map_err(exec_err)?;
        }
        if let Some(mode) = &mode {
            meta::chmod(d, mode).map_err(exec_err)?;
        }
    }
    Ok(Value::Null)
}

/// `file.lstat <path>`: the `st_*` fields of the path itself (a symlink
/// is not followed); `{}` when it cannot be read.
pub fn lstat(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = absolute(args, 0, "path", "lstat", "Path to file must be absolute.")?;
    let Ok(md) = fs::symlink_metadata(&p) else {
        return Ok(json!({}));
    };
    let time = |s: i64, ns: i64| json!(s as f64 + ns as f64 / 1e9);
    let mut out = Map::new();
    out.insert("st_atime".into(), time(md.atime(), md.atime_nsec()));
    out.insert("st_ctime".into(), time(md.ctime(), md.ctime_nsec()));
    out.insert("st_gid".into(), json!(md.gid()));
    out.insert("st_mode".into(), json!(md.mode()));
    out.insert("st_mtime".into(), time(md.mtime(), md.mtime_nsec()));
    out.insert("st_nlink".into(), json!(md.nlink()));
    out.insert("st_size".into(), json!(md.size()));
    out.insert("st_uid".into(), json!(md.uid()));
    Ok(Value::Object(out))
}

/// `file.is_link <path>`: whether the path itself is a symlink.
pub fn is_link(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = path(args, 0, "path", "is_link")?;
    Ok(json!(fs::symlink_metadata(&p)
        .map(|m| m.file_type().is_symlink())
        .unwrap_or(false)))
}

/// `file.access <path> <mode>`: `access(2)` with `f`, `r`, `w` or `x` (or
/// their numeric values) for this process.
pub fn access(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = absolute(args, 0, "path", "access", "Path to link must be absolute.")?;
    let mode = args
        .get(1, "mode")
        .ok_or_else(|| invocation("access() missing 1 required positional argument: 'mode'"))?;
    let flag = match mode {
        Value::String(s) if s == "f" => nix::unistd::AccessFlags::F_OK,
        Value::String(s) if s == "r" => nix::unistd::AccessFlags::R_OK,
        Value::String(s) if s == "w" => nix::unistd::AccessFlags::W_OK,
        Value::String(s) if s == "x" => nix::unistd::AccessFlags::X_OK,
        Value::Number(n) if matches!(n.as_u64(), Some(0 | 1 | 2 | 4)) => {
            nix::unistd::AccessFlags::from_bits_truncate(n.as_u64().unwrap_or(0) as i32)
        }
        _ => return Err(invocation("Invalid mode specified.")),
    };
    Ok(json!(nix::unistd::access(&p, flag).is_ok()))
}
