// Graph-break marks on the GraphView: which drawn box shows each mark. Pure, no DOM;
// unit-tested by widgets/test/graph_marks.test.mjs.
//
// The payload's `marks` is {trace node id: [text, ...]} (labkit/views/graph.py): one
// text per graph break in that module call. A mark shows on its own box while the call
// is drawn; while it is hidden (inside a collapsed call) it shows on the drawn box that
// holds it, as "N graph breaks inside", so expanding moves it to the right node.

import { indexOfIds } from "./_graphcore.js";

/**
 * @typedef {object} Mark the graph breaks a drawn box shows
 * @property {string[]} own breaks in this call
 * @property {string[]} inside breaks in calls hidden inside it
 */

/**
 * @param {{ids: number[]}} graph the graph payload (ids: trace id per payload index)
 * @param {ArrayLike<number>} boxOf per payload index, the index of the drawn box that holds it (visibleNodes)
 * @param {import("./_contract_types").GraphMarks | null | undefined} marks {trace node id: [text, ...]}
 * @returns {Map<number, Mark>} drawn box index -> its marks
 */
export function liftMarks(graph, boxOf, marks) {
  /** @type {Map<number, Mark>} */
  const out = new Map();
  const entries = Object.entries(marks || {});
  if (!entries.length) return out; // no id index made per layout (100,000 ids: ~10 ms)
  const index = indexOfIds(graph);
  for (const [id, texts] of entries) {
    const k = index.get(Number(id));
    if (k === undefined) continue; // not drawn at any expansion (graph.py maps rolled calls)
    const box = boxOf[k];
    let mark = out.get(box);
    if (!mark) {
      mark = { own: [], inside: [] };
      out.set(box, mark);
    }
    mark[box === k ? "own" : "inside"].push(...texts);
  }
  return out;
}

/** @param {number} n */
const breaks = (n) => `${n} graph break${n === 1 ? "" : "s"}`;

/** {own: [a], inside: [b, c]} -> "1 graph break, 2 inside" (the badge's title). @param {Mark} m */
export function markSummary(m) {
  const own = m.own.length;
  const inside = m.inside.length;
  if (!inside) return breaks(own);
  return own ? `${breaks(own)}, ${inside} inside` : `${breaks(inside)} inside`;
}

/** How many breaks a badge counts. @param {Mark} m */
export function markCount(m) {
  return m.own.length + m.inside.length;
}
