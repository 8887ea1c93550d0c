// Where the GraphView's layout runs: in a web worker, so a 100,000-node graph never
// blocks the page, or on the main thread where there is no Worker (node tests, a page
// whose policy refuses workers from Blob URLs). The worker's code is bundled by
// widgets/build.mjs and inlined here as text (LABKIT_GRAPH_WORKER), so it starts from a
// Blob URL inside anywidget and JupyterLab, with no file of its own to serve. One worker
// serves every graph view of the page: its compiled code stays warm from one view (or
// one re-run of a cell) to the next, where a worker per view started cold each time
// (measured: the first toggle of a new 10,000-node view 85 ms in a cold worker, 10-20 warm).
/* global LABKIT_GRAPH_WORKER */
import { indexOfIds } from "./_graphcore.js";
import { layoutGraph, makeSpare, prepare } from "./_graph_layout.js";

/** @typedef {import("./_worker_messages").LayoutGraph} LayoutGraph */
/** @typedef {import("./_worker_messages").LayoutRequest} LayoutRequest */
/** @typedef {import("./_worker_messages").LayoutResponse} LayoutResponse */
/** @typedef {import("./_worker_messages").LayoutServiceResponse} LayoutServiceResponse */
/** @typedef {import("./_worker_messages").LayoutService} LayoutService */
/** @typedef {{answer: (out: LayoutResponse) => void, failed: () => void}} Client a view waiting on the worker */
/** @typedef {{worker: Worker | null | false, clients: Map<number, Client>, next: number}} Hub the page's worker (false: none can run) */

/** The fields of a payload the layout reads (what is sent to the worker, once per graph). @type {(keyof LayoutGraph)[]} */
const FIELDS = ["key", "model", "ids", "kind", "parent", "name", "type", "ins", "outs", "tensors", "edges", "edge_tensor", "rolled"];

/**
 * The layout service: one request {view, seq, key, expanded: ids, graph?} -> a
 * GraphLayout with view, seq and ms; {view, drop: true} forgets a view. Per view it keeps
 * the prepared payload and its last layout (sizes, places and levels: a toggle lays out
 * only the levels it reaches, layoutGraph's `keep`). The messages are
 * typed in _worker_messages.d.ts (LayoutServiceRequest, LayoutServiceResponse).
 * @returns {LayoutService}
 */
export function makeService() {
  /** @type {Map<number, {key: string, graph: {ids: ArrayLike<number>}, prep: import("./_graph_layout.js").Prepared, keep: {last?: import("./_graph_layout.js").Kept, spare?: import("./_graph_layout.js").Spare | null}}>} */
  const views = new Map(); // view -> {key, its ids, the prepared payload, the last layout}
  /** @type {LayoutService} */
  const service = (msg) => {
    if (msg.drop) {
      views.delete(msg.view);
      return null;
    }
    const t = performance.now();
    let v = views.get(msg.view);
    if (msg.graph) {
      // only the ids are read again (the open calls come as ids): the payload's names,
      // shapes and edges are in the prepared arrays, and a smaller heap is a shorter
      // collection of garbage (a full one at 100,000 nodes: ~90 ms, inside a toggle)
      const ids = { ids: msg.graph.ids };
      v = { key: msg.key, graph: ids, prep: prepare(msg.graph), keep: {} };
      views.set(msg.view, v);
    }
    if (!v || msg.key !== v.key) throw new Error(`layout asked for graph ${msg.key}, has ${v ? v.key : "none"}`);
    // no per-level cache: the kept layout lays out only the levels a toggle reaches, and
    // 40,000 cached levels were as many more arrays for the collector to walk
    const out = layoutGraph(v.prep, openMask(v.graph, msg.expanded || []), null, v.keep);
    return { ...out, hasKids: v.prep.hasKids.slice(), view: msg.view, seq: msg.seq, ms: performance.now() - t };
  };
  spares.set(service, (view, min) => {
    const v = views.get(view);
    if (v && v.prep.n >= min) makeSpare(v.prep, v.keep);
  });
  return service;
}

/** @type {WeakMap<LayoutService, (view: number, min: number) => void>} */
const spares = new WeakMap();

/**
 * Make a big view's next layout's output arrays now, while the worker waits for the
 * user (_graph_layout.js makeSpare: their pages are written here, not during the next
 * toggle). For graphs of WARM_MIN nodes or more (the rehearsal's too: a layout's first
 * use of made arrays, in a fresh view's first toggle, deoptimised layoutGraph and edgeLines
 * where the rehearsal had not used them); a view that is gone is skipped.
 * @param {LayoutService} service @param {number} view @param {number} [min] fewest nodes
 */
export function readyNext(service, view, min = WARM_MIN) {
  spares.get(service)?.(view, min);
}

/** A first graph of this many nodes or more makes the worker rehearse toggles (warmUp). */
export const WARM_MIN = 5000;
/** The rehearsal's graph: the payload's first this many nodes. */
const WARM_NODES = 2000;
/** Calls closed and opened again in the rehearsal (each a layout of WARM_NODES nodes). */
const WARM_TOGGLES = 30;

/**
 * A payload's first m nodes as a graph of their own (a frame's children come after it,
 * so every parent is inside; edges and rolled blocks with both ends inside).
 * @param {LayoutGraph} graph @param {number} m
 * @returns {LayoutGraph}
 */
export function headOf(graph, m) {
  m = Math.min(m, graph.parent.length);
  /** @type {number[]} */
  const edges = [];
  /** @type {number[]} */
  const tensor = [];
  for (let j = 0; j < graph.edge_tensor.length; j++) {
    if (graph.edges[2 * j] < m && graph.edges[2 * j + 1] < m) {
      edges.push(graph.edges[2 * j], graph.edges[2 * j + 1]);
      tensor.push(graph.edge_tensor[j]);
    }
  }
  return {
    key: `${graph.key}/head${m}`,
    model: graph.model,
    ids: graph.ids.slice(0, m),
    kind: graph.kind.slice(0, m),
    parent: graph.parent.slice(0, m),
    name: graph.name.slice(0, m),
    type: graph.type.slice(0, m),
    ins: graph.ins.slice(0, m),
    outs: graph.outs.slice(0, m),
    tensors: graph.tensors,
    edges,
    edge_tensor: tensor,
    rolled: (graph.rolled || []).filter((r) => Number(r[0]) < m),
  };
}

/**
 * A rehearsal of toggles for a layout service that has just drawn its first big graph: a
 * view of its own lays out the graph's first WARM_NODES nodes with every call open, then
 * closes and opens calls one layout per step. The layout's code (run once per toggle over
 * 100,000 nodes) is then compiled and optimised before the user's first click, which
 * otherwise ran it in the interpreter: the first toggle of a fresh 100,000-node view took
 * 390-520 ms of the worker's time, the later ones 90-110 ms. The service's other views are
 * untouched (the rehearsal's view is dropped at the end).
 * @param {LayoutService} service @param {LayoutGraph} graph
 * @returns {() => boolean} one step (a layout); false once the rehearsal is over
 */
export function warmUp(service, graph, toggles = WARM_TOGGLES) {
  const head = headOf(graph, WARM_NODES);
  /** @type {number[]} */
  const calls = [];
  const kids = new Uint8Array(head.parent.length);
  for (const p of head.parent) if (p >= 0) kids[p] = 1;
  for (let k = 0; k < head.parent.length; k++) if (kids[k]) calls.push(head.ids[k]);
  const view = -1; // the views of the page are numbered from 1
  let step = 0;
  return () => {
    if (step > 2 * toggles || !calls.length) {
      service({ view, drop: true });
      return false;
    }
    const shut = step % 2 ? calls[(Math.floor((step - 1) / 2) * 7919) % calls.length] : -1; // odd: one call closed
    service({
      view,
      seq: step,
      key: head.key,
      expanded: shut < 0 ? calls : calls.filter((id) => id !== shut),
      graph: step ? undefined : head,
    });
    readyNext(service, view, 0); // the big views' made arrays rehearsed too
    step++;
    return true;
  };
}

/** @type {WeakMap<object, Int32Array | null>} */
const idTables = new WeakMap(); // payload -> trace node id -> payload index + 1 (0: none)

/**
 * A payload's trace node id -> payload index as a typed table (made once per graph): ids
 * are small integers (a trace numbers its nodes), so a lookup is an array read, not a Map's
 * hash (6 ms for 40,000 ids at 100,000 nodes). Null when the ids are not small integers.
 * @param {{ids: ArrayLike<number>}} graph
 * @returns {Int32Array | null}
 */
function idTable(graph) {
  let table = idTables.get(graph);
  if (table === undefined) {
    const ids = graph.ids;
    let max = -1;
    let ok = true;
    for (let k = 0; k < ids.length && ok; k++) {
      const id = ids[k];
      ok = Number.isInteger(id) && id >= 0;
      if (id > max) max = id;
    }
    table = ok && max < 4 * ids.length + 1024 ? new Int32Array(max + 1) : null;
    if (table) for (let k = 0; k < ids.length; k++) table[ids[k]] = k + 1;
    idTables.set(graph, table);
  }
  return table;
}

/**
 * 1 per payload node whose call is open, from trace node ids: a Uint8Array filled through
 * the payload's id table (made once per graph), with no Set of 40,000 indices in between.
 * @param {{ids: ArrayLike<number>}} graph @param {Iterable<number>} ids
 * @returns {Uint8Array}
 */
export function openMask(graph, ids) {
  const open = new Uint8Array(graph.ids.length);
  const table = idTable(graph);
  if (table) {
    for (const id of ids) {
      const k = id >= 0 && id < table.length ? table[id] : 0;
      if (k) open[k - 1] = 1;
    }
    return open;
  }
  const index = indexOfIds(graph);
  for (const id of ids) {
    const k = index.get(id);
    if (k !== undefined) open[k] = 1;
  }
  return open;
}

/**
 * The typed arrays of a result, handed over to the receiver rather than copied.
 * @param {LayoutServiceResponse} out
 * @returns {Transferable[]}
 */
export function transfers(out) {
  return Object.values(out)
    .filter((v) => ArrayBuffer.isView(v))
    .map((v) => /** @type {ArrayBuffer} */ (v.buffer));
}

// The page's one worker and the views waiting on it live on globalThis, keyed by the
// worker's code: anywidget imports this module afresh for every view (a re-run cell too),
// so a module-level worker would be one per view, each starting cold.
const HUB = Symbol.for("labkit.graph.layout");

/** The page's layout hub for this worker code: {worker, clients: view -> client, next}. @returns {Hub} */
function hub() {
  const g = /** @type {{[HUB]?: Map<string, Hub>}} */ (globalThis);
  if (!g[HUB]) g[HUB] = new Map();
  const all = g[HUB];
  const src = typeof LABKIT_GRAPH_WORKER === "string" ? LABKIT_GRAPH_WORKER : "";
  if (!all.has(src)) all.set(src, { worker: null, clients: new Map(), next: 0 });
  return /** @type {Hub} */ (all.get(src));
}

/** The page's layout worker, started on first use; null where none can run. */
function worker() {
  const h = hub();
  if (h.worker !== null) return h.worker || null;
  if (typeof LABKIT_GRAPH_WORKER !== "string" || typeof Worker === "undefined" || typeof Blob === "undefined") return null;
  /** @type {Worker} */
  let w;
  try {
    const url = URL.createObjectURL(new Blob([LABKIT_GRAPH_WORKER], { type: "text/javascript" }));
    w = new Worker(url);
    URL.revokeObjectURL(url); // the worker has it (or fails: onerror)
  } catch {
    h.worker = false;
    return null;
  }
  h.worker = w;
  w.onmessage = (/** @type {MessageEvent<LayoutServiceResponse>} */ e) => {
    const c = h.clients.get(e.data.view);
    if (c) c.answer(e.data);
  };
  // a worker that cannot start or fails: every view lays out on its own thread from now on
  w.onerror = (e) => {
    e.preventDefault();
    w.terminate();
    h.worker = false;
    for (const c of [...h.clients.values()]) c.failed();
  };
  return w;
}

/**
 * @returns {{layout(graph: LayoutGraph, expandedIds: Iterable<number> | null | undefined, done: (out: LayoutResponse) => void): void, inWorker: () => boolean, close(): void}}
 *   layout calls done(result) with the GraphLayout (at once without a worker)
 */
export function makeRunner() {
  const view = ++hub().next;
  /** @type {LayoutService | null} */
  let service = null; // this thread's, once there is no worker
  /** @type {string | null} */
  let sentKey = null;
  /** @type {LayoutGraph | null} */
  let graph = null;
  /** @type {Map<number, [LayoutRequest, (out: LayoutResponse) => void]>} */
  const waiting = new Map(); // seq -> [msg, done]
  let seq = 0;
  /** @param {LayoutRequest} msg @param {(out: LayoutResponse) => void} done */
  const local = (msg, done) => {
    service ||= makeService();
    if (!msg.graph && msg.key !== sentKey) msg.graph = pick(/** @type {LayoutGraph} */ (graph));
    done(/** @type {LayoutResponse} */ (service(msg)));
  };
  /** @type {Client} */
  const client = {
    answer(out) {
      const w = waiting.get(out.seq);
      waiting.delete(out.seq);
      if (w) w[1](out);
    },
    failed() {
      sentKey = null;
      const pending = [...waiting.values()];
      waiting.clear();
      for (const [msg, done] of pending) {
        msg.graph = pick(/** @type {LayoutGraph} */ (graph));
        sentKey = msg.key;
        local(msg, done);
      }
    },
  };
  hub().clients.set(view, client);
  return {
    layout(g, expandedIds, done) {
      graph = g;
      // the ids as one Int32Array: cloned as a block of bytes (a list of 40,000 numbers was
      // walked item by item on both sides, ~10 ms of the page's thread a toggle at 100,000 nodes)
      const ids = expandedIds || [];
      /** @type {LayoutRequest} */
      const msg = { view, seq: ++seq, key: g.key, expanded: ids instanceof Int32Array ? ids.slice() : Int32Array.from(ids) };
      if (sentKey !== g.key) {
        msg.graph = pick(g);
        sentKey = g.key;
      }
      const w = worker();
      if (!w) return local(msg, done);
      waiting.set(msg.seq, [msg, done]);
      w.postMessage(msg);
    },
    inWorker: () => !service && Boolean(worker()),
    close() {
      hub().clients.delete(view);
      const w = worker();
      if (w && !service) w.postMessage({ view, drop: true });
    },
  };
}

/** @param {LayoutGraph} graph @returns {LayoutGraph} */
function pick(graph) {
  /** @type {Record<string, unknown>} */
  const out = {};
  for (const f of FIELDS) out[f] = graph[f];
  return /** @type {LayoutGraph} */ (/** @type {unknown} */ (out));
}
