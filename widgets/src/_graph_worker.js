// The GraphView's layout worker (bundled by widgets/build.mjs into a text the views start
// from a Blob URL: _graph_runner.js). One message, one layout; its arrays are handed back.
// The messages both ways are typed in _worker_messages.d.ts.
import { makeService, readyNext, transfers, WARM_MIN, warmUp } from "./_graph_runner.js";

/**
 * @typedef {object} WorkerScope the dedicated worker's global scope, as this file uses it
 *   (the project's lib is "DOM", which types `self` as a Window)
 * @property {((e: MessageEvent<import("./_worker_messages").LayoutServiceRequest>) => void) | null} onmessage
 * @property {(message: import("./_worker_messages").LayoutServiceResponse, transfer: Transferable[]) => void} postMessage
 */

const service = makeService();
if (typeof self !== "undefined" && typeof self.postMessage === "function" && typeof window === "undefined") {
  const scope = /** @type {WorkerScope} */ (/** @type {unknown} */ (self));
  let warmed = false;
  scope.onmessage = (e) => {
    try {
      const out = service(e.data);
      if (out) {
        scope.postMessage(out, transfers(out));
        // the next layout's arrays made while the user looks (a task of its own, after the answer)
        setTimeout(() => readyNext(service, out.view), 0);
      }
      const graph = e.data.drop ? undefined : e.data.graph;
      if (!warmed && graph && graph.parent.length >= WARM_MIN) {
        // once per worker, after its first big layout is sent: toggles rehearsed on a
        // small graph, one layout a task (a view's request waits for one step at most)
        warmed = true;
        const step = warmUp(service, graph);
        const next = () => {
          if (step()) setTimeout(next, 0);
        };
        setTimeout(next, 0);
      }
    } catch (err) {
      setTimeout(() => {
        throw err; // reported to the views as the worker's error event: they lay out themselves
      });
    }
  };
}
