//! The mine of a masterless minion (`file_client: local`, `halite-call
//! --local`): as Salt 3008's `mine` module does there, the data is kept in
//! the minion's own datastore under `mine_cache`, and `mine.get` answers
//! from it for this minion alone, when the target selects it.

use std::path::PathBuf;

use halite_salt_rules::mine::select;
use halite_state::target::{matches, MinionFacts};
use halite_state::{Map, Value};

use crate::datastore::Datastore;
use crate::exec::MineLink;
use crate::Host;

/// The datastore key Salt keeps the masterless mine under.
const KEY: &str = "mine_cache";

/// Salt's default minion cachedir for halite, when the opts name none.
const DEFAULT_CACHEDIR: &str = "/var/cache/halite/minion";

/// A masterless minion's mine: its datastore, and what `mine.get` targets
/// are matched against (its id, grains and pillar).
pub struct LocalMine {
    store: Datastore,
    id: String,
    grains: Value,
    pillar: Value,
}

impl LocalMine {
    /// The mine of `host`, when it runs without a master (`file_client:
    /// local`, the only case Salt keeps the mine locally); `None` otherwise.
    pub fn of(host: &Host) -> Option<Self> {
        if host.opt("file_client").and_then(Value::as_str) != Some("local") {
            return None;
        }
        let cachedir = host
            .opt("cachedir")
            .and_then(Value::as_str)
            .unwrap_or(DEFAULT_CACHEDIR);
        Some(Self {
            store: Datastore::in_cachedir(&PathBuf::from(cachedir)),
            id: host
                .opt("id")
                .map(halite_salt_rules::pyfmt::python_str)
                .unwrap_or_default(),
            grains: host.grains.clone(),
            pillar: host.pillar.clone(),
        })
    }

    /// The stored mine (`{}` when none, or when the key holds no map, as
    /// Salt reads it).
    fn mine(&self) -> Result<Map, String> {
        match self.store.get(KEY).map_err(|e| e.to_string())? {
            Some(Value::Object(m)) => Ok(m),
            _ => Ok(Map::new()),
        }
    }

    fn save(&self, mine: Map) -> Result<Value, String> {
        self.store
            .update(KEY, Value::Object(mine))
            .map_err(|e| e.to_string())?;
        Ok(Value::Bool(true))
    }
}

impl MineLink for LocalMine {
    fn store(&self, data: Map, clear: bool) -> Result<Value, String> {
        let mut mine = if clear { Map::new() } else { self.mine()? };
        mine.extend(data);
        self.save(mine)
    }

    fn get(&self, tgt: &str, fun: &Value, tgt_type: &str) -> Result<Value, String> {
        let facts = MinionFacts {
            id: &self.id,
            grains: &self.grains,
            pillar: &self.pillar,
        };
        let selected = matches(&Value::from(tgt), tgt_type, &facts).map_err(|e| e.to_string())?;
        if !selected {
            return Ok(Value::Object(Map::new()));
        }
        let mine = self.mine()?;
        // Salt's local branch reads every entry of its own mine, whatever
        // its `allow_tgt`: the only reader is the minion that wrote it.
        let me = [self.id.clone()];
        Ok(select(
            &self.id,
            fun,
            None,
            &me,
            |_| Some(&mine),
            |_, _| me.to_vec(),
        ))
    }

    fn delete(&self, fun: &str) -> Result<Value, String> {
        let mut mine = self.mine()?;
        mine.remove(fun);
        self.save(mine)
    }

    fn flush(&self) -> Result<Value, String> {
        self.save(Map::new())
    }

    fn pillar_functions(&self) -> Result<Map, String> {
        Ok(self
            .pillar
            .get("mine_functions")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default())
    }
}
