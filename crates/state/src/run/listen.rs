//! `listen`/`listen_in`: after the run, `mod_watch` of every state
//! listening to one that changed.

use indexmap::IndexMap;

use super::{has_changes, Executor, StateReturn};
use crate::graph::{chunk_tag, name_str};
use crate::requisite::{py_str, REQUISITE_KEYWORDS};
use crate::value::{Map, Value};

impl<'a> Executor<'a> {
    /// Salt's `call_listen`: `mod_watch` of every listener whose listened
    /// state changed, at the end of the run.
    pub(super) fn call_listen(&mut self, order: &[usize]) {
        let listens = |ci: &usize| {
            let c = &self.graph.chunks[*ci];
            c.contains("listen") || c.contains("listen_in")
        };
        if !order.iter().any(listens) {
            // Nothing listens: no listener run (which would start empty).
            self.total = 0;
            return;
        }
        let mut crefs: IndexMap<(String, String, String), usize> = IndexMap::new();
        let mut listeners: Vec<((String, String, String), Vec<Value>)> = Vec::new();
        for &ci in order {
            let c = &self.graph.chunks[ci];
            let key = (c.state().to_string(), c.id().to_string(), name_str(c));
            crefs.entry(key.clone()).or_insert(ci);
            if let Some(l) = c.get("listen") {
                let items = match l {
                    Value::Array(a) => a.clone(),
                    other => vec![other.clone()],
                };
                listeners.push((key.clone(), items));
            }
            if let Some(Value::Array(l_in)) = c.get("listen_in") {
                for item in l_in {
                    if let Value::Object(m) = item {
                        for (k, v) in m {
                            let mut src = Map::new();
                            src.insert(c.state().to_string(), Value::from(c.id()));
                            listeners.push((
                                (k.clone(), py_str(v), "lookup".into()),
                                vec![Value::Object(src)],
                            ));
                        }
                    }
                }
            }
        }
        let in_cref =
            |cref: &(String, String, String), v: &str| cref.0 == v || cref.1 == v || cref.2 == v;
        let mut mod_watchers: Vec<usize> = Vec::new();
        let mut errors: IndexMap<String, StateReturn> = IndexMap::new();
        let l_error = |lkey: &str, lval: &str| {
            let tag = crate::ret::state_tag(
                "Listen_Error",
                &format!("listen_{lval}"),
                &format!("listen_{lkey}"),
                "Listen_Error",
            );
            let mut m = StateReturn::new();
            m.insert(
                "comment",
                Value::from(format!("Referenced state {lkey}: {lval} does not exist")),
            );
            m.insert("name", Value::from(format!("listen_{lkey}:{lval}")));
            m.insert("result", Value::Bool(false));
            m.insert("changes", Value::Object(Map::new()));
            (tag, m)
        };
        for (key, vals) in listeners {
            for listen_to in vals {
                let listen_to: Map = match listen_to {
                    Value::Object(m) => m,
                    other => {
                        let s = py_str(&other);
                        let mut found = None;
                        for &ci in order {
                            let c = &self.graph.chunks[ci];
                            if c.id() == s || name_str(c) == s {
                                let mut m = Map::new();
                                m.insert(c.state().to_string(), Value::from(c.id()));
                                found = Some(m);
                            }
                        }
                        match found {
                            Some(m) => m,
                            None => continue,
                        }
                    }
                };
                for (lkey, lval) in listen_to {
                    let lval = py_str(&lval);
                    if !crefs.keys().any(|c| c.0 == lkey && in_cref(c, &lval)) {
                        let (t, m) = l_error(&lkey, &lval);
                        errors.insert(t, m);
                        continue;
                    }
                    let to_tags: Vec<String> = crefs
                        .iter()
                        .filter(|(c, _)| c.0 == lkey && in_cref(c, &lval))
                        .map(|(_, &ci)| self.graph.tag(ci).to_string())
                        .collect();
                    for to_tag in to_tags {
                        let Some(r) = self.running.get(&to_tag) else {
                            continue;
                        };
                        if !has_changes(r) {
                            continue;
                        }
                        if !crefs.keys().any(|c| key.0 == c.0 && in_cref(c, &key.1)) {
                            let (t, m) = l_error(&key.0, &key.1);
                            errors.insert(t, m);
                            continue;
                        }
                        let new: Vec<usize> = crefs
                            .iter()
                            .filter(|(c, _)| key.0 == c.0 && in_cref(c, &key.1))
                            .map(|(_, &ci)| ci)
                            .collect();
                        for ci in new {
                            let mut low = self.graph.chunks[ci].clone();
                            let fun = low.fun().to_string();
                            low.insert("sfun", Value::from(fun));
                            low.insert("fun", Value::from("mod_watch"));
                            let id = format!("listener_{}", low.shown_id());
                            low.insert("__id__", Value::from(id));
                            // The new ID is a plain string holding the
                            // quotes; the name stays what it was.
                            let mut yamlex = low.yamlex();
                            yamlex.id = false;
                            yamlex.values = false;
                            low.set_yamlex(yamlex);
                            for r in REQUISITE_KEYWORDS {
                                low.shift_remove(r);
                            }
                            low.shift_remove("__prereq__");
                            let tag = chunk_tag(&low);
                            let idx = match self.graph.chunk_index(&tag) {
                                Some(i) => i,
                                None => self.graph.add_chunk(low),
                            };
                            mod_watchers.push(idx);
                        }
                    }
                }
            }
        }
        // The listeners run as a fresh run whose results join the main one.
        let saved = std::mem::take(&mut self.running);
        self.total = mod_watchers.len();
        self.call_chunks(&mod_watchers);
        let listened = std::mem::replace(&mut self.running, saved);
        for (k, v) in listened {
            self.running.insert(k, v);
        }
        for (tag, mut m) in errors {
            m.insert("__run_num__", Value::from(self.run_num));
            self.run_num += 1;
            self.running.insert(tag, m);
        }
    }
}
