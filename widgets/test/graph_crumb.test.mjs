// The instance rule of rolled blocks: a later call of a rolled block selects the rolled
// box and says which call it is; tooltips and breadcrumbs give one call's figures.
import { test } from "node:test";
import assert from "node:assert/strict";
import { crumbHtml, crumbOf, instanceOf, instanceText, rolledPath } from "../src/_graph_crumb.js";
import { findAll, matchesOf, selectedIndices } from "../src/_graph_find.js";
import { rolledInfo } from "../src/_graphcore.js";
import { tipHtml } from "../src/_graph_tip.js";
import { metricDefs } from "../src/_graph_toolbar.js";
import { graph } from "./_graph_fixture.mjs";

const rolled = rolledInfo(graph);
const defs = metricDefs(graph.metrics);

test("a later call of a rolled block is the rolled box, and says which call", () => {
  const inst = instanceOf(graph, "blocks.2");
  assert.deepEqual(inst, { e: 2, k: 5, levels: [{ block: "blocks.0-2", i: 2, n: 3, head: 5 }] });
  assert.equal(instanceText("blocks.2", inst), "blocks.2 - instance 3 of 3");
  assert.equal(instanceText("blocks.0", instanceOf(graph, "blocks.0")), "blocks.0 - instance 1 of 3");
  assert.equal(instanceOf(graph, "stem"), null); // not in a rolled block
  assert.equal(instanceOf(graph, "blocks.7"), null);
  // the selection rule: drawn calls by path first, then the box of a rolled-away call
  assert.deepEqual(selectedIndices(graph, "blocks.1", -1), [5]);
  assert.deepEqual(selectedIndices(graph, "stem", -1), [2]);
  assert.deepEqual(selectedIndices(graph, "nothing", -1), []);
});

test("nested rolled blocks: one level per block, outermost first", () => {
  const g = {
    ...graph,
    rolled: [
      [5, 3, "blocks.0-2"],
      [6, 2, "blocks.0.heads.0-1"],
    ],
    instances: { name: ["blocks.2.heads.1"], node: [6], where: [[0, 2, 1, 1]] },
  };
  const inst = instanceOf(g, "blocks.2.heads.1");
  assert.equal(instanceText("blocks.2.heads.1", inst), "blocks.2.heads.1 - instance 3 of 3, 2 of 2 in blocks.0.heads.0-1");
});

test("a path called twice: the nth entry", () => {
  const g = {
    ...graph,
    instances: {
      name: ["a", "a"],
      node: [5, 6],
      where: [
        [0, 0],
        [0, 1],
      ],
    },
  };
  assert.equal(instanceOf(g, "a", 1)?.k, 6);
  assert.equal(instanceOf(g, "a", 2), null);
});

test("a box in a rolled block: the range in its path and the per-call mean", () => {
  assert.deepEqual(rolledPath(graph, rolled, 5), { path: "blocks.0-2", times: 3 });
  assert.deepEqual(rolledPath(graph, rolled, 7), { path: "relu", times: 3 }); // an op inside
  assert.deepEqual(rolledPath(graph, rolled, 2), { path: "stem", times: 1 });
  const values = { params: [0, 0, 0, 0, 0, 600], fwd_time: [0, 0, 0, 0, 0, 0.009] };
  const tip = tipHtml(graph, rolled, 5, values, defs, undefined);
  assert.match(tip, /parameters:<\/span> 200 <span class="lk-tip-k">\(×3 total 600\)/);
  assert.match(tip, /forward time:<\/span> 3(\.0+)? ms <span class="lk-tip-k">\(×3 total 9(\.0+)? ms\)/);
});

test("breadcrumb: frames around, the instance, and that call's own figures", () => {
  const values = { params: [0, 0, 0, 0, 0, 600] };
  const inst = { params: [100, 250, 250] };
  const c = crumbOf(graph, rolled, "blocks.1", 5, values, inst, defs);
  assert.ok(c);
  assert.deepEqual(c.trail, ["Net", "blocks"]);
  assert.equal(c.text, "blocks.1 - instance 2 of 3");
  assert.deepEqual(c.figures, ["parameters 250"]);
  assert.equal(c.block, "blocks.0-2");
  assert.match(
    crumbHtml(c),
    /Net ›<\/span> <span class="lk-crumb-up lk-crumb-part">blocks ›<\/span> <b class="lk-crumb-sel lk-crumb-part">blocks.1 - instance 2 of 3<\/b>/,
  );
  const plain = crumbOf(graph, rolled, "stem", 2, { params: [0, 0, 224] }, {}, defs);
  assert.ok(plain);
  assert.equal(plain.text, "stem");
  assert.deepEqual(plain.figures, ["parameters 224"]);
  assert.equal(plain.block, "");
  assert.equal(crumbOf(graph, rolled, null, 2, {}, {}, defs), null);
});

test("search finds calls inside rolled blocks by path; drawn matches stay as they were", () => {
  assert.deepEqual(findAll(graph, "blocks.2"), [{ k: 5, name: "blocks.2" }]);
  assert.deepEqual(matchesOf(graph, "blocks.2"), []); // drawn matches only
  assert.deepEqual(
    findAll(graph, "blocks.0").map((m) => m.name),
    ["blocks.0"],
  ); // drawn once
});

test("the breadcrumb wraps between figures, never inside one", () => {
  const html = crumbHtml({
    trail: ["Net"],
    text: "blocks.4.mlp - instance 5 of 6",
    figures: ["parameters 2.13K", "fwd 1.20 ms"],
    block: "",
    inst: null,
  });
  const parts = [...html.matchAll(/<(span|b) class="[^"]*lk-crumb-part[^"]*">([^<]*)</g)].map((m) => m[2]);
  assert.deepEqual(parts, ["Net ›", "blocks.4.mlp - instance 5 of 6", "parameters 2.13K", "fwd 1.20 ms"]);
});
