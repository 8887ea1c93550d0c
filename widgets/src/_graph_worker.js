// The GraphView's layout worker (bundled by widgets/build.mjs into a text the views start
// from a Blob URL: _graph_runner.js). One message, one layout; its arrays are handed back.
import { makeService, transfers } from "./_graph_runner.js";

const service = makeService();
if (typeof self !== "undefined" && typeof self.postMessage === "function" && typeof window === "undefined") {
  self.onmessage = (e) => {
    try {
      const out = service(e.data);
      if (out) self.postMessage(out, transfers(out));
    } catch (err) {
      setTimeout(() => {
        throw err; // reported to the views as the worker's error event: they lay out themselves
      });
    }
  };
}
