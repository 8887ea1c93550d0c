// The GraphView's layout worker (bundled by widgets/build.mjs into a text the view starts
// from a Blob URL: _graph_runner.js). One message, one layout; its arrays are handed back.
import { makeService, transfers } from "./_graph_runner.js";

const service = makeService();
if (typeof self !== "undefined" && typeof self.postMessage === "function" && typeof window === "undefined") {
  self.onmessage = (e) => {
    try {
      const out = service(e.data);
      self.postMessage(out, transfers(out));
    } catch (err) {
      setTimeout(() => {
        throw err; // reported to the view as the worker's error event: it lays out itself
      });
    }
  };
}
