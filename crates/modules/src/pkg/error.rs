//! Why a package operation failed: the one error type every provider
//! returns, in its own leaf file so the providers and the contract below
//! them import it without a circle through `pkg`.

use halite_state::Map;

/// Why a package operation failed. Messages carry the package manager's own
/// words so the user sees what apt or dnf said.
#[derive(Debug, thiserror::Error)]
pub enum PkgError {
    /// The arguments do not describe a valid request (Salt's SaltInvocationError).
    #[error("{0}")]
    Invocation(String),
    /// The package tool could not be started at all.
    #[error("could not run {program}: {source}; is it installed and on PATH?")]
    Spawn {
        /// The program that could not start (`apt-get`, `dpkg`...).
        program: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// The package tool ran and failed; `changes` is what changed anyway
    /// (Salt's CommandExecutionError with `info={"errors", "changes"}`).
    #[error("{message}{}", errors_suffix(.errors))]
    Failed {
        /// Salt's error message.
        message: String,
        /// The tool's errors, one per item.
        errors: Vec<String>,
        /// What changed anyway.
        changes: Map,
    },
    /// Reading or writing a package database or repo file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// This provider cannot do what was asked.
    #[error("{0}")]
    Unsupported(String),
}

fn errors_suffix(errors: &[String]) -> String {
    if errors.is_empty() {
        return String::new();
    }
    let mut s = String::from(". Additional info follows:\n\nerrors:");
    for e in errors {
        s.push_str("\n    - ");
        s.push_str(e);
    }
    s
}

impl PkgError {
    /// A failure with the tool's error text and no changes.
    pub fn failed(message: impl Into<String>, error: impl Into<String>) -> Self {
        let error = error.into();
        PkgError::Failed {
            message: message.into(),
            errors: if error.is_empty() {
                Vec::new()
            } else {
                vec![error]
            },
            changes: Map::new(),
        }
    }
    /// An I/O error on `path`.
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        PkgError::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }
    /// The changes that happened before the failure (empty for most errors).
    pub fn changes(&self) -> Map {
        match self {
            PkgError::Failed { changes, .. } => changes.clone(),
            _ => Map::new(),
        }
    }
}

impl From<PkgError> for crate::ExecError {
    fn from(e: PkgError) -> Self {
        match e {
            PkgError::Invocation(m) => crate::ExecError::Invocation(m),
            other => crate::ExecError::Execution(other.to_string()),
        }
    }
}

/// Shorthand for results of package operations.
pub type PkgResult<T> = Result<T, PkgError>;
