//! git_pillar: `ext_pillar: - git: [...]` as Salt 3008 compiles it. Each
//! remote is one branch of a repository (`- <branch> <url>`, or the
//! dict form with `root`, `env`, `name`, `base`...) checked out at fetch
//! time under `<cachedir>/git_pillar/`; its directory (below `root`) is
//! a pillar tree with its own top file for its pillar environment
//! (`env`, else `base` for the `git_pillar_base` branch, else the
//! branch's name). A `__env__` branch follows the pillarenv (or the
//! saltenv, or `base`). Each directory is compiled as `pillar_roots`
//! are, with the other directories of the same environment after it,
//! and the results merged in order.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use halite_modules::pillar_source::{PillarPart, PillarSource};
use halite_modules::{Host, LocalFileClient};
use serde_json::{Map, Value};

use crate::config::{git_pillar_remotes, RemoteConfig};
use crate::repo::{Repo, RepoState};

/// The branch a `__env__` remote checks out for the pillar environment `env`.
fn branch_for(cfg: &RemoteConfig, env: &str) -> String {
    if env == "base" {
        cfg.base.clone()
    } else {
        env.to_string()
    }
}

/// The commit `branch` names in `refs` (a branch, else a tag).
fn commit_of(refs: &BTreeMap<String, String>, branch: &str) -> Option<String> {
    refs.get(&format!("heads/{branch}"))
        .or_else(|| refs.get(&format!("tags/{branch}")))
        .cloned()
}

/// The pillar environment of a fixed-branch remote.
fn env_of(cfg: &RemoteConfig) -> String {
    cfg.env.clone().unwrap_or_else(|| {
        if cfg.branch == cfg.base {
            "base".to_string()
        } else {
            cfg.branch.clone()
        }
    })
}

/// The commits a remote needs checked out after a fetch.
fn wanted(cfg: &RemoteConfig, refs: &BTreeMap<String, String>) -> BTreeSet<String> {
    if cfg.branch == "__env__" {
        // Any branch may be asked for by a pillarenv.
        refs.iter()
            .filter(|(name, _)| name.starts_with("heads/"))
            .map(|(_, c)| c.clone())
            .collect()
    } else {
        commit_of(refs, &cfg.branch).into_iter().collect()
    }
}

/// One `git` entry of `ext_pillar`: its remotes and their caches.
#[derive(Debug)]
pub struct GitPillar {
    repos: Vec<Repo>,
    config_errors: Vec<String>,
    /// The index of its entry in `ext_pillar` (sources merge in that order).
    position: usize,
}

impl GitPillar {
    /// Every `git` entry of the master's `ext_pillar`, caching under
    /// `<cachedir>/git_pillar`. Misconfigured remotes are logged, and
    /// reported as pillar errors to the minions.
    pub fn from_opts(opts: &Value, cachedir: &Path) -> Vec<GitPillar> {
        let Some(Value::Array(entries)) = opts.get("ext_pillar") else {
            return Vec::new();
        };
        let root = cachedir.join("git_pillar");
        let mut out = Vec::new();
        for (position, entry) in entries.iter().enumerate() {
            let Some(items) = entry.get("git") else {
                continue;
            };
            let (remotes, errors) = git_pillar_remotes(opts, items);
            let config_errors: Vec<String> = errors.into_iter().map(|e| e.0).collect();
            for e in &config_errors {
                tracing::error!(error = %e, "git_pillar remote left out");
            }
            out.push(GitPillar {
                repos: remotes.into_iter().map(|r| Repo::new(&root, r)).collect(),
                config_errors,
                position,
            });
        }
        out
    }

    /// The index of this source's entry in `ext_pillar`: the other
    /// `ext_pillar` sources and this one are merged in that order.
    pub fn position(&self) -> usize {
        self.position
    }

    /// The remotes' caches.
    pub fn repos(&self) -> &[Repo] {
        &self.repos
    }

    /// Seconds between background fetches (`git_pillar_update_interval`).
    pub fn update_interval(&self) -> Option<u64> {
        self.repos.iter().map(|r| r.cfg.update_interval).min()
    }

    /// Fetches every remote (Salt's `git_pillar.update`); each remote's id
    /// and its error, if any (logged, credentials scrubbed).
    pub fn update(&self) -> Vec<(String, Option<String>)> {
        let mut out = Vec::new();
        for repo in &self.repos {
            let cfg = repo.cfg.clone();
            let result = repo.update(|refs| wanted(&cfg, refs));
            let id = repo.scrub(&repo.cfg.id);
            match &result {
                Ok(_) => tracing::info!(remote = %id, "git_pillar remote fetched"),
                Err(e) => {
                    tracing::warn!(remote = %id, error = %e, "git_pillar remote not updated; using its last good fetch")
                }
            }
            out.push((id, result.err()));
        }
        out
    }

    /// The pillar directories for a minion whose pillarenv is `pillarenv`
    /// (else `saltenv`): (directory, pillar environment), and the errors
    /// of remotes that cannot give one.
    fn dirs(
        &self,
        pillarenv: Option<&str>,
        saltenv: Option<&str>,
    ) -> (Vec<(PathBuf, String)>, Vec<String>) {
        let mut dirs = Vec::new();
        let mut errors: Vec<String> = self
            .config_errors
            .iter()
            .map(|e| format!("git_pillar: {e}"))
            .collect();
        for repo in &self.repos {
            let cfg = &repo.cfg;
            let state: RepoState = repo.state();
            if state.fetched.is_none() {
                errors.push(format!(
                    "git_pillar remote {} has never been fetched ({}); fix the remote and run 'halite-run git_pillar.update'",
                    repo.scrub(&cfg.id),
                    state.error.as_deref().unwrap_or("no fetch has finished yet")
                ));
                continue;
            }
            let (env, branch) = if cfg.branch == "__env__" {
                let env = pillarenv.or(saltenv).unwrap_or("base").to_string();
                let branch = branch_for(cfg, &env);
                (cfg.env.clone().unwrap_or(env), branch)
            } else {
                (env_of(cfg), cfg.branch.clone())
            };
            let Some(commit) = commit_of(&state.refs, &branch) else {
                // Salt logs this and gives nothing for the remote.
                tracing::debug!(remote = %repo.scrub(&cfg.id), %branch, "git_pillar branch not in the remote");
                continue;
            };
            let tree = repo.tree(&commit);
            let dir = if cfg.root.is_empty() {
                tree
            } else {
                tree.join(&cfg.root)
            };
            if dir.is_dir() {
                dirs.push((dir, env));
            }
        }
        (dirs, errors)
    }
}

impl PillarSource for GitPillar {
    fn name(&self) -> &str {
        "git"
    }

    fn position(&self) -> usize {
        self.position
    }

    fn compile(&self, host: &Host) -> PillarPart {
        let opt = |k: &str| {
            host.opts
                .get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        let pillarenv = opt("pillarenv");
        let (dirs, mut errors) = self.dirs(pillarenv, opt("saltenv"));
        let mut data = Value::Object(Map::new());
        for (i, (dir, env)) in dirs.iter().enumerate() {
            if pillarenv.is_some_and(|p| p != env) {
                continue;
            }
            // This directory first (its top file wins), then the others of its env.
            let mut roots = vec![dir.clone()];
            roots.extend(
                dirs.iter()
                    .enumerate()
                    .filter(|(j, (_, e))| *j != i && e == env)
                    .map(|(_, (d, _))| d.clone()),
            );
            let mut pillar_host = host.clone();
            pillar_host.files =
                std::sync::Arc::new(LocalFileClient::new(BTreeMap::from([(env.clone(), roots)])));
            let (compiled, errs) = halite_modules::pillar_render::compile_pillar(&pillar_host);
            halite_modules::exec::pillar::deep_merge(&mut data, &compiled);
            errors.extend(errs);
        }
        PillarPart { data, errors }
    }
}
