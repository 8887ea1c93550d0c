import assert from "node:assert/strict";
import { test } from "node:test";
import { aligned, allPositive, dataRange, ema, overlaySeries, RUN_DASHES, withAlpha } from "../src/_series.js";

test("ema is TensorBoard's debiased smoothing", () => {
  // reference: TensorBoard's smoothing written out by hand for weight 0.5
  // last = 0.5*last + 0.5*y; smoothed = last / (1 - 0.5^n)
  const got = ema([1, 3, 2, NaN, 4], 0.5);
  const l1 = 0.5,
    l2 = 0.25 + 1.5,
    l3 = l2 * 0.5 + 1,
    l4 = l3 * 0.5 + 2;
  const want = [l1 / 0.5, l2 / 0.75, l3 / 0.875, NaN, l4 / 0.9375];
  for (const [i, v] of got.entries()) assert.ok(Number.isNaN(want[i]) ? Number.isNaN(v) : v !== null && Math.abs(v - want[i]) < 1e-12);
  assert.equal(
    ema([5, 5, 5], 0.9).every((v) => v !== null && Math.abs(v - 5) < 1e-12),
    true,
  ); // no pull to 0
  assert.deepEqual(ema([1, 2], 0), [1, 2]);
});

test("aligned puts curves on one x axis with gaps", () => {
  const series = { train_loss: { x: [1, 2, 3, 4], y: [4, 3, NaN, 1] }, val_loss: { x: [2, 4], y: [3.5, 1.5] } };
  assert.deepEqual(aligned(series, ["train_loss", "val_loss"]), [
    [1, 2, 3, 4],
    [4, 3, null, 1],
    [null, 3.5, null, 1.5],
  ]);
});

test("axis ranges come from the data, log only for positive values", () => {
  const [lo, hi] = dataRange([[0.3, 0.5, null, 0.7]]);
  assert.ok(Math.abs(lo - 0.28) < 1e-12 && Math.abs(hi - 0.72) < 1e-12); // a loss axis stays above 0
  assert.deepEqual(dataRange([[2, 2]]), [1.9, 2.1]);
  assert.equal(dataRange([[0.001, 1]])[0], 0); // padding stops at zero for a loss near 0
  assert.ok(dataRange([[-1, 1]])[0] < -1);
  assert.deepEqual(dataRange([[]]), [0, 1]);
  const [a, b] = dataRange([[0.01, 10]], true);
  assert.ok(a > 0 && a < 0.01 && b > 10);
  assert.equal(allPositive([[1, null, 2]]), true);
  assert.equal(allPositive([[1, 0]]), false);
});

test("earlier runs are overlaid only when asked, each run with its own dash, all dimmed", () => {
  // each curve as the payload has it (RunCurve): steps, seconds since the run started (null: unknown), values
  const earlier = {
    "lr-0.1": { train_loss: { x: [1, 2], t: [0.5, 1], y: [1, 0.5] }, val_loss: { x: [2], t: [1.2], y: [0.6] } },
    "lr-0.01": { train_loss: { x: [1, 2], t: [0.4, null], y: [0.9, 0.8] } },
  };
  assert.deepEqual(overlaySeries(earlier, false), { series: {}, dashes: {}, dim: [] });
  const on = overlaySeries(earlier, true);
  assert.deepEqual(on.dim, ["train_loss · lr-0.1", "val_loss · lr-0.1", "train_loss · lr-0.01"]);
  assert.deepEqual(on.series["val_loss · lr-0.1"], earlier["lr-0.1"].val_loss);
  assert.equal(on.dashes["train_loss · lr-0.1"], RUN_DASHES[0]);
  assert.deepEqual(on.dashes["train_loss · lr-0.01"], RUN_DASHES[1]);
});

test("withAlpha scales a theme colour's opacity (the dimmed ink of earlier runs)", () => {
  assert.equal(withAlpha("#ffffff", 0.5), "rgba(255, 255, 255, 0.5)");
  assert.equal(withAlpha("#000", 0.25), "rgba(0, 0, 0, 0.25)");
  assert.equal(withAlpha("rgba(0, 0, 0, 0.54)", 0.5), "rgba(0, 0, 0, 0.27)"); // JupyterLab Light's --jp-ui-font-color2
  assert.equal(withAlpha("rgb(255 255 255 / 54%)", 0.5), "rgba(255, 255, 255, 0.27)");
  assert.equal(withAlpha("var(--x)", 0.5), "var(--x)"); // not a colour it reads: unchanged
});
