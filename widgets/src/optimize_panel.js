// OptimizePanel front end: toggles bound to the Recipe, Measure / Apply buttons,
// a progress bar, a results table and a speed-up bar chart.
import { fmtBytes, fmtRatio, fmtTime } from "./_shared.js";
import { THEME } from "./_ui.js";

const CSS = `
.lk-opt { font: 13px/1.4 var(--lk-font); color: var(--lk-fg); background: var(--lk-bg); padding: 4px; }
.lk-opt button, .lk-opt select, .lk-opt input { font: inherit; color: var(--lk-fg); background: var(--lk-input-bg);
  border: 1px solid var(--lk-border); border-radius: 3px; }
.lk-opt button:disabled { opacity: .6; }
.lk-opt option { background: var(--lk-bg); color: var(--lk-fg); }
.lk-opt th { background: var(--lk-bg2); }
.lk-opt .lk-row { display: flex; flex-wrap: wrap; gap: 10px 16px; align-items: center; margin: 4px 0 8px; }
.lk-opt label { display: inline-flex; gap: 4px; align-items: center; }
.lk-opt button { padding: 3px 12px; }
.lk-opt .lk-progress { height: 6px; background: var(--lk-bg2); border-radius: 3px; overflow: hidden; width: 240px; }
.lk-opt .lk-progress > div { height: 100%; background: var(--lk-accent); }
.lk-opt .lk-error { color: var(--lk-error); white-space: pre-wrap; }
.lk-opt table { border-collapse: collapse; margin: 6px 0; }
.lk-opt select { width: auto; }
.lk-opt [data-testid="opt-results"] { overflow-x: auto; }
.lk-opt td, .lk-opt th { padding: 2px 8px; text-align: right; border-bottom: 1px solid var(--lk-border2); white-space: nowrap; }
.lk-opt td:first-child, .lk-opt th:first-child { text-align: left; }
.lk-opt .lk-bar { display: flex; align-items: center; gap: 6px; margin: 2px 0; }
.lk-opt .lk-bar > span:first-child { width: 180px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.lk-opt .lk-bar > div { height: 12px; background: #3b7dd8; }
.lk-opt .lk-bar > div.lk-slow { background: #d8703b; }
.lk-opt .lk-notes { color: var(--lk-fg2); font-size: 12px; margin: 0; padding-left: 18px; }
`;

function el(tag, attrs = {}, ...kids) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const kid of kids) node.append(kid);
  return node;
}

const num = (x, f) => (x === null || x === undefined ? "-" : f(x));

/** Recipe dict -> new dict with one field changed (checkpoint text -> list). Exported for tests. */
export function withField(recipe, name, value) {
  const next = { ...recipe };
  if (name === "checkpoint") {
    next.checkpoint = String(value).split(",").map((s) => s.trim()).filter(Boolean);
  } else if (name === "quantization" || name === "compile") {
    next[name] = value === "none" ? null : value;
  } else {
    next[name] = value;
  }
  return next;
}

function render({ model, el: root }) {
  const style = el("style", { text: THEME + CSS });
  const box = el("div", { class: "lk-opt", "data-testid": "optimize-panel" });
  root.append(style, box);

  const setRecipe = (name, value) => {
    model.set("recipe_state", withField(model.get("recipe_state"), name, value));
    model.save_changes();
  };

  const controls = el("div", { class: "lk-row" });
  const selects = {};
  for (const name of ["precision", "quantization", "compile", "matmul_precision"]) {
    const sel = el("select", { "data-testid": `opt-${name}` });
    for (const c of model.get("choices")[name] || []) sel.append(el("option", { value: c, text: c }));
    sel.addEventListener("change", () => setRecipe(name, sel.value));
    selects[name] = sel;
    controls.append(el("label", {}, `${name.replace("_", " ")}`, sel));
  }
  const checks = {};
  for (const name of ["channels_last", "fuse_conv_bn"]) {
    const cb = el("input", { type: "checkbox", "data-testid": `opt-${name}` });
    cb.addEventListener("change", () => setRecipe(name, cb.checked));
    checks[name] = cb;
    controls.append(el("label", {}, cb, name.replace(/_/g, " ")));
  }
  const ckpt = el("input", { type: "text", placeholder: "module paths, globs or types", "data-testid": "opt-checkpoint", size: "28" });
  ckpt.addEventListener("change", () => setRecipe("checkpoint", ckpt.value));
  controls.append(el("label", {}, "checkpoint", ckpt));

  const actions = el("div", { class: "lk-row" });
  const measure = el("button", { "data-testid": "opt-measure", text: "Measure" });
  const apply = el("button", { "data-testid": "opt-apply", text: "Apply" });
  measure.addEventListener("click", () => model.send({ type: "measure" }));
  apply.addEventListener("click", () => model.send({ type: "apply" }));
  const bar = el("div", { class: "lk-progress" }, el("div"));
  const status = el("span", { "data-testid": "opt-status" });
  actions.append(measure, apply, bar, status);

  const error = el("div", { class: "lk-error", "data-testid": "opt-error" });
  const results = el("div", { "data-testid": "opt-results" });
  box.append(controls, actions, error, results);

  const syncRecipe = () => {
    const r = model.get("recipe_state");
    selects.precision.value = r.precision;
    selects.quantization.value = r.quantization ?? "none";
    selects.compile.value = r.compile ?? "none";
    selects.matmul_precision.value = r.matmul_precision;
    checks.channels_last.checked = !!r.channels_last;
    checks.fuse_conv_bn.checked = !!r.fuse_conv_bn;
    if (document.activeElement !== ckpt) ckpt.value = (r.checkpoint || []).join(", ");
  };
  const syncRun = () => {
    const running = model.get("running");
    measure.disabled = running;
    bar.firstChild.style.width = `${Math.round(100 * model.get("progress"))}%`;
    const applied = model.get("applied_label");
    status.textContent = model.get("status") + (applied ? `  (applied: ${applied})` : "");
    error.textContent = model.get("error");
  };
  const syncResults = () => {
    results.replaceChildren();
    const rows = model.get("results") || [];
    if (!rows.length) return;
    // step time: median of the timed steps with the interquartile range next to it
    const lossHead = model.get("loss_label");
    const head = ["recipe", "step (median)", "IQR", "steps", "speed-up", "compile", "break-even", "peak mem",
      "max abs", "cosine", ...(lossHead ? [lossHead] : []), "first drift"];
    const table = el("table", { "data-testid": "opt-table" }, el("tr", {}, ...head.map((h) => el("th", { text: h }))));
    for (const r of rows) {
      const cells = r.error
        ? [r.label, "error: " + r.error]
        : [
            r.label, num(r.step_median ?? r.step_time, fmtTime),
            r.step_q1 == null ? "-" : `${fmtTime(r.step_q1)} – ${fmtTime(r.step_q3)}`, String(r.step_n ?? "-"),
            num(r.speedup, fmtRatio), num(r.compile_time, fmtTime),
            r.compile_time == null ? "-" : r.break_even == null ? "never" : `${Math.round(r.break_even)} steps`,
            num(r.peak_memory, fmtBytes), num(r.max_abs, (x) => x.toExponential(1)),
            num(r.cosine, (x) => x.toFixed(5)), ...(lossHead ? [num(r.loss, (x) => x.toPrecision(4))] : []),
            r.drift_path ?? "-",
          ];
      table.append(el("tr", {}, ...cells.map((c) => el("td", { text: String(c) }))));
    }
    const chart = el("div", { "data-testid": "opt-chart" });
    const max = Math.max(1, ...rows.map((r) => r.speedup || 0));
    for (const r of rows) {
      if (r.speedup == null) continue;
      const fill = el("div", { class: r.speedup < 1 ? "lk-slow" : "" });
      fill.style.width = `${Math.round((200 * r.speedup) / max)}px`;
      chart.append(el("div", { class: "lk-bar" }, el("span", { text: r.label }), fill, el("span", { text: fmtRatio(r.speedup) })));
    }
    const notes = el("ul", { class: "lk-notes" });
    for (const r of rows) for (const n of r.notes || []) notes.append(el("li", { text: `${r.label}: ${n}` }));
    results.append(table, chart, notes);
  };

  syncRecipe();
  syncRun();
  syncResults();
  model.on("change:recipe_state", syncRecipe);
  for (const k of ["running", "progress", "status", "error", "applied_label"]) model.on(`change:${k}`, syncRun);
  model.on("change:results", syncResults);
}

export default { render };
