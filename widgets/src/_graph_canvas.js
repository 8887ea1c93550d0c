// The GraphView drawn on a canvas, for big graphs (thousands of boxes), where SVG's DOM
// makes every pan and zoom re-render tens of thousands of elements. Same layout, labels,
// colours, frames, rolled stacks, toggles, selection, matches and break marks as the SVG
// drawing (_graph_draw.js); only what is in sight is drawn, with level of detail when
// zoomed out (detailAt), and hit testing goes down the tree of drawn boxes.
// treeOf, hitIn, canvasIndex and paintScene are pure and unit-tested by
// widgets/test/graph_canvas.test.mjs.
import { detailAt, groupLabel, labelOf, LEGIBLE_PX, subOf } from "./_graphcore.js";
import { markCount } from "./_graph_marks.js";
import { COL_GAP } from "./_layout.js";

/** @typedef {import("./_graph_draw.js").DrawLayout} DrawLayout */
/** @typedef {import("./_panzoom.js").View} View */
/** @typedef {{k: number, part: "expand" | "collapse" | "box" | "frame"}} Hit what is under a point: a box's toggle, a box, a frame's toggle or header */
/**
 * @typedef {object} CanvasLook how boxes look, set by the view
 * @property {(k: number) => string | null} fillOf a box's heat colour, null for the theme's own
 * @property {(k: number) => string | null} inkOf the ink on that colour, null for the theme's own
 * @property {(g: number) => string | null} frameFillOf a frame drawn as one block zoomed out:
 *   the heat colour of its hottest box, null for the theme's own
 * @property {(g: number) => string | null} frameInkOf the ink on that colour, null for the theme's own
 * @property {(items: number[]) => string | null} spanFillOf a column drawn as one box zoomed
 *   out: the mean heat colour of its items (HeatLook), null for the theme's own
 * @property {Set<number>} selected drawn boxes of the selection
 * @property {Set<number>} matches drawn boxes matching the search
 */

/** Above this many drawn boxes and frames, the view draws on a canvas. */
export const CANVAS_MIN = 1500;
/** A frame smaller than this on screen is drawn as one filled, labelled block. */
export const SUMMARY_PX = 28;
/** Zoomed out, a band of wrapped columns this wide on screen carries one label. */
const BAND_PX = 18;

/**
 * @typedef {object} Tree each node's children, and the top's (index n): kidList[kidStart[g] .. kidStart[g+1])
 * @property {Int32Array} kidStart
 * @property {Int32Array} kidList
 */
/** @type {WeakMap<ArrayLike<number>, Tree>} */
const trees = new WeakMap(); // a payload's parent array -> its tree (made once per graph)

/**
 * The payload's tree, made once per graph (children in payload order; n is the top).
 * @param {ArrayLike<number>} parent
 * @returns {Tree}
 */
export function treeOf(parent) {
  let tree = trees.get(parent);
  if (!tree) {
    const n = parent.length;
    const kidStart = new Int32Array(n + 2);
    for (let k = 0; k < n; k++) kidStart[(parent[k] < 0 ? n : parent[k]) + 1]++;
    for (let g = 0; g <= n; g++) kidStart[g + 1] += kidStart[g];
    const kidList = new Int32Array(n);
    const at = kidStart.slice(0, n + 1);
    for (let k = 0; k < n; k++) kidList[at[parent[k] < 0 ? n : parent[k]]++] = k;
    tree = { kidStart, kidList };
    trees.set(parent, tree);
  }
  return tree;
}

/**
 * What is at drawing point (x, y): a box's toggle, a box, a frame's toggle or header, or
 * null. Found down the tree: among the top's drawn children the one holding the point, if
 * a frame among its children, and so on; a box wins over the frames around it, of those
 * the innermost. No index to build (a grid of 100,000 boxes took 15-30 ms after a toggle).
 * @param {Tree} tree treeOf the payload's parents
 * @param {ArrayLike<number>} P x, y, w, h per payload node (NaN when not drawn)
 * @param {ArrayLike<number>} isGroup 1 for a node drawn as a frame
 * @param {ArrayLike<number>} hasKids
 * @param {number} x
 * @param {number} y
 * @returns {Hit | null}
 */
export function hitIn(tree, P, isGroup, hasKids, x, y) {
  const { kidStart, kidList } = tree;
  let g = kidStart.length - 2; // the top
  /** @type {{k: number, part: "collapse" | "frame" | "inside"} | null} */
  let frame = null;
  for (;;) {
    let inner = -1;
    for (let i = kidStart[g]; i < kidStart[g + 1]; i++) {
      const k = kidList[i];
      const px = P[4 * k];
      const py = P[4 * k + 1];
      // NaN (not drawn) fails every comparison
      if (!(x >= px && x <= px + P[4 * k + 2] && y >= py && y <= py + P[4 * k + 3])) continue;
      if (!isGroup[k]) {
        if (hasKids[k] && x >= px + P[4 * k + 2] - 15 && y <= py + 15) return { k, part: "expand" };
        return { k, part: "box" };
      }
      inner = k; // frames of one level do not overlap
      break;
    }
    if (inner < 0) break;
    const px = P[4 * inner];
    const py = P[4 * inner + 1];
    frame = { k: inner, part: x <= px + 16 && y <= py + 17 ? "collapse" : y <= py + 22 ? "frame" : "inside" };
    g = inner;
  }
  if (!frame || frame.part === "inside") return null;
  return { k: frame.k, part: frame.part };
}

/**
 * @typedef {object} CanvasIndex what a layout's canvas drawing looks up, made once per layout
 * @property {Uint8Array} isGroup 1 for a node drawn as a frame
 * @property {Float64Array} edgeBox edge i's bounding box: x0, y0, x1, y1 at 4i
 * @property {Int32Array} colOf the wrapped column (index into cols / 6) an item sits in, -1: none
 * @property {Int32Array} colCount items per wrapped column
 * @property {number[][]} colItems the items of each wrapped column
 */
/**
 * @typedef {object} Colors the theme's colours, read when painting
 * @property {string} edge @property {string} fg @property {string} fg2 @property {string} bg
 * @property {string} bg2 @property {string} border @property {string} accent
 * @property {string} error @property {string} font
 */
/**
 * @typedef {object} Sight the drawing rectangle in sight and the scale
 * @property {number} x0 @property {number} y0 @property {number} x1 @property {number} y1
 * @property {number} k
 */
/** @typedef {{graph: import("./_graphcore.js").GraphPayload, vis: import("./_graph_draw.js").Vis, layout: DrawLayout, rolled: import("./_graphcore.js").Rolled, edges: Int32Array, marks: Map<number, import("./_graph_marks.js").Mark>, isGroup?: Uint8Array}} CanvasState */
/** @typedef {{lod: number, labels: number, blocks: number, heated: number, aggregates: number}} PaintStats */

/** Zoomed out, a wrapped column whose items are under this many screen px in either
 * direction (the column's width, or an item's share of its height) is drawn as one
 * aggregate box: its items would paint as texture (100,000 nodes at Fit: 3 x 6 px each). */
export const AGGREGATE_PX = 4;

/**
 * The lookups a canvas drawing of one layout needs: frames, edge bounds and the
 * wrapped column each item sits in. Pure.
 * @param {CanvasState} S
 * @returns {CanvasIndex}
 */
export function canvasIndex(S) {
  const n = S.graph.parent.length;
  // the frames: the layout's own mask when it came with one (the worker's), else made here
  const isGroup = S.isGroup?.length === n ? S.isGroup : groupMask(n, S.vis.groups);
  // each edge's bounds come with the layout (the worker has the points in hand)
  const edgeBox = S.layout.edgeBox;
  return { isGroup, edgeBox, ...columnsOf(S, isGroup) };
}

/** 1 per node in `groups`. @param {number} n @param {ArrayLike<number>} groups */
function groupMask(n, groups) {
  const mask = new Uint8Array(n);
  for (let i = 0; i < groups.length; i++) mask[groups[i]] = 1;
  return mask;
}

/**
 * Which wrapped column each drawn item sits in: the items of a wrapped level are the
 * children of its first item's parent, placed inside one of the level's columns. Pure.
 * @param {{graph: {parent: ArrayLike<number>}, vis: {boxes: ArrayLike<number>, groups: ArrayLike<number>}, layout: {P: ArrayLike<number>, cols: ArrayLike<number>}}} S
 * @param {ArrayLike<number>} [isGroup] 1 per node drawn as a frame (made from S.vis.groups when not given)
 * @returns {{colOf: Int32Array, colCount: Int32Array, colItems: number[][]}}
 */
export function columnsOf(S, isGroup) {
  const { parent } = S.graph;
  const { P, cols } = S.layout;
  const colOf = new Int32Array(parent.length).fill(-1);
  const nCols = Math.floor(cols.length / 6);
  const colCount = new Int32Array(nCols);
  /** @type {number[][]} */
  const colItems = Array.from({ length: nCols }, () => []);
  // a wrapped level's owner -> its columns (they are listed together, left to right):
  // colFirst[owner + 1] .. colFirst[owner + 1] + colN[owner + 1] (n + 1: the top)
  const n = parent.length;
  const colFirst = new Int32Array(n + 2).fill(-1);
  const colN = new Int32Array(n + 2);
  let wrapped = false;
  for (let c = 0; c < nCols; c++) {
    const first = cols[6 * c + 4];
    if (first < 0) continue;
    const o = parent[first] + 1; // 0: the top
    if (colFirst[o] < 0) colFirst[o] = c;
    colN[o]++;
    wrapped = true;
  }
  if (!wrapped) return { colOf, colCount, colItems };
  // the drawn children of each wrapped level (not every drawn node): boxes, then frames,
  // each in payload order, as a walk of the drawn boxes then the drawn frames meets them
  const { kidStart, kidList } = treeOf(parent);
  const frame = isGroup ?? groupMask(n, S.vis.groups);
  for (let o = 0; o <= n; o++) {
    if (colFirst[o] < 0) continue;
    const g = o === 0 ? n : o - 1;
    for (let frames = 0; frames < 2; frames++) {
      for (let i = kidStart[g]; i < kidStart[g + 1]; i++) {
        const k = kidList[i];
        if (frame[k] !== frames || Number.isNaN(P[4 * k])) continue;
        const cx = P[4 * k] + P[4 * k + 2] / 2;
        // a level's columns run left to right: the last that starts left of the centre
        let lo = colFirst[o];
        let hi = lo + colN[o] - 1;
        while (lo < hi) {
          const mid = (lo + hi + 1) >> 1;
          if (cols[6 * mid] <= cx) lo = mid;
          else hi = mid - 1;
        }
        const c = lo;
        if (cx >= cols[6 * c] && cx <= cols[6 * c] + cols[6 * c + 2]) {
          colOf[k] = c;
          colCount[c]++;
          colItems[c].push(k);
        }
      }
    }
  }
  return { colOf, colCount, colItems };
}

/**
 * The wrapped columns drawn as one aggregate box at scale k: those whose items are under
 * AGGREGATE_PX on screen, across (the column's width) or down (their mean height). Pure.
 * @param {ArrayLike<number>} cols the layout's columns (x, y, w, h, first, last each)
 * @param {Int32Array} colCount items per column
 * @param {number} k
 * @returns {Uint8Array}
 */
export function aggregatedAt(cols, colCount, k) {
  const out = new Uint8Array(colCount.length);
  for (let c = 0; c < colCount.length; c++) {
    const small = Math.min(cols[6 * c + 2], cols[6 * c + 3] / colCount[c]) * k < AGGREGATE_PX;
    if (colCount[c] > 1 && small) out[c] = 1;
  }
  return out;
}

/**
 * @param {HTMLElement} host the .lk-canvas element; the canvas is put in it
 * @param {View} view the view's transform (read only)
 * @returns {{el: HTMLCanvasElement, setState: (S: CanvasState | null) => void, draw: () => void, flush: () => void, paint: () => void,
 *   hit: (sx: number, sy: number) => Hit | null, show: (on: boolean) => void, look: CanvasLook}}
 */
export function makeCanvasView(host, view) {
  const cv = document.createElement("canvas");
  cv.className = "lk-canvas2d";
  cv.style.cssText = "position:absolute;left:0;top:0;width:100%;height:100%;display:none";
  host.appendChild(cv);
  /** @type {CanvasState | null} */
  let S = null;
  /** @type {CanvasIndex | null} */
  let index = null;
  let queued = false;
  let frame = 0; // the queued paint's animation frame
  /** @type {CanvasLook} */
  const look = {
    fillOf: (_k) => null,
    inkOf: (_k) => null,
    frameFillOf: (_g) => null,
    frameInkOf: (_g) => null,
    spanFillOf: (_items) => null,
    selected: new Set(),
    matches: new Set(),
  };

  /** @param {CanvasState | null} state */
  function setState(state) {
    S = state;
    index = S ? canvasIndex(S) : null;
  }

  function paint() {
    queued = false;
    if (!S || !index || cv.style.display === "none") return;
    const dpr = window.devicePixelRatio || 1;
    const cw = host.clientWidth;
    const ch = host.clientHeight;
    if (cv.width !== Math.round(cw * dpr) || cv.height !== Math.round(ch * dpr)) {
      cv.width = Math.round(cw * dpr);
      cv.height = Math.round(ch * dpr);
    }
    const ctx = cv.getContext("2d");
    if (!ctx) return; // no 2d context (a page out of canvas memory): nothing to paint on
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, cv.width, cv.height);
    ctx.setTransform(dpr * view.k, 0, 0, dpr * view.k, dpr * view.x, dpr * view.y);
    const c = themeColors(host);
    ctx.fillStyle = c.fg; // the ink painted with, as the canvas normalises it (tests read it)
    cv.dataset.ink = String(ctx.fillStyle);
    const k = view.k;
    const x0 = -view.x / k;
    const y0 = -view.y / k;
    const st = paintScene(ctx, S, index, look, { x0, y0, x1: x0 + cw / k, y1: y0 + ch / k, k }, c);
    cv.dataset.lod = String(st.lod);
    cv.dataset.labels = String(st.labels); // labels legible zoomed out (summaries, columns)
    cv.dataset.blocks = String(st.blocks);
    cv.dataset.heatedBlocks = String(st.heated);
    cv.dataset.aggregates = String(st.aggregates);
  }

  /** Draw on the next animation frame (many view changes in one frame: one paint). */
  function draw() {
    if (queued) return;
    queued = true;
    frame = requestAnimationFrame(paint);
  }

  /** Paint now what draw() queued (a new layout: shown in the coming frame, not the one after). */
  function flush() {
    if (!queued) return;
    cancelAnimationFrame(frame);
    paint();
  }

  /** @param {number} sx @param {number} sy */
  function hit(sx, sy) {
    if (!S || !index) return null;
    const x = (sx - view.x) / view.k;
    const y = (sy - view.y) / view.k;
    return hitIn(treeOf(S.graph.parent), S.layout.P, index.isGroup, S.vis.hasKids, x, y);
  }

  /** @param {boolean} on */
  function show(on) {
    const display = on ? "block" : "none";
    if (cv.style.display !== display) cv.style.display = display;
    if (on) draw();
  }

  return { el: cv, setState, draw, flush, paint, hit, show, look };
}

/** The theme's colours on an element (a canvas reads no CSS). @param {Element} host @returns {Colors} */
function themeColors(host) {
  const css = getComputedStyle(host);
  const v = (/** @type {string} */ name, /** @type {string} */ dflt) => css.getPropertyValue(name).trim() || dflt;
  return {
    edge: v("--lk-edge", "#9aa3ad"),
    fg: v("--lk-fg", "#222"),
    fg2: v("--lk-fg2", "#6b7280"),
    bg: v("--lk-bg", "#fff"),
    bg2: v("--lk-bg2", "#eee"),
    border: v("--lk-border", "#aab"),
    accent: v("--lk-accent", "#1c7ed6"),
    error: v("--lk-error", "#b71c1c"),
    font: v("--lk-font", "sans-serif"),
  };
}

/**
 * Paint one layout in sight: aggregate columns, frames, edges, boxes, column labels, with
 * level of detail for the scale. A function of its arguments (the context is drawn on).
 * @param {CanvasRenderingContext2D} ctx transformed to drawing units
 * @param {CanvasState} S
 * @param {CanvasIndex} index
 * @param {CanvasLook} look
 * @param {Sight} sight
 * @param {Colors} c
 * @returns {PaintStats}
 */
export function paintScene(ctx, S, index, look, sight, c) {
  const { graph, layout } = S;
  const P = layout.P;
  const { x0, y0, x1, y1 } = sight;
  /** @param {number} i */
  const seen = (i) => P[4 * i] <= x1 && P[4 * i] + P[4 * i + 2] >= x0 && P[4 * i + 1] <= y1 && P[4 * i + 1] + P[4 * i + 3] >= y0;
  // hidden[k]: not drawn, inside a frame drawn as a block or a column drawn as one box
  const hidden = new Uint8Array(graph.parent.length);
  const aggregates = paintAggregates(ctx, S, index, look, sight, c, hidden);
  const shown = inSight(S, index, sight, hidden, seen);
  const frames = paintFrames(ctx, S, shown.frames, look, sight, c, hidden, seen);
  paintEdges(ctx, S, index, sight, c, hidden);
  paintBoxes(ctx, S, shown.boxes, look, sight, c, hidden, seen);
  let labels = frames.labels;
  // zoomed out: a wrapped level's columns say which calls they hold
  if (11 * sight.k < LEGIBLE_PX) labels += columnLabels(ctx, graph, S.rolled, layout.cols, x0, x1, y0, y1, sight.k, c);
  return { lod: detailAt(sight.k), labels, blocks: frames.blocks, heated: frames.heated, aggregates };
}

/**
 * The frames and boxes in sight, found down the tree (a frame out of sight holds nothing
 * in sight; one drawn as a block, or a column drawn as one box, hides what is inside), in
 * payload order within each frame: a paint visits what it draws and the top levels, not
 * every box of the graph (100,000 boxes: ~8 ms a paint).
 * @param {CanvasState} S @param {CanvasIndex} index @param {Sight} sight
 * @param {Uint8Array} hidden @param {(i: number) => boolean} seen
 * @returns {{frames: number[], boxes: number[]}}
 */
export function inSight(S, index, sight, hidden, seen) {
  const { kidStart, kidList } = treeOf(S.graph.parent);
  const P = S.layout.P;
  const isGroup = index.isGroup;
  /** @type {number[]} */
  const frames = [];
  /** @type {number[]} */
  const boxes = [];
  const stack = [kidStart.length - 2]; // the top
  while (stack.length) {
    const g = /** @type {number} */ (stack.pop());
    for (let i = kidStart[g]; i < kidStart[g + 1]; i++) {
      const k = kidList[i];
      if (hidden[k] || Number.isNaN(P[4 * k]) || !seen(k)) continue;
      if (!isGroup[k]) {
        boxes.push(k);
        continue;
      }
      frames.push(k);
      // a frame drawn as one block (paintFrames) hides its insides
      if (Math.min(P[4 * k + 2], P[4 * k + 3]) * sight.k >= SUMMARY_PX) stack.push(k);
    }
  }
  // each frame before what is inside it, siblings in payload order
  frames.sort((a, b) => a - b);
  boxes.sort((a, b) => a - b);
  return { frames, boxes };
}

/**
 * Columns whose items are under a pixel or two each: one box per column, its items hidden.
 * @param {CanvasRenderingContext2D} ctx @param {CanvasState} S @param {CanvasIndex} index
 * @param {CanvasLook} look @param {Sight} sight @param {Colors} c @param {Uint8Array} hidden
 * @returns {number} the columns drawn as one box
 */
function paintAggregates(ctx, S, index, look, sight, c, hidden) {
  const cols = S.layout.cols;
  const agg = aggregatedAt(cols, index.colCount, sight.k);
  let n = 0;
  for (let col = 0; col < agg.length; col++) {
    if (!agg[col]) continue;
    for (const item of index.colItems[col]) hidden[item] = 1;
    const [x, y, w, h] = [cols[6 * col], cols[6 * col + 1], cols[6 * col + 2], cols[6 * col + 3]];
    if (x > sight.x1 || x + w < sight.x0 || y > sight.y1 || y + h < sight.y0) continue;
    ctx.fillStyle = look.spanFillOf(index.colItems[col]) || c.bg2;
    ctx.strokeStyle = c.fg2;
    ctx.lineWidth = 1 / sight.k;
    roundRect(ctx, x, y, w, h, 6 / sight.k);
    ctx.fill();
    ctx.stroke();
    n++;
  }
  return n;
}

/**
 * Frames; one smaller than SUMMARY_PX on screen is a filled, labelled block and what is
 * inside it is not drawn (level of detail zoomed out).
 * @param {CanvasRenderingContext2D} ctx @param {CanvasState} S @param {number[]} frames those in sight (inSight)
 * @param {CanvasLook} look @param {Sight} sight @param {Colors} c @param {Uint8Array} hidden
 * @param {(i: number) => boolean} seen
 * @returns {{labels: number, blocks: number, heated: number}}
 */
function paintFrames(ctx, S, frames, look, sight, c, hidden, seen) {
  const { graph, layout, rolled } = S;
  const P = layout.P;
  const k = sight.k;
  const px = 1 / k; // one screen pixel in drawing units
  const marked = (/** @type {number} */ g) => S.marks?.has(g);
  let labels = 0;
  let blocks = 0; // frames drawn as one block
  let heated = 0; // of those, coloured by their hottest box
  for (const g of frames) {
    const p = graph.parent[g];
    if (hidden[g] || (p >= 0 && hidden[p])) {
      hidden[g] = 1;
      continue;
    }
    if (!seen(g)) continue;
    const [gx, gy, gw, gh] = [P[4 * g], P[4 * g + 1], P[4 * g + 2], P[4 * g + 3]];
    const small = Math.min(gw, gh) * k < SUMMARY_PX;
    const heat = small ? look.frameFillOf(g) : null;
    if (small) {
      hidden[g] = 1;
      blocks += 1;
      if (heat) heated += 1;
    }
    ctx.fillStyle = heat || (small ? c.bg2 : "rgba(120,130,150,.06)");
    ctx.strokeStyle = look.selected.has(g) ? c.accent : marked(g) ? c.error : small ? c.fg2 : c.border;
    ctx.lineWidth = (look.selected.has(g) ? 2.5 : marked(g) ? 2.5 : 1) * Math.max(1, px * 0.8);
    roundRect(ctx, gx, gy, gw, gh, 6);
    ctx.fill();
    ctx.stroke();
    if (11 * k >= LEGIBLE_PX) {
      ctx.fillStyle = c.fg;
      ctx.font = `600 11px ${c.font}`;
      ctx.textAlign = "left";
      ctx.textBaseline = "alphabetic";
      ctx.fillText(groupLabel(graph, g, rolled), gx + 20, gy + 15);
      toggle(ctx, gx + 4, gy + 5, "−", c);
    } else if (small) {
      const ink = (heat && look.frameInkOf(g)) || c.fg;
      labels += screenLabel(ctx, labelOf(graph, g, rolled), gx, gy, gw, gh, k, c.font, ink);
    }
  }
  return { labels, blocks, heated };
}

/**
 * Edges in sight, but not those inside a summarised block or column.
 * @param {CanvasRenderingContext2D} ctx @param {CanvasState} S @param {CanvasIndex} index
 * @param {Sight} sight @param {Colors} c @param {Uint8Array} hidden
 */
function paintEdges(ctx, S, index, sight, c, hidden) {
  const { x0, y0, x1, y1 } = sight;
  const parent = S.graph.parent;
  const box = index.edgeBox;
  ctx.strokeStyle = c.edge;
  ctx.lineWidth = Math.max(1.2, 1 / sight.k);
  ctx.beginPath();
  const { edgeOff, edgeXY, edgeCount } = S.layout;
  const E = S.edges;
  // inside a frame drawn as a block or a column drawn as one box (at any depth)
  const gone = (/** @type {number} */ k) => {
    for (let a = k; a >= 0; a = parent[a]) if (hidden[a] === 1) return true;
    return false;
  };
  for (let i = 0; i < edgeCount; i++) {
    if (box[4 * i + 2] < x0 || box[4 * i] > x1 || box[4 * i + 3] < y0 || box[4 * i + 1] > y1) continue; // out of sight
    if (gone(E[3 * i]) && gone(E[3 * i + 1])) continue; // inside a summarised block
    const a = 2 * edgeOff[i];
    ctx.moveTo(edgeXY[a], edgeXY[a + 1]);
    for (let j = a + 2; j < 2 * edgeOff[i + 1]; j += 2) {
      const mx = (edgeXY[j - 1] + edgeXY[j + 1]) / 2;
      ctx.bezierCurveTo(edgeXY[j - 2], mx, edgeXY[j], mx, edgeXY[j], edgeXY[j + 1]);
    }
  }
  ctx.stroke();
}

/**
 * Boxes in sight, with their text, toggles and marks as the scale allows.
 * @param {CanvasRenderingContext2D} ctx @param {CanvasState} S @param {number[]} boxes those in sight (inSight)
 * @param {CanvasLook} look @param {Sight} sight @param {Colors} c @param {Uint8Array} hidden
 * @param {(i: number) => boolean} seen
 */
function paintBoxes(ctx, S, boxes, look, sight, c, hidden, seen) {
  const { graph, vis, layout, rolled } = S;
  const P = layout.P;
  const px = 1 / sight.k;
  const lod = detailAt(sight.k);
  ctx.textAlign = "center";
  ctx.textBaseline = "alphabetic";
  for (const b of boxes) {
    const p = graph.parent[b];
    if (hidden[b] || (p >= 0 && hidden[p]) || !seen(b)) continue;
    const [bx, by, bw, bh] = [P[4 * b], P[4 * b + 1], P[4 * b + 2], P[4 * b + 3]];
    if (rolled.count.has(b)) {
      ctx.fillStyle = c.bg;
      ctx.strokeStyle = c.fg2;
      ctx.lineWidth = Math.max(1, px * 0.8);
      roundRect(ctx, bx + 4, by - 4, bw, bh, 4);
      ctx.fill();
      ctx.stroke();
    }
    ctx.fillStyle = look.fillOf(b) || c.bg2;
    const sel = look.selected.has(b);
    const match = look.matches.has(b);
    const m = S.marks?.has(b);
    ctx.strokeStyle = sel ? c.accent : match ? "#ae3ec9" : m ? c.error : c.fg2;
    ctx.lineWidth = (sel || match ? 3 : m ? 2.5 : 1) * (lod === 2 ? Math.max(1, px * 0.8) : 1);
    roundRect(ctx, bx, by, bw, bh, graph.kind[b] === "p" ? 12 : 4);
    ctx.fill();
    ctx.stroke();
    if (lod === 2) continue;
    ctx.fillStyle = look.inkOf(b) || c.fg;
    ctx.font = `11px ${c.font}`;
    ctx.fillText(labelOf(graph, b, rolled), bx + bw / 2, by + 15, bw - 4);
    if (lod === 0) {
      ctx.font = `9.5px ${c.font}`;
      ctx.fillText(subOf(graph, b), bx + bw / 2, by + 28, bw - 4);
      if (vis.hasKids[b]) toggle(ctx, bx + bw - 15, by + 3, "+", c);
      const mark = S.marks?.get(b);
      if (mark) badge(ctx, bx, by, markCount(mark), c);
    }
  }
}

/** @param {CanvasRenderingContext2D} ctx @param {number} x @param {number} y @param {number} w @param {number} h @param {number} r */
function roundRect(ctx, x, y, w, h, r) {
  ctx.beginPath();
  ctx.roundRect(x, y, w, h, Math.min(r, h / 2, w / 2));
}

/** @param {CanvasRenderingContext2D} ctx @param {number} x @param {number} y @param {string} sign @param {Colors} c */
function toggle(ctx, x, y, sign, c) {
  ctx.save();
  ctx.fillStyle = c.bg;
  ctx.strokeStyle = c.fg2;
  ctx.lineWidth = 1;
  roundRect(ctx, x, y, 12, 12, 2);
  ctx.fill();
  ctx.stroke();
  ctx.fillStyle = c.fg;
  ctx.font = "bold 11px monospace";
  ctx.textAlign = "center";
  ctx.fillText(sign, x + 6, y + 10);
  ctx.restore();
}

/** @param {CanvasRenderingContext2D} ctx @param {number} x @param {number} y @param {number} n @param {Colors} c */
function badge(ctx, x, y, n, c) {
  ctx.save();
  ctx.fillStyle = c.error;
  ctx.strokeStyle = c.bg;
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  ctx.arc(x, y, 8, 0, 2 * Math.PI);
  ctx.fill();
  ctx.stroke();
  ctx.fillStyle = c.bg;
  ctx.font = "bold 10px sans-serif";
  ctx.textAlign = "center";
  ctx.fillText(String(n), x, y + 3.5);
  ctx.restore();
}

/**
 * A label at 11 screen px, centred in a block when it fits there (zoomed out).
 * @param {CanvasRenderingContext2D} ctx @param {string} text @param {number} x @param {number} y
 * @param {number} w @param {number} h @param {number} k @param {string} font @param {string} ink
 */
function screenLabel(ctx, text, x, y, w, h, k, font, ink) {
  const sw = w * k;
  if (sw < 24 || h * k < 13) return 0;
  ctx.save();
  ctx.translate(x + w / 2, y + h / 2);
  ctx.scale(1 / k, 1 / k);
  ctx.fillStyle = ink;
  ctx.font = `11px ${font}`;
  ctx.textAlign = "center";
  ctx.textBaseline = "middle";
  ctx.fillText(text, 0, 0, sw - 6);
  ctx.restore();
  return 1;
}

/**
 * Zoomed out, a wrapped level's columns say which calls they hold ("layers.0 … layers.24"),
 * written down their length at 11 screen px on a band. Columns narrower than a label are
 * taken together, side by side, until the band is BAND_PX wide on screen; returns how many
 * labels were drawn.
 * @param {CanvasRenderingContext2D} ctx @param {CanvasState["graph"]} graph @param {CanvasState["rolled"]} rolled
 * @param {Float64Array} cols @param {number} _x0 @param {number} _x1 @param {number} y0 @param {number} y1
 * @param {number} k @param {Colors} c
 */
function columnLabels(ctx, graph, rolled, cols, _x0, _x1, y0, y1, k, c) {
  let n = 0;
  /** @type {number[] | null} */
  let band = null; // [x, y, right, bottom, first, last]
  const flush = () => {
    if (band) n += bandLabel(ctx, graph, rolled, band, y0, y1, k, c);
    band = null;
  };
  for (let i = 0; i < cols.length; i += 6) {
    const [x, y, w, h, first, last] = cols.subarray(i, i + 6);
    // a new level's columns, or a gap: start a new band
    if (band && (Math.abs(y - band[1]) > 1 || x - band[2] > 2 * COL_GAP)) flush();
    if (!band) band = [x, y, x + w, y + h, first, last];
    else {
      band[2] = x + w;
      band[3] = Math.max(band[3], y + h);
      band[5] = last;
    }
    if ((band[2] - band[0]) * k >= BAND_PX) flush();
  }
  flush();
  return n;
}

/**
 * One band's label, when it is in sight and wide and tall enough on screen.
 * @param {CanvasRenderingContext2D} ctx @param {CanvasState["graph"]} graph @param {CanvasState["rolled"]} rolled
 * @param {number[]} band @param {number} y0 @param {number} y1 @param {number} k @param {Colors} c
 */
function bandLabel(ctx, graph, rolled, band, y0, y1, k, c) {
  const [x, y, right, bottom, first, last] = band;
  if ((right - x) * k < BAND_PX || first < 0 || bottom < y0 || y > y1) return 0;
  const text = first === last ? labelOf(graph, first, rolled) : `${labelOf(graph, first, rolled)} … ${labelOf(graph, last, rolled)}`;
  ctx.save();
  // down the band's middle, from its top (or the top of the view)
  ctx.translate((x + right) / 2, Math.max(y, y0) + 6 / k);
  ctx.scale(1 / k, 1 / k);
  ctx.rotate(Math.PI / 2);
  ctx.font = `600 11px ${c.font}`;
  const room = (Math.min(bottom, y1) - Math.max(y, y0)) * k - 12;
  const tw = Math.min(ctx.measureText(text).width, room);
  let drawn = 0;
  if (tw > 40) {
    ctx.fillStyle = c.bg;
    ctx.globalAlpha = 0.85;
    ctx.fillRect(-3, -8, tw + 6, 16);
    ctx.globalAlpha = 1;
    ctx.fillStyle = c.fg;
    ctx.textAlign = "left";
    ctx.textBaseline = "middle";
    ctx.fillText(text, 0, 0, tw);
    drawn = 1;
  }
  ctx.restore();
  return drawn;
}
