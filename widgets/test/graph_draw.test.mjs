import assert from "node:assert/strict";
import { test } from "node:test";
import { boxSize, labelOf } from "../src/_graphcore.js";
import { drawState, edgesSvg, groupsSvg, heatLook, nodesSvg, subOf } from "../src/_graph_draw.js";
import { hiddenAncestors, matchesOf, selectedIndices } from "../src/_graph_find.js";
import { liftMarks } from "../src/_graph_marks.js";
import { tipHtml } from "../src/_graph_tip.js";
import { metricDefs } from "../src/_graph_toolbar.js";
import { uid } from "../src/_shared.js";
import { graph } from "./_graph_fixture.mjs";

/** @param {number[]} expandedIds */
const drawn = (expandedIds) => drawState(graph, expandedIds);
/** The first group of each match. @param {string} svg @param {RegExp} re */
const attrs = (svg, re) => [...svg.matchAll(re)].map((m) => m[1]);

test("boxes and frames: one <g> per drawn call, toggles where insides hide", () => {
  const { rolled, vis, layout } = drawn([1, 4]);
  const nodes = nodesSvg(graph, vis, layout, rolled);
  assert.deepEqual(attrs(nodes, /class="lk-node [^"]*" data-k="(\d+)"/g).map(Number), vis.boxes);
  assert.deepEqual(attrs(nodes, /class="lk-label"[^>]*>([^<]*)</g), ["x", "stem", "blocks.0-2 ×3", "head", "output"]);
  assert.match(nodes, /blocks\.0-2 ×3/); // the rolled block
  assert.equal((nodes.match(/rect class="lk-stack"/g) || []).length, 1);
  assert.deepEqual(attrs(nodes, /class="lk-toggle" data-k="(\d+)" data-act="expand"/g).map(Number), [2, 5]); // stem, blocks.0
  const groups = groupsSvg(graph, vis, layout, rolled);
  assert.deepEqual(attrs(groups, /class="lk-group[^"]*" data-k="(\d+)"/g).map(Number), vis.groups);
  assert.match(groups, /Net · Net/);
  assert.ok(!/lk-mark|lk-broken/.test(nodes + groups)); // no marks given
  for (const k of vis.boxes) assert.equal(layout.pos.get(k)?.w, boxSize(labelOf(graph, k, rolled), subOf(graph, k)).w);
  assert.equal(subOf(graph, 0), "2x3"); // an input: its shape
  assert.equal(subOf(graph, 10), "2x10"); // the output: its input's shape
});

test("each view's edges end in its own arrow marker", () => {
  const { vis, layout } = drawn([1, 4]);
  const [a, b] = [uid("lk-arrow"), uid("lk-arrow")];
  assert.notEqual(a, b);
  for (const id of [a, b]) {
    const svg = edgesSvg(layout, id);
    assert.deepEqual(attrs(svg, /<marker id="([^"]+)"/g), [id]);
    const refs = attrs(svg, /marker-end="url\(#([^)]+)\)"/g);
    assert.equal(refs.length, layout.edgeCount);
    assert.ok(refs.every((r) => r === id));
  }
  assert.ok(layout.edgeCount >= vis.boxes.length - 1);
});

test("marked boxes get an outline class and a badge counting their breaks", () => {
  const marks = { 6: ["print() in 'blocks.0'"], 30: ["branch in 'head'", "item() in 'head'"], 1: ["in forward"] };
  const { rolled, vis, layout } = drawn([1, 4]);
  const lifted = liftMarks(graph, vis.boxOf, marks);
  const nodes = nodesSvg(graph, vis, layout, rolled, lifted);
  assert.match(nodes, /class="lk-node lk-kind-m lk-broken-inside" data-k="5"/);
  assert.match(nodes, /class="lk-node lk-kind-m lk-broken" data-k="9"/);
  assert.deepEqual(attrs(nodes, /data-breaks="(\d+)"/g), ["1", "2"]);
  assert.match(nodes, /<title>1 graph break inside<\/title>/);
  assert.match(groupsSvg(graph, vis, layout, rolled, lifted), /class="lk-group lk-broken" data-k="1"[\s\S]*data-breaks="1"/);
});

test("tooltip: path, shapes, figures in their units, and the breaks with their text", () => {
  const { rolled } = drawn([1, 4]);
  const defs = metricDefs(graph.metrics);
  const values = { fwd_time: [0, 0, 0.0125], params: [0, 0, 224], activations: [0, 0, 1536] };
  const tip = tipHtml(graph, rolled, 2, values, defs, { own: ['x.item() at "m.py:3"'], inside: [] });
  assert.match(tip, /<b>stem<\/b> <span class="lk-tip-k">Conv2d · module/);
  assert.match(tip, /in:<\/span> 2x3 float32/);
  assert.match(tip, /forward time:<\/span> 12.5 ms/);
  assert.match(tip, /parameters:<\/span> 224/);
  assert.match(tip, /activation memory:<\/span> 1.5 KiB/);
  assert.match(tip, /graph break here:[\s\S]*x.item\(\) at &quot;m.py:3&quot;/);
  const rolledTip = tipHtml(graph, rolled, 5, {}, defs, { own: [], inside: ["a", "b"] });
  assert.match(rolledTip, /<b>blocks.0-2<\/b> <b>×3<\/b>/);
  assert.match(rolledTip, /3 identical calls; figures per call \(mean\), then the ×3 total/);
  assert.match(rolledTip, /2 graph breaks inside/);
  assert.ok(!/graph break/.test(tipHtml(graph, rolled, 9, {}, defs, undefined)));
});

test("search, selection and what to expand to reach a call", () => {
  assert.deepEqual(matchesOf(graph, "CONV"), [2, 3, 6]);
  assert.deepEqual(matchesOf(graph, ""), []);
  assert.deepEqual(selectedIndices(graph, "blocks.0", 5), [5]); // by trace id
  assert.deepEqual(selectedIndices(graph, "head", -1), [9]); // by module path
  assert.deepEqual(selectedIndices(graph, "nope", -1), []);
  assert.deepEqual(hiddenAncestors(graph, new Set([1]), 6), [5, 4]); // trace ids of b0, blocks
});

test("heatLook: a box's colour once per box, frames and columns by their hottest box", () => {
  // 0 root frame, 1 frame in it, boxes 2, 3 in frame 1, box 4 in the root frame
  const parent = [-1, 0, 1, 1, 0];
  const values = [0, 0, 5, 9, 0];
  let colored = 0;
  const scale = {
    color: (/** @type {number} */ v) => {
      colored++;
      return v > 0 ? `heat${v}` : "neutral";
    },
  };
  const boxes = [2, 3, 4];
  const look = heatLook(
    "fwd",
    values,
    scale,
    () => ({ parent, boxes }),
    (fill) => `ink-on-${fill}`,
    "neutral",
  );
  assert.equal(look.fillOf(2), "heat5");
  assert.equal(look.fillOf(2), "heat5");
  assert.equal(colored, 1); // worked out when first painted, then kept
  assert.equal(look.fillOf(4), null); // nothing recorded: the theme's own colour
  assert.equal(look.inkOf(3), "ink-on-heat9");
  assert.equal(look.inkOf(4), null);
  assert.equal(look.frameFillOf(1), "heat9"); // its hottest box
  assert.equal(look.frameFillOf(0), "heat9");
  assert.equal(look.spanFillOf([1, 4]), "heat4.5"); // a column of frame 1 (9) and box 4 (0): the mean
  assert.equal(look.spanFillOf([1, 3]), "heat9");
  assert.equal(look.spanFillOf([4]), null);
});
