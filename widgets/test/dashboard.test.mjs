import assert from "node:assert/strict";
import { test } from "node:test";
import { pathOf, yRange } from "../src/dashboard.js";

test("yRange pads and ignores NaN", () => {
  assert.deepEqual(yRange([]), [0, 1]);
  assert.deepEqual(yRange([{ y: [2, NaN, 2] }]), [1.5, 2.5]);
  const [lo, hi] = yRange([{ y: [0, 10] }]);
  assert.ok(lo < 0 && hi > 10);
});

test("pathOf breaks the line at NaN", () => {
  const d = pathOf([0, 1, 2, 3], [0, NaN, 1, 1], [0, 3], [0, 1], 30, 10);
  assert.equal(d, "M0.0,10.0M20.0,0.0L30.0,0.0");
});
