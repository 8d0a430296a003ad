//! Salt's `fileserver` runner functions over the master's `file_roots`:
//! `fileserver.file_list` and `fileserver.dir_list` (sorted, as Salt's
//! roots backend lists them).

use halite_client::MasterConfig;
use halite_modules::LocalFileClient;
use halite_state::{FileClient, Value};

use crate::RunnerError;

fn client(cfg: &MasterConfig) -> LocalFileClient {
    LocalFileClient::new(cfg.file_roots.clone())
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
