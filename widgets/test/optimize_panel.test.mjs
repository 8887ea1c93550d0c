// The OptimizePanel's pure functions: control value -> Recipe dict, control state, results
// table, and the drawing of a state (results and controls as data, no DOM).
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  controlState,
  controlsView,
  hintLines,
  isDefault,
  kwargsText,
  parseKwargs,
  parseSizes,
  resultTable,
  resultsView,
  shown,
  sideBySide,
  speedupText,
  splitColumns,
  toggleAllOpened,
  toggleOpened,
  togglePicked,
  withField,
} from "../src/optimize_panel.js";

/** A body row's cells (a failed row has none). @param {{cells?: string[]}} r */
const cellsOf = (r) => {
  assert.ok(r.cells, "a row with cells");
  return r.cells;
};
/** The side-by-side line of a figure. @param {string[][]} lines @param {string} name */
const lineOf = (lines, name) => {
  const line = lines.find((l) => l[0] === name);
  assert.ok(line, name);
  return line;
};

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
  assert.equal(cellsOf(ep)[0], "1 ms");
  assert.equal(cellsOf(ep)[5], "1.5 s");
  assert.equal(cellsOf(ep)[7], "3.0e-8");
  assert.equal(cellsOf(ep)[9], "blocks.0 (rel 2.0e-2)");
  assert.equal(cellsOf(ep)[10], "error: ValueError: shape");
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
  assert.deepEqual(cellsOf(body[1]).slice(4, 7), ["2", "3 s", "never"]);
  assert.equal(cellsOf(body[0])[4], "-");
  assert.equal(cellsOf(body[1])[10], "0.5000");
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
  assert.deepEqual(lineOf(lines, "latency (median)").slice(3), ["0.50×"]);
  assert.deepEqual(lineOf(lines, "cosine").slice(3), ["same"]);
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
  assert.equal(main.length + detail.length, cellsOf(body[1]).length); // every figure somewhere
});

test("the results state: rows open and close, two picked at most (the last two)", () => {
  let st = { opened: new Set(), picked: /** @type {string[]} */ ([]) };
  st = toggleOpened(st, "fp32");
  assert.deepEqual([...st.opened], ["fp32"]);
  assert.deepEqual([...toggleOpened(st, "fp32").opened], []);
  const { body } = resultTable([fp32, exported, failed], "inference", "");
  st = toggleAllOpened(st, body); // not every row open: all open (a failed row has nothing to open)
  assert.deepEqual([...st.opened].sort(), ["fp32", "onnxruntime", "torch.export"]);
  assert.deepEqual([...toggleAllOpened(st, body).opened], []);
  for (const l of ["a", "b", "c"]) st = togglePicked(st, l);
  assert.deepEqual(st.picked, ["b", "c"]);
  assert.deepEqual(togglePicked(st, "b").picked, ["c"]);
});

test("the results view: main cells per row, the opened row's other figures, the pair, the bars", () => {
  const rows = [fp32, exported, failed];
  const st = { opened: new Set(["torch.export", "onnxruntime"]), picked: ["fp32", "torch.export"] };
  const view = resultsView(rows, st, { mode: "inference", lossHead: "", suggestion: "bf16" });
  const { head, body } = resultTable(rows, "inference", "");
  const { main, detail } = splitColumns(head, "");
  assert.deepEqual(
    view.heads,
    main.map((i) => head[i + 1]),
  );
  const [base, ep, bad] = view.rows;
  assert.deepEqual(
    base.cells.map((c) => c.text),
    main.map((i) => cellsOf(body[0])[i]),
  );
  assert.deepEqual(
    base.cells.filter((c) => c.speed).map((c) => c.text),
    ["1.00x"],
  );
  assert.deepEqual([base.open, base.picked, base.facts.length], [false, true, 0]);
  assert.deepEqual(
    ep.facts.map((f) => [f.name, f.value]),
    detail.map((i) => [head[i + 1], cellsOf(body[1])[i]]),
  );
  assert.equal(bad.error, failed.error);
  assert.deepEqual(bad.facts, []); // opened, but a failed row has only its error
  assert.deepEqual(view.pair, { a: "fp32", b: "torch.export", lines: sideBySide(fp32, exported, "inference", "") });
  // the failed row has no speed-up: two bars, the fastest 200 px
  assert.deepEqual(
    view.bars.map((b) => [b.label, b.width, b.slow]),
    [
      ["fp32", 100, false],
      ["torch.export", 200, false],
    ],
  );
  assert.deepEqual(view.next, { text: "next: bf16 ", button: true });
  assert.equal(
    resultsView(rows, { opened: new Set(), picked: ["fp32"] }, { mode: "inference", lossHead: "", suggestion: "(none)" }).pair,
    null,
  );
});

test("the controls view: values as each control shows them, locks and refused options", () => {
  const fields = [
    {
      name: "quantization",
      label: "quantization",
      kind: "select",
      modes: [],
      hints: {},
      with_export: false,
      default: "none",
      options: [
        { value: "none", label: "none", disabled: false, title: "" },
        { value: "int8-dynamic", label: "int8", disabled: false, title: "" },
      ],
    },
    { name: "checkpoint", label: "checkpoint", kind: "list", modes: [], hints: {}, with_export: false, default: [] },
    { name: "export_kwargs", label: "call kwargs", kind: "kwargs", modes: [], hints: {}, with_export: true },
    { name: "channels_last", label: "channels last", kind: "check", modes: [], hints: {}, with_export: false, default: false },
  ];
  const recipe = { quantization: null, checkpoint: ["0", "2"], export_kwargs: { use_cache: false }, channels_last: true };
  const locks = { checkpoint: "inference has no backward", quantization: "export runs fp32" };
  const refused = { quantization: { "int8-dynamic": "torchao is not installed" } };
  const [q, ck, kw, cl] = controlsView(fields, recipe, "inference", locks, refused);
  assert.deepEqual([q.value, q.disabled, q.title], ["none", true, "export runs fp32"]);
  assert.deepEqual(q.options[1], { value: "int8-dynamic", disabled: true, title: "torchao is not installed" });
  assert.deepEqual([ck.value, ck.disabled], ["0, 2", false]); // set before: stays editable to clear it
  assert.equal(kw.value, "use_cache=False");
  assert.deepEqual([cl.value, cl.disabled], [true, false]);
});
