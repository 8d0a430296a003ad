//! Every way an SPM operation can fail, each worded so the user knows what to
//! do next.

use std::path::PathBuf;

/// Why an SPM operation failed. Nothing has been written when an install or
/// a build returns one of these (see [`crate::install`] for how that holds).
#[derive(Debug, thiserror::Error)]
pub enum SpmError {
    #[error("cannot read the SPM config file {path}: {message}; fix its YAML or pass another config dir with -c")]
    Config { path: PathBuf, message: String },

    #[error("Formula file {0} not found: a formula directory needs a FORMULA file at its top")]
    FormulaMissing(PathBuf),

    #[error("Invalid package: a {0} must be defined in FORMULA")]
    FormulaFieldMissing(String),

    #[error("Invalid FORMULA {origin}: {message}")]
    FormulaInvalid { origin: String, message: String },

    #[error("Package file {0} not found")]
    PackageFileMissing(PathBuf),

    #[error("refusing package {path}: {reason}")]
    UnsafePackage { path: String, reason: String },

    #[error("Package {0} already installed, not installing again (use -f to force)")]
    AlreadyInstalled(String),

    #[error("Cannot install {package}, the following dependencies are needed:\n\n{missing}")]
    MissingDependencies { package: String, missing: String },

    #[error(
        "Not installing {package} due to existing files:\n\n{files}\n\n(use -f to overwrite them)"
    )]
    ExistingFiles { package: String, files: String },

    #[error("Package {0} not installed")]
    NotInstalled(String),

    #[error(
        "Cannot remove {package}: {dependents} depend(s) on it (remove those first, or use -f)"
    )]
    HasDependents { package: String, dependents: String },

    #[error("Package {0} was not found in any configured repository; run `halite-spm update_repo` or check spm_repos_config")]
    NotInRepos(String),

    #[error("repository {repo}: {message}")]
    Repo { repo: String, message: String },

    #[error("package {package} needs SPM {needed} or newer (this is {have})")]
    MinimumVersion {
        package: String,
        needed: String,
        have: String,
    },

    #[error("{stage} state of {package} failed: {message}")]
    StateFailed {
        package: String,
        stage: String,
        message: String,
    },

    #[error("no master reachable: {0}")]
    NoMaster(String),

    #[error("cannot render the {stage} state of {package}: {message}")]
    Render {
        package: String,
        stage: String,
        message: String,
    },

    #[error("canceled")]
    Canceled,

    #[error("package database {path}: {source}")]
    Database {
        path: PathBuf,
        source: rusqlite::Error,
    },

    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
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
