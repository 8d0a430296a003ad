//! The job cache: SQLite in WAL mode under `cachedir`. Jobs, returns, the
//! grains each minion last reported and the pillar the master last compiled
//! for it (Salt's `minion_data_cache`, read by pillar targets and the
//! `cache.grains`/`cache.pillar` runners), and each minion's mine
//! (`cache.mine`, `mine.get`). A return is committed here before
//! the master acknowledges it to the minion.
//!
//! A return's value (`returns.ret`) is stored as a BLOB: its msgpack
//! bytes, zstd-compressed (issue 25: a 1,000-state return was ~250 KB of
//! JSON per minion through SQLite and its WAL, and transcoding it to JSON
//! was a tenth of the master's warm CPU). Caches written before hold JSON
//! TEXT there; SQLite keeps each value's own type, so both kinds of row
//! are read ([`JobCache::returns`]) and no migration rewrites old rows.

use std::path::Path;

use halite_proto::msg::{Job, JobReturn};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Map, Value};

/// Why the job cache failed.
#[derive(Debug, thiserror::Error)]
pub enum JobCacheError {
    #[error(
        "job cache {path}: {source}; check that cachedir is writable and the disk is not full"
    )]
    /// The SQLite database could not be used.
    Sqlite {
        /// The database file.
        path: String,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// A stored return is not valid JSON.
    #[error("job cache holds malformed JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A return's value could not be encoded or compressed for storage.
    #[error("a return's value cannot be stored: {0}")]
    Encode(String),
}

/// zstd's level for stored returns: level 1 compresses a 1,000-state
/// return's msgpack ~15x at a fraction of the cost of the JSON it replaced
/// (docs/benchmarks.md, issue 25 session 17).
const RETURN_ZSTD_LEVEL: i32 = 1;

/// How a return's value reaches [`JobCache::store_return_rows`].
#[derive(Debug, Clone, Copy)]
pub enum ReturnValue<'r> {
    /// Decoded, in the return itself: packed and compressed here.
    Decoded,
    /// Its msgpack bytes, checked by [`halite_proto::packed::check`]:
    /// compressed here, never decoded (issue 25).
    Packed(&'r [u8]),
    /// One zstd frame of its msgpack bytes, which expands to checked
    /// bytes without a dictionary ([`halite_proto::packed::unframe`]):
    /// stored as it is, the row it makes read as a compressed one (issue
    /// 25, session 24: the minion's own frame, so the master compresses
    /// nothing).
    Framed(&'r [u8]),
}

/// A return's value as the `ret` column holds it: JSON text (masters
/// before issue 25's session 17) or a zstd frame of its msgpack bytes.
/// `None` (logged) when it cannot be read.
fn stored_return(column: rusqlite::types::ValueRef<'_>, jid: &str, id: &str) -> Option<Value> {
    let what = format!("return of {id} for job");
    match column {
        rusqlite::types::ValueRef::Text(text) => match std::str::from_utf8(text) {
            Ok(text) => stored_json(text, &what, jid),
            Err(e) => {
                tracing::warn!(%jid, %id, error = %e, "the job cache's {what} {jid} is not UTF-8; skipped");
                None
            }
        },
        rusqlite::types::ValueRef::Blob(blob) => {
            let read = zstd::decode_all(blob)
                .map_err(|e| e.to_string())
                .and_then(|bytes| halite_proto::packed::unpack(&bytes).map_err(|e| e.to_string()));
            match read {
                Ok(value) => Some(value),
                Err(e) => {
                    tracing::warn!(%jid, %id, error = %e, "the job cache's {what} {jid} cannot be read; skipped");
                    None
                }
            }
        }
        other => {
            tracing::warn!(%jid, %id, kind = ?other.data_type(), "the job cache's {what} {jid} is neither JSON nor packed; skipped");
            None
        }
    }
}

/// Parses a JSON column; a value that cannot be read (written by an older
/// master before values were depth-limited, or damaged) is skipped with a
/// log line instead of failing the start or the whole lookup.
fn stored_json(text: &str, what: &str, key: &str) -> Option<Value> {
    match serde_json::from_str(text) {
        Ok(value) => Some(value),
        Err(e) => {
            tracing::warn!(%key, error = %e, "the job cache's {what} {key} cannot be read; skipped");
            None
        }
    }
}

/// The first `N` columns of a row, as text (the jobs table's columns).
fn texts<const N: usize>(r: &rusqlite::Row<'_>) -> rusqlite::Result<[String; N]> {
    let mut out: [String; N] = std::array::from_fn(|_| String::new());
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = r.get(i)?;
    }
    Ok(out)
}

/// A minion id and its mine (`{function or alias: data}`).
pub type MinionMine = (String, Map<String, Value>);

/// An open job cache.
pub struct JobCache {
    conn: Connection,
    path: String,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    jid TEXT PRIMARY KEY,
    fun TEXT NOT NULL,
    arg TEXT NOT NULL,
    tgt TEXT NOT NULL,
    tgt_type TEXT NOT NULL,
    user TEXT NOT NULL,
    minions TEXT NOT NULL,
    load TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS returns (
    jid TEXT NOT NULL,
    id TEXT NOT NULL,
    fun TEXT NOT NULL,
    fun_args TEXT NOT NULL,
    -- JSON text (before issue 25's session 17) or a zstd frame of msgpack (a BLOB)
    ret TEXT NOT NULL,
    retcode INTEGER NOT NULL,
    success INTEGER NOT NULL,
    PRIMARY KEY (jid, id)
);
CREATE TABLE IF NOT EXISTS minion_data (
    id TEXT PRIMARY KEY,
    grains TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS minion_pillar (
    id TEXT PRIMARY KEY,
    pillar TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS minion_mine (
    id TEXT PRIMARY KEY,
    mine TEXT NOT NULL
);
";

impl JobCache {
    /// Opens (creating) the cache at `path` in WAL mode.
    pub fn open(path: &Path) -> Result<Self, JobCacheError> {
        let name = path.display().to_string();
        let err = |source| JobCacheError::Sqlite {
            path: name.clone(),
            source,
        };
        let conn = Connection::open(path).map_err(err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(err)?;
        conn.execute_batch(SCHEMA).map_err(err)?;
        // A cache written before the jobs kept their load keys.
        let has_load: bool = conn
            .query_row(
                "SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name = 'load'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map_err(err)?
            > 0;
        if !has_load {
            conn.execute_batch("ALTER TABLE jobs ADD COLUMN load TEXT NOT NULL DEFAULT '{}'")
                .map_err(err)?;
        }
        Ok(Self { conn, path: name })
    }

    /// Leaves the WAL's checkpoints to another connection (the master's
    /// checkpointer, issue 25): a commit here never waits for a checkpoint's
    /// flush. Durability is unchanged (`synchronous=NORMAL`); whoever calls
    /// this must checkpoint, or the WAL grows without bound.
    pub fn without_autocheckpoint(self) -> Result<Self, JobCacheError> {
        self.conn
            .pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(self.err())?;
        Ok(self)
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> JobCacheError + '_ {
        move |source| JobCacheError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Records a published job. `load` holds the keys Salt keeps in a
    /// job's load beside the call (`ret`, `ret_config`, `ret_kwargs`: the
    /// returners `--return` named), never among its `arg`; [`JobCache::job`]
    /// gives them back.
    pub fn store_job(&self, job: &Job, load: &Map<String, Value>) -> Result<(), JobCacheError> {
        let arg = job.salt_arg();
        self.conn
            .execute(
                "INSERT OR REPLACE INTO jobs (jid, fun, arg, tgt, tgt_type, user, minions, load) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    job.jid,
                    job.fun,
                    serde_json::to_string(&arg)?,
                    job.tgt,
                    job.tgt_type,
                    job.user,
                    serde_json::to_string(&job.minions)?,
                    serde_json::to_string(load)?
                ],
            )
            .map_err(self.err())?;
        Ok(())
    }

    /// Commits a batch of returns in one transaction (so 10 000 returns
    /// cost one fsync, not 10 000). For each, whether it is new: a minion
    /// resends a return whose acknowledgement it missed, and that copy
    /// (stored again, the same) must not fire its event twice.
    pub fn store_returns<'r>(
        &mut self,
        returns: impl IntoIterator<Item = &'r JobReturn>,
    ) -> Result<Vec<bool>, JobCacheError> {
        self.store_return_rows(returns.into_iter().map(|r| (r, ReturnValue::Decoded)))
    }

    /// As [`JobCache::store_returns`], where a return may come with its
    /// value already packed or framed ([`ReturnValue`], stored instead of
    /// encoding `ret.ret`): the master's writer stores a packed return's
    /// bytes without building or transcoding the value, and a framed
    /// one's frame without compressing it (issue 25).
    pub fn store_return_rows<'r>(
        &mut self,
        returns: impl IntoIterator<Item = (&'r JobReturn, ReturnValue<'r>)>,
    ) -> Result<Vec<bool>, JobCacheError> {
        let path = self.path.clone();
        let err = |source| JobCacheError::Sqlite {
            path: path.clone(),
            source,
        };
        // Immediate: the write lock is taken first, waiting (busy_timeout)
        // for another connection's write; a deferred transaction that
        // reads first fails at once with "database is locked" when another
        // connection wrote meanwhile (the master's return writer runs
        // beside its main connection).
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(err)?;
        let mut fresh = Vec::new();
        let mut compressor = zstd::bulk::Compressor::new(RETURN_ZSTD_LEVEL)
            .map_err(|e| JobCacheError::Encode(format!("zstd: {e}")))?;
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO returns (jid, id, fun, fun_args, ret, retcode, success) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .map_err(err)?;
            let mut known = tx
                .prepare_cached("SELECT EXISTS(SELECT 1 FROM returns WHERE jid = ?1 AND id = ?2)")
                .map_err(err)?;
            for (r, value) in returns {
                let stored: bool = known
                    .query_row(params![r.jid, r.id], |row| row.get(0))
                    .map_err(err)?;
                fresh.push(!stored);
                let compressed = match value {
                    ReturnValue::Framed(frame) => std::borrow::Cow::Borrowed(frame),
                    ReturnValue::Packed(bytes) => std::borrow::Cow::Owned(
                        compressor
                            .compress(bytes)
                            .map_err(|e| JobCacheError::Encode(format!("zstd: {e}")))?,
                    ),
                    ReturnValue::Decoded => {
                        let encoded = halite_proto::packed::pack(&r.ret)
                            .map_err(|e| JobCacheError::Encode(e.to_string()))?;
                        std::borrow::Cow::Owned(
                            compressor
                                .compress(&encoded)
                                .map_err(|e| JobCacheError::Encode(format!("zstd: {e}")))?,
                        )
                    }
                };
                stmt.execute(params![
                    r.jid,
                    r.id,
                    r.fun,
                    serde_json::to_string(&r.fun_args)?,
                    &compressed[..],
                    r.retcode,
                    r.success
                ])
                .map_err(err)?;
            }
        }
        tx.commit().map_err(err)?;
        Ok(fresh)
    }

    /// Remembers the grains `id` reported.
    pub fn store_grains(&self, id: &str, grains: &Value) -> Result<(), JobCacheError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO minion_data (id, grains) VALUES (?1, ?2)",
                params![id, serde_json::to_string(grains)?],
            )
            .map_err(self.err())?;
        Ok(())
    }

    /// Remembers the grains of many minions in one transaction.
    pub fn store_grains_many(&mut self, grains: &[(String, Value)]) -> Result<(), JobCacheError> {
        let path = self.path.clone();
        let err = |source| JobCacheError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(err)?;
        {
            let mut stmt = tx
                .prepare_cached("INSERT OR REPLACE INTO minion_data (id, grains) VALUES (?1, ?2)")
                .map_err(err)?;
            for (id, g) in grains {
                stmt.execute(params![id, serde_json::to_string(g)?])
                    .map_err(err)?;
            }
        }
        tx.commit().map_err(err)?;
        Ok(())
    }

    /// Each minion's newest return: `(id, jid)` of the latest job it
    /// answered, the "last seen" halite-api's console shows (a jid is its
    /// start time, so the newest jid is the latest contact).
    pub fn last_returns(&self) -> Result<Vec<(String, String)>, JobCacheError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, MAX(jid) FROM returns GROUP BY id ORDER BY id")
            .map_err(self.err())?;
        let rows = stmt
            .query_map([], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
            })
            .map_err(self.err())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.err())
    }

    /// Every cached minion's grains.
    pub fn all_grains(&self) -> Result<Vec<(String, Value)>, JobCacheError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, grains FROM minion_data")
            .map_err(self.err())?;
        let rows = stmt
            .query_map([], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
            })
            .map_err(self.err())?;
        let mut out = Vec::new();
        for row in rows {
            let (id, grains) = row.map_err(self.err())?;
            if let Some(grains) = stored_json(&grains, "grains", &id) {
                out.push((id, grains));
            }
        }
        Ok(out)
    }

    /// Remembers the pillar the master compiled for `id` (replacing the
    /// previous one), so pillar targets and `cache.pillar` see it after a
    /// restart.
    pub fn store_pillar(&self, id: &str, pillar: &Value) -> Result<(), JobCacheError> {
        let text = serde_json::to_string(pillar)?;
        self.conn
            .prepare_cached("INSERT OR REPLACE INTO minion_pillar (id, pillar) VALUES (?1, ?2)")
            .and_then(|mut stmt| stmt.execute(params![id, text]))
            .map_err(self.err())?;
        Ok(())
    }

    /// Every cached minion's pillar, as the master last compiled it: what
    /// `halite-run cache.pillar` prints (filtered by its target) and what
    /// the master loads at start for pillar targets.
    pub fn all_pillars(&self) -> Result<Vec<(String, Value)>, JobCacheError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, pillar FROM minion_pillar ORDER BY id")
            .map_err(self.err())?;
        let rows = stmt
            .query_map([], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
            })
            .map_err(self.err())?;
        let mut out = Vec::new();
        for row in rows {
            let (id, pillar) = row.map_err(self.err())?;
            if let Some(pillar) = stored_json(&pillar, "pillar", &id) {
                out.push((id, pillar));
            }
        }
        Ok(out)
    }

    /// One minion's cached pillar; `None` when the master has never
    /// compiled for it (Salt's `cache.pillar` then shows nothing for it).
    pub fn pillar(&self, id: &str) -> Result<Option<Value>, JobCacheError> {
        let text: Option<String> = self
            .conn
            .query_row(
                "SELECT pillar FROM minion_pillar WHERE id = ?1",
                params![id],
                |row| row.get(0),
            )
            .optional()
            .map_err(self.err())?;
        Ok(text.and_then(|t| stored_json(&t, "pillar", id)))
    }

    /// Stores minion `id`'s whole mine (`{function or alias: data}`,
    /// replacing the previous one); an empty mine removes the row, as
    /// `mine.flush` empties Salt's cache bank.
    pub fn store_mine(&self, id: &str, mine: &Map<String, Value>) -> Result<(), JobCacheError> {
        if mine.is_empty() {
            self.conn
                .execute("DELETE FROM minion_mine WHERE id = ?1", params![id])
                .map_err(self.err())?;
            return Ok(());
        }
        let text = serde_json::to_string(mine)?;
        self.conn
            .prepare_cached("INSERT OR REPLACE INTO minion_mine (id, mine) VALUES (?1, ?2)")
            .and_then(|mut stmt| stmt.execute(params![id, text]))
            .map_err(self.err())?;
        Ok(())
    }

    /// Drops minion `id`'s cached pillar row (its pillar now holds secrets
    /// that must not be written to disk).
    pub fn drop_pillar(&self, id: &str) -> Result<(), JobCacheError> {
        self.conn
            .execute("DELETE FROM minion_pillar WHERE id = ?1", params![id])
            .map_err(self.err())?;
        Ok(())
    }

    /// Every minion's mine as stored (entries with `allow_tgt` still
    /// wrapped): what the master loads at start and `cache.mine` prints.
    pub fn all_mine(&self) -> Result<Vec<MinionMine>, JobCacheError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, mine FROM minion_mine ORDER BY id")
            .map_err(self.err())?;
        let rows = stmt
            .query_map([], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
            })
            .map_err(self.err())?;
        let mut out = Vec::new();
        for row in rows {
            let (id, mine) = row.map_err(self.err())?;
            if let Some(Value::Object(mine)) = stored_json(&mine, "mine", &id) {
                out.push((id, mine));
            }
        }
        Ok(out)
    }

    /// Forgets a minion's cached data, grains, pillar and mine (its key
    /// was deleted).
    pub fn forget_minion(&self, id: &str) -> Result<(), JobCacheError> {
        for sql in [
            "DELETE FROM minion_data WHERE id = ?1",
            "DELETE FROM minion_pillar WHERE id = ?1",
            "DELETE FROM minion_mine WHERE id = ?1",
        ] {
            self.conn.execute(sql, params![id]).map_err(self.err())?;
        }
        Ok(())
    }

    /// `jobs.list_jobs`: `{jid: {Function, Arguments, Target, Target-type, User, StartTime}}`.
    pub fn list_jobs(&self) -> Result<Map<String, Value>, JobCacheError> {
        let mut stmt = self
            .conn
            .prepare("SELECT jid, fun, arg, tgt, tgt_type, user FROM jobs ORDER BY jid")
            .map_err(self.err())?;
        let rows = stmt.query_map([], texts::<6>).map_err(self.err())?;
        let mut out = Map::new();
        for row in rows {
            let [jid, fun, arg, tgt, tgt_type, user] = row.map_err(self.err())?;
            let Some(arg) = stored_json(&arg, "job arguments", &jid) else {
                continue;
            };
            let start = halite_proto::jid::jid_start_time(&jid);
            out.insert(
                jid,
                json!({
                    "Function": fun,
                    "Arguments": arg,
                    "Target": tgt,
                    "Target-type": tgt_type,
                    "User": user,
                    "StartTime": start,
                }),
            );
        }
        Ok(out)
    }

    /// The job's record (Salt's load: `jid`, `fun`, `arg`, `tgt`,
    /// `tgt_type`, `user`, `minions`, and the load keys it was stored
    /// with, such as `ret`), if stored.
    pub fn job(&self, jid: &str) -> Result<Option<Value>, JobCacheError> {
        let row = self
            .conn
            .query_row(
                "SELECT fun, arg, tgt, tgt_type, user, minions, load FROM jobs WHERE jid = ?1",
                params![jid],
                texts::<7>,
            )
            .optional()
            .map_err(self.err())?;
        let Some([fun, arg, tgt, tgt_type, user, minions, load]) = row else {
            return Ok(None);
        };
        let (Some(arg), Some(minions)) = (
            stored_json(&arg, "job arguments", jid),
            stored_json(&minions, "job targets", jid),
        ) else {
            return Ok(None);
        };
        let mut record = match stored_json(&load, "job load", jid) {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        for (k, v) in [
            ("jid", json!(jid)),
            ("fun", json!(fun)),
            ("arg", arg),
            ("tgt", json!(tgt)),
            ("tgt_type", json!(tgt_type)),
            ("user", json!(user)),
            ("minions", minions),
        ] {
            record.insert(k.into(), v);
        }
        Ok(Some(Value::Object(record)))
    }

    /// Every stored return of `jid`: `[(minion id, full return record)]`, by id.
    pub fn returns(&self, jid: &str) -> Result<Vec<(String, Value)>, JobCacheError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, fun, fun_args, ret, retcode, success FROM returns WHERE jid = ?1 ORDER BY id")
            .map_err(self.err())?;
        let rows = stmt
            .query_map(params![jid], |r| {
                let id = r.get::<_, String>(0)?;
                let ret = stored_return(r.get_ref(3)?, jid, &id);
                Ok((
                    id,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    ret,
                    r.get::<_, i64>(4)?,
                    r.get::<_, bool>(5)?,
                ))
            })
            .map_err(self.err())?;
        let mut out = Vec::new();
        for row in rows {
            let (id, fun, fun_args, ret, retcode, success) = row.map_err(self.err())?;
            let what = format!("return of {id} for job");
            let (Some(fun_args), Some(ret)) = (stored_json(&fun_args, &what, jid), ret) else {
                continue;
            };
            out.push((
                id.clone(),
                json!({
                    "id": id, "jid": jid, "fun": fun,
                    "fun_args": fun_args,
                    "return": ret,
                    "retcode": retcode, "success": success,
                }),
            ));
        }
        Ok(out)
    }

    /// The stored value of `id`'s return for `jid` as msgpack bytes (what
    /// the minion sent, as the master's event bus carries it), if stored:
    /// the master's bus reads back this way a return it did not keep in
    /// memory for a slow watcher (issue 25, session 19).
    pub fn packed_return(&self, jid: &str, id: &str) -> Result<Option<Vec<u8>>, JobCacheError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT ret FROM returns WHERE jid = ?1 AND id = ?2")
            .map_err(self.err())?;
        let mut rows = stmt.query(params![jid, id]).map_err(self.err())?;
        let Some(row) = rows.next().map_err(self.err())? else {
            return Ok(None);
        };
        match row.get_ref(0).map_err(self.err())? {
            rusqlite::types::ValueRef::Blob(blob) => zstd::decode_all(blob)
                .map(Some)
                .map_err(|e| JobCacheError::Encode(format!("zstd: {e}"))),
            rusqlite::types::ValueRef::Text(text) => {
                let value: Value = serde_json::from_slice(text)?;
                halite_proto::packed::pack(&value)
                    .map(Some)
                    .map_err(|e| JobCacheError::Encode(e.to_string()))
            }
            other => Err(JobCacheError::Encode(format!(
                "the stored return is a {:?}, neither JSON nor packed",
                other.data_type()
            ))),
        }
    }

    /// Deletes jobs (and their returns) older than `keep_jobs_hours`; the
    /// number of jobs removed. 0 keeps everything, as in Salt.
    pub fn clean_old_jobs(&self, keep_jobs_hours: u64) -> Result<usize, JobCacheError> {
        if keep_jobs_hours == 0 {
            return Ok(0);
        }
        let hours = i64::try_from(keep_jobs_hours).unwrap_or(i64::MAX / 3_600_000_000);
        let cutoff = chrono::Utc::now() - chrono::Duration::hours(hours);
        let cutoff_jid = cutoff.naive_utc().format("%Y%m%d%H%M%S%6f").to_string();
        self.conn
            .execute("DELETE FROM returns WHERE jid < ?1", params![cutoff_jid])
            .map_err(self.err())?;
        let n = self
            .conn
            .execute("DELETE FROM jobs WHERE jid < ?1", params![cutoff_jid])
            .map_err(self.err())?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(jid: &str) -> Job {
        Job {
            jid: jid.into(),
            fun: "test.echo".into(),
            arg: vec![json!("hi")],
            kwarg: Map::new(),
            tgt: "*".into(),
            tgt_type: "glob".into(),
            user: "root".into(),
            minions: vec!["web1".into()],
            progress_unwatched: false,
        }
    }

    #[test]
    fn a_cache_without_the_load_column_is_migrated_and_the_load_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.sqlite");
        {
            // The jobs table as masters before the load column wrote it.
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE jobs (jid TEXT PRIMARY KEY, fun TEXT NOT NULL, arg TEXT NOT NULL, tgt TEXT NOT NULL, tgt_type TEXT NOT NULL, user TEXT NOT NULL, minions TEXT NOT NULL);
                 INSERT INTO jobs VALUES ('20200101000000000000', 'test.ping', '[]', '*', 'glob', 'root', '[\"web1\"]');",
            )
            .unwrap();
        }
        let cache = JobCache::open(&path).unwrap();
        let old = cache.job("20200101000000000000").unwrap().unwrap();
        assert_eq!(old["fun"], json!("test.ping"));
        assert_eq!(old.get("ret"), None);
        let mut load = Map::new();
        load.insert("ret".into(), json!("syslog"));
        load.insert("ret_config".into(), json!("alt"));
        cache
            .store_job(&job("20260101000000000000"), &load)
            .unwrap();
        let new = cache.job("20260101000000000000").unwrap().unwrap();
        assert_eq!(new["ret"], json!("syslog"));
        assert_eq!(new["ret_config"], json!("alt"));
        assert_eq!(new["arg"], json!(["hi"]));
        let listed = cache.list_jobs().unwrap();
        assert_eq!(listed["20260101000000000000"]["Arguments"], json!(["hi"]));
        assert_eq!(listed.len(), 2);
    }

    #[test]
    fn pillars_survive_reopening_and_go_with_the_minion() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.sqlite");
        {
            let cache = JobCache::open(&path).unwrap();
            cache.store_pillar("web1", &json!({"role": "web"})).unwrap();
            cache.store_pillar("db1", &json!({"role": "db"})).unwrap();
            cache
                .store_pillar("web1", &json!({"role": "edge"}))
                .unwrap();
            cache
                .store_grains("web1", &json!({"os": "Ubuntu"}))
                .unwrap();
        }
        let cache = JobCache::open(&path).unwrap();
        assert_eq!(
            cache.all_pillars().unwrap(),
            vec![
                ("db1".to_string(), json!({"role": "db"})),
                ("web1".to_string(), json!({"role": "edge"})),
            ]
        );
        assert_eq!(cache.pillar("db1").unwrap(), Some(json!({"role": "db"})));
        assert_eq!(cache.pillar("nosuch").unwrap(), None);
        cache.forget_minion("web1").unwrap();
        assert_eq!(cache.pillar("web1").unwrap(), None);
        assert!(cache.all_grains().unwrap().is_empty());
        assert_eq!(cache.all_pillars().unwrap().len(), 1);
    }

    #[test]
    fn jobs_and_returns_survive_reopening_and_old_jobs_go() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.sqlite");
        let recent = halite_proto::JidGenerator::new().next_jid();
        {
            let mut cache = JobCache::open(&path).unwrap();
            cache.store_job(&job(&recent), &Map::new()).unwrap();
            cache
                .store_job(&job("20000101000000000000"), &Map::new())
                .unwrap();
            let ret = JobReturn {
                jid: recent.clone(),
                id: "web1".into(),
                fun: "test.echo".into(),
                fun_args: vec![json!("hi")],
                ret: json!("hi"),
                retcode: 0,
                success: true,
            };
            let older = JobReturn {
                jid: "20000101000000000000".into(),
                ..ret.clone()
            };
            assert_eq!(
                cache.store_returns(std::slice::from_ref(&ret)).unwrap(),
                [true]
            );
            // A resent return (its ack was lost) is stored, but not new.
            assert_eq!(cache.store_returns(&[ret]).unwrap(), [false]);
            cache.store_returns(&[older]).unwrap();
            cache
                .store_grains("web1", &json!({"os": "Ubuntu"}))
                .unwrap();
        }
        let cache = JobCache::open(&path).unwrap();
        let mode: String = cache
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let jobs = cache.list_jobs().unwrap();
        assert_eq!(jobs[&recent]["Function"], "test.echo");
        assert_eq!(
            jobs[&recent]["StartTime"],
            halite_proto::jid::jid_start_time(&recent)
        );
        let rets = cache.returns(&recent).unwrap();
        assert_eq!(rets[0].1["return"], "hi");
        assert_eq!(cache.all_grains().unwrap()[0].1["os"], "Ubuntu");
        assert_eq!(
            cache.last_returns().unwrap(),
            vec![("web1".to_string(), recent.clone())]
        );
        assert_eq!(cache.clean_old_jobs(24).unwrap(), 1);
        assert!(cache.job("20000101000000000000").unwrap().is_none());
        assert!(cache.job(&recent).unwrap().is_some());
    }

    #[test]
    fn returns_an_older_master_wrote_as_json_read_beside_packed_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.sqlite");
        let jid = "20260101000000000001";
        {
            // The returns table and rows as masters before session 17 wrote
            // them: the value as JSON text.
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE returns (jid TEXT NOT NULL, id TEXT NOT NULL, fun TEXT NOT NULL, fun_args TEXT NOT NULL, ret TEXT NOT NULL, retcode INTEGER NOT NULL, success INTEGER NOT NULL, PRIMARY KEY (jid, id));
                 INSERT INTO returns VALUES ('20260101000000000001', 'old', 'state.apply', '[\"web\"]', '{\"test_|-a_|-a_|-nop\": {\"result\": true, \"duration\": 0.30000000000000004, \"comment\": \"Succès ✓\"}}', 0, 1);
                 INSERT INTO returns VALUES ('20260101000000000001', 'oldstr', 'test.echo', '[]', '\"hi\"', 0, 1);
                 INSERT INTO returns VALUES ('20260101000000000001', 'zdamaged', 'test.echo', '[]', X'28b52ffd00', 0, 1);",
            )
            .unwrap();
        }
        let mut cache = JobCache::open(&path).unwrap();
        let value = json!({"test_|-b_|-b_|-nop": {"result": false, "duration": 0.1 + 0.2,
            "big": u64::MAX, "neg": i64::MIN, "comment": "naïve \u{1F600}", "changes": {"a": [1, {"b": null}]}}});
        let ret = |id: &str, value: Value| JobReturn {
            jid: jid.into(),
            id: id.into(),
            fun: "state.apply".into(),
            fun_args: vec![json!("web")],
            ret: value,
            retcode: 0,
            success: true,
        };
        let (new, list, packed, framed) = (
            ret("new", value.clone()),
            ret("newlist", json!([1, "two", 3.5])),
            ret("packed", Value::Null),
            ret("framed", Value::Null),
        );
        let bytes = halite_proto::packed::pack(&value).unwrap();
        let frame = halite_proto::packed::frame(&bytes).unwrap();
        cache
            .store_return_rows([
                (&new, ReturnValue::Decoded),
                (&list, ReturnValue::Decoded),
                (&packed, ReturnValue::Packed(&bytes)),
                (&framed, ReturnValue::Framed(&frame)),
            ])
            .unwrap();
        let rows: Map<String, Value> = cache.returns(jid).unwrap().into_iter().collect();
        // The damaged row is skipped (logged); every other one reads.
        let ids: Vec<&str> = rows.keys().map(String::as_str).collect();
        assert_eq!(ids, ["framed", "new", "newlist", "old", "oldstr", "packed"]);
        // A minion's frame is stored as it is, and reads as the value.
        assert_eq!(rows["framed"]["return"], value);
        assert_eq!(
            cache.packed_return(jid, "framed").unwrap(),
            Some(bytes.clone())
        );
        let column: Vec<u8> = cache
            .conn
            .query_row("SELECT ret FROM returns WHERE id = 'framed'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(column, frame);
        assert_eq!(
            rows["old"]["return"],
            json!({"test_|-a_|-a_|-nop": {"result": true, "duration": 0.1 + 0.2, "comment": "Succès ✓"}})
        );
        assert_eq!(rows["oldstr"]["return"], json!("hi"));
        assert_eq!(rows["new"]["return"], value);
        assert_eq!(rows["packed"]["return"], value);
        assert_eq!(rows["newlist"]["return"], json!([1, "two", 3.5]));
        assert_eq!(rows["new"]["fun_args"], json!(["web"]));
        // Key order kept, as the JSON kept it.
        let keys: Vec<&String> = rows["new"]["return"]["test_|-b_|-b_|-nop"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(
            keys,
            ["result", "duration", "big", "neg", "comment", "changes"]
        );
        // New rows are compressed msgpack, old ones stay JSON text.
        let kinds: Vec<(String, String)> = {
            let mut stmt = cache
                .conn
                .prepare("SELECT id, typeof(ret) FROM returns ORDER BY id")
                .unwrap();
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
            rows.map(Result::unwrap).collect()
        };
        let kind = |id: &str| kinds.iter().find(|(i, _)| i == id).unwrap().1.clone();
        assert_eq!(kind("old"), "text");
        assert_eq!(kind("new"), "blob");
        assert_eq!(kind("packed"), "blob");
    }
}
