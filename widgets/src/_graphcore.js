// Pure graph logic of the GraphView, mirroring labkit/trace/graph.py: which nodes are
// drawn for a set of expanded calls, edges lifted to the drawn boxes, the nested layout
// input, and colour scales. No DOM; unit-tested by widgets/test/graphcore.test.mjs.
//
// A payload node k is trace node graph.ids[k]; graph.parent[k] is a payload index or -1;
// graph.kind is a string of one letter per node: i(nput) o(utput) m(odule) p (op).
import { inkOn } from "./_shared.js";

/** @typedef {import("./_contract_types").GraphPayload} GraphPayload the graph trait (labkit/views/_contract.py) */
/**
 * @typedef {object} Rolled rolledInfo(graph): the rolled blocks by their head box
 * @property {Map<number, number>} count payload index of a block's head -> its calls
 * @property {Map<number, string>} name payload index of a block's head -> the block's name
 */

const decoded = new WeakMap(); // a received buffer -> its value (decoded once)

/**
 * A synced value as sent: a plain object, or one buffer of JSON (labkit's packed_json,
 * which arrives as a DataView) decoded and kept, so the same buffer is decoded once.
 * @param {unknown} raw
 */
export function unpacked(raw) {
  if (!raw || typeof raw !== "object") return raw;
  const view = raw instanceof DataView || ArrayBuffer.isView(raw) ? raw : raw instanceof ArrayBuffer ? new DataView(raw) : null;
  if (!view) return raw;
  let out = decoded.get(raw);
  if (out === undefined) {
    const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
    out = JSON.parse(new TextDecoder().decode(bytes));
    decoded.set(raw, out);
  }
  return out;
}

/** Children lists and the set of nodes that have children. @param {GraphPayload} graph */
export function childrenOf(graph) {
  const n = graph.parent.length;
  /** @type {number[][]} */
  const kids = Array.from({ length: n }, () => []);
  const roots = [];
  for (let k = 0; k < n; k++) {
    const p = graph.parent[k];
    if (p < 0) roots.push(k);
    else kids[p].push(k);
  }
  return { kids, roots };
}

/**
 * Payload indices of expanded calls, from trace node ids (the synced `expanded` trait).
 * @param {{ids: ArrayLike<number>}} graph @param {Iterable<number>} expandedIds
 * @returns {Set<number>}
 */
export function expandedIndices(graph, expandedIds) {
  const index = indexOfIds(graph);
  const out = new Set();
  for (const id of expandedIds) {
    const k = index.get(id);
    if (k !== undefined) out.add(k);
  }
  return out;
}

/** @type {WeakMap<object, Map<number, number>>} */
const idIndex = new WeakMap(); // payload -> trace node id -> payload index (made once)

/**
 * A payload's trace node id -> payload index, made once per payload (a toggle at 100,000
 * nodes no longer builds it again).
 * @param {{ids: ArrayLike<number>}} graph
 * @returns {Map<number, number>}
 */
export function indexOfIds(graph) {
  let index = idIndex.get(graph);
  if (!index) {
    index = new Map();
    const ids = graph.ids;
    for (let k = 0; k < ids.length; k++) index.set(ids[k], k);
    idIndex.set(graph, index);
  }
  return index;
}

/**
 * Which payload nodes are drawn: boxOf[k] is the drawn box or frame that shows node k,
 * boxes are drawn as boxes, groups as frames around their children (execution order).
 * @param {{parent: ArrayLike<number>}} graph @param {Set<number>} expanded
 */
export function visibleNodes(graph, expanded) {
  const n = graph.parent.length;
  const boxOf = new Int32Array(n);
  const hasKids = new Uint8Array(n);
  for (let k = 0; k < n; k++) if (graph.parent[k] >= 0) hasKids[graph.parent[k]] = 1;
  for (let k = 0; k < n; k++) {
    const p = graph.parent[k];
    boxOf[k] = p < 0 || (boxOf[p] === p && expanded.has(p)) ? k : boxOf[p];
  }
  const boxes = [];
  const groups = [];
  for (let k = 0; k < n; k++) {
    if (boxOf[k] !== k) continue;
    if (expanded.has(k) && hasKids[k]) groups.push(k);
    else boxes.push(k);
  }
  return { boxOf, boxes, groups, hasKids };
}

/**
 * Edges between drawn boxes: [src, dst, tensor index], deduplicated, no self-loops.
 * @param {{edges: ArrayLike<number>, edge_tensor: ArrayLike<number>}} graph @param {ArrayLike<number>} boxOf
 * @returns {number[][]}
 */
export function liftEdges(graph, boxOf) {
  const out = [];
  const seen = new Set();
  const e = graph.edges;
  for (let j = 0; j < e.length; j += 2) {
    const s = boxOf[e[j]];
    const d = boxOf[e[j + 1]];
    if (s === d) continue;
    const key = s * 1048576 + d;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push([s, d, graph.edge_tensor[j / 2]]);
  }
  return out;
}

/** @type {WeakMap<object, Rolled>} */
const rolledKnown = new WeakMap(); // a payload's rolled list -> its rolledInfo

/**
 * Count of a rolled block's head (1 for any other node), and the block's name.
 * @param {{rolled?: GraphPayload["rolled"]}} graph
 * @returns {Rolled}
 */
export function rolledInfo(graph) {
  // one per payload (a relayout asks again): the same object each time, so what is worked
  // out from it (the breadcrumb) is known unchanged
  const list = graph.rolled;
  const known = list ? rolledKnown.get(list) : undefined;
  if (known) return known;
  const count = new Map();
  const name = new Map();
  for (const [k, c, nm] of graph.rolled || []) {
    count.set(k, c);
    name.set(k, nm);
  }
  const out = { count, name };
  if (list) rolledKnown.set(list, out);
  return out;
}

/**
 * Short label of a node: last part of a module path, "name xN" for a rolled block.
 * @param {{kind: string, name: string[], type: string[], model?: string}} graph @param {number} k
 * @param {Rolled | null | undefined} rolled
 * @returns {string}
 */
export function labelOf(graph, k, rolled) {
  const kind = graph.kind[k];
  const name = graph.name[k];
  if (kind === "m") {
    if (rolled?.count.has(k)) {
      const full = rolled.name.get(k);
      return `${full} ×${rolled.count.get(k)}`;
    }
    if (name === "") return graph.model || graph.type[k];
    // a numbered child (Sequential, ModuleList) keeps its container's name: "layers.0"
    const parts = name.split(".");
    const last = parts.pop() || "";
    return /^\d+$/.test(last) && parts.length ? `${parts.pop()}.${last}` : last;
  }
  return name;
}

/**
 * What `selected` holds for a node: the module path for a call, else the node's name.
 * @param {{name: string[]}} graph @param {number} k
 */
export function selectionOf(graph, k) {
  return graph.name[k];
}

/**
 * The second line of a box: a module's type, an op's or input's first output shape.
 * @param {{kind: string, type: string[], tensors: string[], outs: number[][], ins: number[][]}} graph
 * @param {number} k @param {string[] | null} shapes
 * @returns {string}
 */
export function subOf(graph, k, shapes = null) {
  const kind = graph.kind[k];
  if (kind === "m") return graph.type[k];
  const shape = (/** @type {number} */ t) => (shapes ? shapes[t] : graph.tensors[t].split(" ")[0]);
  const outs = graph.outs[k];
  if (kind === "p" || kind === "i") return outs.length ? shape(outs[0]) : kind === "p" ? "op" : "";
  const ins = graph.ins[k];
  return ins.length ? shape(ins[0]) : "";
}

/**
 * A frame's header label: "blocks.0-5 ×6 · Layer".
 * @param {{kind: string, name: string[], type: string[], model?: string}} graph @param {number} g
 * @param {Rolled | null | undefined} rolled
 */
export function groupLabel(graph, g, rolled) {
  return `${labelOf(graph, g, rolled)} · ${graph.type[g]}`;
}

// Labels are 11 px (types 9.5 px) at scale 1. A graph opens at scale >= OPEN_SCALE
// (labels >= 11 px; a bigger graph is scrolled); below MIN_SCALE (~8 px) a box is not
// legible, so a jump to it zooms in. Fit shows the whole graph at any scale, drawn with
// less detail when zoomed out (LOD_SUB, LOD_TEXT: the scales below which type lines,
// then all box text, are left out: text under LEGIBLE_PX on screen is not drawn).
export const OPEN_SCALE = 1;
export const MIN_SCALE = 0.75;
export const MAX_FIT_SCALE = 1.4;
/** Below this many screen pixels of text a label is not drawn (not legible). */
export const LEGIBLE_PX = 6.5;
export const LOD_SUB = LEGIBLE_PX / 9.5;
export const LOD_TEXT = LEGIBLE_PX / 11;

/**
 * Scale that shows a w x h drawing whole in a cw x ch canvas (never above MAX_FIT_SCALE).
 * @param {number} cw @param {number} ch @param {number} w @param {number} h
 */
export function fitScale(cw, ch, w, h) {
  return Math.min(cw / w, ch / h, MAX_FIT_SCALE);
}

/**
 * Scale a graph opens at: fitted when it fits at a legible size, else OPEN_SCALE.
 * @param {number} cw @param {number} ch @param {number} w @param {number} h
 */
export function openScale(cw, ch, w, h) {
  return Math.max(OPEN_SCALE, fitScale(cw, ch, w, h));
}

/**
 * Level of detail at scale k: 0 all, 1 no type lines, 2 no box text (frames keep labels).
 * @param {number} k
 */
export function detailAt(k) {
  return k < LOD_TEXT ? 2 : k < LOD_SUB ? 1 : 0;
}

/**
 * Estimated box size for a label and a type line (no DOM measuring: fast, testable).
 * @param {string} label @param {string} sub
 */
export function boxSize(label, sub) {
  const chars = Math.max(label.length, sub.length * 0.85);
  return { w: Math.round(Math.min(240, Math.max(64, chars * 6.6 + 22))), h: 36 };
}

/**
 * The nested layout input: for each drawn frame (and a virtual top, key -1), its
 * direct drawn children and the edges between them lifted to that level.
 * @param {{parent: ArrayLike<number>}} graph @param {{boxes: number[], groups: number[]}} vis
 * @param {number[][]} edges
 */
export function layoutInput(graph, vis, edges) {
  const groupSet = new Set(vis.groups);
  /** @type {Map<number, number[]>} frame (-1: the top) -> its drawn children */
  const members = new Map([[-1, []]]);
  for (const g of vis.groups) members.set(g, []);
  const drawn = [...vis.boxes, ...vis.groups].sort((a, b) => a - b);
  const container = new Map(); // drawn node -> its frame (-1 top)
  for (const k of drawn) {
    const p = graph.parent[k];
    const c = p < 0 ? -1 : p; // a drawn node's parent is an expanded, drawn frame
    container.set(k, c);
    members.get(c)?.push(k);
  }
  // ancestors chain of a drawn node among drawn frames (top first), once per node
  /** @type {Map<number, number[]>} */
  const chains = new Map();
  /** @param {number} k @returns {number[]} */
  const chain = (k) => {
    let out = chains.get(k);
    if (out) return out;
    const c = /** @type {number} */ (container.get(k));
    out = c === -1 ? [-1, k] : [...chain(c), k];
    chains.set(k, out);
    return out;
  };
  /** @type {Map<number, number[][]>} frame -> [A, B] edges between its children */
  const levelEdges = new Map([...members.keys()].map((g) => [g, []]));
  const seen = new Set();
  const route = []; // per edge: [level, A, B]
  for (const [s, d] of edges) {
    const cs = chain(s);
    const cd = chain(d);
    let i = 0;
    while (i < cs.length && i < cd.length && cs[i] === cd[i]) i++;
    const level = cs[i - 1];
    const A = cs[i];
    const B = cd[i];
    route.push([level, A, B]);
    if (A === undefined || B === undefined) continue;
    const key = A * 1048576 + B;
    if (!seen.has(key)) {
      seen.add(key);
      levelEdges.get(level)?.push([A, B]);
    }
  }
  return { members, levelEdges, route, isGroup: (/** @type {number} */ k) => groupSet.has(k) };
}

// ---------------------------------------------------------------- colour scales

const STOPS = [
  [255, 247, 188],
  [254, 196, 79],
  [236, 112, 20],
  [153, 52, 4],
];
export const NEUTRAL = "#f1f1f1";

/** @param {number} t @returns {string} */
function mix(t) {
  const x = Math.min(1, Math.max(0, t)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(x));
  const f = x - i;
  const c = STOPS[i].map((v, j) => Math.round(v + (STOPS[i + 1][j] - v) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

/**
 * A colour scale over the positive values: log scale when they span more than a decade,
 * else linear. Zero or missing values get NEUTRAL. Returns {color, min, max, log}.
 * @param {ArrayLike<number>} values
 */
export function colorScale(values) {
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < values.length; i++) {
    const v = values[i]; // by index: a typed array's iterator is slow until optimised
    if (v > 0) {
      if (v < min) min = v;
      if (v > max) max = v;
    }
  }
  if (!(max > 0)) return { color: () => NEUTRAL, min: 0, max: 0, log: false, at: mix };
  const log = max / min > 10;
  const lo = log ? Math.log(min) : 0;
  const hi = log ? Math.log(max) : max;
  const color = (/** @type {number} */ v) => {
    if (!(v > 0)) return NEUTRAL;
    if (hi === lo) return mix(1);
    const t = log ? (Math.log(v) - lo) / (hi - lo) : v / hi;
    return mix(t);
  };
  return { color, min, max, log, at: mix };
}

/**
 * The largest value among the boxes inside each frame, at any depth: zoomed out, a frame
 * summarised as one block is coloured by its hottest box on the boxes' own scale (the
 * legend's), so the map still shows where the cost is.
 * @param {ArrayLike<number>} parent each node's frame, -1 at the top
 * @param {Iterable<number>} boxes the drawn boxes
 * @param {(k: number) => number} value a box's value
 * @returns {Float64Array} by frame; 0 where it holds no box with a positive value
 */
export function hottestInside(parent, boxes, value) {
  const hot = new Float64Array(parent.length);
  for (const k of boxes) {
    const v = value(k);
    if (!(v > 0)) continue;
    // a frame's value is never below its inner frames': stop at the first that has v
    for (let p = parent[k]; p >= 0 && hot[p] < v; p = parent[p]) hot[p] = v;
  }
  return hot;
}

/** Black or white text for a fill given as rgb(...) or #rrggbb: the one with more
 * WCAG contrast (always >= 4.58:1).
 * @param {string} fill */
export function textColor(fill) {
  return inkOn(fill);
}
