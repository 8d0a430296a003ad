//! The package database (`spm_db`, SQLite): which packages are installed
//! and every file each one put on disk, with the digest that tells a
//! pristine file from one edited since.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Result, SpmError};
use crate::formula::Formula;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS packages (
    package TEXT PRIMARY KEY,
    version TEXT NOT NULL,
    release TEXT NOT NULL,
    installed TEXT NOT NULL,
    os TEXT,
    os_family TEXT,
    dependencies TEXT,
    os_dependencies TEXT,
    os_family_dependencies TEXT,
    summary TEXT,
    description TEXT,
    formula TEXT NOT NULL,
    txn TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS files (
    package TEXT NOT NULL,
    path TEXT NOT NULL,
    kind TEXT NOT NULL,
    size INTEGER NOT NULL,
    mode TEXT NOT NULL,
    sum TEXT NOT NULL,
    uname TEXT NOT NULL,
    gname TEXT NOT NULL,
    type TEXT NOT NULL,
    linkname TEXT NOT NULL,
    mtime INTEGER NOT NULL,
    PRIMARY KEY (package, path)
);
CREATE INDEX IF NOT EXISTS files_by_path ON files (path);
";

/// What kind of filesystem entry a row describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
}

impl FileKind {
    fn as_str(self) -> &'static str {
        match self {
            FileKind::File => "file",
            FileKind::Dir => "dir",
            FileKind::Symlink => "symlink",
        }
    }

    fn parse(text: &str) -> Self {
        match text {
            "dir" => FileKind::Dir,
            "symlink" => FileKind::Symlink,
            _ => FileKind::File,
        }
    }
}

/// One file (or directory, or link) a package installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledFile {
    /// Where the file was installed.
    pub path: PathBuf,
    /// What it is.
    pub kind: FileKind,
    /// Its size in bytes.
    pub size: u64,
    /// Octal permission bits, `0644`.
    pub mode: String,
    /// sha256 of the content as installed (of the target for a link; empty for a dir).
    pub sha256: String,
    /// The owner it was installed with.
    pub owner: String,
    /// The group it was installed with.
    pub group: String,
    /// The FORMULA `files` tag letter, empty when untagged.
    pub file_type: String,
    /// A link's target (empty for files and dirs).
    pub link_target: String,
    /// Its modification time, seconds since the epoch.
    pub mtime: u64,
}

/// An installed package as recorded.
#[derive(Debug, Clone)]
pub struct InstalledPackage {
    /// The package name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Its release.
    pub release: String,
    /// When it was installed, Salt's format (`Sat, 21 Nov 2026 21:15:20 GMT`).
    pub installed: String,
    /// The OS it was built for, if limited to one.
    pub os: Option<String>,
    /// The OS family it was built for, if limited to one.
    pub os_family: Option<String>,
    /// The packages it depends on.
    pub dependencies: Vec<String>,
    /// Its one-line summary.
    pub summary: String,
    /// Its description.
    pub description: String,
}

/// The open database.
pub struct PackageDb {
    conn: Connection,
    path: PathBuf,
}

impl PackageDb {
    /// Opens (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| SpmError::io("cannot create", parent, e))?;
        }
        let db_err = |source| SpmError::Database {
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open(path).map_err(db_err)?;
        conn.busy_timeout(std::time::Duration::from_secs(30))
            .map_err(db_err)?;
        conn.execute_batch(SCHEMA).map_err(db_err)?;
        Ok(PackageDb {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn err(&self, source: rusqlite::Error) -> SpmError {
        SpmError::Database {
            path: self.path.clone(),
            source,
        }
    }

    /// The installed package called `name`, if any.
    pub fn package(&self, name: &str) -> Result<Option<InstalledPackage>> {
        self.conn
            .query_row(
                "SELECT package, version, release, installed, os, os_family, dependencies, summary, description
                 FROM packages WHERE package = ?1",
                [name],
                row_to_package,
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// The id of the install transaction that recorded `name`.
    pub fn package_txn(&self, name: &str) -> Result<Option<String>> {
        self.conn
            .query_row(
                "SELECT txn FROM packages WHERE package = ?1",
                [name],
                |row| row.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Every installed package, by name.
    pub fn packages(&self) -> Result<Vec<InstalledPackage>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT package, version, release, installed, os, os_family, dependencies, summary, description
                 FROM packages ORDER BY package",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], row_to_package)
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    /// The files of `name` in install order; `None` when it is not installed.
    pub fn files(&self, name: &str) -> Result<Option<Vec<InstalledFile>>> {
        if self.package(name)?.is_none() {
            return Ok(None);
        }
        let mut stmt = self
            .conn
            .prepare(
                "SELECT path, kind, size, mode, sum, uname, gname, type, linkname, mtime
                 FROM files WHERE package = ?1 ORDER BY rowid",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([name], |row| {
                Ok(InstalledFile {
                    path: PathBuf::from(row.get::<_, String>(0)?),
                    kind: FileKind::parse(&row.get::<_, String>(1)?),
                    size: u64::try_from(row.get::<_, i64>(2)?).unwrap_or(0),
                    mode: row.get(3)?,
                    sha256: row.get(4)?,
                    owner: row.get(5)?,
                    group: row.get(6)?,
                    file_type: row.get(7)?,
                    link_target: row.get(8)?,
                    mtime: u64::try_from(row.get::<_, i64>(9)?).unwrap_or(0),
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map(Some)
            .map_err(|e| self.err(e))
    }

    /// The package (other than `except`) that owns the file or link at `path`.
    pub fn owner_of(&self, path: &Path, except: &str) -> Result<Option<String>> {
        self.conn
            .query_row(
                "SELECT package FROM files WHERE path = ?1 AND kind != 'dir' AND package != ?2 LIMIT 1",
                params![path.to_string_lossy(), except],
                |row| row.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Whether any package (other than `except`) records the directory `path`.
    pub fn dir_used_by_others(&self, path: &Path, except: &str) -> Result<bool> {
        let count: i64 = self
            .conn
            .query_row(
                "SELECT count(*) FROM files WHERE path = ?1 AND kind = 'dir' AND package != ?2",
                params![path.to_string_lossy(), except],
                |row| row.get(0),
            )
            .map_err(|e| self.err(e))?;
        Ok(count > 0)
    }

    /// Installed packages that list `name` among their dependencies.
    pub fn dependents(&self, name: &str) -> Result<Vec<String>> {
        Ok(self
            .packages()?
            .into_iter()
            .filter(|p| p.name != name && p.dependencies.iter().any(|d| d == name))
            .map(|p| p.name)
            .collect())
    }

    /// Records `formula` and its files in one transaction, replacing any
    /// earlier record of the same package and taking over files another
    /// package owned (the caller has already decided that is allowed).
    pub fn register(
        &mut self,
        formula: &Formula,
        files: &[InstalledFile],
        txn: &str,
    ) -> Result<()> {
        let installed = chrono::Utc::now()
            .format("%a, %d %b %Y %H:%M:%S GMT")
            .to_string();
        let formula_json = serde_json::Value::Object(formula.variables.clone()).to_string();
        let path = self.path.clone();
        let db_err = |source| SpmError::Database {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(db_err)?;
        tx.execute("DELETE FROM files WHERE package = ?1", [&formula.name])
            .map_err(db_err)?;
        tx.execute("DELETE FROM packages WHERE package = ?1", [&formula.name])
            .map_err(db_err)?;
        tx.execute(
            "INSERT INTO packages VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            params![
                formula.name,
                formula.version,
                formula.release,
                installed,
                formula.os,
                formula.os_family,
                formula.dependencies.join(","),
                text_field(formula, "os_dependencies"),
                text_field(formula, "os_family_dependencies"),
                formula.summary,
                formula.description,
                formula_json,
                txn,
            ],
        )
        .map_err(db_err)?;
        for file in files {
            let path_text = file.path.to_string_lossy();
            if file.kind != FileKind::Dir {
                tx.execute(
                    "DELETE FROM files WHERE path = ?1 AND kind != 'dir'",
                    [&path_text],
                )
                .map_err(db_err)?;
            }
            tx.execute(
                "INSERT OR REPLACE INTO files VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![
                    formula.name,
                    path_text,
                    file.kind.as_str(),
                    i64::try_from(file.size).unwrap_or(i64::MAX),
                    file.mode,
                    file.sha256,
                    file.owner,
                    file.group,
                    file.file_type,
                    file.link_target,
                    i64::try_from(file.mtime).unwrap_or(0),
                ],
            )
            .map_err(db_err)?;
        }
        tx.commit().map_err(db_err)
    }

    /// Forgets `name` and its files, in one transaction.
    pub fn unregister(&mut self, name: &str) -> Result<()> {
        let path = self.path.clone();
        let db_err = |source| SpmError::Database {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(db_err)?;
        tx.execute("DELETE FROM files WHERE package = ?1", [name])
            .map_err(db_err)?;
        tx.execute("DELETE FROM packages WHERE package = ?1", [name])
            .map_err(db_err)?;
        tx.commit().map_err(db_err)
    }
}

fn text_field(formula: &Formula, key: &str) -> Option<String> {
    match formula.variables.get(key)? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Null => None,
        other => Some(other.to_string()),
    }
}

fn row_to_package(row: &rusqlite::Row<'_>) -> rusqlite::Result<InstalledPackage> {
    let deps: Option<String> = row.get(6)?;
    Ok(InstalledPackage {
        name: row.get(0)?,
        version: row.get(1)?,
        release: row.get(2)?,
        installed: row.get(3)?,
        os: row.get(4)?,
        os_family: row.get(5)?,
        dependencies: deps
            .unwrap_or_default()
            .split(',')
            .map(|d| d.trim().to_string())
            .filter(|d| !d.is_empty())
            .collect(),
        summary: row.get::<_, Option<String>>(7)?.unwrap_or_default(),
        description: row.get::<_, Option<String>>(8)?.unwrap_or_default(),
    })
}
