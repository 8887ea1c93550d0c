// The GraphView's whole layout for one set of expanded calls, on typed arrays: what is
// drawn, the edges lifted to the drawn boxes, every level laid out (_layout.js) and
// nested, absolute positions and each edge's points. No DOM: it runs in a web worker
// (_graph_worker.js) or, where there is no Worker (node tests), on the main thread.
//
// What depends on the payload only is prepared once per graph (prepare): the tree, box
// sizes, and for every trace edge the level it is drawn at (the deepest call holding
// both ends) and the two children of that call it joins. A level's children and its
// edges never change with what is expanded, only its children's sizes do, so a level is
// laid out again only when one of its children changed size (per-level layout: opening a
// frame lays out that frame and the levels around it, collapsed frames stay one box).
// Given the last layout of the same graph (`keep`), only the levels a change reaches are
// visited at all; the rest of a toggle is a few passes over typed arrays (positions, edge
// points), so one at 100,000 nodes costs ~20-30 ms of the worker's time, not ~75.
import { boxSize, groupLabel, labelOf, rolledInfo, subOf } from "./_graphcore.js";
import { COL_GAP, GAP_Y, HEADER, layoutLevel, PAD } from "./_layout.js";

/**
 * @typedef {object} Prepared what layoutGraph needs of a payload, computed once per graph
 * @property {number} n payload nodes; level n is the top
 * @property {Int32Array} parent
 * @property {Uint8Array} hasKids
 * @property {Int32Array} kidStart children of level g: kidList[kidStart[g]..kidStart[g+1]]
 * @property {Int32Array} kidList
 * @property {Int32Array} local a node's index among its level's children
 * @property {Float64Array} boxW
 * @property {Float64Array} boxH
 * @property {Float64Array} headW a frame's header width (label, toggle, margin)
 * @property {Int32Array} es trace edge sources (payload indices)
 * @property {Int32Array} ed trace edge targets
 * @property {Int32Array} et trace edge tensor index
 * @property {Int32Array} elevel level the edge is drawn at (n: the top)
 * @property {Int32Array} eA child of that level holding the source, -1 when none
 * @property {Int32Array} eB child of that level holding the target
 * @property {Int32Array} eL index of (eA, eB) among the level's edges, -1 when none
 * @property {Int32Array} lvStart level edges of g: lvSrc/lvDst[lvStart[g]..lvStart[g+1]] (local indices)
 * @property {Int32Array} lvSrc
 * @property {Int32Array} lvDst
 */

/**
 * What the layout needs of a payload: the tree, sizes and edge routes (once per graph).
 * @param {import("./_worker_messages").LayoutGraph} graph the GraphView payload (the fields the layout reads)
 * @returns {Prepared}
 */
export function prepare(graph) {
  const n = graph.parent.length;
  const parent = Int32Array.from(graph.parent);
  const hasKids = new Uint8Array(n);
  const kidStart = new Int32Array(n + 2);
  for (let k = 0; k < n; k++) {
    const p = parent[k] < 0 ? n : parent[k];
    if (p < n) hasKids[p] = 1;
    kidStart[p + 1]++;
  }
  for (let g = 0; g <= n; g++) kidStart[g + 1] += kidStart[g];
  const kidList = new Int32Array(n);
  const local = new Int32Array(n);
  const at = kidStart.slice(0, n + 1);
  for (let k = 0; k < n; k++) {
    const p = parent[k] < 0 ? n : parent[k];
    local[k] = at[p] - kidStart[p];
    kidList[at[p]++] = k;
  }
  const rolled = rolledInfo(graph);
  const boxW = new Float64Array(n);
  const boxH = new Float64Array(n);
  const headW = new Float64Array(n);
  const shapes = graph.tensors.map((/** @type {string} */ t) => t.split(" ")[0]);
  for (let k = 0; k < n; k++) {
    const s = boxSize(labelOf(graph, k, rolled), subOf(graph, k, shapes));
    boxW[k] = s.w;
    boxH[k] = s.h;
    // toggle (20) + the label in bold 11 px (~7 px a character) + badge and margin (36)
    if (hasKids[k]) headW[k] = Math.ceil(20 + groupLabel(graph, k, rolled).length * 7 + 36);
  }
  const depth = new Int32Array(n);
  for (let k = 0; k < n; k++) depth[k] = parent[k] < 0 ? 0 : depth[parent[k]] + 1;
  const ne = graph.edges.length / 2;
  const es = new Int32Array(ne);
  const ed = new Int32Array(ne);
  const et = Int32Array.from(graph.edge_tensor);
  const elevel = new Int32Array(ne);
  const eA = new Int32Array(ne);
  const eB = new Int32Array(ne);
  const eL = new Int32Array(ne).fill(-1);
  const seen = new PairSet(n, ne); // (A, B) -> level edge number
  const lvCount = new Int32Array(n + 2);
  const pairs = [];
  for (let j = 0; j < ne; j++) {
    const s = graph.edges[2 * j];
    const d = graph.edges[2 * j + 1];
    es[j] = s;
    ed[j] = d;
    let a = s;
    let b = d;
    while (depth[a] > depth[b]) a = parent[a];
    while (depth[b] > depth[a]) b = parent[b];
    if (a === b) {
      // one end holds the other: no level edge, the edge enters from that frame's top
      elevel[j] = a;
      eA[j] = -1;
      eB[j] = -1;
      continue;
    }
    while (parent[a] !== parent[b]) {
      a = parent[a];
      b = parent[b];
    }
    const g = parent[a] < 0 ? n : parent[a];
    elevel[j] = g;
    eA[j] = a;
    eB[j] = b;
    let id = seen.get(a, b);
    if (id < 0) {
      id = lvCount[g]++;
      seen.add(a, b, id);
      pairs.push(g, a, b);
    }
    eL[j] = id;
  }
  const lvStart = new Int32Array(n + 2);
  for (let g = 0; g <= n; g++) lvStart[g + 1] = lvStart[g] + lvCount[g];
  const lvSrc = new Int32Array(lvStart[n + 1]);
  const lvDst = new Int32Array(lvStart[n + 1]);
  const fillAt = lvStart.slice(0, n + 1);
  for (let i = 0; i < pairs.length; i += 3) {
    const g = pairs[i];
    lvSrc[fillAt[g]] = local[pairs[i + 1]];
    lvDst[fillAt[g]++] = local[pairs[i + 2]];
  }
  return { n, parent, hasKids, kidStart, kidList, local, boxW, boxH, headW, es, ed, et, elevel, eA, eB, eL, lvStart, lvSrc, lvDst };
}

/** A level of this many items or more keeps its structure between layouts (layoutLevel's memo). */
const BIG_LEVEL = 1000;

/** @type {import("./_layout.js").LevelLayout} a level not laid out (a node drawn as a box) */
const NO_LEVEL = { x: new Float64Array(0), y: new Float64Array(0), way: [], width: 0, height: 0, cols: [], col: new Int32Array(0) };

/**
 * @typedef {object} GraphLayout the layout of one expansion, in transferable arrays
 * @property {Int32Array} boxOf the drawn box or frame that shows each payload node
 * @property {Int32Array} boxes drawn as boxes, in payload order
 * @property {Int32Array} groups drawn as frames, in payload order
 * @property {Float64Array} pos x, y, w, h per payload node (NaN when not drawn)
 * @property {number} width
 * @property {number} height
 * @property {Int32Array} edges s, d, tensor per drawn edge
 * @property {Int32Array} edgeOff edge i's points are edgeXY[2 edgeOff[i] .. 2 edgeOff[i+1])
 * @property {Float64Array} edgeXY
 * @property {Float64Array} edgeBox edge i's bounds: x0, y0, x1, y1 at 4i
 * @property {Float64Array} cols wrapped columns: x, y, w, h, first node, last node each
 * @property {number} laidOut levels laid out (not taken from the cache)
 * @property {Uint8Array} isGroup 1 per node drawn as a frame (the canvas looks frames up in it)
 */

/**
 * @typedef {object} Kept what a layout leaves for the next one of the same graph: the open
 *   calls, every node's size and place in its level, and each level's layout
 * @property {number} n
 * @property {Uint8Array} open
 * @property {Float64Array} W
 * @property {Float64Array} H
 * @property {Float64Array} relX
 * @property {Float64Array} relY
 * @property {import("./_layout.js").LevelLayout[]} levels
 * @property {(Float64Array | null)[]} ways every level edge's bend points, by its number over
 *   all levels (lvStart[g] + its index in level g): one array read per drawn edge, not
 *   three objects deep into that level's layout (100,000 edges: half of their routing)
 * @property {Uint8Array} wrapped 1 for a level wrapped into columns
 * @property {Float64Array} levW each level's width
 * @property {Int32Array} nCols each level's wrapped columns' numbers (6 a column; 0: not wrapped)
 * @property {Map<number, {struct?: import("./_layout.js").Structure}>} structs a big level's
 *   ranks, dummies and ordered layers (they never change; a toggle changes sizes only)
 * @property {Float64Array} ox a drawn frame's level's origin (n: the top), as last laid out
 * @property {Float64Array} oy
 * @property {number} xyLen the edges' points (numbers) last time
 */

/**
 * @typedef {object} Spare a layout's output arrays made before it is asked for, their
 *   pages written once: a layout's arrays are handed to the page (transferred), so each
 *   one's are new memory, and the first write to each of its pages is a page fault (at
 *   100,000 nodes ~12 MB a toggle; the first write to the edges' points was ~27% of their
 *   routing's samples in a fresh view's first collapse). Made while the worker waits
 *   (makeSpare), they take that cost off the next toggle.
 * @property {number} n
 * @property {Int32Array} boxOf
 * @property {Uint8Array} frame zeros
 * @property {Float64Array} pos NaN
 * @property {Int32Array} edges 3 per trace edge
 * @property {Int32Array} off 1 + 1 per trace edge, zeros
 * @property {Float64Array} box 4 per trace edge
 * @property {Float64Array} xy room for the last layout's points and 1,024 more
 */

/**
 * Make the next layout's output arrays now (the service calls it while its worker is idle).
 * @param {Prepared} P @param {{last?: Kept, spare?: Spare | null}} keep
 */
export function makeSpare(P, keep) {
  const { n } = P;
  const ne = P.es.length;
  if (!keep.last || keep.last.n !== n || keep.spare) return;
  keep.spare = {
    n,
    boxOf: new Int32Array(n).fill(-1),
    frame: new Uint8Array(n).fill(0),
    pos: new Float64Array(4 * n).fill(NaN),
    edges: new Int32Array(3 * ne).fill(-1),
    off: new Int32Array(ne + 1).fill(0),
    box: new Float64Array(4 * ne).fill(NaN),
    xy: new Float64Array(Math.max(1024, keep.last.xyLen + 1024)).fill(NaN),
  };
}

/**
 * Lay out the graph with these calls expanded.
 * @param {Prepared} P
 * @param {Iterable<number> | Uint8Array} expandedIdx payload indices of expanded calls, or a
 *   mask of n bytes (1: expanded)
 * @param {Map<number, {sizes: Float64Array, lay: import("./_layout.js").LevelLayout}> | null} cache level -> its last
 *   layout, kept between calls for one graph
 * @param {{last?: Kept, spare?: Spare | null} | null} keep kept between calls for one graph
 *   (the service's): the last layout's sizes and levels, so a toggle visits only the levels
 *   it changes (the toggled call's, those inside it when it opens, and those around it), not
 *   all 40,000; and the output arrays made for this layout ahead of it (makeSpare), if any
 * @returns {GraphLayout}
 */
export function layoutGraph(P, expandedIdx, cache = null, keep = null) {
  const { n, parent, hasKids, kidStart, kidList } = P;
  // a mask per payload node (the service's, made from the ids without a Set), or indices
  let open = expandedIdx instanceof Uint8Array && expandedIdx.length === n ? expandedIdx.slice() : null;
  if (!open) {
    open = new Uint8Array(n);
    for (const k of expandedIdx) if (k >= 0 && k < n) open[k] = 1;
  }
  const spare = keep?.spare?.n === n ? keep.spare : null;
  if (keep) keep.spare = null; // used once: its arrays go to the page with this layout
  const boxOf = spare ? spare.boxOf : new Int32Array(n);
  const frame = spare ? spare.frame : new Uint8Array(n);
  let nBoxes = 0;
  let nGroups = 0;
  for (let k = 0; k < n; k++) {
    const p = parent[k];
    boxOf[k] = p < 0 || (boxOf[p] === p && frame[p]) ? k : boxOf[p];
    if (boxOf[k] !== k) continue;
    if (open[k] && hasKids[k]) {
      frame[k] = 1;
      nGroups++;
    } else nBoxes++;
  }
  const boxes = new Int32Array(nBoxes);
  const groups = new Int32Array(nGroups);
  nBoxes = nGroups = 0;
  for (let k = 0; k < n; k++) {
    if (boxOf[k] !== k) continue;
    if (frame[k]) groups[nGroups++] = k;
    else boxes[nBoxes++] = k;
  }
  const last = keep?.last?.n === n ? keep.last : null;
  const lv = layLevels(P, open, boxOf, frame, groups, cache, last);
  if (keep) keep.last = lv.kept;
  const { W, H, relX, relY, levels, ways, wrapped, levW, nCols, ox, oy } = lv.kept;
  // absolute positions top-down; a frame's children are centred under its header (the
  // origins' arrays are the kept layout's: each drawn frame's is written before it is read)
  const pos = spare ? spare.pos : new Float64Array(4 * n).fill(NaN);
  for (let k = 0; k < n; k++) {
    if (boxOf[k] !== k) continue;
    const g = parent[k] < 0 ? n : parent[k];
    const x = ox[g] + relX[k];
    const y = oy[g] + relY[k];
    pos[4 * k] = x;
    pos[4 * k + 1] = y;
    pos[4 * k + 2] = W[k];
    pos[4 * k + 3] = H[k];
    if (frame[k]) {
      ox[k] = x + (W[k] - levW[k]) / 2;
      oy[k] = y + HEADER;
    }
  }
  const { edges, edgeOff, edgeXY, edgeBox } = edgeLines(P, boxOf, pos, { levels, ways, wrapped }, ox, oy, lv.kept.xyLen + 1024, spare);
  lv.kept.xyLen = edgeXY.length;
  // the columns' count per level read from a typed array, each level's own read only when
  // it has columns (28,000 frames' layouts visited twice for a few wrapped ones: ~6 ms)
  let nc = nCols[n];
  for (let i = 0; i < groups.length; i++) nc += nCols[groups[i]];
  const cols = new Float64Array(nc);
  let at = 0;
  for (let i = -1; i < groups.length; i++) {
    const g = i < 0 ? n : groups[i];
    if (!nCols[g]) continue;
    const c = levels[g].cols;
    for (let j = 0; j < c.length; j += 6) {
      cols[at++] = ox[g] + c[j];
      cols[at++] = oy[g] + c[j + 1];
      cols[at++] = c[j + 2];
      cols[at++] = c[j + 3];
      cols[at++] = c[j + 4] < 0 ? -1 : kidList[kidStart[g] + c[j + 4]];
      cols[at++] = c[j + 5] < 0 ? -1 : kidList[kidStart[g] + c[j + 5]];
    }
  }
  const top = levels[n];
  return {
    boxOf,
    boxes,
    groups,
    pos,
    width: top.width,
    height: top.height,
    edges,
    edgeOff,
    edgeXY,
    edgeBox,
    cols,
    laidOut: lv.laidOut,
    isGroup: frame,
  };
}

/**
 * Every frame's level and the top, bottom-up (a frame's children come after it in the
 * payload): each node's size (W, H) and place in its level (relX, relY). With the last
 * layout's, only the levels a change reaches: around each call opened or closed, and
 * inside one opened; the others keep their sizes and places.
 * @param {Prepared} P @param {Uint8Array} open @param {Int32Array} boxOf @param {Uint8Array} frame
 * @param {Int32Array} groups frames, in payload order
 * @param {Map<number, {sizes: Float64Array, lay: import("./_layout.js").LevelLayout}> | null} cache
 * @param {Kept | null} last
 * @returns {{kept: Kept, laidOut: number}}
 */
function layLevels(P, open, boxOf, frame, groups, cache, last) {
  const { n, kidStart, kidList, boxW, boxH, headW, lvStart, lvSrc, lvDst } = P;
  // the last layout's object itself, its open calls replaced (a copy of it, { ...last },
  // had a map of its own each time: every read of a kept field deoptimised layoutGraph and
  // level, ~120 times in 60 toggles at 100,000 nodes, their loops run in the interpreter)
  const was = last ? last.open : null;
  /** @type {Kept} */
  const kept = last
    ? last
    : {
        n,
        open,
        W: Float64Array.from(boxW),
        H: Float64Array.from(boxH),
        relX: new Float64Array(n),
        relY: new Float64Array(n),
        // grown by push, not new Array(n + 1): V8 keeps an array of 100,000 holes as a
        // dictionary, and every levels[g] read (per edge, per frame) was a hash lookup
        levels: [],
        ways: [],
        wrapped: new Uint8Array(n + 1),
        levW: new Float64Array(n + 1),
        nCols: new Int32Array(n + 1),
        structs: new Map(),
        ox: new Float64Array(n + 1),
        oy: new Float64Array(n + 1),
        xyLen: 0,
      };
  const { W, H, relX, relY, levels, ways, wrapped, levW, nCols } = kept;
  if (!last) {
    for (let g = 0; g <= n; g++) levels.push(NO_LEVEL);
    for (let e = 0; e < lvStart[n + 1]; e++) ways.push(null);
  }
  kept.open = open;
  const dirty = was ? dirtyLevels(P, was, open, boxOf, frame, W, H) : null;
  let laidOut = 0;
  const level = (/** @type {number} */ g) => {
    const a = kidStart[g];
    const m = kidStart[g + 1] - a;
    const hit = cache?.get(g);
    // the children's sizes as last laid out: the cached layout holds (no copy made)
    let lay = hit && sameSizes(hit.sizes, W, H, kidList, a, m) ? hit.lay : null;
    if (!lay) {
      const sizes = new Float64Array(2 * m);
      const w = new Float64Array(m);
      const h = new Float64Array(m);
      for (let i = 0; i < m; i++) {
        w[i] = sizes[2 * i] = W[kidList[a + i]];
        h[i] = sizes[2 * i + 1] = H[kidList[a + i]];
      }
      // a big level keeps its structure (the top of 14,000 blocks: ~40% of its layout)
      let memo = null;
      if (m >= BIG_LEVEL) {
        memo = kept.structs.get(g) || {};
        kept.structs.set(g, memo);
      }
      lay = layoutLevel(m, w, h, lvSrc.subarray(lvStart[g], lvStart[g + 1]), lvDst.subarray(lvStart[g], lvStart[g + 1]), memo);
      laidOut++;
      if (cache) cache.set(g, { sizes, lay });
    }
    levels[g] = lay;
    for (let e = 0; e < lay.way.length; e++) ways[lvStart[g] + e] = lay.way[e];
    wrapped[g] = lay.cols.length > 6 ? 1 : 0;
    levW[g] = lay.width;
    nCols[g] = lay.cols.length;
    for (let i = 0; i < m; i++) {
      relX[kidList[a + i]] = lay.x[i];
      relY[kidList[a + i]] = lay.y[i];
    }
    if (g < n) {
      W[g] = Math.max(lay.width + 2 * PAD, 90, headW[g]); // room for the header label
      H[g] = lay.height + HEADER + PAD;
    }
  };
  for (let i = groups.length - 1; i >= 0; i--) if (!dirty || dirty[groups[i]]) level(groups[i]);
  if (!dirty || dirty[n]) level(n);
  return { kept, laidOut };
}

/**
 * The levels to lay out again after the open calls changed from `was` to `open` (1 per
 * level, n: the top): a drawn call that closed is its box again (its size reset here),
 * one that opened has its level and every frame inside it laid out (their boxes' sizes
 * reset: a call inside may have closed while hidden), and each frame around a change.
 * @param {Prepared} P @param {Uint8Array} was @param {Uint8Array} open @param {Int32Array} boxOf
 * @param {Uint8Array} frame @param {Float64Array} W @param {Float64Array} H
 * @returns {Uint8Array}
 */
export function dirtyLevels(P, was, open, boxOf, frame, W, H) {
  const { n, parent, hasKids, kidStart, kidList, boxW, boxH } = P;
  const dirty = new Uint8Array(n + 1);
  /** @type {number[]} */
  const stack = [];
  for (let c = 0; c < n; c++) {
    if (was[c] === open[c] || !hasKids[c] || boxOf[c] !== c) continue; // no change, or hidden
    if (frame[c]) stack.push(c);
    else {
      W[c] = boxW[c];
      H[c] = boxH[c];
    }
    for (let a = parent[c]; ; a = parent[a]) {
      dirty[a < 0 ? n : a] = 1;
      if (a < 0) break;
    }
  }
  while (stack.length) {
    const f = /** @type {number} */ (stack.pop());
    if (dirty[f] === 2) continue;
    dirty[f] = 2; // a frame inside an opened call: its children drawn again
    for (let i = kidStart[f]; i < kidStart[f + 1]; i++) {
      const k = kidList[i];
      if (frame[k]) stack.push(k);
      else {
        W[k] = boxW[k];
        H[k] = boxH[k];
      }
    }
  }
  return dirty;
}

/**
 * Whether a level's children (kidList[a .. a+m)) still have the sizes it was laid out with.
 * @param {Float64Array} sizes w, h per child, as laid out
 * @param {Float64Array} W @param {Float64Array} H the children's sizes now
 * @param {ArrayLike<number>} kidList @param {number} a @param {number} m
 */
function sameSizes(sizes, W, H, kidList, a, m) {
  if (sizes.length !== 2 * m) return false;
  for (let i = 0; i < m; i++) {
    const k = kidList[a + i];
    if (sizes[2 * i] !== W[k] || sizes[2 * i + 1] !== H[k]) return false;
  }
  return true;
}

/** @typedef {{levels: import("./_layout.js").LevelLayout[], ways: (Float64Array | null)[], wrapped: Uint8Array}} Levels each level's layout, edge bends and whether it is wrapped */

/**
 * The drawn edges (trace edges lifted to the boxes that show their ends, deduplicated)
 * and their points: bottom of the source, out of a frame down its left margin, the level's
 * bend points, into a frame down its right margin below every header it passes, top of
 * the target. So a skip connection into a block (its "add" at the bottom) does not cross
 * the block's boxes and no edge crosses a frame's label.
 * @param {Prepared} P @param {Int32Array} boxOf @param {Float64Array} pos
 * @param {Levels} levels @param {Float64Array} ox @param {Float64Array} oy
 * @param {number} cap room for the points at first (the last layout's count: no regrowing)
 * @param {Spare | null} spare the output arrays, made ahead (null: new ones)
 */
function edgeLines(P, boxOf, pos, levels, ox, oy, cap, spare) {
  const { n, parent, es, ed, et, elevel, eA, eB, eL, lvStart } = P;
  const ways = levels.ways;
  const seen = new PairSet(n, es.length);
  // sized for every trace edge drawn, cut to those drawn at the end
  const edges = spare ? spare.edges : new Int32Array(3 * es.length);
  const off = spare ? spare.off : new Int32Array(es.length + 1);
  const box = spare ? spare.box : new Float64Array(4 * es.length); // each drawn edge's bounds (the canvas culls by them)
  let ne = 0;
  const xy = new Grow(cap, spare ? spare.xy : null);
  for (let j = 0; j < es.length; j++) {
    const s = boxOf[es[j]];
    const d = boxOf[ed[j]];
    if (s === d || seen.get(s, d) >= 0) continue;
    seen.add(s, d, 0);
    edges[3 * ne] = s;
    edges[3 * ne + 1] = d;
    edges[3 * ne + 2] = et[j];
    const ax = pos[4 * s];
    const ay = pos[4 * s + 1];
    const aw = pos[4 * s + 2];
    const ah = pos[4 * s + 3];
    xy.push(ax + aw / 2, ay + ah);
    const A = eA[j];
    const B = eB[j];
    if (A >= 0 && A !== s) {
      const outB = pos[4 * A + 1] + pos[4 * A + 3];
      if (outB - (ay + ah) > PAD + GAP_Y) {
        const xl = margin(P, levels, ox, pos, A, s, false);
        xy.push(xl, ay + ah + GAP_Y / 3);
        xy.push(xl, outB);
      }
    }
    const g = elevel[j];
    const via = eL[j] >= 0 ? ways[lvStart[g] + eL[j]] : null;
    if (via) for (let i = 0; i < via.length; i += 2) xy.push(ox[g] + via[i], oy[g] + via[i + 1]);
    const bx = pos[4 * d];
    const by = pos[4 * d + 1];
    if (B >= 0 && B !== d) {
      // down the entered frame's right margin, below the header of every frame around d
      const iy = pos[4 * B + 1];
      let below = iy + HEADER;
      for (let f = parent[d]; f >= 0 && f !== B; f = parent[f]) below = Math.max(below, pos[4 * f + 1] + HEADER);
      const xr = margin(P, levels, ox, pos, B, d, true);
      xy.push(xr, iy);
      xy.push(xr, Math.max(below, by - GAP_Y / 3));
    }
    xy.push(bx + pos[4 * d + 2] / 2, by);
    let x0 = Infinity;
    let y0 = Infinity;
    let x1 = -Infinity;
    let y1 = -Infinity;
    const pts = xy.a;
    for (let i = 2 * off[ne]; i < xy.length; i += 2) {
      if (pts[i] < x0) x0 = pts[i];
      if (pts[i] > x1) x1 = pts[i];
      if (pts[i + 1] < y0) y0 = pts[i + 1];
      if (pts[i + 1] > y1) y1 = pts[i + 1];
    }
    box[4 * ne] = x0;
    box[4 * ne + 1] = y0;
    box[4 * ne + 2] = x1;
    box[4 * ne + 3] = y1;
    off[++ne] = xy.length / 2;
  }
  // views of the arrays as filled, not copies: they are handed to the view whole (a copy
  // of each was more memory for the collector, ~10 MB a layout at 100,000 nodes)
  return { edges: edges.subarray(0, 3 * ne), edgeOff: off.subarray(0, ne + 1), edgeXY: xy.done(), edgeBox: box.subarray(0, 4 * ne) };
}

/**
 * Where an edge runs down inside frame f to (or up from) node k in it: the frame's right
 * (or left) margin; in a frame whose level is wrapped into columns, the gap right (left)
 * of the column holding k, not the margin of a frame as wide as all its columns.
 */
/**
 * @param {Prepared} P @param {Levels} levels @param {Float64Array} ox
 * @param {Float64Array} pos @param {number} f @param {number} k @param {boolean} right
 */
function margin(P, levels, ox, pos, f, k, right) {
  if (levels.wrapped[f]) {
    const lay = levels.levels[f];
    let c = k;
    while (P.parent[c] !== f) c = P.parent[c];
    const col = lay.col[P.local[c]];
    const cx = ox[f] + lay.cols[6 * col];
    if (right) return cx + lay.cols[6 * col + 2] + COL_GAP / 2;
    if (col > 0) return cx - COL_GAP / 2;
  }
  return right ? pos[4 * f] + pos[4 * f + 2] - PAD / 2 : pos[4 * f] + PAD / 2;
}

/** A set of (a, b) pairs of node indices with a value each: per a, a list of its bs. */
class PairSet {
  /** @param {number} n nodes @param {number} cap most pairs */
  constructor(n, cap) {
    this.head = new Int32Array(n).fill(-1);
    this.next = new Int32Array(cap);
    this.b = new Int32Array(cap);
    this.val = new Int32Array(cap);
    this.used = 0;
  }

  /** The value of (a, b), or -1 when absent. @param {number} a @param {number} b */
  get(a, b) {
    for (let i = this.head[a]; i >= 0; i = this.next[i]) if (this.b[i] === b) return this.val[i];
    return -1;
  }

  /** @param {number} a @param {number} b @param {number} v */
  add(a, b, v) {
    const i = this.used++;
    this.b[i] = b;
    this.val[i] = v;
    this.next[i] = this.head[a];
    this.head[a] = i;
  }
}

/** A growing list of numbers in a Float64Array. */
class Grow {
  /** @param {number} cap room at first @param {Float64Array | null} a an array to start with */
  constructor(cap = 1024, a = null) {
    this.a = a || new Float64Array(Math.max(1024, cap));
    this.length = 0;
  }

  /** Add the point (x, y). @param {number} x @param {number} y */
  push(x, y) {
    if (this.length + 2 > this.a.length) {
      const b = new Float64Array(2 * this.a.length);
      b.set(this.a);
      this.a = b;
    }
    this.a[this.length++] = x;
    this.a[this.length++] = y;
  }

  /** The numbers pushed (a view of the array, not a copy). */
  done() {
    return this.a.subarray(0, this.length);
  }
}

/**
 * A box's place as {x, y, w, h}, read from a layout's pos array; a Map-like view (get,
 * has, size, iteration over the drawn nodes) for code that reads a few boxes.
 * @param {GraphLayout} L
 */
export function posView(L) {
  const P = L.pos;
  const get = (/** @type {number} */ k) =>
    k >= 0 && !Number.isNaN(P[4 * k]) ? { x: P[4 * k], y: P[4 * k + 1], w: P[4 * k + 2], h: P[4 * k + 3] } : undefined;
  return {
    get,
    has: (/** @type {number} */ k) => get(k) !== undefined,
    size: L.boxes.length + L.groups.length,
    /** [k, box] per drawn node, frames then boxes (a Map's entries). @returns {Generator<[number, ReturnType<typeof get>]>} */
    *[Symbol.iterator]() {
      for (const k of L.groups) yield [k, get(k)];
      for (const k of L.boxes) yield [k, get(k)];
    },
  };
}

/**
 * Points of drawn edge i as [{x, y}].
 * @param {{edgeOff: ArrayLike<number>, edgeXY: ArrayLike<number>}} L @param {number} i
 */
export function edgePointsOf(L, i) {
  const out = [];
  for (let j = L.edgeOff[i]; j < L.edgeOff[i + 1]; j++) out.push({ x: L.edgeXY[2 * j], y: L.edgeXY[2 * j + 1] });
  return out;
}
