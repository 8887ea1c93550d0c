// Finding boxes in the GraphView's payload: search matches and the selected call(s).
// Pure, no DOM; unit-tested by widgets/test/graph_draw.test.mjs and graph_crumb.test.mjs.
import { instanceOf } from "./_graph_crumb.js";

/** @typedef {import("./_contract_types").GraphPayload} GraphPayload */

/**
 * Payload indices whose name or type contains q (case-insensitive), in payload order.
 * @param {GraphPayload} graph @param {string} q
 * @returns {number[]}
 */
export function matchesOf(graph, q) {
  return findAll(graph, q)
    .filter((m) => m.name === graph.name[m.k])
    .map((m) => m.k);
}

/**
 * Every match of q as {k, name}: drawn nodes by name or type, then calls inside rolled
 * blocks by path (name is the instance's path, k the box that shows it), in call order.
 * @param {GraphPayload} graph @param {string} q
 * @returns {{k: number, name: string}[]}
 */
export function findAll(graph, q) {
  if (!q) return [];
  // the last search's answer per payload: each relayout marks the matches again (a scan
  // of 100,000 names)
  const last = found.get(graph);
  if (last?.q === q) return last.out;
  const out = findNew(graph, q);
  found.set(graph, { q, out });
  return out;
}

/** @type {WeakMap<GraphPayload, {q: string, out: {k: number, name: string}[]}>} */
const found = new WeakMap();

/** findAll's answer, searched for. @param {GraphPayload} graph @param {string} q */
function findNew(graph, q) {
  q = q.toLowerCase();
  const out = [];
  const { name, type } = lowered(graph);
  for (let k = 0; k < graph.ids.length; k++) {
    if (name[k].includes(q) || type[k].includes(q)) out.push({ k, name: graph.name[k] });
  }
  const inst = graph.instances;
  if (inst) {
    const drawn = new Set(out.map((m) => m.name));
    for (let e = 0; e < inst.name.length; e++) {
      const name = inst.name[e];
      if (!drawn.has(name) && name.toLowerCase().includes(q)) out.push({ k: inst.node[e], name });
    }
  }
  return out;
}

/** @type {WeakMap<GraphPayload, {name: string[], type: string[]}>} */
const lower = new WeakMap(); // payload -> its names and types in lower case (once)

/** A payload's names and types in lower case, made once per payload. @param {GraphPayload} graph */
function lowered(graph) {
  let out = lower.get(graph);
  if (!out) {
    out = {
      name: graph.name.map((/** @type {string} */ x) => x.toLowerCase()),
      type: graph.type.map((/** @type {string} */ x) => x.toLowerCase()),
    };
    lower.set(graph, out);
  }
  return out;
}

/**
 * The payload indices a selection stands for: the call with trace id selId when its name
 * is sel, else every call of module sel (a path selected in the profile or in Python),
 * else the rolled box that shows sel when sel is a later instance of a rolled block.
 * @param {GraphPayload} graph @param {string} sel @param {number | null | undefined} selId
 * @returns {number[]}
 */
export function selectedIndices(graph, sel, selId) {
  for (let k = 0; k < graph.ids.length; k++) if (graph.ids[k] === selId && graph.name[k] === sel) return [k];
  const hits = [];
  for (let k = 0; k < graph.ids.length; k++) if (graph.kind[k] === "m" && graph.name[k] === sel) hits.push(k);
  if (hits.length) return hits;
  const inst = instanceOf(graph, sel);
  return inst ? [inst.k] : [];
}

/**
 * Payload ids of k's collapsed ancestors: what to expand so that k is drawn.
 * @param {GraphPayload} graph @param {Set<number>} expanded @param {number} k
 * @returns {number[]}
 */
export function hiddenAncestors(graph, expanded, k) {
  const need = [];
  for (let p = graph.parent[k]; p >= 0; p = graph.parent[p]) if (!expanded.has(p)) need.push(graph.ids[p]);
  return need;
}
