// The requisite graph of `state.graph format=json` drawn as SVG: a layered
// layout (each state one layer below the deepest state it requires, the
// order within a layer by the mean position of its requisites), edges
// from the required state down to its dependent, labelled with the
// requisite keyword.

import { s } from "./dom.js";

const W = 220;
const H = 48;
const GX = 36;
const GY = 72;

/** Each node's layer: its longest path from a node with no requisite. */
export function layers(nodes, edges) {
  const layer = new Map(nodes.map((n) => [n.id, 0]));
  // Longest path by relaxation; a cycle stops after |nodes| rounds.
  for (let round = 0; round < nodes.length; round++) {
    let moved = false;
    for (const e of edges) {
      const want = (layer.get(e.source) ?? 0) + 1;
      if (layer.has(e.target) && layer.get(e.target) < want && want < nodes.length + 1) {
        layer.set(e.target, want);
        moved = true;
      }
    }
    if (!moved) break;
  }
  return layer;
}

/** The positions {id → {x, y}} and the drawing's size. */
export function layout(nodes, edges) {
  const layer = layers(nodes, edges);
  const rows = [];
  for (const n of nodes) {
    const l = layer.get(n.id);
    (rows[l] ||= []).push(n.id);
  }
  const pos = new Map();
  const preds = new Map();
  for (const e of edges) {
    if (!preds.has(e.target)) preds.set(e.target, []);
    preds.get(e.target).push(e.source);
  }
  let widest = 0;
  rows.forEach((row, l) => {
    if (l > 0) {
      const mean = (id) => {
        const p = (preds.get(id) || []).map((q) => pos.get(q)).filter(Boolean);
        return p.length ? p.reduce((a, b) => a + b.x, 0) / p.length : Infinity;
      };
      row.sort((a, b) => mean(a) - mean(b));
    }
    row.forEach((id, i) => pos.set(id, { x: i * (W + GX), y: l * (H + GY) }));
    widest = Math.max(widest, row.length);
  });
  return { pos, width: Math.max(widest * (W + GX) - GX, W), height: Math.max(rows.length * (H + GY) - GY, H) };
}

function clip(t, n) {
  return t.length > n ? t.slice(0, n - 1) + "…" : t;
}

/** The SVG of graph `g`. */
export function drawGraph(g) {
  const nodes = Array.isArray(g.nodes) ? g.nodes : [];
  const edges = (Array.isArray(g.edges) ? g.edges : []).filter((e) => e.source !== e.target);
  const { pos, width, height } = layout(nodes, edges);
  const pad = 20;
  const svg = s("svg", {
    class: "graph",
    width: width + 2 * pad,
    height: height + 2 * pad,
    viewBox: `${-pad} ${-pad} ${width + 2 * pad} ${height + 2 * pad}`,
    role: "img",
  });
  svg.append(
    s("defs", {},
      s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 8, markerHeight: 8, orient: "auto-start-reverse" },
        s("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }))),
  );
  for (const e of edges) {
    const a = pos.get(e.source);
    const b = pos.get(e.target);
    if (!a || !b) continue;
    const x1 = a.x + W / 2;
    const y1 = a.y + H;
    const x2 = b.x + W / 2;
    const y2 = b.y;
    const my = (y1 + y2) / 2;
    svg.append(
      s("g", { class: "edge " + String(e.kind).replace(/[^a-z_]/g, "") },
        s("path", { d: `M ${x1} ${y1} C ${x1} ${my}, ${x2} ${my}, ${x2} ${y2}`, "marker-end": "url(#arrow)" }),
        s("text", { x: (x1 + x2) / 2 + 4, y: my - 4 }, String(e.kind))),
    );
  }
  for (const n of nodes) {
    const p = pos.get(n.id);
    const title = n.state ? `${n.state}.${n.fun}` : n.id;
    const sub = n.state_id ?? "";
    svg.append(
      s("g", { class: "node", transform: `translate(${p.x} ${p.y})` },
        s("title", {}, n.id),
        s("rect", { width: W, height: H, rx: 6 }),
        s("text", { x: 10, y: 19, class: "fun" }, clip(title, 30)),
        s("text", { x: 10, y: 37, class: "sid" }, clip(sub + (n.sls ? "  (" + n.sls + ")" : ""), 34))),
    );
  }
  return svg;
}
