import assert from "node:assert/strict";
import { test } from "node:test";
import { contrast, fmtBytes, fmtCount, fmtPercent, fmtRatio, fmtTime, inkOn, rgbOf } from "../src/_shared.js";

test("fmtBytes uses binary units", () => {
  assert.equal(fmtBytes(0), "0 B");
  assert.equal(fmtBytes(512), "512 B");
  assert.equal(fmtBytes(1536), "1.5 KiB");
  assert.equal(fmtBytes(1024 ** 2 * 10.25), "10.3 MiB");
  assert.equal(fmtBytes(1024 ** 3 * 140), "140 GiB");
  assert.equal(fmtBytes(-2048), "-2 KiB");
});

test("fmtTime picks a readable unit", () => {
  assert.equal(fmtTime(0), "0 s");
  assert.equal(fmtTime(5e-9), "5 ns");
  assert.equal(fmtTime(12.5e-6), "12.5 us");
  assert.equal(fmtTime(0.0123), "12.3 ms");
  assert.equal(fmtTime(1.5), "1.5 s");
  assert.equal(fmtTime(125), "2 min 5 s");
  assert.equal(fmtTime(3 * 3600 + 120), "3 h 2 min");
});

test("fmtCount uses decimal suffixes", () => {
  assert.equal(fmtCount(7), "7");
  assert.equal(fmtCount(999), "999");
  assert.equal(fmtCount(1234567), "1.23M");
  assert.equal(fmtCount(2.5e12), "2.5T");
});

test("percent and ratio", () => {
  assert.equal(fmtPercent(0.1234), "12.3%");
  assert.equal(fmtPercent(1), "100%");
  assert.equal(fmtRatio(1.5), "1.50x");
});

test("non-numbers render as a dash", () => {
  for (const f of [fmtBytes, fmtTime, fmtCount, fmtPercent, fmtRatio]) {
    assert.equal(f(Number.NaN), "-");
    assert.equal(f(undefined), "-");
    assert.equal(f(Infinity), "-");
  }
});

test("WCAG contrast and the ink chosen for a fill", () => {
  // reference figures from the WCAG 2.x definition
  assert.equal(contrast([0, 0, 0], [255, 255, 255]), 21);
  assert.ok(Math.abs(contrast([118, 118, 118], [255, 255, 255]) - 4.54) < 0.01);
  assert.deepEqual(rgbOf("rgb(1, 2, 3)"), [1, 2, 3]);
  assert.deepEqual(rgbOf("#ff8000"), [255, 128, 0]);
  let worst = 21;
  for (let v = 0; v < 256; v += 5) {
    for (const c of [
      [v, v, v],
      [255, v, 0],
      [v, 52, 4],
      [0, v, 255 - v],
    ]) {
      const ink = inkOn(`rgb(${c.join(",")})`) === "#000" ? [0, 0, 0] : [255, 255, 255];
      worst = Math.min(worst, contrast(c, ink));
    }
  }
  assert.ok(worst >= 4.5, `worst ink contrast ${worst}`);
});
