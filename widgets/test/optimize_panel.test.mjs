// The OptimizePanel's pure functions: control value -> Recipe dict, control state, results table.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  controlState,
  hintLines,
  isDefault,
  kwargsText,
  parseKwargs,
  parseSizes,
  resultTable,
  shown,
  sideBySide,
  speedupText,
  splitColumns,
  withField,
} from "../src/optimize_panel.js";

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

test("export and other selects: 'none' is null, a list kind splits like checkpoint", () => {
  assert.equal(withField(base, "export", "torch.export").export, "torch.export");
  assert.equal(withField({ ...base, export: "onnxruntime" }, "export", "none").export, null);
  assert.deepEqual(withField(base, "layers", "a, b", "list").layers, ["a", "b"]);
  assert.equal(shown(null), "none");
  assert.equal(shown("torch.export"), "torch.export");
});

test("batch sizes parse from comma-separated text, or null when not integers >= 1", () => {
  assert.deepEqual(parseSizes("1, 8,32 "), [1, 8, 32]);
  assert.deepEqual(parseSizes(""), []);
  assert.equal(parseSizes("1, 0"), null);
  assert.equal(parseSizes("2.5"), null);
  assert.equal(parseSizes("a"), null);
});

test("a control is disabled with Python's reason, else shows its hint for the mode", () => {
  const field = { name: "precision", hints: { inference: "GradScaler in training only" } };
  assert.deepEqual(controlState(field, "inference", {}), { disabled: false, title: "", hint: "GradScaler in training only" });
  assert.deepEqual(controlState(field, "train", {}), { disabled: false, title: "", hint: "" });
  const locked = controlState(field, "inference", { precision: "export runs fp32" });
  assert.equal(locked.disabled, true);
  assert.equal(locked.title, "export runs fp32");
});

test("a control that does nothing now stays editable while it holds a value set before", () => {
  const ckpt = { name: "checkpoint", kind: "list", default: [] };
  const locks = { checkpoint: "inference has no backward" };
  assert.equal(controlState(ckpt, "inference", locks, []).disabled, true);
  const kept = controlState(ckpt, "inference", locks, ["0", "2"]);
  assert.equal(kept.disabled, false);
  assert.equal(kept.title, "inference has no backward"); // still explained
  assert.equal(isDefault({ kind: "select", default: "none" }, null), true);
  assert.equal(isDefault({ kind: "select", default: "32" }, "bf16-mixed"), false);
  assert.equal(isDefault({ kind: "check", default: false }, true), false);
});

test("hint lines: one line per reason, naming every control it holds for", () => {
  const fields = [
    { name: "precision", label: "precision", hints: { inference: "fp16 hint" } },
    { name: "compile", label: "compile" },
    { name: "matmul_precision", label: "matmul precision" },
    { name: "export", label: "export", hints: { train: "switches to inference" } },
  ];
  const locks = { compile: "export runs fp32", matmul_precision: "export runs fp32" };
  assert.deepEqual(hintLines(fields, "inference", locks), ["precision: fp16 hint", "compile, matmul precision: export runs fp32"]);
  assert.deepEqual(hintLines(fields, "train", {}), ["export: switches to inference"]);
});

const fp32 = {
  label: "fp32",
  step_time: 0.002,
  step_median: 0.002,
  step_q1: 0.0019,
  step_q3: 0.0021,
  step_n: 5,
  throughput: 4000,
  speedup: 1,
  export_time: null,
  compile_time: null,
  graph_breaks: null,
  peak_memory: null,
  max_abs: 0,
  rel: 0,
  cosine: 1,
  loss: null,
  drift_path: null,
  drift_rel: null,
  error: null,
  notes: [],
  per_batch: [{ batch_size: 1, step_time: 0.001, throughput: 1000, speedup: 1, error: null }],
};
const exported = {
  ...fp32,
  label: "torch.export",
  step_median: 0.001,
  speedup: 2,
  export_time: 1.5,
  max_abs: 2e-7,
  rel: 3e-8,
  drift_path: "blocks.0",
  drift_rel: 0.02,
  per_batch: [{ batch_size: 1, step_time: null, throughput: null, speedup: null, error: "ValueError: shape" }],
};
const failed = { label: "onnxruntime", error: "ExportError: onnxruntime could not export the model: x in module 'tail' (Gate)" };

test("inference table: latency, samples/s, export time, rel, drift and a column per batch size", () => {
  const { head, body } = resultTable([fp32, exported, failed], "inference", "");
  assert.deepEqual(head, [
    "recipe",
    "latency (median)",
    "IQR",
    "steps",
    "samples/s",
    "speed-up (95%)",
    "export",
    "max abs",
    "rel",
    "cosine",
    "first drift",
    "batch 1",
  ]);
  const [base, ep, bad] = body;
  assert.deepEqual(base.cells, [
    "2 ms",
    "1.9 ms – 2.1 ms",
    "5",
    "4K",
    "1.00x",
    "-",
    "0.0e+0",
    "0.0e+0",
    "1.00000",
    "-",
    "1 ms · 1K/s · 1.00x",
  ]);
  assert.equal(ep.cells[0], "1 ms");
  assert.equal(ep.cells[5], "1.5 s");
  assert.equal(ep.cells[7], "3.0e-8");
  assert.equal(ep.cells[9], "blocks.0 (rel 2.0e-2)");
  assert.equal(ep.cells[10], "error: ValueError: shape");
  assert.deepEqual(bad, { label: "onnxruntime", error: failed.error }); // one cell, not columns
});

test("train table: step time, compile columns only when a row compiled, the loss column when named", () => {
  const compiled = { ...fp32, label: "compile", compile_time: 3, break_even: null, graph_breaks: 2, loss: 0.5, per_batch: [] };
  const { head, body } = resultTable([{ ...fp32, per_batch: [], loss: 0.25 }, compiled], "train", "loss (your loss)");
  assert.deepEqual(head, [
    "recipe",
    "step (median)",
    "IQR",
    "steps",
    "speed-up (95%)",
    "graph breaks",
    "compile",
    "break-even",
    "max abs",
    "rel",
    "cosine",
    "loss (your loss)",
    "first drift",
  ]);
  assert.deepEqual(body[1].cells.slice(4, 7), ["2", "3 s", "never"]);
  assert.equal(body[0].cells[4], "-");
  assert.equal(body[1].cells[10], "0.5000");
});

test("export call kwargs are typed in as Python writes them", () => {
  const got = withField({ export: "torch.export" }, "export_kwargs", "use_cache=False, n=2, name='a'", "kwargs");
  assert.deepEqual(got.export_kwargs, { use_cache: false, n: 2, name: "a" });
  assert.equal(kwargsText({ use_cache: false, cap: null }), "use_cache=False, cap=None");
  assert.deepEqual(parseKwargs(""), {});
});

test("a speedup shows its interval, or says it is within noise", () => {
  assert.equal(speedupText({ speedup: 1.0 }), "1.00x");
  assert.equal(speedupText({ speedup: 1.2, speedup_low: 1.1, speedup_high: 1.3, within_noise: false }), "1.20x (1.10x–1.30x)");
  // "within noise" keeps its interval: how wide the noise is, is the point
  assert.equal(
    speedupText({ speedup: 1.02, speedup_low: 0.97, speedup_high: 1.06, within_noise: true }),
    "1.02x within noise (0.97x–1.06x)",
  );
  const a = { label: "a", step_time: 0.002, throughput: 100, speedup: 1.0, max_abs: 0, rel: 0, cosine: 1 };
  const b = {
    label: "b",
    step_time: 0.001,
    throughput: 200,
    speedup: 2.0,
    speedup_low: 1.8,
    speedup_high: 2.2,
    within_noise: false,
    max_abs: 0,
    rel: 0,
    cosine: 1,
  };
  const lines = sideBySide(a, b, "inference", "");
  assert.deepEqual(lines.find((l) => l[0] === "latency (median)").slice(3), ["0.50×"]);
  assert.deepEqual(lines.find((l) => l[0] === "cosine").slice(3), ["same"]);
});

test("the table's main columns fit; the rest open under a row", () => {
  const rows = [
    { label: "fp32", step_time: 0.002, speedup: 1.0, max_abs: 0, rel: 0, cosine: 1, loss: 0.5, drift_path: null },
    {
      label: "bf16",
      step_time: 0.001,
      speedup: 2,
      speedup_low: 1.8,
      speedup_high: 2.2,
      max_abs: 1e-3,
      rel: 1e-3,
      cosine: 0.99,
      loss: 0.51,
      drift_path: "0",
    },
  ];
  const { head, body } = resultTable(rows, "train", "loss (your loss)");
  const { main, detail } = splitColumns(head, "loss (your loss)");
  assert.deepEqual(
    main.map((i) => head[i + 1]),
    ["step (median)", "speed-up (95%)", "cosine", "loss (your loss)"],
  );
  assert.deepEqual(
    detail.map((i) => head[i + 1]),
    ["IQR", "steps", "max abs", "rel", "first drift"],
  );
  assert.equal(main.length + detail.length, body[1].cells.length); // every figure somewhere
});
