//! Salt's minion datastore (`salt/modules/data.py`): a msgpack map in
//! `<cachedir>/datastore`, the same file Salt writes, so a minion moved
//! from Salt keeps what it stored. The masterless mine keeps its
//! `mine_cache` key here, as Salt 3008's `mine` module does with
//! `file_client: local`. Encoded with `rmp-serde`, the msgpack crate the
//! wire (`halite-proto`) already uses.

use std::path::{Path, PathBuf};

use halite_state::{Map, Value};

/// Why the datastore could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum DatastoreError {
    /// The file exists but could not be read or is not a msgpack map.
    #[error("cannot read the minion datastore {path}: {reason}; fix or remove the file")]
    Read {
        /// The datastore file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The file could not be written.
    #[error(
        "cannot write the minion datastore {path}: {reason}; check that the cachedir is writable"
    )]
    Write {
        /// The datastore file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

/// The datastore of the minion whose cachedir is `cachedir`.
#[derive(Debug, Clone)]
pub struct Datastore {
    path: PathBuf,
}

impl Datastore {
    /// The datastore file under `cachedir` (Salt's `<cachedir>/datastore`).
    pub fn in_cachedir(cachedir: &Path) -> Self {
        Self {
            path: cachedir.join("datastore"),
        }
    }

    /// Salt's `data.load`: the whole store, `{}` when there is none yet.
    pub fn load(&self) -> Result<Map, DatastoreError> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
            Err(e) => return Err(self.read_error(e.to_string())),
        };
        if bytes.is_empty() {
            return Ok(Map::new());
        }
        match rmp_serde::from_slice::<Value>(&bytes) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(_) => Err(self.read_error("it does not hold a map".into())),
            Err(e) => Err(self.read_error(e.to_string())),
        }
    }

    /// Salt's `data.get <key>`: one value, `None` when absent.
    pub fn get(&self, key: &str) -> Result<Option<Value>, DatastoreError> {
        Ok(self.load()?.remove(key))
    }

    /// Salt's `data.update <key> <value>`: sets one key, keeping the others.
    pub fn update(&self, key: &str, value: Value) -> Result<(), DatastoreError> {
        let mut store = self.load()?;
        store.insert(key.to_string(), value);
        self.dump(&store)
    }

    /// Salt's `data.dump`: replaces the whole store (written to a temporary
    /// file beside it, then renamed: a crash leaves the old store whole).
    pub fn dump(&self, store: &Map) -> Result<(), DatastoreError> {
        let write_error = |reason: String| DatastoreError::Write {
            path: self.path.clone(),
            reason,
        };
        let bytes = rmp_serde::to_vec(store).map_err(|e| write_error(e.to_string()))?;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| write_error(e.to_string()))?;
        let mut tmp =
            tempfile::NamedTempFile::new_in(dir).map_err(|e| write_error(e.to_string()))?;
        std::io::Write::write_all(&mut tmp, &bytes).map_err(|e| write_error(e.to_string()))?;
        tmp.persist(&self.path)
            .map_err(|e| write_error(e.error.to_string()))?;
        Ok(())
    }

    fn read_error(&self, reason: String) -> DatastoreError {
        DatastoreError::Read {
            path: self.path.clone(),
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_msgpack_salt_writes() {
        let dir = tempfile::tempdir().unwrap();
        // Written by Salt 3008.5's `mine.send alias mine_function=test.echo
        // text=hi allow_tgt='*'` with `file_client: local`.
        let salt = b"\x81\xaamine_cache\x81\xa5alias\x83\xa8__data__\xa2hi\xb0__saltmine_acl__\x01\xa9allow_tgt\xa1*";
        std::fs::write(dir.path().join("datastore"), salt).unwrap();
        let store = Datastore::in_cachedir(dir.path());
        assert_eq!(
            store.get("mine_cache").unwrap(),
            Some(json!({"alias": {"__data__": "hi", "__saltmine_acl__": 1, "allow_tgt": "*"}}))
        );
        store.update("other", json!([1, 2])).unwrap();
        assert_eq!(store.load().unwrap().len(), 2);
    }

    #[test]
    fn a_broken_file_is_a_clear_error_and_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("datastore"), b"\xc1not msgpack").unwrap();
        let store = Datastore::in_cachedir(dir.path());
        let err = store.update("k", json!(1)).unwrap_err().to_string();
        assert!(err.contains("fix or remove the file"), "{err}");
        assert_eq!(
            std::fs::read(dir.path().join("datastore")).unwrap(),
            b"\xc1not msgpack"
        );
    }
}
