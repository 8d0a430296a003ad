//! Directory states: `file.directory` (ownership and modes, recursively,
//! and `clean`) and `file.recurse` (a `salt://` directory mirrored onto the
//! host, one `file.managed` per file).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use halite_state::{strip_salt_url, LowChunk, Map, StateCall, StateError, StateResult, Value};
use serde_json::json;

use super::perms::{self, Wanted};
use super::{dirname, error, opt_str, owner_arg, target_name};
use crate::exec::file::{self as fexec, fnmatch, meta};

const RECURSE_TYPES: &[&str] = &[
    "user",
    "group",
    "mode",
    "ignore_files",
    "ignore_dirs",
    "silent",
];

fn recurse_set(call: &StateCall<'_>) -> Result<BTreeSet<String>, String> {
    match call.arg("recurse") {
        None => Ok(BTreeSet::new()),
        Some(Value::Array(items)) => {
            let set: BTreeSet<String> = items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_string))
                .collect();
            if set.len() != items.len() || !set.iter().all(|s| RECURSE_TYPES.contains(&s.as_str()))
            {
                let allowed: Vec<String> =
                    RECURSE_TYPES.iter().map(|t| format!("\"{t}\"")).collect();
                return Err(format!(
                    "Types for \"recurse\" limited to {}.",
                    allowed.join(", ")
                ));
            }
            if set.contains("ignore_files") && set.contains("ignore_dirs") {
                return Err("Must not specify \"recurse\" options \"ignore_files\" and \"ignore_dirs\" at the same time.".into());
            }
            Ok(set)
        }
        Some(_) => Err("\"recurse\" must be formed as a list of strings".into()),
    }
}

/// Salt's `check_include_exclude` for one relative path: a pattern is a
/// glob, or a regex when prefixed with `E@`.
fn pattern_matches(pattern: &str, rel: &str) -> bool {
    match pattern.strip_prefix("E@") {
        Some(re) => regex::Regex::new(re).is_ok_and(|r| r.is_match(rel)),
        None => fnmatch(pattern, rel),
    }
}

fn included(rel: &str, include: Option<&str>, exclude: Option<&str>) -> bool {
    if include.is_some_and(|p| !pattern_matches(p, rel)) {
        return false;
    }
    !exclude.is_some_and(|p| pattern_matches(p, rel))
}

/// Every entry below `root` (files and directories), depth-first, sorted.
fn walk(root: &Path, max_depth: Option<usize>) -> Vec<(PathBuf, bool)> {
    let mut w = walkdir::WalkDir::new(root).min_depth(1).sort_by_file_name();
    if let Some(d) = max_depth {
        w = w.max_depth(d);
    }
    w.into_iter()
        .filter_map(Result::ok)
        .map(|e| (e.path().to_path_buf(), e.file_type().is_dir()))
        .collect()
}

/// Paths that `clean` must keep because this state requires the `file`
/// states that manage them (Salt's `_gen_keep_files`). A requisite given by
/// ID is resolved through the run's low chunks ([`StateEnv::lowstate`]);
/// without them only requisites naming a path can be honoured.
///
/// [`StateEnv::lowstate`]: halite_state::StateEnv::lowstate
fn required_keep(call: &StateCall<'_>) -> BTreeSet<PathBuf> {
    let mut keep = BTreeSet::new();
    let mut targets: Vec<String> = Vec::new();
    for req in call.arg_list("require") {
        let Some(target) = req.get("file").and_then(Value::as_str) else {
            continue;
        };
        // Salt matches the requisite against every chunk's name or ID.
        let mut resolved = false;
        for low in call.env.lowstate() {
            if low.state() == "file" && (low.name() == target || low.id() == target) {
                targets.push(low.name().to_string());
                resolved = true;
            }
        }
        if !resolved {
            targets.push(target.to_string());
        }
    }
    for target in targets.iter().filter(|t| t.starts_with('/')) {
        let kept = PathBuf::from(target.trim_end_matches('/'));
        if kept.is_dir() {
            keep.extend(walk(&kept, None).into_iter().map(|(p, _)| p));
        }
        keep.insert(kept);
    }
    keep
}

/// Whether `p` is kept: listed, or a parent of a kept path.
fn is_kept(p: &Path, keep: &BTreeSet<PathBuf>) -> bool {
    keep.iter().any(|k| k.starts_with(p))
}

/// `file.directory`.
pub fn directory(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let mut name = target_name(call);
    let mut ret = StateResult::new(name.clone(), Some(true));
    if name.is_empty() {
        return error(ret, "Must provide name to file.directory");
    }
    if name.len() > 1 && name.ends_with('/') {
        name.pop();
    }
    let clean = call.arg_bool("clean", false);
    let max_depth = call
        .arg("max_depth")
        .and_then(Value::as_u64)
        .map(|d| d as usize);
    if max_depth.is_some() && clean {
        return error(ret, "Cannot specify both max_depth and clean");
    }
    let user = owner_arg(call, "user")?;
    let group = owner_arg(call, "group")?;
    let dir_mode = match super::mode_arg(call, "dir_mode")? {
        Some(m) => Some(m),
        None => super::mode_arg(call, "mode")?,
    };
    let file_mode = super::mode_arg(call, "file_mode")?.or_else(|| dir_mode.clone());
    let follow = call.arg_bool("follow_symlinks", false);
    let makedirs = call.arg_bool("makedirs", false);
    let force = call.arg_bool("force", false);
    let allow_symlink = call.arg_bool("allow_symlink", true);
    let children_only = call.arg_bool("children_only", false);
    let exclude_pat = call.arg_str("exclude_pat")?;
    let u_check = perms::check_user(user.as_deref(), group.as_deref(), call.test);
    if !u_check.is_empty() {
        return error(ret, u_check);
    }
    let path = PathBuf::from(&name);
    if !path.is_absolute() {
        return error(
            ret,
            format!("Specified file {name} is not an absolute path"),
        );
    }
    let is_link = fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
    if path.is_file() || (!allow_symlink && is_link) || (force && is_link) {
        if let Some(backupname) = opt_str(call, "backupname")? {
            let backup = Path::new(&backupname);
            if fs::symlink_metadata(backup).is_ok() {
                if !force {
                    return error(
                        ret,
                        format!("File exists where the backup target {backupname} should go"),
                    );
                }
                if call.test {
                    ret.changes.insert(
                        "forced".into(),
                        json!(format!(
                            "Existing file at backup path {backupname} would be removed"
                        )),
                    );
                } else if let Err(e) = fexec::remove(backup) {
                    return error(ret, format!("Could not remove '{backupname}': {e}"));
                }
            }
            if call.test {
                ret.changes.insert(
                    "backup".into(),
                    json!(format!("{name} would be renamed to {backupname}")),
                );
                ret.changes
                    .insert(name.clone(), json!({"directory": "new"}));
                ret.comment =
                    format!("{name} would be backed up and replaced with a new directory");
                ret.result = None;
                return Ok(ret);
            }
            if let Err(e) = fs::rename(&path, backup) {
                return error(ret, format!("Unable to rename {name} to {backupname}: {e}"));
            }
        } else if force {
            let (what, verb) = if path.is_file() {
                ("File", "forcibly replaced")
            } else if is_link {
                ("Symlink", "forcibly replaced")
            } else {
                ("Directory", "forcibly replaced")
            };
            if call.test {
                ret.changes
                    .insert("forced".into(), json!(format!("{what} would be {verb}")));
            } else {
                fexec::remove(&path)
                    .map_err(|e| StateError::Other(format!("Could not remove '{name}': {e}")))?;
                ret.changes
                    .insert("forced".into(), json!(format!("{what} was {verb}")));
            }
        } else if path.is_file() {
            return error(
                ret,
                format!("Specified location {name} exists and is a file"),
            );
        } else if is_link {
            return error(
                ret,
                format!("Specified location {name} exists and is a symlink"),
            );
        }
    }
    let rset = match recurse_set(call) {
        Ok(s) => s,
        Err(e) => {
            if call.test || !path.is_dir() {
                return error(ret, e);
            }
            BTreeSet::new()
        }
    };
    let wanted_top = Wanted {
        user: user.as_deref(),
        group: group.as_deref(),
        mode: dir_mode.as_deref(),
        follow_symlinks: follow,
    };
    // Prediction (Salt's _check_directory).
    let mut tchanges = Map::new();
    let entries = if !rset.is_empty() || clean {
        walk(&path, max_depth)
    } else {
        Vec::new()
    };
    if !rset.is_empty() {
        let r_user = if rset.contains("user") {
            user.as_deref()
        } else {
            None
        };
        let r_group = if rset.contains("group") {
            group.as_deref()
        } else {
            None
        };
        let (r_dmode, r_fmode) = if rset.contains("mode") {
            (dir_mode.as_deref(), file_mode.as_deref())
        } else {
            (None, None)
        };
        for (p, is_dir) in &entries {
            let check = if *is_dir {
                !rset.contains("ignore_dirs")
            } else {
                !rset.contains("ignore_files")
            };
            if !check {
                continue;
            }
            let w = Wanted {
                user: r_user,
                group: r_group,
                mode: if *is_dir { r_dmode } else { r_fmode },
                follow_symlinks: follow,
            };
            let c = perms::dir_meta_changes(p, w);
            if !c.is_empty() {
                tchanges.insert(p.display().to_string(), Value::Object(c));
            }
        }
    }
    if !children_only {
        let c = perms::dir_meta_changes(&path, wanted_top);
        if !c.is_empty() {
            tchanges.insert(name.clone(), Value::Object(c));
        }
    }
    let mut to_clean = Vec::new();
    if clean {
        let keep = required_keep(call);
        for (p, _) in &entries {
            if is_kept(p, &keep) {
                continue;
            }
            let rel = p
                .strip_prefix(&path)
                .map(|r| r.display().to_string())
                .unwrap_or_default();
            if exclude_pat
                .as_deref()
                .is_some_and(|pat| pattern_matches(pat, &rel))
            {
                continue;
            }
            to_clean.push(p.clone());
            tchanges.insert(
                p.display().to_string(),
                json!({"removed": "Removed due to clean"}),
            );
        }
    }
    if !path.is_dir() {
        tchanges.insert(name.clone(), json!({"directory": "new"}));
    }
    let (tresult, tcomment) = if tchanges.is_empty() {
        (
            Some(true),
            format!("The directory {name} is in the correct state"),
        )
    } else {
        let mut c = String::from("The following files will be changed:\n");
        for (f, v) in &tchanges {
            if let Value::Object(m) = v {
                for (k, val) in m {
                    let val = val
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| val.to_string());
                    c.push_str(&format!("{f}: {k} - {val}\n"));
                }
            }
        }
        (None, c)
    };
    ret.changes.extend(tchanges);
    if call.test || ret.changes.is_empty() {
        ret.result = tresult;
        ret.comment = tcomment;
        return Ok(ret);
    }
    if !path.is_dir() {
        if !Path::new(&dirname(&name)).is_dir() {
            if makedirs {
                if let Err(e) = perms::make_parent_dirs(
                    &path,
                    user.as_deref(),
                    group.as_deref(),
                    dir_mode.as_deref(),
                ) {
                    return error(ret, e);
                }
            } else {
                return error(ret, format!("No directory to create {name} in"));
            }
        }
        if let Err(e) = fs::create_dir(&path) {
            return error(ret, format!("Failed to create directory {name}: {e}"));
        }
        if user.is_some() || group.is_some() {
            let _ = meta::chown(&path, user.as_deref(), group.as_deref(), true);
        }
        if let Some(m) = &dir_mode {
            let _ = meta::chmod(&path, m);
        }
        ret.changes
            .insert(name.clone(), json!({"directory": "new"}));
        return Ok(ret);
    }
    // Salt keeps the predicted per-path changes and adds what check_perms
    // reports at the top level.
    if !children_only {
        perms::check_perms(&path, &mut ret, wanted_top, false);
    }
    let mut errors = Vec::new();
    if !rset.is_empty() {
        if rset.contains("user") && user.is_none() {
            ret.result = Some(false);
            ret.comment =
                "user not specified, but configured as a target for recursive ownership management"
                    .into();
        }
        if rset.contains("group") && group.is_none() {
            ret.result = Some(false);
            ret.comment = "group not specified, but configured as a target for recursive ownership management".into();
        }
        let r_user = if rset.contains("user") {
            user.as_deref()
        } else {
            None
        };
        let r_group = if rset.contains("group") {
            group.as_deref()
        } else {
            None
        };
        let (r_dmode, r_fmode) = if rset.contains("mode") {
            (dir_mode.as_deref(), file_mode.as_deref())
        } else {
            (None, None)
        };
        if rset.contains("silent") {
            ret.changes = Map::new();
            ret.changes
                .insert("recursion".into(), json!("Changes silenced"));
        }
        for (p, is_dir) in &entries {
            let check = if *is_dir {
                !rset.contains("ignore_dirs")
            } else {
                !rset.contains("ignore_files")
            };
            if !check {
                continue;
            }
            let w = Wanted {
                user: r_user,
                group: r_group,
                mode: if *is_dir { r_dmode } else { r_fmode },
                follow_symlinks: follow,
            };
            let mut sub = StateResult::new(p.display().to_string(), Some(true));
            perms::check_perms(p, &mut sub, w, false);
            if sub.result == Some(false) && !sub.comment.is_empty() {
                errors.push(sub.comment.clone());
            }
            if !rset.contains("silent") {
                ret.changes.extend(sub.changes);
            }
        }
    }
    if clean {
        let mut removed = Vec::new();
        // A removed directory takes its content with it; Salt lists only it.
        let mut gone: Vec<&PathBuf> = Vec::new();
        for p in &to_clean {
            if gone.iter().any(|g| p.starts_with(g)) {
                continue;
            }
            if fs::symlink_metadata(p).is_ok() && fexec::remove(p).is_ok() {
                removed.push(json!(p.display().to_string()));
                gone.push(p);
            }
        }
        if !removed.is_empty() {
            ret.changes.insert("removed".into(), Value::Array(removed));
            ret.comment = format!("Files cleaned from directory {name}");
        }
    }
    if ret.comment.is_empty() {
        if children_only {
            ret.comment = format!("Directory {name}/* updated");
        } else if !ret.changes.is_empty() {
            ret.comment = format!("Directory {name} updated");
        }
    }
    if ret.changes.is_empty() && ret.result == Some(true) {
        let orig = std::mem::take(&mut ret.comment);
        ret.comment = format!("Directory {name} is in the correct state");
        if !orig.is_empty() {
            ret.comment = format!("{}\n{orig}", ret.comment);
        }
    }
    if !errors.is_empty() {
        ret.result = Some(false);
        ret.comment
            .push_str("\n\nThe following errors were encountered:\n");
        for e in errors {
            ret.comment.push_str(&format!("\n- {e}"));
        }
    }
    Ok(ret)
}

/// Runs another `file` state function on `name` with `args`, as Salt's
/// `recurse` calls `managed`/`directory` for each entry.
fn sub_call(
    call: &StateCall<'_>,
    fun: &str,
    name: &str,
    args: &[(&str, Value)],
    f: fn(&StateCall<'_>) -> Result<StateResult, StateError>,
) -> Result<StateResult, StateError> {
    let mut m = Map::new();
    m.insert("state".into(), json!("file"));
    m.insert("name".into(), json!(name));
    m.insert("__env__".into(), json!(call.chunk.env()));
    m.insert("__id__".into(), json!(call.chunk.id()));
    m.insert("__sls__".into(), json!(call.chunk.sls()));
    for (k, v) in args {
        if !v.is_null() {
            m.insert((*k).to_string(), v.clone());
        }
    }
    m.insert("fun".into(), json!(fun));
    let chunk = LowChunk::from(m);
    let sub = StateCall {
        chunk: &chunk,
        test: call.test,
        env: call.env,
        sfun: None,
        reqs: None,
    };
    f(&sub)
}

/// `file.recurse`: mirrors a `salt://` directory onto `name`.
pub fn recurse(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    let mut ret = StateResult::new(name.clone(), Some(true));
    if call.arg("mode").is_some() {
        return error(
            ret,
            "'mode' is not allowed in 'file.recurse'. Please use 'file_mode' and 'dir_mode'.",
        );
    }
    let user = owner_arg(call, "user")?;
    let group = owner_arg(call, "group")?;
    let dir_mode = super::mode_arg(call, "dir_mode")?;
    let file_mode_raw = call.arg("file_mode").cloned();
    let u_check = perms::check_user(user.as_deref(), group.as_deref(), call.test);
    if !u_check.is_empty() {
        return error(ret, u_check);
    }
    let path = PathBuf::from(&name);
    if !path.is_absolute() {
        return error(
            ret,
            format!("Specified file {name} is not an absolute path"),
        );
    }
    let source = call.require_str("source")?;
    let env = if call.chunk.env().is_empty() {
        "base".to_string()
    } else {
        call.chunk.env().to_string()
    };
    let Some((prefix, env_override)) = strip_salt_url(&source) else {
        return error(
            ret,
            format!("Recurse failed: Invalid source '{source}' (must be a salt:// URI)"),
        );
    };
    let saltenv = env_override.unwrap_or(&env).to_string();
    let prefix = prefix.trim_end_matches('/').to_string();
    let client = call.env.file_client();
    let files = client
        .list_files(&saltenv, &prefix)
        .map_err(|e| StateError::Other(e.to_string()))?;
    let dirs = client
        .list_dirs(&saltenv, &prefix)
        .map_err(|e| StateError::Other(e.to_string()))?;
    let strip = |rel: &str| -> Option<String> {
        if prefix.is_empty() {
            return Some(rel.to_string());
        }
        rel.strip_prefix(&format!("{prefix}/")).map(str::to_string)
    };
    if files.is_empty() && dirs.is_empty() {
        return error(
            ret,
            "Recurse failed: none of the specified sources were found",
        );
    }
    if path.exists() && !path.is_dir() {
        return error(
            ret,
            format!("The path {name} exists and is not a directory"),
        );
    }
    if !call.test && !path.is_dir() {
        if let Err(e) = perms::make_parent_dirs(
            &path.join("x"),
            user.as_deref(),
            group.as_deref(),
            dir_mode.as_deref(),
        ) {
            return error(ret, e);
        }
    }
    let include = call.arg_str("include_pat")?;
    let exclude = call.arg_str("exclude_pat")?;
    let maxdepth = call
        .arg("maxdepth")
        .and_then(Value::as_u64)
        .map(|d| d as usize);
    let include_empty = call.arg_bool("include_empty", false);
    let clean = call.arg_bool("clean", false);
    let mut comments: Vec<(String, Vec<String>)> = Vec::new();
    let mut keep: BTreeSet<PathBuf> = BTreeSet::new();
    keep.insert(path.clone());
    let merge = |ret: &mut StateResult,
                 p: &str,
                 sub: StateResult,
                 comments: &mut Vec<(String, Vec<String>)>| {
        if sub.result == Some(false) || ret.result == Some(true) {
            ret.result = sub.result;
        }
        if sub.result != Some(true) && !sub.comment.is_empty() {
            match comments.iter_mut().find(|(k, _)| k == p) {
                Some((_, v)) => v.push(sub.comment.clone()),
                None => comments.push((p.to_string(), vec![sub.comment.clone()])),
            }
        }
        if !sub.changes.is_empty() {
            ret.changes
                .insert(p.to_string(), Value::Object(sub.changes));
        }
    };
    let depth_ok = |rel: &str| maxdepth.is_none_or(|d| rel.matches('/').count() < d + 1);
    let mut managed_files: Vec<(String, String)> = Vec::new();
    let mut managed_dirs: BTreeSet<String> = BTreeSet::new();
    for f in &files {
        let Some(rel) = strip(f) else { continue };
        if rel.is_empty()
            || !included(&rel, include.as_deref(), exclude.as_deref())
            || !depth_ok(&rel)
        {
            continue;
        }
        // Salt manages only the directory holding each file (its parents
        // are made by makedirs): the target itself only when a file sits
        // at the top of the source.
        managed_dirs.insert(dirname(&rel));
        managed_files.push((rel, f.clone()));
    }
    if include_empty {
        for d in &dirs {
            if let Some(rel) = strip(d).filter(|r| !r.is_empty() && depth_ok(r)) {
                if included(&rel, include.as_deref(), exclude.as_deref()) {
                    managed_dirs.insert(rel);
                }
            }
        }
    }
    // The target itself (`""`, first) is managed when a file sits at the
    // top of the source; it only shows up as a change in test mode, as a
    // real run has created it above. With include_empty Salt also lists
    // the source root as `.` (first).
    let dot = include_empty.then(|| ".".to_string());
    let all_dirs = dot.into_iter().chain(managed_dirs.iter().cloned());
    for rel in all_dirs {
        let dest = if rel.is_empty() {
            path.clone()
        } else {
            path.join(&rel)
        };
        keep.insert(dest.clone());
        let d = dest.display().to_string();
        let sub = sub_call(
            call,
            "directory",
            &d,
            &[
                (
                    "user",
                    user.clone().map(Value::String).unwrap_or(Value::Null),
                ),
                (
                    "group",
                    group.clone().map(Value::String).unwrap_or(Value::Null),
                ),
                (
                    "dir_mode",
                    dir_mode.clone().map(Value::String).unwrap_or(Value::Null),
                ),
                ("makedirs", json!(true)),
            ],
            directory,
        )?;
        merge(&mut ret, &d, sub, &mut comments);
    }
    let passthrough = [
        "template",
        "context",
        "defaults",
        "backup",
        "show_changes",
        "replace",
    ];
    for (rel, src) in &managed_files {
        let dest = path.join(rel);
        keep.insert(dest.clone());
        let d = dest.display().to_string();
        let mut args: Vec<(&str, Value)> = vec![
            ("source", json!(format!("salt://{src}?saltenv={saltenv}"))),
            (
                "user",
                user.clone().map(Value::String).unwrap_or(Value::Null),
            ),
            (
                "group",
                group.clone().map(Value::String).unwrap_or(Value::Null),
            ),
            ("mode", file_mode_raw.clone().unwrap_or(Value::Null)),
            ("makedirs", json!(true)),
        ];
        for key in passthrough {
            if let Some(v) = call.arg(key) {
                args.push((key, v.clone()));
            }
        }
        let sub = sub_call(call, "managed", &d, &args, super::managed::managed)?;
        merge(&mut ret, &d, sub, &mut comments);
    }
    if clean && path.is_dir() {
        keep.extend(required_keep(call));
        let mut removed = Vec::new();
        for (p, _) in walk(&path, None) {
            if is_kept(&p, &keep) {
                continue;
            }
            let rel = p
                .strip_prefix(&path)
                .map(|r| r.display().to_string())
                .unwrap_or_default();
            if exclude
                .as_deref()
                .is_some_and(|pat| pattern_matches(pat, &rel))
            {
                continue;
            }
            if removed.iter().any(|r: &PathBuf| p.starts_with(r)) {
                continue;
            }
            removed.push(p);
        }
        if !removed.is_empty() {
            let list: Vec<Value> = removed
                .iter()
                .map(|p| json!(p.display().to_string()))
                .collect();
            if call.test {
                if ret.result == Some(true) {
                    ret.result = None;
                }
                let names = list
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect();
                comments.push(("removed".into(), names));
            } else {
                for p in &removed {
                    let _ = fexec::remove(p);
                }
                ret.changes.insert("removed".into(), Value::Array(list));
            }
        }
    }
    ret.comment = comments
        .iter()
        .map(|(k, v)| format!("\n#### {k} ####\n{}", v.join("\n")))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string();
    if ret.comment.is_empty() {
        ret.comment = format!("Recursively updated {name}");
    }
    if ret.changes.is_empty() && ret.result == Some(true) {
        ret.comment = format!("The directory {name} is in the correct state");
    }
    Ok(ret)
}
