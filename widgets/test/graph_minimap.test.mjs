// The minimap paints coverage: a dense graph is shades of its ink, never a solid block.
import { test } from "node:test";
import assert from "node:assert/strict";
import { coverImage, coverRect, DENSE, rgbOf } from "../src/_minimap.js";

const W = 160;
const H = 110;
const ctx = {
  createImageData: (/** @type {number} */ w, /** @type {number} */ h) => ({ width: w, height: h, data: new Uint8ClampedArray(4 * w * h) }),
};

test("a pixel's coverage is the part of it the rectangles cover", () => {
  const cover = new Float32Array(W * H);
  coverRect(cover, 10.5, 20, 1, 1); // half of pixel 10, half of pixel 11
  assert.equal(cover[20 * W + 10], 0.5);
  assert.equal(cover[20 * W + 11], 0.5);
  assert.equal(cover[21 * W + 10], 0);
  coverRect(cover, -50, -50, 10, 10); // off the map: nothing, no error
  coverRect(cover, W - 1, H - 1, 40, 40); // clipped at the corner
  assert.equal(cover[(H - 1) * W + W - 1], 1);
});

test("100,000 overlapping boxes: no pixel more than DENSE opaque (the map never paints black)", () => {
  const cover = new Float32Array(W * H);
  for (let i = 0; i < 100000; i++) coverRect(cover, (i * 7) % (W - 3), (i * 13) % H, 3, 1);
  const img = coverImage(ctx, cover, [20, 20, 20]);
  let max = 0;
  let inked = 0;
  for (let i = 3; i < img.data.length; i += 4) {
    max = Math.max(max, img.data[i]);
    if (img.data[i]) inked++;
  }
  assert.equal(max, Math.round(255 * DENSE));
  assert.ok(DENSE < 0.7);
  assert.ok(inked > (W * H) / 2, `${inked} pixels inked`);
});

test("a sparse map keeps its shape: lone boxes lighter than dense places", () => {
  const cover = new Float32Array(W * H);
  coverRect(cover, 5, 5, 0.25, 1);
  for (let i = 0; i < 10; i++) coverRect(cover, 50, 50, 1, 1);
  const img = coverImage(ctx, cover, [0, 0, 0]);
  assert.ok(img.data[4 * (5 * W + 5) + 3] < img.data[4 * (50 * W + 50) + 3]);
  assert.equal(img.data[4 * (0 * W + 0) + 3], 0);
});

test("the canvas's normalised colours read as rgb", () => {
  assert.deepEqual(rgbOf("#1a2b3c"), [26, 43, 60]);
  assert.deepEqual(rgbOf("rgba(10, 20, 30, 0.5)"), [10, 20, 30]);
  assert.deepEqual(rgbOf("nonsense"), [136, 136, 136]);
});
