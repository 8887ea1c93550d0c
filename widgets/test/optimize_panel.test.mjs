// withField: how the OptimizePanel turns a control's value into the next Recipe dict.
import assert from "node:assert/strict";
import { test } from "node:test";
import { withField } from "../src/optimize_panel.js";

const base = { precision: "32", quantization: null, compile: null, checkpoint: [], channels_last: false };

test("dropdowns map 'none' to null and keep other fields", () => {
  assert.deepEqual(withField(base, "quantization", "int8-dynamic").quantization, "int8-dynamic");
  assert.equal(withField({ ...base, compile: "default" }, "compile", "none").compile, null);
  assert.equal(withField(base, "precision", "bf16-mixed").precision, "bf16-mixed");
  assert.equal(base.precision, "32"); // not mutated
});

test("checkpoint text becomes a list of trimmed names", () => {
  assert.deepEqual(withField(base, "checkpoint", " layers.*, Block ,, ").checkpoint, ["layers.*", "Block"]);
  assert.deepEqual(withField(base, "checkpoint", "").checkpoint, []);
});

test("checkboxes pass booleans through", () => {
  assert.equal(withField(base, "channels_last", true).channels_last, true);
});
