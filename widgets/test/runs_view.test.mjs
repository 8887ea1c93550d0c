import assert from "node:assert/strict";
import { test } from "node:test";
import { byTime, lastBefore } from "../src/_chart_x.js";
import { runStyle } from "../src/_series.js";
import { columns, FilterError, filterRows, fmtCell, metricSeries, sortRows } from "../src/_runs_table.js";

/** @typedef {import("../src/_contract_types").RunRow} RunRow */

// rows as an older payload has them: no `state` or `state_note` yet (the table shows `status`
// then: "older payload" in the state column's test), no `epochs` or `error` (the table reads
// neither). RunRow is today's payload, which has them all: hence the cast.
const rows = /** @type {RunRow[]} */ (
  /** @type {Partial<RunRow>[]} */ ([
    {
      name: "a",
      status: "finished",
      steps: 100,
      wall_time: 12.5,
      last: { loss: 0.3 },
      best: { loss: 0.2, val_acc: 0.9 },
      hparams: { lr: 0.1, seed: 0, optimizer: "adam" },
    },
    {
      name: "b",
      status: "failed",
      steps: 40,
      wall_time: null,
      last: { loss: 0.9 },
      best: { loss: 0.8 },
      hparams: { lr: 0.01, seed: 0, optimizer: "adam" },
    },
    {
      name: "c10",
      status: "finished",
      steps: 100,
      wall_time: 11.0,
      last: {},
      best: { val_acc: 0.95 },
      hparams: { lr: 0.001, seed: 0, optimizer: "sgd" },
    },
  ])
);

test("columns: fixed, then last/best of the charted metrics, then hparams that vary first", () => {
  const cols = columns(rows, ["loss"]);
  assert.deepEqual(
    cols.map((c) => c.key),
    ["name", "status", "steps", "wall_time", "last:loss", "best:loss", "hp:lr", "hp:optimizer", "hp:seed"],
  );
  assert.equal(cols.find((c) => c.key === "hp:lr")?.num, true);
  assert.equal(cols.find((c) => c.key === "hp:optimizer")?.num, false);
});

test("sorting by number or text, missing values last in both directions", () => {
  const cols = columns(rows, ["loss"]);
  assert.deepEqual(
    sortRows(rows, cols, "hp:lr").map((r) => r.name),
    ["c10", "b", "a"],
  );
  assert.deepEqual(
    sortRows(rows, cols, "hp:lr", true).map((r) => r.name),
    ["a", "b", "c10"],
  );
  assert.deepEqual(
    sortRows(rows, cols, "last:loss").map((r) => r.name),
    ["a", "b", "c10"],
  );
  assert.deepEqual(
    sortRows(rows, cols, "last:loss", true).map((r) => r.name),
    ["b", "a", "c10"],
  );
  assert.deepEqual(
    sortRows(rows, cols, "wall_time").map((r) => r.name),
    ["c10", "a", "b"],
  );
});

test("filtering by text and by column comparisons", () => {
  const cols = columns(rows, ["loss"]);
  const names = (/** @type {string} */ q) => filterRows(rows, cols, q).map((r) => r.name);
  assert.deepEqual(names(""), ["a", "b", "c10"]);
  assert.deepEqual(names("sgd"), ["c10"]);
  assert.deepEqual(names("lr<0.05"), ["b", "c10"]);
  assert.deepEqual(names("lr<0.05 status=finished"), ["c10"]);
  assert.deepEqual(names("steps>=100"), ["a", "c10"]);
  assert.deepEqual(names("optimizer=ADAM"), ["a", "b"]);
  // never a filter that silently matches nothing: a bad one says what to write
  assert.throws(() => names("lr>fast"), FilterError);
  assert.throws(() => names("lr>fast"), /compares with a number, as lr>0.5/);
  assert.throws(() => names("nope>1"), /no column "nope" in "nope>1"/);
  assert.throws(() => names("lr>"), /no value after >/);
});

test("a bare metric name filters by its last value (val_acc>0.8 = last:val_acc>0.8)", () => {
  // only the fields a filter reads (name, state or status, last, best, hparams): cast
  const rs = /** @type {RunRow[]} */ (
    /** @type {Partial<RunRow>[]} */ ([
      { name: "a", status: "finished", last: { val_acc: 0.9 }, best: { val_acc: 0.9 }, hparams: {} },
      { name: "b", status: "finished", last: { val_acc: 0.7 }, best: { val_acc: 0.85 }, hparams: {} },
    ])
  );
  const cols = columns(rs, []); // val_acc not charted: no last/best column shown
  const names = (/** @type {string} */ q) => filterRows(rs, cols, q).map((r) => r.name);
  assert.deepEqual(names("val_acc>0.8"), ["a"]);
  assert.deepEqual(names("VAL_ACC<0.8"), ["b"]);
  const charted = columns(rs, ["val_acc"]);
  assert.deepEqual(
    filterRows(rs, charted, "last:val_acc>0.8").map((r) => r.name),
    ["a"],
  );
  assert.deepEqual(
    filterRows(rs, charted, "best:val_acc>0.8").map((r) => r.name),
    ["a", "b"],
  );
});

test("run colours do not come again before 20 runs; then the same colours dashed", () => {
  const colors = Array.from({ length: 20 }, (_, i) => runStyle(i).color);
  assert.equal(new Set(colors).size, 20);
  assert.ok(colors.every((_, i) => runStyle(i).dash === null));
  assert.equal(runStyle(20).color, runStyle(0).color);
  const dash = runStyle(20).dash;
  assert.ok(Array.isArray(dash) && dash.length > 0);
  assert.notDeepEqual(runStyle(40).dash, runStyle(20).dash);
});

test("a metric's curves of the chosen runs; wall-time axis from t; legend's last value", () => {
  const curves = { a: { loss: { x: [1, 2], t: [0.5, 1.0], y: [3, 2] } }, b: { loss: { x: [1], t: [null], y: [5] } }, c10: {} };
  assert.deepEqual(Object.keys(metricSeries(curves, "loss", ["b", "c10", "a"])), ["b", "a"]);
  assert.deepEqual(byTime(metricSeries(curves, "loss", ["a", "b"])), { a: { x: [0.5, 1.0], y: [3, 2] }, b: { x: [], y: [] } });
  assert.equal(lastBefore([null, 0.4, null, NaN, null], 4), 0.4); // val points only at epoch ends
  assert.equal(lastBefore([null, 0.4], 0), null);
  assert.equal(lastBefore([1, 2], 9), 2);
});

test("table numbers", () => {
  assert.equal(fmtCell(null), "-");
  assert.equal(fmtCell(100), "100");
  assert.equal(fmtCell(0.123456), "0.1235");
  assert.equal(fmtCell(1e-5), "1.00e-5");
  assert.equal(fmtCell("adam"), "adam");
});

test("the state column shows what a run is now; state= and status= filter on it", () => {
  const now = [
    { ...rows[0], state: "running", state_note: "held by pid 12 on this host" },
    { ...rows[1], state: "crashed", state_note: "last step 40, epoch 0" },
    { ...rows[2], state: "finished", state_note: "" },
  ];
  const cols = columns(now, []);
  const col = cols.find((c) => c.key === "status");
  assert.ok(col);
  assert.equal(col.label, "state");
  assert.deepEqual(now.map(col.get), ["running", "crashed", "finished"]); // not the old status words
  assert.deepEqual(
    columns(rows, [])
      .find((c) => c.key === "status")
      ?.get(rows[1]),
    "failed",
  ); // older payload
  assert.deepEqual(
    filterRows(now, cols, "state=crashed").map((r) => r.name),
    ["b"],
  );
  assert.deepEqual(
    filterRows(now, cols, "status=running").map((r) => r.name),
    ["a"],
  );
  assert.deepEqual(
    filterRows(now, cols, "crashed").map((r) => r.name),
    ["b"],
  ); // plain text too
  assert.deepEqual(
    sortRows(now, cols, "status").map((r) => r.name),
    ["b", "c10", "a"],
  );
});
