//! The reference Salt (3008.5) that tests compare halite with: where it is
//! installed and how a test skips without it. Every such test finds Salt
//! here, so the venv's path logic exists once.
//!
//! Salt lives in a venv outside the repo, installed by
//! `scripts/install-salt.sh` (which `scripts/test.sh`, and so CI, runs):
//! `$SALT_ORACLE_VENV` when set, else `~/.venvs/salt`. A test without it
//! prints why it skips; with `SALT_ORACLE_REQUIRED=1` (set by
//! `scripts/test.sh` once Salt is installed) a missing Salt fails the
//! test instead, so CI cannot skip the comparisons silently.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The command that installs what [`Salt::find`] looks for.
pub const INSTALL_HINT: &str = "bash scripts/install-salt.sh installs it";

/// An installed Salt: the `bin` directory of its venv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Salt {
    bin: PathBuf,
}

/// Why no usable Salt was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing(pub String);

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The venv Salt is looked for in: `$SALT_ORACLE_VENV`, else `~/.venvs/salt`.
pub fn venv() -> Option<PathBuf> {
    if let Some(v) = std::env::var_os("SALT_ORACLE_VENV").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(v));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".venvs/salt"))
}

impl Salt {
    /// The installed Salt, or why there is none (the venv, its `salt-call`
    /// or its `python` missing).
    pub fn find() -> Result<Salt, Missing> {
        let venv = venv().ok_or_else(|| {
            Missing(format!(
                "no Salt: neither SALT_ORACLE_VENV nor HOME is set ({INSTALL_HINT})"
            ))
        })?;
        let bin = venv.join("bin");
        for tool in ["salt-call", "python"] {
            if !bin.join(tool).is_file() {
                return Err(Missing(format!(
                    "no Salt 3008.5: {} is missing ({INSTALL_HINT})",
                    bin.join(tool).display()
                )));
            }
        }
        Ok(Salt { bin })
    }

    /// The installed Salt for the test `test`; without it prints
    /// `skipped: <test>: <why>` and returns `None`, or panics when
    /// `SALT_ORACLE_REQUIRED` is set (CI, where a skip would hide a
    /// regression).
    pub fn for_test(test: &str) -> Option<Salt> {
        Self::find().map_or_else(|why| skip(test, &why.0), Some)
    }

    /// Like [`Salt::for_test`], also requiring the Python modules
    /// `modules` in Salt's venv (`git` for the gitfs provider).
    pub fn with_modules(test: &str, modules: &[&str]) -> Option<Salt> {
        let salt = Self::for_test(test)?;
        let probe = format!("import {}", modules.join(", "));
        let ok = Command::new(salt.python())
            .args(["-c", &probe])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(salt);
        }
        skip(
            test,
            &format!(
                "Salt's venv cannot `{probe}` ({} installs {})",
                "bash scripts/install-salt.sh",
                modules.join(", ")
            ),
        )
    }

    /// The venv's `bin` directory.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// The venv's Python (Salt importable).
    pub fn python(&self) -> PathBuf {
        self.bin.join("python")
    }

    /// Salt's `salt-call`.
    pub fn salt_call(&self) -> PathBuf {
        self.bin.join("salt-call")
    }

    /// Another of Salt's commands (`spm`, `salt-run`...).
    pub fn tool(&self, name: &str) -> PathBuf {
        self.bin.join(name)
    }
}

/// Prints the skip reason (or panics when Salt is required) for `test`.
fn skip(test: &str, why: &str) -> Option<Salt> {
    if std::env::var_os("SALT_ORACLE_REQUIRED").is_some_and(|v| !v.is_empty() && v != "0") {
        panic!("{test}: SALT_ORACLE_REQUIRED is set but {why}");
    }
    println!("skipped: {test}: {why}");
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn a_venv_without_salt_call_is_missing_with_the_path_named() {
        let dir = std::env::temp_dir().join(format!("salt-oracle-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::write(dir.join("bin/python"), "").unwrap();
        // SAFETY of the env change: this crate's only test that reads it.
        std::env::set_var("SALT_ORACLE_VENV", &dir);
        let err = Salt::find().unwrap_err();
        std::fs::write(dir.join("bin/salt-call"), "").unwrap();
        let found = Salt::find().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(err.0.contains("bin/salt-call is missing"), "{err}");
        assert_eq!(found.salt_call(), dir.join("bin/salt-call"));
    }
}
