//! Every way an SPM operation can fail, each worded so the user knows what to
//! do next.

use std::path::PathBuf;

/// Why an SPM operation failed. Nothing has been written when an install or
/// a build returns one of these (see [`crate::install`] for how that holds).
#[derive(Debug, thiserror::Error)]
pub enum SpmError {
    #[error("cannot read the SPM config file {path}: {message}; fix its YAML or pass another config dir with -c")]
    /// The SPM config file could not be read or parsed.
    Config {
        /// The config file.
        path: PathBuf,
        /// What was wrong with it.
        message: String,
    },

    /// A formula directory without its FORMULA file.
    #[error("Formula file {0} not found: a formula directory needs a FORMULA file at its top")]
    FormulaMissing(PathBuf),

    /// FORMULA lacks a field SPM requires (named here).
    #[error("Invalid package: a {0} must be defined in FORMULA")]
    FormulaFieldMissing(String),

    #[error("Invalid FORMULA {origin}: {message}")]
    /// FORMULA could not be read as SPM reads it.
    FormulaInvalid {
        /// The FORMULA file or package it came from.
        origin: String,
        /// What was wrong with it.
        message: String,
    },

    /// The `.spm` file to install does not exist.
    #[error("Package file {0} not found")]
    PackageFileMissing(PathBuf),

    #[error("refusing package {path}: {reason}")]
    /// A package refused before anything is written (unsafe paths, bombs, corruption).
    UnsafePackage {
        /// The package file.
        path: String,
        /// Why it is refused.
        reason: String,
    },

    /// The package is installed already and `-f` was not given.
    #[error("Package {0} already installed, not installing again (use -f to force)")]
    AlreadyInstalled(String),

    #[error("Cannot install {package}, the following dependencies are needed:\n\n{missing}")]
    /// The package depends on packages that are not installed.
    MissingDependencies {
        /// The package being installed.
        package: String,
        /// The missing dependencies, one per line.
        missing: String,
    },

    #[error(
        "Not installing {package} due to existing files:\n\n{files}\n\n(use -f to overwrite them)"
    )]
    /// Installing would overwrite files another package or the admin owns.
    ExistingFiles {
        /// The package being installed.
        package: String,
        /// The files in the way, one per line.
        files: String,
    },

    /// The package to remove is not installed.
    #[error("Package {0} not installed")]
    NotInstalled(String),

    #[error(
        "Cannot remove {package}: {dependents} depend(s) on it (remove those first, or use -f)"
    )]
    /// Other installed packages depend on the package being removed.
    HasDependents {
        /// The package being removed.
        package: String,
        /// The packages that depend on it.
        dependents: String,
    },

    /// No configured repository offers the package.
    #[error("Package {0} was not found in any configured repository; run `halite-spm update_repo` or check spm_repos_config")]
    NotInRepos(String),

    #[error("repository {repo}: {message}")]
    /// A repository could not be read or its metadata is invalid.
    Repo {
        /// The repository's name.
        repo: String,
        /// What went wrong.
        message: String,
    },

    /// The package needs a newer SPM than this one.
    #[error("package {package} needs SPM {needed} or newer (this is {have})")]
    MinimumVersion {
        /// The package.
        package: String,
        /// The SPM version it needs.
        needed: String,
        /// The version this SPM reports.
        have: String,
    },

    /// A package's pre/post state failed.
    #[error("{stage} state of {package} failed: {message}")]
    StateFailed {
        /// The package.
        package: String,
        /// Which state (`pre_local_state`, `post_local_state`...).
        stage: String,
        /// The failed state's comment.
        message: String,
    },

    /// A state that needs the master found none.
    #[error("no master reachable: {0}")]
    NoMaster(String),

    /// A package's state could not be rendered.
    #[error("cannot render the {stage} state of {package}: {message}")]
    Render {
        /// The package.
        package: String,
        /// Which state.
        stage: String,
        /// The render error.
        message: String,
    },

    /// The user stopped the operation at a prompt.
    #[error("canceled")]
    Canceled,

    /// The package database could not be read or written.
    #[error("package database {path}: {source}")]
    Database {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },

    /// A file operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done (`reading`, `writing`...).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
}

impl SpmError {
    /// An I/O error on `path` while doing `action` ("cannot read", "cannot write"...).
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SpmError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// The result type of this crate.
pub type Result<T, E = SpmError> = std::result::Result<T, E>;
