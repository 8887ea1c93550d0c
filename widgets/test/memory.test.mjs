// Pure parts of the memory timeline: the spans where a selected module ran, what memory
// did meanwhile, and the drawing of a state (scene -> SVG and HTML text, no DOM).
import assert from "node:assert/strict";
import { test } from "node:test";

import { fmtBytes } from "../src/_shared.js";
import {
  chartSvg,
  legendHtml,
  liveHtml,
  moduleSpans,
  sampleAt,
  scene,
  selectionHtml,
  timeAt,
  tipHtml,
  whileRunning,
} from "../src/memory.js";

// samples as labkit records them: the module running at each (nested paths, "" between)
const modules = ["", "stem", "blocks.0", "blocks.0.conv1", "blocks.0", "blocks.1", "blocks.10", "head", "blocks.0.bn1", ""];
const times = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
const totals = [10, 20, 30, 45, 40, 50, 60, 55, 70, 65];

test("a module's spans include the modules inside it, not its namesakes", () => {
  assert.deepEqual(moduleSpans(modules, "blocks.0"), [
    [2, 4],
    [8, 8],
  ]);
  assert.deepEqual(moduleSpans(modules, "blocks.1"), [[5, 5]]); // not blocks.10
  assert.deepEqual(moduleSpans(modules, "head"), [[7, 7]]);
  assert.deepEqual(moduleSpans(modules, "nowhere"), []);
  assert.deepEqual(moduleSpans(modules, null), []);
  assert.deepEqual(moduleSpans(modules, ""), []); // the root is not a selection
});

test("while it ran: time up to the next sample, bytes before, at its last sample, most", () => {
  const ran = whileRunning(times, totals, moduleSpans(modules, "blocks.0"));
  // spans [2,4] -> times 2..5 (3 s) and [8,8] -> 8..9 (1 s)
  assert.deepEqual(ran, { spans: 2, time: 4, start: 20, end: 70, most: 70 });
  assert.equal(whileRunning(times, totals, []), null);
  // a span at the very end lasts until the last sample
  assert.deepEqual(whileRunning(times, totals, [[9, 9]]), { spans: 1, time: 0, start: 70, end: 65, most: 65 });
});

// a recording of six samples, two categories: totals 10, 20, 35, 25, 10, 30 (the peak at 2)
const S = {
  time: [0, 1, 2, 3, 4, 5],
  phase: ["forward", "forward", "forward", "backward", "backward", "optimizer"],
  module: ["", "a", "a.b", "a", "", ""],
  categories: ["activations", "gradients"],
  bytes: [
    [10, 20, 30, 20, 10, 10],
    [0, 0, 5, 5, 0, 20],
  ],
  colors: ["#4e79a7", "#f28e2b"],
  largest: [
    { bytes: 30, category: "activations", module: "a.b", op: "mm", phase: "forward", start: 1, end: 3, site: "" },
    { bytes: 20, category: "gradients", module: "", op: "", phase: "optimizer", start: 4.5, end: null, site: "" },
  ],
  peak_where: "",
};
/** @param {Partial<import("../src/memory.js").MemoryState>} over */
const stateOf = (over) => ({ zoom: null, selected: null, width: 760, height: 360, ...over });
/** @param {string} text @param {string} cls */
const count = (text, cls) => text.split(`class="${cls}"`).length - 1;

test("the scene: the whole step, the peak, the byte axis from what is shown", () => {
  const whole = scene(S, stateOf({}));
  assert.deepEqual([whole.t0, whole.t1, whole.ymax, whole.peak.index, whole.peak.total], [0, 5, 35, 2, 35]);
  assert.equal(whole.mod, "a.b"); // no peak_where: the module at the peak sample
  assert.equal(whole.H, 320); // the height trait less the legend's 40
  // zoomed into 3.5..5: samples 4 and 5 are inside, sample 3 steps into view
  const zoomed = scene(S, stateOf({ zoom: [3.5, 5] }));
  assert.equal(zoomed.ymax, 30);
  assert.equal(sampleAt(whole, S, whole.X(2.5)), 2);
  assert.ok(Math.abs(timeAt(whole, whole.X(2.5)) - 2.5) < 1e-9);
});

test("the chart: one area per category, one band per phase run, the peak only when in range", () => {
  const svg = chartSvg(scene(S, stateOf({ selected: "a" })), S, "clip-1");
  assert.equal(count(svg, "lk-area"), 2);
  assert.equal(count(svg, "lk-phase"), 3);
  assert.equal(count(svg, "lk-sel-span"), 1); // samples 1..3 ran inside "a"
  assert.equal(count(svg, "lk-peak"), 1);
  assert.match(svg, /clip-path="url\(#clip-1\)"/);
  const late = chartSvg(scene(S, stateOf({ zoom: [3.5, 5] })), S, "clip-1");
  assert.equal(count(late, "lk-peak"), 0);
  assert.equal(count(late, "lk-sel-span"), 0);
});

test("legend, selection line, live storages and the tooltip say the figures of the samples", () => {
  const c = scene(S, stateOf({ selected: "a" }));
  assert.match(legendHtml(c, S), new RegExp(`peak ${fmtBytes(35)} at a\\.b \\(forward\\)`));
  // "a" ran over samples 1..3: 1 s to 4 s; before it 10 B, at its last sample 25 B, most 35 B
  const sel = selectionHtml(c, S, "a");
  assert.match(sel, /ran in 1 span, 3 s in all/);
  assert.ok(sel.includes(`live bytes ${fmtBytes(10)} before it, ${fmtBytes(25)} at its last sample, most ${fmtBytes(35)}`), sel);
  assert.match(selectionHtml(scene(S, stateOf({ selected: "zz" })), S, "zz"), /no memory sample was taken while it ran/);
  assert.equal(selectionHtml(c, S, null), "");
  // at the peak (t = 2) the first storage is live; in 3.5..5 only the second
  const atPeak = liveHtml(c, S, false);
  assert.match(atPeak, /at the peak/);
  assert.ok(atPeak.includes("a.b mm") && !atPeak.includes("gradients"), atPeak);
  const late = liveHtml(scene(S, stateOf({ zoom: [3.5, 5] })), S, true);
  assert.ok(late.includes("gradients") && !late.includes("a.b mm"), late);
  assert.match(tipHtml(S, 2), new RegExp(`total: ${fmtBytes(35)}`));
});
