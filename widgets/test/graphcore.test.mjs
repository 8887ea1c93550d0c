import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import {
  NEUTRAL,
  boxSize,
  colorScale,
  expandedIndices,
  hottestInside,
  labelOf,
  layoutInput,
  liftEdges,
  rolledInfo,
  textColor,
  fitScale,
  MIN_SCALE,
  OPEN_SCALE,
  openScale,
  visibleNodes,
} from "../src/_graphcore.js";
import { layoutLevel, pathOf, WRAP_MIN_H } from "../src/_layout.js";
import { edgePointsOf, layoutGraph, prepare } from "../src/_graph_layout.js";
import { drawState } from "../src/_graph_draw.js";
import { liveIn, peakOf, phaseRuns, stack } from "../src/memory.js";
import { sortRows, topRows } from "../src/profile.js";
import { graph } from "./_graph_fixture.mjs"; // the small hand-made payload of the graph tests

test("default expansion shows collapsed calls as boxes", () => {
  const exp = expandedIndices(graph, [1, 4]); // Net and blocks, by trace id
  assert.deepEqual([...exp], [1, 4]);
  const vis = visibleNodes(graph, exp);
  assert.deepEqual(vis.groups, [1, 4]);
  assert.deepEqual(vis.boxes, [0, 2, 5, 9, 10]);
  assert.equal(vis.boxOf[7], 5);
  assert.equal(vis.boxOf[3], 2);
});

test("edges lift to the drawn boxes, without self-loops or duplicates", () => {
  const vis = visibleNodes(graph, new Set([1, 4]));
  const edges = liftEdges(graph, vis.boxOf).map(([s, d]) => [s, d]);
  assert.deepEqual(edges, [
    [0, 2],
    [2, 5],
    [5, 9],
    [9, 10],
  ]);
});

test("expanding a rolled block shows its inside once, with the skip edge", () => {
  const vis = visibleNodes(graph, new Set([1, 4, 5]));
  assert.deepEqual(vis.boxes, [0, 2, 6, 7, 8, 9, 10]);
  const edges = liftEdges(graph, vis.boxOf).map(([s, d]) => `${s}>${d}`);
  assert.ok(edges.includes("2>8")); // residual from the stem into the block's add
  assert.equal(new Set(edges).size, edges.length);
});

test("collapsing everything leaves input, model, output", () => {
  const vis = visibleNodes(graph, new Set());
  assert.deepEqual(vis.boxes, [0, 1, 10]);
  assert.equal(liftEdges(graph, vis.boxOf).length, 2);
});

test("labels: last path part, root by model name, rolled with a count", () => {
  const rolled = rolledInfo(graph);
  assert.equal(labelOf(graph, 2, rolled), "stem");
  assert.equal(labelOf(graph, 1, rolled), "Net");
  assert.equal(labelOf(graph, 5, rolled), "blocks.0-2 ×3");
  assert.equal(labelOf(graph, 7, rolled), "relu");
  // unrolled, a numbered child is named with its container (not a bare "0")
  assert.equal(labelOf(graph, 5, { count: new Map(), name: new Map() }), "blocks.0");
});

test("a payload's rolled blocks are read once: each relayout gets the same object", () => {
  const a = rolledInfo(graph);
  assert.equal(rolledInfo(graph), a);
  assert.equal(rolledInfo({ ...graph }), a); // the same list of rolled blocks
  const other = rolledInfo({ rolled: [[5, 2, "blocks.0-1"]] });
  assert.notEqual(other, a);
  assert.equal(other.count.get(5), 2);
  assert.equal(rolledInfo({}).count.size, 0); // none
});

test("layout input puts each drawn node in its frame and lifts edges per level", () => {
  const vis = visibleNodes(graph, new Set([1, 4]));
  const edges = liftEdges(graph, vis.boxOf);
  const input = layoutInput(graph, vis, edges);
  assert.deepEqual(input.members.get(-1), [0, 1, 10]);
  assert.deepEqual(input.members.get(1), [2, 4, 9]);
  assert.deepEqual(input.members.get(4), [5]);
  assert.deepEqual(input.levelEdges.get(-1), [
    [0, 1],
    [1, 10],
  ]);
  assert.deepEqual(input.levelEdges.get(1), [
    [2, 4],
    [4, 9],
  ]);
  assert.deepEqual(input.route[0], [-1, 0, 1]);
});

/** A drawn node's box {x, y, w, h}, which must be drawn. @param {import("../src/_graph_draw.js").DrawLayout} lay @param {number} k */
function boxAt(lay, k) {
  const box = lay.pos.get(k);
  assert.ok(box, `node ${k} is not drawn`);
  return box;
}

/** The layout with these payload indices expanded, and its drawn edges as [s, d]. @param {Set<number>} open */
function nested(open) {
  const lay = layoutGraph(prepare(graph), open);
  const S = drawState(
    graph,
    [...open].map((k) => graph.ids[k]),
  );
  /** @type {[number, number][]} */
  const edges = [];
  for (let i = 0; i < lay.edges.length; i += 3) edges.push([lay.edges[i], lay.edges[i + 1]]);
  return { lay: S.layout, edges, vis: S.vis };
}

test("nested layout: frames contain their children, ranks go down along edges", () => {
  const { lay, edges } = nested(new Set([1, 4, 5]));
  assert.deepEqual(
    edges,
    liftEdges(graph, visibleNodes(graph, new Set([1, 4, 5])).boxOf).map(([s, d]) => [s, d]),
  );
  const inside = (/** @type {number} */ k, /** @type {number} */ g) => {
    const a = boxAt(lay, k);
    const b = boxAt(lay, g);
    return a.x >= b.x - 0.01 && a.y >= b.y && a.x + a.w <= b.x + b.w + 0.01 && a.y + a.h <= b.y + b.h;
  };
  for (const [k, g] of [
    [2, 1],
    [6, 5],
    [7, 5],
    [8, 5],
    [5, 4],
    [9, 1],
  ])
    assert.ok(inside(k, g), `${k} in ${g}`);
  edges.forEach(([s, d], i) => {
    assert.ok(boxAt(lay, s).y + boxAt(lay, s).h < boxAt(lay, d).y, `edge ${s}>${d} goes down`);
    const pts = edgePointsOf(lay, i);
    assert.ok(pts.length >= 2);
  });
  assert.match(
    pathOf([
      { x: 0, y: 0 },
      { x: 10, y: 20 },
    ]),
    /^M0\.0,0\.0C/,
  );
});

test("a skip edge into a block runs down the block's margin, not through its boxes", () => {
  const { lay, edges } = nested(new Set([1, 4, 5]));
  const i = edges.findIndex(([s, d]) => s === 2 && d === 8); // the stem -> the block's add
  assert.ok(i >= 0, JSON.stringify(edges));
  const pts = edgePointsOf(lay, i);
  // every point but the two ends lies outside the boxes the edge passes (conv, relu)
  for (const p of pts.slice(1, -1)) {
    for (const k of [6, 7]) {
      const r = boxAt(lay, k);
      assert.ok(!(p.x >= r.x && p.x <= r.x + r.w && p.y >= r.y && p.y <= r.y + r.h), `${JSON.stringify(p)} in box ${k}`);
    }
  }
  const frame = boxAt(lay, 4);
  assert.ok(
    pts.some((p) => Math.abs(p.x - (frame.x + frame.w - 5)) < 1e-9),
    "runs down the frame's right margin",
  );
  const last = pts[pts.length - 1];
  assert.ok(Math.abs(last.y - boxAt(lay, 8).y) < 1e-9);
});

/**
 * layoutLevel on item ids 0..m-1 of one size, edges as [a, b] pairs.
 * @param {number} m @param {number} w @param {number} h @param {number[][]} edges
 */
const level = (m, w, h, edges) =>
  layoutLevel(
    m,
    new Float64Array(m).fill(w),
    new Float64Array(m).fill(h),
    edges.map((e) => e[0]),
    edges.map((e) => e[1]),
  );

test("layoutLevel: long edges get waypoints, no overlaps in a layer", () => {
  // diamond plus a long skip: 0->1->2->3, 0->3
  const edges = [
    [0, 1],
    [1, 2],
    [2, 3],
    [0, 3],
    [0, 4],
    [4, 3],
  ];
  const lay = level(5, 50, 20, edges);
  const skip = lay.way[3];
  assert.ok(skip);
  assert.equal(skip.length / 2, 2); // 0->3 spans three ranks: two bend points
  /** @type {Map<number, {x: number, w: number}[]>} */
  const byY = new Map();
  for (let i = 0; i < 5; i++) byY.set(lay.y[i], [...(byY.get(lay.y[i]) ?? []), { x: lay.x[i], w: 50 }]);
  for (const row of byY.values()) {
    row.sort((a, b) => a.x - b.x);
    for (let i = 1; i < row.length; i++) assert.ok(row[i].x >= row[i - 1].x + row[i - 1].w);
  }
});

test("layout of 2,000 nodes takes well under a second", () => {
  const n = 2000;
  const edges = [];
  for (let i = 1; i < n; i++) edges.push([i - 1, i]);
  for (let i = 4; i < n; i += 4) edges.push([i - 4, i]);
  const t = performance.now();
  const lay = level(n, 90, 36, edges);
  assert.equal(lay.x.length, n);
  assert.ok(performance.now() - t < 1000);
});

test("a long chain is wrapped into columns side by side, each edge to the next column up the gap", () => {
  const n = 600; // 600 ranks of 36 + 30: ~40,000 units tall, 90 wide
  const edges = [];
  for (let i = 1; i < n; i++) edges.push([i - 1, i]);
  const lay = level(n, 90, 36, edges);
  const cols = lay.cols.length / 6;
  assert.ok(cols >= 2, `columns: ${cols}`);
  assert.ok(lay.height <= WRAP_MIN_H * 2 && lay.height < 40000 / 2, `height ${lay.height}`);
  assert.ok(lay.width > lay.height / 4, `${lay.width} x ${lay.height}`); // about as wide as tall, not a line
  // every column holds a run of the chain, in order, and no two boxes overlap
  const seen = [];
  for (let c = 0; c < cols; c++) {
    const [x, , w, h, first, last] = lay.cols.slice(6 * c, 6 * c + 6);
    assert.ok(first <= last);
    seen.push(first, last);
    for (let i = first; i <= last; i++) assert.ok(lay.x[i] >= x - 1e-9 && lay.x[i] + 90 <= x + w + 1e-9 && lay.y[i] + 36 <= h + 1e-9);
  }
  assert.deepEqual(seen[0], 0);
  assert.deepEqual(seen[seen.length - 1], n - 1);
  // the edge that leaves a column turns up the gap to the next one's top
  const c0last = lay.cols[5];
  const e = edges.findIndex(([a]) => a === c0last);
  const way = lay.way[e];
  assert.ok(way && way.length === 4, JSON.stringify(way));
  assert.ok(way[0] > lay.cols[0] + lay.cols[2] && way[0] < lay.cols[6], "in the gap between the columns");
  assert.ok(way[3] < 0 && way[1] > lay.height, "below the level, then above it");
});

test("colour scale: neutral for zero, log over decades, monotone", () => {
  const s = colorScale([0, 1, 10, 1000]);
  assert.equal(s.color(0), NEUTRAL);
  assert.ok(s.log);
  assert.equal(s.min, 1);
  assert.equal(s.max, 1000);
  const lum = (/** @type {string} */ c) => {
    const m = /rgb\((\d+),(\d+),(\d+)\)/.exec(c);
    assert.ok(m, c);
    const [r, g, b] = m.slice(1).map(Number);
    return 0.299 * r + 0.587 * g + 0.114 * b;
  };
  assert.ok(lum(s.color(1)) > lum(s.color(10)) && lum(s.color(10)) > lum(s.color(1000)));
  const lin = colorScale([2, 4, 8]);
  assert.equal(lin.log, false);
  assert.equal(colorScale([0, 0]).color(5), NEUTRAL);
  assert.equal(textColor("rgb(153,52,4)"), "#fff");
  assert.equal(textColor("#ffffff"), "#000");
});

test("box sizes grow with the label and are clamped", () => {
  assert.equal(boxSize("x", "").w, 64);
  assert.ok(boxSize("a_long_module_name", "Conv2d").w > 100);
  assert.equal(boxSize("x".repeat(200), "").w, 240);
});

test("profile sorting and top rows", () => {
  const rows = [
    ["a", 3],
    ["b", 1],
    ["c", 2],
    ["d", 0],
  ];
  assert.deepEqual(
    sortRows(rows, 1, true).map((r) => r[0]),
    ["a", "c", "b", "d"],
  );
  assert.deepEqual(
    sortRows(rows, 0, true).map((r) => r[0]),
    ["d", "c", "b", "a"],
  );
  assert.deepEqual(
    topRows(rows, 1, 2).map((r) => r[0]),
    ["a", "c"],
  );
});

test("memory stacks, peak and phase runs", () => {
  const bytes = [
    [1, 1, 1],
    [0, 5, 2],
  ];
  assert.deepEqual(stack(bytes), [
    [1, 1, 1],
    [1, 6, 3],
  ]);
  assert.deepEqual(peakOf(bytes, 3), { index: 1, total: 6 });
  assert.deepEqual(phaseRuns(["forward", "forward", "backward"]), [
    ["forward", 0, 1],
    ["backward", 2, 2],
  ]);
});

test("a graph opens with labels >= 11 px; Fit shows it whole", () => {
  // 11 px labels at scale 1: a big drawing opens at OPEN_SCALE and is scrolled
  assert.equal(openScale(1000, 560, 20000, 90000), OPEN_SCALE); // the 1,038-box unrolled view
  assert.ok(11 * OPEN_SCALE >= 11 && 11 * MIN_SCALE >= 8);
  assert.equal(fitScale(1000, 560, 20000, 90000), 560 / 90000); // Fit: the whole drawing
  assert.equal(fitScale(1000, 560, 500, 280), 1.4); // small graphs are not blown up past 1.4
  assert.equal(openScale(1000, 560, 500, 280), 1.4);
  assert.equal(fitScale(1000, 560, 1000, 700), 0.8);
  assert.equal(openScale(1000, 560, 1000, 700), 1);
});

test("memory: the largest storages live in a time range", () => {
  const largest = [
    { bytes: 400, category: "activations", module: "a", op: "mm", phase: "forward", start: 0.1, end: 0.5, site: "" },
    { bytes: 300, category: "parameters", module: "", op: "", phase: "forward", start: 0, end: null, site: "" },
    { bytes: 200, category: "temporaries", module: "b", op: "relu", phase: "backward", start: 0.6, end: 0.7, site: "" },
  ];
  assert.deepEqual(
    liveIn(largest, 0.2, 0.3).map((r) => r.bytes),
    [400, 300],
  );
  assert.deepEqual(
    liveIn(largest, 0.55, 0.58).map((r) => r.bytes),
    [300],
  );
  assert.deepEqual(
    liveIn(largest, 0.65, 0.9).map((r) => r.bytes),
    [300, 200],
  );
  assert.deepEqual(
    liveIn(largest, 0, 1, 1).map((r) => r.bytes),
    [400],
  );
});

// The shared fixture: what labkit/trace/graph.py draws for a real trace (ResCNN: nesting, a
// block repeated x3, ops), rolled and flat, for several sets of expanded calls. Written by
// tests/views/graph_rules_fixture.py; tests/views/test_graph_rules.py checks it is
// current. The browser's rules must draw exactly the same, in the same order.
/**
 * @typedef {object} RulesCase expanded calls (trace ids) and what is drawn then (trace ids)
 * @property {string} name @property {number[]} expanded @property {number[]} boxes
 * @property {number[]} groups @property {number[][]} edges
 */
/** @type {{model: string, views: {rolled: boolean, graph: import("../src/_contract_types").GraphPayload, labels: string[], cases: RulesCase[]}[]}} */
const rules = JSON.parse(readFileSync(new URL("./fixtures/graph_rules.json", import.meta.url), "utf8"));

for (const view of rules.views) {
  for (const c of view.cases) {
    test(`graph rules as Python draws them: ${view.rolled ? "rolled" : "flat"} ${rules.model}, ${c.name}`, () => {
      const g = view.graph;
      const vis = visibleNodes(g, expandedIndices(g, c.expanded));
      const ids = (/** @type {Iterable<number>} */ ks) => Array.from(ks, (k) => g.ids[k]);
      assert.deepEqual(ids(vis.boxes), c.boxes, "boxes");
      assert.deepEqual(ids(vis.groups), c.groups, "frames");
      const edges = liftEdges(g, vis.boxOf).map(([s, d]) => [g.ids[s], g.ids[d]]);
      assert.deepEqual(edges, c.edges, "lifted edges");
    });
  }
}

for (const view of rules.views) {
  test(`node labels as Python writes them: ${view.rolled ? "rolled" : "flat"} ${rules.model}`, () => {
    const g = view.graph;
    const rolled = rolledInfo(g);
    assert.deepEqual(
      g.ids.map((_, k) => labelOf(g, k, rolled)),
      view.labels,
    );
  });
}

test("the graph-rules fixture covers rolled and flat views with several cases each", () => {
  assert.deepEqual(
    rules.views.map((v) => v.rolled),
    [true, false],
  );
  for (const v of rules.views) assert.ok(v.cases.length >= 7 && v.graph.ids.length > 20);
});

test("per-level layout: opening a frame lays out only the levels that changed", () => {
  const cache = new Map();
  const a = drawState(graph, [graph.ids[1]], cache);
  const kept = new Map([...cache].filter(([g]) => typeof g === "number").map(([g, v]) => [g, v.lay]));
  const top = graph.parent.length; // the top level's key
  const b = drawState(graph, [graph.ids[1], graph.ids[4]], cache); // blocks opened
  assert.equal(cache.get(2) === undefined || cache.get(2).lay === kept.get(2), true);
  assert.notEqual(cache.get(1).lay, kept.get(1)); // Net's level changed (blocks grew): laid out again
  assert.notEqual(cache.get(top).lay, kept.get(top)); // and the top (Net grew)
  // the same drawing as without the cache
  const fresh = drawState(graph, [graph.ids[1], graph.ids[4]]);
  for (const [k, p] of fresh.layout.pos) assert.deepEqual(b.layout.pos.get(k), p);
  assert.ok(a.layout.pos.size < b.layout.pos.size);
  assert.equal(b.laidOut, 3); // blocks' own level, Net's and the top: not stem's or the rest
});

test("an edge into a nested frame turns in below every header it passes", () => {
  const { lay, edges } = nested(new Set([1, 4, 5]));
  const i = edges.findIndex(([s, d]) => s === 2 && d === 6); // stem -> the first op in b0
  assert.ok(i >= 0, JSON.stringify(edges));
  const pts = edgePointsOf(lay, i);
  const inner = boxAt(lay, 5);
  assert.ok(pts[pts.length - 2].y >= inner.y + 22, JSON.stringify({ pts, inner }));
});

test("hottestInside: each frame holds its hottest box, at any depth; empty frames hold 0", () => {
  // 0 root frame > 1 frame > {3, 4 boxes}; 0 > 2 frame > 5 box; 6 an empty frame; 7 a box at the top
  const parent = [-1, 0, 0, 1, 1, 2, 0, -1];
  /** @type {Record<number, number>} */
  const values = { 3: 2, 4: 9, 5: 30, 7: 100 };
  const hot = hottestInside(parent, [3, 4, 5, 7], (k) => values[k] || 0);
  assert.deepEqual([...hot], [30, 9, 30, 0, 0, 0, 0, 0]);
  // boxes without a positive value colour nothing; the order of the boxes does not matter
  assert.deepEqual([...hottestInside(parent, [5, 4, 3], (k) => (k === 4 ? 9 : 0))], [9, 9, 0, 0, 0, 0, 0, 0]);
  assert.deepEqual([...hottestInside(parent, [7, 5, 3, 4], (k) => values[k] || 0)], [...hot]);
});
