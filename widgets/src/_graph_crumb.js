// Rolled blocks told truthfully: which instance of a rolled block a module path is, the
// rolled path and multiplicity of a drawn box, and the breadcrumb shown for a selection.
// Pure (no DOM); unit-tested by widgets/test/graph_crumb.test.mjs.
//
// graph.instances (labkit/views/_payload.py) lists every module call inside a rolled
// block: its path, the payload index of the box that shows it, and flat
// [rolled entry, call] pairs (outermost block first; graph.rolled[entry] = [head, n, name]).
import { labelOf } from "./_graphcore.js";
import { esc } from "./_ui.js";

/** @typedef {import("./_graphcore.js").Rolled} Rolled */
/** @typedef {import("./_contract_types").GraphPayload} GraphPayload */
/** @typedef {import("./_graph_toolbar.js").MetricDef} MetricDef */
/**
 * @typedef {object} InstanceLevel one rolled block around a call
 * @property {string} block the block's name
 * @property {number} i which call of the block it is (0-based)
 * @property {number} n the block's calls
 * @property {number} head payload index of the block's head box
 */
/**
 * @typedef {object} Instance a module call inside rolled blocks
 * @property {number} e entry index in graph.instances (for instance_metrics)
 * @property {number} k payload index of the box that shows it
 * @property {InstanceLevel[]} levels outermost block first
 */
/**
 * @typedef {object} Crumb what the breadcrumb says for a selection
 * @property {string[]} trail labels of the drawn frames around it, outermost first
 * @property {string} text the selected path (with its instance)
 * @property {string[]} figures that call's own figures, "label value" each
 * @property {string} block the rolled block to offer to unroll, or ""
 * @property {Instance | null} inst
 */

/**
 * The instance a module path is, or null when it is in no rolled block.
 * @param {{instances?: GraphPayload["instances"], rolled: GraphPayload["rolled"]}} graph
 * @param {string | null | undefined} name
 * @param {number} nth which call of that path (a path called twice has two entries), default 0
 * @returns {Instance | null}
 */
export function instanceOf(graph, name, nth = 0) {
  const inst = graph.instances;
  if (!inst || !name) return null;
  let seen = 0;
  for (let e = 0; e < inst.name.length; e++) {
    if (inst.name[e] !== name) continue;
    if (seen++ < nth) continue;
    const w = inst.where[e];
    const levels = [];
    for (let j = 0; j < w.length; j += 2) {
      const [head, n, block] = graph.rolled[w[j]]; // [node, calls, block name]
      levels.push({ block: String(block), i: w[j + 1], n: Number(n), head: Number(head) });
    }
    return { e, k: inst.node[e], levels };
  }
  return null;
}

/**
 * "blocks.4.mlp - instance 5 of 6" (nested blocks add ", 3 of 4 in heads.0-3").
 * @param {string} name @param {Instance | null} inst
 */
export function instanceText(name, inst) {
  if (!inst?.levels.length) return name;
  const [first, ...inner] = inst.levels;
  let text = `${name} - instance ${first.i + 1} of ${first.n}`;
  for (const lv of inner) text += `, ${lv.i + 1} of ${lv.n} in ${lv.block}`;
  return text;
}

/**
 * A drawn box's rolled form: how many calls its figures sum (the product of the rolled
 * blocks around it, itself included) and its path with each block's range written in
 * ("blocks.0-5.mlp"). times is 1 outside rolled blocks.
 * @param {GraphPayload} graph @param {Rolled} rolled @param {number} k
 * @returns {{path: string, times: number}}
 */
export function rolledPath(graph, rolled, k) {
  let path = graph.name[k];
  let times = 1;
  for (let p = k; p >= 0; p = graph.parent[p]) {
    const count = rolled.count.get(p);
    if (count === undefined) continue;
    times *= count;
    const head = graph.name[p];
    const block = rolled.name.get(p) || head;
    if (path === head) path = block;
    else if (path.startsWith(`${head}.`)) path = block + path.slice(head.length);
  }
  return { path, times };
}

/**
 * The figures of one call as "label value" parts, zero figures left out.
 * @param {MetricDef[]} metrics @param {(key: string) => number} valueAt
 */
export function figureParts(metrics, valueAt) {
  const out = [];
  for (const { key, label, fmt } of metrics) {
    const v = valueAt(key);
    if (v) out.push(`${label} ${fmt(v)}`);
  }
  return out;
}

/**
 * What the breadcrumb says for a selection: the drawn frames around the selected box,
 * the selected path (with its instance) and that call's own figures.
 * @param {GraphPayload} graph
 * @param {Rolled} rolled
 * @param {string | null | undefined} sel
 * @param {number} k payload index of the selected box (selectedIndices' first hit), or -1
 * @param {Record<string, number[]>} values GraphView.metrics
 * @param {Record<string, number[]>} instValues GraphView.instance_metrics
 * @param {MetricDef[]} metrics
 * @returns {Crumb | null}
 */
export function crumbOf(graph, rolled, sel, k, values, instValues, metrics) {
  if (sel === null || sel === undefined || k < 0) return null;
  const trail = [];
  for (let p = graph.parent[k]; p >= 0; p = graph.parent[p]) trail.unshift(labelOf(graph, p, rolled));
  const inst = graph.kind[k] === "m" ? instanceOf(graph, sel) : null;
  let figures;
  if (inst) figures = figureParts(metrics, (key) => (instValues?.[key] || [])[inst.e]);
  else {
    const { times } = rolledPath(graph, rolled, k);
    figures = figureParts(metrics, (key) => (values?.[key] || [])[k] / times);
  }
  return { trail, text: instanceText(sel || labelOf(graph, k, rolled), inst), figures, block: inst ? inst.levels[0].block : "", inst };
}

/** The breadcrumb as HTML (the unroll button is added by the view). A narrow view wraps
 * it between its parts, never inside one: each frame, the selection and each figure is
 * an unbreakable piece (`lk-crumb-part`: white-space nowrap in _ui.js's stylesheet).
 * @param {Crumb | null} c */
export function crumbHtml(c) {
  if (!c) return "";
  const trail = c.trail.map((/** @type {string} */ t) => `<span class="lk-crumb-up lk-crumb-part">${esc(t)} ›</span> `).join("");
  const figs = c.figures.map((/** @type {string} */ f) => ` <span class="lk-crumb-fig lk-crumb-part">${esc(f)}</span>`).join(" ·");
  return `${trail}<b class="lk-crumb-sel lk-crumb-part">${esc(c.text)}</b>${figs}`;
}
