// OptimizePanel front end: controls bound to the Recipe, Measure / Apply buttons,
// a progress bar, a results table and a speed-up bar chart. Which controls exist,
// their options and the modes they apply to come from Python (the `choices` trait);
// which are disabled now, and why, too (`locks`). The table shows the main columns
// (step time, speed-up with its interval, peak memory, cosine, loss) and fits an 820 px
// output; each row's other figures open under it with its ▸ toggle ("details" opens all).
import { fmtBytes, fmtCount, fmtRatio, fmtTime } from "./_shared.js";
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
.lk-opt [data-testid="opt-results"] { max-width: 100%; }
.lk-opt .lk-scroll { overflow-x: auto; max-width: 100%; }
.lk-opt td:first-child, .lk-opt th:first-child { position: sticky; left: 0; background: var(--lk-bg); z-index: 1; min-width: 9em; max-width: 18em; white-space: normal; overflow-wrap: break-word; }
.lk-opt th { white-space: normal; }
.lk-opt tr.lk-picked td { background: var(--lk-bg2); }
.lk-opt .lk-noise { color: var(--lk-fg2); }
.lk-opt td, .lk-opt th { padding: 2px 8px; text-align: right; border-bottom: 1px solid var(--lk-border2); white-space: nowrap; }
.lk-opt td:first-child, .lk-opt th:first-child { text-align: left; }
.lk-opt .lk-bar { display: flex; align-items: center; gap: 6px; margin: 2px 0; }
.lk-opt .lk-bar > span:first-child { width: 180px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.lk-opt .lk-bar > div { height: 12px; background: #3b7dd8; }
.lk-opt .lk-bar > div.lk-slow { background: #d8703b; }
.lk-opt .lk-notes { color: var(--lk-fg2); font-size: 12px; margin: 0; padding-left: 18px; }
.lk-opt .lk-notice { color: var(--lk-fg2); margin: 2px 0; }
.lk-opt .lk-hint { color: var(--lk-fg2); font-size: 12px; margin: 0 0 6px; }
.lk-opt label.lk-off { color: var(--lk-fg2); font-style: italic; }  /* still AA: the reason is read */
.lk-opt td.lk-failed { text-align: left; color: var(--lk-error); white-space: normal; }
.lk-opt td.lk-speedup { white-space: normal; min-width: 7em; }
.lk-opt button.lk-more { padding: 0 4px; margin-right: 4px; border: none; background: none; cursor: pointer; }
.lk-opt tr.lk-detail td { text-align: left; white-space: normal; background: var(--lk-bg); position: static; max-width: none; border-left: 3px solid var(--lk-border2); }
.lk-opt .lk-facts { font-size: 12px; line-height: 1.7; overflow-wrap: normal; word-break: normal; }
.lk-opt .lk-fact { display: inline-block; white-space: nowrap; margin-right: 18px; }
.lk-opt .lk-fact.lk-long { white-space: normal; overflow-wrap: anywhere; }
.lk-opt .lk-fact-name { color: var(--lk-fg2); margin-right: 6px; }
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
const some = (rows, key) => rows.some((r) => !r.error && r[key] !== null && r[key] !== undefined);

/** Recipe dict -> new dict with one field changed. A list field (checkpoint) takes
 * comma-separated text; a select's "none" stands for null. Exported for tests. */
export function withField(recipe, name, value, kind) {
  const next = { ...recipe };
  if (kind === "kwargs") {
    next[name] = parseKwargs(value);
  } else if (kind === "list" || name === "checkpoint") {
    next[name] = String(value)
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
  } else {
    next[name] = value === "none" ? null : value;
  }
  return next;
}

/** "use_cache=False, n=2" -> {use_cache: false, n: 2}: Python-style literals (True/False/
 * None, numbers), anything else a string. Exported for tests. */
export function parseKwargs(text) {
  const out = {};
  for (const part of String(text)
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [k, ...rest] = part.split("=");
    const v = rest.join("=").trim();
    const lit = { True: true, true: true, False: false, false: false, None: null, null: null };
    out[k.trim()] = v in lit ? lit[v] : v !== "" && !Number.isNaN(Number(v)) ? Number(v) : v.replace(/^['"]|['"]$/g, "");
  }
  return out;
}

/** {use_cache: false} -> "use_cache=False" (as Python writes it). */
export function kwargsText(obj) {
  const py = (v) => (v === true ? "True" : v === false ? "False" : v === null ? "None" : String(v));
  return Object.entries(obj || {})
    .map(([k, v]) => `${k}=${py(v)}`)
    .join(", ");
}

/** The select value that shows a recipe field (null -> "none"). */
export const shown = (value) => (value === null || value === undefined ? "none" : String(value));

/** "1, 8,32" -> [1, 8, 32]; null when some entry is not an integer >= 1. */
export function parseSizes(text) {
  const parts = String(text)
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const sizes = parts.map(Number);
  return sizes.every((n) => Number.isInteger(n) && n >= 1) ? sizes : null;
}

/** Whether a recipe value is the field's default (null and "none" alike; lists by content). */
export function isDefault(field, value) {
  if (field.kind === "kwargs") return Object.keys(value || {}).length === 0;
  if (field.kind === "list") return JSON.stringify(value || []) === JSON.stringify(field.default || []);
  if (field.kind === "check") return !!value === !!field.default;
  return shown(value) === shown(field.default);
}

/** A control's state: the reason it does nothing now (Python's `locks`) and the hint for
 * this mode. It is disabled while it holds its default; a value set before stays
 * editable, so that it can be cleared. */
export function controlState(field, mode, locks, value) {
  const why = locks?.[field.name];
  const disabled = !!why && (value === undefined || isDefault(field, value));
  return { disabled, title: why || "", hint: field.hints?.[mode] || "" };
}

/** The lines under the controls: why each disabled control is off, else its hint for
 * the mode; controls with the same text share one line. */
export function hintLines(fields, mode, locks) {
  const byText = new Map();
  for (const f of fields) {
    const st = controlState(f, mode, locks);
    const text = st.title || st.hint;
    if (text) byText.set(text, [...(byText.get(text) || []), f.label]);
  }
  return [...byText].map(([text, labels]) => `${labels.join(", ")}: ${text}`);
}

/** A speedup with its interval: "1.12× (1.05–1.19)", "1.01× within noise (0.97–1.06)"
 * when the interval spans 1.00×, the bare ratio for the baseline. */
export function speedupText(r) {
  if (r.speedup == null) return "-";
  if (r.speedup_low == null || r.speedup_high == null) return fmtRatio(r.speedup);
  const interval = `(${fmtRatio(r.speedup_low)}–${fmtRatio(r.speedup_high)})`;
  if (r.within_noise) return `${fmtRatio(r.speedup)} within noise ${interval}`;
  return `${fmtRatio(r.speedup)} ${interval}`;
}

/** The columns the table shows in every row; the others open under a row (its ▸). */
export const MAIN_COLUMNS = ["step (median)", "latency (median)", "speed-up (95%)", "peak mem", "cosine"];

/** Split `resultTable`'s columns: indexes (into a row's cells) of the main columns, and
 * of the detail columns. The loss column (`lossHead`) is a main one. */
export function splitColumns(head, lossHead) {
  const main = [];
  const detail = [];
  head.slice(1).forEach((h, i) => {
    if (MAIN_COLUMNS.includes(h) || (lossHead && h === lossHead)) main.push(i);
    else detail.push(i);
  });
  return { main, detail };
}

/** Two rows side by side: [figure, a, b, b against a] for each column they both have. */
export function sideBySide(a, b, mode, lossHead) {
  const { head, body } = resultTable([a, b], mode, lossHead);
  const [ra, rb] = body;
  if (!ra.cells || !rb.cells) return [];
  const ratio = (x, y) => (x && y ? `${(y / x).toFixed(2)}×` : "");
  const raw = { "step (median)": "step_time", "latency (median)": "step_time", "peak mem": "peak_memory", "samples/s": "throughput" };
  return head.slice(1).map((h, i) => {
    const key = raw[h];
    const diff = key ? ratio(a[key], b[key]) : ra.cells[i] === rb.cells[i] ? "same" : "";
    return [h, ra.cells[i], rb.cells[i], diff];
  });
}

/** @typedef {[string, (r: import("./_contract_types").OptimizeRow) => string]} Column a results column: header, cell of a row */

/** The results table as text: {head, body}; a body entry is {label, cells} or
 * {label, error}. Columns follow the mode measured and what the rows carry. */
export function resultTable(rows, mode, lossHead) {
  const inf = mode === "inference";
  const spread = (r) => (r.step_q1 == null ? "-" : `${fmtTime(r.step_q1)} – ${fmtTime(r.step_q3)}`);
  /** @type {Column[]} */
  const cols = [
    [inf ? "latency (median)" : "step (median)", (r) => num(r.step_median ?? r.step_time, fmtTime)],
    ["IQR", spread],
    ["steps", (r) => String(r.step_n ?? "-")],
    ...(inf ? [/** @type {Column} */ (["samples/s", (r) => num(r.throughput, fmtCount)])] : []),
    ["speed-up (95%)", speedupText],
  ];
  if (some(rows, "export_time")) cols.push(["export", (r) => num(r.export_time, fmtTime)]);
  if (some(rows, "graph_breaks")) cols.push(["graph breaks", (r) => num(r.graph_breaks, String)]);
  if (some(rows, "compile_time")) {
    cols.push(["compile", (r) => num(r.compile_time, fmtTime)]);
    cols.push(["break-even", (r) => (r.compile_time == null ? "-" : r.break_even == null ? "never" : `${Math.round(r.break_even)} steps`)]);
  }
  if (some(rows, "peak_memory")) cols.push(["peak mem", (r) => num(r.peak_memory, fmtBytes)]);
  cols.push(["max abs", (r) => num(r.max_abs, (x) => x.toExponential(1))]);
  cols.push(["rel", (r) => num(r.rel, (x) => x.toExponential(1))]);
  cols.push(["cosine", (r) => num(r.cosine, (x) => x.toFixed(5))]);
  if (lossHead) cols.push([lossHead, (r) => num(r.loss, (x) => x.toPrecision(4))]);
  cols.push([
    "first drift",
    (r) => (r.drift_path == null ? "-" : r.drift_rel == null ? r.drift_path : `${r.drift_path} (rel ${r.drift_rel.toExponential(1)})`),
  ]);
  const sizes = [...new Set(rows.flatMap((r) => (r.per_batch || []).map((b) => b.batch_size)))].sort((a, b) => a - b);
  for (const n of sizes) {
    cols.push([
      `batch ${n}`,
      (r) => {
        const b = (r.per_batch || []).find((x) => x.batch_size === n);
        if (!b) return "-";
        if (b.error) return `error: ${b.error}`;
        return `${fmtTime(b.step_time)} · ${fmtCount(b.throughput)}/s · ${fmtRatio(b.speedup)}`;
      },
    ]);
  }
  const body = rows.map((r) => (r.error ? { label: r.label, error: r.error } : { label: r.label, cells: cols.map(([, f]) => f(r)) }));
  return { head: ["recipe", ...cols.map(([h]) => h)], body };
}

/** @typedef {import("./_contract_types").OptimizePanelTraits} Traits the synced traits (labkit/views/_contract.py) */
/** @param {import("./_contract_types").RenderContext<Traits>} ctx anywidget's model and element */
function render({ model, el: root }) {
  const style = el("style", { text: THEME + CSS });
  const box = el("div", { class: "lk-opt", "data-testid": "optimize-panel" });
  root.append(style, box);

  const setRecipe = (name, value, kind) => {
    model.set("recipe_state", withField(model.get("recipe_state"), name, value, kind));
    model.save_changes();
  };

  // mode, then one control per Recipe field, as Python describes them
  const controls = el("div", { class: "lk-row" });
  const modeSel = el("select", { "data-testid": "opt-mode" });
  for (const m of model.get("choices").modes || []) modeSel.append(el("option", { value: m, text: m }));
  modeSel.addEventListener("change", () => {
    model.set("mode", modeSel.value);
    model.save_changes();
  });
  controls.append(el("label", {}, "mode", modeSel));
  const inputs = {};
  const labels = {};
  for (const f of model.get("choices").fields || []) {
    let input;
    if (f.kind === "select") {
      input = el("select", {});
      for (const o of f.options || []) {
        const opt = el("option", { value: o.value, text: o.label });
        if (o.disabled) opt.disabled = true;
        if (o.title) opt.title = o.title;
        input.append(opt);
      }
      input.addEventListener("change", () => setRecipe(f.name, input.value, f.kind));
    } else if (f.kind === "check") {
      input = el("input", { type: "checkbox" });
      input.addEventListener("change", () => setRecipe(f.name, input.checked, f.kind));
    } else {
      input = el("input", { type: "text", placeholder: f.placeholder || "", size: "28" });
      input.addEventListener("change", () => setRecipe(f.name, input.value, f.kind));
    }
    input.setAttribute("data-testid", `opt-${f.name}`);
    inputs[f.name] = input;
    labels[f.name] = f.kind === "check" ? el("label", {}, input, f.label) : el("label", {}, f.label, input);
    controls.append(labels[f.name]);
  }
  const sizes = el("input", { type: "text", size: "10", placeholder: "e.g. 1, 32", "data-testid": "opt-batch_sizes" });
  sizes.addEventListener("change", () => {
    const got = parseSizes(sizes.value);
    if (got === null) {
      error.textContent = `batch sizes must be integers >= 1, separated by commas; got "${sizes.value}"`;
      return;
    }
    model.set("batch_sizes", got);
    model.save_changes();
  });
  const sizesLabel = el("label", { title: "inference: also time each recipe at these batch sizes" }, "batch sizes", sizes);
  controls.append(sizesLabel);
  const hints = el("ul", { class: "lk-hint", "data-testid": "opt-hints" });
  const notice = el("div", { class: "lk-notice", "data-testid": "opt-notice" });

  const actions = el("div", { class: "lk-row" });
  const measure = el("button", { "data-testid": "opt-measure", text: "Measure" });
  const apply = el("button", { "data-testid": "opt-apply", text: "Apply" });
  const clear = el("button", {
    "data-testid": "opt-clear",
    text: "Clear rows",
    title: "drop the measured rows (the baseline stays measured)",
  });
  clear.addEventListener("click", () => model.send({ type: "clear" }));
  measure.addEventListener("click", () => model.send({ type: "measure" }));
  apply.addEventListener("click", () => model.send({ type: "apply" }));
  const bar = el("div", { class: "lk-progress" }, el("div"));
  const status = el("span", { "data-testid": "opt-status" });
  actions.append(measure, apply, clear, bar, status);

  const error = el("div", { class: "lk-error", "data-testid": "opt-error" });
  const results = el("div", { "data-testid": "opt-results" });
  box.append(controls, hints, notice, actions, error, results);

  const syncRecipe = () => {
    const r = model.get("recipe_state");
    const mode = model.get("mode");
    const locks = model.get("locks");
    modeSel.value = mode;
    hints.replaceChildren();
    for (const f of model.get("choices").fields || []) {
      const input = inputs[f.name];
      if (f.kind === "check") input.checked = !!r[f.name];
      else if (f.kind === "list") {
        if (document.activeElement !== input) input.value = (r[f.name] || []).join(", ");
      } else if (f.kind === "kwargs") {
        if (document.activeElement !== input) input.value = kwargsText(r[f.name]);
      } else input.value = shown(r[f.name]);
      const refused = model.get("option_locks")?.[f.name] || {};
      if (f.kind === "select") {
        for (const opt of input.options) {
          const o = (f.options || []).find((x) => String(x.value) === opt.value);
          opt.disabled = !!o?.disabled || opt.value in refused;
          opt.title = refused[opt.value] || o?.title || "";
        }
      }
      const st = controlState(f, mode, locks, r[f.name]);
      input.disabled = st.disabled;
      labels[f.name].title = st.title;
      labels[f.name].classList.toggle("lk-off", st.disabled);
    }
    for (const line of hintLines(model.get("choices").fields || [], mode, locks)) hints.append(el("li", { text: line }));
    sizes.disabled = mode !== "inference";
    sizesLabel.classList.toggle("lk-off", sizes.disabled);
    if (document.activeElement !== sizes) sizes.value = (model.get("batch_sizes") || []).join(", ");
    notice.textContent = model.get("notice");
  };
  const syncRun = () => {
    const running = model.get("running");
    measure.disabled = running;
    bar.firstChild.style.width = `${Math.round(100 * model.get("progress"))}%`;
    const applied = model.get("applied_label");
    status.textContent = model.get("status") + (applied ? `  (applied: ${applied})` : "");
    error.textContent = model.get("error");
  };
  let picked = [];
  let opened = new Set();
  const syncResults = () => {
    results.replaceChildren();
    const rows = model.get("results") || [];
    if (!rows.length) return;
    const mode = model.get("measured_mode") || model.get("mode");
    const lossHead = model.get("loss_label");
    const { head, body } = resultTable(rows, mode, lossHead);
    const { main, detail } = splitColumns(head, lossHead);
    const speedCol = head.indexOf("speed-up (95%)") - 1;
    const all = el("button", {
      class: "lk-more",
      "data-testid": "opt-details-all",
      text: "details",
      title: "open every row's other figures",
    });
    all.addEventListener("click", () => {
      const everyOpen = body.every((r) => r.error || opened.has(r.label));
      opened = new Set(everyOpen ? [] : body.map((r) => r.label));
      syncResults();
    });
    const table = el(
      "table",
      { "data-testid": "opt-table" },
      el("tr", {}, el("th", {}, all, "recipe"), ...main.map((i) => el("th", { text: head[i + 1] }))),
    );
    picked = picked.filter((l) => rows.some((r) => r.label === l));
    for (const r of body) {
      const label = el("span", { text: r.label, title: "click two rows to compare them side by side", "data-testid": "opt-row-label" });
      label.style.cursor = "pointer";
      const open = opened.has(r.label);
      const more = el("button", {
        class: "lk-more",
        "data-testid": "opt-row-more",
        "aria-expanded": String(open),
        title: "the row's other figures",
        text: open ? "▾" : "▸",
      });
      more.addEventListener("click", () => {
        if (opened.has(r.label)) opened.delete(r.label);
        else opened.add(r.label);
        syncResults();
      });
      const name = el("td", {}, ...(r.error ? [] : [more]), label);
      const tr = el("tr", { class: picked.includes(r.label) ? "lk-picked" : "", "data-row": r.label }, name);
      label.addEventListener("click", () => {
        picked = picked.includes(r.label) ? picked.filter((l) => l !== r.label) : [...picked, r.label].slice(-2);
        syncResults();
      });
      if (r.error) {
        tr.append(el("td", { class: "lk-failed", colspan: String(main.length), "data-testid": "opt-failed", text: `failed: ${r.error}` }));
        table.append(tr);
        continue;
      }
      for (const i of main) tr.append(el("td", { text: r.cells[i], class: i === speedCol ? "lk-speedup" : "" }));
      table.append(tr);
      if (open) {
        const facts = el("div", { class: "lk-facts" });
        for (const i of detail) {
          const long = r.cells[i].length > 40 ? " lk-long" : "";
          facts.append(
            el(
              "span",
              { class: `lk-fact${long}`, "data-fact": head[i + 1] },
              el("span", { class: "lk-fact-name", text: head[i + 1] }),
              el("span", { class: "lk-fact-value", text: r.cells[i] }),
            ),
          );
        }
        table.append(el("tr", { class: "lk-detail", "data-testid": "opt-detail" }, el("td", { colspan: String(main.length + 1) }, facts)));
      }
    }
    const chart = el("div", { "data-testid": "opt-chart" });
    const max = Math.max(1, ...rows.map((r) => r.speedup || 0));
    for (const r of rows) {
      if (r.speedup == null) continue;
      const fill = el("div", { class: r.speedup < 1 ? "lk-slow" : "" });
      fill.style.width = `${Math.round((200 * r.speedup) / max)}px`;
      chart.append(
        el(
          "div",
          { class: `lk-bar${r.within_noise ? " lk-noise" : ""}` },
          el("span", { text: r.label }),
          fill,
          el("span", { text: speedupText(r) }),
        ),
      );
    }
    const notes = el("ul", { class: "lk-notes" });
    for (const r of rows) for (const n of r.notes || []) notes.append(el("li", { text: `${r.label}: ${n}` }));
    const pair = el("div", { "data-testid": "opt-pair" });
    const [a, b] = picked.length === 2 ? picked.map((l) => rows.find((r) => r.label === l)) : [];
    if (a && b) {
      const lines = sideBySide(a, b, mode, model.get("loss_label"));
      const t2 = el("table", {}, el("tr", {}, ...["", a.label, b.label, `${b.label} vs ${a.label}`].map((h) => el("th", { text: h }))));
      for (const line of lines) t2.append(el("tr", {}, ...line.map((c) => el("td", { text: c }))));
      pair.append(
        el("div", { class: "lk-notice", text: "side by side (click a row name to change the pair):" }),
        el("div", { class: "lk-scroll" }, t2),
      );
    }
    const suggestion = model.get("suggestion");
    const next = el("div", { class: "lk-notice", "data-testid": "opt-suggestion", text: suggestion ? `next: ${suggestion} ` : "" });
    if (suggestion && !suggestion.startsWith("(")) {
      const go = el("button", { "data-testid": "opt-measure-suggestion", text: "Measure it" });
      go.disabled = model.get("running");
      go.addEventListener("click", () => model.send({ type: "measure_suggestion" }));
      next.append(go);
    }
    results.append(el("div", { class: "lk-scroll", "data-testid": "opt-scroll" }, table), pair, next, chart, notes);
  };

  syncRecipe();
  syncRun();
  syncResults();
  /** @type {(keyof Traits)[]} */
  const recipeTraits = ["recipe_state", "mode", "locks", "option_locks", "batch_sizes", "notice"];
  /** @type {(keyof Traits)[]} */
  const runTraits = ["running", "progress", "status", "error", "applied_label"];
  for (const k of recipeTraits) model.on(`change:${k}`, syncRecipe);
  for (const k of runTraits) model.on(`change:${k}`, syncRun);
  model.on("change:results", syncResults);
  model.on("change:suggestion", syncResults);
}

export default { render };
