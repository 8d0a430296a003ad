//! Running package tools: argument vectors (never a shell), no standard
//! input, and the non-interactive environment Salt sets, so a prompt can
//! never hang a run.

use std::process::{Command, Stdio};

use super::error::{PkgError, PkgResult};

/// The environment Salt's aptpkg sets for every apt/dpkg call
/// (`DPKG_ENV_VARS`): no debconf questions, no listbugs/listchanges pagers,
/// keep old config files under ucf.
pub const DPKG_ENV: &[(&str, &str)] = &[
    ("APT_LISTBUGS_FRONTEND", "none"),
    ("APT_LISTCHANGES_FRONTEND", "none"),
    ("DEBIAN_FRONTEND", "noninteractive"),
    ("UCF_FORCE_CONFFOLD", "1"),
];

/// What a package tool printed and returned.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    /// The exit code.
    pub retcode: i32,
    /// What it printed on standard output.
    pub stdout: String,
    /// What it printed on standard error.
    pub stderr: String,
}

impl ToolOutput {
    /// Whether it exited 0.
    pub fn success(&self) -> bool {
        self.retcode == 0
    }
    /// stderr, or stdout when stderr is empty: the text to show the user.
    pub fn message(&self) -> String {
        let s = if self.stderr.trim().is_empty() {
            &self.stdout
        } else {
            &self.stderr
        };
        s.trim().to_string()
    }
}

/// Runs `argv` with `env` added, stdin closed, both pipes captured.
pub fn run(argv: &[String], env: &[(&str, &str)]) -> PkgResult<ToolOutput> {
    let Some((program, args)) = argv.split_first() else {
        return Err(PkgError::Invocation("empty command".into()));
    };
    tracing::debug!(?argv, "running package tool");
    let out = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .map_err(|source| PkgError::Spawn {
            program: program.clone(),
            source,
        })?;
    let retcode = out.status.code().unwrap_or(1);
    Ok(ToolOutput {
        retcode,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Builds an argument vector from string slices.
pub fn argv<I, S>(parts: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    parts.into_iter().map(Into::into).collect()
}
