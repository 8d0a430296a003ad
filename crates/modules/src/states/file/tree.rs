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

/// `file.directory`, phase by phase: [`DirectoryArgs::resolve`] the
/// arguments, [`clear_the_way`] of a file or symlink where the directory
/// goes, [`predict`] the changes (Salt's `_check_directory`), report them
/// in test mode or when there are none, else act ([`create`] a missing
/// directory, or [`apply`] ownership, modes and `clean`), then [`report`].
pub fn directory(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let mut ret = StateResult::new(target_name(call), Some(true));
    let args = match DirectoryArgs::resolve(call)? {
        Ok(args) => args,
        Err(comment) => return error(ret, comment),
    };
    match clear_the_way(call, &args, &mut ret)? {
        Step::Next => {}
        Step::Fail(comment) => return error(ret, comment),
        Step::Done => return Ok(ret),
    }
    let rset = match recurse_set(call) {
        Ok(s) => s,
        Err(e) => {
            if call.test || !args.path.is_dir() {
                return error(ret, e);
            }
            BTreeSet::new()
        }
    };
    let entries = if !rset.is_empty() || args.clean {
        walk(&args.path, args.max_depth)
    } else {
        Vec::new()
    };
    let (predicted, to_clean) = predict(call, &args, &rset, &entries);
    let (tresult, tcomment) = prediction_comment(&args, &predicted);
    ret.changes.extend(predicted);
    if call.test || ret.changes.is_empty() {
        ret.result = tresult;
        ret.comment = tcomment;
        return Ok(ret);
    }
    if !args.path.is_dir() {
        return match create(&args, &mut ret) {
            Step::Fail(comment) => error(ret, comment),
            Step::Next | Step::Done => Ok(ret),
        };
    }
    let errors = apply(&args, &rset, &entries, &to_clean, &mut ret);
    report(&args, errors, &mut ret);
    Ok(ret)
}

/// How a phase of `file.directory` ended.
enum Step {
    /// Go on to the next phase.
    Next,
    /// The state fails with this comment.
    Fail(String),
    /// The return is complete as it is.
    Done,
}

/// The arguments of `file.directory`, read and checked in Salt's order.
struct DirectoryArgs {
    /// The path as given, without a trailing `/`.
    name: String,
    /// `name` as Salt's `str()` prints it in comments (quoted when it is
    /// the state's yamlex name unchanged).
    shown: String,
    path: PathBuf,
    clean: bool,
    max_depth: Option<usize>,
    user: Option<String>,
    group: Option<String>,
    dir_mode: Option<String>,
    file_mode: Option<String>,
    follow_symlinks: bool,
    makedirs: bool,
    force: bool,
    allow_symlink: bool,
    children_only: bool,
    exclude_pat: Option<String>,
}

impl DirectoryArgs {
    /// The resolve phase: the arguments, or the comment the state fails
    /// with (a bad argument value is an error of the call itself).
    fn resolve(call: &StateCall<'_>) -> Result<Result<Self, String>, StateError> {
        let mut name = target_name(call);
        if name.is_empty() {
            return Ok(Err("Must provide name to file.directory".into()));
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
            return Ok(Err("Cannot specify both max_depth and clean".into()));
        }
        let user = owner_arg(call, "user")?;
        let group = owner_arg(call, "group")?;
        let dir_mode = match super::mode_arg(call, "dir_mode")? {
            Some(m) => Some(m),
            None => super::mode_arg(call, "mode")?,
        };
        let file_mode = super::mode_arg(call, "file_mode")?.or_else(|| dir_mode.clone());
        let args = Self {
            path: PathBuf::from(&name),
            shown: call.chunk.shown_if_name(&name).into_owned(),
            name,
            clean,
            max_depth,
            follow_symlinks: call.arg_bool("follow_symlinks", false),
            makedirs: call.arg_bool("makedirs", false),
            force: call.arg_bool("force", false),
            allow_symlink: call.arg_bool("allow_symlink", true),
            children_only: call.arg_bool("children_only", false),
            exclude_pat: call.arg_str("exclude_pat")?,
            user,
            group,
            dir_mode,
            file_mode,
        };
        let u_check = perms::check_user(args.user.as_deref(), args.group.as_deref(), call.test);
        if !u_check.is_empty() {
            return Ok(Err(u_check));
        }
        if !args.path.is_absolute() {
            return Ok(Err(format!(
                "Specified file {} is not an absolute path",
                args.name
            )));
        }
        Ok(Ok(args))
    }

    /// What the directory itself should be.
    fn wanted_top(&self) -> Wanted<'_> {
        Wanted {
            user: self.user.as_deref(),
            group: self.group.as_deref(),
            mode: self.dir_mode.as_deref(),
            follow_symlinks: self.follow_symlinks,
        }
    }

    /// What an entry below it should be under `recurse`, `None` when the
    /// recursion leaves entries of its kind alone (`ignore_files`/`_dirs`).
    fn wanted_below(&self, rset: &BTreeSet<String>, is_dir: bool) -> Option<Wanted<'_>> {
        let ignored = if is_dir {
            rset.contains("ignore_dirs")
        } else {
            rset.contains("ignore_files")
        };
        if ignored {
            return None;
        }
        let mode = if !rset.contains("mode") {
            None
        } else if is_dir {
            self.dir_mode.as_deref()
        } else {
            self.file_mode.as_deref()
        };
        Some(Wanted {
            user: self.user.as_deref().filter(|_| rset.contains("user")),
            group: self.group.as_deref().filter(|_| rset.contains("group")),
            mode,
            follow_symlinks: self.follow_symlinks,
        })
    }
}

/// A file, or a symlink not allowed, where the directory goes: backed up
/// to `backupname`, removed with `force`, or the state fails.
fn clear_the_way(
    call: &StateCall<'_>,
    args: &DirectoryArgs,
    ret: &mut StateResult,
) -> Result<Step, StateError> {
    let (name, path, force) = (&args.name, &args.path, args.force);
    let shown = &args.shown;
    let is_link = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if !(path.is_file() || (!args.allow_symlink && is_link) || (force && is_link)) {
        return Ok(Step::Next);
    }
    if let Some(backupname) = opt_str(call, "backupname")? {
        let backup = Path::new(&backupname);
        if fs::symlink_metadata(backup).is_ok() {
            if !force {
                return Ok(Step::Fail(format!(
                    "File exists where the backup target {backupname} should go"
                )));
            }
            if call.test {
                ret.changes.insert(
                    "forced".into(),
                    json!(format!(
                        "Existing file at backup path {backupname} would be removed"
                    )),
                );
            } else if let Err(e) = fexec::remove(backup) {
                return Ok(Step::Fail(format!("Could not remove '{backupname}': {e}")));
            }
        }
        if call.test {
            ret.changes.insert(
                "backup".into(),
                json!(format!("{shown} would be renamed to {backupname}")),
            );
            ret.changes
                .insert(name.clone(), json!({"directory": "new"}));
            ret.comment = format!("{shown} would be backed up and replaced with a new directory");
            ret.result = None;
            return Ok(Step::Done);
        }
        if let Err(e) = fs::rename(path, backup) {
            return Ok(Step::Fail(format!(
                "Unable to rename {shown} to {backupname}: {e}"
            )));
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
            fexec::remove(path)
                .map_err(|e| StateError::Other(format!("Could not remove '{shown}': {e}")))?;
            ret.changes
                .insert("forced".into(), json!(format!("{what} was {verb}")));
        }
    } else if path.is_file() {
        return Ok(Step::Fail(format!(
            "Specified location {shown} exists and is a file"
        )));
    } else if is_link {
        return Ok(Step::Fail(format!(
            "Specified location {shown} exists and is a symlink"
        )));
    }
    Ok(Step::Next)
}

/// The check phase (Salt's `_check_directory`): the changes per path, and
/// the entries `clean` would remove.
fn predict(
    call: &StateCall<'_>,
    args: &DirectoryArgs,
    rset: &BTreeSet<String>,
    entries: &[(PathBuf, bool)],
) -> (Map, Vec<PathBuf>) {
    let mut tchanges = Map::new();
    if !rset.is_empty() {
        for (p, is_dir) in entries {
            let Some(w) = args.wanted_below(rset, *is_dir) else {
                continue;
            };
            let c = perms::dir_meta_changes(p, w);
            if !c.is_empty() {
                tchanges.insert(p.display().to_string(), Value::Object(c));
            }
        }
    }
    if !args.children_only {
        let c = perms::dir_meta_changes(&args.path, args.wanted_top());
        if !c.is_empty() {
            tchanges.insert(args.name.clone(), Value::Object(c));
        }
    }
    let mut to_clean = Vec::new();
    if args.clean {
        let keep = required_keep(call);
        for (p, _) in entries {
            if is_kept(p, &keep) {
                continue;
            }
            let rel = p
                .strip_prefix(&args.path)
                .map(|r| r.display().to_string())
                .unwrap_or_default();
            if args
                .exclude_pat
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
    if !args.path.is_dir() {
        tchanges.insert(args.name.clone(), json!({"directory": "new"}));
    }
    (tchanges, to_clean)
}

/// The result and comment of the prediction, as test mode reports it.
fn prediction_comment(args: &DirectoryArgs, tchanges: &Map) -> (Option<bool>, String) {
    let shown = &args.shown;
    if tchanges.is_empty() {
        return (
            Some(true),
            format!("The directory {shown} is in the correct state"),
        );
    }
    let mut c = String::from("The following files will be changed:\n");
    for (f, v) in tchanges {
        if let Value::Object(m) = v {
            for (k, val) in m {
                let val = val
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| val.to_string());
                // The state's own path is its (yamlex) name.
                let f = if *f == args.name { shown } else { f };
                c.push_str(&format!("{f}: {k} - {val}\n"));
            }
        }
    }
    (None, c)
}

/// The act phase for a missing directory: its parents (`makedirs`), the
/// directory, its owner and mode.
fn create(args: &DirectoryArgs, ret: &mut StateResult) -> Step {
    let (name, path) = (&args.name, &args.path);
    let shown = &args.shown;
    if !Path::new(&dirname(name)).is_dir() {
        if !args.makedirs {
            return Step::Fail(format!("No directory to create {shown} in"));
        }
        if let Err(e) = perms::make_parent_dirs(
            path,
            args.user.as_deref(),
            args.group.as_deref(),
            args.dir_mode.as_deref(),
        ) {
            return Step::Fail(e);
        }
    }
    if let Err(e) = fs::create_dir(path) {
        return Step::Fail(format!("Failed to create directory {shown}: {e}"));
    }
    if args.user.is_some() || args.group.is_some() {
        let _ = meta::chown(path, args.user.as_deref(), args.group.as_deref(), true);
    }
    if let Some(m) = &args.dir_mode {
        let _ = meta::chmod(path, m);
    }
    ret.changes
        .insert(name.clone(), json!({"directory": "new"}));
    Step::Done
}

/// The act phase for an existing directory: its own ownership and mode,
/// the recursion's, then `clean`. Returns the errors of entries below.
fn apply(
    args: &DirectoryArgs,
    rset: &BTreeSet<String>,
    entries: &[(PathBuf, bool)],
    to_clean: &[PathBuf],
    ret: &mut StateResult,
) -> Vec<String> {
    // Salt keeps the predicted per-path changes and adds what check_perms
    // reports at the top level.
    if !args.children_only {
        perms::check_perms(&args.path, ret, args.wanted_top(), false);
    }
    let mut errors = Vec::new();
    if !rset.is_empty() {
        if rset.contains("user") && args.user.is_none() {
            ret.result = Some(false);
            ret.comment =
                "user not specified, but configured as a target for recursive ownership management"
                    .into();
        }
        if rset.contains("group") && args.group.is_none() {
            ret.result = Some(false);
            ret.comment = "group not specified, but configured as a target for recursive ownership management".into();
        }
        let silent = rset.contains("silent");
        if silent {
            ret.changes = Map::new();
            ret.changes
                .insert("recursion".into(), json!("Changes silenced"));
        }
        for (p, is_dir) in entries {
            let Some(w) = args.wanted_below(rset, *is_dir) else {
                continue;
            };
            let mut sub = StateResult::new(p.display().to_string(), Some(true));
            perms::check_perms(p, &mut sub, w, false);
            if sub.result == Some(false) && !sub.comment.is_empty() {
                errors.push(sub.comment.clone());
            }
            if !silent {
                ret.changes.extend(sub.changes);
            }
        }
    }
    if args.clean {
        let mut removed = Vec::new();
        // A removed directory takes its content with it; Salt lists only it.
        let mut gone: Vec<&PathBuf> = Vec::new();
        for p in to_clean {
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
            ret.comment = format!("Files cleaned from directory {}", args.shown);
        }
    }
    errors
}

/// The report phase: the comment for what was done, and the errors of
/// entries below appended.
fn report(args: &DirectoryArgs, errors: Vec<String>, ret: &mut StateResult) {
    let shown = &args.shown;
    if ret.comment.is_empty() {
        if args.children_only {
            ret.comment = format!("Directory {shown}/* updated");
        } else if !ret.changes.is_empty() {
            ret.comment = format!("Directory {shown} updated");
        }
    }
    if ret.changes.is_empty() && ret.result == Some(true) {
        let orig = std::mem::take(&mut ret.comment);
        ret.comment = format!("Directory {shown} is in the correct state");
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
