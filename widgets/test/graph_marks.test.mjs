import assert from "node:assert/strict";
import { test } from "node:test";
import { expandedIndices, visibleNodes } from "../src/_graphcore.js";
import { liftMarks, markCount, markSummary } from "../src/_graph_marks.js";
import { graph } from "./_graph_fixture.mjs";

// trace ids: 6 is the conv inside blocks.0 (payload 6), 30 is head (payload 9), 2 is stem
const marks = { 6: ["print() in module 'blocks.0'"], 30: ["a branch in 'head'"], 2: ["x.item() in 'stem'"] };

/** @param {number[]} expandedIds */
const lifted = (expandedIds) => liftMarks(graph, visibleNodes(graph, expandedIndices(graph, expandedIds)).boxOf, marks);
/** @param {Map<number, import("../src/_graph_marks.js").Mark>} m */
const plain = (m) => Object.fromEntries([...m].map(([k, v]) => [k, { own: v.own.length, inside: v.inside.length }]));
/** The marks of drawn box k, which must have some. @param {Map<number, import("../src/_graph_marks.js").Mark>} m @param {number} k */
const marksOf = (m, k) => {
  const got = m.get(k);
  assert.ok(got, `no marks on box ${k}`);
  return got;
};

test("a drawn call shows its own mark; a hidden one shows on the box that holds it", () => {
  // Net and blocks expanded: blocks.0 (5) is a box, its conv (6) is hidden inside it
  assert.deepEqual(plain(lifted([1, 4])), { 5: { own: 0, inside: 1 }, 9: { own: 1, inside: 0 }, 2: { own: 1, inside: 0 } });
});

test("expanding moves the mark down to the call itself", () => {
  const m = lifted([1, 4, 5]); // blocks.0 open: its conv is drawn
  assert.deepEqual(plain(m), { 6: { own: 1, inside: 0 }, 9: { own: 1, inside: 0 }, 2: { own: 1, inside: 0 } });
  assert.deepEqual(marksOf(m, 6).own, marks[6]);
});

test("everything collapsed: all marks inside the model's box, counted", () => {
  const m = lifted([]);
  assert.deepEqual([...m.keys()], [1]);
  assert.equal(markCount(marksOf(m, 1)), 3);
  assert.equal(markSummary(marksOf(m, 1)), "3 graph breaks inside");
  assert.deepEqual(marksOf(m, 1).inside.sort(), Object.values(marks).flat().sort());
});

test("a mark on an expanded call stays on its frame; ids not in the payload are skipped", () => {
  const m = liftMarks(graph, visibleNodes(graph, expandedIndices(graph, [1, 4])).boxOf, { 1: ["in forward"], 999: ["gone"] });
  assert.deepEqual(plain(m), { 1: { own: 1, inside: 0 } });
});

test("summaries say own and inside breaks apart", () => {
  assert.equal(markSummary({ own: ["a"], inside: [] }), "1 graph break");
  assert.equal(markSummary({ own: ["a", "b"], inside: ["c"] }), "2 graph breaks, 1 inside");
  assert.equal(markSummary({ own: [], inside: ["c"] }), "1 graph break inside");
});
