//! Undoable file writes for an install. Files are staged under temporary
//! names; before the first rename a journal (`<spm_db>.journal`) lists every
//! rename and the backup of what it replaces, so a process killed between
//! the renames and the database commit is undone by the next `halite-spm`
//! run ([`recover`]), and disk and database agree again.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::SpmConfig;
use crate::db::PackageDb;
use crate::error::{Result, SpmError};

/// The environment variable that makes an install abort at a named point
/// (`after-renames`, `after-commit`): how the crash tests kill it for real.
pub const FAILPOINT_ENV: &str = "HALITE_SPM_FAILPOINT";

/// Aborts the process when [`FAILPOINT_ENV`] names `point`.
pub(crate) fn failpoint(point: &str) {
    if std::env::var(FAILPOINT_ENV).is_ok_and(|v| v == point) {
        eprintln!("halite-spm: aborting at failpoint {point}");
        std::process::abort();
    }
}

/// Where the journal of an install in progress lives.
pub fn journal_path(config: &SpmConfig) -> PathBuf {
    let mut path = config.spm_db.clone().into_os_string();
    path.push(".journal");
    PathBuf::from(path)
}

/// One rename of an install: `temp` becomes `dest`; what `dest` held is
/// moved to `backup` first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JournalEntry {
    /// The new file, written beside its destination.
    pub temp: PathBuf,
    /// Where it goes.
    pub dest: PathBuf,
    /// Where the file it replaces was moved (`None`: there was none).
    pub backup: Option<PathBuf>,
}

/// The journal of an install whose renames have started.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Journal {
    /// The package being installed.
    pub package: String,
    /// Matches the `txn` column once the database commit is done.
    pub txn: String,
    /// The renames, in the order they are done.
    pub entries: Vec<JournalEntry>,
    /// Directories the install created, removed again on a rollback.
    pub created_dirs: Vec<PathBuf>,
}

/// Everything an install has done to the disk so far, so it can be undone.
pub(crate) struct FileTransaction {
    journal_path: PathBuf,
    package: String,
    id: String,
    created_dirs: Vec<PathBuf>,
    temps: Vec<PathBuf>,
    /// (temporary name, destination) pairs waiting for their rename.
    staged: Vec<(PathBuf, PathBuf)>,
    /// Renames already done.
    renamed: Vec<JournalEntry>,
    journal_written: bool,
    counter: usize,
}

impl FileTransaction {
    pub(crate) fn new(journal_path: PathBuf, package: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        FileTransaction {
            journal_path,
            package: package.to_string(),
            id: format!("{}-{nanos}", std::process::id()),
            created_dirs: Vec::new(),
            temps: Vec::new(),
            staged: Vec::new(),
            renamed: Vec::new(),
            journal_written: false,
            counter: 0,
        }
    }

    /// The id recorded with the package in the database.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// `.<file>.halite-spm-<pid>-<n>` beside `path`.
    pub(crate) fn temp_name(&mut self, path: &Path) -> PathBuf {
        self.counter += 1;
        let file = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        path.with_file_name(format!(
            ".{file}.halite-spm-{}-{}",
            std::process::id(),
            self.counter
        ))
    }

    /// A temporary file or link this transaction created.
    pub(crate) fn add_temp(&mut self, temp: PathBuf) {
        self.temps.push(temp);
    }

    /// `temp` is complete and will be renamed to `dest`.
    pub(crate) fn stage(&mut self, temp: PathBuf, dest: PathBuf) {
        self.staged.push((temp, dest));
    }

    /// Creates `dir` and its missing parents; returns the ones created
    /// below `root`, outermost first.
    pub(crate) fn create_dirs(&mut self, root: &Path, dir: &Path) -> Result<Vec<PathBuf>> {
        let mut missing = Vec::new();
        let mut cursor = Some(dir);
        while let Some(path) = cursor {
            if fs::symlink_metadata(path).is_ok() {
                break;
            }
            missing.push(path.to_path_buf());
            cursor = path.parent();
        }
        missing.reverse();
        let mut created = Vec::new();
        for path in missing {
            fs::create_dir(&path).map_err(|e| SpmError::io("cannot create directory", &path, e))?;
            self.created_dirs.push(path.clone());
            if path.starts_with(root) && path != root {
                created.push(path);
            }
        }
        Ok(created)
    }

    /// Writes the journal, then moves every staged file into place,
    /// keeping what it replaces as a backup.
    pub(crate) fn commit_renames(&mut self) -> Result<()> {
        let staged = std::mem::take(&mut self.staged);
        let mut entries = Vec::with_capacity(staged.len());
        for (temp, dest) in staged {
            let backup = fs::symlink_metadata(&dest)
                .is_ok()
                .then(|| self.temp_name(&dest));
            entries.push(JournalEntry { temp, dest, backup });
        }
        let journal = Journal {
            package: self.package.clone(),
            txn: self.id.clone(),
            entries: entries.clone(),
            created_dirs: self.created_dirs.clone(),
        };
        write_journal(&self.journal_path, &journal)?;
        self.journal_written = true;
        for entry in entries {
            if let Some(backup) = &entry.backup {
                fs::rename(&entry.dest, backup)
                    .map_err(|e| SpmError::io("cannot move aside", &entry.dest, e))?;
            }
            if let Err(e) = fs::rename(&entry.temp, &entry.dest) {
                if let Some(backup) = &entry.backup {
                    let _ = fs::rename(backup, &entry.dest);
                }
                return Err(SpmError::io("cannot rename into place", &entry.dest, e));
            }
            self.temps.retain(|t| t != &entry.temp);
            self.renamed.push(entry);
        }
        Ok(())
    }

    /// Undoes everything: renamed files go back (or away), temporaries and
    /// created directories are removed, the journal is dropped.
    pub(crate) fn roll_back(&mut self) {
        for entry in self.renamed.drain(..).rev() {
            let _ = fs::remove_file(&entry.dest);
            if let Some(backup) = entry.backup {
                let _ = fs::rename(&backup, &entry.dest);
            }
        }
        for temp in self.temps.drain(..) {
            let _ = fs::remove_file(&temp);
        }
        for dir in self.created_dirs.drain(..).rev() {
            let _ = fs::remove_dir(&dir);
        }
        if self.journal_written {
            let _ = fs::remove_file(&self.journal_path);
        }
    }

    /// The database has the package: drop the backups and the journal.
    pub(crate) fn finish(&mut self) {
        for entry in self.renamed.drain(..) {
            if let Some(backup) = entry.backup {
                let _ = fs::remove_file(&backup);
            }
        }
        self.created_dirs.clear();
        if self.journal_written {
            let _ = fs::remove_file(&self.journal_path);
        }
    }
}

fn write_journal(path: &Path, journal: &Journal) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(|e| SpmError::io("cannot create", dir, e))?;
    let text = serde_json::to_vec_pretty(journal)
        .map_err(|e| SpmError::io("cannot write", path, std::io::Error::other(e)))?;
    let mut temp = tempfile::Builder::new()
        .prefix(".halite-spm-journal")
        .tempfile_in(dir)
        .map_err(|e| SpmError::io("cannot create a temporary file in", dir, e))?;
    std::io::Write::write_all(&mut temp, &text)
        .map_err(|e| SpmError::io("cannot write", path, e))?;
    temp.as_file()
        .sync_all()
        .map_err(|e| SpmError::io("cannot sync", path, e))?;
    temp.persist(path)
        .map_err(|e| SpmError::io("cannot write", path, e.error))?;
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| SpmError::io("cannot sync", dir, e))
}

/// Finishes or undoes an install that was killed midway: when the
/// database holds the journal's transaction the install is kept (backups
/// dropped), otherwise every rename is undone. Returns what was done.
pub fn recover(config: &SpmConfig, db: &PackageDb) -> Result<Option<String>> {
    let path = journal_path(config);
    let text = match fs::read(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(SpmError::io("cannot read", &path, e)),
    };
    let journal: Journal = serde_json::from_slice(&text).map_err(|e| SpmError::Config {
        path: path.clone(),
        message: format!("damaged install journal ({e}); check the files it names, then delete it"),
    })?;
    let committed = db.package_txn(&journal.package)?.as_deref() == Some(journal.txn.as_str());
    let exists = |p: &Path| fs::symlink_metadata(p).is_ok();
    if committed {
        for entry in &journal.entries {
            if let Some(backup) = entry.backup.as_deref().filter(|b| exists(b)) {
                let _ = fs::remove_file(backup);
            }
        }
    } else {
        for entry in journal.entries.iter().rev() {
            let backup = entry.backup.as_deref().filter(|b| exists(b));
            if exists(&entry.temp) {
                let _ = fs::remove_file(&entry.temp);
            } else if backup.is_some() || entry.backup.is_none() {
                let _ = fs::remove_file(&entry.dest);
            }
            if let Some(backup) = backup {
                fs::rename(backup, &entry.dest)
                    .map_err(|e| SpmError::io("cannot restore", &entry.dest, e))?;
            }
        }
        for dir in journal.created_dirs.iter().rev() {
            let _ = fs::remove_dir(dir);
        }
    }
    fs::remove_file(&path).map_err(|e| SpmError::io("cannot remove", &path, e))?;
    Ok(Some(if committed {
        format!("finished the interrupted install of {}", journal.package)
    } else {
        format!("undid the interrupted install of {}", journal.package)
    }))
}

/// Held while a halite-spm process works on the database and the install
/// roots, so two processes never interleave installs (or recover one
/// another's journal). Released when dropped.
pub struct SpmLock {
    _file: fs::File,
}

/// Takes the exclusive lock `<spm_db>.lock`, waiting for another
/// halite-spm process to finish.
pub fn lock(config: &SpmConfig) -> Result<SpmLock> {
    use std::os::fd::AsRawFd;
    let mut path = config.spm_db.clone().into_os_string();
    path.push(".lock");
    let path = PathBuf::from(path);
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| SpmError::io("cannot create", dir, e))?;
    }
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| SpmError::io("cannot open", &path, e))?;
    loop {
        // SAFETY: flock on a descriptor this function owns; no memory is shared.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc == 0 {
            return Ok(SpmLock { _file: file });
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(SpmError::io("cannot lock", &path, err));
        }
    }
}
