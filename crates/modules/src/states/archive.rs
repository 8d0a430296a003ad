//! Salt's `archive` state module: `archive.extracted` unpacks a tar (plain,
//! gzip, bzip2, xz) or zip archive into a directory, idempotently, with
//! Salt 3008's arguments, comments and `changes` shapes.
//!
//! Archives are read natively (no `tar`/`unzip` command), and every member
//! is checked before anything is written: absolute names, `..` escapes,
//! links pointing outside the destination and device files make the state
//! fail with nothing extracted (what Python's `tarfile` "data" filter,
//! which Salt uses, refuses too). While writing, no path component is
//! followed out of the destination, so a symlink planted by an earlier
//! member or already on disk cannot redirect a later member.

use std::collections::{BTreeSet, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use halite_state::{
    strip_salt_url, StateCall, StateError, StateFunction, StateResult, StateTable, Value,
};
use serde_json::json;

use crate::exec::file::expand_user;
use crate::exec::file::meta::{self, HashType};

/// The module's table: `archive.extracted`.
pub const MODULE: StateTable = StateTable {
    name: "archive",
    functions: &[StateFunction::new("extracted", extracted)],
};

/// The archive formats `archive.extracted` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Tar,
    Zip,
}

impl Format {
    fn as_str(self) -> &'static str {
        match self {
            Format::Tar => "tar",
            Format::Zip => "zip",
        }
    }
}

/// Salt's `guess_archive_type`: the format from a file name's extension.
fn guess_format(name: &str) -> Option<&'static str> {
    let name = name.to_ascii_lowercase();
    const TAR: &[&str] = &[
        "tar", "tar.gz", "tgz", "tar.bz2", "tbz2", "tbz", "tar.xz", "txz", "tar.lzma", "tlz",
    ];
    if TAR.iter().any(|e| name.ends_with(&format!(".{e}"))) {
        return Some("tar");
    }
    ["zip", "rar"]
        .into_iter()
        .find(|e| name.ends_with(&format!(".{e}")))
}

/// What one archive member is.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Dir,
    File,
    /// A symbolic link to the given target (as stored).
    Symlink(String),
    /// A hard link to another member (its normalised relative path).
    Hardlink(PathBuf),
}

/// One archive member, validated: `rel` is inside the destination.
#[derive(Debug, Clone)]
struct Member {
    /// The name as Salt reports it in `extracted_files` (tar: Python's
    /// `getnames()`, no trailing slash; zip: `namelist()`).
    name: String,
    /// The normalised path below the destination (after `--strip-components`).
    rel: PathBuf,
    kind: Kind,
    mode: Option<u32>,
    mtime: Option<u64>,
    /// Position in the archive's entry stream (zip index, tar entry number).
    index: usize,
}

/// Salt's verbose `archive.list`: what the archive holds, by type, with the
/// top level split out (for `enforce_toplevel`, `clean` and ownership).
#[derive(Debug, Default)]
struct Listing {
    dirs: Vec<String>,
    files: Vec<String>,
    links: Vec<String>,
    top_level_dirs: Vec<String>,
    top_level_files: Vec<String>,
    top_level_links: Vec<String>,
}

impl Listing {
    fn new(members: &[Member]) -> Self {
        let mut dirs = BTreeSet::new();
        let mut files = BTreeSet::new();
        let mut links = BTreeSet::new();
        for m in members {
            let rel = rel_str(&m.rel);
            if rel.is_empty() {
                continue;
            }
            // Parent directories count even when the archive has no entry
            // for them (Salt does this for zip; for tar its common-prefix
            // rule covers the single-top-level case).
            let mut parent = m.rel.parent();
            while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
                dirs.insert(format!("{}/", rel_str(p)));
                parent = p.parent();
            }
            match m.kind {
                Kind::Dir => {
                    dirs.insert(format!("{rel}/"));
                }
                Kind::Symlink(_) => {
                    links.insert(rel);
                }
                Kind::File | Kind::Hardlink(_) => {
                    files.insert(rel);
                }
            }
        }
        let dirs: Vec<String> = dirs.into_iter().collect();
        let files: Vec<String> = files.into_iter().collect();
        let links: Vec<String> = links.into_iter().collect();
        let top_level_dirs = dirs
            .iter()
            .filter(|d| d.matches('/').count() == 1)
            .cloned()
            .collect();
        let top = |v: &[String]| v.iter().filter(|x| !x.contains('/')).cloned().collect();
        Listing {
            top_level_files: top(&files),
            top_level_links: top(&links),
            top_level_dirs,
            dirs,
            files,
            links,
        }
    }
}

fn rel_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Why a member may not be extracted.
fn refuse(source: &str, member: &str, why: impl std::fmt::Display) -> String {
    format!("Refusing to extract {source}: member '{member}' {why}. Nothing was extracted.")
}

/// Normalises an archive path lexically below a root: `None` when it is
/// absolute or climbs out with `..` (the rule shared with SPM).
use halite_salt_rules::archive_path::resolve_below as normalize;

/// Drops the first `n` path components (tar's `--strip-components`);
/// `None` when nothing is left.
fn strip_components(name: &str, n: usize) -> Option<String> {
    if n == 0 {
        return Some(name.to_string());
    }
    let parts: Vec<&str> = name
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    (parts.len() > n).then(|| parts[n..].join("/"))
}

/// Builds a checked member from a raw entry; `Ok(None)` when
/// `--strip-components` removes it.
fn checked_member(
    source: &str,
    dest: &str,
    raw: RawMember,
    strip: usize,
) -> Result<Option<Member>, String> {
    if raw.name.starts_with('/') {
        return Err(refuse(source, &raw.name, "has an absolute path"));
    }
    let Some(stripped) = strip_components(&raw.name, strip) else {
        return Ok(None);
    };
    let parts = normalize(&[], &stripped).ok_or_else(|| {
        refuse(
            source,
            &raw.name,
            format!("would be written outside {dest}"),
        )
    })?;
    if parts.is_empty() && raw.kind != RawKind::Dir {
        return Err(refuse(source, &raw.name, "does not name a file"));
    }
    let kind = match raw.kind {
        RawKind::Dir => Kind::Dir,
        RawKind::File => Kind::File,
        RawKind::Symlink(target) => {
            if target.starts_with('/') {
                return Err(refuse(
                    source,
                    &raw.name,
                    format!("is a symlink to an absolute path ({target})"),
                ));
            }
            let dir = &parts[..parts.len().saturating_sub(1)];
            if normalize(dir, &target).is_none() {
                return Err(refuse(
                    source,
                    &raw.name,
                    format!("is a symlink pointing outside {dest} ({target})"),
                ));
            }
            Kind::Symlink(target)
        }
        RawKind::Hardlink(target) => {
            let target_parts = strip_components(&target, strip)
                .and_then(|t| normalize(&[], &t))
                .filter(|p| !p.is_empty())
                .ok_or_else(|| {
                    refuse(
                        source,
                        &raw.name,
                        format!("is a hard link pointing outside {dest} ({target})"),
                    )
                })?;
            Kind::Hardlink(target_parts.iter().collect())
        }
        RawKind::Special(what) => {
            return Err(refuse(
                source,
                &raw.name,
                format!("is a special file ({what})"),
            ))
        }
    };
    Ok(Some(Member {
        name: raw.name,
        rel: parts.iter().collect(),
        kind,
        mode: raw.mode,
        mtime: raw.mtime,
        index: raw.index,
    }))
}

#[derive(Debug, Clone, PartialEq)]
enum RawKind {
    Dir,
    File,
    Symlink(String),
    Hardlink(String),
    Special(String),
}

/// An entry as read from the archive, before any check.
struct RawMember {
    name: String,
    kind: RawKind,
    mode: Option<u32>,
    mtime: Option<u64>,
    index: usize,
}

/// Opens a tar archive, detecting gzip/bzip2/xz compression from the
/// content (as Python's `tarfile.open(mode="r")` does).
fn open_tar(path: &Path) -> io::Result<tar::Archive<Box<dyn Read>>> {
    let mut f = File::open(path)?;
    let mut magic = [0u8; 6];
    let mut got = 0;
    while got < magic.len() {
        match f.read(&mut magic[got..])? {
            0 => break,
            n => got += n,
        }
    }
    f.seek(SeekFrom::Start(0))?;
    let magic = &magic[..got];
    let inner = BufReader::new(f);
    let reader: Box<dyn Read> = if magic.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::MultiGzDecoder::new(inner))
    } else if magic.starts_with(b"BZh") {
        Box::new(bzip2::read::MultiBzDecoder::new(inner))
    } else if magic.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Box::new(lzma_rust2::XzReader::new(inner, true))
    } else {
        Box::new(inner)
    };
    Ok(tar::Archive::new(reader))
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Every entry of a tar archive.
fn tar_entries(path: &Path) -> io::Result<Vec<RawMember>> {
    use tar::EntryType as T;
    let mut ar = open_tar(path)?;
    let mut out = Vec::new();
    for (index, entry) in ar.entries()?.enumerate() {
        let entry = entry?;
        let header = entry.header();
        let raw_name = lossy(&entry.path_bytes());
        let link = || {
            entry
                .link_name_bytes()
                .map(|b| lossy(&b))
                .unwrap_or_default()
        };
        let et = header.entry_type();
        let kind = match et {
            T::Directory => RawKind::Dir,
            T::Regular | T::Continuous | T::GNUSparse if raw_name.ends_with('/') => RawKind::Dir,
            T::Regular | T::Continuous | T::GNUSparse => RawKind::File,
            T::Symlink => RawKind::Symlink(link()),
            T::Link => RawKind::Hardlink(link()),
            T::XGlobalHeader | T::XHeader | T::GNULongName | T::GNULongLink => continue,
            T::Char => RawKind::Special("character device".into()),
            T::Block => RawKind::Special("block device".into()),
            T::Fifo => RawKind::Special("fifo".into()),
            other => RawKind::Special(format!("tar entry type {:?}", other.as_byte() as char)),
        };
        let name = if kind == RawKind::Dir {
            let t = raw_name.trim_end_matches('/');
            if t.is_empty() {
                raw_name.clone()
            } else {
                t.to_string()
            }
        } else {
            raw_name
        };
        out.push(RawMember {
            name,
            kind,
            mode: header.mode().ok(),
            mtime: header.mtime().ok(),
            index,
        });
    }
    Ok(out)
}

fn open_zip(path: &Path) -> Result<zip::ZipArchive<BufReader<File>>, String> {
    let f = File::open(path).map_err(|e| format!("Unable to open {}: {e}", path.display()))?;
    zip::ZipArchive::new(BufReader::new(f)).map_err(|e| format!("not a ZIP file ({e})"))
}

/// Every entry of a zip archive, and whether any is encrypted.
fn zip_entries(path: &Path) -> Result<(Vec<RawMember>, bool), String> {
    let mut z = open_zip(path)?;
    let mut out = Vec::new();
    let mut encrypted = false;
    for index in 0..z.len() {
        let (name, mode, is_link, is_dir) = {
            let e = z.by_index_raw(index).map_err(|e| e.to_string())?;
            encrypted |= e.encrypted();
            let name = e.name().map_err(|e| e.to_string())?.into_owned();
            (name, e.unix_mode(), e.is_symlink(), e.is_dir())
        };
        let kind = if is_link && !encrypted {
            let mut target = String::new();
            z.by_index(index)
                .and_then(|mut e| e.read_to_string(&mut target).map_err(Into::into))
                .map_err(|e| format!("Unable to read the link target of '{name}': {e}"))?;
            RawKind::Symlink(target)
        } else if is_dir || mode.is_some_and(|m| m & 0o170000 == 0o040000) {
            RawKind::Dir
        } else {
            RawKind::File
        };
        out.push(RawMember {
            name,
            kind,
            mode,
            mtime: None,
            index,
        });
    }
    Ok((out, encrypted))
}

/// Creates (or checks) every parent directory of `rel` below `root`
/// without following a symlink out of `root`, and clears a non-directory
/// already at the final path so it can be written afresh. `root` must be
/// canonical. Returns the full path of `rel`.
fn prepare(root: &Path, rel: &Path, is_dir: bool) -> Result<PathBuf, String> {
    let mut cur = root.to_path_buf();
    let comps: Vec<_> = rel.components().collect();
    for (i, c) in comps.iter().enumerate() {
        cur.push(c);
        let last = i + 1 == comps.len();
        match fs::symlink_metadata(&cur) {
            Ok(md) if md.is_dir() => {}
            Ok(md) if md.file_type().is_symlink() && (!last || is_dir) => {
                let real = fs::canonicalize(&cur)
                    .map_err(|e| format!("Unable to resolve {}: {e}", cur.display()))?;
                if !real.starts_with(root) || !real.is_dir() {
                    return Err(format!(
                        "{} is a symlink leading outside {} or not to a directory; refusing to extract through it",
                        cur.display(),
                        root.display()
                    ));
                }
            }
            Ok(_) if last && !is_dir => {
                fs::remove_file(&cur)
                    .map_err(|e| format!("Unable to replace {}: {e}", cur.display()))?;
            }
            Ok(_) => {
                return Err(format!("{} exists and is not a directory", cur.display()));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if !last || is_dir {
                    fs::create_dir(&cur)
                        .map_err(|e| format!("Unable to create {}: {e}", cur.display()))?;
                }
            }
            Err(e) => return Err(format!("Unable to check {}: {e}", cur.display())),
        }
    }
    if comps.is_empty() {
        return Ok(root.to_path_buf());
    }
    Ok(cur)
}

/// Writes a regular file member (never through an existing path).
fn write_file(path: &Path, data: &mut dyn Read, mode: u32) -> Result<(), String> {
    let ctx = |e: io::Error| format!("Unable to write {}: {e}", path.display());
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(ctx)?;
    io::copy(data, &mut f).map_err(ctx)?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(ctx)
}

/// The mode Python's tarfile "data" filter gives a regular file: no
/// setuid/setgid/sticky, no group/other write, always owner read/write,
/// and no group/other execute unless the owner has it.
fn tar_file_mode(mode: Option<u32>) -> u32 {
    let mut m = (mode.unwrap_or(0o644) & 0o755) | 0o600;
    if m & 0o100 == 0 {
        m &= !0o011;
    }
    m
}

/// Extracts one checked member.
fn place(root: &Path, m: &Member, data: &mut dyn Read, file_mode: u32) -> Result<(), String> {
    match &m.kind {
        Kind::Dir => prepare(root, &m.rel, true).map(|_| ()),
        Kind::File => {
            let path = prepare(root, &m.rel, false)?;
            write_file(&path, data, file_mode)
        }
        Kind::Symlink(target) => {
            let path = prepare(root, &m.rel, false)?;
            std::os::unix::fs::symlink(target, &path)
                .map_err(|e| format!("Unable to create symlink {}: {e}", path.display()))
        }
        Kind::Hardlink(target) => {
            let path = prepare(root, &m.rel, false)?;
            let src = root.join(target);
            let real = fs::canonicalize(&src).map_err(|e| {
                format!(
                    "Unable to link {} to {}: {e}",
                    path.display(),
                    src.display()
                )
            })?;
            if !real.starts_with(root) {
                return Err(format!(
                    "{} leads outside {}",
                    src.display(),
                    root.display()
                ));
            }
            fs::hard_link(&real, &path).map_err(|e| {
                format!(
                    "Unable to link {} to {}: {e}",
                    path.display(),
                    src.display()
                )
            })
        }
    }
}

/// After extraction: every symlink the archive created must resolve inside
/// `root` (a chain of links each lexically inside can still lead out, as
/// `a/b -> ..` plus `s -> a/b/..`). One that leads out is removed and the
/// state fails, as Python's tarfile "data" filter refuses it.
fn check_links(root: &Path, members: &[Member]) -> Result<(), String> {
    for m in members {
        let Kind::Symlink(target) = &m.kind else {
            continue;
        };
        let path = root.join(&m.rel);
        if let Ok(real) = fs::canonicalize(&path) {
            if !real.starts_with(root) {
                let _ = fs::remove_file(&path);
                return Err(format!(
                    "member '{}' is a symlink leading outside {} ({target} resolves to {}); it was removed",
                    m.name,
                    root.display(),
                    real.display()
                ));
            }
        }
    }
    Ok(())
}

/// Extracts the checked members of a tar archive below `root`.
fn extract_tar(archive: &Path, root: &Path, members: &[Member]) -> Result<(), String> {
    let by_index: HashMap<usize, &Member> = members.iter().map(|m| (m.index, m)).collect();
    let mut ar =
        open_tar(archive).map_err(|e| format!("Unable to read {}: {e}", archive.display()))?;
    let entries = ar.entries().map_err(|e| e.to_string())?;
    let mut dir_times = Vec::new();
    for (index, entry) in entries.enumerate() {
        let mut entry = entry.map_err(|e| format!("Unable to read {}: {e}", archive.display()))?;
        let Some(m) = by_index.get(&index) else {
            continue;
        };
        place(root, m, &mut entry, tar_file_mode(m.mode))?;
        if let Some(t) = m.mtime {
            let path = root.join(&m.rel);
            let ft = filetime::FileTime::from_unix_time(t as i64, 0);
            match m.kind {
                Kind::Dir => dir_times.push((path, ft)),
                Kind::File => {
                    let _ = filetime::set_file_mtime(&path, ft);
                }
                _ => {}
            }
        }
    }
    for (path, ft) in dir_times.into_iter().rev() {
        let _ = filetime::set_file_mtime(&path, ft);
    }
    Ok(())
}

/// Extracts the checked members of a zip archive below `root`, applying
/// the stored permissions as Salt's `extract_perms` does.
fn extract_zip(archive: &Path, root: &Path, members: &[Member]) -> Result<(), String> {
    let mut z = open_zip(archive)?;
    let umask = meta::umask();
    for m in members {
        let mut entry = z
            .by_index(m.index)
            .map_err(|e| format!("Exception encountered unpacking zipfile: {e}"))?;
        let mode = match m.mode.map(|x| x & 0o777) {
            Some(x) if x != 0 => x,
            _ => 0o666 & !umask,
        };
        place(root, m, &mut entry, mode)?;
        if m.kind == Kind::Dir {
            if let Some(x) = m.mode.map(|x| x & 0o777).filter(|x| *x != 0) {
                let _ =
                    fs::set_permissions(root.join(&m.rel), fs::Permissions::from_mode(x | 0o700));
            }
        }
    }
    Ok(())
}

/// The arguments `archive.extracted` reads, parsed once.
struct Args {
    name: String,
    dest: String,
    source: Value,
    source_hash: Option<String>,
    source_hash_name: Option<String>,
    skip_verify: bool,
    archive_format: Option<String>,
    options: Option<String>,
    overwrite: bool,
    clean: bool,
    clean_parent: bool,
    force: bool,
    user: Option<String>,
    group: Option<String>,
    if_missing: Option<String>,
    enforce_toplevel: bool,
    enforce_ownership_on: Option<String>,
    trim_output: Option<usize>,
    keep_source: bool,
    password: Option<String>,
}

fn opt(call: &StateCall<'_>, key: &str) -> Result<Option<String>, StateError> {
    Ok(call.arg_str(key)?.filter(|s| !s.is_empty()))
}

fn owner(call: &StateCall<'_>, key: &str) -> Result<Option<String>, StateError> {
    match call.arg(key) {
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        _ => opt(call, key),
    }
}

/// `archive.extracted`.
pub fn extracted(call: &StateCall<'_>) -> Result<StateResult, StateError> {
    let mut ret = StateResult::new(call.name(), Some(false));
    let mut warnings: Vec<String> = Vec::new();
    let out = run(call, &mut ret, &mut warnings);
    if !warnings.is_empty() {
        ret.extra.insert("warnings".into(), json!(warnings));
    }
    out.map(|()| ret)
}

/// Fails `ret` with `comment` (Salt's early `return ret` with result False).
fn fail(ret: &mut StateResult, comment: impl Into<String>) -> Result<(), StateError> {
    ret.result = Some(false);
    ret.comment = comment.into();
    Ok(())
}

fn run(
    call: &StateCall<'_>,
    ret: &mut StateResult,
    warnings: &mut Vec<String>,
) -> Result<(), StateError> {
    let test = call.test;
    if call.arg_bool("skip_files_list_verify", false) && call.arg_bool("skip_verify", false) {
        return fail(
            ret,
            "Only one of \"skip_files_list_verify\" and \"skip_verify\" can be set to True",
        );
    }
    let keep_source = match (call.chunk.get("keep_source"), call.chunk.get("keep")) {
        (Some(k), Some(_)) => {
            warnings.push("Both 'keep_source' and 'keep' were used. Since these both do the same thing, 'keep' was ignored.".into());
            halite_state::truthy(k)
        }
        (Some(k), None) | (None, Some(k)) => halite_state::truthy(k),
        (None, None) => true,
    };
    let raw_name = expand_user(call.name());
    if raw_name.is_empty() {
        return fail(ret, "Name of the directory path needs to be specified");
    }
    if !raw_name.starts_with('/') {
        return fail(ret, format!("{raw_name} is not an absolute path"));
    }
    let name = raw_name.trim_end_matches('/').to_string();
    if Path::new(&name).is_file() {
        return fail(ret, format!("{name} exists and is not a directory"));
    }
    let dest = format!("{name}/");
    let Some(source) = call.arg("source").cloned() else {
        return Err(StateError::MissingArg(
            "source".into(),
            "archive.extracted".into(),
        ));
    };
    let args = Args {
        name,
        dest,
        source,
        source_hash: opt(call, "source_hash")?,
        source_hash_name: opt(call, "source_hash_name")?,
        skip_verify: call.arg_bool("skip_verify", false),
        archive_format: opt(call, "archive_format")?,
        options: opt(call, "options")?,
        overwrite: call.arg_bool("overwrite", false),
        clean: call.arg_bool("clean", false),
        clean_parent: call.arg_bool("clean_parent", false),
        force: call.arg_bool("force", false),
        user: owner(call, "user")?,
        group: owner(call, "group")?,
        if_missing: opt(call, "if_missing")?,
        enforce_toplevel: call.arg_bool("enforce_toplevel", true),
        enforce_ownership_on: opt(call, "enforce_ownership_on")?,
        trim_output: match call.arg("trim_output") {
            None | Some(Value::Bool(false)) => None,
            Some(Value::Bool(true)) => Some(100),
            Some(v) => match v
                .as_u64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            {
                Some(0) => None,
                Some(n) => Some(n as usize),
                None => {
                    return fail(
                        ret,
                        "Invalid value for trim_output, must be True/False or an integer",
                    )
                }
            },
        },
        keep_source,
        password: opt(call, "password")?,
    };
    extract(call, &args, test, ret, warnings)
}

/// Whether what is on disk has the type the archive member has.
type TypeCheck = fn(&fs::Metadata) -> bool;

/// A source resolved to a local file.
struct Resolved {
    /// Salt's `source_match`: the URL, or the real path of a local source.
    url: String,
    local: PathBuf,
    is_local: bool,
}

/// Salt's `file.source_list` plus caching: the first source that exists.
fn resolve_source(call: &StateCall<'_>, source: &Value, saltenv: &str) -> Result<Resolved, String> {
    let candidates =
        crate::states::file::remote::source_candidates(source, false).ok_or_else(|| {
            format!(
                "Invalid source \"{}\"",
                halite_salt_rules::pyfmt::str_json(source)
            )
        })?;
    for url in &candidates {
        if let Some((path, env)) = strip_salt_url(url) {
            let found = call
                .env
                .file_client()
                .cache_file(path, env.unwrap_or(saltenv))
                .map_err(|e| format!("Failed to cache {url}: {e}"))?;
            if let Some(local) = found {
                return Ok(Resolved {
                    url: url.clone(),
                    local,
                    is_local: false,
                });
            }
            continue;
        }
        if crate::fetch::is_remote(url) {
            let cfg = crate::fetch::FetchConfig::from_opts(call.env.opts());
            if candidates.len() > 1 && !crate::fetch::exists(&cfg, url) {
                continue;
            }
            let local = crate::states::file::remote::cached_remote(
                call,
                url,
                saltenv,
                call.arg("source_hash").and_then(Value::as_str),
                call.arg("source_hash_name").and_then(Value::as_str),
                call.arg_bool("skip_verify", false),
            )?;
            return Ok(Resolved {
                url: url.clone(),
                local,
                is_local: false,
            });
        }
        let local = expand_user(url.strip_prefix("file://").unwrap_or(url));
        if !local.starts_with('/') {
            return Err(if url.contains("://") {
                format!("Unable to fetch {url}: only salt://, file:// and local sources are supported by halite")
            } else {
                format!("Invalid source '{url}': give a salt:// URL or an absolute path")
            });
        }
        let real = fs::canonicalize(&local).unwrap_or_else(|_| PathBuf::from(&local));
        if real.is_file() {
            return Ok(Resolved {
                url: real.display().to_string(),
                local: real,
                is_local: true,
            });
        }
        if candidates.len() == 1 {
            return Err(format!("Source file '{}' does not exist", real.display()));
        }
    }
    Err(match candidates.as_slice() {
        [one] => format!("Source file {one} not found in saltenv '{saltenv}'"),
        _ => format!(
            "none of the specified sources were found: {}",
            candidates.join(", ")
        ),
    })
}

/// Reads `<type>=<hex>` or a bare hex digest.
fn parse_hash(spec: &str) -> Option<(HashType, String)> {
    let spec = spec.trim();
    let (kind, hex) = match spec.split_once('=') {
        Some((k, h)) => (HashType::parse(k).ok()?, h.trim().to_ascii_lowercase()),
        None => {
            let h = spec.to_ascii_lowercase();
            (HashType::from_hex_len(h.len())?, h)
        }
    };
    let ok = HashType::from_hex_len(hex.len()) == Some(kind)
        && hex.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then_some((kind, hex))
}

/// Salt's `file.get_source_sum`: a hash string, or a hash file (`salt://`,
/// `file://`, absolute path) searched for the line naming the archive.
fn source_sum(
    call: &StateCall<'_>,
    spec: &str,
    hash_name: Option<&str>,
    source_url: &str,
    saltenv: &str,
) -> Result<(HashType, String), String> {
    let is_file = spec.starts_with("salt://")
        || spec.starts_with("file://")
        || spec.starts_with('/')
        || crate::fetch::is_remote(spec);
    if !is_file {
        return parse_hash(spec).ok_or_else(|| {
            format!("Invalid source_hash '{spec}': give <hash_type>=<hex digest> (e.g. sha256=...) or a bare hex digest, or a salt:// or absolute path to a hash file")
        });
    }
    let text = if let Some((path, env)) = strip_salt_url(spec) {
        call.env
            .file_client()
            .read_text(path, env.unwrap_or(saltenv))
            .map_err(|e| format!("Unable to read source_hash file {spec}: {e}"))?
            .ok_or_else(|| format!("Source hash file {spec} not found in saltenv '{saltenv}'"))?
    } else if crate::fetch::is_remote(spec) {
        let local =
            crate::fetch::resolve(call.env.file_client(), call.env.opts(), spec, saltenv, None)?
                .ok_or_else(|| format!("Source hash file {spec} not found"))?;
        fs::read_to_string(&local)
            .map_err(|e| format!("Unable to read source_hash file {spec}: {e}"))?
    } else {
        let p = spec.strip_prefix("file://").unwrap_or(spec);
        fs::read_to_string(p).map_err(|e| format!("Unable to read source_hash file {spec}: {e}"))?
    };
    let base = source_url
        .split('?')
        .next()
        .unwrap_or(source_url)
        .rsplit('/')
        .next()
        .unwrap_or(source_url);
    let wanted = hash_name.unwrap_or(base);
    let mut first = None;
    for line in text.lines() {
        let found = line
            .split_whitespace()
            .find_map(|tok| parse_hash(tok.trim_start_matches('*')));
        let Some(found) = found else { continue };
        if line.split_whitespace().any(|t| {
            let t = t.trim_start_matches('*');
            t == wanted || t.rsplit('/').next() == Some(wanted)
        }) {
            return Ok(found);
        }
        first.get_or_insert(found);
    }
    first.ok_or_else(|| format!("Source hash file {spec} contains no valid hash for {base}"))
}

/// The list of members, or Salt-style failure text.
fn list_members(
    resolved: &Resolved,
    format: Format,
    dest: &str,
    strip: usize,
    has_password: bool,
) -> Result<Vec<Member>, String> {
    let src = &resolved.url;
    let raws = match format {
        Format::Tar => tar_entries(&resolved.local).map_err(|e| {
            format!("Unable to list contents of {src}: {e}. The archive may be corrupt, or not a tar archive compressed with gzip, bzip2 or xz.")
        })?,
        Format::Zip => {
            let (raws, encrypted) =
                zip_entries(&resolved.local).map_err(|e| format!("{src} is {e}"))?;
            if encrypted && !has_password {
                return Err(format!("Archive {src} is password-protected, but no password was specified. Please set the 'password' argument."));
            }
            raws
        }
    };
    let mut out = Vec::with_capacity(raws.len());
    for raw in raws {
        if let Some(m) = checked_member(src, dest, raw, strip)? {
            out.push(m);
        }
    }
    Ok(out)
}

/// The `--strip-components N` Salt reads from tar `options`.
fn strip_from_options(options: &str) -> Option<usize> {
    let re = regex::Regex::new(r#"--strip(?:-components)?(?:\s+|=)["']?(\d+)["']?"#).ok()?;
    re.captures(options)?.get(1)?.as_str().parse().ok()
}

/// `archive.extracted` once its arguments are read, phase by phase:
/// [`check_targets`] (paths, owner), [`resolve_archive`] (source, format,
/// hash, members), [`compare_with_disk`], [`clear_incorrect`] (paths of
/// the wrong type), [`unpack`], [`enforce_ownership`], [`report`].
fn extract(
    call: &StateCall<'_>,
    a: &Args,
    test: bool,
    ret: &mut StateResult,
    warnings: &mut Vec<String>,
) -> Result<(), StateError> {
    let Some((uid, gid)) = check_targets(call, a, ret, warnings)? else {
        return Ok(());
    };
    let Some(archive) = resolve_archive(call, a, ret, warnings)? else {
        return Ok(());
    };
    let Some(mut disk) = compare_with_disk(a, &archive, ret)? else {
        return Ok(());
    };
    if clear_incorrect(a, test, &mut disk, ret)?.is_none() {
        return Ok(());
    }
    let mut unpacked = Unpacked::default();
    if disk.extraction_needed {
        match unpack(a, test, uid, &archive, &disk, ret)? {
            Some(u) => unpacked = u,
            None => return Ok(()),
        }
    }
    let owners = enforce_ownership(a, test, uid, gid, &archive.contents);
    report(a, test, &archive, &disk, &unpacked, &owners, ret);
    if !archive.resolved.is_local && !a.keep_source && !test {
        drop_cached(call, &archive.resolved.local, warnings);
    }
    Ok(())
}

/// The archive to extract, resolved: where it is, what it holds.
struct Archive {
    resolved: Resolved,
    /// Salt's `source_match`, as comments name the source.
    src: String,
    format: Format,
    /// The `source_hash` to verify before extracting.
    hash: Option<(HashType, String)>,
    members: Vec<Member>,
    contents: Listing,
}

/// How the destination compares with the archive.
struct DiskState {
    extraction_needed: bool,
    /// Some member is absent (the comments then say so).
    contents_missing: bool,
    /// Members on disk with the wrong type (a file where a directory goes...).
    incorrect: Vec<String>,
}

/// The uid and gid `user`/`group` name, when given.
type Owner = (Option<u32>, Option<u32>);

/// What [`unpack`] did.
#[derive(Default)]
struct Unpacked {
    created_destdir: bool,
    /// The members extracted (trimmed to `trim_output`).
    files: Vec<String>,
}

/// What [`enforce_ownership`] found.
struct Ownership {
    missing: Vec<String>,
    failed: Vec<String>,
    changed: bool,
}

/// The check phase for the destination side: `if_missing` and
/// `enforce_ownership_on` paths, `if_missing` already there, the owner's
/// ids, unsupported options. `None` when the state is decided (in `ret`).
fn check_targets(
    call: &StateCall<'_>,
    a: &Args,
    ret: &mut StateResult,
    warnings: &mut Vec<String>,
) -> Result<Option<Owner>, StateError> {
    let name = &a.dest;
    if a.if_missing.as_deref().is_some_and(|p| !p.starts_with('/')) {
        return fail(ret, "Value for 'if_missing' is not an absolute path").map(|()| None);
    }
    if let Some(on) = &a.enforce_ownership_on {
        if !on.starts_with('/') {
            return fail(
                ret,
                "Value for 'enforce_ownership_on' is not an absolute path",
            )
            .map(|()| None);
        }
        let abs = |p: &str| normalize(&[], p.trim_start_matches('/'));
        let base = abs(name).unwrap_or_default();
        if abs(on).is_none_or(|p| !p.starts_with(&base)) {
            return fail(
                ret,
                format!("Value for 'enforce_ownership_on' must be within {name}"),
            )
            .map(|()| None);
        }
    }
    if let Some(p) = a.if_missing.as_deref().filter(|p| Path::new(p).exists()) {
        ret.result = Some(true);
        ret.comment = format!("Path {p} exists");
        return Ok(None);
    }
    let uid = match &a.user {
        Some(u) => match meta::user_to_uid(u) {
            Ok(id) => Some(id),
            Err(_) => return fail(ret, format!("User {u} does not exist")).map(|()| None),
        },
        None => None,
    };
    let gid = match &a.group {
        Some(g) => match meta::group_to_gid(g) {
            Ok(id) => Some(id),
            Err(_) => return fail(ret, format!("Group {g} does not exist")).map(|()| None),
        },
        None => None,
    };
    if call.arg_bool("source_hash_update", false) {
        if a.source_hash.is_none() {
            warnings.push("The 'source_hash_update' argument is ignored when 'source_hash' is not also specified.".into());
        } else {
            warnings.push("'source_hash_update' is not supported by halite and was ignored: the files list decides whether to extract (set 'overwrite' to force it)".into());
        }
    }
    if call.arg("signature").is_some() || call.arg("source_hash_sig").is_some() {
        return fail(ret, "Signature verification ('signature', 'source_hash_sig') is not supported by halite's archive.extracted; verify the archive with 'source_hash' instead").map(|()| None);
    }
    Ok(Some((uid, gid)))
}

/// The resolve phase: the source cached, its format, options, hash and
/// members, and the top-level and `clean` checks on them.
fn resolve_archive(
    call: &StateCall<'_>,
    a: &Args,
    ret: &mut StateResult,
    warnings: &mut Vec<String>,
) -> Result<Option<Archive>, StateError> {
    let name = &a.dest;
    let saltenv = match call.chunk.env() {
        "" => "base",
        e => e,
    };
    if let (true, Some(url)) = (
        call.test,
        crate::states::file::remote::first_is_remote(&a.source),
    ) {
        ret.result = None;
        ret.comment = format!("Archive {url} would be cached (if necessary) and checked to discover if extraction is needed");
        return Ok(None);
    }
    let resolved = match resolve_source(call, &a.source, saltenv) {
        Ok(r) => r,
        Err(e) => return fail(ret, e).map(|()| None),
    };
    let src = resolved.url.clone();
    let valid = "tar, rar, zip";
    let format_name = match &a.archive_format {
        Some(f) => f.to_ascii_lowercase(),
        None => {
            let path = src.split('?').next().unwrap_or(&src);
            match guess_format(path) {
                Some(f) => f.to_string(),
                None => return fail(ret, format!("Could not guess archive_format from the value of the 'source' argument. Please set this archive_format to one of the following: {valid}")).map(|()| None),
            }
        }
    };
    let format = match format_name.as_str() {
        "tar" => Format::Tar,
        "zip" => Format::Zip,
        "rar" => return fail(ret, "archive_format 'rar' is not supported by halite; repack the archive as tar or zip").map(|()| None),
        other => return fail(ret, format!("Invalid archive_format '{other}'. Either set it to a supported value ({valid}) or remove this argument and the archive format will be guessed based on file extension.")).map(|()| None),
    };
    if a.password.is_some() {
        if format != Format::Zip {
            return fail(
                ret,
                "The 'password' argument is only supported for zip archives",
            )
            .map(|()| None);
        }
        return fail(
            ret,
            "Password-protected zip archives are not supported by halite's archive.extracted",
        )
        .map(|()| None);
    }
    let mut strip = 0;
    if let Some(options) = &a.options {
        strip = match format {
            Format::Tar => strip_from_options(options).unwrap_or(0),
            Format::Zip => 0,
        };
        let honoured = if strip > 0 {
            " except --strip-components"
        } else {
            ""
        };
        warnings.push(format!("halite extracts archives natively: the 'options' argument ('{options}') was ignored{honoured}"));
    }
    if call.arg("list_options").is_some() || call.arg("use_cmd_unzip").is_some() {
        warnings.push(
            "'list_options' and 'use_cmd_unzip' are ignored: halite reads archives natively".into(),
        );
    }
    let hash = match (&a.source_hash, a.skip_verify) {
        (Some(spec), false) => {
            match source_sum(call, spec, a.source_hash_name.as_deref(), &src, saltenv) {
                Ok(h) => Some(h),
                Err(e) => return fail(ret, e).map(|()| None),
            }
        }
        _ => None,
    };
    let members = match list_members(&resolved, format, name, strip, a.password.is_some()) {
        Ok(m) => m,
        Err(e) => return fail(ret, e).map(|()| None),
    };
    let contents = Listing::new(&members);
    if a.enforce_toplevel
        && (contents.top_level_dirs.len() > 1 || !contents.top_level_files.is_empty())
    {
        return fail(ret, format!(
            "Archive does not have a single top-level directory. To allow this archive to be extracted, set 'enforce_toplevel' to False. To avoid a '{}-bomb' it may also be advisable to set a top-level directory by adding it to the 'name' value (for example, setting 'name' to {}some_dir instead of {}).",
            format.as_str(), name, name
        )).map(|()| None);
    }
    if a.clean && a.clean_parent {
        return fail(
            ret,
            "Only one of 'clean' and 'clean_parent' can be set to True",
        )
        .map(|()| None);
    }

    Ok(Some(Archive {
        resolved,
        src,
        format,
        hash,
        members,
        contents,
    }))
}

/// The check phase for the archive side: which members are missing or of
/// the wrong type on disk.
fn compare_with_disk(
    a: &Args,
    archive: &Archive,
    ret: &mut StateResult,
) -> Result<Option<DiskState>, StateError> {
    let (name, contents) = (&a.dest, &archive.contents);
    let mut extraction_needed = a.overwrite;
    let mut contents_missing = false;
    let mut incorrect = Vec::new();
    let checks: [(&Vec<String>, TypeCheck); 3] = [
        (&contents.dirs, |m| m.is_dir()),
        (&contents.files, |m| {
            !m.is_dir() && !m.file_type().is_symlink()
        }),
        (&contents.links, |m| m.file_type().is_symlink()),
    ];
    for (list, ok) in checks {
        for path in list {
            let full = format!("{name}{}", path.trim_end_matches('/'));
            match fs::symlink_metadata(&full) {
                Ok(md) if !ok(&md) => incorrect.push(path.clone()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    extraction_needed = true;
                    contents_missing = true;
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {}
                Err(e) => return fail(ret, e.to_string()).map(|()| None),
            }
        }
    }
    Ok(Some(DiskState {
        extraction_needed,
        contents_missing,
        incorrect,
    }))
}

/// Members of the wrong type on disk: reported under `test=True`, removed
/// with `force` (or left to `clean`), else the state fails. `None` when
/// the state is decided.
fn clear_incorrect(
    a: &Args,
    test: bool,
    disk: &mut DiskState,
    ret: &mut StateResult,
) -> Result<Option<()>, StateError> {
    let (name, incorrect) = (&a.dest, &disk.incorrect);
    if !incorrect.is_empty() {
        let paths: String = incorrect.iter().map(|x| format!("\n- {x}")).collect();
        let mut comment = format!("The below paths (relative to {name}) exist, but are the incorrect type (file instead of directory, symlink instead of file, etc.).");
        if test && a.clean {
            ret.result = None;
            ret.comment = format!("{comment} Since the 'clean' option is enabled, the destination paths would be cleared and the archive would be extracted.\n{paths}");
            return Ok(None);
        }
        if test && a.clean_parent {
            ret.result = None;
            ret.comment = format!("{comment} Since the 'clean_parent' option is enabled, the destination parent directory would be removed first and then re-created and the archive would be extracted");
            return Ok(None);
        }
        if !a.clean {
            if !a.force {
                comment.push_str(&format!(" To proceed with extraction, set 'force' to True. Note that this will remove these paths before extracting.\n{paths}"));
                return fail(ret, comment).map(|()| None);
            }
            if test {
                ret.result = None;
                ret.comment = format!("{comment} Since 'force' is set, these paths would be removed and the archive would be extracted.\n{paths}");
                return Ok(None);
            }
            let mut errors = Vec::new();
            let mut removed = Vec::new();
            for path in incorrect {
                let full = format!("{name}{path}");
                match rm_rf(Path::new(full.trim_end_matches('/'))) {
                    Ok(()) => {
                        removed.push(json!(full));
                        disk.extraction_needed = true;
                    }
                    Err(e) => errors.push(e.to_string()),
                }
            }
            if !removed.is_empty() {
                ret.changes.insert("removed".into(), json!(removed));
            }
            if !errors.is_empty() {
                let list: String = errors.iter().map(|e| format!("\n- {e}")).collect();
                return fail(ret, format!("One or more paths existed by were the incorrect type (i.e. file instead of directory or vice-versa), but could not be removed. The following errors were observed:\n{list}")).map(|()| None);
            }
        }
    }

    Ok(Some(()))
}

/// Salt's note that some members were absent.
fn explain(disk: &DiskState, comment: &mut String) {
    if disk.contents_missing {
        comment.push_str(", due to absence of one or more files/dirs");
    }
}

/// The act phase: the hash verified, the destination cleaned and created,
/// the members extracted. `None` when the state is decided (test mode
/// reports here).
fn unpack(
    a: &Args,
    test: bool,
    uid: Option<u32>,
    archive: &Archive,
    disk: &DiskState,
    ret: &mut StateResult,
) -> Result<Option<Unpacked>, StateError> {
    let (name, src, contents, members) =
        (&a.dest, &archive.src, &archive.contents, &archive.members);
    let (resolved, format, hash) = (&archive.resolved, archive.format, &archive.hash);
    let mut created_destdir = false;
    if let Some((kind, want)) = &hash {
        let got = meta::file_hash(&resolved.local, *kind)
            .map_err(|e| StateError::Other(e.to_string()))?;
        if &got != want {
            return fail(
                ret,
                format!("{src} does not match the desired source_hash {want}"),
            )
            .map(|()| None);
        }
    }
    if test {
        ret.result = None;
        ret.comment = format!("Archive {src} would be extracted to {name}");
        if a.clean {
            ret.comment.push_str(", after cleaning destination path(s)");
        }
        explain(disk, &mut ret.comment);
        return Ok(None);
    }
    let dest_path = Path::new(&a.name);
    if a.clean_parent {
        if let Err(e) = rm_rf(dest_path) {
            return fail(ret, format!("Unable to remove the directory {name}. The following errors were observed:\n\n- {e}")).map(|()| None);
        }
        ret.changes.insert(
            "removed".into(),
            json!(format!(
                "Directory {name} was removed prior to the extraction"
            )),
        );
    }
    if a.clean {
        let mut errors = Vec::new();
        let mut removed: Vec<Value> = ret
            .changes
            .get("removed")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for path in contents
            .top_level_dirs
            .iter()
            .chain(&contents.top_level_files)
        {
            let full = format!("{name}{path}");
            match rm_rf(Path::new(full.trim_end_matches('/'))) {
                Ok(()) => removed.push(json!(full)),
                Err(e) => errors.push(e.to_string()),
            }
        }
        ret.changes.insert("removed".into(), json!(removed));
        if !errors.is_empty() {
            let list: String = errors.iter().map(|e| format!("\n- {e}")).collect();
            return fail(ret, format!("One or more paths could not be cleaned. The following errors were observed:\n{list}")).map(|()| None);
        }
    }
    if !dest_path.is_dir() {
        if let Err(e) = fs::create_dir_all(dest_path) {
            return fail(ret, format!("Unable to create {name}: {e}")).map(|()| None);
        }
        if uid.is_some() {
            let _ = std::os::unix::fs::chown(dest_path, uid, None);
        }
        created_destdir = true;
    }
    let root = match fs::canonicalize(dest_path) {
        Ok(r) => r,
        Err(e) => return fail(ret, format!("Unable to resolve {name}: {e}")).map(|()| None),
    };
    let done = match format {
        Format::Tar => extract_tar(&resolved.local, &root, members),
        Format::Zip => extract_zip(&resolved.local, &root, members),
    };
    // Runs even after a failure, so no escaping link stays behind.
    let links = check_links(&root, members);
    let done = done.and(links);
    if let Err(e) = done {
        if created_destdir {
            let _ = rm_rf(dest_path);
        }
        return fail(ret, format!("Failed to extract {src} to {name}: {e}")).map(|()| None);
    }
    let mut files: Vec<String> = members.iter().map(|m| m.name.clone()).collect();
    if let Some(n) = a.trim_output {
        files.truncate(n);
    }

    Ok(Some(Unpacked {
        created_destdir,
        files,
    }))
}

/// Ownership of what the archive put there (`user`/`group`, on
/// `enforce_ownership_on` or the top-level members).
fn enforce_ownership(
    a: &Args,
    test: bool,
    uid: Option<u32>,
    gid: Option<u32>,
    contents: &Listing,
) -> Ownership {
    let name = &a.dest;
    // Ownership of what the archive put there.
    let mut enforce_missing = Vec::new();
    let mut enforce_failed = Vec::new();
    let mut ownership_changed = false;
    if uid.is_some() || gid.is_some() {
        let (dirs, singles): (Vec<String>, Vec<String>) = match &a.enforce_ownership_on {
            Some(on) if Path::new(on).is_dir() => (vec![on.clone()], vec![]),
            Some(on) => (vec![], vec![on.clone()]),
            None => (
                contents
                    .top_level_dirs
                    .iter()
                    .map(|d| format!("{name}{}", d.trim_end_matches('/')))
                    .collect(),
                contents
                    .top_level_files
                    .iter()
                    .chain(&contents.top_level_links)
                    .map(|f| format!("{name}{f}"))
                    .collect(),
            ),
        };
        let mut fix = |path: &Path| -> bool {
            let Ok(md) = fs::symlink_metadata(path) else {
                return false;
            };
            let differs = uid.is_some_and(|u| u != md.uid()) || gid.is_some_and(|g| g != md.gid());
            if differs {
                if !test && std::os::unix::fs::lchown(path, uid, gid).is_err() {
                    return false;
                }
                ownership_changed = true;
            }
            true
        };
        for d in &dirs {
            if !Path::new(d).is_dir() {
                if !test {
                    enforce_missing.push(d.clone());
                }
                continue;
            }
            let mut ok = true;
            for entry in walkdir::WalkDir::new(d).follow_links(false) {
                match entry {
                    Ok(e) => ok &= fix(e.path()),
                    Err(_) => ok = false,
                }
            }
            if !ok {
                enforce_failed.push(d.clone());
            }
        }
        for f in &singles {
            match fs::symlink_metadata(f) {
                Err(e) => {
                    if !test {
                        if e.kind() == io::ErrorKind::NotFound {
                            enforce_missing.push(f.clone());
                        }
                        enforce_failed.push(f.clone());
                    }
                }
                Ok(_) => {
                    if !fix(Path::new(f)) {
                        enforce_failed.push(f.clone());
                    }
                }
            }
        }
    }

    Ownership {
        missing: enforce_missing,
        failed: enforce_failed,
        changed: ownership_changed,
    }
}

/// The report phase: result, comment and changes.
fn report(
    a: &Args,
    test: bool,
    archive: &Archive,
    disk: &DiskState,
    unpacked: &Unpacked,
    owners: &Ownership,
    ret: &mut StateResult,
) {
    let (name, src) = (&a.dest, &archive.src);
    let (extraction_needed, files, created_destdir) = (
        disk.extraction_needed,
        &unpacked.files,
        unpacked.created_destdir,
    );
    let (enforce_missing, enforce_failed, ownership_changed) =
        (&owners.missing, &owners.failed, owners.changed);
    if ownership_changed {
        ret.changes.insert("updated ownership".into(), json!(true));
    }
    if extraction_needed {
        if files.is_empty() {
            ret.result = Some(false);
            ret.comment = format!("No files were extracted from {src}");
        } else {
            if created_destdir {
                ret.changes
                    .insert("directories_created".into(), json!([name]));
            }
            ret.changes.insert("extracted_files".into(), json!(files));
            ret.comment = format!("{src} extracted to {name}");
            explain(disk, &mut ret.comment);
            if let Some(n) = a.trim_output {
                ret.comment
                    .push_str(&format!(". Output was trimmed to {n} number of lines"));
            }
            ret.result = Some(true);
        }
    } else {
        ret.result = Some(true);
        ret.comment = "All files in archive are already present".into();
        if test && ownership_changed {
            ret.result = None;
            ret.comment
                .push_str(". Ownership would be updated on one or more files/directories.");
        }
    }
    if !enforce_missing.is_empty() {
        if a.if_missing.is_none() {
            ret.result = Some(false);
        }
        ret.comment.push_str(
            "\n\nWhile trying to enforce user/group ownership, the following paths were missing:\n",
        );
        for item in enforce_missing {
            ret.comment.push_str(&format!("\n- {item}"));
        }
    }
    if !enforce_failed.is_empty() {
        ret.result = Some(false);
        ret.comment.push_str("\n\nWhile trying to enforce user/group ownership, Salt was unable to change ownership on the following paths:\n");
        for item in enforce_failed {
            ret.comment.push_str(&format!("\n- {item}"));
        }
    }
}

/// `keep_source: False`: removes the cached copy of a `salt://` archive,
/// but only when it lives in the minion's cache (with `--local` the
/// "cached" path is the file root itself, which must stay).
fn drop_cached(call: &StateCall<'_>, cached: &Path, warnings: &mut Vec<String>) {
    let Some(cachedir) = call.env.opts().get("cachedir").and_then(Value::as_str) else {
        return;
    };
    let (Ok(cache), Ok(file)) = (fs::canonicalize(cachedir), fs::canonicalize(cached)) else {
        return;
    };
    if file.starts_with(&cache) {
        if let Err(e) = fs::remove_file(&file) {
            warnings.push(format!(
                "Unable to remove cached source file {}: {e}",
                file.display()
            ));
        }
    }
}

/// Removes a file, symlink or directory tree (Salt's `rm_rf`); absent is fine.
fn rm_rf(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(md) if md.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guesses_formats_like_salt() {
        assert_eq!(guess_format("a.tar.gz"), Some("tar"));
        assert_eq!(guess_format("A.TGZ"), Some("tar"));
        assert_eq!(guess_format("a.tbz2"), Some("tar"));
        assert_eq!(guess_format("a.txz"), Some("tar"));
        assert_eq!(guess_format("a.zip"), Some("zip"));
        assert_eq!(guess_format("a.gz"), None);
    }

    #[test]
    fn strip_components_from_options() {
        assert_eq!(strip_from_options("--strip-components=1"), Some(1));
        assert_eq!(strip_from_options("v --strip 2"), Some(2));
        assert_eq!(strip_from_options("-v"), None);
        assert_eq!(strip_components("app/bin/x", 1).as_deref(), Some("bin/x"));
        assert_eq!(strip_components("app/", 1), None);
    }

    #[test]
    fn hash_specs() {
        let h = "a".repeat(64);
        assert_eq!(
            parse_hash(&format!("sha256={h}")),
            Some((HashType::Sha256, h.clone()))
        );
        assert_eq!(parse_hash(&h), Some((HashType::Sha256, h.clone())));
        assert_eq!(parse_hash("md5=abc"), None);
        assert_eq!(parse_hash("nothex"), None);
    }

    #[test]
    fn data_filter_modes() {
        assert_eq!(tar_file_mode(Some(0o4777)), 0o755);
        assert_eq!(tar_file_mode(Some(0o444)), 0o644);
        assert_eq!(tar_file_mode(Some(0o011)), 0o600);
    }
}
