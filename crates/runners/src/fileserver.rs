//! Salt's `fileserver` runner functions over the master's backends
//! (`fileserver_backend`: roots and gitfs, in order): `file_list` and
//! `dir_list` (sorted, as Salt lists them), `envs`, and `update`, which
//! fetches the gitfs remotes into the cache the master reads (the master
//! sees the new commits at once), as `salt-run fileserver.update` does.
//! `git_pillar.update` fetches the git_pillar remotes the same way.

use halite_client::MasterConfig;
use halite_gitfs::pillar::GitPillar;
use halite_gitfs::Fileserver;
use halite_state::{FileClient, Value};

use crate::RunnerError;

fn client(cfg: &MasterConfig) -> Fileserver {
    Fileserver::from_opts(&cfg.opts(), cfg.file_roots.clone(), &cfg.cachedir)
}

/// Whether `backend=` (a name, a comma list or a list) asks for gitfs;
/// `None` asks for every backend.
fn wants_gitfs(backend: Option<&Value>) -> bool {
    let names: Vec<String> = match backend {
        None | Some(Value::Null) => return true,
        Some(Value::Array(items)) => items
            .iter()
            .map(halite_salt_rules::pyfmt::python_str)
            .collect(),
        Some(other) => halite_salt_rules::pyfmt::python_str(other)
            .split(',')
            .map(|s| s.trim().to_string())
            .collect(),
    };
    names.iter().any(|n| n == "git" || n == "gitfs")
}

/// `fileserver.file_list [saltenv=base]`: every file of the saltenv.
pub fn file_list(cfg: &MasterConfig, saltenv: &str) -> Result<Value, RunnerError> {
    let mut files = client(cfg)
        .list_files(saltenv, "")
        .map_err(|e| RunnerError::Failed(e.to_string()))?;
    files.sort();
    files.dedup();
    Ok(Value::from(files))
}

/// `fileserver.dir_list [saltenv=base]`: every directory of the saltenv.
pub fn dir_list(cfg: &MasterConfig, saltenv: &str) -> Result<Value, RunnerError> {
    let mut dirs = client(cfg)
        .list_dirs(saltenv, "")
        .map_err(|e| RunnerError::Failed(e.to_string()))?;
    dirs.sort();
    dirs.dedup();
    Ok(Value::from(dirs))
}

/// `fileserver.envs [backend=...]`: the saltenvs of every backend (or of
/// gitfs alone with `backend=gitfs`), sorted.
pub fn envs(cfg: &MasterConfig, backend: Option<&Value>) -> Result<Value, RunnerError> {
    let fs = client(cfg);
    let all = backend.is_none_or(Value::is_null);
    if !all && wants_gitfs(backend) {
        return Ok(Value::from(
            fs.gitfs().map(|g| g.envs()).unwrap_or_default(),
        ));
    }
    Ok(Value::from(fs.envs()))
}

/// `fileserver.update [backend=gitfs]`: fetches the gitfs remotes now.
/// `True` as in Salt when every remote was fetched; a remote that failed
/// is an error naming it (its last good fetch is still served).
pub fn update(cfg: &MasterConfig, backend: Option<&Value>) -> Result<Value, RunnerError> {
    let fs = client(cfg);
    let Some(gitfs) = fs.gitfs().filter(|_| wants_gitfs(backend)) else {
        // roots needs no update.
        return Ok(Value::Bool(true));
    };
    failures(gitfs.update(None), "gitfs")
}

/// `git_pillar.update`: fetches every git_pillar remote now.
pub fn git_pillar_update(cfg: &MasterConfig) -> Result<Value, RunnerError> {
    let mut all = Vec::new();
    for source in GitPillar::from_opts(&cfg.opts(), &cfg.cachedir) {
        all.extend(source.update());
    }
    failures(all, "git_pillar")
}

fn failures(report: Vec<(String, Option<String>)>, what: &str) -> Result<Value, RunnerError> {
    let failed: Vec<String> = report.into_iter().filter_map(|(_, e)| e).collect();
    if failed.is_empty() {
        Ok(Value::Bool(true))
    } else {
        Err(RunnerError::Failed(format!(
            "{what} update failed (the last good fetch is still served): {}",
            failed.join("; ")
        )))
    }
}
