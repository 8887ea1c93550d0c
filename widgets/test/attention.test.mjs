import assert from "node:assert/strict";
import { test } from "node:test";
import { edgeWeight, layout, nodeHops, weightColor } from "../src/attention.js";

// node 0 <- {0 (self), 1, 2}; node 1 <- {1, 3}; node 2 <- {2, 3}
const VIEW = {
  node: 0,
  hops: 2,
  nodes: [0, 1, 2, 3],
  labels: [0, 1, 1, 0],
  heads: [2, 2],
  edges: [
    { src: 0, dst: 0, hop: 1, layer: 1, weights: [0.2, 0.4], mean: 0.3 },
    { src: 1, dst: 0, hop: 1, layer: 1, weights: [0.5, 0.1], mean: 0.3 },
    { src: 2, dst: 0, hop: 1, layer: 1, weights: [0.3, 0.5], mean: 0.4 },
    { src: 3, dst: 1, hop: 2, layer: 0, weights: [1, 1], mean: 1 },
    { src: 3, dst: 2, hop: 2, layer: 0, weights: [1, 1], mean: 1 },
  ],
};

test("edgeWeight picks a head or the mean", () => {
  assert.equal(edgeWeight(VIEW.edges[1], 0), 0.5);
  assert.equal(edgeWeight(VIEW.edges[1], 1), 0.1);
  assert.equal(edgeWeight(VIEW.edges[1], -1), 0.3);
  assert.equal(edgeWeight(VIEW.edges[1], 7), 0.3);
});

test("nodeHops assigns the first hop a node is reached at", () => {
  assert.deepEqual(
    [...nodeHops(VIEW).entries()],
    [
      [0, 0],
      [1, 1],
      [2, 1],
      [3, 2],
    ],
  );
});

test("layout puts hop k on ring k", () => {
  const pos = layout(VIEW, 100);
  assert.deepEqual([pos.get(0).x, pos.get(0).y], [0, 0]);
  for (const [id, ring] of [
    [1, 1],
    [2, 1],
    [3, 2],
  ]) {
    const p = pos.get(id);
    assert.ok(Math.abs(Math.hypot(p.x, p.y) - 100 * ring) < 1e-9, `node ${id}`);
  }
});

test("weightColor darkens with weight and clamps", () => {
  assert.equal(weightColor(0), "rgb(255,235,220)");
  assert.equal(weightColor(1), "rgb(220,35,30)");
  assert.equal(weightColor(2), weightColor(1));
});
