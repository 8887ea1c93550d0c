import assert from "node:assert/strict";
import { test } from "node:test";
import {
  BLUE,
  boxLook,
  diverging,
  legendText,
  pageOf,
  RED,
  revealIds,
  rowOf,
  scaleOf,
  shownAs,
  UNCHANGED,
  WHITE,
} from "../src/_diff_color.js";
import { boxTitle, headline, legendHtml, METRICS, metricButtons, PAGE, tableHtml } from "../src/_diff_draw.js";
import { drawState } from "../src/_graph_draw.js";
import { contrast, fmtBytes, rgbOf } from "../src/_shared.js";
import { graph } from "./_graph_fixture.mjs";

/** @typedef {import("../src/_contract_types").DiffRow} DiffRow */
/** @typedef {import("../src/_contract_types").DiffMetric} DiffMetric */

/** @param {number[]} c [r, g, b] */
const rgb = (c) => `rgb(${c.join(",")})`;
// "#fff" / "#000" (inkOn's answers) and "rgb(...)" as [r, g, b]
/** @param {string} c */
const rgbIn = (c) => (c.length === 4 ? rgbOf(`#${[...c.slice(1)].map((d) => d + d).join("")}`) : rgbOf(c));

test("diverging: white at 0, red for a rise, blue for a fall, full at the scale", () => {
  assert.equal(diverging(0, 5), rgb(WHITE));
  assert.equal(diverging(5, 5), rgb(RED));
  assert.equal(diverging(-9, 5), rgb(BLUE)); // beyond the scale: full
  assert.equal(diverging(3, 0), rgb(WHITE)); // nothing to scale by
  const mid = rgbOf(diverging(2.5, 5));
  assert.ok(WHITE[1] > mid[1] && mid[1] > RED[1]);
  // the same arithmetic as the Python picture's (labkit/views/diff.py: round(w + (e - w) t))
  assert.deepEqual(
    mid,
    WHITE.map((w, i) => Math.round(w + (RED[i] - w) * 0.5)),
  );
  // symmetric: a fall of the same size is as far from white as the rise
  const down = rgbOf(diverging(-2.5, 5));
  assert.deepEqual(
    down,
    WHITE.map((w, i) => Math.round(w + (BLUE[i] - w) * 0.5)),
  );
});

test("scale: the largest change among the drawn boxes, whatever its sign", () => {
  const delta = [0, 100, -7, 3, 0, -12];
  assert.equal(scaleOf(delta, [2, 3, 5]), 12);
  assert.equal(scaleOf(delta, [3]), 3);
  assert.equal(scaleOf(delta, [0, 4]), 0);
  assert.equal(scaleOf(delta, [1, 2]), 100); // a frame's sum is not drawn as a box unless collapsed
});

test("a box's look: its fill, legible ink, and hatching when within noise", () => {
  const change = { delta: [0, 4, -4, 1], noise: [1, 0, 0, 1] };
  const hot = boxLook(change, 1, 4);
  assert.equal(hot.fill, rgb(RED));
  assert.ok(contrast(rgbOf(hot.fill), rgbIn(hot.ink)) >= 4.5);
  const cold = boxLook(change, 2, 4);
  assert.equal(cold.fill, rgb(BLUE));
  assert.ok(contrast(rgbOf(cold.fill), rgbIn(cold.ink)) >= 4.5);
  assert.equal(boxLook(change, 3, 4).hatched, true);
  // no change: the theme's own box colours (Light and Dark follow), hatched when noisy
  assert.deepEqual(boxLook(change, 0, 4), { ...UNCHANGED, hatched: true, value: 0 });
  for (let v = -8; v <= 8; v += 0.5) {
    const look = boxLook({ delta: [v], noise: [0] }, 0, 8);
    if (v !== 0) assert.ok(contrast(rgbOf(look.fill), rgbIn(look.ink)) >= 4.5, `${v}: ${look.fill} ${look.ink}`);
  }
});

test("legend: the full fall and rise in the metric's words", () => {
  assert.deepEqual(legendText(2048, fmtBytes, "more", "less"), {
    low: `−${fmtBytes(2048)} less`,
    mid: "0",
    high: `+${fmtBytes(2048)} more`,
  });
  assert.deepEqual(legendText(0, fmtBytes, "more", "less"), { low: "0", mid: "no change drawn", high: "0" });
});

test("selecting a module inside closed frames opens its enclosing calls, then it is drawn", () => {
  const conv = 6; // blocks.0's conv2d: inside Net > blocks > blocks.0
  assert.deepEqual(revealIds(graph, conv), [1, 4, 5]);
  assert.deepEqual(revealIds(graph, 1), []);
  const closed = drawState(graph, [1]);
  const [boxes, frames] = [new Set(closed.vis.boxes), new Set(closed.vis.groups)];
  assert.ok(!boxes.has(conv) && frames.has(1));
  assert.equal(shownAs(graph, conv, boxes, frames), 4); // the collapsed blocks box shows it
  const open = drawState(graph, revealIds(graph, conv));
  assert.ok(open.vis.boxes.includes(conv));
  assert.equal(shownAs(graph, conv, new Set(open.vis.boxes), new Set(open.vis.groups)), conv);
  assert.ok(open.layout.pos.get(conv)); // it has a place to pan to
});

// rows and metrics as DiffView.changes has them
/** A ranked row of module blocks.i. @param {number} i @param {number} node @returns {DiffRow} */
const row = (i, node, noise = false) => ({
  module: `blocks.${i}`,
  type: "Linear",
  status: i % 2 ? "changed" : "same",
  match: "path",
  a: "1 ms",
  b: "2 ms",
  delta: `+${i} ms`,
  interval: "0.9-1.1x",
  share: "1%",
  value: i,
  noise,
  node,
});
/** @param {DiffRow[]} rows @param {Partial<DiffMetric>} [extra] @returns {DiffMetric} */
const metric = (rows, extra = {}) => ({
  headline: "time +12 ms",
  error: "",
  unit: "time",
  worse: "slower",
  better: "faster",
  delta: [0, 4, -4, 1, 0, 0],
  noise: [0, 0, 0, 1, 0, 0],
  rows,
  notes: [],
  ...extra,
});

test("table pages and row lookup", () => {
  const rows = Array.from({ length: 250 }, (_, i) => ({ ...row(i, i), module: `m${i}`, status: i === 3 ? "added" : "changed" }));
  const p = pageOf(rows, 2, 100);
  assert.equal(p.pages, 3);
  assert.equal(p.start, 200);
  assert.equal(p.rows.length, 50);
  assert.equal(pageOf(rows, 9, 100).start, 200); // past the end: the last page
  assert.equal(pageOf([], 0, 100).pages, 1);
  assert.equal(rowOf(rows, "m120"), 120);
  assert.equal(rowOf(rows, "m3"), -1); // an added module is not in the base graph
  assert.equal(rowOf(rows, null), -1);
});

// the drawing as text (_diff_draw.js): what the table, legend, titles and buttons say
test("the table: one page of rows, numbered on, each swatch the colour of its module's box", () => {
  const rows = Array.from({ length: 250 }, (_, i) => row(i, i === 101 ? 1 : -1, i === 102));
  const c = metric(rows);
  const t = tableHtml(c, ["a <b>", "other"], 1, 4);
  assert.equal(t.pages, 3);
  assert.equal(t.start, PAGE);
  assert.equal((t.html.match(/<tr data-row=/g) || []).length, PAGE);
  assert.match(t.html, /<tr data-row="100" data-node="-1" data-module="blocks\.100"><td>101<\/td>/);
  assert.match(t.html, /<th>a &lt;b&gt;<\/th>/); // the trace's name escaped
  // row 101 draws node 1 (a rise of 4 at scale 4): full red, as its box
  const swatch = t.html.match(/data-row="101".*?<span class="lk-swatch lk-diff-swatch" style="background:([^"]+)">/);
  assert.equal(swatch?.[1], boxLook(c, 1, 4).fill);
  assert.match(t.html, /data-row="102".*?<td class=" lk-diff-noise">\+102 ms \(noise\)<\/td>/);
  assert.match(t.html, /<td>path, changed<\/td>/); // how it matched, and what happened to it
  // a metric the traces cannot answer: its rows, no colours
  assert.doesNotMatch(tableHtml(metric(rows, { error: "no timings" }), ["a", "b"], 1, 4).html, /lk-swatch/);
  // past the last page: the last page
  assert.equal(tableHtml(c, ["a", "b"], 9, 4).start, 200);
});

test("legend, titles, headline and metric buttons say what is drawn", () => {
  const legend = legendHtml({ low: "4 ms <faster>", high: "4 ms slower" });
  assert.match(legend, /^<span class="lk-diff-low">4 ms &lt;faster&gt;<\/span><span class="lk-diff-bar"><\/span>/);
  assert.match(legend, /within noise \(95% interval spans 0\)/);
  assert.doesNotMatch(legend, /style=/); // the bar's colours are the stylesheet's
  const ms = (/** @type {number} */ v) => `${v} ms`;
  assert.equal(boxTitle("blocks.0", { value: 3, hatched: false }, ms), "blocks.0: +3 ms");
  assert.equal(boxTitle("", { value: -2, hatched: true }, ms), "(root): -2 ms (within noise)");
  assert.equal(headline(metric([]), "time"), "time +12 ms");
  assert.equal(headline(metric([], { error: "no memory recorded" }), "memory"), "memory: no memory recorded");
  const states = metricButtons({ time: metric([]), memory: metric([], { error: "no memory recorded" }) }, "time");
  assert.deepEqual(Object.keys(states), METRICS);
  assert.deepEqual(states.time, { disabled: false, title: "time +12 ms", pressed: true });
  assert.deepEqual(states.memory, { disabled: true, title: "no memory recorded", pressed: false });
  assert.deepEqual(states.flops, { disabled: false, title: "", pressed: false }); // not in this diff
});
