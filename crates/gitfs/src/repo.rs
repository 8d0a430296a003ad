//! One remote's cache under `<cachedir>/gitfs/<hash of its id>/` (or
//! `git_pillar/`): a bare repository fetched with the `git` binary, one
//! checked-out directory per commit a ref points to (`trees/<commit>/`,
//! never changed once made, so readers need no lock), and `state.json`:
//! the refs of the last good fetch and why the last attempt failed.
//!
//! A failed fetch keeps the last good refs and trees: the master keeps
//! serving them. Credentials go to git through its askpass hook and the
//! environment of the one git process, never on a command line or in a
//! URL, and every message is scrubbed of them before it is logged.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use halite_modules::command::run_command;
use halite_salt_rules::shell::shlex_quote;
use halite_state::{CmdOptions, CmdTimeout};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::RemoteConfig;

/// How long one git command may run before it is killed (a hung remote
/// must not stall the updater forever).
const GIT_TIMEOUT: Duration = Duration::from_secs(300);

/// What the cache knows of a remote: its refs at the last good fetch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RepoState {
    /// The remote's id (its name or URL).
    pub id: String,
    /// `heads/<branch>` / `tags/<tag>` -> commit, at the last good fetch.
    pub refs: BTreeMap<String, String>,
    /// Unix time of the last good fetch; `None`: never fetched.
    pub fetched: Option<u64>,
    /// Why the last attempt failed (credentials scrubbed); `None` when it worked.
    pub error: Option<String>,
}

/// One remote's cache directory and how to fetch into it.
#[derive(Debug, Clone)]
pub struct Repo {
    /// The remote's options.
    pub cfg: RemoteConfig,
    /// `<cache_root>/<hash>`.
    dir: PathBuf,
    /// `<cache_root>` (holds the askpass helper).
    root: PathBuf,
}

/// The cache directory name of a remote id: the hex sha256 of the id (Salt
/// names it by a hash of the id too, so two remotes never share a cache).
pub fn cache_name(id: &str) -> String {
    hex::encode(Sha256::digest(id.as_bytes()))
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Repo {
    /// The cache of remote `cfg` under `cache_root` (`<cachedir>/gitfs`).
    pub fn new(cache_root: &Path, cfg: RemoteConfig) -> Self {
        Self {
            dir: cache_root.join(cache_name(&cfg.id)),
            root: cache_root.to_path_buf(),
            cfg,
        }
    }

    /// The remote's cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn git_dir(&self) -> PathBuf {
        self.dir.join("repo.git")
    }

    fn state_path(&self) -> PathBuf {
        self.dir.join("state.json")
    }

    /// The checked-out tree of `commit` (exists once that commit was fetched
    /// as the tip of a served ref).
    pub fn tree(&self, commit: &str) -> PathBuf {
        self.dir.join("trees").join(commit)
    }

    /// The cached state: the last good refs (empty when never fetched).
    pub fn state(&self) -> RepoState {
        std::fs::read(self.state_path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_else(|| RepoState {
                id: self.scrub(&self.cfg.id),
                ..RepoState::default()
            })
    }

    /// `text` with the remote's secrets and any `user:password@` of a URL hidden.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for secret in self.cfg.auth.secrets() {
            out = out.replace(secret, "***");
        }
        scrub_url_passwords(&out)
    }

    /// Fetches every branch and tag, checks out the commits `wanted` picks
    /// from the new refs, and records them as the last good state. On
    /// failure the last good state stays (with the error recorded) and the
    /// error, naming the remote, is returned.
    pub fn update(
        &self,
        wanted: impl Fn(&BTreeMap<String, String>) -> BTreeSet<String>,
    ) -> Result<RepoState, String> {
        std::fs::create_dir_all(&self.dir).map_err(|e| {
            format!(
                "cannot create the cache of git remote {}: {} ({e})",
                self.cfg.id,
                self.dir.display()
            )
        })?;
        // One fetch at a time per remote (the master's updater and halite-run).
        let lock = File::create(self.dir.join(".lock"))
            .and_then(|f| f.lock().map(|()| f))
            .map_err(|e| format!("cannot lock the cache of git remote {}: {e}", self.cfg.id))?;
        let old = self.state();
        let result = self.fetch_and_checkout(&old, &wanted);
        let state = match &result {
            Ok(refs) => RepoState {
                id: self.scrub(&self.cfg.id),
                refs: refs.clone(),
                fetched: Some(now()),
                error: None,
            },
            Err(e) => RepoState {
                error: Some(e.clone()),
                ..old.clone()
            },
        };
        self.write_state(&state)?;
        if result.is_ok() {
            self.collect_garbage(&old, &state, &wanted);
        }
        drop(lock);
        result.map(|_| state)
    }

    fn fetch_and_checkout(
        &self,
        _old: &RepoState,
        wanted: &impl Fn(&BTreeMap<String, String>) -> BTreeSet<String>,
    ) -> Result<BTreeMap<String, String>, String> {
        let git_dir = self.git_dir();
        if !git_dir.join("HEAD").is_file() {
            self.git(
                &["init", "--bare", "-q", &git_dir.display().to_string()],
                &[],
            )?;
        }
        let mut fetch = vec![
            "fetch",
            "--prune",
            "--force",
            "--quiet",
            "--no-write-fetch-head",
        ];
        fetch.extend([
            "--",
            &self.cfg.url,
            "+refs/heads/*:refs/heads/*",
            "+refs/tags/*:refs/tags/*",
        ]);
        self.git_in(&fetch, &[])?;
        let listed = self.git_in(
            &[
                "for-each-ref",
                "--format=%(refname) %(objectname) %(*objectname)",
                "refs/heads",
                "refs/tags",
            ],
            &[],
        )?;
        let mut refs = BTreeMap::new();
        for line in listed.lines() {
            let mut words = line.split_whitespace();
            let (Some(name), Some(obj)) = (words.next(), words.next()) else {
                continue;
            };
            // An annotated tag names its commit in %(*objectname).
            let commit = words.next().unwrap_or(obj);
            if let Some(short) = name.strip_prefix("refs/") {
                refs.insert(short.to_string(), commit.to_string());
            }
        }
        for commit in wanted(&refs) {
            self.checkout(&commit)?;
        }
        Ok(refs)
    }

    /// Makes `trees/<commit>` (once): checked out into a temporary
    /// directory, then renamed into place, so readers see all or nothing.
    fn checkout(&self, commit: &str) -> Result<(), String> {
        let dest = self.tree(commit);
        if dest.is_dir() {
            return Ok(());
        }
        let trees = self.dir.join("trees");
        let tmp = trees.join(format!(".tmp-{commit}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp)
            .map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
        let index = trees.join(format!(".index-{commit}-{}", std::process::id()));
        let out = self.git_in(
            &[
                "--work-tree",
                &tmp.display().to_string(),
                "read-tree",
                "--reset",
                "-u",
                commit,
            ],
            &[("GIT_INDEX_FILE", index.display().to_string())],
        );
        let _ = std::fs::remove_file(&index);
        if let Err(e) = out {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        std::fs::rename(&tmp, &dest)
            .map_err(|e| format!("cannot move {} into place: {e}", dest.display()))
    }

    fn write_state(&self, state: &RepoState) -> Result<(), String> {
        let tmp = self.dir.join(format!(".state.json.{}", std::process::id()));
        let bytes = serde_json::to_vec_pretty(state).map_err(|e| e.to_string())?;
        std::fs::write(&tmp, bytes)
            .and_then(|()| std::fs::rename(&tmp, self.state_path()))
            .map_err(|e| format!("cannot write {}: {e}", self.state_path().display()))
    }

    /// Removes the trees neither the new nor the previous state serves (a
    /// reader may still be sending a file of the previous one).
    fn collect_garbage(
        &self,
        old: &RepoState,
        new: &RepoState,
        wanted: &impl Fn(&BTreeMap<String, String>) -> BTreeSet<String>,
    ) {
        let mut keep = wanted(&new.refs);
        keep.extend(wanted(&old.refs));
        let Ok(entries) = std::fs::read_dir(self.dir.join("trees")) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if !keep.contains(&name) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }

    /// Runs git on the bare repository.
    fn git_in(&self, args: &[&str], env: &[(&str, String)]) -> Result<String, String> {
        let git_dir = self.git_dir().display().to_string();
        let mut all = vec!["--git-dir", git_dir.as_str()];
        all.extend_from_slice(args);
        self.git(&all, env)
    }

    /// Runs `git args` with the remote's credentials in its environment.
    fn git(&self, args: &[&str], env: &[(&str, String)]) -> Result<String, String> {
        // No credential helper: a `store` helper in the user's config would
        // write the password to disk.
        let mut words = vec!["git", "-c", "credential.helper="]
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>();
        if !self.cfg.ssl_verify {
            words.extend(["-c".to_string(), "http.sslVerify=false".to_string()]);
        }
        words.extend(args.iter().map(|a| a.to_string()));
        let line = words
            .iter()
            .map(|w| shlex_quote(w))
            .collect::<Vec<_>>()
            .join(" ");
        let mut opts = CmdOptions {
            env: self.auth_env(),
            timeout: Some(CmdTimeout {
                duration: GIT_TIMEOUT,
                shown: GIT_TIMEOUT.as_secs().to_string(),
            }),
            ..CmdOptions::default()
        };
        opts.env
            .extend(env.iter().map(|(k, v)| (k.to_string(), v.clone())));
        let out = run_command(&line, &opts).map_err(|e| {
            format!(
                "cannot run git for remote {}: {e}; install git (scripts/install-deps.sh)",
                self.cfg.id
            )
        })?;
        if out.retcode != 0 {
            let why = if out.stderr.trim().is_empty() {
                out.stdout.trim()
            } else {
                out.stderr.trim()
            };
            return Err(self.scrub(&format!(
                "git {} failed for remote {}: {why}",
                args.iter()
                    .find(|a| !a.starts_with('-') && !a.contains('/'))
                    .unwrap_or(&"command"),
                self.cfg.id
            )));
        }
        Ok(out.stdout)
    }

    /// The environment that gives git the remote's credentials: never a
    /// prompt on a terminal, the password through the askpass helper, the
    /// ssh key through `GIT_SSH_COMMAND`.
    fn auth_env(&self) -> Vec<(String, String)> {
        let auth = &self.cfg.auth;
        let mut env = vec![
            ("GIT_TERMINAL_PROMPT".to_string(), "0".to_string()),
            ("GIT_CONFIG_NOSYSTEM".to_string(), "1".to_string()),
            ("LC_ALL".to_string(), "C".to_string()),
        ];
        let askpass = self.askpass();
        if let Some(helper) = &askpass {
            env.push(("GIT_ASKPASS".into(), helper.display().to_string()));
            env.push(("HALITE_GIT_USER".into(), auth.user.clone()));
            env.push(("HALITE_GIT_PASSWORD".into(), auth.password.clone()));
        }
        if !auth.privkey.is_empty() {
            // Host keys: Salt's git CLI provider turns checking off
            // (StrictHostKeyChecking=no). halite trusts a server's key on
            // first use and refuses it if it changes later: new keys go to
            // `<cache_root>/known_hosts` (the master user's own
            // ~/.ssh/known_hosts is read too), never prompting.
            let known = format!(
                "{} ~/.ssh/known_hosts",
                self.root.join("known_hosts").display()
            );
            let mut ssh = format!(
                "ssh -i {} -o IdentitiesOnly=yes -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile={}",
                shlex_quote(&auth.privkey),
                shlex_quote(&known)
            );
            if auth.passphrase.is_empty() {
                ssh.push_str(" -o BatchMode=yes");
            } else if let Some(helper) = &askpass {
                env.push(("SSH_ASKPASS".into(), helper.display().to_string()));
                env.push(("SSH_ASKPASS_REQUIRE".into(), "force".into()));
                env.push(("HALITE_GIT_PASSPHRASE".into(), auth.passphrase.clone()));
            }
            env.push(("GIT_SSH_COMMAND".into(), ssh));
        }
        env
    }

    /// The askpass helper (written once, root-only): it answers git's and
    /// ssh's prompts from the variables of the one process that asks.
    fn askpass(&self) -> Option<PathBuf> {
        let auth = &self.cfg.auth;
        if auth.password.is_empty() && auth.passphrase.is_empty() {
            return None;
        }
        let path = self.root.join(".askpass");
        let script = "#!/bin/sh\ncase \"$1\" in\n  Username*) printf '%s\\n' \"$HALITE_GIT_USER\" ;;\n  *assphrase*) printf '%s\\n' \"$HALITE_GIT_PASSPHRASE\" ;;\n  *) printf '%s\\n' \"$HALITE_GIT_PASSWORD\" ;;\nesac\n";
        if std::fs::read_to_string(&path).ok().as_deref() != Some(script) {
            let tmp = self.root.join(format!(".askpass.{}", std::process::id()));
            std::fs::write(&tmp, script).ok()?;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o700)).ok()?;
            std::fs::rename(&tmp, &path).ok()?;
        }
        Some(path)
    }
}

/// Hides the password of every `scheme://user:password@host` in `text`.
pub fn scrub_url_passwords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c.is_whitespace() || c == '/' || c == '\'' || c == '"')
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) if authority[..at].contains(':') => {
                let user = authority[..at].split(':').next().unwrap_or("");
                out.push_str(user);
                out.push_str(":***");
                out.push_str(&authority[at..]);
            }
            _ => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_passwords_are_hidden() {
        assert_eq!(
            scrub_url_passwords("fatal: https://bob:hunter2@h.example/r.git and ssh://h/x"),
            "fatal: https://bob:***@h.example/r.git and ssh://h/x"
        );
        assert_eq!(
            scrub_url_passwords("git://127.0.0.1:9/r"),
            "git://127.0.0.1:9/r"
        );
    }
}
