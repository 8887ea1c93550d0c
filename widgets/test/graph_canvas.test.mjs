// The canvas drawing's hit testing (what is under a point, found down the tree of drawn
// boxes) and its painting (what is in sight, with level of detail).
import { test } from "node:test";
import assert from "node:assert/strict";
import { aggregatedAt, canvasIndex, columnsOf, hitIn, inSight, paintScene, treeOf } from "../src/_graph_canvas.js";
import { drawState, viewState } from "../src/_graph_draw.js";
import { layoutGraph, prepare } from "../src/_graph_layout.js";
import { expandedIndices } from "../src/_graphcore.js";

/** @typedef {import("../src/_contract_types").GraphPayload} GraphPayload */

// node 0 is not drawn; 1 a frame holding 2 (a box with hidden insides), 3 and 4 (a frame)
const rects = [
  [Number.NaN, Number.NaN, Number.NaN, Number.NaN],
  [0, 0, 600, 400],
  [20, 30, 100, 36],
  [300, 300, 80, 36],
  [250, 100, 300, 200],
];
const P = Float64Array.from(rects.flat());
const tree = treeOf([-1, -1, 1, 1, 1]);
const isGroup = [0, 1, 0, 0, 1];
const hasKids = [0, 1, 1, 0, 1];
/** @param {number} x @param {number} y */
const at = (x, y) => hitIn(tree, P, isGroup, hasKids, x, y);

test("the tree lists each node's children, and the top's last", () => {
  assert.deepEqual([...tree.kidStart], [0, 0, 3, 3, 3, 3, 5]);
  assert.deepEqual([...tree.kidList], [2, 3, 4, 0, 1]);
  const parent = [-1, 0];
  assert.equal(treeOf(parent), treeOf(parent)); // made once per payload
});

test("boxes, their toggle, frames' headers and toggles; nothing elsewhere", () => {
  assert.deepEqual(at(50, 50), { k: 2, part: "box" });
  assert.deepEqual(at(112, 35), { k: 2, part: "expand" }); // top-right corner of a box
  assert.deepEqual(at(340, 320), { k: 3, part: "box" });
  assert.deepEqual(at(8, 8), { k: 1, part: "collapse" });
  assert.deepEqual(at(200, 10), { k: 1, part: "frame" });
  assert.deepEqual(at(400, 110), { k: 4, part: "frame" }); // the inner frame wins
  assert.equal(at(200, 200), null); // inside a frame, on no box
  assert.equal(at(900, 900), null);
});

// a long chain of blocks, every one open: the layout wraps it into columns
/** @param {number} blocks */
function chain(blocks) {
  /** @type {GraphPayload} */
  const g = {
    key: "chain",
    model: "Chain",
    ids: [],
    kind: "",
    parent: [],
    name: [],
    type: [],
    ins: [],
    outs: [],
    rolled: [],
    instances: { name: [], node: [], where: [] },
    edges: [],
    edge_tensor: [],
    tensors: ["8x64 float32"],
    runs: [],
    total_runs: 1,
    metrics: { fwd_time: ["forward time", "time"] },
  };
  /** @param {string} kind @param {number} parent @param {string} name @param {string} type */
  const add = (kind, parent, name, type) => {
    const k = g.ids.length;
    g.ids.push(k);
    g.kind += kind;
    g.parent.push(parent);
    g.name.push(name);
    g.type.push(type);
    g.ins.push([0]);
    g.outs.push([0]);
    g.runs.push(1);
    return k;
  };
  let prev = add("i", -1, "x", "Tensor");
  const root = add("m", -1, "", "Net");
  for (let b = 0; b < blocks; b++) {
    const blk = add("m", root, `layers.${b}`, "Block");
    const a = add("p", blk, "linear", "linear");
    const r = add("p", blk, "relu", "relu");
    g.edges.push(prev, a, a, r);
    g.edge_tensor.push(0, 0);
    prev = r;
  }
  return g;
}
const G = chain(3000);
const S = {
  ...drawState(
    G,
    G.ids.filter((_, k) => G.kind[k] === "m"),
  ),
  graph: G,
  marks: new Map(),
};
const index = canvasIndex(S);
const recorder = () => {
  const calls = { rect: 0, text: 0 };
  // a fake 2D context (node has no canvas): it counts rectangles and texts, every other call
  // does nothing; cast to the context paintScene draws on
  const ctx = /** @type {CanvasRenderingContext2D} */ (
    new Proxy(
      {},
      {
        get: (_t, name) =>
          name === "measureText"
            ? () => ({ width: 80 })
            : name === "roundRect" || name === "fillRect"
              ? () => calls.rect++
              : name === "fillText"
                ? () => calls.text++
                : () => {},
        set: () => true,
      },
    )
  );
  return { ctx, calls };
};
/** @type {import("../src/_graph_canvas.js").Colors} */
const colors = {
  edge: "#999",
  fg: "#222",
  fg2: "#666",
  bg: "#fff",
  bg2: "#eee",
  border: "#aab",
  accent: "#17d",
  error: "#b00",
  font: "sans-serif",
};
/** @type {import("../src/_graph_canvas.js").CanvasLook} */
const look = {
  fillOf: () => null,
  inkOf: () => null,
  frameFillOf: () => null,
  frameInkOf: () => null,
  spanFillOf: () => "#f00",
  selected: new Set(),
  matches: new Set(),
};
/** The whole drawing in sight at scale k. @param {number} k */
const sightAt = (k) => ({ x0: 0, y0: 0, x1: S.layout.width, y1: S.layout.height, k });

test("each item of a wrapped level sits in one of its columns", () => {
  const cols = S.layout.cols.length / 6;
  assert.ok(cols >= 3, `${cols} columns`);
  const blocks = S.vis.groups.filter((g) => S.graph.type[g] === "Block");
  assert.equal(blocks.length, 3000);
  for (const g of blocks) assert.ok(index.colOf[g] >= 0, `layers block ${g} in no column`);
  assert.equal(
    index.colCount.reduce((a, b) => a + b, 0),
    index.colItems.flat().length,
  );
});

test("zoomed far out, columns of sub-pixel calls are drawn as one box each, not as texture", () => {
  const cols = S.layout.cols;
  const far = 1 / (cols[3] / index.colCount[0]); // an item a pixel high, the model frame over 28 px
  assert.ok(aggregatedAt(cols, index.colCount, far).every((a, c) => a === 1 || index.colCount[c] < 2));
  assert.ok(aggregatedAt(cols, index.colCount, 100 * far).every((a) => a === 0));
  const out = recorder();
  const st = paintScene(out.ctx, S, index, look, sightAt(far), colors);
  assert.ok(st.aggregates >= 3 && st.blocks === 0, JSON.stringify(st));
  assert.ok(out.calls.rect < st.aggregates + 10, `${out.calls.rect} rectangles drawn`); // not 3,000
  // nearer, every block is a summary block of its own (the 10,000-node picture)
  const near = recorder();
  const st2 = paintScene(near.ctx, S, index, look, sightAt(20 * far), colors);
  assert.equal(st2.aggregates, 0);
  assert.equal(st2.blocks, 3000);
});

test("a column aggregates when its items are under AGGREGATE_PX across or down", () => {
  // two columns: 175 wide, 62 items in 22,290 units; 175 wide, 19 items in 7,890
  const cols = [0, 0, 175, 22290, 0, 1, 300, 0, 175, 7890, 2, 3];
  const count = new Int32Array([62, 19]);
  // 100,000 nodes at Fit (k 0.0167): 3 px wide, 6 px tall each: one box per column
  assert.deepEqual(Array.from(aggregatedAt(cols, count, 0.0167)), [1, 1]);
  // 10,000 nodes at Fit (k 0.053): 9 px wide, 22 px tall: every block drawn
  assert.deepEqual(Array.from(aggregatedAt(cols, count, 0.053)), [0, 0]);
  // a single item is never an aggregate
  assert.deepEqual(Array.from(aggregatedAt(cols, new Int32Array([1, 1]), 0.001)), [0, 0]);
});

test("a paint visits the frames and boxes in sight, as a scan of every drawn item finds them", () => {
  const P2 = S.layout.P;
  const { width, height } = S.layout;
  for (const [k, x0, y0] of [
    [1, 0, 0],
    [1, width / 2, height / 3],
    [0.3, width / 4, 0],
    [0.05, 0, 0],
  ]) {
    const sight = { x0, y0, x1: x0 + 1200 / k, y1: y0 + 500 / k, k };
    const seen = (/** @type {number} */ i) =>
      P2[4 * i] <= sight.x1 && P2[4 * i] + P2[4 * i + 2] >= x0 && P2[4 * i + 1] <= sight.y1 && P2[4 * i + 1] + P2[4 * i + 3] >= y0;
    const got = inSight(S, index, sight, new Uint8Array(S.graph.parent.length), seen);
    // a scan: in sight, and no frame around it drawn as one block (under SUMMARY_PX)
    const small = (/** @type {number} */ g) => Math.min(P2[4 * g + 2], P2[4 * g + 3]) * k < 28;
    const open = (/** @type {number} */ i) => {
      for (let p = S.graph.parent[i]; p >= 0; p = S.graph.parent[p]) if (small(p)) return false;
      return true;
    };
    assert.deepEqual(
      got.frames,
      S.vis.groups.filter((g) => seen(g) && open(g)),
      `frames at ${k}`,
    );
    assert.deepEqual(
      got.boxes,
      S.vis.boxes.filter((b) => seen(b) && open(b)),
      `boxes at ${k}`,
    );
    assert.ok(got.boxes.length > 0 || k < 0.1, `nothing in sight at ${k}`);
  }
});

/**
 * Which wrapped column each drawn item sits in, as it was found before: every drawn box,
 * then every drawn frame, placed by its centre (the reference for columnsOf).
 * @param {{graph: {parent: ArrayLike<number>}, vis: {boxes: ArrayLike<number>, groups: ArrayLike<number>}, layout: {P: ArrayLike<number>, cols: ArrayLike<number>}}} S
 */
function columnsScanned(S) {
  const { parent } = S.graph;
  const { P, cols } = S.layout;
  const nCols = cols.length / 6;
  const colOf = new Int32Array(parent.length).fill(-1);
  const colCount = new Int32Array(nCols);
  /** @type {number[][]} */
  const colItems = Array.from({ length: nCols }, () => []);
  for (const list of [S.vis.boxes, S.vis.groups]) {
    for (const k of Array.from(list)) {
      const cx = P[4 * k] + P[4 * k + 2] / 2;
      for (let c = 0; c < nCols; c++) {
        const first = cols[6 * c + 4];
        if (first < 0 || parent[first] !== parent[k]) continue;
        if (cx >= cols[6 * c] && cx <= cols[6 * c] + cols[6 * c + 2]) {
          colOf[k] = c;
          colCount[c]++;
          colItems[c].push(k);
          break;
        }
      }
    }
  }
  return { colOf, colCount, colItems };
}

test("wrapped columns found from the wrapped levels' children equal a scan of every drawn node", () => {
  // every third block closed: a wrapped level holding boxes and frames
  const open = G.ids.filter((_, k) => G.kind[k] === "m" && !(G.name[k].startsWith("layers.") && Number(G.name[k].slice(7)) % 3 === 0));
  const L = layoutGraph(prepare(G), expandedIndices(G, open));
  const lists = { graph: G, ...viewState(G, prepare(G).hasKids, L, null) };
  const typed = { graph: G, ...viewState(G, prepare(G).hasKids, L, null, true) };
  assert.ok(typed.vis.boxes instanceof Int32Array);
  assert.deepEqual(Array.from(typed.vis.boxes), lists.vis.boxes);
  assert.deepEqual(Array.from(typed.vis.groups), lists.vis.groups);
  const want = columnsScanned(lists);
  assert.ok(want.colItems.length >= 3 && want.colItems.every((items) => items.length > 0), "wrapped, every column used");
  assert.ok(
    lists.vis.boxes.some((k) => want.colOf[k] >= 0) && lists.vis.groups.some((k) => want.colOf[k] >= 0),
    "boxes and frames in columns",
  );
  assert.deepEqual(columnsOf(lists), want); // the frames made from the groups
  assert.deepEqual(columnsOf(typed, L.isGroup), want); // the layout's own mask
  // the canvas's index takes the layout's mask of frames; it is the one the groups make
  const mask = new Uint8Array(G.ids.length);
  for (const g of lists.vis.groups) mask[g] = 1;
  assert.deepEqual(canvasIndex({ ...typed, marks: new Map() }).isGroup, mask);
  assert.equal(canvasIndex({ ...typed, marks: new Map() }).isGroup, L.isGroup);
  assert.deepEqual(canvasIndex({ ...lists, isGroup: undefined, marks: new Map() }).isGroup, mask);
});
