// The layout service and where it runs: a worker in the browser, this thread without one.
import assert from "node:assert/strict";
import { test } from "node:test";
import { expandedIndices } from "../src/_graphcore.js";
import { layoutGraph, makeSpare, posView, prepare } from "../src/_graph_layout.js";
import { headOf, makeRunner, makeService, readyNext, transfers, warmUp } from "../src/_graph_runner.js";
import { graph } from "./_graph_fixture.mjs";

/** @typedef {import("../src/_contract_types").GraphPayload} GraphPayload */
/** @typedef {import("../src/_worker_messages").LayoutGraph} LayoutGraph */
/** @typedef {import("../src/_worker_messages").LayoutResponse} LayoutResponse */

test("without a Worker (node) the runner lays out on this thread, at once, as layoutGraph does", () => {
  const runner = makeRunner();
  assert.equal(runner.inWorker(), false);
  // typed by a cast: a plain null would be narrowed to null for good (tsc does not see the callback assign it)
  let got = /** @type {LayoutResponse | null} */ (null);
  runner.layout(graph, [1, 4], (L) => (got = L));
  assert.ok(got, "answered synchronously");
  const want = layoutGraph(prepare(graph), expandedIndices(graph, [1, 4]));
  assert.deepEqual([...got.pos], [...want.pos]);
  assert.deepEqual([...got.edges], [...want.edges]);
  assert.deepEqual([...got.hasKids], [...prepare(graph).hasKids]);
  runner.close();
});

test("the service is sent a graph once, then only what is expanded; a stale graph key is an error", () => {
  const service = makeService();
  const a = service({ view: 1, seq: 1, key: "g1", graph: { ...graph, key: "g1" }, expanded: [1] });
  const b = service({ view: 1, seq: 2, key: "g1", expanded: [1, 4] });
  assert.ok(a && b, "a layout request is answered");
  assert.equal(a.seq, 1);
  assert.equal(b.seq, 2);
  assert.equal(b.view, 1);
  assert.ok(posView(b).size > posView(a).size);
  assert.equal(b.laidOut, 3); // the blocks frame and the levels around it, not stem's
  assert.throws(() => service({ view: 1, seq: 3, key: "other", expanded: [] }), /graph other/);
  // views apart: another view has its own graph; a dropped view is forgotten
  assert.throws(() => service({ view: 2, seq: 1, key: "g1", expanded: [] }), /has none/);
  service({ view: 2, seq: 1, key: "g2", graph: { ...graph, key: "g2" }, expanded: [1, 4, 5] });
  assert.equal(service({ view: 1, seq: 4, key: "g1", expanded: [1, 4] })?.laidOut, 0); // all kept
  assert.equal(service({ view: 1, drop: true }), null);
  assert.throws(() => service({ view: 1, seq: 5, key: "g1", expanded: [] }), /has none/);
  // every typed array goes back to the view by transfer, none twice
  const buffers = transfers(b);
  assert.ok(buffers.length >= 8);
  assert.equal(new Set(buffers).size, buffers.length);
});

test("drawn nodes have a place, hidden ones none; boxes and frames as the rules say", () => {
  const L = layoutGraph(prepare(graph), new Set([1, 4]));
  assert.deepEqual([...L.groups], [1, 4]);
  assert.deepEqual([...L.boxes], [0, 2, 5, 9, 10]);
  const pos = posView(L);
  for (const k of [...L.groups, ...L.boxes]) assert.ok(pos.has(k));
  for (const k of [3, 6, 7, 8]) assert.equal(pos.get(k), undefined);
  assert.equal(pos.size, 7);
});

test("a value sent as one buffer of JSON is decoded once; a plain value passes through", async () => {
  const { unpacked } = await import("../src/_graphcore.js");
  const bytes = new TextEncoder().encode(JSON.stringify(graph));
  const view = new DataView(bytes.buffer);
  const a = unpacked(view);
  assert.deepEqual(a, graph);
  assert.equal(unpacked(view), a); // kept
  assert.equal(unpacked(graph), graph);
  assert.equal(unpacked(null), null);
});

test("the open ids travel as one buffer of little-endian int32, read at any offset; a saved list still reads", async () => {
  const { openIds, packedIds, without } = await import("../src/graph.js");
  // the kernel's form (graph.py _packed_ids): 4 bytes a trace node id, little-endian, in order;
  // a buffer that starts at an odd offset of a larger one, as a message's buffers may
  const ids = [4, 1, 70000, 2 ** 31 - 1];
  const bytes = new DataView(new ArrayBuffer(3 + 4 * ids.length), 3);
  for (const [i, id] of ids.entries()) bytes.setInt32(4 * i, id, true);
  assert.deepEqual(Array.from(openIds(bytes)), ids);
  assert.deepEqual(openIds([3, 5]), [3, 5]);
  assert.deepEqual(Array.from(openIds(null)), []);
  // what the page sends: the ids and those added, a view over a buffer of exactly their bytes
  const sent = packedIds(openIds(bytes), [9]);
  assert.ok(sent instanceof DataView);
  assert.equal(sent.byteLength, sent.buffer.byteLength);
  assert.deepEqual(Array.from(openIds(sent)), [...ids, 9]);
  assert.equal(sent.getInt32(4 * ids.length, true), 9);
  // a call closed: every id but its own, in order (each occurrence), packed as sent
  assert.deepEqual(Array.from(without(openIds(sent), 1)), [4, 70000, 2 ** 31 - 1, 9]);
  assert.deepEqual(Array.from(without([7, 3, 7], 7)), [3]);
  assert.deepEqual(Array.from(openIds(packedIds(without(openIds(sent), 9)))), ids);
  // and the layout of the packed ids is the layout of the list
  const runner = makeRunner();
  /** @type {LayoutResponse[]} */
  const got = [];
  runner.layout(graph, openIds(packedIds([1, 4])), (L) => got.push(L));
  runner.layout(graph, [1, 4], (L) => got.push(L));
  assert.equal(got.length, 2);
  assert.deepEqual([...got[0].pos], [...got[1].pos]);
  runner.close();
});

/** x -> Net[ 600 blocks, each a call around one op, in a chain ] -> out: a wrapped level. @param {number} blocks */
function chainGraph(blocks) {
  /** @type {LayoutGraph} */
  const g = {
    key: "chain",
    model: "Net",
    ids: [],
    kind: "",
    parent: [],
    name: [],
    type: [],
    ins: [],
    outs: [],
    tensors: ["8x64 float32"],
    edges: [],
    edge_tensor: [],
    rolled: [],
  };
  /** @param {string} kind @param {number} parent @param {string} name */
  const add = (kind, parent, name) => {
    g.ids.push(g.ids.length);
    g.kind += kind;
    g.parent.push(parent);
    g.name.push(name);
    g.type.push(kind === "m" ? "Block" : name);
    g.ins.push([0]);
    g.outs.push([0]);
    return g.ids.length - 1;
  };
  add("i", -1, "x");
  add("m", -1, "");
  let prev = 0;
  for (let b = 0; b < blocks; b++) {
    const op = add("p", add("m", 1, `layers.${b}`), "relu");
    g.edges.push(prev, op);
    g.edge_tensor.push(0);
    prev = op;
  }
  g.edges.push(prev, add("o", -1, "output"));
  g.edge_tensor.push(0);
  return g;
}

test("a wrapped frame: edges into and out of it run in the gap beside their column, not its far margin", () => {
  const g = chainGraph(600);
  const modules = g.ids.filter((_, k) => g.kind[k] === "m");
  const L = layoutGraph(prepare(g), new Set(modules));
  const cols = [];
  for (let i = 0; i < L.cols.length; i += 6) cols.push(Array.from(L.cols.subarray(i, i + 6)));
  assert.ok(cols.length >= 3, `columns: ${cols.length}`);
  const root = posView(L).get(1);
  const xin = posView(L).get(0);
  const out = posView(L).get(g.ids.length - 1);
  assert.ok(root && xin && out, "the model, the input and the output are drawn");
  const edges = [];
  for (let i = 0; i < L.edges.length; i += 3) edges.push([L.edges[i], L.edges[i + 1]]);
  // x -> the first op: down the gap right of the first column
  const i = edges.findIndex(([s]) => s === 0);
  const pts = [];
  for (let j = L.edgeOff[i]; j < L.edgeOff[i + 1]; j++) pts.push(L.edgeXY[2 * j]);
  const [x0, , w0] = cols[0];
  const [x1] = cols[1];
  assert.ok(
    pts.some((x) => x > x0 + w0 && x < x1),
    JSON.stringify({ pts, x0, w0, x1 }),
  );
  // after its start (x sits above the frame's middle), never out to the frame's far margin
  assert.ok(
    pts.slice(1).every((x) => x < root.x + root.w / 2),
    JSON.stringify(pts),
  );
  // the input sits above the first column, the output below the last (not the middle)
  assert.ok(xin.x + xin.w <= root.x + x1, JSON.stringify({ xin, root }));
  assert.ok(out.x >= root.x + cols[cols.length - 1][0] - out.w, JSON.stringify({ out, root }));
  // the last op -> output leaves from the last column: its points stay near that column
  const o = edges.findIndex(([, d]) => g.kind[d] === "o");
  const last = cols[cols.length - 1];
  for (let j = L.edgeOff[o]; j < L.edgeOff[o + 1] - 1; j++) assert.ok(L.edgeXY[2 * j] > last[0] - 100, "from the last column");
});

test("a worker that fails (a page refusing Blob workers) hands its waiting layouts to this thread", async () => {
  // a Worker that reports an error instead of starting, as a strict content policy does
  /** @type {(string | URL)[]} */
  const started = [];
  // only what the runner uses of a Worker: cast to one where it is installed below
  class Refused {
    /** set by the runner: @type {((e: {preventDefault(): void}) => void) | null} */
    onerror = null;
    /** @param {string | URL} url */
    constructor(url) {
      started.push(url);
      setTimeout(() => {
        assert.ok(this.onerror, "the runner listens for the worker's errors");
        this.onerror({ preventDefault() {} });
      }, 5);
    }
    postMessage() {}
    terminate() {}
  }
  // the bundle defines LABKIT_GRAPH_WORKER (build.mjs); in node the runner reads it off the global object
  const G = /** @type {typeof globalThis & {LABKIT_GRAPH_WORKER?: string}} */ (globalThis);
  const saved = { Worker: G.Worker, src: G.LABKIT_GRAPH_WORKER };
  G.Worker = /** @type {typeof Worker} */ (/** @type {unknown} */ (Refused));
  G.LABKIT_GRAPH_WORKER = "/* a worker's code */";
  try {
    const a = makeRunner();
    const b = makeRunner();
    /** @type {[string, LayoutResponse][]} */
    const got = [];
    a.layout(graph, [1, 4], (L) => got.push(["a", L]));
    b.layout(graph, [1], (L) => got.push(["b", L]));
    assert.equal(got.length, 0); // sent to the worker: nothing yet
    assert.equal(started.length, 1); // one worker for both views
    await new Promise((ok) => setTimeout(ok, 30));
    assert.deepEqual(got.map(([v]) => v).sort(), ["a", "b"]); // both answered here
    const want = layoutGraph(prepare(graph), expandedIndices(graph, [1, 4]));
    const fromA = got.find(([v]) => v === "a");
    assert.ok(fromA);
    assert.deepEqual([...fromA[1].pos], [...want.pos]);
    assert.equal(a.inWorker(), false);
    let now = null;
    a.layout(graph, [1], (L) => (now = L)); // from now on at once, on this thread
    assert.ok(now);
    assert.equal(started.length, 1); // and no new worker is tried
    a.close();
    b.close();
  } finally {
    G.Worker = saved.Worker;
    if (saved.src === undefined) delete G.LABKIT_GRAPH_WORKER;
    else G.LABKIT_GRAPH_WORKER = saved.src;
  }
});

// residual blocks, each a call holding two calls of one op and two ops: the 100,000-node
// benchmark's shape, small
/** @param {number} blocks */
function blockGraph(blocks) {
  /** @type {Omit<GraphPayload, "key" | "instances">} */
  const g = {
    model: "Net",
    ids: [],
    kind: "",
    parent: [],
    name: [],
    type: [],
    ins: [],
    outs: [],
    rolled: [],
    edges: [],
    edge_tensor: [],
    tensors: ["8x64 float32"],
    runs: [],
    total_runs: 1,
    metrics: {},
  };
  /** @param {string} kind @param {number} parent @param {string} name */
  const add = (kind, parent, name) => {
    const k = g.ids.length;
    g.ids.push(10 * k + 3); // trace ids are not payload indices
    g.kind += kind;
    g.parent.push(parent);
    g.name.push(name);
    g.type.push(kind === "m" ? "Block" : name);
    g.ins.push([0]);
    g.outs.push([0]);
    g.runs.push(1);
    return k;
  };
  let prev = add("i", -1, "x");
  add("m", -1, "");
  for (let b = 0; b < blocks; b++) {
    const blk = add("m", 1, `layers.${b}`);
    const a = add("p", add("m", blk, `layers.${b}.fc1`), "linear");
    const r = add("p", blk, "relu");
    const c = add("p", add("m", blk, `layers.${b}.fc2`), "linear");
    const s = add("p", blk, "add");
    g.edges.push(prev, a, a, r, r, c, c, s, prev, s);
    g.edge_tensor.push(0, 0, 0, 0, 0);
    prev = s;
  }
  return g;
}

test("a toggle lays out only the levels it reaches, and the layout is the one made afresh", () => {
  const g = { ...blockGraph(300), key: "blocks" };
  const calls = g.ids.filter((_, k) => g.kind[k] === "m");
  const service = makeService();
  let open = new Set(calls);
  const first = service({ view: 1, seq: 1, key: "blocks", graph: g, expanded: [...open] });
  assert.ok(first);
  assert.ok(first.cols.length > 6, "the blocks are wrapped into columns");
  let rng = 3;
  const pick = () => {
    rng = (rng * 48271) % 2147483647;
    return calls[rng % calls.length];
  };
  for (let step = 2; step < 40; step++) {
    // close or open one to three calls, some of them inside a closed call
    for (let i = 0; i < 1 + (step % 3); i++) {
      const id = pick();
      open = new Set(open);
      if (open.has(id)) open.delete(id);
      else open.add(id);
    }
    const got = service({ view: 1, seq: step, key: "blocks", expanded: [...open] });
    assert.ok(got);
    const want = layoutGraph(prepare(g), expandedIndices(g, open));
    for (const key of /** @type {const} */ (["boxOf", "boxes", "groups", "pos", "edges", "edgeOff", "edgeXY", "edgeBox", "cols"]))
      assert.deepEqual(got[key], want[key], `${key} after step ${step}`);
    assert.equal(got.width, want.width);
    assert.equal(got.height, want.height);
    // the toggled calls' levels and those around them, not the 900 frames of the graph
    assert.ok(got.laidOut < 30, `${got.laidOut} levels laid out at step ${step}`);
  }
});

test("a toggle updates the kept layout in place: one object, the layout made afresh", () => {
  // a copy of the kept object per layout ({ ...last }) gave V8 a new map each time, and every
  // read of it threw the layout's optimised code away
  const g = { ...blockGraph(40), key: "kept" };
  const prep = prepare(g);
  const calls = g.ids.filter((_, k) => g.kind[k] === "m");
  /** @type {{last?: import("../src/_graph_layout.js").Kept}} */
  const keep = {};
  layoutGraph(prep, expandedIndices(g, calls), null, keep);
  const kept = keep.last;
  assert.ok(kept);
  for (const shut of [calls[4], calls[0], -1]) {
    const open = calls.filter((id) => id !== shut);
    const got = layoutGraph(prep, expandedIndices(g, open), null, keep);
    assert.equal(keep.last, kept, "the same object");
    const mask = new Uint8Array(g.ids.length);
    for (const k of expandedIndices(g, open)) mask[k] = 1;
    assert.deepEqual(kept.open, mask, "its open calls are this layout's");
    const want = layoutGraph(prep, expandedIndices(g, open));
    for (const key of /** @type {const} */ (["pos", "edges", "edgeXY", "cols"]))
      assert.deepEqual(got[key], want[key], `${key} with ${shut} shut`);
  }
});

test("toggles on a rolled block and on a wrapped chain lay out as made afresh, routes included", () => {
  // every set of open calls of the fixture (a rolled block inside), visited in a Gray-code
  // order: one call closed or opened a layout, hidden ones too; and a chain of 600 blocks
  // wrapped into columns, its blocks opened and closed near a column's ends
  const calls = graph.ids.filter((_, k) => graph.kind[k] === "m");
  /** @type {[LayoutGraph, number[][]]} */
  const rolled = [{ ...graph, key: "rolled" }, []];
  for (let i = 1; i < 2 ** calls.length; i++) {
    const gray = i ^ (i >> 1);
    rolled[1].push(calls.filter((_, b) => gray & (1 << b)));
  }
  const chain = { ...chainGraph(600), key: "chain" };
  const blocks = chain.ids.filter((_, k) => chain.kind[k] === "m" && chain.parent[k] >= 0);
  const all = chain.ids.filter((_, k) => chain.kind[k] === "m");
  const shut = [[], [blocks[0]], [blocks[150], blocks[151]], [blocks[599]], [], [blocks[300], 1], [1], []];
  /** @type {[LayoutGraph, number[][]]} */
  const wrapped = [chain, shut.map((s) => all.filter((id) => !s.includes(id)))];
  for (const [g, steps] of [rolled, wrapped]) {
    const service = makeService();
    const prep = prepare(g);
    for (const [step, open] of steps.entries()) {
      const got = service({ view: 1, seq: step + 1, key: g.key, graph: step ? undefined : g, expanded: open });
      const want = layoutGraph(prep, expandedIndices(g, open));
      assert.ok(got);
      for (const key of /** @type {const} */ (["boxOf", "boxes", "groups", "pos", "edges", "edgeOff", "edgeXY", "edgeBox", "cols"]))
        assert.deepEqual(got[key], want[key], `${g.key}: ${key} with ${open.join(",")} open`);
      assert.equal(got.width, want.width);
      assert.equal(got.height, want.height);
    }
  }
});

test("arrays made ahead for a big view's next layout are its arrays once, and it lays out as made afresh", () => {
  // 1,300 blocks: 6,502 nodes, past WARM_MIN; a small graph gets none made
  const g = { ...blockGraph(1300), key: "spare" };
  const calls = g.ids.filter((_, k) => g.kind[k] === "m");
  const prep = prepare(g);
  const service = makeService();
  service({ view: 1, seq: 1, key: "spare", graph: g, expanded: calls });
  let open = calls;
  /** @type {LayoutResponse | null} */
  let before = null;
  for (const [step, shut] of [[calls[7]], [], [calls[3000], calls[3001]], [calls[0]]].entries()) {
    readyNext(service, 1);
    open = calls.filter((id) => !shut.includes(id));
    const got = service({ view: 1, seq: step + 2, key: "spare", expanded: open });
    // without readyNext in between: new arrays, not the ones handed out before
    const again = service({ view: 1, seq: step + 100, key: "spare", expanded: open });
    assert.ok(got && again);
    for (const key of /** @type {const} */ (["boxOf", "pos", "edges", "edgeOff", "edgeXY", "edgeBox", "isGroup"])) {
      assert.notEqual(got[key].buffer, again[key].buffer, `${key}: one layout's`);
      if (before) assert.notEqual(got[key].buffer, before[key].buffer, `${key}: one layout's`);
    }
    const want = layoutGraph(prep, expandedIndices(g, open));
    for (const key of /** @type {const} */ ([
      "boxOf",
      "boxes",
      "groups",
      "pos",
      "edges",
      "edgeOff",
      "edgeXY",
      "edgeBox",
      "cols",
      "isGroup",
    ])) {
      assert.deepEqual(got[key], want[key], `${key} at step ${step}`);
      assert.deepEqual(again[key], want[key], `${key} at step ${step}, again`);
    }
    before = again;
  }
  // the next layout's arrays are the ones made ahead, then forgotten
  /** @type {{last?: import("../src/_graph_layout.js").Kept, spare?: import("../src/_graph_layout.js").Spare | null}} */
  const keep = {};
  layoutGraph(prep, expandedIndices(g, calls), null, keep);
  makeSpare(prep, keep);
  const spare = keep.spare;
  assert.ok(spare);
  const L = layoutGraph(prep, expandedIndices(g, open), null, keep);
  assert.equal(L.pos, spare.pos);
  assert.equal(L.boxOf, spare.boxOf);
  assert.equal(L.edgeXY.buffer, spare.xy.buffer);
  assert.equal(L.edgeBox.buffer, spare.box.buffer);
  assert.equal(keep.spare, null);
  const small = makeService();
  small({ view: 1, seq: 1, key: "blocks", graph: { ...blockGraph(10), key: "blocks" }, expanded: [] });
  readyNext(small, 1);
  readyNext(small, 9); // a view that is not there
});

test("a big level keeps its ranks and ordered layers: its toggles lay out as made afresh", () => {
  // 1,200 blocks at the top: a level past BIG_LEVEL, wrapped into columns
  const g = { ...blockGraph(1200), key: "big" };
  const calls = g.ids.filter((_, k) => g.kind[k] === "m");
  const service = makeService();
  const first = service({ view: 1, seq: 1, key: "big", graph: g, expanded: calls });
  assert.ok(first && first.cols.length > 6, "wrapped");
  const prep = prepare(g);
  // blocks closed and opened, one or two at a time, near the start, middle and end
  const blocks = calls.filter((_, i) => i % 3 === 1);
  let open = new Set(calls);
  for (const [step, shut] of [[blocks[5]], [blocks[600], blocks[1190]], [], [blocks[0]]].entries()) {
    open = new Set(calls.filter((id) => !shut.includes(id)));
    const got = service({ view: 1, seq: step + 2, key: "big", expanded: [...open] });
    const want = layoutGraph(prep, expandedIndices(g, open));
    assert.ok(got);
    assert.ok(got.laidOut < 10, `a toggle: ${got.laidOut} levels laid out`);
    for (const key of /** @type {const} */ (["boxOf", "pos", "edges", "edgeOff", "edgeXY", "edgeBox", "cols"]))
      assert.deepEqual(got[key], want[key], `${key} at step ${step}`);
  }
});

test("the head of a payload is a graph of its own: parents, edges and rolled blocks inside", () => {
  const g = {
    ...blockGraph(40),
    key: "blocks",
    rolled: [
      [2, 3, "layers.0-2"],
      [200, 3, "layers.28-30"],
    ],
  };
  const m = 100;
  const head = headOf(g, m);
  assert.equal(head.parent.length, m);
  assert.equal(head.kind.length, m);
  assert.notEqual(head.key, g.key);
  for (const p of head.parent) assert.ok(p < m);
  assert.equal(head.edges.length, 2 * head.edge_tensor.length);
  assert.ok(head.edges.length > 0 && head.edges.every((k) => k < m));
  const inside = g.edge_tensor.filter((_, j) => g.edges[2 * j] < m && g.edges[2 * j + 1] < m).length;
  assert.equal(head.edge_tensor.length, inside);
  assert.deepEqual(head.rolled, [[2, 3, "layers.0-2"]]);
  // it lays out as any payload does
  const L = layoutGraph(prepare(head), new Set(head.ids.map((_, k) => k)));
  assert.equal(L.boxOf.length, m);
  assert.equal(headOf(g, 10 * g.ids.length).parent.length, g.ids.length); // never more than the graph
});

test("the worker's rehearsal of toggles runs step by step and leaves the views' layouts as they were", () => {
  const g = { ...blockGraph(300), key: "blocks" };
  const calls = g.ids.filter((_, k) => g.kind[k] === "m");
  const service = makeService();
  const first = service({ view: 1, seq: 1, key: "blocks", graph: g, expanded: calls });
  assert.ok(first);
  const step = warmUp(service, g, 5);
  let steps = 0;
  while (step()) steps++;
  assert.equal(steps, 11); // the head laid out, then 5 calls closed and opened again
  assert.equal(step(), false); // over: the rehearsal's view is gone
  assert.throws(() => service({ view: -1, seq: 99, key: headOf(g, 2000).key, expanded: [] }), /has none/);
  // the view's next layouts are those made afresh (its kept layout untouched)
  const shut = calls.filter((id) => id !== calls[7]);
  const got = service({ view: 1, seq: 2, key: "blocks", expanded: shut });
  const want = layoutGraph(prepare(g), expandedIndices(g, shut));
  assert.ok(got);
  assert.deepEqual(got.pos, want.pos);
  assert.deepEqual(got.edgeXY, want.edgeXY);
  const back = service({ view: 1, seq: 3, key: "blocks", expanded: calls });
  assert.ok(back);
  assert.deepEqual(back.pos, first.pos);
  assert.ok(back.laidOut < 10, "a toggle, not a layout afresh");
});
