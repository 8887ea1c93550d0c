import assert from "node:assert/strict";
import { test } from "node:test";
import { detailAt, LEGIBLE_PX, OPEN_SCALE } from "../src/_graphcore.js";
import { centerView, fitView, inSight, openView, zoomView } from "../src/_panzoom.js";

/** @param {number} a @param {number} b */
const close = (a, b) => assert.ok(Math.abs(a - b) < 1e-9, `${a} != ${b}`);

test("a small graph is fitted centred, within the canvas", () => {
  for (const v of [fitView(800, 500, 300, 200), openView(800, 500, 300, 200)]) {
    close(v.x + (300 * v.k) / 2, 400); // centred across
    close(v.y + (200 * v.k) / 2, 250); // and down
    assert.ok(v.x >= 0 && v.x + 300 * v.k <= 800 && v.y >= 0 && v.y + 200 * v.k <= 500);
  }
});

test("a graph taller than the canvas opens with 11 px labels, at the top; Fit shows it whole", () => {
  const v = openView(800, 500, 300, 5000);
  assert.equal(v.k, OPEN_SCALE);
  assert.equal(11 * v.k >= 11, true);
  assert.equal(v.y, 20);
  const f = fitView(800, 500, 300, 5000);
  assert.ok(f.k < 0.1 && f.y >= 0 && f.y + 5000 * f.k <= 500 && f.x >= 0 && f.x + 300 * f.k <= 800, JSON.stringify(f));
});

test("a graph wider than the canvas (wrapped into columns) opens at its top left", () => {
  const v = openView(800, 500, 9000, 6000);
  assert.equal(v.k, OPEN_SCALE);
  assert.equal(v.x, 20);
  assert.equal(v.y, 20);
});

test("level of detail: type lines go first, then box text, as the scale drops", () => {
  assert.equal(detailAt(1), 0);
  assert.equal(detailAt(0.65), 1);
  assert.equal(detailAt(0.5), 2);
  assert.equal(detailAt(0.1), 2);
  // what is drawn is legible: 11 px labels and 9.5 px type lines never under LEGIBLE_PX
  for (let k = 0.05; k < 1.5; k += 0.01) {
    const lod = detailAt(k);
    if (lod < 2) assert.ok(11 * k >= LEGIBLE_PX, `labels at ${k}`);
    if (lod < 1) assert.ok(9.5 * k >= LEGIBLE_PX, `type lines at ${k}`);
  }
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
  // a frame taller than the canvas: its header (top) in sight, 20 px down
  const tall = centerView({ x: 0, y: 0, k: 1 }, { x: 100, y: 300, w: 200, h: 900 }, 600, 400);
  close(tall.y + 300 * tall.k, 20);
  close(tall.x + 200 * tall.k, 300); // still centred across
});
