// Finding boxes in the GraphView's payload: search matches and the selected call(s).
// Pure, no DOM; unit-tested by widgets/test/graph_draw.test.mjs.

/** Payload indices whose name or type contains q (case-insensitive), in payload order. */
export function matchesOf(graph, q) {
  if (!q) return [];
  q = q.toLowerCase();
  const out = [];
  for (let k = 0; k < graph.ids.length; k++) {
    if (graph.name[k].toLowerCase().includes(q) || graph.type[k].toLowerCase().includes(q)) out.push(k);
  }
  return out;
}

/**
 * The payload indices a selection stands for: the call with trace id selId when its name
 * is sel, else every call of module sel (a path selected in the profile or in Python).
 */
export function selectedIndices(graph, sel, selId) {
  for (let k = 0; k < graph.ids.length; k++) if (graph.ids[k] === selId && graph.name[k] === sel) return [k];
  const hits = [];
  for (let k = 0; k < graph.ids.length; k++) if (graph.kind[k] === "m" && graph.name[k] === sel) hits.push(k);
  return hits;
}

/** Payload ids of k's collapsed ancestors: what to expand so that k is drawn. */
export function hiddenAncestors(graph, expanded, k) {
  const need = [];
  for (let p = graph.parent[k]; p >= 0; p = graph.parent[p]) if (!expanded.has(p)) need.push(graph.ids[p]);
  return need;
}
