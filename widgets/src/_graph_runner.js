// Where the GraphView's layout runs: in a web worker, so a 100,000-node graph never
// blocks the page, or on the main thread where there is no Worker (node tests, a page
// whose policy refuses workers from Blob URLs). The worker's code is bundled by
// widgets/build.mjs and inlined here as text (LABKIT_GRAPH_WORKER), so it starts from a
// Blob URL inside anywidget and JupyterLab, with no file of its own to serve. One worker
// serves every graph view of the page: its compiled code stays warm from one view (or
// one re-run of a cell) to the next, where a worker per view started cold each time.
/* global LABKIT_GRAPH_WORKER */
import { expandedIndices } from "./_graphcore.js";
import { layoutGraph, prepare } from "./_graph_layout.js";

/** The fields of a payload the layout reads (what is sent to the worker, once per graph). */
const FIELDS = ["key", "model", "ids", "kind", "parent", "name", "type", "ins", "outs", "tensors", "edges", "edge_tensor", "rolled"];

/**
 * The layout service: one request {view, seq, key, expanded: ids, graph?} -> a
 * GraphLayout with view, seq and ms; {view, drop: true} forgets a view. Per view it keeps
 * the prepared payload and the per-level layouts of its last graph.
 * @returns {(msg: object) => object | null}
 */
export function makeService() {
  const views = new Map(); // view -> {key, graph, prep, cache}
  return (msg) => {
    if (msg.drop) {
      views.delete(msg.view);
      return null;
    }
    const t = performance.now();
    let v = views.get(msg.view);
    if (msg.graph) {
      v = { key: msg.key, graph: msg.graph, prep: prepare(msg.graph), cache: new Map() };
      views.set(msg.view, v);
    }
    if (!v || msg.key !== v.key) throw new Error(`layout asked for graph ${msg.key}, has ${v ? v.key : "none"}`);
    const out = layoutGraph(v.prep, expandedIndices(v.graph, msg.expanded || []), v.cache);
    return { ...out, hasKids: v.prep.hasKids.slice(), view: msg.view, seq: msg.seq, ms: performance.now() - t };
  };
}

/** The typed arrays of a result, handed over to the receiver rather than copied. */
export function transfers(out) {
  return Object.values(out).filter((v) => ArrayBuffer.isView(v)).map((v) => v.buffer);
}

// the page's one worker and the views waiting on it (view -> {answer(result), failed()})
let shared = null;
const clients = new Map();
let nextView = 0;

/** The page's layout worker, started on first use; null where none can run. */
function worker() {
  if (shared !== null || typeof LABKIT_GRAPH_WORKER !== "string") return shared;
  if (typeof Worker === "undefined" || typeof Blob === "undefined") return null;
  try {
    const url = URL.createObjectURL(new Blob([LABKIT_GRAPH_WORKER], { type: "text/javascript" }));
    shared = new Worker(url);
    URL.revokeObjectURL(url); // the worker has it (or fails: onerror)
  } catch {
    return null;
  }
  shared.onmessage = (e) => {
    const c = clients.get(e.data.view);
    if (c) c.answer(e.data);
  };
  // a worker that cannot start or fails: every view lays out on its own thread from now on
  shared.onerror = (e) => {
    e.preventDefault();
    shared.terminate();
    shared = false;
    for (const c of [...clients.values()]) c.failed();
  };
  return shared;
}

/**
 * @returns {{layout(graph, expandedIds, done), inWorker: () => boolean, close()}}
 *   layout calls done(result) with the GraphLayout (at once without a worker)
 */
export function makeRunner() {
  const view = ++nextView;
  let service = null; // this thread's, once there is no worker
  let sentKey = null;
  let graph = null;
  const waiting = new Map(); // seq -> [msg, done]
  let seq = 0;
  const local = (msg, done) => {
    service ||= makeService();
    if (!msg.graph && msg.key !== sentKey) msg.graph = pick(graph);
    done(service(msg));
  };
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
        msg.graph = pick(graph);
        sentKey = msg.key;
        local(msg, done);
      }
    },
  };
  clients.set(view, client);
  return {
    layout(g, expandedIds, done) {
      graph = g;
      const msg = { view, seq: ++seq, key: g.key, expanded: Array.from(expandedIds || []) };
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
      clients.delete(view);
      const w = worker();
      if (w && !service) w.postMessage({ view, drop: true });
    },
  };
}

function pick(graph) {
  const out = {};
  for (const f of FIELDS) out[f] = graph[f];
  return out;
}
