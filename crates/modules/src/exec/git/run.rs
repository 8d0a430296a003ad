//! Running the `git` binary the way Salt's `git._git_run` does: as the
//! `user` given, with each `identity` key tried in turn for ssh remotes,
//! and failures worded `Command 'git ...' failed: <stderr>` with any
//! `https://user:pass@` credentials redacted.
//!
//! Why one runner: every `git.*` execution function and every `git`
//! state goes through it, so runas, identities and the error text are
//! decided once.

use halite_state::{CmdOptions, CmdOutput, StateEnv};

use super::url::redact_http_basic_auth;
use crate::command::shell_quote;

/// The ssh options of Salt's `ssh-id-wrapper`: no prompts, no host key
/// questions, so a job never hangs waiting for a terminal.
const SSH_OPTS: &str = "ssh -oStrictHostKeyChecking=no -oPasswordAuthentication=no \
-oKbdInteractiveAuthentication=no -oChallengeResponseAuthentication=no";

/// A failed `git` command, as Salt's `CommandExecutionError` words it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.full())]
pub struct GitError {
    /// The command as shown (`git fetch origin`), credentials redacted;
    /// empty for errors that are not about one command.
    pub command: String,
    /// What went wrong: the command's stderr, or the whole message.
    pub detail: String,
}

impl GitError {
    /// An error that is a message of its own (no command to name).
    pub fn msg(detail: impl Into<String>) -> Self {
        Self {
            command: String::new(),
            detail: detail.into(),
        }
    }

    /// Salt's full text: `Command 'git ...' failed: <stderr>`.
    pub fn full(&self) -> String {
        if self.command.is_empty() {
            return self.detail.clone();
        }
        let mut s = format!("Command '{}' failed", self.command);
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// The text without its `Command '...' failed: ` prefix (Salt's
    /// `_strip_exc`), as the states quote it.
    pub fn stripped(&self) -> String {
        self.detail.clone()
    }
}

/// Who runs git and with which ssh keys: one per function call.
pub struct Git<'a> {
    env: &'a dyn StateEnv,
    /// Salt's `user`: git runs as this user (through `su`, as `cmd.run`'s `runas`).
    pub user: Option<String>,
    /// Salt's `identity`: ssh private keys, tried in order.
    pub identity: Vec<String>,
    /// The saltenv a `salt://` identity is fetched from.
    pub saltenv: String,
}

/// One git command to run: its words after `git`, where, and how its
/// failure is treated.
#[derive(Debug, Clone, Default)]
pub struct GitCmd {
    /// The words after `git` (`["rev-parse", "HEAD"]`).
    pub args: Vec<String>,
    /// The directory git works in (passed as `git -C`, so a missing one is git's own error).
    pub cwd: Option<String>,
    /// Salt's `failhard=False`: a non-zero exit is returned, not raised.
    pub soft: bool,
    /// Salt's `redirect_stderr`: stderr is read as the output too.
    pub merge_stderr: bool,
    /// Whether the command may reach a remote (the identities apply).
    pub remote: bool,
}

impl GitCmd {
    /// `git <args>` in `cwd`.
    pub fn new<S: AsRef<str>>(cwd: Option<&str>, args: &[S]) -> Self {
        Self {
            args: args.iter().map(|a| a.as_ref().to_string()).collect(),
            cwd: cwd.map(str::to_string),
            ..Self::default()
        }
    }
    /// Appends words.
    pub fn with<S: AsRef<str>>(mut self, more: &[S]) -> Self {
        self.args
            .extend(more.iter().map(|a| a.as_ref().to_string()));
        self
    }
    /// A non-zero exit is returned rather than raised.
    pub fn soft(mut self) -> Self {
        self.soft = true;
        self
    }
    /// Reads stderr as output too.
    pub fn merged(mut self) -> Self {
        self.merge_stderr = true;
        self
    }
    /// Talks to a remote: the identities are used.
    pub fn remote(mut self) -> Self {
        self.remote = true;
        self
    }
}

impl<'a> Git<'a> {
    /// A runner on `env` as `user` (none: the minion's own user).
    pub fn new(env: &'a dyn StateEnv, user: Option<String>) -> Self {
        Self {
            env,
            user,
            identity: Vec::new(),
            saltenv: "base".to_string(),
        }
    }

    /// The same runner with these ssh identities.
    pub fn with_identity(mut self, identity: Vec<String>) -> Self {
        self.identity = identity;
        self
    }

    /// Runs a command and returns its stdout (with `merge_stderr`,
    /// stdout then stderr), or Salt's error.
    pub fn out(&self, cmd: &GitCmd) -> Result<String, GitError> {
        self.run(cmd).map(|o| o.stdout)
    }

    /// Runs a command: with identities and a remote, each key in turn
    /// until one works, as Salt does.
    pub fn run(&self, cmd: &GitCmd) -> Result<CmdOutput, GitError> {
        if !cmd.remote || self.identity.is_empty() {
            return self.run_once(cmd, None);
        }
        let mut errors = Vec::new();
        let mut missing = Vec::new();
        let mut last = None;
        for id in &self.identity {
            let Some(path) = self.identity_path(id, &mut missing) else {
                continue;
            };
            match self.run_once(
                &GitCmd {
                    soft: true,
                    ..cmd.clone()
                },
                Some(&path),
            ) {
                Ok(out) if out.retcode == 0 => return Ok(out),
                Ok(out) => {
                    let err = if cmd.merge_stderr {
                        &out.stdout
                    } else {
                        &out.stderr
                    };
                    if !err.is_empty() {
                        errors.push(redact_http_basic_auth(err));
                    }
                    last = Some(out);
                }
                Err(e) => errors.push(e.full()),
            }
        }
        if cmd.soft {
            if let Some(out) = last {
                return Ok(out);
            }
        }
        let mut msg = format!(
            "Unable to authenticate using identity file:\n\n{}",
            errors.join("\n")
        );
        if !missing.is_empty() {
            if !errors.is_empty() {
                msg.push_str("\n\n");
            }
            msg.push_str(&format!(
                "The following identity file(s) were not found: {}",
                missing.join(", ")
            ));
        }
        Err(GitError::msg(msg))
    }

    /// The local path of identity `id` (a `salt://` one is fetched from
    /// the file server), `None` (recorded in `missing`) when it is absent.
    fn identity_path(&self, id: &str, missing: &mut Vec<String>) -> Option<String> {
        if let Some((path, env)) = halite_state::strip_salt_url(id) {
            let env = env.unwrap_or(&self.saltenv);
            return match self.env.file_client().cache_file(path, env) {
                Ok(Some(p)) => Some(p.display().to_string()),
                _ => {
                    tracing::error!("identity {id} does not exist.");
                    None
                }
            };
        }
        if std::path::Path::new(id).is_file() {
            Some(id.to_string())
        } else {
            tracing::error!("identity {id} does not exist.");
            missing.push(id.to_string());
            None
        }
    }

    /// One run of `git`, with `identity` as the ssh key when given.
    fn run_once(&self, cmd: &GitCmd, identity: Option<&str>) -> Result<CmdOutput, GitError> {
        // git never asks for a password: a missing credential fails
        // instead of hanging. command.rs keeps this environment for `user`.
        let mut env = vec![("GIT_TERMINAL_PROMPT".to_string(), "0".to_string())];
        if let Some(key) = identity {
            env.push((
                "GIT_SSH_COMMAND".to_string(),
                format!("{SSH_OPTS} -i {}", shell_quote(key)),
            ));
        }
        let mut words: Vec<String> = vec!["git".into()];
        if let Some(cwd) = &cmd.cwd {
            words.push("-C".into());
            words.push(cwd.clone());
        }
        words.extend(cmd.args.iter().cloned());
        let line = words
            .iter()
            .map(|w| shell_quote(w))
            .collect::<Vec<_>>()
            .join(" ");
        let opts = CmdOptions {
            runas: self.user.clone(),
            env,
            ..CmdOptions::default()
        };
        let shown = redact_http_basic_auth(&format!("git {}", cmd.args.join(" ")));
        tracing::debug!(command = %shown, cwd = ?cmd.cwd, user = ?self.user, "git");
        let mut out = self.env.run_cmd(&line, &opts).map_err(|e| GitError {
            command: shown.clone(),
            detail: format!("cannot run git: {e} (is git installed? apt-get install git)"),
        })?;
        if cmd.merge_stderr && !out.stderr.is_empty() {
            if !out.stdout.is_empty() {
                out.stdout.push('\n');
            }
            out.stdout.push_str(&std::mem::take(&mut out.stderr));
        }
        if out.retcode == 0 || cmd.soft {
            return Ok(out);
        }
        let err = if cmd.merge_stderr {
            &out.stdout
        } else {
            &out.stderr
        };
        Err(GitError {
            command: shown,
            detail: redact_http_basic_auth(err),
        })
    }
}
