import assert from "node:assert/strict";
import { test } from "node:test";
import { edgeWeight, infoText, layout, nodeHops, scene, weightColor } from "../src/attention.js";

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
  /** @param {number} id */
  const at = (id) => {
    const p = pos.get(id);
    assert.ok(p, `node ${id} placed`);
    return p;
  };
  assert.deepEqual([at(0).x, at(0).y], [0, 0]);
  for (const [id, ring] of [
    [1, 1],
    [2, 1],
    [3, 2],
  ]) {
    const p = at(id);
    assert.ok(Math.abs(Math.hypot(p.x, p.y) - 100 * ring) < 1e-9, `node ${id}`);
  }
});

test("weightColor darkens with weight and clamps", () => {
  assert.equal(weightColor(0), "rgb(255,235,220)");
  assert.equal(weightColor(1), "rgb(220,35,30)");
  assert.equal(weightColor(2), weightColor(1));
});

test("the scene: every edge drawn, far hops first, the self-loop a circle, sizes from the largest weight", () => {
  const sc = scene(VIEW, -1, 400);
  assert.equal(sc.edges.length, VIEW.edges.length);
  assert.deepEqual(
    sc.edges.map((e) => e.attrs["data-hop"]),
    [2, 2, 1, 1, 1],
  );
  assert.deepEqual(
    sc.edges.map((e) => e.tag),
    ["line", "line", "circle", "line", "line"],
  );
  assert.equal(sc.maxW, 1); // the mean of the hop-2 edges
  const darkest = sc.edges.find((e) => e.attrs["data-weight"] === (1).toFixed(6));
  assert.equal(darkest?.attrs.stroke, weightColor(1));
  // head 1: its own coefficients, relative to its largest (1)
  assert.equal(scene(VIEW, 1, 400).edges[3].attrs["data-weight"], (0.1).toFixed(6));
  assert.deepEqual(
    sc.nodes.map((n) => [n.id, n.picked]),
    [
      [0, true],
      [1, false],
      [2, false],
      [3, false],
    ],
  );
  assert.ok(sc.nodes[0].r > sc.nodes[1].r); // the picked node is larger
});

test("the info line: incoming edges, nodes and hops, each head's sum into the picked node", () => {
  // hop-1 weights per head: 0.2 + 0.5 + 0.3 and 0.4 + 0.1 + 0.5
  assert.equal(infoText(VIEW, 1), "node 0: 3 incoming edges, 4 nodes in 2 hops; head sums 1.000 / 1.000; darkest edge 1.000");
});
