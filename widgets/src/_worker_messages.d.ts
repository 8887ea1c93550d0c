// The GraphView's layout protocol: what a view (_graph_runner.js makeRunner) sends the
// layout service (makeService, in the page's one worker, _graph_worker.js, or on the view's
// own thread where no worker runs) and what comes back. One interface per request and
// response, and a union of each side, as Model Explorer's worker_events.ts types its worker;
// a message is told apart by its `drop` field (no `type` field travels: the wire format is
// what it was).

import type { GraphPayload } from "./_contract_types";
import type { GraphLayout } from "./_graph_layout.js";

/** The fields of a payload the layout reads (FIELDS in _graph_runner.js), sent once per graph. */
export type LayoutGraph = Pick<
  GraphPayload,
  "key" | "model" | "ids" | "kind" | "parent" | "name" | "type" | "ins" | "outs" | "tensors" | "edges" | "edge_tensor" | "rolled"
>;

/** Lay out view `view`'s graph with these calls open; answered by a LayoutResponse. */
export interface LayoutRequest {
  drop?: undefined;
  /** the asking view (one per GraphView of the page) */
  view: number;
  /** the view's request counter, echoed in the response */
  seq: number;
  /** the graph's key (GraphPayload.key): the service must hold that graph */
  key: string;
  /** trace node ids of the open calls (an Int32Array from a view: cloned as one block) */
  expanded: Int32Array | number[];
  /** the graph itself, the first time this key is sent (or after the worker failed) */
  graph?: LayoutGraph;
}

/** The view is gone: forget its graph and cached levels; no response. */
export interface DropRequest {
  drop: true;
  view: number;
}

/** Every message to the layout service. */
export type LayoutServiceRequest = LayoutRequest | DropRequest;

/** The layout of one LayoutRequest: its typed arrays are transferred, not copied. */
export interface LayoutResponse extends GraphLayout {
  /** per payload node, 1 when it has children (a copy of the prepared graph's) */
  hasKids: Uint8Array;
  /** the LayoutRequest's view and seq */
  view: number;
  seq: number;
  /** milliseconds the layout took in the service */
  ms: number;
}

/** Every message from the layout service (a DropRequest is not answered). */
export type LayoutServiceResponse = LayoutResponse;

/** The layout service: a request in, its response out (null for a DropRequest). */
export type LayoutService = (msg: LayoutServiceRequest) => LayoutServiceResponse | null;
