//! The order of each identity's bundle, kept between jobs (issue 25): a
//! warm highstate whose bundle is unchanged (the same digest: the same
//! bytes, so the same chunks) replays the order its last job made
//! ([`halite_state::graph::KeptOrder`]) instead of indexing every chunk
//! as a requisite target, looking every requisite up and sorting again
//! (an eighth of a warm swarm's CPU). Why a replay gives what a fresh
//! order gives is in that type's doc; what it checks itself (the
//! `disabled_requisites`, the `watch` this host's modules reconcile)
//! is checked there, and the digest here.
//!
//! An order is indices only (no strings: about 8 bytes a chunk plus 16 an
//! edge: ~9 KB for the fleet bench's 1,000 states), and equal orders are
//! held once: a swarm whose identities run one tree (their bundles differ
//! by their ids and pillars, not their graphs) keeps one order for all of
//! them, and each identity costs its entry (its id, its digest, a
//! pointer). Bounded over the distinct orders' bytes
//! ([`DEFAULT_BOUND_BYTES`]): past it, a new distinct order is not kept
//! (its identity orders afresh on every job, as before), and none is
//! evicted for it.

use std::sync::{Arc, Mutex};

use halite_state::graph::{KeptOrder, OrderKeep};
use rustc_hash::FxHashMap;

/// The default bound on the distinct orders kept: 64 MiB, about 7,000
/// different orders of the fleet bench's 1,000 states (a real minion keeps
/// its one).
pub const DEFAULT_BOUND_BYTES: usize = 64 << 20;

/// One identity's kept order.
struct Entry {
    /// The digest of the bundle it orders.
    digest: String,
    order: Arc<KeptOrder>,
}

/// The orders kept, and the distinct ones among them.
#[derive(Default)]
struct Kept {
    by_id: FxHashMap<String, Entry>,
    /// Each distinct order once, shared by the identities that hold it,
    /// with their number.
    distinct: FxHashMap<Arc<KeptOrder>, usize>,
    /// The bytes of the distinct orders.
    bytes: usize,
}

impl Kept {
    /// An identity no longer holds `order`: dropped from the distinct
    /// ones when no other identity does.
    fn release(&mut self, order: &Arc<KeptOrder>) {
        let unused = match self.distinct.get_mut(order) {
            Some(holders) => {
                *holders = holders.saturating_sub(1);
                *holders == 0
            }
            None => false,
        };
        if unused {
            self.distinct.remove(order);
            self.bytes = self.bytes.saturating_sub(order.bytes());
        }
    }
}

/// The orders of the identities' bundles, by identity and digest, within
/// a bound.
pub struct KeptOrders {
    bound: usize,
    kept: Mutex<Kept>,
}

impl KeptOrders {
    /// Keeps at most `bound` bytes of distinct orders (0: none).
    pub fn new(bound: usize) -> Self {
        Self {
            bound,
            kept: Mutex::new(Kept::default()),
        }
    }

    /// Where the order of `id`'s bundle `digest` is kept, for one job.
    pub fn for_bundle<'a>(&'a self, id: &'a str, digest: &'a str) -> BundleOrder<'a> {
        BundleOrder {
            orders: self,
            id,
            digest,
        }
    }

    /// The order kept for `id` when its bundle is `digest`.
    fn get(&self, id: &str, digest: &str) -> Option<Arc<KeptOrder>> {
        let kept = self.kept.lock().ok()?;
        let entry = kept.by_id.get(id)?;
        (entry.digest == digest).then(|| Arc::clone(&entry.order))
    }

    /// Keeps `order` for `id`'s bundle `digest`, in place of what `id`
    /// held: shared with an equal one kept, or new when it fits the bound.
    fn put(&self, id: &str, digest: &str, order: KeptOrder) {
        let Ok(mut kept) = self.kept.lock() else {
            return;
        };
        if let Some(old) = kept.by_id.remove(id) {
            kept.release(&old.order);
        }
        let order = match kept.distinct.get_key_value(&order) {
            Some((same, _)) => Arc::clone(same),
            None => {
                let bytes = order.bytes();
                if kept.bytes.saturating_add(bytes) > self.bound {
                    return;
                }
                kept.bytes += bytes;
                Arc::new(order)
            }
        };
        *kept.distinct.entry(Arc::clone(&order)).or_insert(0) += 1;
        kept.by_id.insert(
            id.to_string(),
            Entry {
                digest: digest.to_string(),
                order,
            },
        );
    }

    /// Drops what `id` holds here.
    pub fn forget(&self, id: &str) {
        if let Ok(mut kept) = self.kept.lock() {
            if let Some(old) = kept.by_id.remove(id) {
                kept.release(&old.order);
            }
        }
    }

    /// The identities with an order kept, the distinct orders, and their
    /// bytes.
    pub fn counts(&self) -> (usize, usize, usize) {
        self.kept
            .lock()
            .map(|k| (k.by_id.len(), k.distinct.len(), k.bytes))
            .unwrap_or_default()
    }
}

impl Default for KeptOrders {
    fn default() -> Self {
        Self::new(DEFAULT_BOUND_BYTES)
    }
}

/// The kept order of one identity's bundle ([`KeptOrders::for_bundle`]).
pub struct BundleOrder<'a> {
    orders: &'a KeptOrders,
    id: &'a str,
    digest: &'a str,
}

impl OrderKeep for BundleOrder<'_> {
    fn kept(&self) -> Option<Arc<KeptOrder>> {
        self.orders.get(self.id, self.digest)
    }

    fn keep(&self, order: KeptOrder) {
        self.orders.put(self.id, self.digest, order);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    use halite_modules::exec::state::{StateExec, StatePlan};
    use halite_modules::host::EventSink;
    use halite_modules::{Args, Host};
    use halite_state::LowChunk;
    use serde_json::{json, Value};

    /// The events a run fired.
    #[derive(Default)]
    struct Collect(Mutex<Vec<(String, Value)>>);

    impl EventSink for Collect {
        fn fire(&self, tag: &str, data: &Value) {
            self.0.lock().unwrap().push((tag.to_string(), data.clone()));
        }
    }

    /// A tree of every requisite kind: prereq (with and without changes
    /// to come), onchanges, onfail, listen, watch (turned into require
    /// for a module without mod_watch, and a mod_watch), `_in` forms,
    /// `order`, shared names, failures, a missing requisite's neighbour.
    const TREE: &str = r#"
a:
  test.succeed_with_changes:
    - order: last
b:
  test.succeed_without_changes:
    - require:
      - test: a
c:
  test.fail_without_changes:
    - onfail_in:
      - test: d
d:
  test.succeed_with_changes: []
e:
  test.succeed_with_changes:
    - prereq:
      - test: a
f:
  test.succeed_without_changes:
    - prereq:
      - test: b
g:
  test.succeed_with_changes:
    - onchanges:
      - test: a
      - test: b
h:
  test.succeed_with_changes:
    - listen:
      - test: d
i:
  test.succeed_with_changes:
    - watch:
      - test: c
j:
  test.succeed_with_changes:
    - name: jj
    - onchanges_any:
      - test: d
      - test: b
k:
  test.nop:
    - name: shared
    - require_in:
      - test: l
    - order: 1
l:
  test.nop:
    - name: shared2
    - watch_in:
      - test: h
m:
  test.configurable_test_state:
    - changes: True
    - result: False
    - onfail:
      - test: c
"#;

    /// A host of this tree (`sls` its `tree.sls`), firing into `events`.
    fn host(dir: &std::path::Path, sls: &str, events: Arc<Collect>) -> Host {
        let salt = dir.join("salt");
        std::fs::create_dir_all(&salt).unwrap();
        std::fs::create_dir_all(dir.join("pillar")).unwrap();
        std::fs::write(salt.join("tree.sls"), sls).unwrap();
        let opts = json!({
            "id": "web01",
            "file_client": "local",
            "local": true,
            "state_events": true,
            "cachedir": dir.join("cache"),
            "file_roots": {"base": [salt]},
            "pillar_roots": {"base": [dir.join("pillar")]},
        });
        let (host, errors) = halite_modules::local::local_host(opts, events);
        assert!(errors.is_empty(), "{errors:?}");
        host
    }

    /// The tree's chunks as the master sends them, and their marks.
    fn planned(host: &Host) -> (Vec<LowChunk>, Vec<(u32, u8)>) {
        let args = Args {
            positional: vec![json!("tree")],
            kwargs: Default::default(),
        };
        match StateExec::plan(host, "state.sls", &args).unwrap() {
            StatePlan::Run(chunks, marks) => (
                chunks
                    .into_iter()
                    .map(|c| LowChunk::from(c.as_object().cloned().unwrap()))
                    .collect(),
                marks,
            ),
            other => panic!("not a run: {other:?}"),
        }
    }

    /// A value without what differs from run to run (times, durations).
    fn scrub(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "start_time" | "duration" | "_stamp"))
                    .map(|(k, v)| (k.clone(), scrub(v)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(scrub).collect()),
            other => other.clone(),
        }
    }

    /// One job of the tree: its return and its events, both as text (the
    /// return's keys in their order).
    fn job(dir: &std::path::Path, sls: &str, keep: Option<BundleOrder<'_>>) -> (String, String) {
        let events = Arc::new(Collect::default());
        let host = host(dir, sls, Arc::clone(&events));
        let (chunks, marks) = planned(&host);
        let args = Args {
            positional: vec![json!("tree")],
            kwargs: Default::default(),
        };
        let out = match keep {
            Some(keep) => {
                StateExec::run_planned_keeping(&host, "state.sls", &args, chunks, &marks, &keep)
            }
            None => StateExec::run_planned(&host, "state.sls", &args, chunks, &marks),
        };
        let ret = serde_json::to_string(&scrub(&out.into_value())).unwrap();
        let fired = events.0.lock().unwrap().clone();
        // The tags without the job's id (a new one per job).
        let fired: Vec<(String, Value)> = fired
            .iter()
            .map(|(t, d)| {
                let tag: Vec<&str> = t
                    .split('/')
                    .enumerate()
                    .filter(|(i, _)| *i != 2)
                    .map(|(_, p)| p)
                    .collect();
                (tag.join("/"), scrub(d))
            })
            .collect();
        (ret, serde_json::to_string(&fired).unwrap())
    }

    #[test]
    fn a_job_from_a_kept_order_returns_and_fires_what_a_fresh_order_does() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = job(dir.path(), TREE, None);
        // Every kind came up: the return names them.
        let seen = [
            "No changes detected",
            "One or more requisite failed",
            "Watch statement fired",
            "Success!",
            "Failure!",
        ];
        for seen in seen {
            assert!(
                fresh.0.contains(seen) || fresh.1.contains(seen),
                "{seen}: {}",
                fresh.0
            );
        }
        let orders = KeptOrders::default();
        // The first job orders and keeps; the next ones replay it.
        for round in 0..3 {
            let got = job(dir.path(), TREE, Some(orders.for_bundle("web01", "d1")));
            assert_eq!(got, fresh, "round {round}");
            assert_eq!(orders.counts().0, 1);
            assert!(orders.get("web01", "d1").is_some());
        }
        // The bundle changes (another digest: one state gone, one more
        // requisite): the kept order is not used for it, and is replaced.
        let changed = TREE.replace(
            "c:\n  test.fail_without_changes:",
            "c:\n  test.succeed_with_changes:",
        ) + "n:\n  test.succeed_with_changes:\n    - require:\n      - test: m\n";
        let kept_before = orders.get("web01", "d1").unwrap();
        let want = job(dir.path(), &changed, None);
        assert_ne!(want, fresh);
        for round in 0..2 {
            let got = job(dir.path(), &changed, Some(orders.for_bundle("web01", "d2")));
            assert_eq!(got, want, "changed, round {round}");
        }
        assert!(orders.get("web01", "d1").is_none());
        let kept_after = orders.get("web01", "d2").unwrap();
        assert_ne!(kept_before, kept_after);
        assert_eq!(orders.counts().0, 1);
        assert_eq!(orders.counts().1, 1);
    }

    #[test]
    fn equal_orders_are_held_once_and_within_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let orders = KeptOrders::default();
        for id in ["a", "b", "c"] {
            job(dir.path(), TREE, Some(orders.for_bundle(id, id)));
        }
        let (ids, distinct, bytes) = orders.counts();
        assert_eq!((ids, distinct), (3, 1));
        let one = orders.get("a", "a").unwrap();
        assert!(Arc::ptr_eq(&one, &orders.get("c", "c").unwrap()));
        assert_eq!(bytes, one.bytes());
        // Another order for one of them: two distinct, the first still
        // shared by the others; all forgotten, none left.
        let changed = TREE.replace("- order: last", "- order: 5");
        job(dir.path(), &changed, Some(orders.for_bundle("b", "b2")));
        assert_eq!(orders.counts().1, 2);
        for id in ["a", "b", "c"] {
            orders.forget(id);
        }
        assert_eq!(orders.counts(), (0, 0, 0));
        // No room: nothing kept, and the job runs as a fresh one.
        let none = KeptOrders::new(one.bytes() - 1);
        let fresh = job(dir.path(), TREE, None);
        assert_eq!(
            job(dir.path(), TREE, Some(none.for_bundle("a", "a"))),
            fresh
        );
        assert_eq!(none.counts(), (0, 0, 0));
    }
}
