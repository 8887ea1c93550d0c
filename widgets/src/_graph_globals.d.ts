// Globals of the graph view's bundles (widgets/build.mjs `define`).

/**
 * The layout worker's bundled code as text (_graph_worker.js), which _graph_runner.js
 * starts from a Blob URL; not defined where the sources run unbundled (node tests).
 */
declare const LABKIT_GRAPH_WORKER: string | undefined;
