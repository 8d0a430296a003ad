//! An order made once and replayed for the same chunks (issue 25): a warm
//! minion runs the same bundle (same digest, so the same chunks) job after
//! job, and ordering it again (the target index, every requisite looked
//! up, the sort) was an eighth of a warm swarm's CPU.
//!
//! [`Graph::order`] is a function of the chunks it is given, the
//! `disabled_requisites` and nothing else: it indexes the chunks, adds
//! edges requisite by requisite, marks prereq chunks, sorts, and sets each
//! chunk's `order` as the sort keys it. A [`KeptOrder`] is what one such
//! run did, written down as indices: the prereq test nodes it added (each
//! the twin of a chunk's node), every edge in the order it was first added
//! with its kinds, the prereq marks in the order they were set, the nodes
//! in the order the sort keyed them, the warnings for disabled requisites,
//! the cap and the order. No string is kept: the tags are the chunks'.
//!
//! Replayed ([`KeptOrder::replay`]) on a graph to which the same chunks
//! were added (tags only: no target index), it adds the same nodes and
//! edges in the same order and sets the same keys in the same order
//! (`chunk_order` runs again, node by node, in the order the sort called
//! it), so the graph, its chunks (their keys' order included) and the
//! order are the ones a fresh order gives. What it checks first: the
//! number of chunks and nodes, the `disabled_requisites`, and which chunks
//! had `watch` turned into `require` (the only part of the order the host's
//! modules decide); anything else is the caller's to key it by (the
//! bundle's digest: the same bytes decode to the same chunks). A kept
//! order that does not fit is not used and nothing is changed: the chunks
//! are ordered afresh.
//!
//! Only a successful order is kept: errors (a missing target, a cycle) are
//! found again on every job, as before.

use std::borrow::Cow;
use std::sync::Arc;

use super::{warn_disabled, Graph, Kinds};
use crate::requisite::RequisiteKind;
use crate::value::Value;

/// No chunk (a node without one).
const NONE: u32 = u32::MAX;

/// A prereq mark ordering sets on a chunk.
#[derive(Debug, Clone, Copy)]
pub(super) enum Mark {
    /// `__prerequiring__`: the chunk has a prereq.
    Prerequiring,
    /// `__prereq__`: the chunk is a prereq's target.
    Prereq,
}

/// What an order did, noted as it went ([`Graph::record_order`]).
#[derive(Debug, Default)]
pub(super) struct Recording {
    /// Edges (source, target), in the order each was first added.
    edges: Vec<(u32, u32)>,
    /// Prereq marks as `chunk << 1 | prereq`, in the order set.
    marks: Vec<u32>,
    /// Nodes in the order the sort keyed them.
    keyed: Vec<u32>,
    /// The disabled requisites skipped (warned about), in order.
    skipped: Vec<u8>,
    /// The cap of the chunks' `order`.
    cap: f64,
}

impl Recording {
    pub(super) fn edge(&mut self, source: usize, target: usize) {
        self.edges.push((source as u32, target as u32));
    }
    pub(super) fn mark(&mut self, chunk: usize, mark: Mark) {
        let bit = match mark {
            Mark::Prerequiring => 0,
            Mark::Prereq => 1,
        };
        self.marks.push((chunk as u32) << 1 | bit);
    }
    pub(super) fn keyed(&mut self, node: usize) {
        self.keyed.push(node as u32);
    }
    pub(super) fn skipped(&mut self, kind: RequisiteKind) {
        let i = RequisiteKind::ALL
            .iter()
            .position(|k| *k == kind)
            .unwrap_or_default();
        self.skipped.push(i as u8);
    }
    pub(super) fn cap(&mut self, cap: f64) {
        self.cap = cap;
    }
}

/// An order of a graph's chunks, kept as indices to be replayed on the
/// same chunks ([`KeptOrder::replay`]; the module doc says why that gives
/// what a fresh order gives). Equal orders compare equal, so a process
/// that runs many identities of one tree can hold one for all of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeptOrder {
    /// The chunks ordered.
    chunks: u32,
    /// The nodes once the chunks were added (two chunks of one tag share
    /// one).
    chunk_nodes: u32,
    /// The `disabled_requisites` it was ordered with.
    disabled: Vec<String>,
    /// The chunks whose `watch` became `require` before it was ordered.
    reconciled: Vec<u32>,
    /// The prereq test nodes added, in order: (the node it is the twin
    /// of, its chunk or [`NONE`]).
    twins: Vec<(u32, u32)>,
    /// Every edge (source, target, kinds) in the order first added.
    edges: Vec<(u32, u32, u64)>,
    /// The prereq marks set ([`Recording::marks`]).
    marks: Vec<u32>,
    /// The nodes in the order the sort keyed them.
    keyed: Vec<u32>,
    /// The disabled requisites skipped, as indices into
    /// [`RequisiteKind::ALL`].
    skipped: Vec<u8>,
    /// The cap of the chunks' `order` (its bits).
    cap: u64,
    /// The run order, as chunk indices.
    order: Vec<u32>,
}

/// Where a job's kept order comes from and goes to: the minion keeps one
/// per identity and bundle digest.
pub trait OrderKeep {
    /// The order kept for these chunks, if any.
    fn kept(&self) -> Option<Arc<KeptOrder>>;
    /// Keeps the order made for these chunks.
    fn keep(&self, order: KeptOrder);
}

/// Keeps nothing: every job orders its chunks afresh.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeepNone;

impl OrderKeep for KeepNone {
    fn kept(&self) -> Option<Arc<KeptOrder>> {
        None
    }
    fn keep(&self, _order: KeptOrder) {}
}

impl KeptOrder {
    /// About the bytes it holds (its vectors' lengths).
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.disabled.iter().map(|d| d.len() + 24).sum::<usize>()
            + 4 * self.reconciled.len()
            + 8 * self.twins.len()
            + 16 * self.edges.len()
            + 4 * self.marks.len()
            + 4 * self.keyed.len()
            + self.skipped.len()
            + 4 * self.order.len()
    }

    /// The chunks it orders.
    pub fn chunks(&self) -> usize {
        self.chunks as usize
    }

    /// Replays this order on `graph`, whose chunks were added (no
    /// requisite looked up, nothing ordered) and had `watch` reconciled
    /// for `reconciled`: the run order, with the graph as a fresh order
    /// leaves it. `None`, with the graph untouched, when it does not fit.
    pub(crate) fn replay(
        &self,
        graph: &mut Graph,
        disabled: &[String],
        reconciled: &[u32],
    ) -> Option<Vec<usize>> {
        let chunk_nodes = self.chunk_nodes as usize;
        if graph.chunks.len() != self.chunks as usize
            || graph.nodes.len() != chunk_nodes
            || !graph.edge_at.is_empty()
            || self.disabled != disabled
            || self.reconciled != reconciled
        {
            return None;
        }
        // Each twin is of a chunk's node, a different one each (checked
        // when kept), so its tag is new: adding them cannot fail.
        for &(of, chunk) in &self.twins {
            let tag = Graph::prereq_tag(graph.node_tag(of as usize));
            let node = graph.node_for(Cow::Owned(tag));
            graph.nodes[node].chunk = (chunk != NONE).then_some(chunk as usize);
        }
        for &(source, target, kinds) in &self.edges {
            let (s, t) = (source as usize, target as usize);
            let kinds = Kinds::from_bits(kinds);
            let out = &mut graph.out_edges[s];
            let inn = &mut graph.in_edges[t];
            out.push((t, kinds));
            inn.push((s, kinds));
            graph
                .edge_at
                .insert((s, t), ((out.len() - 1) as u32, (inn.len() - 1) as u32));
        }
        for &mark in &self.marks {
            let key = if mark & 1 == 1 {
                "__prereq__"
            } else {
                "__prerequiring__"
            };
            graph.set_key((mark >> 1) as usize, key, Value::Bool(true));
        }
        for &kind in &self.skipped {
            if let Some(kind) = RequisiteKind::ALL.get(kind as usize) {
                warn_disabled(*kind);
            }
        }
        let cap = f64::from_bits(self.cap);
        for &node in &self.keyed {
            graph.chunk_order(cap, node as usize);
        }
        Some(self.order.iter().map(|&ci| ci as usize).collect())
    }
}

impl Graph {
    /// Notes what the next [`Graph::order`] does, for
    /// [`Graph::kept_order`].
    pub fn record_order(&mut self) {
        self.record = Some(Box::default());
    }

    /// What [`Graph::order`] did since [`Graph::record_order`], kept as
    /// indices ([`KeptOrder`]), for `order` (what it returned) with
    /// `disabled`; `reconciled`: the chunks whose `watch` became `require`
    /// before. `chunk_nodes`: the nodes before it ordered. `None` when
    /// nothing was noted, or the graph is not one a replay can rebuild.
    pub fn kept_order(
        &mut self,
        chunk_nodes: usize,
        disabled: &[String],
        reconciled: Vec<u32>,
        order: &[usize],
    ) -> Option<KeptOrder> {
        let record = self.record.take()?;
        let n = self.nodes.len();
        if chunk_nodes > n || u32::try_from(n).is_err() {
            return None;
        }
        // The chunks' nodes are the first ones (the chunks are added
        // before anything is ordered); every later one is a prereq test
        // node, the twin of a chunk's node.
        if self.chunk_nodes.iter().any(|&ni| ni >= chunk_nodes) {
            return None;
        }
        let mut twins = Vec::with_capacity(n - chunk_nodes);
        let mut twin_of = vec![false; chunk_nodes];
        for node in chunk_nodes..n {
            let of = self
                .node_tag(node)
                .strip_suffix("_|-__prereq_test__")
                .and_then(|tag| self.node_of(tag))
                .filter(|&of| of < chunk_nodes && !twin_of[of])?;
            twin_of[of] = true;
            let chunk = self.nodes[node].chunk.map_or(NONE, |c| c as u32);
            twins.push((of as u32, chunk));
        }
        let edges = record
            .edges
            .iter()
            .map(|&(s, t)| {
                let (o, _) = self.edge_at.get(&(s as usize, t as usize))?;
                let kinds = self.out_edges[s as usize].get(*o as usize)?.1;
                Some((s, t, kinds.to_bits()))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(KeptOrder {
            chunks: self.chunks.len() as u32,
            chunk_nodes: chunk_nodes as u32,
            disabled: disabled.to_vec(),
            reconciled,
            twins,
            edges,
            marks: record.marks,
            keyed: record.keyed,
            skipped: record.skipped,
            cap: record.cap.to_bits(),
            order: order.iter().map(|&ci| ci as u32).collect(),
        })
    }

    /// The number of nodes (chunks' and prereq test nodes).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }
}
