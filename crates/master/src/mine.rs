//! The master's side of the Salt mine (Salt's `_mine`, `_mine_get`,
//! `_mine_delete`, `_mine_flush` in `salt/daemons/masterapi.py`): each
//! minion's mine (`{function or alias: data}`) in memory and in the job
//! cache's SQLite database (table `minion_mine`), so it survives a
//! restart; the answers to the minions' mine requests; and the link a
//! compile uses so `salt['mine.get'](...)` in SLS or pillar rendered on the
//! master sees the other minions' data.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use halite_client::jobcache::{JobCache, JobCacheError};
use halite_modules::exec::MineLink;
use halite_proto::mine::MineRequest;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

/// Every minion's mine, in memory and on disk. Owned by the master's
/// state task: every change and every `mine.get` goes through it there.
pub struct MineStore {
    mem: HashMap<String, Map<String, Value>>,
    /// A connection of its own, so the store needs nothing else of the master.
    db: JobCache,
    /// The master's `mine_get` option (which minions may read which functions).
    acl: Option<Value>,
}

impl MineStore {
    /// Opens the job cache at `path` and loads every stored mine.
    pub fn open(path: &Path) -> Result<Self, JobCacheError> {
        let db = JobCache::open(path)?.without_autocheckpoint()?;
        let mem = db.all_mine()?.into_iter().collect();
        Ok(Self { mem, db, acl: None })
    }

    /// Applies the master's `mine_get` option to every `mine.get`.
    pub fn with_acl(mut self, acl: Option<Value>) -> Self {
        self.acl = acl;
        self
    }

    /// Minion `id`'s mine, when it has one.
    pub fn mine_of(&self, id: &str) -> Option<&Map<String, Value>> {
        self.mem.get(id)
    }

    /// Writes `id`'s mine as it is now in memory; a failed write is logged
    /// (memory still answers until the next restart). The gpg secrets the
    /// master decrypted for `id`'s pillar are masked in the disk copy
    /// (`pillar.get ... unmask=True` as a mine function): memory keeps the
    /// value Salt would serve, the disk never holds it in clear.
    fn persist(&self, id: &str) {
        let empty = Map::new();
        let mine = self.mem.get(id).unwrap_or(&empty);
        let masked = halite_logging::redact::secrets_of(id).and_then(|secrets| {
            match secrets.mask(&Value::Object(mine.clone())) {
                Value::Object(m) => Some(m),
                _ => None,
            }
        });
        if let Err(e) = self.db.store_mine(id, masked.as_ref().unwrap_or(mine)) {
            tracing::warn!(%id, error = %e, "cannot write the minion's mine to the job cache");
        }
    }

    /// Answers a mine request of minion `requester`; `resolve` reads a
    /// target (expression, type) as the master targets jobs. A
    /// [`MineRequest::PillarFunctions`] needs a compile and is not answered
    /// here (`None`).
    pub fn answer(
        &mut self,
        requester: &str,
        request: MineRequest,
        mut resolve: impl FnMut(&str, &str) -> Result<Vec<String>, String>,
    ) -> Option<Result<Value, String>> {
        let done = Some(Ok(Value::Bool(true)));
        match request {
            MineRequest::Store { data, clear } => {
                let mine = self.mem.entry(requester.to_string()).or_default();
                if clear {
                    mine.clear();
                }
                mine.extend(data);
                if mine.is_empty() {
                    self.mem.remove(requester);
                }
                self.persist(requester);
                done
            }
            MineRequest::Delete { fun } => {
                if let Some(mine) = self.mem.get_mut(requester) {
                    if mine.remove(&fun).is_some() {
                        if mine.is_empty() {
                            self.mem.remove(requester);
                        }
                        self.persist(requester);
                    }
                }
                done
            }
            MineRequest::Flush => {
                if self.mem.remove(requester).is_some() {
                    self.persist(requester);
                }
                done
            }
            MineRequest::Get { tgt, fun, tgt_type } => {
                let kind = halite_salt_rules::mine::match_type(&tgt_type);
                let minions = match resolve(&tgt, &kind) {
                    Ok(m) => m,
                    Err(e) => return Some(Err(e)),
                };
                let ret = halite_salt_rules::mine::select(
                    requester,
                    &fun,
                    self.acl.as_ref(),
                    &minions,
                    |id| self.mem.get(id),
                    |t, k| match resolve(t, k) {
                        Ok(ids) => ids,
                        Err(e) => {
                            tracing::warn!(allow_tgt = %t, error = %e, "a mine entry's allow_tgt cannot be read; the entry is withheld");
                            Vec::new()
                        }
                    },
                );
                Some(Ok(ret))
            }
            MineRequest::PillarFunctions => None,
        }
    }

    /// Forgets the mine of every minion `accepted` does not hold (its key
    /// was deleted or rejected), as Salt clears a deleted key's cache.
    pub fn keep_only(&mut self, accepted: impl Fn(&str) -> bool) {
        let gone: Vec<String> = self
            .mem
            .keys()
            .filter(|id| !accepted(id))
            .cloned()
            .collect();
        for id in gone {
            self.mem.remove(&id);
            self.persist(&id);
            tracing::info!(%id, "mine data of a minion no longer accepted removed");
        }
    }
}

/// A compile thread's question to the state task: minion `requester`'s
/// `mine.get` while its SLS or pillar renders.
pub struct MineQuestion {
    /// The minion the master compiles for (the `allow_tgt` rules apply to it).
    pub requester: String,
    /// The `mine.get` it asked.
    pub request: MineRequest,
    /// Where the answer goes.
    pub reply: std::sync::mpsc::Sender<Result<Value, String>>,
}

/// The mine as SLS compiled on the master sees it: `mine.get` asks the
/// state task ([`MineQuestion`]); the functions that change a mine run on
/// the minion (render-time calls), never here.
pub struct CompileMine {
    requester: String,
    questions: mpsc::UnboundedSender<MineQuestion>,
    timeout: Duration,
}

impl CompileMine {
    /// The mine for a compile for minion `requester`.
    pub fn link(
        requester: &str,
        questions: mpsc::UnboundedSender<MineQuestion>,
        timeout: Duration,
    ) -> Arc<dyn MineLink> {
        Arc::new(Self {
            requester: requester.to_string(),
            questions,
            timeout,
        })
    }
}

impl MineLink for CompileMine {
    fn get(&self, tgt: &str, fun: &Value, tgt_type: &str) -> Result<Value, String> {
        let (reply, answer) = std::sync::mpsc::channel();
        self.questions
            .send(MineQuestion {
                requester: self.requester.clone(),
                request: MineRequest::Get {
                    tgt: tgt.to_string(),
                    fun: fun.clone(),
                    tgt_type: tgt_type.to_string(),
                },
                reply,
            })
            .map_err(|_| "the master is shutting down".to_string())?;
        answer
            .recv_timeout(self.timeout)
            .map_err(|_| "the master did not answer mine.get in time".to_string())?
    }

    fn store(&self, _data: Map<String, Value>, _clear: bool) -> Result<Value, String> {
        Err(on_minion("store mine data"))
    }

    fn delete(&self, _fun: &str) -> Result<Value, String> {
        Err(on_minion("delete mine data"))
    }

    fn flush(&self) -> Result<Value, String> {
        Err(on_minion("flush mine data"))
    }

    fn pillar_functions(&self) -> Result<Map<String, Value>, String> {
        Err(on_minion("read mine_functions"))
    }
}

fn on_minion(what: &str) -> String {
    format!("cannot {what} while the master compiles; mine.send, mine.update, mine.delete and mine.flush run on the minion")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_minions_gpg_secrets_are_served_from_memory_and_masked_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.sqlite");
        let all = |_: &str, _: &str| Ok(vec!["mine-sec1".to_string()]);
        let secret = "Mine-Secret-6061";
        halite_logging::redact::set_secrets("mine-sec1", &[secret.to_string()]);
        let get = MineRequest::Get {
            tgt: "*".into(),
            fun: json!("token"),
            tgt_type: "glob".into(),
        };
        {
            let mut store = MineStore::open(&path).unwrap();
            let stored = MineRequest::Store {
                data: obj(json!({"token": secret, "ip": "10.0.0.9"})),
                clear: false,
            };
            store.answer("mine-sec1", stored, all).unwrap().unwrap();
            // mine.get answers what the minion sent, as Salt does.
            assert_eq!(
                store
                    .answer("mine-sec1", get.clone(), all)
                    .unwrap()
                    .unwrap(),
                json!({"mine-sec1": secret})
            );
        }
        let raw = std::fs::read(&path).unwrap();
        let wal = std::fs::read(dir.path().join("jobs.sqlite-wal")).unwrap_or_default();
        for bytes in [raw, wal] {
            assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()));
        }
        // A restarted master has the masked copy until the minion sends again.
        let mut store = MineStore::open(&path).unwrap();
        assert_eq!(
            store.answer("mine-sec1", get, all).unwrap().unwrap(),
            json!({"mine-sec1": "**********"})
        );
        assert_eq!(store.mine_of("mine-sec1").unwrap()["ip"], "10.0.0.9");
        halite_logging::redact::forget("mine-sec1");
    }

    #[test]
    fn mine_data_survives_reopening_and_goes_with_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.sqlite");
        let all = |_: &str, _: &str| Ok(vec!["db1".to_string(), "web1".to_string()]);
        {
            let mut store = MineStore::open(&path).unwrap();
            let stored = MineRequest::Store {
                data: obj(json!({"ips": ["10.0.0.1"], "old": 1})),
                clear: false,
            };
            store.answer("web1", stored, all).unwrap().unwrap();
            let delete = MineRequest::Delete { fun: "old".into() };
            store.answer("web1", delete, all).unwrap().unwrap();
            let stored = MineRequest::Store {
                data: obj(json!({"ips": ["10.0.0.2"]})),
                clear: true,
            };
            store.answer("db1", stored, all).unwrap().unwrap();
        }
        let mut store = MineStore::open(&path).unwrap();
        let get = MineRequest::Get {
            tgt: "*".into(),
            fun: json!("ips"),
            tgt_type: "glob".into(),
        };
        assert_eq!(
            store.answer("db1", get.clone(), all).unwrap().unwrap(),
            json!({"db1": ["10.0.0.2"], "web1": ["10.0.0.1"]})
        );
        // The master's mine_get option: only web* may read, and only ips.
        let mut guarded = MineStore::open(&path)
            .unwrap()
            .with_acl(Some(json!({"web.*": ["ip"]})));
        assert_eq!(
            guarded.answer("db1", get.clone(), all).unwrap().unwrap(),
            json!({})
        );
        assert_eq!(
            guarded.answer("web1", get.clone(), all).unwrap().unwrap(),
            json!({"db1": ["10.0.0.2"], "web1": ["10.0.0.1"]})
        );
        store
            .answer("db1", MineRequest::Flush, all)
            .unwrap()
            .unwrap();
        store.keep_only(|id| id != "web1");
        let mut store = MineStore::open(&path).unwrap();
        assert_eq!(store.answer("x", get, all).unwrap().unwrap(), json!({}));
    }
}
