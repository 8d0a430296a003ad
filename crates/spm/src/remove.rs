//! `halite-spm remove NAME`: deletes a package's files except the ones
//! edited since install, then the directories left empty, then its record.

use std::fs;
use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::db::{FileKind, InstalledFile, PackageDb};
use crate::error::{Result, SpmError};

/// What a removal did.
#[derive(Debug, Clone, Default)]
pub struct RemoveReport {
    /// The package removed.
    pub package: String,
    /// The files and directories removed.
    pub removed: Vec<PathBuf>,
    /// Files changed since install, left in place.
    pub kept_modified: Vec<PathBuf>,
    /// Directories that still hold files (of the user or other packages).
    pub kept_dirs: Vec<PathBuf>,
}

/// Removes `name`. Refused while another installed package depends on it,
/// unless `force`.
pub fn remove_package(db: &mut PackageDb, name: &str, force: bool) -> Result<RemoveReport> {
    let files = db
        .files(name)?
        .ok_or_else(|| SpmError::NotInstalled(name.to_string()))?;
    let dependents = db.dependents(name)?;
    if !dependents.is_empty() && !force {
        return Err(SpmError::HasDependents {
            package: name.to_string(),
            dependents: dependents.join(", "),
        });
    }
    let mut report = RemoveReport {
        package: name.to_string(),
        ..Default::default()
    };
    delete_files(db, name, &files, &mut report)?;
    db.unregister(name)?;
    Ok(report)
}

/// Deletes `files` of package `name` that are unchanged since install,
/// then the directories among them left empty (unless another package
/// records them); fills `report`. The database is not touched.
pub(crate) fn delete_files(
    db: &PackageDb,
    name: &str,
    files: &[InstalledFile],
    report: &mut RemoveReport,
) -> Result<()> {
    let mut dirs = Vec::new();
    for file in files {
        match file.kind {
            FileKind::Dir => dirs.push(file.path.clone()),
            FileKind::File => {
                let Ok(content) = fs::read(&file.path) else {
                    continue;
                };
                if hex::encode(Sha256::digest(&content)) == file.sha256 {
                    fs::remove_file(&file.path)
                        .map_err(|e| SpmError::io("cannot remove", &file.path, e))?;
                    report.removed.push(file.path.clone());
                } else {
                    report.kept_modified.push(file.path.clone());
                }
            }
            FileKind::Symlink => {
                let Ok(target) = fs::read_link(&file.path) else {
                    continue;
                };
                if target.to_string_lossy() == file.link_target {
                    fs::remove_file(&file.path)
                        .map_err(|e| SpmError::io("cannot remove", &file.path, e))?;
                    report.removed.push(file.path.clone());
                } else {
                    report.kept_modified.push(file.path.clone());
                }
            }
        }
    }
    dirs.sort();
    dirs.dedup();
    for dir in dirs.into_iter().rev() {
        if db.dir_used_by_others(&dir, name)? {
            continue;
        }
        match fs::remove_dir(&dir) {
            Ok(()) => report.removed.push(dir),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => report.kept_dirs.push(dir),
        }
    }
    Ok(())
}
