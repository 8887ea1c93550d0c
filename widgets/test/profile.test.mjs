import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { FORMATTERS, formatterOf } from "../src/_units.js";
import { chartHtml, chartMetric, isNoisy, shownColumns, sortBy, sortRows, tableHtml, topRows } from "../src/profile.js";

// The ProfileView payload of a real trace (ResCNN, 2x3x8x8 input, not timed), written by
// tests/views/graph_rules_fixture.py and checked current by tests/views/test_graph_rules.py.
const fixture = JSON.parse(readFileSync(new URL("./fixtures/profile_payload.json", import.meta.url), "utf8"));
const table = fixture.table;
/** @param {string} path */
const rowOf = (path) => {
  const row = table.rows.find((/** @type {(string | number)[]} */ r) => r[0] === path);
  assert.ok(row, path);
  return row;
};

test("every unit the Python contract names has a formatter, and no other", () => {
  assert.deepEqual(Object.keys(FORMATTERS).sort(), [...fixture.units].sort());
  assert.throws(() => formatterOf("furlongs"), /unknown unit "furlongs".*known: text, int, count, time, bytes/);
});

test("the table shows the payload's headers in its order; data-only columns are hidden", () => {
  const shown = shownColumns(table);
  assert.deepEqual(
    shown.map((c) => c.header),
    ["Module", "Type", "Calls", "Params", "Fwd", "Fwd IQR", "Fwd self", "Bwd", "Bwd IQR", "Bwd self", "FLOPs", "Out bytes", "Saved"],
  );
  for (const hidden of ["depth", "params_self", "flops_self", "saved_bytes_self", "runs"])
    assert.ok(!shown.some((c) => c.col === hidden), hidden);
  for (const c of shown) assert.equal(table.columns[c.index], c.col);
});

test("cells are formatted by the unit the payload gives each column", () => {
  const cells = Object.fromEntries(shownColumns(table).map((c) => [c.header, c.fmt(rowOf("stem")[c.index])]));
  // stem: Conv2d(3, 8, 3) on 2x3x8x8: 8*3*9 + 8 = 224 parameters; 2*(2*8*8*8)*27 = 55,296
  // forward FLOPs plus as many for the weight gradient = 110,592 (sent as 110,600);
  // output 2*8*8*8 float32 = 4096 B; not timed, so 0 s
  assert.deepEqual(cells, {
    Module: "stem",
    Type: "Conv2d",
    Calls: "1",
    Params: "224",
    Fwd: "0 s",
    "Fwd IQR": "0 s",
    "Fwd self": "0 s",
    Bwd: "0 s",
    "Bwd IQR": "0 s",
    "Bwd self": "0 s",
    FLOPs: "111K",
    "Out bytes": "4 KiB",
    Saved: "1.5 KiB",
  });
});

test("the bar chart ranks by each metric's self column, labelled and formatted from the payload", () => {
  const m = chartMetric(table, "params");
  assert.equal(m.label, "parameters");
  assert.equal(m.col, "params_self");
  const top = topRows(table.rows, m.index, 3);
  // the nine 3x3 convolutions 8->8 without bias: 8*8*9 = 576 each; then the stem
  assert.deepEqual(
    top.map((r) => m.fmt(r[m.index])),
    ["576", "576", "576"],
  );
  const act = chartMetric(table, "activations");
  assert.equal(act.label, "activation memory");
  assert.equal(act.fmt(rowOf("blocks.0.conv1")[act.index]), "4 KiB");
  assert.deepEqual(Object.keys(table.metrics), ["fwd_time", "bwd_time", "flops", "params", "activations"]);
});

test("a noisy time is flagged on its own and its self column, nowhere else", () => {
  const table = { noisy: { "blocks.0": ["fwd_time"], "": ["bwd_time"] } };
  assert.equal(isNoisy(table, "blocks.0", "fwd_time"), true);
  assert.equal(isNoisy(table, "blocks.0", "fwd_self_time"), true);
  assert.equal(isNoisy(table, "blocks.0", "bwd_time"), false);
  assert.equal(isNoisy(table, "", "bwd_self_time"), true);
  assert.equal(isNoisy(table, "head", "fwd_time"), false);
  assert.equal(isNoisy({}, "blocks.0", "fwd_time"), false);
});

/** @param {Partial<import("../src/profile.js").ProfileState>} over @returns {import("../src/profile.js").ProfileState} */
const stateOf = (over) => ({ metric: "params", top: 3, sort: "params", descending: true, selected: null, ...over });
/** @param {string} html @param {string} attr */
const attrs = (html, attr) => [...html.matchAll(new RegExp(`${attr}="([^"]*)"`, "g"))].map((m) => m[1]);

test("the chart draws the top rows of the metric, the selected one outlined", () => {
  const m = chartMetric(table, "params");
  const top = topRows(table.rows, m.index, 3);
  const sel = String(top[1][0]);
  const html = chartHtml(table, stateOf({ selected: sel }));
  assert.deepEqual(
    attrs(html, "data-path"),
    top.map((r) => String(r[0])),
  );
  assert.equal(html.split("outline:2px").length - 1, 1);
  assert.match(chartHtml(table, stateOf({ metric: "fwd_time" })), /no module has a .* figure/); // not timed: all 0
});

test("the table follows the state: sorted column marked, order, selection, noisy cells", () => {
  const col = table.columns.indexOf("params");
  const html = tableHtml(table, stateOf({ selected: "stem" }));
  assert.match(html, /<th data-col="params" class="lk-sorted">/);
  assert.deepEqual(
    attrs(html, "data-path"),
    sortRows(table.rows, col, true).map((r) => String(r[0])),
  );
  assert.match(html, /<tr data-path="stem" class='lk-selected'>/);
  assert.match(tableHtml(table, stateOf({ descending: false })), /class="lk-sorted lk-asc"/);
  const noisy = tableHtml({ ...table, noisy: { stem: ["fwd_time"] } }, stateOf({}));
  assert.equal(noisy.split('class="lk-noisy"').length - 1, 2); // Fwd and Fwd self of stem
  assert.match(noisy, /lk-noisy-note/);
});

test("a header click flips the order of the sorted column, else sorts by it (text ascending)", () => {
  assert.deepEqual(sortBy({ sort: "params", descending: true }, "params"), { sort: "params", descending: false });
  assert.deepEqual(sortBy({ sort: "params", descending: false }, "flops"), { sort: "flops", descending: true });
  assert.deepEqual(sortBy({ sort: "params", descending: true }, "path"), { sort: "path", descending: false });
});
