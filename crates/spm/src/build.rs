//! `halite-spm build DIR`: a formula directory -> `<name>-<version>-<release>.spm`.

use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::{Result, SpmError};
use crate::formula::{Formula, REQUIRED_FIELDS};

/// What a build produced.
#[derive(Debug, Clone)]
pub struct BuiltPackage {
    /// The `.spm` written to `spm_build_dir`.
    pub path: PathBuf,
    /// The tar member names, in archive order (`apache/apache/init.sls`).
    pub members: Vec<String>,
}

/// A file or directory of the formula dir that goes into the package.
struct Source {
    disk: PathBuf,
    member: String,
}

/// Builds the formula in `formula_dir` into `build_dir`, leaving out any
/// path component named in `exclude`.
pub fn build(formula_dir: &Path, build_dir: &Path, exclude: &[String]) -> Result<BuiltPackage> {
    let formula_file = formula_dir.join("FORMULA");
    let text = match fs::read_to_string(&formula_file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SpmError::FormulaMissing(formula_file))
        }
        Err(e) => return Err(SpmError::io("cannot read", &formula_file, e)),
    };
    let formula = Formula::parse(&text, &formula_file.display().to_string(), &REQUIRED_FIELDS)?;
    let sources = select_sources(formula_dir, &formula, exclude)?;

    fs::create_dir_all(build_dir).map_err(|e| SpmError::io("cannot create", build_dir, e))?;
    let out_path = build_dir.join(formula.package_file_name());
    let temp = tempfile::Builder::new()
        .prefix(".halite-spm-build")
        .tempfile_in(build_dir)
        .map_err(|e| SpmError::io("cannot create a temporary file in", build_dir, e))?;
    let encoder = bzip2::write::BzEncoder::new(temp, bzip2::Compression::best());
    let mut tar = tar::Builder::new(encoder);
    tar.follow_symlinks(false);
    let mut members = Vec::with_capacity(sources.len() + 1);
    append_dir_header(&mut tar, &formula.name, formula_dir)?;
    members.push(formula.name.clone());
    for source in &sources {
        append_source(&mut tar, source)?;
        members.push(source.member.clone());
    }
    let encoder = tar
        .into_inner()
        .map_err(|e| SpmError::io("cannot write", &out_path, e))?;
    let mut temp = encoder
        .finish()
        .map_err(|e| SpmError::io("cannot write", &out_path, e))?;
    temp.flush()
        .map_err(|e| SpmError::io("cannot write", &out_path, e))?;
    temp.as_file()
        .sync_all()
        .map_err(|e| SpmError::io("cannot write", &out_path, e))?;
    temp.persist(&out_path)
        .map_err(|e| SpmError::io("cannot write", &out_path, e.error))?;
    set_mode(&out_path, 0o644)?;
    tracing::info!(package = %out_path.display(), "built");
    Ok(BuiltPackage {
        path: out_path,
        members,
    })
}

/// The files that go in, in order: FORMULA first, then either the
/// FORMULA's `files` list or the top-level dir and the seed's extras.
fn select_sources(
    formula_dir: &Path,
    formula: &Formula,
    exclude: &[String],
) -> Result<Vec<Source>> {
    let name = &formula.name;
    let mut sources = vec![Source {
        disk: formula_dir.join("FORMULA"),
        member: format!("{name}/FORMULA"),
    }];
    let mut roots: Vec<String> = Vec::new();
    match &formula.files {
        Some(entries) => {
            for entry in entries {
                let rel = entry.path.trim_end_matches('/');
                if rel.starts_with('/') || rel.split('/').any(|p| p == "..") || rel.is_empty() {
                    return Err(SpmError::FormulaInvalid {
                        origin: formula_dir.join("FORMULA").display().to_string(),
                        message: format!(
                            "files entry '{}' must be a path inside the formula dir",
                            entry.path
                        ),
                    });
                }
                if rel == "FORMULA" {
                    continue;
                }
                if fs::symlink_metadata(formula_dir.join(rel)).is_err() {
                    return Err(SpmError::FormulaInvalid {
                        origin: formula_dir.join("FORMULA").display().to_string(),
                        message: format!(
                            "files lists '{rel}', which does not exist in {}",
                            formula_dir.display()
                        ),
                    });
                }
                roots.push(rel.to_string());
            }
        }
        None => {
            let mut names: Vec<String> = fs::read_dir(formula_dir)
                .map_err(|e| SpmError::io("cannot list", formula_dir, e))?
                .filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect();
            names.sort();
            roots.extend(
                names
                    .into_iter()
                    .filter(|n| is_packaged_top_entry(n, &formula.top_level_dir)),
            );
        }
    }
    for rel in roots {
        if rel.split('/').any(|part| exclude.iter().any(|x| x == part)) {
            continue;
        }
        let walker = walkdir::WalkDir::new(formula_dir.join(&rel))
            .follow_links(false)
            .sort_by_file_name();
        for entry in walker
            .into_iter()
            .filter_entry(|e| !exclude.iter().any(|x| e.file_name().to_str() == Some(x)))
        {
            let entry = entry.map_err(|e| {
                let path = e
                    .path()
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|| formula_dir.to_path_buf());
                SpmError::io("cannot read", path, std::io::Error::other(e.to_string()))
            })?;
            let relative = entry
                .path()
                .strip_prefix(formula_dir)
                .unwrap_or(entry.path());
            let relative = relative.to_str().ok_or_else(|| SpmError::FormulaInvalid {
                origin: formula_dir.display().to_string(),
                message: format!("the file name {} is not UTF-8", entry.path().display()),
            })?;
            sources.push(Source {
                disk: entry.path().to_path_buf(),
                member: format!("{name}/{relative}"),
            });
        }
    }
    Ok(sources)
}

/// Without a `files` list, the package holds the top-level dir, the
/// loader dirs (`_modules`...), `pillar.example`, and README/LICENSE.
fn is_packaged_top_entry(entry: &str, top_level_dir: &str) -> bool {
    entry == top_level_dir
        || entry == "pillar.example"
        || (entry.starts_with('_') && entry.len() > 1)
        || entry.starts_with("README")
        || entry.starts_with("LICENSE")
}

fn append_dir_header<W: Write>(tar: &mut tar::Builder<W>, member: &str, disk: &Path) -> Result<()> {
    let meta = fs::metadata(disk).map_err(|e| SpmError::io("cannot read", disk, e))?;
    let mut header = base_header(&meta, tar::EntryType::Directory, 0o755);
    header.set_size(0);
    tar.append_data(&mut header, member, std::io::empty())
        .map_err(|e| SpmError::io("cannot add", disk, e))
}

fn append_source<W: Write>(tar: &mut tar::Builder<W>, source: &Source) -> Result<()> {
    let disk = &source.disk;
    let meta = fs::symlink_metadata(disk).map_err(|e| SpmError::io("cannot read", disk, e))?;
    let file_type = meta.file_type();
    if file_type.is_dir() {
        append_dir_header(tar, &source.member, disk)
    } else if file_type.is_symlink() {
        let target = fs::read_link(disk).map_err(|e| SpmError::io("cannot read", disk, e))?;
        let parts: Vec<String> = source.member.split('/').map(str::to_string).collect();
        crate::archive::check_link_target(&parts, &target.to_string_lossy()).map_err(|reason| {
            SpmError::FormulaInvalid {
                origin: disk.display().to_string(),
                message: format!("{reason}; installs refuse such links, so the build does too"),
            }
        })?;
        let mut header = base_header(&meta, tar::EntryType::Symlink, 0o777);
        header.set_size(0);
        tar.append_link(&mut header, &source.member, &target)
            .map_err(|e| SpmError::io("cannot add", disk, e))
    } else if file_type.is_file() {
        let file = fs::File::open(disk).map_err(|e| SpmError::io("cannot read", disk, e))?;
        let mut header = base_header(&meta, tar::EntryType::Regular, 0o644);
        header.set_size(meta.len());
        tar.append_data(&mut header, &source.member, file)
            .map_err(|e| SpmError::io("cannot add", disk, e))
    } else {
        Err(SpmError::io(
            "cannot package",
            disk,
            std::io::Error::other("only files, directories and symbolic links can go in a package"),
        ))
    }
}

/// A header with the file's mode and mtime, owned by root: packages do not
/// carry the builder's uid.
fn base_header(meta: &fs::Metadata, kind: tar::EntryType, fallback_mode: u32) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    let mode = meta.mode() & 0o777;
    header.set_mode(if mode == 0 { fallback_mode } else { mode });
    header.set_mtime(u64::try_from(meta.mtime()).unwrap_or(0));
    header.set_uid(0);
    header.set_gid(0);
    // Names of at most 32 bytes always fit the header fields.
    let _ = header.set_username("root");
    let _ = header.set_groupname("root");
    header
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(|e| SpmError::io("cannot chmod", path, e))
}
