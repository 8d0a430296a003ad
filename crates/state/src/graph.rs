//! The requisite graph: edges from each requisite target to the state that
//! depends on it, Salt's ordering (a topological sort whose ties are broken
//! by `order`, pulling prerequisites up to just before their earliest
//! dependent), prereq test nodes, and cycle reports.
//!
//! Targets are indexed once by (module, name), (module, ID), ID, name and
//! SLS, so resolving requisites is linear in their number; only glob
//! targets scan the index.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

use indexmap::IndexMap;
use rustc_hash::{FxBuildHasher, FxHashMap};

/// An insertion-ordered map with a fast non-cryptographic hasher: the
/// graph's keys are the user's own state names, not attacker input.
type FxIndexMap<K, V> = IndexMap<K, V, FxBuildHasher>;
/// An insertion-ordered set with the same hasher.
type FxIndexSet<T> = indexmap::IndexSet<T, FxBuildHasher>;

use crate::chunk::LowChunk;
use crate::dict::KeySet;
use crate::requisite::{py_repr, py_str, RequisiteKind};
use crate::value::{Map, Value};
use halite_salt_rules::fnmatch::{fnmatch, is_pattern};

mod kept;
pub use kept::{KeepNone, KeptOrder, OrderKeep};

/// A node: a chunk, or the test-mode "prereq check" twin of a chunk.
#[derive(Debug, Clone)]
struct Node {
    /// Index into [`Graph::chunks`]; `None` for a node created by an edge
    /// before its chunk was known.
    chunk: Option<usize>,
    child_min: Option<f64>,
}

/// The compiled requisite graph over a run's chunks.
#[derive(Debug, Default)]
pub struct Graph {
    /// The chunks, in compile order. Ordering mutates `order` in place and
    /// prereq marks `__prereq__` / `__prerequiring__`, as Salt does.
    pub chunks: Vec<LowChunk>,
    /// The node of each chunk.
    chunk_nodes: Vec<usize>,
    nodes: Vec<Node>,
    /// Each node's run tag, indexed like `nodes`: the one copy of a tag,
    /// found by tag or by node.
    node_tags: FxIndexSet<String>,
    /// Where requisite targets are found.
    targets: TargetIndex,
    /// Each node's edges to its dependents and from its dependencies
    /// (other node, kinds), in the order they were added.
    out_edges: Vec<Vec<(usize, Kinds)>>,
    in_edges: Vec<Vec<(usize, Kinds)>>,
    /// Where edge (source, target) is in `out_edges[source]` and
    /// `in_edges[target]`: one lookup per requisite (a hash map per node
    /// and direction cost two, and a third of ordering a 10 000-state
    /// fan-in).
    edge_at: FxHashMap<(usize, usize), (u32, u32)>,
    /// Reused to gather a requisite's target nodes without an allocation
    /// per requisite.
    req_buf: Vec<usize>,
    /// What ordering did, noted to be kept and replayed
    /// ([`Graph::record_order`], [`KeptOrder`]); `None`: nothing noted.
    record: Option<Box<kept::Recording>>,
}

/// The index requisite targets are found in. A chunk is found by
/// (module or `id`) + `\x1f` + (name or ID), and by SLS. It holds the
/// graph's first `indexed` chunks, and all of them from the first
/// requisite on ([`Graph::index_up_to`]): a tree without requisites never
/// builds it.
///
/// The (module or `id`, name or ID) keys are not stored as strings (two
/// to four allocated, hashed and freed per chunk, on every minion job:
/// issue 25): each chunk is listed under the hash of its name and of its
/// ID ([`target_hash`]; one when they are equal), and a lookup keeps the
/// listed chunks whose module or `id`, and name or ID, are the ones asked
/// for ([`target_matches`]): the same nodes in the same order as the keys
/// as strings. The keys as strings ([`TargetIndex::named`]) are built
/// only when a lookup needs them: a glob target (which scans every key),
/// or a requisite whose key or target holds the separator `\x1f` (the
/// joined string, not its parts, is what matches; a key and a target
/// without it join to a string with one `\x1f`, which only a chunk's
/// module or `id`, and name or ID, without it join to, split alike).
#[derive(Debug, Default)]
struct TargetIndex {
    /// Nodes by the hash of a name or ID they are found by, in the order
    /// they were added (a hash shared by two targets lists both).
    by_target: FxHashMap<u64, NodeList>,
    sls_to_nodes: FxIndexMap<String, NodeList>,
    indexed: usize,
    /// Every lookup made by the keys as strings (the tests' reference).
    by_string: bool,
    /// The keys as strings, in the order they were added, once built.
    named: Option<FxIndexMap<String, NodeList>>,
}

/// The hash a requisite target (a name or ID) is listed under.
fn target_hash(target: &str) -> u64 {
    std::hash::BuildHasher::hash_one(&FxBuildHasher, target)
}

/// Whether a chunk with this module, ID and name is found by requisite
/// key `key` (a module or `id`) and target `val` (a name or ID), neither
/// of them holding `\x1f`: one of its keys (module or `id`) + `\x1f` +
/// (name or ID) is `key` + `\x1f` + `val`.
fn target_matches(state: &str, id: &str, name: &str, key: &str, val: &str) -> bool {
    (key == state || key == "id") && (val == name || val == id)
}

/// The keys of a chunk as strings: (module or `id`) + `\x1f` + (name or
/// ID), in the order they are added to [`TargetIndex::named`].
fn named_keys(chunk: &LowChunk) -> impl Iterator<Item = String> {
    let state = chunk.state();
    let id = chunk.id();
    let name = chunk_name(chunk);
    let key = |kind: &str, target: &str| {
        let mut k = String::with_capacity(kind.len() + 1 + target.len());
        k.push_str(kind);
        k.push('\x1f');
        k.push_str(target);
        k
    };
    let keys = if name != id {
        vec![
            key(state, &name),
            key("id", id),
            key(state, id),
            key("id", &name),
        ]
    } else {
        vec![key(state, id), key("id", id)]
    };
    keys.into_iter()
}

/// The chunk's name as requisites match it: `str()` of a name that is
/// not a string.
fn chunk_name(chunk: &LowChunk) -> Cow<'_, str> {
    match chunk.get("name") {
        Some(Value::String(s)) => Cow::Borrowed(s.as_str()),
        Some(v) => Cow::Owned(py_str(v)),
        None => Cow::Borrowed(""),
    }
}

/// The two maps [`TargetIndex`] lists nodes in.
trait NodeLists<K> {
    fn push(&mut self, key: K, node: usize);
}

impl NodeLists<u64> for FxHashMap<u64, NodeList> {
    fn push(&mut self, key: u64, node: usize) {
        match self.entry(key) {
            std::collections::hash_map::Entry::Occupied(mut set) => set.get_mut().push_new(node),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(NodeList::One(node));
            }
        }
    }
}

impl NodeLists<String> for FxIndexMap<String, NodeList> {
    fn push(&mut self, key: String, node: usize) {
        match self.entry(key) {
            indexmap::map::Entry::Occupied(mut set) => set.get_mut().push_new(node),
            indexmap::map::Entry::Vacant(slot) => {
                slot.insert(NodeList::One(node));
            }
        }
    }
}

impl TargetIndex {
    /// Adds node `ni`, the node of `chunk` (whose [`ChunkKeys`] are
    /// `keys`), under its name and ID and under its SLS (and those that
    /// included it).
    fn add(&mut self, ni: usize, chunk: &LowChunk, keys: &ChunkKeys) {
        for &h in keys.targets.get(..keys.targets_len).unwrap_or_default() {
            self.by_target.push(h, ni);
        }
        if let Some(named) = self.named.as_mut() {
            for k in named_keys(chunk) {
                named.push(k, ni);
            }
        }
        let sls = chunk.sls();
        let included = chunk.get("__sls_included_from__").and_then(Value::as_array);
        let included = included.into_iter().flatten().filter_map(Value::as_str);
        for sls in std::iter::once(sls)
            .filter(|s| !s.is_empty())
            .chain(included)
        {
            match self.sls_to_nodes.get_mut(sls) {
                Some(set) => set.push_new(ni),
                None => {
                    self.sls_to_nodes.insert(sls.to_string(), NodeList::One(ni));
                }
            }
        }
    }
}

/// The nodes a requisite target names, in the order they were added:
/// nearly always one (an ID or a name is seldom shared), kept without an
/// allocation.
#[derive(Debug, Clone)]
enum NodeList {
    One(usize),
    Many(Vec<usize>),
}

impl Default for NodeList {
    fn default() -> Self {
        NodeList::Many(Vec::new())
    }
}

impl NodeList {
    fn as_slice(&self) -> &[usize] {
        match self {
            NodeList::One(n) => std::slice::from_ref(n),
            NodeList::Many(v) => v,
        }
    }
    /// Adds `node` unless it is the last one added (a chunk adds itself
    /// under each of its keys once).
    fn push_new(&mut self, node: usize) {
        match self {
            NodeList::One(n) if *n == node => {}
            NodeList::One(n) => *self = NodeList::Many(vec![*n, node]),
            NodeList::Many(v) => {
                if v.last() != Some(&node) {
                    v.push(node);
                }
            }
        }
    }
}

/// What adding a chunk to the graph needs from the chunk alone: its run
/// tag and, once the tree is known to have requisites, the hashes it is
/// listed under as a requisite target (its name and ID). Computed where
/// the chunk is built (a large tree's chunks are built on the calling
/// thread while a helper thread assembles the graph), so that the
/// assembling thread only inserts.
#[derive(Debug)]
pub struct ChunkKeys {
    tag: String,
    /// [`target_hash`] of the name and of the ID (one when equal).
    targets: [u64; 2],
    /// 0 when the keys were not computed ([`ChunkKeys::tag_only`]).
    targets_len: usize,
}

/// Whether `chunk` has a requisite (Salt's `add_requisites` has work).
pub fn has_requisites(chunk: &LowChunk) -> bool {
    const REQUISITES: KeySet = KeySet::new(&RequisiteKind::KEYWORDS);
    chunk.contains_any(&REQUISITES)
}

impl ChunkKeys {
    /// The tag of `chunk` alone: until a chunk with requisites comes, the
    /// graph does not index its chunks as targets.
    pub fn tag_only(chunk: &LowChunk) -> ChunkKeys {
        ChunkKeys {
            tag: chunk_tag(chunk),
            targets: [0; 2],
            targets_len: 0,
        }
    }

    /// The tag and target hashes of `chunk`.
    pub fn of(chunk: &LowChunk) -> ChunkKeys {
        let mut keys = ChunkKeys::tag_only(chunk);
        keys.index(chunk);
        keys
    }

    /// Computes the target hashes of `chunk` (its tag is known).
    fn index(&mut self, chunk: &LowChunk) {
        let id = chunk.id();
        let name = chunk_name(chunk);
        self.targets[0] = target_hash(&name);
        self.targets_len = 1;
        if *name != *id {
            self.targets[1] = target_hash(id);
            self.targets_len = 2;
        }
    }
}

/// The requisite kinds of one edge, in the order they were added, packed
/// four bits each: an edge has one kind or a few, and a list on the heap
/// per edge cost two allocations per requisite.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Kinds {
    len: u8,
    packed: u64,
}

impl Kinds {
    fn index(kind: RequisiteKind) -> u64 {
        RequisiteKind::ALL
            .iter()
            .position(|k| *k == kind)
            .unwrap_or_default() as u64
    }
    fn contains(&self, kind: RequisiteKind) -> bool {
        self.iter().any(|k| k == kind)
    }
    /// Adds `kind` (each kind once: at most the 12 kinds, 48 bits).
    fn push(&mut self, kind: RequisiteKind) {
        if !self.contains(kind) && usize::from(self.len) < RequisiteKind::ALL.len() {
            self.packed |= Self::index(kind) << (4 * u32::from(self.len));
            self.len += 1;
        }
    }
    fn len(&self) -> usize {
        usize::from(self.len)
    }
    /// The kinds as one word (the length in the top byte), for a kept
    /// order ([`KeptOrder`]).
    fn to_bits(self) -> u64 {
        self.packed | (u64::from(self.len) << 56)
    }
    /// The kinds [`Kinds::to_bits`] gave.
    fn from_bits(bits: u64) -> Kinds {
        Kinds {
            len: (bits >> 56) as u8,
            packed: bits & ((1 << 56) - 1),
        }
    }
    fn iter(&self) -> impl Iterator<Item = RequisiteKind> + '_ {
        (0..u32::from(self.len))
            .map(move |i| RequisiteKind::ALL[((self.packed >> (4 * i)) & 0xf) as usize])
    }
}

/// The sort key of a node: (min of own and dependents' order, own order), label, tag.
#[derive(Debug, Clone, PartialEq)]
struct OrderKey<'a> {
    first: f64,
    own: f64,
    /// The label (state, name and function run together) and the tag:
    /// the tie-breakers, in the sort's [`Labels`].
    label: &'a str,
    tag: &'a str,
    node: usize,
}

/// Every node's tie-breakers for the sort (its label and its tag), written
/// once into one string before the sort, which borrows them: the label and
/// tag of a chunk do not change as it is ordered (issue 25: a string per
/// node, allocated and freed on every minion job, was a tenth of the
/// order).
#[derive(Debug, Default)]
struct Labels {
    text: String,
    /// Where each node's label starts, its tag starts and its tag ends.
    at: Vec<(usize, usize, usize)>,
}

impl Labels {
    /// The label and the tag of `node`.
    fn of(&self, node: usize) -> (&str, &str) {
        let (start, tag, end) = self.at.get(node).copied().unwrap_or_default();
        (
            self.text.get(start..tag).unwrap_or_default(),
            self.text.get(tag..end).unwrap_or_default(),
        )
    }
}

impl Eq for OrderKey<'_> {}

impl Ord for OrderKey<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reverse for a min-heap.
        other
            .first
            .total_cmp(&self.first)
            .then_with(|| other.own.total_cmp(&self.own))
            .then_with(|| other.label.cmp(self.label))
            .then_with(|| other.tag.cmp(self.tag))
    }
}

impl PartialOrd for OrderKey<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A cycle: a list of (dependent, kind, dependency) chunks.
pub type Cycle = Vec<(LowChunk, RequisiteKind, LowChunk)>;

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    }
}

fn to_value(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        Value::from(f as i64)
    } else {
        Value::from(f)
    }
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty graph with room for `chunks` chunks (no regrowth, and
    /// no copies of its tables, for a tree of that size).
    pub fn with_capacity(chunks: usize) -> Self {
        let mut g = Self::default();
        g.chunks.reserve(chunks);
        g.chunk_nodes.reserve(chunks);
        g.nodes.reserve(chunks);
        g.node_tags.reserve(chunks);
        g.out_edges.reserve(chunks);
        g.in_edges.reserve(chunks);
        g
    }

    /// The node of `tag`, added when new.
    fn node_for(&mut self, tag: Cow<'_, str>) -> usize {
        // An owned tag (every chunk's) is hashed once: inserted, or found.
        let (i, added) = match tag {
            Cow::Owned(tag) => self.node_tags.insert_full(tag),
            Cow::Borrowed(tag) => match self.node_tags.get_index_of(tag) {
                Some(i) => (i, false),
                None => self.node_tags.insert_full(tag.to_string()),
            },
        };
        if !added {
            return i;
        }
        self.nodes.push(Node {
            chunk: None,
            child_min: None,
        });
        self.out_edges.push(Vec::new());
        self.in_edges.push(Vec::new());
        i
    }

    /// The run tag of node `node`.
    fn node_tag(&self, node: usize) -> &str {
        self.node_tags
            .get_index(node)
            .map(String::as_str)
            .unwrap_or_default()
    }

    /// The node of `tag`, if the graph has it.
    fn node_of(&self, tag: &str) -> Option<usize> {
        self.node_tags.get_index_of(tag)
    }

    fn add_edge(&mut self, source: usize, target: usize, kind: RequisiteKind) {
        let out = &mut self.out_edges[source];
        let inn = &mut self.in_edges[target];
        let record = &mut self.record;
        let (o, i) = *self.edge_at.entry((source, target)).or_insert_with(|| {
            out.push((target, Kinds::default()));
            inn.push((source, Kinds::default()));
            if let Some(r) = record {
                r.edge(source, target);
            }
            ((out.len() - 1) as u32, (inn.len() - 1) as u32)
        });
        out[o as usize].1.push(kind);
        inn[i as usize].1.push(kind);
    }

    /// Adds a chunk (Salt's `add_chunk`). Returns its chunk index.
    pub fn add_chunk(&mut self, chunk: LowChunk) -> usize {
        let keys = ChunkKeys::of(&chunk);
        self.add_keyed_chunk(chunk, keys)
    }

    /// Adds a chunk whose [`ChunkKeys`] were computed beforehand (by the
    /// thread that built it): the same as [`Graph::add_chunk`], with only
    /// the table inserts left to do. Keys given mean the tree has
    /// requisites: the chunks before it are indexed first, so that the
    /// index holds every chunk in order however late it was started.
    pub fn add_keyed_chunk(&mut self, chunk: LowChunk, mut keys: ChunkKeys) -> usize {
        let ci = self.chunks.len();
        let ni = self.node_for(Cow::Owned(std::mem::take(&mut keys.tag)));
        self.chunk_nodes.push(ni);
        self.nodes[ni].chunk = Some(ci);
        if keys.targets_len > 0 {
            self.index_up_to(ci);
            self.size_index(ci + 1);
            self.targets.add(ni, &chunk, &keys);
            self.targets.indexed = ci + 1;
        }
        self.chunks.push(chunk);
        ci
    }

    /// Indexes the chunks from the first not yet indexed up to (not
    /// including) `end` as requisite targets.
    fn index_up_to(&mut self, end: usize) {
        if self.targets.indexed >= end {
            return;
        }
        self.size_index(end);
        let targets = &mut self.targets;
        for ci in targets.indexed..end {
            let chunk = &self.chunks[ci];
            // The tag is the graph's already: only the target hashes.
            let mut keys = ChunkKeys {
                tag: String::new(),
                targets: [0; 2],
                targets_len: 0,
            };
            keys.index(chunk);
            targets.add(self.chunk_nodes[ci], chunk, &keys);
        }
        targets.indexed = end;
    }

    /// Looks every requisite target up by its key as a string (the
    /// index as it was before its hashes): the tests' reference.
    #[cfg(test)]
    fn look_up_by_string(&mut self) {
        self.targets.by_string = true;
    }

    /// Sizes the target index, when it is still empty, for the chunks the
    /// graph was made for (at least `chunks`): one hash per chunk at least
    /// (two when name and ID differ), so a bundle's index is not rehashed
    /// as it grows (the first chunk is indexed as it comes, before any
    /// chunk is indexed up to it).
    fn size_index(&mut self, chunks: usize) {
        if self.targets.by_target.capacity() == 0 {
            let n = self.chunks.capacity().max(chunks);
            self.targets.by_target.reserve(n);
        }
    }

    /// The target keys as strings ([`TargetIndex::named`]), built from
    /// the chunks indexed when first asked for, and kept up to date from
    /// then on.
    fn named_index(&mut self) -> &FxIndexMap<String, NodeList> {
        let targets = &mut self.targets;
        targets.named.get_or_insert_with(|| {
            let mut named = FxIndexMap::default();
            for ci in 0..targets.indexed {
                for k in named_keys(&self.chunks[ci]) {
                    named.push(k, self.chunk_nodes[ci]);
                }
            }
            named
        })
    }

    fn prereq_tag(tag: &str) -> String {
        format!("{tag}_|-__prereq_test__")
    }

    /// Sets `key` of chunk `ci`, as ordering does.
    fn set_key(&mut self, ci: usize, key: &'static str, value: Value) {
        self.chunks[ci].insert(key, value);
    }

    /// Removes `key` of chunk `ci`, as ordering does.
    fn remove_key(&mut self, ci: usize, key: &'static str) -> Option<Value> {
        self.chunks[ci].shift_remove(key)
    }

    fn add_prereq(&mut self, node: usize, req: usize) {
        if let Some(ci) = self.nodes[node].chunk {
            self.set_key(ci, "__prerequiring__", Value::Bool(true));
            if let Some(r) = self.record.as_mut() {
                r.mark(ci, kept::Mark::Prerequiring);
            }
        }
        let Some(req_chunk) = self.nodes[req].chunk else {
            return;
        };
        self.set_key(req_chunk, "__prereq__", Value::Bool(true));
        if let Some(r) = self.record.as_mut() {
            r.mark(req_chunk, kept::Mark::Prereq);
        }
        let check_tag = Self::prereq_tag(self.node_tag(req));
        let existing = self.node_of(&check_tag);
        let check = match existing {
            Some(c) if self.nodes[c].chunk.is_some() => c,
            _ => {
                let c = self.node_for(Cow::Owned(check_tag));
                self.nodes[c].chunk = Some(req_chunk);
                let deps: Vec<(usize, RequisiteKind)> = self.in_edges[req]
                    .iter()
                    .flat_map(|(src, kinds)| kinds.iter().map(move |k| (*src, k)))
                    .collect();
                for (src, kind) in deps {
                    if kind != RequisiteKind::Prereq {
                        self.add_edge(src, c, kind);
                    }
                }
                c
            }
        };
        self.add_edge(check, node, RequisiteKind::Prereq);
        self.add_edge(node, req, RequisiteKind::Require);
        let node_check_tag = Self::prereq_tag(self.node_tag(node));
        if let Some(nc) = self.node_of(&node_check_tag) {
            if self.nodes[nc].chunk.is_some() {
                self.add_edge(check, nc, RequisiteKind::Prereq);
            }
        }
    }

    fn add_reqs(
        &mut self,
        node: usize,
        has_prereq_node: bool,
        kind: RequisiteKind,
        reqs: &[usize],
    ) {
        for &req in reqs {
            if kind == RequisiteKind::Prereq {
                self.add_prereq(node, req);
            } else {
                if has_prereq_node {
                    let check_tag = Self::prereq_tag(self.node_tag(node));
                    let check = self.node_for(Cow::Owned(check_tag));
                    self.add_edge(req, check, kind);
                }
                self.add_edge(req, node, kind);
            }
        }
    }

    fn add_dependency(&mut self, ci: usize, kind: RequisiteKind, key: &str, val: &str) -> bool {
        self.index_up_to(self.chunks.len());
        let has_prereq = self.chunks[ci]
            .get("__prereq__")
            .is_some_and(|v| v == &Value::Bool(true));
        let node = self.chunk_nodes[ci];
        let mut found = false;
        if key == "sls" {
            if is_pattern(val) {
                found = true;
                let hits: Vec<NodeList> = self
                    .targets
                    .sls_to_nodes
                    .iter()
                    .filter(|(sls, _)| fnmatch(sls, val))
                    .map(|(_, v)| v.clone())
                    .collect();
                for reqs in hits {
                    self.add_reqs(node, has_prereq, kind, reqs.as_slice());
                }
            } else if let Some(reqs) = self.targets.sls_to_nodes.get(val).cloned() {
                found = !reqs.as_slice().is_empty();
                self.add_reqs(node, has_prereq, kind, reqs.as_slice());
            }
        } else if is_pattern(val) {
            let prefix = format!("{key}\x1f");
            let hits: Vec<NodeList> = self
                .named_index()
                .iter()
                .filter(|(k, _)| {
                    k.strip_prefix(&prefix)
                        .is_some_and(|name| fnmatch(name, val))
                })
                .map(|(_, v)| v.clone())
                .collect();
            for reqs in hits {
                found = true;
                self.add_reqs(node, has_prereq, kind, reqs.as_slice());
            }
        } else if self.targets.by_string || key.contains('\x1f') || val.contains('\x1f') {
            // The joined key is what matches: look it up as a string.
            let mut k = String::with_capacity(key.len() + 1 + val.len());
            k.push_str(key);
            k.push('\x1f');
            k.push_str(val);
            if let Some(reqs) = self.named_index().get(k.as_str()).cloned() {
                found = !reqs.as_slice().is_empty();
                self.add_reqs(node, has_prereq, kind, reqs.as_slice());
            }
        } else {
            // The chunks listed under the target's hash whose module or
            // `id`, and name or ID, are the ones asked for, in the order
            // they were added; gathered in a reused buffer (adding edges
            // never touches the index).
            let mut reqs = std::mem::take(&mut self.req_buf);
            reqs.clear();
            if let Some(listed) = self.targets.by_target.get(&target_hash(val)) {
                for &n in listed.as_slice() {
                    let Some(c) = self.nodes[n].chunk.map(|ci| &self.chunks[ci]) else {
                        continue;
                    };
                    if target_matches(c.state(), c.id(), &chunk_name(c), key, val) {
                        reqs.push(n);
                    }
                }
            }
            found = !reqs.is_empty();
            self.add_reqs(node, has_prereq, kind, &reqs);
            self.req_buf = reqs;
        }
        found
    }

    /// Adds the requisite edges of chunk `ci` (Salt's `add_requisites`).
    /// Returns Salt's error message for a missing target or a bad value.
    pub fn add_requisites(&mut self, ci: usize, disabled: &[String]) -> Option<String> {
        if !has_requisites(&self.chunks[ci]) {
            return None;
        }
        for kind in RequisiteKind::EDGE_KINDS {
            let present = match self.chunks[ci].get(kind.keyword()) {
                Some(Value::Array(a)) => !a.is_empty(),
                Some(v) => halite_salt_rules::truthy(v),
                None => false,
            };
            if !present {
                continue;
            }
            if disabled.iter().any(|d| d == kind.keyword()) {
                warn_disabled(kind);
                if let Some(r) = self.record.as_mut() {
                    r.skipped(kind);
                }
                continue;
            }
            // The list is taken out of the chunk while its edges are added
            // (adding edges never reads a requisite list) and put back:
            // its targets are read in place, not copied.
            let Some(slot) = self.chunks[ci].get_mut(kind.keyword()) else {
                continue;
            };
            let list = std::mem::take(slot);
            let error = self.add_requisite_list(ci, kind, &list);
            if let Some(slot) = self.chunks[ci].get_mut(kind.keyword()) {
                *slot = list;
            }
            if error.is_some() {
                return error;
            }
        }
        None
    }

    /// The edges of one requisite of chunk `ci`: a list of targets, or one.
    fn add_requisite_list(
        &mut self,
        ci: usize,
        kind: RequisiteKind,
        list: &Value,
    ) -> Option<String> {
        let items = match list {
            Value::Array(a) => a.as_slice(),
            other => std::slice::from_ref(other),
        };
        for item in items {
            // As `RequisiteRef::parse` reads it, without the copies.
            // `key_is_data`: the key is the SLS's own string (Salt's
            // `trim_req` makes a new one of `file.managed`, and `id` of
            // a bare `- foo` is Salt's), which messages print as such.
            let (key, value, key_is_data): (&str, &Value, bool) = match item {
                Value::String(_) => ("id", item, false),
                Value::Object(m) => match m.iter().next() {
                    // `- file.managed: foo` is trimmed to `file`.
                    Some((k, v)) => match k.split_once('.') {
                        Some((module, _)) => (module, v, false),
                        None => (k.as_str(), v, true),
                    },
                    None => continue,
                },
                _ => continue,
            };
            let shown_key = |c: &LowChunk, val: &str| -> String {
                if key_is_data {
                    c.shown_requisite(key, val, key).into_owned()
                } else {
                    key.to_string()
                }
            };
            let val = match value {
                Value::Null => continue,
                Value::String(s) => s.as_str(),
                _ => {
                    let c = &self.chunks[ci];
                    return Some(format!(
                        "Requisite [{}: {}] in state [{}] in SLS [{}] must have a string as the value",
                        kind.keyword(),
                        shown_key(c, ""),
                        c.shown_name(),
                        c.sls()
                    ));
                }
            };
            if !self.add_dependency(ci, kind, key, val) {
                let c = &self.chunks[ci];
                return Some(format!(
                    "Referenced state does not exist for requisite [{}: ({}: {})] in state [{}] in SLS [{}]",
                    kind.keyword(),
                    shown_key(c, val),
                    c.shown_requisite(key, val, val),
                    c.shown_name(),
                    c.sls()
                ));
            }
        }
        None
    }

    fn chunk_order(&mut self, cap: f64, node: usize) -> (f64, f64) {
        let Some(ci) = self.nodes[node].chunk else {
            return (cap, cap);
        };
        let mut order = match self.chunks[ci].get("order") {
            Some(v) => match num(v) {
                Some(n) => n,
                None => match v.as_str() {
                    Some("last") => cap + 1_000_000.0,
                    Some("first") => 0.0,
                    _ => cap,
                },
            },
            None => cap,
        };
        if self.chunks[ci].get("order").and_then(num).is_none() {
            self.set_key(ci, "order", to_value(order));
        }
        let name_order = self
            .remove_key(ci, "name_order")
            .and_then(|v| num(&v))
            .unwrap_or(0.0);
        if name_order != 0.0 {
            order += name_order / 10000.0;
            self.set_key(ci, "order", Value::from(order));
        }
        if order < 0.0 {
            order += cap + 1_000_000.0;
            self.set_key(ci, "order", to_value(order));
        }
        let own = order;
        let child_min = match self.nodes[node].child_min {
            Some(c) => c,
            None => {
                let mut child_min = f64::INFINITY;
                let mut req_order: i16 = -1;
                // By index: setting a child's order never touches the edges.
                for e in 0..self.out_edges[node].len() {
                    let (child, kinds) = self.out_edges[node][e];
                    for kind in kinds.iter() {
                        if req_order > kind.weight() as i16 {
                            continue;
                        }
                        req_order = kind.weight() as i16;
                        let child_order = match self.nodes[child].chunk {
                            None => f64::INFINITY,
                            Some(cc) => match self.chunks[cc].get("order") {
                                None => f64::INFINITY,
                                Some(v) => match num(v) {
                                    Some(n) => n,
                                    None => {
                                        let o = match v.as_str() {
                                            Some("last") => cap + 1_000_000.0,
                                            Some("first") => 0.0,
                                            _ => cap,
                                        };
                                        self.set_key(cc, "order", to_value(o));
                                        o
                                    }
                                },
                            },
                        };
                        child_min = child_min.min(child_order);
                    }
                }
                self.nodes[node].child_min = Some(child_min);
                child_min
            }
        };
        if order > child_min {
            order = child_min;
        }
        (order, own)
    }

    fn key<'a>(&mut self, cap: f64, node: usize, labels: &'a Labels) -> OrderKey<'a> {
        if let Some(r) = self.record.as_mut() {
            r.keyed(node);
        }
        let (first, own) = self.chunk_order(cap, node);
        let (label, tag) = labels.of(node);
        OrderKey {
            first,
            own,
            label,
            tag,
            node,
        }
    }

    /// Every node's label (Salt's `"{state}{name}{fun}"`, `str()` of the
    /// name; empty for a node without a chunk) and tag.
    fn labels(&self) -> Labels {
        let mut labels = Labels {
            text: String::with_capacity(self.nodes.len() * 96),
            at: Vec::with_capacity(self.nodes.len()),
        };
        for (node, n) in self.nodes.iter().enumerate() {
            let text = &mut labels.text;
            let start = text.len();
            if let Some(c) = n.chunk.map(|ci| &self.chunks[ci]) {
                text.push_str(c.state());
                text.push_str(&c.shown_name());
                text.push_str(c.fun());
            }
            let tag = text.len();
            text.push_str(self.node_tag(node));
            labels.at.push((start, tag, text.len()));
        }
        labels
    }

    /// Salt's `order_chunks` after compile: adds every chunk's requisites,
    /// then sorts. Returns the run order as chunk indices (a prereq'd chunk
    /// appears twice: its test run, then its real run) or the errors.
    pub fn order(&mut self, disabled: &[String]) -> Result<Vec<usize>, Vec<String>> {
        let mut cap: f64 = 1.0;
        let mut errors = Vec::new();
        for ci in 0..self.chunks.len() {
            if let Some(err) = self.add_requisites(ci, disabled) {
                errors.push(err);
            } else if let Some(Value::Number(n)) = self.chunks[ci].get("order") {
                if let Some(o) = n.as_i64() {
                    let o = o as f64;
                    if o > cap - 1.0 && o > 0.0 {
                        cap = o + 100.0;
                    }
                }
            }
        }
        if let Some(r) = self.record.as_mut() {
            r.cap(cap);
        }
        match self.topo_sort(cap) {
            Some(order) => {
                if errors.is_empty() {
                    Ok(order)
                } else {
                    Err(errors)
                }
            }
            None => {
                errors.push(format!(
                    "Recursive requisites were found: {}",
                    self.cycles_str()
                ));
                Err(errors)
            }
        }
    }

    fn topo_sort(&mut self, cap: f64) -> Option<Vec<usize>> {
        let n = self.nodes.len();
        let mut in_degree: Vec<usize> = (0..n)
            .map(|i| self.in_edges[i].iter().map(|(_, k)| k.len()).sum())
            .collect();
        // The nodes ready from the start are sorted once, in the order the
        // heap gives (its greatest first: `OrderKey`'s order is reversed),
        // and merged with a heap of the nodes that become ready later: the
        // same sequence as one heap of all, but a tree in definition order
        // is nearly sorted already, where a heap of thousands of nodes
        // compared and moved each key a dozen times.
        let labels = self.labels();
        let mut ready: Vec<OrderKey> = Vec::new();
        for (i, deg) in in_degree.iter().enumerate() {
            if *deg == 0 {
                ready.push(self.key(cap, i, &labels));
            }
        }
        ready.sort_unstable_by(|a, b| b.cmp(a));
        let mut ready = ready.into_iter().peekable();
        let mut heap = BinaryHeap::new();
        let mut out = Vec::with_capacity(n);
        let mut processed = 0;
        loop {
            let from_ready = match (ready.peek(), heap.peek()) {
                (Some(r), Some(h)) => r > h,
                (Some(_), None) => true,
                (None, _) => false,
            };
            let next = if from_ready { ready.next() } else { heap.pop() };
            let Some(k) = next else { break };
            let node = k.node;
            processed += 1;
            if let Some(ci) = self.nodes[node].chunk {
                out.push(ci);
            }
            self.release_dependents(node, &mut in_degree, cap, &labels, |k| heap.push(k));
        }
        if processed != n {
            return None;
        }
        Some(out)
    }

    /// Takes `node`'s edges off its dependents' in-degrees: each whose last
    /// dependency it was is ready, and `ready` gets its key.
    fn release_dependents<'a>(
        &mut self,
        node: usize,
        in_degree: &mut [usize],
        cap: f64,
        labels: &'a Labels,
        mut ready: impl FnMut(OrderKey<'a>),
    ) {
        // By index: a key never touches the edges.
        for e in 0..self.out_edges[node].len() {
            let (t, kinds) = self.out_edges[node][e];
            in_degree[t] -= kinds.len();
            if in_degree[t] == 0 {
                ready(self.key(cap, t, labels));
            }
        }
    }

    /// Finds one cycle (DFS, back edges), as (source, target, kind) node edges.
    fn find_cycle(&self) -> Vec<(usize, usize, RequisiteKind)> {
        const WHITE: u8 = 0;
        const GRAY: u8 = 1;
        const BLACK: u8 = 2;
        let n = self.nodes.len();
        let mut color = vec![WHITE; n];
        let mut parent: Vec<Option<(usize, RequisiteKind)>> = vec![None; n];
        let edges: Vec<Vec<(usize, RequisiteKind)>> = (0..n)
            .map(|i| {
                self.out_edges[i]
                    .iter()
                    .flat_map(|(t, ks)| ks.iter().map(move |k| (*t, k)))
                    .collect()
            })
            .collect();
        for start in 0..n {
            if color[start] != WHITE {
                continue;
            }
            let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
            color[start] = GRAY;
            while let Some(&mut (node, ref mut pos)) = stack.last_mut() {
                if *pos < edges[node].len() {
                    let (target, kind) = edges[node][*pos];
                    *pos += 1;
                    if color[target] == GRAY {
                        let mut cycle = vec![(node, target, kind)];
                        let mut current = node;
                        while current != target {
                            let Some((prev, k)) = parent[current] else {
                                break;
                            };
                            cycle.push((prev, current, k));
                            current = prev;
                        }
                        cycle.reverse();
                        return cycle;
                    } else if color[target] == WHITE {
                        parent[target] = Some((node, kind));
                        color[target] = GRAY;
                        stack.push((target, 0));
                    }
                } else {
                    color[node] = BLACK;
                    stack.pop();
                }
            }
        }
        Vec::new()
    }

    /// The edges of one cycle as (dependent, kind, dependency) chunks.
    pub fn cycle_edges(&self) -> Cycle {
        let mut out = Vec::new();
        for (dependency, dependent, kind) in self.find_cycle() {
            let (Some(a), Some(b)) = (self.nodes[dependency].chunk, self.nodes[dependent].chunk)
            else {
                continue;
            };
            let dep_chunk = self.chunks[b].clone();
            let mut kind = kind;
            if kind == RequisiteKind::Require && !dep_chunk.contains("require") {
                kind = RequisiteKind::Prereq;
            }
            out.push((dep_chunk, kind, self.chunks[a].clone()));
        }
        out
    }

    fn cycles_str(&self) -> String {
        self.cycle_edges()
            .iter()
            .map(|(a, k, b)| format!("({}, '{}', {})", chunk_str(a), k.keyword(), chunk_str(b)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The dependencies of a chunk: (kind, chunk index), in edge order. For
    /// a chunk in its prereq test run, those of its prereq check node.
    pub fn dependencies(&self, ci: usize) -> Vec<(RequisiteKind, usize)> {
        let chunk = &self.chunks[ci];
        let found = if chunk.get("__prereq__") == Some(&Value::Bool(true)) {
            self.node_of(&Self::prereq_tag(self.tag(ci)))
        } else {
            Some(self.chunk_nodes[ci])
        };
        let Some(node) = found else {
            return Vec::new();
        };
        if self.in_edges[node].is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (src, kinds) in &self.in_edges[node] {
            if let Some(c) = self.nodes[*src].chunk {
                for k in kinds.iter() {
                    out.push((k, c));
                }
            }
        }
        out
    }

    /// The run tag of chunk `ci` (`<state>_|-<id>_|-<name>_|-<fun>`).
    pub fn tag(&self, ci: usize) -> &str {
        self.node_tag(self.chunk_nodes[ci])
    }

    /// The index of the chunk with this tag.
    pub fn chunk_index(&self, tag: &str) -> Option<usize> {
        self.node_of(tag).and_then(|n| self.nodes[n].chunk)
    }

    /// The graph in Graphviz DOT (`state.graph`).
    pub fn to_dot(&self) -> String {
        let mut dot = vec!["digraph G {".to_string()];
        for (i, node) in self.nodes.iter().enumerate() {
            let tag = self.node_tag(i);
            match node.chunk {
                Some(ci) => {
                    let c = &self.chunks[ci];
                    let mut label =
                        format!("{}.{}\\n{}", c.state(), c.fun(), dot_escape(&c.shown_id()));
                    let name = c.shown_name();
                    if name_str(c) != c.id() {
                        label.push_str(&format!("\\n({})", dot_escape(&name)));
                    }
                    dot.push(format!("  \"{}\" [label=\"{}\"];", dot_escape(tag), label));
                }
                None => dot.push(format!("  \"{0}\" [label=\"{0}\"];", dot_escape(tag))),
            }
        }
        for (i, edges) in self.out_edges.iter().enumerate() {
            for (t, kinds) in edges {
                for k in kinds.iter() {
                    dot.push(format!(
                        "  \"{}\" -> \"{}\" [label=\"{}\"];",
                        dot_escape(self.node_tag(i)),
                        dot_escape(self.node_tag(*t)),
                        k.keyword()
                    ));
                }
            }
        }
        dot.push("}".into());
        dot.join("\n")
    }

    /// The graph as data (`state.graph format=json`): `nodes` (each with
    /// its run tag as `id`, and the state, function, ID, name and SLS of
    /// its chunk) and `edges` (`source` requisite target, `target`
    /// dependent, `kind` the requisite keyword), for tools that draw it
    /// themselves, such as halite-api's console.
    pub fn to_json(&self) -> Value {
        let nodes: Vec<Value> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let mut m = Map::new();
                m.insert("id".into(), Value::from(self.node_tag(i)));
                if let Some(ci) = node.chunk {
                    let c = &self.chunks[ci];
                    m.insert("state".into(), Value::from(c.state()));
                    m.insert("fun".into(), Value::from(c.fun()));
                    m.insert("state_id".into(), Value::from(c.id()));
                    m.insert("name".into(), Value::from(name_str(c)));
                    m.insert("sls".into(), Value::from(c.sls()));
                }
                Value::Object(m)
            })
            .collect();
        let mut edges = Vec::new();
        for (i, out) in self.out_edges.iter().enumerate() {
            for (t, kinds) in out {
                for k in kinds.iter() {
                    let mut m = Map::new();
                    m.insert("source".into(), Value::from(self.node_tag(i)));
                    m.insert("target".into(), Value::from(self.node_tag(*t)));
                    m.insert("kind".into(), Value::from(k.keyword()));
                    edges.push(Value::Object(m));
                }
            }
        }
        let mut m = Map::new();
        m.insert("nodes".into(), Value::Array(nodes));
        m.insert("edges".into(), Value::Array(edges));
        Value::Object(m)
    }

    /// The graph as a Mermaid flowchart (`state.graph format=mermaid`).
    pub fn to_mermaid(&self) -> String {
        let mut out = vec!["flowchart TD".to_string()];
        for (i, node) in self.nodes.iter().enumerate() {
            let label = match node.chunk {
                Some(ci) => {
                    let c = &self.chunks[ci];
                    format!("{}.{} {}", c.state(), c.fun(), c.id())
                }
                None => self.node_tag(i).to_string(),
            };
            out.push(format!("  n{i}[\"{}\"]", label.replace('"', "#quot;")));
        }
        for (i, edges) in self.out_edges.iter().enumerate() {
            for (t, kinds) in edges {
                for k in kinds.iter() {
                    out.push(format!("  n{i} -->|{}| n{t}", k.keyword()));
                }
            }
        }
        out.join("\n")
    }
}

/// Salt's warning for a requisite `disabled_requisites` names, once per
/// chunk that has it (a kept order replays it: [`KeptOrder`]).
fn warn_disabled(kind: RequisiteKind) {
    tracing::warn!(
        "The {} requisite has been disabled, Ignoring.",
        kind.keyword()
    );
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The chunk's name as a string (Salt formats non-string names with
/// `str()`), for matching and data; messages print [`LowChunk::shown_name`].
pub fn name_str(c: &LowChunk) -> String {
    match c.get("name") {
        Some(Value::String(s)) => s.clone(),
        Some(v) => py_str(v),
        None => String::new(),
    }
}

/// The run tag of a chunk ([`LowChunk::tag`]).
pub fn chunk_tag(c: &LowChunk) -> String {
    c.tag()
}

/// Salt's `_chunk_str` for cycle messages: `str()` of a dict, where a
/// yamlex string's `repr()` is its quoted form too.
fn chunk_str(c: &LowChunk) -> String {
    if c.yamlex().any() {
        let mut out = format!(
            "{{'SLS': {}, 'ID': {}",
            py_repr(&Value::from(c.sls())),
            c.shown_id()
        );
        if c.get("name").and_then(Value::as_str) != Some(c.id()) {
            let name = match c.get("name") {
                Some(Value::String(_)) => c.shown_name().into_owned(),
                Some(v) => py_repr(v),
                None => "None".to_string(),
            };
            out.push_str(&format!(", 'NAME': {name}"));
        }
        out.push('}');
        return out;
    }
    let mut m = Map::new();
    m.insert("SLS".into(), Value::from(c.sls()));
    m.insert("ID".into(), Value::from(c.id()));
    let name = c.get("name").cloned().unwrap_or(Value::Null);
    if name.as_str() != Some(c.id()) {
        m.insert("NAME".into(), name);
    }
    py_repr(&Value::Object(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reproducible sequence of numbers below a bound, from `seed`.
    fn numbers(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut state = seed;
        move |m: u64| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % m
        }
    }

    /// A generated tree of `n` chunks: orders numbered, `first`, `last`,
    /// negative or none, shared names, requisites on earlier and later
    /// chunks (no cycles: a chunk only requires chunks of lower rank).
    fn generated_graph(n: usize, seed: u64) -> Graph {
        let mut next = numbers(seed);
        let rank: Vec<usize> = {
            let mut r: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                r.swap(i, next(i as u64 + 1) as usize);
            }
            r
        };
        let mut graph = Graph::new();
        for i in 0..n {
            let mut chunk = LowChunk::new();
            chunk.insert("state", Value::from("test"));
            chunk.insert("name", Value::from(format!("n{}", next(n as u64 / 3 + 1))));
            chunk.insert("__sls__", Value::from("s"));
            chunk.insert("__id__", Value::from(format!("id{i}")));
            match next(6) {
                0 => {}
                1 => {
                    chunk.insert("order", Value::from("first"));
                }
                2 => {
                    chunk.insert("order", Value::from("last"));
                }
                3 => {
                    chunk.insert("order", Value::from(-(next(5) as i64) - 1));
                }
                _ => {
                    chunk.insert("order", Value::from(next(20)));
                }
            }
            let requires: Vec<Value> = (0..next(3))
                .map(|_| next(n as u64) as usize)
                .filter(|&j| rank[j] < rank[i])
                .map(|j| Value::from(format!("id{j}")))
                .collect();
            if !requires.is_empty() {
                chunk.insert("require", Value::Array(requires));
            }
            chunk.insert("fun", Value::from("nop"));
            graph.add_chunk(chunk);
        }
        graph
    }

    /// Salt's ordering as one heap of every ready node (how `topo_sort`
    /// did it before it merged a sorted start with a heap).
    fn heap_order(graph: &mut Graph) -> Vec<usize> {
        let mut cap: f64 = 1.0;
        for ci in 0..graph.chunks.len() {
            assert_eq!(graph.add_requisites(ci, &[]), None);
            if let Some(o) = graph.chunks[ci].get("order").and_then(Value::as_i64) {
                if o as f64 > cap - 1.0 && o > 0 {
                    cap = o as f64 + 100.0;
                }
            }
        }
        let n = graph.nodes.len();
        let mut in_degree: Vec<usize> = (0..n)
            .map(|i| graph.in_edges[i].iter().map(|(_, k)| k.len()).sum())
            .collect();
        let labels = graph.labels();
        let mut heap: BinaryHeap<OrderKey> = (0..n)
            .filter(|&i| in_degree[i] == 0)
            .map(|i| graph.key(cap, i, &labels))
            .collect();
        let mut out = Vec::new();
        while let Some(k) = heap.pop() {
            out.extend(graph.nodes[k.node].chunk);
            graph.release_dependents(k.node, &mut in_degree, cap, &labels, |k| heap.push(k));
        }
        out
    }

    #[test]
    fn the_merged_sort_orders_as_one_heap_of_every_ready_node() {
        for (n, seed) in [(1, 1), (7, 2), (50, 3), (400, 4), (400, 5), (3000, 6)] {
            let want = heap_order(&mut generated_graph(n, seed));
            let got = generated_graph(n, seed).order(&[]).expect("no cycle");
            assert_eq!(got.len(), n);
            assert_eq!(got, want, "{n} chunks, seed {seed}");
        }
    }

    /// A tree whose requisites find their targets every way a target is
    /// named: by ID, by name (shared by several chunks, or equal to
    /// another chunk's ID), by module or `id`, by a glob, by SLS, a name
    /// that is not a string, a missing target; of every edge kind, prereq
    /// included (so cycles and missing targets come up too).
    fn requisite_tree(n: usize, seed: u64) -> Vec<LowChunk> {
        let mut next = numbers(seed);
        let modules = ["test", "file", "cmd", "pkg"];
        let kinds = [
            "require",
            "require",
            "require",
            "watch",
            "watch_any",
            "onchanges",
            "onfail",
            "prereq",
            "listen",
            "require_any",
            "onfail_all",
            "onchanges_any",
        ];
        (0..n)
            .map(|i| {
                let mut chunk = LowChunk::new();
                chunk.insert("state", Value::from(modules[next(4) as usize]));
                let name = match next(8) {
                    0 => Value::from(format!("id{}", next(n as u64))),
                    1 => Value::from(next(5) as i64),
                    2 | 3 => Value::from(format!("shared{}", next(4))),
                    _ => Value::from(format!("id{i}")),
                };
                chunk.insert("name", name);
                chunk.insert("__sls__", Value::from(format!("sls{}", next(3))));
                chunk.insert("__env__", Value::from("base"));
                chunk.insert("__id__", Value::from(format!("id{i}")));
                if next(4) == 0 {
                    chunk.insert("order", Value::from(next(3) as i64 - 1));
                } else {
                    chunk.insert("order", Value::from(10_000 + i as i64));
                }
                for _ in 0..next(3) {
                    let kind = kinds[next(kinds.len() as u64) as usize];
                    let target = match next(12) {
                        0 => serde_json::json!({ "sls": format!("sls{}", next(4)) }),
                        1 => serde_json::json!({ "id": format!("shared{}", next(5)) }),
                        2 => serde_json::json!({ modules[next(4) as usize]: format!("id{}", next(n as u64)) }),
                        3 => serde_json::json!({ "test": format!("shared{}", next(4)) }),
                        4 => serde_json::json!({ "file.managed": format!("id{}", next(n as u64)) }),
                        5 => serde_json::json!({ "test": format!("id{}*", next(10)) }),
                        6 => serde_json::json!({ "id": next(5).to_string() }),
                        7 => Value::from(format!("shared{}", next(5))),
                        8 => Value::from(format!("missing{}", next(3))),
                        _ => Value::from(format!("id{}", next(n as u64))),
                    };
                    let list = match chunk.get_mut(kind) {
                        Some(Value::Array(list)) => list,
                        _ => {
                            chunk.insert(kind.to_string(), Value::Array(Vec::new()));
                            match chunk.get_mut(kind) {
                                Some(Value::Array(list)) => list,
                                _ => unreachable!(),
                            }
                        }
                    };
                    list.push(target);
                }
                chunk.insert("fun", Value::from("nop"));
                chunk
            })
            .collect()
    }

    /// What ordering gives, to compare: the order or the errors, every
    /// chunk as ordering left it with its dependencies, and every tag.
    fn ordered(mut graph: Graph, disabled: &[String]) -> (String, Vec<String>) {
        let order = format!("{:?}", graph.order(disabled));
        let chunks = (0..graph.chunks.len())
            .map(|ci| {
                format!(
                    "{} {} {:?}",
                    graph.tag(ci),
                    serde_json::to_string(&graph.chunks[ci]).unwrap_or_default(),
                    graph.dependencies(ci)
                )
            })
            .collect();
        (order, chunks)
    }

    #[test]
    fn targets_found_by_hash_are_the_ones_found_by_their_keys_as_strings() {
        let disabled = [
            Vec::new(),
            vec!["require".to_string()],
            vec!["prereq".to_string()],
        ];
        let (mut errors, mut cycles, mut ordered_ok) = (0, 0, 0);
        for seed in 0..120 {
            let n = [3, 10, 40, 200][seed as usize % 4];
            let chunks = requisite_tree(n, seed);
            for disabled in &disabled {
                let mut by_hash = Graph::new();
                let mut by_string = Graph::new();
                by_string.look_up_by_string();
                for c in &chunks {
                    by_hash.add_chunk(c.clone());
                    by_string.add_chunk(c.clone());
                }
                let got = ordered(by_hash, disabled);
                let want = ordered(by_string, disabled);
                assert_eq!(got, want, "seed {seed}, {n} chunks, disabled {disabled:?}");
                match &got.0 {
                    o if o.contains("Recursive") => cycles += 1,
                    o if o.starts_with("Err") => errors += 1,
                    _ => ordered_ok += 1,
                }
            }
        }
        // Every outcome came up.
        assert!(
            errors > 0 && cycles > 0 && ordered_ok > 0,
            "{errors} {cycles} {ordered_ok}"
        );
    }

    /// Everything a run reads of an ordered graph, and how it was left:
    /// the order or the errors, every chunk (its keys in order), its tag
    /// and dependencies, every node's chunk and tag, the edges both ways.
    fn snapshot(result: &Result<crate::pipeline::Compiled, Vec<String>>) -> String {
        let Ok(c) = result else {
            return format!("{result:?}");
        };
        let g = &c.graph;
        let mut out = format!("{:?}\n", c.order);
        for ci in 0..g.chunks.len() {
            out += &format!(
                "{} {} {:?}\n",
                g.tag(ci),
                serde_json::to_string(&g.chunks[ci]).unwrap_or_default(),
                g.dependencies(ci)
            );
        }
        let mut edge_at: Vec<_> = g.edge_at.iter().collect();
        edge_at.sort();
        out += &format!(
            "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n",
            g.nodes
                .iter()
                .map(|n| (n.chunk, n.child_min))
                .collect::<Vec<_>>(),
            g.node_tags,
            g.chunk_nodes,
            g.out_edges,
            g.in_edges,
            edge_at,
        );
        out
    }

    /// A kept order, with what was asked of it.
    #[derive(Default)]
    struct Keep {
        order: std::sync::Mutex<Option<std::sync::Arc<KeptOrder>>>,
        kept: std::sync::atomic::AtomicUsize,
    }

    impl OrderKeep for Keep {
        fn kept(&self) -> Option<std::sync::Arc<KeptOrder>> {
            self.order.lock().unwrap().clone()
        }
        fn keep(&self, order: KeptOrder) {
            self.kept.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            *self.order.lock().unwrap() = Some(std::sync::Arc::new(order));
        }
    }

    #[test]
    fn a_kept_order_replayed_leaves_what_a_fresh_order_leaves() {
        use crate::pipeline::{order_chunks, order_chunks_keeping};
        let modules = crate::module::StateModules::new();
        let disabled = [
            Vec::new(),
            vec!["require".to_string()],
            vec!["prereq".to_string(), "onchanges".to_string()],
        ];
        let (mut replayed, mut prereqs, mut errors) = (0, 0, 0);
        for seed in 0..160 {
            let n = [3, 10, 40, 200][seed as usize % 4];
            // Every other tree without its cycles and missing targets
            // (requisites on later chunks and missing ones dropped), so
            // that most orders succeed and are kept.
            let mut chunks = requisite_tree(n, seed);
            if seed % 2 == 1 {
                for (i, c) in chunks.iter_mut().enumerate() {
                    for kind in RequisiteKind::KEYWORDS {
                        if let Some(Value::Array(list)) = c.get_mut(kind) {
                            list.retain(|t| {
                                t.as_str()
                                    .and_then(|t| t.strip_prefix("id"))
                                    .and_then(|j| j.parse::<usize>().ok())
                                    .is_some_and(|j| j < i)
                            });
                        }
                    }
                }
            }
            for disabled in &disabled {
                let want = snapshot(&order_chunks(chunks.clone(), &modules, disabled));
                let keep = Keep::default();
                let first = order_chunks_keeping(chunks.clone(), &modules, disabled, &keep);
                assert_eq!(snapshot(&first), want, "seed {seed}, {disabled:?}, fresh");
                let kept = keep.kept.load(std::sync::atomic::Ordering::Relaxed);
                assert_eq!(kept, usize::from(first.is_ok()), "only an order is kept");
                if first.is_err() {
                    errors += 1;
                    continue;
                }
                if want.contains("__prereq__") {
                    prereqs += 1;
                }
                // Twice from the kept one: the same, nothing kept again.
                for round in 0..2 {
                    let again = order_chunks_keeping(chunks.clone(), &modules, disabled, &keep);
                    assert_eq!(snapshot(&again), want, "seed {seed}, {disabled:?}, {round}");
                    assert_eq!(keep.kept.load(std::sync::atomic::Ordering::Relaxed), 1);
                }
                replayed += 1;
                // Kept for other requisites disabled: not used, and the
                // fresh order is kept in its place.
                let other = vec!["listen".to_string()];
                let fresh = snapshot(&order_chunks(chunks.clone(), &modules, &other));
                let got = order_chunks_keeping(chunks.clone(), &modules, &other, &keep);
                assert_eq!(snapshot(&got), fresh, "seed {seed}, disabled listen");
                let kept = keep.kept.load(std::sync::atomic::Ordering::Relaxed);
                assert_eq!(kept, 1 + usize::from(got.is_ok()), "seed {seed}, {got:?}");
            }
        }
        assert!(
            replayed > 150 && prereqs > 20 && errors > 20,
            "{replayed} {prereqs} {errors}"
        );
    }

    #[test]
    fn a_kept_order_does_not_fit_other_chunks_and_leaves_them_untouched() {
        let modules = crate::module::StateModules::new();
        let keep = Keep::default();
        let chunks = generated_graph(50, 11).chunks;
        crate::pipeline::order_chunks_keeping(chunks.clone(), &modules, &[], &keep)
            .expect("no cycle");
        let kept = keep.kept().expect("kept");
        // Another number of chunks: not replayed, the graph as added.
        let mut graph = Graph::new();
        for c in chunks.iter().take(49) {
            graph.add_keyed_chunk(c.clone(), ChunkKeys::tag_only(c));
        }
        let before = format!("{graph:?}");
        assert_eq!(kept.replay(&mut graph, &[], &[]), None);
        assert_eq!(format!("{graph:?}"), before);
        // The same chunks, other `watch` reconciled: not replayed either.
        let mut graph = Graph::new();
        for c in chunks.iter() {
            graph.add_keyed_chunk(c.clone(), ChunkKeys::tag_only(c));
        }
        let before = format!("{graph:?}");
        assert_eq!(kept.replay(&mut graph, &[], &[3]), None);
        assert_eq!(format!("{graph:?}"), before);
        assert!(kept.replay(&mut graph, &[], &[]).is_some());
    }

    #[test]
    fn a_separator_in_a_target_matches_as_the_joined_key_did() {
        // `test` + `\x1f` + `a\x1fb` is `test\x1fa` + `\x1f` + `b`: the
        // keys as strings found the chunk by either split.
        let chunk = |id: &str, name: &str, req: Option<Value>| {
            let mut c = LowChunk::new();
            c.insert("state", Value::from("test"));
            c.insert("name", Value::from(name));
            c.insert("__sls__", Value::from("s"));
            c.insert("__id__", Value::from(id));
            if let Some(req) = req {
                c.insert("require", Value::Array(vec![req]));
            }
            c.insert("fun", Value::from("nop"));
            c
        };
        let mut graph = Graph::new();
        graph.add_chunk(chunk("a\x1fb", "a\x1fb", None));
        graph.add_chunk(chunk("c", "c", Some(serde_json::json!({"test\x1fa": "b"}))));
        // A target holding it, found by its key as a string too.
        graph.add_chunk(chunk("e", "e", Some(serde_json::json!({"id": "a\x1fb"}))));
        // A chunk whose name holds it, found by its ID through the hash.
        graph.add_chunk(chunk("h", "i\x1fj", None));
        graph.add_chunk(chunk("k", "k", Some(serde_json::json!({"test": "h"}))));
        assert_eq!(graph.order(&[]), Ok(vec![0, 1, 2, 3, 4]));
        assert_eq!(graph.dependencies(1), vec![(RequisiteKind::Require, 0)]);
        assert_eq!(graph.dependencies(2), vec![(RequisiteKind::Require, 0)]);
        assert_eq!(graph.dependencies(4), vec![(RequisiteKind::Require, 3)]);
    }

    #[test]
    fn a_bundles_filtered_chunks_are_ordered_in_a_graph_sized_for_them() {
        for (n, seed) in [(5, 7), (50, 8), (1000, 9)] {
            let chunks = generated_graph(n, seed).chunks;
            let mut unsized_graph = Graph::new();
            for c in chunks.iter().cloned() {
                unsized_graph.add_chunk(c);
            }
            let want = unsized_graph.order(&[]).expect("no cycle");
            // As the minion hands them over: through a filter, whose
            // lower size bound is 0.
            let modules = crate::module::StateModules::new();
            let got = crate::pipeline::order_chunks(
                chunks.into_iter().filter(|c| !c.is_empty()),
                &modules,
                &[],
            )
            .expect("no cycle");
            assert_eq!(got.order, want, "{n} chunks, seed {seed}");
            assert!(got.graph.chunks == unsized_graph.chunks);
            assert!(got.graph.node_tags == unsized_graph.node_tags);
            // Sized once for every chunk, not grown by doubling.
            assert_eq!(got.graph.chunks.capacity(), n);
            // The target index too, from its first chunk on.
            let mut first = Graph::with_capacity(n);
            first.add_chunk(got.graph.chunks[0].clone());
            assert!(first.targets.by_target.capacity() >= n);
        }
    }
}
