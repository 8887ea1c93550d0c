// The GraphView's drawing as SVG text: group frames, node boxes, edges and their arrow
// marker, graph-break badges. Pure string building (no DOM), so node tests read what is
// drawn; graph.js puts the strings into its layers. See widgets/test/graph_draw.test.mjs.
import { expandedIndices, groupLabel, hottestInside, labelOf, rolledInfo, subOf } from "./_graphcore.js";
import { edgePointsOf, layoutGraph, posView, prepare } from "./_graph_layout.js";
import { pathOf } from "./_layout.js";

export { groupLabel, subOf };
import { markCount, markSummary } from "./_graph_marks.js";
import { esc } from "./_ui.js";

/** @typedef {import("./_graphcore.js").Rolled} Rolled */
/** @typedef {import("./_graph_layout.js").GraphLayout} GraphLayout */
/** @typedef {import("./_graph_layout.js").Prepared} Prepared */
/** @typedef {Map<number, import("./_graph_marks.js").Mark>} Marks drawn box -> its graph breaks (liftMarks) */
/**
 * @typedef {object} Vis what is drawn
 * @property {Int32Array} boxOf the drawn box or frame that shows each payload node
 * @property {number[] | Int32Array} boxes drawn as boxes, in payload order
 * @property {number[] | Int32Array} groups drawn as frames, in payload order
 * @property {Uint8Array} hasKids 1 for a node with children
 */
/**
 * @typedef {object} DrawLayout a layout as the view reads it
 * @property {ReturnType<typeof posView>} pos a box's {x, y, w, h} by payload index (Map-like)
 * @property {Float64Array} P x, y, w, h per payload node (NaN when not drawn)
 * @property {number} width
 * @property {number} height
 * @property {Int32Array} edgeOff edge i's points are edgeXY[2 edgeOff[i] .. 2 edgeOff[i+1])
 * @property {Float64Array} edgeXY
 * @property {Float64Array} edgeBox edge i's bounds: x0, y0, x1, y1 at 4i (the layout's)
 * @property {Float64Array} cols wrapped columns: x, y, w, h, first node, last node each
 * @property {number} edgeCount
 */
/**
 * @typedef {object} DrawState what the view draws for one layout (viewState)
 * @property {Rolled} rolled
 * @property {Set<number> | null} expanded payload indices of the expanded calls, when known
 * @property {Vis} vis
 * @property {Int32Array} edges s, d, tensor per drawn edge
 * @property {DrawLayout} layout
 * @property {number} laidOut levels laid out (not taken from the cache)
 * @property {Uint8Array} [isGroup] 1 for a node drawn as a frame (the layout's, when it made one)
 */

// theme tokens (see _ui.js) with the Light values as fallbacks for exported SVG files
export const SVG_STYLE = `
.lk-edge { fill: none; stroke: var(--lk-edge, #9aa3ad); stroke-width: 1.2; }
.lk-arrow { fill: var(--lk-edge, #9aa3ad); }
.lk-edge.lk-hot { stroke: var(--lk-accent2, #d9480f); stroke-width: 2; }
.lk-node rect.lk-box { stroke: var(--lk-fg2, #6b7280); stroke-width: 1; }
.lk-node.lk-kind-p rect.lk-box { rx: 12; }
.lk-node.lk-kind-i rect.lk-box, .lk-node.lk-kind-o rect.lk-box { stroke-dasharray: 3 2; }
.lk-node rect.lk-stack { fill: var(--lk-bg, #fff); stroke: var(--lk-fg2, #6b7280); }
.lk-node text, .lk-group text { font: 11px sans-serif; text-anchor: middle; pointer-events: none; }
.lk-node text.lk-sub { font-size: 9.5px; }
.lk-node.lk-broken rect.lk-box, .lk-group.lk-broken rect.lk-frame { stroke: var(--lk-error, #b71c1c); stroke-width: 2.5; }
.lk-node.lk-broken-inside rect.lk-box { stroke: var(--lk-error, #b71c1c); stroke-width: 2; stroke-dasharray: 5 3; }
.lk-mark circle { fill: var(--lk-error, #b71c1c); stroke: var(--lk-bg, #fff); stroke-width: 1.5; }
.lk-node .lk-mark text, .lk-group .lk-mark text { font: bold 10px sans-serif; fill: var(--lk-bg, #fff); }
.lk-node.lk-selected rect.lk-box { stroke: var(--lk-accent, #1c7ed6); stroke-width: 3; }
.lk-node.lk-match rect.lk-box { stroke: #ae3ec9; stroke-width: 3; }
.lk-group rect.lk-frame { fill: rgba(120,130,150,.06); stroke: var(--lk-border, #aab); stroke-width: 1; }
.lk-group.lk-selected rect.lk-frame { stroke: var(--lk-accent, #1c7ed6); stroke-width: 2.5; }
.lk-group text.lk-glabel { text-anchor: start; fill: var(--lk-fg, #222); font-weight: 600; }
.lk-toggle rect { fill: var(--lk-bg, #fff); stroke: var(--lk-fg2, #888); }
.lk-toggle text { font: bold 11px monospace !important; fill: var(--lk-fg, #222); }
.lk-toggle { cursor: pointer; }
.lk-node, .lk-group { cursor: pointer; }
.lk-lod1 .lk-node text.lk-sub { display: none; }
.lk-lod2 .lk-node text, .lk-lod2 .lk-toggle, .lk-lod2 .lk-mark text { display: none; }
`;

/**
 * What the view draws for a payload and the expanded call ids, laid out on this thread
 * (the view lays out in a worker: _graph_runner.js): see viewState. `cache` (a Map kept
 * per graph) keeps the prepared payload and each level's layout until its children
 * change size: opening a frame lays out that frame and the levels around it.
 * @param {import("./_graphcore.js").GraphPayload} graph
 * @param {number[] | null | undefined} expandedIds
 * @param {Map<any, any> | null} cache
 * @returns {DrawState}
 */
export function drawState(graph, expandedIds, cache = null) {
  /** @type {Prepared | undefined} */
  let prep = cache?.get("prep");
  if (!prep) {
    prep = prepare(graph);
    if (cache) cache.set("prep", prep);
  }
  const expanded = expandedIndices(graph, expandedIds || []);
  return viewState(graph, prep.hasKids, layoutGraph(prep, expanded, cache), expanded);
}

/**
 * The drawing state of a layout result (GraphLayout, from a worker or this thread).
 * @param {{rolled?: import("./_graphcore.js").GraphPayload["rolled"]}} graph
 * @param {Uint8Array} hasKids
 * @param {GraphLayout} L
 * @param {Set<number> | null} expanded
 * @param {boolean} [typed] boxes and groups as the layout's Int32Arrays, not lists
 * @returns {DrawState}
 */
export function viewState(graph, hasKids, L, expanded, typed = false) {
  // typed: the layout's own arrays (the view reads them by index and for...of; a copy of
  // 100,000 boxes into lists was ~5 ms of the page's thread a toggle)
  const vis = { boxOf: L.boxOf, boxes: typed ? L.boxes : listOf(L.boxes), groups: typed ? L.groups : listOf(L.groups), hasKids };
  const layout = {
    pos: posView(L),
    P: L.pos,
    width: L.width,
    height: L.height,
    edgeOff: L.edgeOff,
    edgeXY: L.edgeXY,
    edgeBox: L.edgeBox,
    cols: L.cols,
    edgeCount: L.edges.length / 3,
  };
  return { rolled: rolledInfo(graph), expanded, vis, edges: L.edges, layout, laidOut: L.laidOut, isGroup: L.isGroup };
}

/**
 * A typed array as a plain array, by push (Array.from walks an iterator: 100,000 items ~3 ms).
 * @param {Int32Array} a
 * @returns {number[]}
 */
function listOf(a) {
  const out = [];
  for (let i = 0; i < a.length; i++) out.push(a[i]);
  return out;
}

/** The class a marked box gets: its own break(s), or only breaks inside it. @param {import("./_graph_marks.js").Mark | null | undefined} m */
function markClass(m) {
  if (!m) return "";
  return m.own.length ? " lk-broken" : " lk-broken-inside";
}

/**
 * A round badge centred at (x, y) with the number of breaks; its title says which.
 * @param {import("./_graph_marks.js").Mark | null | undefined} m @param {number | string} x @param {number | string} y
 */
function badge(m, x, y) {
  if (!m) return "";
  const n = markCount(m);
  return (
    `<g class="lk-mark" data-breaks="${n}" transform="translate(${x},${y})"><title>${esc(markSummary(m))}</title>` +
    `<circle r="8"/><text x="0" y="3.5">${n}</text></g>`
  );
}

/**
 * Expanded calls as frames with a label and a collapse toggle.
 * @param {import("./_graphcore.js").GraphPayload} graph @param {Vis} vis @param {DrawLayout} layout @param {Rolled} rolled
 * @param {Marks | null} marks drawn box -> its breaks (liftMarks), or null
 */
export function groupsSvg(graph, vis, layout, rolled, marks = null) {
  let out = "";
  for (const g of vis.groups) {
    const p = layout.pos.get(g);
    if (!p) continue; // drawn: it has a place
    const m = marks?.get(g);
    const label = groupLabel(graph, g, rolled);
    out +=
      `<g class="lk-group${markClass(m)}" data-k="${g}" transform="translate(${p.x.toFixed(1)},${p.y.toFixed(1)})">` +
      `<rect class="lk-frame" width="${p.w.toFixed(1)}" height="${p.h.toFixed(1)}" rx="6"/>` +
      `<text class="lk-glabel" x="20" y="15">${esc(label)}</text>` +
      `<g class="lk-toggle" data-k="${g}" data-act="collapse"><rect x="4" y="5" width="12" height="12" rx="2"/>` +
      `<text x="10" y="15">−</text></g>` +
      badge(m, p.w.toFixed(1), 0) +
      `</g>`;
  }
  return out;
}

/**
 * Drawn boxes: rolled blocks stacked, calls with hidden insides with an expand toggle.
 * @param {import("./_graphcore.js").GraphPayload} graph @param {Vis} vis @param {DrawLayout} layout @param {Rolled} rolled
 * @param {Marks | null} marks drawn box -> its breaks (liftMarks), or null
 */
export function nodesSvg(graph, vis, layout, rolled, marks = null) {
  let out = "";
  for (const k of vis.boxes) {
    const p = layout.pos.get(k);
    if (!p) continue; // drawn: it has a place
    const m = marks?.get(k);
    const label = labelOf(graph, k, rolled);
    const stacked = rolled.count.has(k);
    out +=
      `<g class="lk-node lk-kind-${graph.kind[k]}${markClass(m)}" data-k="${k}" transform="translate(${p.x.toFixed(1)},${p.y.toFixed(1)})">` +
      (stacked ? `<rect class="lk-stack" x="4" y="-4" width="${p.w}" height="${p.h}" rx="4"/>` : "") +
      `<rect class="lk-box" width="${p.w}" height="${p.h}" rx="4"/>` +
      `<text class="lk-label" x="${p.w / 2}" y="15">${esc(label)}</text>` +
      `<text class="lk-sub" x="${p.w / 2}" y="28">${esc(subOf(graph, k))}</text>` +
      (vis.hasKids[k]
        ? `<g class="lk-toggle" data-k="${k}" data-act="expand"><rect x="${p.w - 15}" y="3" width="12" height="12" rx="2"/>` +
          `<text x="${p.w - 9}" y="13">+</text></g>`
        : "") +
      badge(m, 0, 0) +
      `</g>`;
  }
  return out;
}

/**
 * Edges as paths ending in this view's arrow marker.
 * @param {DrawLayout} layout a viewState layout (its edge points)
 * @param {string} arrowId the view's own marker id (ids are page-wide: one per view, see uid())
 */
export function edgesSvg(layout, arrowId) {
  let out =
    `<defs><marker id="${arrowId}" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" orient="auto">` +
    `<path class="lk-arrow" d="M0,0L8,4L0,8z"/></marker></defs>`;
  for (let i = 0; i < layout.edgeCount; i++) {
    out += `<path class="lk-edge" data-e="${i}" d="${pathOf(edgePointsOf(layout, i))}" marker-end="url(#${arrowId})"/>`;
  }
  return out;
}

/**
 * @typedef {object} HeatLook how the canvas colours boxes for one metric (CanvasLook's colour part)
 * @property {string} key metric and scale: a new key, a new HeatLook
 * @property {ArrayLike<number>} values the metric per payload node
 * @property {{color: (v: number) => string}} scale
 * @property {(k: number) => string | null} fillOf a box's heat colour, null for the theme's own
 * @property {(k: number) => string | null} inkOf
 * @property {(g: number) => string | null} frameFillOf a frame drawn as one block: its hottest box's colour
 * @property {(g: number) => string | null} frameInkOf
 * @property {(items: number[]) => string | null} spanFillOf a column drawn as one box: the mean of its items' hottest boxes
 */

/**
 * The canvas's colours for one metric and scale: each box's colour worked out when first
 * painted and kept (a toggle, a pan: no recolouring); a frame drawn as one block takes
 * its hottest box's colour, a column drawn as one box the mean of its items'. Pure (no DOM).
 * @param {string} key what the colours depend on (metric and scale)
 * @param {ArrayLike<number>} values the metric per payload node
 * @param {{color: (v: number) => string}} scale colorScale's
 * @param {() => {parent: ArrayLike<number>, boxes: ArrayLike<number> & Iterable<number>}} drawing the drawing now (read when first needed per drawing)
 * @param {(fill: string) => string} inkFor the text colour on a fill
 * @param {string} neutral the scale's colour for no value (the theme's own box colour is used)
 * @returns {HeatLook}
 */
export function heatLook(key, values, scale, drawing, inkFor, neutral) {
  /** @type {Map<number, string | null>} */
  const fills = new Map();
  /** @type {Map<string, string>} */
  const inks = new Map();
  /** @type {Float64Array} */
  let hot = new Float64Array(0);
  /** @type {unknown} */
  let hotFor = null;
  /** @param {string | null} fill */
  const inkOn = (fill) => {
    if (!fill) return null;
    let ink = inks.get(fill);
    if (ink === undefined) {
      ink = inkFor(fill);
      inks.set(fill, ink);
    }
    return ink;
  };
  const hottest = () => {
    const d = drawing();
    if (hotFor !== d.boxes) {
      hot = hottestInside(d.parent, d.boxes, (k) => values[k] || 0);
      hotFor = d.boxes;
    }
    return hot;
  };
  /** @param {number} k */
  const fillOf = (k) => {
    let fill = fills.get(k);
    if (fill === undefined) {
      const c = scale.color(values[k] || 0);
      fill = c === neutral ? null : c;
      fills.set(k, fill);
    }
    return fill;
  };
  /** @param {number} g */
  const frameFillOf = (g) => {
    const h = hottest();
    return h[g] > 0 ? scale.color(h[g]) : null;
  };
  /** @param {number[]} items */
  const spanFillOf = (items) => {
    // the mean of its items' hottest boxes: columns differ where the cost does (the
    // hottest of thousands of calls is near the top of the scale in every column)
    const h = hottest();
    let sum = 0;
    for (const k of items) sum += h[k] > 0 ? h[k] : values[k] || 0;
    const v = items.length ? sum / items.length : 0;
    return v > 0 ? scale.color(v) : null;
  };
  return {
    key,
    values,
    scale,
    fillOf,
    inkOf: (k) => inkOn(fillOf(k)),
    frameFillOf,
    frameInkOf: (g) => inkOn(frameFillOf(g)),
    spanFillOf,
  };
}
