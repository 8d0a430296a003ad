//! Installing one checked package: conflicts are found first, the pre
//! state runs, every file is written under a temporary name, then renamed
//! into place, and the database is written last. Any failure before the
//! database commit undoes the renames and removes the temporaries, so the
//! disk and the database agree.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::archive::{MemberKind, Package};
use crate::config::SpmConfig;
use crate::db::{FileKind, InstalledFile, PackageDb};
use crate::error::{Result, SpmError};
use crate::layout::{destination, link_stays_inside, Destination};
use crate::owner::Ownership;
use crate::states::{refuse_targeted, run_local, LocalStateRunner, Stage};
use crate::transaction::{failpoint, FileTransaction};

/// The Salt release whose formulas halite runs; `minimum_version` is compared to it.
pub const SALT_COMPAT_VERSION: &str = "3008.5";

/// What an install did, for the user.
#[derive(Debug, Clone, Default)]
pub struct InstallReport {
    /// The package installed.
    pub package: String,
    /// Files, links and directories now recorded for the package.
    pub installed: Vec<PathBuf>,
    /// Informational lines (skipped members, state summaries).
    pub notes: Vec<String>,
}

/// One member's planned write.
struct Planned<'a> {
    dest: Destination,
    kind: &'a MemberKind,
    mode: u32,
    mtime: u64,
}

/// Installs `package`. `force` allows reinstalling and overwriting files
/// that exist or belong to another package.
pub fn install_package(
    config: &SpmConfig,
    db: &mut PackageDb,
    package: &Package,
    force: bool,
    runner: &dyn LocalStateRunner,
) -> Result<InstallReport> {
    let formula = &package.formula;
    let name = &formula.name;
    if db.package(name)?.is_some() && !force {
        return Err(SpmError::AlreadyInstalled(name.clone()));
    }
    if let Some(minimum) = &formula.minimum_version {
        if compare_versions(SALT_COMPAT_VERSION, minimum) == std::cmp::Ordering::Less {
            return Err(SpmError::MinimumVersion {
                package: name.clone(),
                needed: minimum.clone(),
                have: SALT_COMPAT_VERSION.to_string(),
            });
        }
    }
    refuse_targeted(formula)?;
    let mut report = InstallReport {
        package: name.clone(),
        ..Default::default()
    };

    let mut planned = Vec::new();
    let mut seen = HashSet::new();
    for member in &package.members {
        let Some(dest) = destination(formula, member, config) else {
            if !member.path.is_empty() && member.path != "FORMULA" {
                report.notes.push(format!(
                    "{}/{} not in top level directory, not installing",
                    name, member.path
                ));
            }
            continue;
        };
        if !link_stays_inside(&dest, member) {
            return Err(SpmError::UnsafePackage {
                path: name.clone(),
                reason: format!(
                    "the link {} would point outside {}",
                    dest.path().display(),
                    dest.root.display()
                ),
            });
        }
        if !seen.insert(dest.path()) {
            continue;
        }
        planned.push(Planned {
            dest,
            kind: &member.kind,
            mode: member.mode,
            mtime: member.mtime,
        });
    }

    check_conflicts(db, name, &planned, force)?;

    if let Some(section) = &formula.pre_local_state {
        let outcome = run_local(formula, section, Stage::Pre, config, runner)?;
        report
            .notes
            .push(format!("pre_local_state: {}", outcome.summary));
    }

    let owner = Ownership::for_install(config);
    let mut txn = FileTransaction::new(crate::transaction::journal_path(config), name);
    let staged = stage_all(&planned, &owner, &mut txn);
    let records = match staged.and_then(|records| txn.commit_renames().map(|()| records)) {
        Ok(records) => records,
        Err(e) => {
            txn.roll_back();
            return Err(e);
        }
    };
    failpoint("after-renames");
    let previous = db.files(name)?;
    if let Err(e) = db.register(formula, &records, txn.id()) {
        txn.roll_back();
        return Err(e);
    }
    failpoint("after-commit");
    txn.finish();
    report.installed = records.iter().map(|r| r.path.clone()).collect();
    // A forced reinstall (an upgrade): files of the old version that the
    // new one does not ship go, unless edited.
    let stale: Vec<InstalledFile> = previous
        .into_iter()
        .flatten()
        .filter(|old| !records.iter().any(|new| new.path == old.path))
        .collect();
    if !stale.is_empty() {
        let mut cleanup = crate::remove::RemoveReport::default();
        crate::remove::delete_files(db, name, &stale, &mut cleanup)?;
        for path in cleanup.kept_modified {
            report
                .notes
                .push(format!("kept {} (modified since install)", path.display()));
        }
    }

    if let Some(section) = &formula.post_local_state {
        let outcome =
            run_local(formula, section, Stage::Post, config, runner).map_err(|e| match e {
                SpmError::StateFailed {
                    package,
                    stage,
                    message,
                } => SpmError::StateFailed {
                    package,
                    stage,
                    message: format!("{message} (the package's files are installed)"),
                },
                other => other,
            })?;
        report
            .notes
            .push(format!("post_local_state: {}", outcome.summary));
    }
    Ok(report)
}

/// Files owned by another package, or present on disk, stop the install
/// unless forced. All are listed at once.
fn check_conflicts(db: &PackageDb, name: &str, planned: &[Planned<'_>], force: bool) -> Result<()> {
    let mut problems = Vec::new();
    for plan in planned {
        let path = plan.dest.path();
        let exists = fs::symlink_metadata(&path).ok();
        if matches!(plan.kind, MemberKind::Dir) {
            if exists.as_ref().is_some_and(|m| !m.is_dir()) {
                problems.push(format!(
                    "{} (exists and is not a directory)",
                    path.display()
                ));
            }
            continue;
        }
        if exists.as_ref().is_some_and(|m| m.is_dir()) {
            problems.push(format!("{} (is a directory)", path.display()));
            continue;
        }
        if force {
            continue;
        }
        if let Some(owner) = db.owner_of(&path, name)? {
            problems.push(format!("{} (owned by package {owner})", path.display()));
        } else if exists.is_some() {
            problems.push(path.display().to_string());
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(SpmError::ExistingFiles {
            package: name.to_string(),
            files: problems.join("\n"),
        })
    }
}

/// Creates directories and writes every file and link under a temporary
/// name next to its destination; returns the database rows.
fn stage_all(
    planned: &[Planned<'_>],
    owner: &Ownership,
    txn: &mut FileTransaction,
) -> Result<Vec<InstalledFile>> {
    let mut records = Vec::with_capacity(planned.len());
    for plan in planned {
        let path = plan.dest.path();
        let parent = path.parent().unwrap_or(Path::new("/"));
        for created in txn.create_dirs(&plan.dest.root, parent)? {
            owner.apply(&created)?;
            records.push(owner.record(created, FileKind::Dir, 0o755));
        }
        let file_type = plan
            .dest
            .file_type
            .map(|t| t.letter().to_string())
            .unwrap_or_default();
        match plan.kind {
            MemberKind::Dir => {
                let created = txn.create_dirs(&plan.dest.root, &path)?;
                if created.contains(&path) {
                    fs::set_permissions(&path, fs::Permissions::from_mode(plan.mode | 0o700))
                        .map_err(|e| SpmError::io("cannot chmod", &path, e))?;
                    owner.apply(&path)?;
                }
                for dir in created {
                    records.push(owner.record(dir, FileKind::Dir, plan.mode));
                }
                if !records.iter().any(|r| r.path == path) {
                    records.push(owner.record(path, FileKind::Dir, plan.mode));
                }
            }
            MemberKind::File(data) => {
                let temp = txn.temp_name(&path);
                // create_new: never follow or reuse something already at the temporary name.
                fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&temp)
                    .and_then(|mut file| std::io::Write::write_all(&mut file, data))
                    .map_err(|e| SpmError::io("cannot write", &temp, e))?;
                txn.add_temp(temp.clone());
                fs::set_permissions(&temp, fs::Permissions::from_mode(plan.mode))
                    .map_err(|e| SpmError::io("cannot chmod", &temp, e))?;
                owner.apply(&temp)?;
                txn.stage(temp, path.clone());
                let sum = hex::encode(Sha256::digest(data));
                records.push(InstalledFile {
                    size: data.len() as u64,
                    sha256: sum,
                    file_type,
                    mtime: plan.mtime,
                    ..owner.record(path, FileKind::File, plan.mode)
                });
            }
            MemberKind::Symlink(target) => {
                let temp = txn.temp_name(&path);
                std::os::unix::fs::symlink(target, &temp)
                    .map_err(|e| SpmError::io("cannot create link", &temp, e))?;
                txn.add_temp(temp.clone());
                owner.apply(&temp)?;
                txn.stage(temp, path.clone());
                let sum = hex::encode(Sha256::digest(target.as_bytes()));
                records.push(InstalledFile {
                    sha256: sum,
                    link_target: target.clone(),
                    file_type,
                    mtime: plan.mtime,
                    ..owner.record(path, FileKind::Symlink, 0o777)
                });
            }
        }
    }
    Ok(records)
}

/// Compares dotted versions numerically where both parts are numbers
/// (`3008.5` > `3007.10` is false, `201506` < `201601`), textually otherwise.
pub fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    let split = |v: &str| v.split(['.', '-']).map(str::to_string).collect::<Vec<_>>();
    let (left, right) = (split(a), split(b));
    for i in 0..left.len().max(right.len()) {
        let l = left.get(i).map(String::as_str).unwrap_or("0");
        let r = right.get(i).map(String::as_str).unwrap_or("0");
        let ordering = match (l.parse::<u64>(), r.parse::<u64>()) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            _ => l.cmp(r),
        };
        if ordering != std::cmp::Ordering::Equal {
            return ordering;
        }
    }
    std::cmp::Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::compare_versions;
    use std::cmp::Ordering;

    #[test]
    fn versions_compare_numerically() {
        assert_eq!(compare_versions("3008.5", "3007.10"), Ordering::Greater);
        assert_eq!(compare_versions("201506", "201601"), Ordering::Less);
        assert_eq!(compare_versions("1.0", "1"), Ordering::Equal);
        assert_eq!(compare_versions("3008.5", "3009"), Ordering::Less);
    }
}
