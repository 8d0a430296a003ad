//! Salt's `file` execution module: the functions templates and
//! `unless`/`onlyif: - fun:` requisites call (`file.file_exists`,
//! `file.replace`...), plus the shared machinery the `file` states use
//! (diffs, metadata, in-place edits).

pub mod diff;
pub mod edit;
pub mod meta;
pub mod ops;
pub mod owner_names;
pub mod rmdir;

use std::fs;
use std::path::{Path, PathBuf};

use halite_state::Value;
use serde_json::json;

use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::Host;

fn exec_err(e: impl std::fmt::Display) -> ExecError {
    ExecError::Execution(e.to_string())
}

fn path_arg(args: &Args, i: usize, key: &str, fun: &str) -> Result<PathBuf, ExecError> {
    let p = args.require_str(i, key, fun)?;
    Ok(PathBuf::from(expand_user(&p)))
}

/// `~` and `~user` at the start of a path, as Python's `os.path.expanduser`.
pub fn expand_user(path: &str) -> String {
    let Some(rest) = path.strip_prefix('~') else {
        return path.to_string();
    };
    let (user, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let home = if user.is_empty() {
        std::env::var("HOME").ok()
    } else {
        nix::unistd::User::from_name(user)
            .ok()
            .flatten()
            .map(|u| u.dir.display().to_string())
    };
    match home {
        Some(h) => format!("{}{tail}", h.trim_end_matches('/')),
        None => path.to_string(),
    }
}

/// Creates `path` (empty) or updates its times, like `touch(1)`.
pub fn touch(path: &Path, atime: Option<i64>, mtime: Option<i64>) -> Result<(), ExecError> {
    if !path.exists() {
        fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| exec_err(format!("Unable to create {}: {e}", path.display())))?;
    }
    let now = filetime::FileTime::now();
    let a = atime
        .map(|s| filetime::FileTime::from_unix_time(s, 0))
        .unwrap_or(now);
    let m = mtime
        .map(|s| filetime::FileTime::from_unix_time(s, 0))
        .unwrap_or(now);
    filetime::set_file_times(path, a, m)
        .map_err(|e| exec_err(format!("Unable to set times of {}: {e}", path.display())))
}

/// Removes a file, a symlink or a whole directory tree.
pub fn remove(path: &Path) -> std::io::Result<()> {
    let md = fs::symlink_metadata(path)?;
    if md.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    }
}

/// `fnmatch.fnmatchcase(name, pattern)` with the pattern first, as
/// `file.find`'s and `file.recurse`'s callers hold them (the shared rule).
pub fn fnmatch(pattern: &str, name: &str) -> bool {
    halite_salt_rules::fnmatch(name, pattern)
}

fn find(args: &Args) -> Result<Value, ExecError> {
    let root = path_arg(args, 0, "path", "find")?;
    let name = args.kwargs.get("name").and_then(Value::as_str);
    let iname = args
        .kwargs
        .get("iname")
        .and_then(Value::as_str)
        .map(str::to_lowercase);
    let kind = args.kwargs.get("type").and_then(Value::as_str);
    let maxdepth = args
        .kwargs
        .get("maxdepth")
        .and_then(Value::as_u64)
        .map(|d| d as usize);
    let mindepth = args
        .kwargs
        .get("mindepth")
        .and_then(Value::as_u64)
        .unwrap_or(0) as usize;
    let mut walker = walkdir::WalkDir::new(&root)
        .min_depth(mindepth)
        .sort_by_file_name();
    if let Some(d) = maxdepth {
        walker = walker.max_depth(d);
    }
    let mut out = Vec::new();
    for entry in walker.into_iter().filter_map(Result::ok) {
        let fname = entry.file_name().to_string_lossy();
        if name.is_some_and(|n| !fnmatch(n, &fname)) {
            continue;
        }
        if iname
            .as_deref()
            .is_some_and(|n| !fnmatch(n, &fname.to_lowercase()))
        {
            continue;
        }
        if let Some(k) = kind {
            let ft = entry.file_type();
            let code = if ft.is_symlink() {
                'l'
            } else if ft.is_dir() {
                'd'
            } else {
                'f'
            };
            if !k.contains(code) {
                continue;
            }
        }
        out.push(json!(entry.path().display().to_string()));
    }
    Ok(Value::Array(out))
}

fn replace_args(args: &Args, dry_run: bool) -> Result<edit::ReplaceArgs, ExecError> {
    Ok(edit::ReplaceArgs {
        pattern: args.require_str(1, "pattern", "replace")?,
        repl: args.require_str(2, "repl", "replace")?,
        count: args.get(3, "count").and_then(Value::as_u64).unwrap_or(0) as usize,
        flags: edit::ReFlags::parse(args.kwargs.get("flags")).map_err(exec_err)?,
        append_if_not_found: args.get_bool(usize::MAX, "append_if_not_found", false),
        prepend_if_not_found: args.get_bool(usize::MAX, "prepend_if_not_found", false),
        not_found_content: args.get_str(usize::MAX, "not_found_content"),
        backup: backup_suffix(args.kwargs.get("backup"), ".bak"),
        dry_run,
        search_only: args.get_bool(usize::MAX, "search_only", false),
        backslash_literal: args.get_bool(usize::MAX, "backslash_literal", false),
    })
}

/// Salt's `backup` argument: a suffix, or `False`/empty for none.
pub fn backup_suffix(v: Option<&Value>, default: &str) -> Option<String> {
    match v {
        None | Some(Value::Null) => Some(default.to_string()),
        Some(Value::Bool(false)) => None,
        Some(Value::String(s)) if s.is_empty() || s.eq_ignore_ascii_case("false") => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => Some(other.to_string()),
    }
}

/// The module's table.
pub const MODULE: ExecTable = ExecTable {
    name: "file",
    functions: &[
        ExecFunction::new("file_exists", file_exists_fn),
        ExecFunction::new("directory_exists", directory_exists_fn),
        ExecFunction::new("exists", exists_fn),
        ExecFunction::new("join", join_fn),
        ExecFunction::new("dirname", dirname_fn),
        ExecFunction::new("basename", basename_fn),
        ExecFunction::new("read", read_fn),
        ExecFunction::new("write", write_fn),
        ExecFunction::new("touch", touch_fn),
        ExecFunction::new("remove", remove_fn),
        ExecFunction::new("mkdir", mkdir_fn),
        ExecFunction::new("get_hash", get_hash_fn),
        ExecFunction::new("get_mode", |a, h| owner_fn("get_mode", a, h)),
        ExecFunction::new("get_user", |a, h| owner_fn("get_user", a, h)),
        ExecFunction::new("get_group", |a, h| owner_fn("get_group", a, h)),
        ExecFunction::new("stats", stats_fn),
        ExecFunction::new("contains", contains_fn),
        ExecFunction::new("search", search_fn),
        ExecFunction::new("replace", replace_fn),
        ExecFunction::new("symlink", symlink_fn),
        ExecFunction::new("readlink", readlink_fn),
        ExecFunction::new("find", find_fn),
        ExecFunction::new("comment", |a, h| comment_fn("comment", a, h)),
        ExecFunction::new("uncomment", |a, h| comment_fn("uncomment", a, h)),
        ExecFunction::new("line", line_fn),
        ExecFunction::new("blockreplace", blockreplace_fn),
        ExecFunction::new("check_hash", ops::check_hash),
        ExecFunction::new("get_sum", ops::get_sum),
        ExecFunction::new("readdir", ops::readdir),
        ExecFunction::new("contains_regex", ops::contains_regex),
        ExecFunction::new("copy", ops::copy),
        ExecFunction::new("rename", ops::rename),
        ExecFunction::new("chown", ops::chown),
        ExecFunction::new("set_mode", ops::set_mode),
        ExecFunction::new("makedirs", ops::makedirs),
        ExecFunction::new("lstat", ops::lstat),
        ExecFunction::new("is_link", ops::is_link),
        ExecFunction::new("access", ops::access),
        ExecFunction::new("rmdir", rmdir::rmdir_fn),
    ],
};

/// `file.file_exists <path>`: whether it is a regular file.
fn file_exists_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(json!(path_arg(args, 0, "path", "file_exists")?.is_file()))
}

/// `file.directory_exists <path>`: whether it is a directory.
fn directory_exists_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(json!(
        path_arg(args, 0, "path", "directory_exists")?.is_dir()
    ))
}

/// `file.exists <path>`: whether anything is there.
fn exists_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    Ok(json!(path_arg(args, 0, "path", "exists")?.exists()))
}

/// `file.join <parts...>`: Python's `os.path.join`.
fn join_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let mut out = String::new();
    for part in &args.positional {
        let s = part
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| part.to_string());
        if s.starts_with('/') || out.is_empty() {
            out = s;
        } else if out.ends_with('/') {
            out.push_str(&s);
        } else {
            out = format!("{out}/{s}");
        }
    }
    Ok(json!(out))
}

/// `file.dirname <path>`: Python's `os.path.dirname`.
fn dirname_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = args.require_str(0, "path", "dirname")?;
    let head = match p.rfind('/') {
        Some(i) => {
            let h = &p[..=i];
            let trimmed = h.trim_end_matches('/');
            if trimmed.is_empty() {
                h.to_string()
            } else {
                trimmed.to_string()
            }
        }
        None => String::new(),
    };
    Ok(json!(head))
}

/// `file.basename <path>`: Python's `os.path.basename`.
fn basename_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = args.require_str(0, "path", "basename")?;
    Ok(json!(p.rsplit('/').next().unwrap_or("")))
}

/// `file.read <path>`: the file's text.
fn read_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = path_arg(args, 0, "path", "read")?;
    let bytes =
        fs::read(&p).map_err(|e| exec_err(format!("Unable to read {}: {e}", p.display())))?;
    Ok(json!(String::from_utf8_lossy(&bytes)))
}

/// `file.write <path> <lines...>`: replaces the file with the lines.
fn write_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = path_arg(args, 0, "path", "write")?;
    let lines: Vec<String> = args
        .positional
        .iter()
        .skip(1)
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string())
        })
        .collect();
    let mut text = lines.join("\n");
    text.push('\n');
    fs::write(&p, text).map_err(|e| exec_err(format!("Unable to write {}: {e}", p.display())))?;
    Ok(json!(format!(
        "Wrote {} lines to \"{}\"",
        lines.len(),
        p.display()
    )))
}

/// `file.touch <name> [atime] [mtime]`: creates it or sets its times.
fn touch_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = path_arg(args, 0, "name", "touch")?;
    let at = args.get(1, "atime").and_then(Value::as_i64);
    let mt = args.get(2, "mtime").and_then(Value::as_i64);
    touch(&p, at, mt)?;
    Ok(json!(true))
}

/// `file.remove <path>`: removes a file, link or tree; `False` when absent.
fn remove_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = path_arg(args, 0, "path", "remove")?;
    if !p.is_absolute() {
        return Err(ExecError::Invocation(format!(
            "File path must be absolute: {}",
            p.display()
        )));
    }
    if fs::symlink_metadata(&p).is_err() {
        return Ok(json!(false));
    }
    remove(&p).map_err(|e| exec_err(format!("Could not remove '{}': {e}", p.display())))?;
    Ok(json!(true))
}

/// `file.mkdir <dir_path> [user] [group] [mode]`: creates it with parents.
fn mkdir_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = path_arg(args, 0, "dir_path", "mkdir")?;
    if !p.is_dir() {
        fs::create_dir_all(&p)
            .map_err(|e| exec_err(format!("Unable to create {}: {e}", p.display())))?;
    }
    let user = args.get_str(1, "user");
    let group = args.get_str(2, "group");
    if user.is_some() || group.is_some() {
        meta::chown(&p, user.as_deref(), group.as_deref(), true).map_err(exec_err)?;
    }
    if let Some(mode) = args.get(3, "mode").and_then(meta::normalize_mode) {
        meta::chmod(&p, &mode).map_err(exec_err)?;
    }
    Ok(json!(true))
}

/// `file.get_hash <path> [form]`: the file's hash (sha256 by default).
fn get_hash_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = path_arg(args, 0, "path", "get_hash")?;
    let form = args.get_str(1, "form").unwrap_or_else(|| "sha256".into());
    let kind = meta::HashType::parse(&form).map_err(exec_err)?;
    Ok(json!(meta::file_hash(&p, kind).map_err(exec_err)?))
}

/// `file.get_mode`, `file.get_user` and `file.get_group` (`fun`) `<path>`.
fn owner_fn(fun: &str, args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = path_arg(args, 0, "path", fun)?;
    let follow = args.get_bool(1, "follow_symlinks", true);
    let o = meta::ownership(&p, follow).map_err(exec_err)?;
    Ok(json!(match fun {
        "get_mode" => o.mode,
        "get_user" => o.user,
        _ => o.group,
    }))
}

/// `file.stats <path> [hash_type] [follow_symlinks]`: metadata, as Salt's.
fn stats_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = path_arg(args, 0, "path", "stats")?;
    let hash = args
        .get_str(1, "hash_type")
        .map(|h| meta::HashType::parse(&h))
        .transpose()
        .map_err(exec_err)?;
    let follow = args.get_bool(2, "follow_symlinks", true);
    Ok(Value::Object(
        meta::stats(&p, hash, follow).map_err(exec_err)?,
    ))
}

/// `file.contains <path> <text>`: whether the text occurs in it.
fn contains_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = path_arg(args, 0, "path", "contains")?;
    let text = args.require_str(1, "text", "contains")?;
    Ok(json!(fs::read(&p)
        .map(|b| String::from_utf8_lossy(&b).contains(&text))
        .unwrap_or(false)))
}

/// `file.search <path> <pattern> [flags]`: whether the regex matches.
fn search_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = path_arg(args, 0, "path", "search")?;
    if !p.exists() && args.get_bool(usize::MAX, "ignore_if_missing", false) {
        return Ok(json!(false));
    }
    let pattern = args.require_str(1, "pattern", "search")?;
    let mut flags = edit::ReFlags::parse(args.get(2, "flags")).map_err(exec_err)?;
    if args.get_bool(usize::MAX, "multiline", false) {
        flags.multi_line = true;
    }
    let re = edit::compile(&pattern, flags).map_err(exec_err)?;
    let text = fs::read(&p).map_err(|e| {
        exec_err(format!(
            "Unable to open file '{}'. Exception: {e}",
            p.display()
        ))
    })?;
    Ok(json!(re.is_match(&String::from_utf8_lossy(&text))))
}

/// `file.replace <path> <pattern> <repl>`: regex replacement in place, the diff.
fn replace_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let dry_run = host.test_mode();
    let p = path_arg(args, 0, "path", "replace")?;
    if !p.exists() {
        if args.get_bool(usize::MAX, "ignore_if_missing", false) {
            return Ok(json!(false));
        }
        return Err(ExecError::Invocation(format!(
            "File not found: {}",
            p.display()
        )));
    }
    let ra = replace_args(args, dry_run || args.get_bool(usize::MAX, "dry_run", false))?;
    let out = edit::replace(&p, &ra).map_err(exec_err)?;
    if ra.search_only {
        return Ok(json!(out.changed));
    }
    if args.get_bool(usize::MAX, "show_changes", true) {
        Ok(json!(out.diff))
    } else {
        Ok(json!(out.changed))
    }
}

/// `file.comment` and `file.uncomment` (`fun`) `<path> <regex>`.
fn comment_fn(fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
    let dry_run = host.test_mode();
    let p = path_arg(args, 0, "path", fun)?;
    let regex = args.require_str(1, "regex", fun)?;
    let ch = args.get_str(2, "char").unwrap_or_else(|| "#".into());
    let backup = backup_suffix(args.get(3, "backup"), ".bak");
    let out = edit::comment_line(
        &p,
        &regex,
        &ch,
        fun == "comment",
        backup.as_deref(),
        dry_run,
    )
    .map_err(exec_err)?;
    Ok(if out.changed {
        json!(out.diff)
    } else {
        json!(false)
    })
}

/// `file.line <path> [content] [match] [mode]...`: edits one line, the diff.
fn line_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let dry_run = host.test_mode();
    let p = path_arg(args, 0, "path", "line")?;
    let la = edit::LineArgs {
        content: args.get_str(1, "content"),
        match_: args.get_str(2, "match"),
        mode: args.get_str(3, "mode").unwrap_or_default(),
        location: args.get_str(4, "location"),
        before: args.get_str(5, "before"),
        after: args.get_str(6, "after"),
        indent: args.get_bool(usize::MAX, "indent", true),
        backup: args.get_bool(usize::MAX, "backup", false),
        dry_run,
    };
    let out = edit::line(&p, &la).map_err(exec_err)?;
    if args.get_bool(usize::MAX, "show_changes", true) && out.changed {
        Ok(json!(out.diff))
    } else {
        Ok(json!(out.changed))
    }
}

/// `file.blockreplace <path> [marker_start] [marker_end] [content]...`: a managed block.
fn blockreplace_fn(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let dry_run = host.test_mode();
    let p = path_arg(args, 0, "path", "blockreplace")?;
    let ba = edit::BlockArgs {
        marker_start: args
            .get_str(1, "marker_start")
            .unwrap_or_else(|| "#-- start managed zone --".into()),
        marker_end: args
            .get_str(2, "marker_end")
            .unwrap_or_else(|| "#-- end managed zone --".into()),
        content: args.get_str(3, "content").unwrap_or_default(),
        append_if_not_found: args.get_bool(usize::MAX, "append_if_not_found", false),
        prepend_if_not_found: args.get_bool(usize::MAX, "prepend_if_not_found", false),
        insert_before_match: args.get_str(usize::MAX, "insert_before_match"),
        insert_after_match: args.get_str(usize::MAX, "insert_after_match"),
        // The module's default is False; only an explicit None
        // lets the content's last newline decide (the state's default).
        append_newline: match args.kwargs.get("append_newline") {
            None => Some(false),
            Some(Value::Null) => None,
            Some(v) => Some(halite_state::truthy(v)),
        },
        backup: backup_suffix(args.kwargs.get("backup"), ".bak"),
        dry_run: dry_run || args.get_bool(usize::MAX, "dry_run", false),
    };
    let out = edit::blockreplace(&p, &ba).map_err(exec_err)?;
    if args.get_bool(usize::MAX, "show_changes", true) {
        Ok(json!(out.diff))
    } else {
        Ok(json!(out.changed))
    }
}

/// `file.symlink <src> <path> [force=]`: creates the link.
fn symlink_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let src = args.require_str(0, "src", "symlink")?;
    let p = path_arg(args, 1, "path", "symlink")?;
    if !p.is_absolute() {
        return Err(ExecError::Invocation(format!(
            "Link path must be absolute: {}",
            p.display()
        )));
    }
    let force = args.get_bool(usize::MAX, "force", false);
    if fs::symlink_metadata(&p).is_ok() {
        if fs::read_link(&p).is_ok_and(|t| t == Path::new(&src)) {
            return Ok(json!(true));
        }
        if !force {
            return Err(exec_err(format!("Found existing symlink: {}", p.display())));
        }
        remove(&p).map_err(|e| exec_err(format!("Could not remove '{}': {e}", p.display())))?;
    }
    std::os::unix::fs::symlink(&src, &p)
        .map_err(|e| exec_err(format!("Could not create '{}': {e}", p.display())))?;
    Ok(json!(true))
}

/// `file.readlink <path> [canonicalize]`: the link's target.
fn readlink_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    let p = path_arg(args, 0, "path", "readlink")?;
    if !p.is_absolute() {
        return Err(ExecError::Invocation(
            "Path to link must be absolute.".into(),
        ));
    }
    if !fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(ExecError::Invocation(format!(
            "A valid link was not specified: {}",
            p.display()
        )));
    }
    if args.get_bool(1, "canonicalize", false) {
        Ok(json!(fs::canonicalize(&p)
            .map_err(exec_err)?
            .display()
            .to_string()))
    } else {
        Ok(json!(fs::read_link(&p)
            .map_err(exec_err)?
            .display()
            .to_string()))
    }
}

/// `file.find <path> [name=] [type=]...`: Salt's `find`.
fn find_fn(args: &Args, _host: &Host) -> Result<Value, ExecError> {
    find(args)
}
