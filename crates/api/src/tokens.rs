//! The eauth token store: SQLite under the master's cachedir
//! (`api_tokens.sqlite`), so tokens survive a restart of halite-api and
//! can be revoked (`halite-api --revoke ...`, or `/logout`). Only the
//! SHA-256 of each token is kept: a copy of the file grants nothing.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};

/// Why the token store failed.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// SQLite failed (the path is in the message).
    #[error(
        "token store {path}: {source}; check that the master's cachedir is writable by halite-api"
    )]
    Db {
        /// The database file.
        path: String,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// No randomness for a new token.
    #[error("cannot draw a random token: {0}")]
    Random(String),
    /// The store's lock was poisoned by a panic elsewhere.
    #[error("the token store is unusable after an internal error; restart halite-api")]
    Poisoned,
}

/// One token's record (Salt's token document without the secret).
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    /// The user name the token was minted for.
    pub name: String,
    /// The eauth backend that authenticated it.
    pub eauth: String,
    /// Unix time of the login.
    pub start: f64,
    /// Unix time it stops being valid.
    pub expire: f64,
    /// The user's groups at login (for `group%` entries).
    pub groups: BTreeSet<String>,
}

/// The store: one SQLite connection behind a mutex (tokens are few and
/// every query is a primary-key lookup).
pub struct TokenStore {
    conn: Mutex<Connection>,
    path: String,
}

fn digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Seconds since the epoch, as Salt's `time.time()`.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl TokenStore {
    /// Opens (creating) the store at `path`.
    pub fn open(path: &Path) -> Result<Self, TokenError> {
        let shown = path.display().to_string();
        let err = |source| TokenError::Db {
            path: shown.clone(),
            source,
        };
        let conn = Connection::open(path).map_err(err)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             CREATE TABLE IF NOT EXISTS tokens (
                 digest TEXT PRIMARY KEY,
                 name TEXT NOT NULL,
                 eauth TEXT NOT NULL,
                 start REAL NOT NULL,
                 expire REAL NOT NULL,
                 groups TEXT NOT NULL
             );",
        )
        .map_err(err)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        }
        Ok(Self {
            conn: Mutex::new(conn),
            path: shown,
        })
    }

    fn db<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, TokenError> {
        let conn = self.conn.lock().map_err(|_| TokenError::Poisoned)?;
        f(&conn).map_err(|source| TokenError::Db {
            path: self.path.clone(),
            source,
        })
    }

    /// Mints a new token for `record`; returns its secret (64 hex digits).
    pub fn create(&self, record: &Token) -> Result<String, TokenError> {
        let mut raw = [0u8; 32];
        getrandom::fill(&mut raw).map_err(|e| TokenError::Random(e.to_string()))?;
        let token = hex::encode(raw);
        let groups = serde_json::to_string(&record.groups).unwrap_or_else(|_| "[]".into());
        self.db(|c| {
            c.execute(
                "INSERT INTO tokens (digest, name, eauth, start, expire, groups) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![digest(&token), record.name, record.eauth, record.start, record.expire, groups],
            )
        })?;
        Ok(token)
    }

    /// The record of a valid token; `None` for an unknown or expired one
    /// (an expired one is removed, as Salt's `get_tok`).
    pub fn get(&self, token: &str) -> Result<Option<Token>, TokenError> {
        let key = digest(token);
        let found = self.db(|c| {
            c.query_row(
                "SELECT name, eauth, start, expire, groups FROM tokens WHERE digest = ?1",
                params![key],
                |row| {
                    let groups: String = row.get(4)?;
                    Ok(Token {
                        name: row.get(0)?,
                        eauth: row.get(1)?,
                        start: row.get(2)?,
                        expire: row.get(3)?,
                        groups: serde_json::from_str(&groups).unwrap_or_default(),
                    })
                },
            )
            .optional()
        })?;
        match found {
            Some(t) if t.expire > now() => Ok(Some(t)),
            Some(_) => {
                self.db(|c| c.execute("DELETE FROM tokens WHERE digest = ?1", params![key]))?;
                Ok(None)
            }
            None => Ok(None),
        }
    }

    /// Revokes one token; whether it existed.
    pub fn remove(&self, token: &str) -> Result<bool, TokenError> {
        let key = digest(token);
        Ok(self.db(|c| c.execute("DELETE FROM tokens WHERE digest = ?1", params![key]))? > 0)
    }

    /// Revokes every token of `user`; how many.
    pub fn revoke_user(&self, user: &str) -> Result<usize, TokenError> {
        self.db(|c| c.execute("DELETE FROM tokens WHERE name = ?1", params![user]))
    }

    /// Drops expired tokens; how many.
    pub fn purge_expired(&self) -> Result<usize, TokenError> {
        let t = now();
        self.db(|c| c.execute("DELETE FROM tokens WHERE expire <= ?1", params![t]))
    }

    /// The live tokens' records (no secrets), oldest first.
    pub fn list(&self) -> Result<Vec<Token>, TokenError> {
        let t = now();
        self.db(|c| {
            let mut stmt = c.prepare(
                "SELECT name, eauth, start, expire, groups FROM tokens WHERE expire > ?1 ORDER BY start",
            )?;
            let rows = stmt.query_map(params![t], |row| {
                let groups: String = row.get(4)?;
                Ok(Token {
                    name: row.get(0)?,
                    eauth: row.get(1)?,
                    start: row.get(2)?,
                    expire: row.get(3)?,
                    groups: serde_json::from_str(&groups).unwrap_or_default(),
                })
            })?;
            rows.collect()
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn record(expire_in: f64) -> Token {
        Token {
            name: "alice".into(),
            eauth: "file".into(),
            start: now(),
            expire: now() + expire_in,
            groups: ["ops".to_string()].into(),
        }
    }

    #[test]
    fn tokens_survive_reopening_and_can_be_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sqlite");
        let token = TokenStore::open(&path)
            .unwrap()
            .create(&record(60.0))
            .unwrap();
        assert_eq!(token.len(), 64);
        let store = TokenStore::open(&path).unwrap();
        let got = store.get(&token).unwrap().unwrap();
        assert_eq!(got.name, "alice");
        assert!(got.groups.contains("ops"));
        // Only the digest is on disk.
        let bytes = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(&token));
        assert!(store.remove(&token).unwrap());
        assert!(store.get(&token).unwrap().is_none());
    }

    #[test]
    fn expired_tokens_are_refused_and_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::open(&dir.path().join("t.sqlite")).unwrap();
        let token = store.create(&record(-1.0)).unwrap();
        assert!(store.get(&token).unwrap().is_none());
        assert!(store.list().unwrap().is_empty());
        let live = store.create(&record(60.0)).unwrap();
        assert_eq!(store.revoke_user("alice").unwrap(), 1);
        assert!(store.get(&live).unwrap().is_none());
    }
}
