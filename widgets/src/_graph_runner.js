// Where the GraphView's layout runs: in a web worker, so a 100,000-node graph never
// blocks the page, or on the main thread where there is no Worker (node tests, a page
// whose policy refuses workers from Blob URLs). The worker's code is bundled by
// widgets/build.mjs and inlined here as text (LABKIT_GRAPH_WORKER), so it starts from a
// Blob URL inside anywidget and JupyterLab, with no file of its own to serve.
/* global LABKIT_GRAPH_WORKER */
import { expandedIndices } from "./_graphcore.js";
import { layoutGraph, prepare } from "./_graph_layout.js";

/** The fields of a payload the layout reads (what is sent to the worker, once per graph). */
const FIELDS = ["key", "model", "ids", "kind", "parent", "name", "type", "ins", "outs", "tensors", "edges", "edge_tensor", "rolled"];

/**
 * The layout service: one request {seq, key, expanded: ids, graph?} -> a GraphLayout with
 * seq and ms. It keeps the prepared payload and the per-level layouts of the last graph.
 * @returns {(msg: object) => object}
 */
export function makeService() {
  let key = null;
  let graph = null;
  let prep = null;
  let cache = null;
  return (msg) => {
    const t = performance.now();
    if (msg.graph) {
      graph = msg.graph;
      key = msg.key;
      prep = prepare(graph);
      cache = new Map();
    }
    if (!graph || msg.key !== key) throw new Error(`layout asked for graph ${msg.key}, has ${key}`);
    const out = layoutGraph(prep, expandedIndices(graph, msg.expanded || []), cache);
    return { ...out, hasKids: prep.hasKids.slice(), seq: msg.seq, ms: performance.now() - t };
  };
}

/** The typed arrays of a result, handed over to the receiver rather than copied. */
export function transfers(out) {
  return Object.values(out).filter((v) => ArrayBuffer.isView(v)).map((v) => v.buffer);
}

/**
 * @returns {{layout(graph, expandedIds, done), inWorker: () => boolean, close()}}
 *   layout calls done(result) with the GraphLayout (at once without a worker)
 */
export function makeRunner() {
  const src = typeof LABKIT_GRAPH_WORKER === "string" ? LABKIT_GRAPH_WORKER : null;
  let worker = null;
  if (src && typeof Worker !== "undefined" && typeof Blob !== "undefined") {
    try {
      const url = URL.createObjectURL(new Blob([src], { type: "text/javascript" }));
      worker = new Worker(url);
      URL.revokeObjectURL(url); // the worker has loaded it (or fails: onerror)
    } catch {
      worker = null;
    }
  }
  let service = worker ? null : makeService();
  let seq = 0;
  let sentKey = null;
  let graph = null;
  const waiting = new Map(); // seq -> [msg, done]
  const local = (msg, done) => {
    if (!msg.graph && msg.key !== sentKey) msg.graph = pick(graph);
    done(service(msg));
  };
  if (worker) {
    worker.onmessage = (e) => {
      const w = waiting.get(e.data.seq);
      waiting.delete(e.data.seq);
      if (w) w[1](e.data);
    };
    // a worker that cannot start or fails: lay out here from now on
    worker.onerror = (e) => {
      e.preventDefault();
      worker.terminate();
      worker = null;
      service = makeService();
      sentKey = null;
      const pending = [...waiting.values()];
      waiting.clear();
      for (const [msg, done] of pending) {
        msg.graph = pick(graph);
        sentKey = msg.key;
        local(msg, done);
      }
    };
  }
  return {
    layout(g, expandedIds, done) {
      graph = g;
      const msg = { seq: ++seq, key: g.key, expanded: Array.from(expandedIds || []) };
      if (sentKey !== g.key) {
        msg.graph = pick(g);
        sentKey = g.key;
      }
      if (!worker) return local(msg, done);
      waiting.set(msg.seq, [msg, done]);
      worker.postMessage(msg);
    },
    inWorker: () => worker !== null,
    close() {
      if (worker) worker.terminate();
      worker = null;
    },
  };
}

function pick(graph) {
  const out = {};
  for (const f of FIELDS) out[f] = graph[f];
  return out;
}
