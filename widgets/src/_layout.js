// A layered (Sugiyama-style) layout of one level of the nested graph, on typed arrays,
// fast enough for 100,000 nodes (widgets/src/_graph_layout.js nests the levels).
//
// A level's items are laid out on their own: ranks by longest path over the edges lifted
// to that level (execution order is a topological order), dummy nodes on edges spanning
// several ranks, barycentre ordering sweeps, then x by averaging the neighbours' centres
// with overlaps pushed apart. A level much taller than wide (a long chain of blocks) is
// wrapped into side-by-side columns, broken where fewest edges cross, and an edge from one
// column to the next runs up the gap between them. ELK and dagre were measured here
// first: ~2 s at 1,000 nodes for ELK, dagre overflowed its stack at 1,000 compound nodes.
// Measured again (node 22, residual blocks of 4 ops, elkjs 0.9 layered + orthogonal
// routing, INCLUDE_CHILDREN): 202 nodes 1.2 s vs 15 ms, 1,002 nodes 3.0 s vs 38 ms, 2,002
// nodes 3.5 s vs 20 ms. Every array here is typed and sized once: at 100,000 nodes the
// Map-and-closure version spent more time collecting garbage than laying out.

export const GAP_X = 18;
export const GAP_Y = 30;
export const PAD = 10;
export const HEADER = 22;
const DUMMY_W = 6;
const MAX_DUMMY_SPAN = 40;
/** A level taller than this (drawing units) and than WRAP_ASPECT x its width is wrapped. */
export const WRAP_MIN_H = 8000;
const WRAP_ASPECT = 2; // the wrapped level's width : height, about
export const COL_GAP = 60; // between two columns: an edge to the next column runs up its middle
const WIDE = 2400; // an item wider than this is wider than any view at scale 1

/**
 * @typedef {object} LevelLayout
 * @property {Float64Array} x left edge of each item, relative to the level
 * @property {Float64Array} y top edge of each item
 * @property {(Float64Array | null)[]} way per edge: its bend points [x0, y0, x1, y1, ...]
 *   (dummy nodes of a long edge, the detour of an edge to the next column), or null
 * @property {number} width
 * @property {number} height
 * @property {number[]} cols wrapped columns as [x, y, w, h, first item, last item, ...]
 * @property {Int32Array} col each item's column (0 when not wrapped)
 */

/**
 * Lay out one level.
 * @param {number} m items, 0..m-1, in a topological order
 * @param {ArrayLike<number>} w width of each item
 * @param {ArrayLike<number>} h height of each item
 * @param {ArrayLike<number>} src edge sources (item indices)
 * @param {ArrayLike<number>} dst edge targets
 * @param {{struct?: Structure} | null} [memo] kept between layouts of this level (the same
 *   items and edges): its structure is made the first time and read after
 * @returns {LevelLayout}
 */
export function layoutLevel(m, w, h, src, dst, memo = null) {
  // what depends on the items and edges only (ranks, dummies, the ordered layers), made
  // once per level when a memo is kept: a toggle changes sizes, never these
  let st = memo?.struct;
  if (!st) {
    const rank = ranksOf(m, src, dst);
    const d = withDummies(m, src, dst, rank);
    const L = layersOf(d.total, d.vRank);
    const up = csr(d.total, d.lb, d.la); // v -> the vertices above it
    const down = csr(d.total, d.la, d.lb);
    orderLayers(L, up, down);
    st = { rank, d, L, up, down };
    if (memo) memo.struct = st;
  }
  const { rank, L, up, down } = st;
  const g = sized(st.d, m, w, h);
  const x = placeX(L, g.vw, up, down);
  const { layerY, layerH, height } = rankYs(L, g.vh);
  // columns: a tall level wrapped; colOf[r] is rank r's column
  const colOf = new Int32Array(L.nRanks);
  const colY = [0];
  const width = spread(x, g.vw, 0, g.total).width;
  const breaks =
    height > WRAP_MIN_H && height > WRAP_ASPECT * width ? columnBreaks(L.nRanks, layerY, layerH, height, width, g.la, g.lb, g.vRank) : [];
  if (breaks.length) {
    const wrapped = wrapColumns(m, L, g, x, layerY, layerH, breaks, colOf, colY);
    return finish(
      m,
      g.total,
      x,
      g.vw,
      g.vRank,
      layerY,
      layerH,
      colOf,
      colY,
      src,
      dst,
      rank,
      g.chainAt,
      0,
      wrapped.width,
      wrapped.height,
      wrapped.cols,
    );
  }
  const { min } = spread(x, g.vw, 0, g.total);
  return finish(m, g.total, x, g.vw, g.vRank, layerY, layerH, colOf, colY, src, dst, rank, g.chainAt, min, width, height, []);
}

/**
 * Ranks by longest path (items come in a topological order).
 * @param {number} m @param {ArrayLike<number>} src @param {ArrayLike<number>} dst
 * @returns {Int32Array}
 */
function ranksOf(m, src, dst) {
  const ne = src.length;
  const predStart = new Int32Array(m + 1);
  for (let e = 0; e < ne; e++) if (src[e] < dst[e]) predStart[dst[e] + 1]++;
  for (let i = 0; i < m; i++) predStart[i + 1] += predStart[i];
  const pred = new Int32Array(predStart[m]);
  const fill = predStart.slice(0, m);
  for (let e = 0; e < ne; e++) if (src[e] < dst[e]) pred[fill[dst[e]]++] = src[e];
  const rank = new Int32Array(m);
  for (let i = 0; i < m; i++) {
    let r = 0;
    for (let j = predStart[i]; j < predStart[i + 1]; j++) if (rank[pred[j]] + 1 > r) r = rank[pred[j]] + 1;
    rank[i] = r;
  }
  return rank;
}

/**
 * @typedef {object} Dummied the level's vertices: items (v < m) and dummies on long edges
 * @property {number} total vertices
 * @property {Int32Array} vRank @property {Float64Array} vw @property {Float64Array} vh
 * @property {Int32Array} la @property {Int32Array} lb links between adjacent ranks
 * @property {Int32Array} chainAt first dummy of edge e, -1 without
 */

/**
 * Dummy vertices on edges spanning 2..MAX_DUMMY_SPAN ranks (their sizes: sized()).
 * @param {number} m
 * @param {ArrayLike<number>} src @param {ArrayLike<number>} dst @param {Int32Array} rank
 * @returns {Omit<Dummied, "vw" | "vh">}
 */
function withDummies(m, src, dst, rank) {
  const ne = src.length;
  let total = m;
  let links = 0;
  for (let e = 0; e < ne; e++) {
    const span = rank[dst[e]] - rank[src[e]];
    if (span < 1) continue;
    if (span <= MAX_DUMMY_SPAN) {
      total += span - 1;
      links += span;
    } else links++;
  }
  const vRank = new Int32Array(total);
  vRank.set(rank);
  const la = new Int32Array(links);
  const lb = new Int32Array(links);
  const chainAt = new Int32Array(ne).fill(-1);
  let nv = m;
  let nl = 0;
  for (let e = 0; e < ne; e++) {
    const a = src[e];
    const b = dst[e];
    const span = rank[b] - rank[a];
    if (span < 1) continue;
    if (span === 1 || span > MAX_DUMMY_SPAN) {
      la[nl] = a;
      lb[nl++] = b;
      continue;
    }
    chainAt[e] = nv;
    let prev = a;
    for (let r = rank[a] + 1; r < rank[b]; r++) {
      vRank[nv] = r;
      la[nl] = prev;
      lb[nl++] = nv;
      prev = nv++;
    }
    la[nl] = prev;
    lb[nl++] = b;
  }
  return { total, vRank, la, lb, chainAt };
}

/**
 * The vertices' sizes: the items' own, a dummy DUMMY_W wide and 0 high.
 * @param {Omit<Dummied, "vw" | "vh">} d @param {number} m @param {ArrayLike<number>} w @param {ArrayLike<number>} h
 * @returns {Dummied}
 */
function sized(d, m, w, h) {
  const vw = new Float64Array(d.total).fill(DUMMY_W, m);
  const vh = new Float64Array(d.total);
  for (let i = 0; i < m; i++) {
    vw[i] = w[i];
    vh[i] = h[i];
  }
  return { ...d, vw, vh };
}

/** @typedef {{nRanks: number, layerStart: Int32Array, layer: Int32Array, pos: Float64Array}} Layers vertices by rank, in order */
/**
 * @typedef {object} Structure what a level's layout reads of its items and edges only
 * @property {Int32Array} rank @property {Omit<Dummied, "vw" | "vh">} d @property {Layers} L ordered
 * @property {Csr} up @property {Csr} down
 */

/**
 * Layers: vertices by rank, in order, and each one's place in its layer.
 * @param {number} total @param {Int32Array} vRank
 * @returns {Layers}
 */
function layersOf(total, vRank) {
  let nRanks = 0;
  for (let v = 0; v < total; v++) if (vRank[v] + 1 > nRanks) nRanks = vRank[v] + 1;
  const layerStart = new Int32Array(nRanks + 1);
  for (let v = 0; v < total; v++) layerStart[vRank[v] + 1]++;
  for (let r = 0; r < nRanks; r++) layerStart[r + 1] += layerStart[r];
  const layer = new Int32Array(total);
  const at = layerStart.slice(0, nRanks);
  for (let v = 0; v < total; v++) layer[at[vRank[v]]++] = v;
  const pos = new Float64Array(total);
  for (let r = 0; r < nRanks; r++) for (let j = layerStart[r]; j < layerStart[r + 1]; j++) pos[layer[j]] = j - layerStart[r];
  return { nRanks, layerStart, layer, pos };
}

/**
 * Barycentre sweeps (a layer of one vertex has nothing to order); reorders L in place.
 * @param {Layers} L @param {Csr} up @param {Csr} down
 */
function orderLayers(L, up, down) {
  const { nRanks, layerStart, layer, pos } = L;
  const key = new Float64Array(pos.length);
  for (let it = 0; it < 4; it++) {
    const downward = it % 2 === 0;
    const nb = downward ? up : down;
    for (let s = 1; s < nRanks; s++) {
      const r = downward ? s : nRanks - 1 - s;
      const a = layerStart[r];
      const b = layerStart[r + 1];
      if (b - a < 2) continue;
      for (let j = a; j < b; j++) {
        const v = layer[j];
        key[v] = mean(nb, v, pos, pos[v]);
      }
      const part = Array.from(layer.subarray(a, b));
      part.sort((p, q) => key[p] - key[q] || pos[p] - pos[q]);
      for (let j = a; j < b; j++) {
        layer[j] = part[j - a];
        pos[part[j - a]] = j - a;
      }
    }
  }
}

/**
 * x coordinates (centres): packed, then pulled towards the neighbours' mean.
 * @param {Layers} L @param {Float64Array} vw @param {Csr} up @param {Csr} down
 * @returns {Float64Array}
 */
function placeX(L, vw, up, down) {
  const { nRanks, layerStart, layer } = L;
  const total = layer.length;
  const x = new Float64Array(total);
  for (let r = 0; r < nRanks; r++) {
    let cur = 0;
    for (let j = layerStart[r]; j < layerStart[r + 1]; j++) {
      const v = layer[j];
      x[v] = cur + vw[v] / 2;
      cur += vw[v] + GAP_X;
    }
  }
  const want = new Float64Array(total);
  /** @param {number} r @param {Csr} nb */
  const place = (r, nb) => {
    const a = layerStart[r];
    const b = layerStart[r + 1];
    if (b - a === 1) {
      const v = layer[a];
      // one neighbour wider than any view (a frame wrapped into columns): above it, sit at
      // its left end (its first column); below it, at its right end (its last column)
      // (and the wide item itself stays put: the narrow ones align to it, not it to them)
      const u = nb.start[v + 1] - nb.start[v] === 1 ? nb.list[nb.start[v]] : -1;
      if (u >= 0 && vw[u] > WIDE) x[v] = nb === down ? x[u] - vw[u] / 2 + vw[v] / 2 : x[u] + vw[u] / 2 - vw[v] / 2;
      else if (vw[v] <= WIDE) x[v] = mean(nb, v, x, x[v]);
      return;
    }
    for (let j = a; j < b; j++) want[j] = mean(nb, layer[j], x, x[layer[j]]);
    let shift = 0;
    let prev = want[a];
    for (let j = a + 1; j < b; j++) {
      const min = prev + (vw[layer[j - 1]] + vw[layer[j]]) / 2 + GAP_X;
      const got = Math.max(min, want[j]);
      shift += got - want[j];
      prev = got;
      want[j] = got;
    }
    shift /= b - a;
    for (let j = a; j < b; j++) x[layer[j]] = want[j] - shift;
  };
  for (let it = 0; it < 3; it++) {
    for (let r = 1; r < nRanks; r++) place(r, up);
    for (let r = nRanks - 2; r >= 0; r--) place(r, down);
  }
  return x;
}

/**
 * y of each rank and its height (its tallest vertex).
 * @param {Layers} L @param {Float64Array} vh
 */
function rankYs(L, vh) {
  const { nRanks, layerStart, layer } = L;
  const layerY = new Float64Array(nRanks);
  const layerH = new Float64Array(nRanks);
  let y = 0;
  for (let r = 0; r < nRanks; r++) {
    let lh = 0;
    for (let j = layerStart[r]; j < layerStart[r + 1]; j++) if (vh[layer[j]] > lh) lh = vh[layer[j]];
    layerY[r] = y;
    layerH[r] = lh;
    y += lh + GAP_Y;
  }
  return { layerY, layerH, height: Math.max(0, y - GAP_Y) };
}

/**
 * A tall level wrapped into columns at the rank breaks: each column packed left to right,
 * its top at 0; x is shifted in place, colOf and colY filled.
 * @param {number} m @param {Layers} L @param {Dummied} g @param {Float64Array} x
 * @param {Float64Array} layerY @param {Float64Array} layerH @param {number[]} breaks
 * @param {Int32Array} colOf @param {number[]} colY
 * @returns {{width: number, height: number, cols: number[]}}
 */
function wrapColumns(m, L, g, x, layerY, layerH, breaks, colOf, colY) {
  const { nRanks, layerStart, layer } = L;
  const { total, vRank, vw } = g;
  let c = 0;
  for (let r = 0; r < nRanks; r++) {
    if (c < breaks.length && r === breaks[c]) c++;
    colOf[r] = c;
  }
  const lo = new Float64Array(c + 1).fill(Infinity);
  const hi = new Float64Array(c + 1).fill(-Infinity);
  for (let v = 0; v < total; v++) {
    const k = colOf[vRank[v]];
    lo[k] = Math.min(lo[k], x[v] - vw[v] / 2);
    hi[k] = Math.max(hi[k], x[v] + vw[v] / 2);
  }
  const colX = [0];
  const cols = [];
  let cx = 0;
  let tallest = 0;
  const top = [0, ...breaks.map((r) => layerY[r])];
  for (let k = 0; k <= c; k++) {
    colX[k] = cx - lo[k];
    colY[k] = -top[k];
    const last = (k < c ? breaks[k] : nRanks) - 1;
    const ch = layerY[last] + layerH[last] - top[k];
    tallest = Math.max(tallest, ch);
    cols.push(
      cx,
      0,
      hi[k] - lo[k],
      ch,
      firstItem(layer, layerStart, k === 0 ? 0 : breaks[k - 1], m),
      firstItem(layer, layerStart, last, m, true),
    );
    cx += hi[k] - lo[k] + COL_GAP;
  }
  for (let v = 0; v < total; v++) x[v] += colX[colOf[vRank[v]]];
  for (let k = 0; k <= c; k++) cols[6 * k + 3] = tallest; // every column as tall as the level
  return { width: cx - COL_GAP, height: tallest, cols };
}

/**
 * Item positions and each edge's bend points, shifted so the level starts at x = 0.
 * @param {number} m @param {number} _total @param {Float64Array} x @param {Float64Array} vw
 * @param {Int32Array} vRank @param {Float64Array} layerY @param {Float64Array} layerH
 * @param {Int32Array} colOf @param {number[]} colY @param {ArrayLike<number>} src
 * @param {ArrayLike<number>} dst @param {Int32Array} rank @param {Int32Array} chainAt
 * @param {number} minX @param {number} width @param {number} height @param {number[]} cols
 * @returns {LevelLayout}
 */
function finish(m, _total, x, vw, vRank, layerY, layerH, colOf, colY, src, dst, rank, chainAt, minX, width, height, cols) {
  const ox = new Float64Array(m);
  const oy = new Float64Array(m);
  const col = new Int32Array(m);
  for (let i = 0; i < m; i++) {
    ox[i] = x[i] - vw[i] / 2 - minX;
    oy[i] = layerY[rank[i]] + colY[colOf[rank[i]]];
    col[i] = colOf[rank[i]];
  }
  // grown by push: V8 keeps new Array(n) of more than ~16,000 holes as a dictionary, and
  // the graph's edge routing reads way[e] once per drawn edge
  /** @type {(Float64Array | null)[]} */
  const way = [];
  for (let e = 0; e < src.length; e++) way.push(null);
  const wrapped = cols.length > 6;
  const gapX = (/** @type {number} */ c) => cols[6 * c] - COL_GAP / 2; // the gap left of column c
  for (let e = 0; e < src.length; e++) {
    const a = src[e];
    const b = dst[e];
    const span = rank[b] - rank[a];
    if (span < 1) continue;
    /** @type {number[]} */
    const pts = [];
    let last = colOf[rank[a]];
    // an edge into a later column: down below its column, up the gap, into the next
    const turn = (/** @type {number} */ c) => {
      if (c === last) return;
      pts.push(gapX(c), height + GAP_Y / 3, gapX(c), -GAP_Y / 3);
      last = c;
    };
    if (chainAt[e] >= 0) {
      for (let j = 0; j < span - 1; j++) {
        const v = chainAt[e] + j;
        const r = vRank[v];
        if (wrapped) turn(colOf[r]);
        pts.push(x[v] - minX, layerY[r] + colY[colOf[r]] + layerH[r] / 2);
      }
    }
    if (wrapped) turn(colOf[rank[b]]);
    if (pts.length) way[e] = Float64Array.from(pts);
  }
  return { x: ox, y: oy, way, width, height, cols, col };
}

/** The ranks that start a new column: about the level's aspect WRAP_ASPECT, each break
 * where fewest edges cross within a quarter column of its place.
 * @param {number} nRanks @param {Float64Array} layerY @param {Float64Array} _layerH
 * @param {number} height @param {number} width @param {Int32Array} la @param {Int32Array} lb
 * @param {Int32Array} vRank
 * @returns {number[]}
 */
function columnBreaks(nRanks, layerY, _layerH, height, width, la, lb, vRank) {
  const n = Math.max(2, Math.round(Math.sqrt((WRAP_ASPECT * height) / Math.max(width, 1))));
  const colH = height / n;
  // crossing[r]: links from a rank above r to r or below
  const crossing = new Int32Array(nRanks + 1);
  for (let l = 0; l < la.length; l++) {
    crossing[vRank[la[l]] + 1]++;
    crossing[vRank[lb[l]] + 1]--;
  }
  for (let r = 1; r <= nRanks; r++) crossing[r] += crossing[r - 1];
  const out = [];
  let top = 0;
  let r = 1;
  while (r < nRanks) {
    const target = top + colH;
    if (target >= height - colH / 4) break;
    while (r < nRanks && layerY[r] < target - colH / 4) r++;
    let best = -1;
    for (let s = r; s < nRanks && layerY[s] <= target + colH / 4; s++) {
      if (
        best < 0 ||
        crossing[s] < crossing[best] ||
        (crossing[s] === crossing[best] && Math.abs(layerY[s] - target) < Math.abs(layerY[best] - target))
      )
        best = s;
    }
    if (best < 0) best = r;
    if (best >= nRanks) break;
    out.push(best);
    top = layerY[best];
    r = best + 1;
  }
  return out;
}

/**
 * The first (or last) item in ranks from rank r on (back from r): a column's ends.
 * @param {Int32Array} layer @param {Int32Array} layerStart @param {number} r @param {number} m
 */
function firstItem(layer, layerStart, r, m, back = false) {
  const nRanks = layerStart.length - 1;
  for (let s = r; back ? s >= 0 : s < nRanks; s += back ? -1 : 1) {
    for (let j = layerStart[s]; j < layerStart[s + 1]; j++) if (layer[j] < m) return layer[j];
  }
  return -1;
}

/**
 * Min left edge and width of vertices [a, b).
 * @param {Float64Array} x @param {Float64Array} w @param {number} a @param {number} b
 */
function spread(x, w, a, b) {
  let min = Infinity;
  let max = -Infinity;
  for (let v = a; v < b; v++) {
    if (x[v] - w[v] / 2 < min) min = x[v] - w[v] / 2;
    if (x[v] + w[v] / 2 > max) max = x[v] + w[v] / 2;
  }
  return Number.isFinite(min) ? { min, width: max - min } : { min: 0, width: 0 };
}

/** @typedef {{start: Int32Array, list: Int32Array}} Csr compressed adjacency */

/**
 * Compressed adjacency: out.start[v]..out.start[v+1] index out.list, from pairs (a, b).
 * @param {number} n @param {Int32Array} a @param {Int32Array} b
 * @returns {Csr}
 */
function csr(n, a, b) {
  const start = new Int32Array(n + 1);
  for (let i = 0; i < a.length; i++) start[a[i] + 1]++;
  for (let v = 0; v < n; v++) start[v + 1] += start[v];
  const list = new Int32Array(a.length);
  const at = start.slice(0, n);
  for (let i = 0; i < a.length; i++) list[at[a[i]]++] = b[i];
  return { start, list };
}

/**
 * Mean of vals over v's neighbours in nb, or dflt without neighbours.
 * @param {Csr} nb @param {number} v @param {ArrayLike<number>} vals @param {number} dflt
 */
function mean(nb, v, vals, dflt) {
  const a = nb.start[v];
  const b = nb.start[v + 1];
  if (a === b) return dflt;
  let s = 0;
  for (let j = a; j < b; j++) s += vals[nb.list[j]];
  return s / (b - a);
}

/**
 * An SVG path through the points, smoothed with vertical tangents.
 * @param {{x: number, y: number}[]} pts
 */
export function pathOf(pts) {
  let d = `M${pts[0].x.toFixed(1)},${pts[0].y.toFixed(1)}`;
  for (let i = 1; i < pts.length; i++) {
    const p = pts[i - 1];
    const q = pts[i];
    const my = ((p.y + q.y) / 2).toFixed(1);
    d += `C${p.x.toFixed(1)},${my} ${q.x.toFixed(1)},${my} ${q.x.toFixed(1)},${q.y.toFixed(1)}`;
  }
  return d;
}
