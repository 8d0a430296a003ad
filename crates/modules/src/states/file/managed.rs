//! `file.managed`: a file's content (from `salt://`, a local path, inline
//! `contents`, pillar or grains, optionally a Jinja template), owner and
//! mode, with Salt's comments and `changes` (`diff`, `mode`, `user`...).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use halite_state::{Map, StateCall, StateError, StateResult, Value};
use serde_json::json;

use super::content::Content;
use super::perms::{self, Wanted};
use super::{error, opt_str, owner_arg, target_name};
use crate::exec::file::{meta, owner_names};
use crate::fetch::SourceSum;

/// Where the new content of a managed file comes from once resolved.
pub(crate) enum NewContent {
    /// Bytes to write (inline contents, a rendered template, or a source file).
    Bytes {
        data: Vec<u8>,
        /// The local copy of the `source` they came from, if any.
        source: Option<PathBuf>,
    },
    /// A source file used as it is (no template): streamed from disk,
    /// never read whole.
    File {
        path: PathBuf,
        /// The hash it was checked to have, verified again as it is copied.
        verify: Option<SourceSum>,
    },
    /// No source and no contents: only existence, owner and mode are managed.
    Nothing,
}

impl NewContent {
    /// The content to compare and write, `None` for [`NewContent::Nothing`].
    fn content(&self) -> Option<Content<'_>> {
        match self {
            NewContent::Bytes { data, .. } => Some(Content::Bytes(data)),
            NewContent::File { path, verify } => Some(Content::File {
                path,
                verify: verify.as_ref(),
            }),
            NewContent::Nothing => None,
        }
    }

    /// The local copy of the source, if the content came from one.
    fn source(&self) -> Option<&Path> {
        match self {
            NewContent::Bytes { source, .. } => source.as_deref(),
            NewContent::File { path, .. } => Some(path),
            NewContent::Nothing => None,
        }
    }
}

/// Looks up `key` (`a:b:c`) in a nested value.
pub(crate) fn traverse<'v>(root: &'v Value, key: &str, delimiter: &str) -> Option<&'v Value> {
    let mut cur = root;
    for part in key.split(delimiter) {
        cur = match cur {
            Value::Object(m) => m.get(part)?,
            Value::Array(a) => a.get(part.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if *b { "True" } else { "False" }.to_string()),
        _ => None,
    }
}

/// Salt's `_validate_str_list` then its line normalisation: every line ends
/// with a newline; the last one is dropped when `contents_newline` is False.
fn normalize_contents(v: &Value, contents_newline: bool) -> Option<String> {
    let parts: Vec<String> = match v {
        Value::Array(items) => items
            .iter()
            .map(|i| value_text(i).unwrap_or_else(|| i.to_string()))
            .collect(),
        other => vec![value_text(other)?],
    };
    let mut out = String::new();
    for part in &parts {
        for line in part.lines() {
            out.push_str(line.trim_end_matches('\r'));
            out.push('\n');
        }
    }
    if !contents_newline {
        while out.ends_with('\n') || out.ends_with('\r') {
            out.pop();
        }
    }
    Some(out)
}

/// The first source of `source` (a URL or a list) that exists, with its
/// local path: `salt://` through the file client, absolute paths and
/// `file://` directly, `http(s)://`/`ftp://` downloaded into the cache
/// (unverified: states that check a hash use [`super::remote`] directly).
pub(crate) fn resolve_source(
    call: &StateCall<'_>,
    source: &Value,
    saltenv: &str,
) -> Result<(String, PathBuf), String> {
    let picked = super::remote::pick_source(call, source, saltenv)?;
    match picked.local {
        Some(local) => Ok((picked.url, local)),
        None => {
            let local = super::remote::fetch(call, &picked.url, saltenv, None)?;
            Ok((picked.url, local))
        }
    }
}

/// Renders `text` with the template engine named by `template`.
pub(crate) fn render(
    call: &StateCall<'_>,
    text: &str,
    template: &str,
    context: &Map,
    saltenv: &str,
) -> Result<String, String> {
    call.env.render_template(text, template, context, saltenv)
}

/// `context` merged over `defaults`, both dicts.
pub(crate) fn template_context(call: &StateCall<'_>) -> Result<Map, String> {
    let mut ctx = Map::new();
    match call.arg("defaults") {
        None => {}
        Some(Value::Object(d)) => ctx.extend(d.clone()),
        Some(_) => return Err("Defaults must be formed as a dict".into()),
    }
    match call.arg("context") {
        None => {}
        Some(Value::Object(c)) => ctx.extend(c.clone()),
        Some(_) => return Err("Context must be formed as a dict".into()),
    }
    Ok(ctx)
}

/// The variables Salt's `file.get_managed` passes a source template beside
/// `context`/`defaults` (which win over them): `name`, the `source` that was
/// found, and `user`, `group`, `mode` (normalized, `0644`), `attrs` as given
/// (None when absent). Templates of formulas read them (`{{ name }}`).
fn source_template_context(
    call: &StateCall<'_>,
    name: &str,
    source: &str,
    context: Map,
) -> Result<Map, StateError> {
    let mut ctx = Map::new();
    ctx.insert("name".into(), Value::from(name));
    ctx.insert("source".into(), Value::from(source));
    for key in ["user", "group", "attrs"] {
        ctx.insert(key.into(), call.arg(key).cloned().unwrap_or(Value::Null));
    }
    let mode = super::mode_arg(call, "mode")?;
    ctx.insert("mode".into(), mode.map_or(Value::Null, Value::from));
    ctx.extend(context);
    Ok(ctx)
}

/// Writes `data` to `path` through a temp file in the same directory, so a
/// reader never sees a half-written file. A new file gets `new_mode` bits.
pub(crate) fn write_atomic(path: &Path, data: &[u8], new_mode: u32) -> std::io::Result<()> {
    write_content(path, Content::Bytes(data), new_mode)
}

/// [`write_atomic`] of any [`Content`]: a source file is streamed into the
/// temp file (hashed as it goes when it was checked) and renamed into place;
/// a failed copy leaves the old file as it was.
pub(crate) fn write_content(path: &Path, data: Content<'_>, new_mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap_or(Path::new("/"));
    let mut tmp = tempfile::Builder::new()
        .prefix(".halite-")
        .tempfile_in(dir)?;
    let mut out = std::io::BufWriter::with_capacity(256 * 1024, tmp.as_file_mut());
    data.write_into(&mut out)?;
    out.flush()?;
    drop(out);
    match fs::metadata(path) {
        Ok(md) => {
            fs::set_permissions(tmp.path(), md.permissions())?;
            use std::os::unix::fs::MetadataExt;
            let _ = std::os::unix::fs::chown(tmp.path(), Some(md.uid()), Some(md.gid()));
        }
        Err(_) => fs::set_permissions(tmp.path(), fs::Permissions::from_mode(new_mode))?,
    }
    let persisted = tmp.persist(path).map_err(|e| e.error);
    // The file written may be `/etc/passwd` or `/etc/group`.
    owner_names::restamp();
    persisted?;
    Ok(())
}

/// Salt's `backup: minion`: keeps the old file under
/// `<cachedir>/file_backup/<path>_<timestamp>` before it is replaced.
pub(crate) fn backup_minion(call: &StateCall<'_>, path: &Path) -> std::io::Result<()> {
    let cachedir = call
        .env
        .opts()
        .get("cachedir")
        .and_then(Value::as_str)
        .unwrap_or("/var/cache/halite/minion");
    let rel = path.strip_prefix("/").unwrap_or(path);
    let stamp = chrono::Local::now().format("%a_%b_%d_%H:%M:%S_%6f_%Y");
    let name = format!("{}_{stamp}", rel.display());
    let dest = Path::new(cachedir).join("file_backup").join(name);
    if let Some(p) = dest.parent() {
        fs::create_dir_all(p)?;
    }
    fs::copy(path, dest).map(|_| ())
}

/// The target's stat, taken once by [`manage`] and carried through its
/// phases (issue 25, session 22: a warm `file.managed` stat its target six
/// times). Dropped by [`Target::changed`] when the state writes the target
/// or runs a command that may touch it: what is asked after that is read
/// from the disk again.
struct Target<'p> {
    path: &'p Path,
    /// `lstat` of the path (`None`: it does not exist or cannot be read).
    link: Option<fs::Metadata>,
    /// `stat` of the path, following a final link (`None`: it does not
    /// exist, or it is a dangling link).
    followed: Option<fs::Metadata>,
    /// Whether the two stats are still the path's as this state left it.
    current: bool,
}

impl<'p> Target<'p> {
    /// Stats `path`: once, twice when it is a symbolic link.
    fn stat(path: &'p Path) -> Self {
        let link = fs::symlink_metadata(path).ok();
        let followed = match &link {
            Some(md) if md.file_type().is_symlink() => fs::metadata(path).ok(),
            other => other.clone(),
        };
        Target {
            path,
            link,
            followed,
            current: true,
        }
    }

    /// Whether the path exists (a dangling link does).
    fn exists(&self) -> bool {
        self.link.is_some()
    }

    /// The stat that follows a final link, as `Path::is_file` reads it.
    fn followed(&self) -> Option<&fs::Metadata> {
        self.followed.as_ref()
    }

    /// The stat of what the path holds (following a final link), while
    /// it is known to be current.
    fn current(&self) -> Option<&fs::Metadata> {
        self.followed.as_ref().filter(|_| self.current)
    }

    /// Whether the path is a symbolic link now.
    fn is_link(&self) -> bool {
        if self.current {
            self.link
                .as_ref()
                .is_some_and(|m| m.file_type().is_symlink())
        } else {
            fs::symlink_metadata(self.path).is_ok_and(|m| m.file_type().is_symlink())
        }
    }

    /// The owner, group and mode `check_perms` compares, as `wanted` reads
    /// them (following a link or not), while they are current.
    fn perms(&self, wanted: Wanted<'_>) -> Option<meta::Perms> {
        let md = if wanted.follow_symlinks {
            self.followed.as_ref()
        } else {
            self.link.as_ref()
        };
        md.filter(|_| self.current).map(meta::Perms::of)
    }

    /// The path may have changed: later questions stat it again.
    fn changed(&mut self) {
        self.current = false;
    }
}

/// Parsed arguments common to `managed` and the states built on it.
pub(crate) struct ManagedArgs {
    pub user: Option<String>,
    pub group: Option<String>,
    pub mode: Option<String>,
    pub dir_mode: Option<String>,
    pub makedirs: bool,
    pub replace: bool,
    pub create: bool,
    pub backup: Option<String>,
    pub show_changes: bool,
    pub follow_symlinks: bool,
}

impl ManagedArgs {
    pub(crate) fn from_call(call: &StateCall<'_>) -> Result<Self, StateError> {
        let mode = super::mode_arg(call, "mode")?;
        Ok(ManagedArgs {
            user: owner_arg(call, "user")?,
            group: owner_arg(call, "group")?,
            mode,
            dir_mode: super::mode_arg(call, "dir_mode")?,
            makedirs: call.arg_bool("makedirs", false),
            replace: call.arg_bool("replace", true),
            create: call.arg_bool("create", true),
            backup: opt_str(call, "backup")?,
            show_changes: call.arg_bool("show_changes", true),
            follow_symlinks: call.arg_bool("follow_symlinks", true),
        })
    }
    fn wanted(&self) -> Wanted<'_> {
        Wanted {
            user: self.user.as_deref(),
            group: self.group.as_deref(),
            mode: self.mode.as_deref(),
            follow_symlinks: self.follow_symlinks,
        }
    }
}

/// Resolves the content `file.managed` should write.
fn new_content(
    call: &StateCall<'_>,
    name: &str,
    saltenv: &str,
) -> Result<Result<NewContent, String>, StateError> {
    let source = call
        .arg("source")
        .filter(|v| !matches!(v, Value::String(s) if s.is_empty()));
    let contents = call.arg("contents");
    let contents_pillar = opt_str(call, "contents_pillar")?;
    let contents_grains = opt_str(call, "contents_grains")?;
    let template = opt_str(call, "template")?;
    let count = [
        contents.is_some(),
        contents_pillar.is_some(),
        contents_grains.is_some(),
    ]
    .iter()
    .filter(|b| **b)
    .count();
    if source.is_some() && count > 0 {
        return Ok(Err("'source' cannot be used in combination with 'contents', 'contents_pillar', or 'contents_grains'".into()));
    }
    if count > 1 {
        return Ok(Err(
            "Only one of 'contents', 'contents_pillar', and 'contents_grains' is permitted".into(),
        ));
    }
    let delimiter = opt_str(call, "contents_delimiter")?.unwrap_or_else(|| ":".into());
    let raw_contents: Option<Value> = if let Some(key) = contents_pillar {
        match traverse(call.env.pillar(), &key, &delimiter) {
            Some(v) => Some(v.clone()),
            None => return Ok(Err(format!("Pillar {key} does not exist"))),
        }
    } else if let Some(key) = contents_grains {
        match traverse(call.env.grains(), &key, &delimiter) {
            Some(v) => Some(v.clone()),
            None => return Ok(Err(format!("Grain {key} does not exist"))),
        }
    } else {
        contents.cloned()
    };
    let mut context = match template_context(call) {
        Ok(c) => c,
        Err(e) => return Ok(Err(e)),
    };
    if let Some(acc) = super::accumulated::template_value(call, &target_name(call)) {
        context.insert("accumulator".into(), acc);
    }
    if let Some(raw) = raw_contents {
        let Some(mut text) = normalize_contents(&raw, call.arg_bool("contents_newline", true))
        else {
            return Ok(Err("Contents specified by contents/contents_pillar/contents_grains is not a string or list of strings, and is not binary data. SLS is likely malformed.".into()));
        };
        if let Some(t) = template.as_deref() {
            text = match render(call, &text, t, &context, saltenv) {
                Ok(t) => t,
                Err(e) => return Ok(Err(e)),
            };
        }
        return Ok(Ok(NewContent::Bytes {
            data: text.into_bytes(),
            source: None,
        }));
    }
    let Some(source) = source else {
        return Ok(Ok(NewContent::Nothing));
    };
    let picked = match super::remote::pick_source(call, source, saltenv) {
        Ok(p) => p,
        Err(e) => return Ok(Err(format!("Unable to manage file: {e}"))),
    };
    let url = picked.url;
    let skip_verify = call.arg_bool("skip_verify", false);
    let has_hash = call
        .arg("source_hash")
        .is_some_and(|v| !matches!(v, Value::Null) && v.as_str() != Some(""));
    // Salt's get_managed: a remote source needs a hash (or skip_verify); a
    // local one is checked only when a source_hash is given.
    let want = if url.starts_with("salt://") || (picked.local.is_some() && !has_hash) {
        None
    } else {
        match super::remote::wanted_sum(call, name, &url, saltenv) {
            Ok(w) => w,
            Err(e) => return Ok(Err(format!("Unable to manage file: {e}"))),
        }
    };
    let local = match picked.local {
        Some(l) => l,
        None => match super::remote::fetch(call, &url, saltenv, want.as_ref()) {
            Ok(l) => l,
            Err(e) => return Ok(Err(format!("Unable to manage file: {e}"))),
        },
    };
    // Salt checks the downloaded hash only when it writes (manage_file);
    // test mode predicts the change from the download as it is.
    if let (Some(want), false, false) = (&want, skip_verify, call.test) {
        if let Err(e) = super::remote::check_sum(&local, want, &url, name) {
            return Ok(Err(e));
        }
    }
    let Some(t) = template.as_deref() else {
        // Used as it is: streamed from disk when compared and written.
        let verify = want.filter(|_| !skip_verify && !call.test);
        return Ok(Ok(NewContent::File {
            path: local,
            verify,
        }));
    };
    let data = match fs::read(&local) {
        Ok(d) => d,
        Err(e) => {
            return Ok(Err(format!(
                "Unable to manage file: failed to read {}: {e}",
                local.display()
            )))
        }
    };
    let text = String::from_utf8_lossy(&data);
    let context = source_template_context(call, name, &url, context)?;
    let data = match render(call, &text, t, &context, saltenv) {
        Ok(out) => out.into_bytes(),
        Err(e) => return Ok(Err(format!("Unable to manage file: {e}"))),
    };
    Ok(Ok(NewContent::Bytes {
        data,
        source: Some(local),
    }))
}

/// `file.managed`.
pub fn managed(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let name = target_name(call);
    let ret = StateResult::new(name.clone(), Some(true));
    if name.is_empty() {
        return error(ret, "Destination file name is required");
    }
    let args = ManagedArgs::from_call(call)?;
    let saltenv = call.chunk.env().to_string();
    let saltenv = if saltenv.is_empty() {
        "base".to_string()
    } else {
        saltenv
    };
    manage(call, &name, &args, ret, |call| {
        new_content(call, &name, &saltenv)
    })
}

/// The body of `file.managed`, reusable by states that compute their own
/// content (`serialize`, `recurse`).
pub(crate) fn manage(
    call: &StateCall<'_>,
    name: &str,
    args: &ManagedArgs,
    mut ret: StateResult,
    content: impl FnOnce(&StateCall<'_>) -> Result<Result<NewContent, String>, StateError>,
) -> Result<StateResult, StateError> {
    let test = call.test;
    let path = Path::new(name);
    // The owner names this state compares are read under one stamp of
    // `/etc/passwd` and `/etc/group` (taken again after a write).
    let _names = owner_names::stamped_once();
    let mut mode = args.mode.clone();
    let keep_mode = call
        .arg_str("mode")?
        .is_some_and(|m| m.eq_ignore_ascii_case("keep"));
    if keep_mode {
        mode = None;
    }
    let new = match content(call)? {
        Ok(n) => n,
        Err(msg) => return error(ret, msg),
    };
    // `mode: keep` takes the mode of the source file.
    if let (true, Some(src)) = (keep_mode, new.source()) {
        mode = meta::ownership(src, true).ok().map(|o| o.mode);
    }
    let replace = args.replace && !matches!(new, NewContent::Nothing);
    // The target stat once, carried through the checks below and into
    // `check_perms` while nothing has changed it.
    let target = Target::stat(path);
    if !args.create && !target.followed().is_some_and(fs::Metadata::is_file) {
        ret.comment = format!("File {name} is not present and is not set for creation");
        return Ok(ret);
    }
    let u_check = perms::check_user(args.user.as_deref(), args.group.as_deref(), test);
    if !u_check.is_empty() {
        return error(ret, u_check);
    }
    if !path.is_absolute() {
        return error(
            ret,
            format!("Specified file {name} is not an absolute path"),
        );
    }
    if target.followed().is_some_and(fs::Metadata::is_dir) {
        return error(ret, format!("Specified target {name} is a directory"));
    }
    let wanted = Wanted {
        mode: mode.as_deref(),
        ..args.wanted()
    };
    let exists = target.exists();
    if !replace && exists {
        let before_mode =
            perms::check_perms_from(path, &mut ret, wanted, test, target.perms(wanted));
        if test {
            match (&mode, before_mode) {
                (Some(m), Some(l)) if *m != l => {
                    ret.comment = format!("File {name} will be updated with permissions {m} from its current state of {l}");
                }
                _ => ret.comment = format!("File {name} not updated"),
            }
        } else if ret.changes.is_empty() && ret.result == Some(true) {
            ret.comment = format!("File {name} exists with proper permissions. No changes made.");
        }
        return Ok(ret);
    }
    let data = new.content();
    if test {
        return Ok(predict(path, name, data, wanted, args.show_changes, ret));
    }
    let mut target = target;
    if let (Some(cmd), Some(data)) = (opt_str(call, "check_cmd")?, data) {
        if data.differs_from(path, target.current()) {
            let failed = run_check_cmd(call, name, &cmd, data)?;
            // The command may have changed anything: the target, the
            // user and group databases.
            target.changed();
            owner_names::restamp();
            if let Some(failed) = failed {
                return Ok(failed);
            }
        }
    }
    if exists {
        if let Some(data) = data {
            if data.differs_from(path, target.current()) {
                let diff = if args.show_changes {
                    data.diff_from_differing(path)
                } else {
                    "<show_changes=False>".to_string()
                };
                if args.backup.as_deref() == Some("minion") {
                    if let Err(e) = backup_minion(call, path) {
                        return error(ret, format!("Failed to commit change: {e}"));
                    }
                }
                let dest = if args.follow_symlinks {
                    fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
                } else {
                    path.to_path_buf()
                };
                let written = write_content(&dest, data, 0o644);
                target.changed();
                if let Err(e) = written {
                    return error(ret, format!("Failed to commit change: {e}"));
                }
                ret.changes.insert("diff".into(), json!(diff));
            }
            // With follow_symlinks False a link is replaced by a regular file.
            if target.is_link() && !args.follow_symlinks {
                let written = write_content(path, data, 0o644);
                target.changed();
                if let Err(e) = written {
                    return error(ret, format!("Failed to commit change: {e}"));
                }
                ret.changes.insert(
                    "diff".into(),
                    json!("Replace symbolic link with regular file"),
                );
            }
        }
        perms::check_perms_from(path, &mut ret, wanted, false, target.perms(wanted));
        if !ret.changes.is_empty() {
            ret.comment = format!("File {name} updated");
        } else if ret.result == Some(true) {
            ret.comment = format!("File {name} is in the correct state");
        }
        return Ok(ret);
    }
    // The file does not exist yet.
    let parent = Path::new(&super::dirname(name)).to_path_buf();
    if !parent.is_dir() {
        if args.makedirs {
            let dir_mode = args
                .dir_mode
                .clone()
                .or_else(|| mode.as_deref().map(perms::dir_mode_from_file_mode));
            if let Err(e) = perms::make_parent_dirs(
                path,
                args.user.as_deref(),
                args.group.as_deref(),
                dir_mode.as_deref(),
            ) {
                return error(ret, e);
            }
        } else {
            return error(ret, "Parent directory not present");
        }
    }
    let umask = meta::umask();
    // Salt writes a source through a private temp file (0600) and inline
    // contents into a file created under the umask (0077 when a mode is given).
    let create_mode = if new.source().is_some() || mode.is_some() {
        0o600
    } else {
        0o666 & !umask
    };
    match data {
        Some(data) => {
            if let Err(e) = write_content(path, data, create_mode) {
                return error(ret, format!("File {name} not created: {e}"));
            }
            ret.changes.insert("diff".into(), json!("New file"));
        }
        None => {
            if let Err(e) = write_atomic(path, b"", create_mode) {
                return error(ret, format!("Empty file {name} not created: {e}"));
            }
            ret.changes
                .insert("new".into(), json!(format!("file {name} created")));
            ret.comment = "Empty file".into();
        }
    }
    let default_mode = meta::mode_string(0o666 & !umask);
    let final_mode = mode.clone().unwrap_or(default_mode);
    perms::check_perms(
        path,
        &mut ret,
        Wanted {
            mode: Some(&final_mode),
            ..wanted
        },
        false,
    );
    if ret.comment.is_empty() {
        ret.comment = format!("File {name} updated");
    } else if ret.changes.is_empty() && ret.result == Some(true) {
        ret.comment = format!("File {name} is in the correct state");
    }
    Ok(ret)
}

/// Salt's `mod_run_check_cmd`: runs `<check_cmd> <tempfile>` on the new
/// content before it replaces the file; a failure leaves the file alone and
/// returns Salt's failed result (with `skip_watch`).
fn run_check_cmd(
    call: &StateCall<'_>,
    name: &str,
    cmd: &str,
    data: Content<'_>,
) -> Result<Option<StateResult>, StateError> {
    let suffix = opt_str(call, "tmp_ext")?.unwrap_or_default();
    let dir = opt_str(call, "tmp_dir")?
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let mut tmp = tempfile::Builder::new()
        .prefix("__salt.tmp.")
        .suffix(&suffix)
        .tempfile_in(&dir)
        .map_err(|e| {
            StateError::Other(format!(
                "Unable to create a temp file in {} for check_cmd: {e}",
                dir.display()
            ))
        })?;
    data.write_into(&mut tmp).map_err(|e| {
        StateError::Other(format!("Unable to write the temp file for check_cmd: {e}"))
    })?;
    let full = format!("{cmd} {}", tmp.path().display());
    let opts = halite_state::CmdOptions {
        python_shell: true,
        ..Default::default()
    };
    let out = call
        .env
        .run_cmd(&full, &opts)
        .map_err(|e| StateError::Other(format!("Unable to run check_cmd '{full}': {e}")))?;
    if out.retcode == 0 {
        return Ok(None);
    }
    let mut ret = StateResult::fail(name, "check_cmd execution failed");
    if !out.stdout.is_empty() {
        ret.comment.push('\n');
        ret.comment.push_str(&out.stdout);
    }
    if !out.stderr.is_empty() {
        ret.comment.push('\n');
        ret.comment.push_str(&out.stderr);
    }
    ret.extra.insert("skip_watch".into(), json!(true));
    Ok(Some(ret))
}

/// Test mode: what `file.managed` would change (Salt's `check_file_meta`).
fn predict(
    path: &Path,
    name: &str,
    data: Option<Content<'_>>,
    wanted: Wanted<'_>,
    show_changes: bool,
    mut ret: StateResult,
) -> StateResult {
    let mut changes = Map::new();
    match fs::File::open(path) {
        Err(_) => {
            changes.insert("newfile".into(), json!(name));
        }
        Ok(_) => {
            if let Some(data) = data {
                let diff = data.diff_from(path);
                if !diff.is_empty() {
                    changes.insert("diff".into(), json!(diff));
                }
            }
            if let Ok(cur) = meta::ownership(path, wanted.follow_symlinks) {
                if let Some(u) = wanted
                    .user
                    .filter(|u| !meta::same_owner(u, &cur.user, cur.uid))
                {
                    changes.insert("user".into(), json!(u));
                }
                if let Some(g) = wanted
                    .group
                    .filter(|g| !meta::same_owner(g, &cur.group, cur.gid))
                {
                    changes.insert("group".into(), json!(g));
                }
                if let Some(m) = wanted.mode.filter(|m| *m != cur.mode) {
                    changes.insert("mode".into(), json!(m));
                }
            }
        }
    }
    if changes.is_empty() {
        ret.result = Some(true);
        ret.comment = format!("The file {name} is in the correct state");
    } else {
        ret.result = None;
        ret.comment = format!(
            "The file {name} is set to be changed\nNote: No changes made, actual changes may\nbe different due to other states."
        );
        if !show_changes && changes.contains_key("diff") {
            changes.insert("diff".into(), json!("<show_changes=False>"));
        }
    }
    ret.changes = changes;
    ret
}
