import assert from "node:assert/strict";
import { test } from "node:test";
import { MIN_SCALE } from "../src/_graphcore.js";
import { centerView, fitView, inSight, zoomView } from "../src/_panzoom.js";

const close = (a, b) => assert.ok(Math.abs(a - b) < 1e-9, `${a} != ${b}`);

test("a small graph is fitted centred, within the canvas", () => {
  const v = fitView(800, 500, 300, 200);
  close(v.x + (300 * v.k) / 2, 400); // centred across
  close(v.y + (200 * v.k) / 2, 250); // and down
  assert.ok(v.x >= 0 && v.x + 300 * v.k <= 800 && v.y >= 0 && v.y + 200 * v.k <= 500);
});

test("a graph taller than the canvas opens at a legible scale, at the top", () => {
  const v = fitView(800, 500, 300, 5000);
  assert.equal(v.k, MIN_SCALE);
  assert.equal(v.y, 20);
});

test("zooming keeps the point under the pointer where it is", () => {
  const view = { x: 13, y: -40, k: 0.9 };
  const v = zoomView(view, 1.25, 200, 150);
  // the drawing point under (200, 150) before and after
  close((200 - view.x) / view.k, (200 - v.x) / v.k);
  close((150 - view.y) / view.k, (150 - v.y) / v.k);
  close(v.k, 1.125);
  assert.equal(zoomView({ x: 0, y: 0, k: 7 }, 2, 0, 0).k, 8); // clamped
});

test("centring puts a box's middle in the canvas' middle, zoomed in to at least 1", () => {
  const p = { x: 500, y: 900, w: 80, h: 36 };
  const v = centerView({ x: 0, y: 0, k: 0.8 }, p, 600, 400);
  assert.equal(v.k, 1);
  close(v.x + (p.x + p.w / 2) * v.k, 300);
  close(v.y + (p.y + p.h / 2) * v.k, 200);
  assert.ok(inSight(v, p, 600, 400));
  assert.ok(!inSight({ x: 0, y: 0, k: 1 }, p, 600, 400)); // below the canvas
  assert.ok(!inSight({ x: 0, y: 0, k: 0.5 }, { x: 0, y: 0, w: 10, h: 10 }, 600, 400)); // too small to read
});
