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

/** @typedef {import("./_contract_types").OptimizeRow} Row a measured recipe */
/** @typedef {import("./_contract_types").RecipeField} Field a control's description from Python */
/** @typedef {Record<string, string>} Locks control -> why it does nothing now */
/** @typedef {Partial<Row> & {label: string}} RowLike a row as the table reads it (tests pass parts) */
/** @typedef {{name: string, label?: string, kind?: string, hints?: Partial<Record<string, string>>, default?: unknown}} FieldLike a control as its state reads it */

/**
 * An element with attributes ("text": its text) and children.
 * @param {string} tag @param {Record<string, string>} [attrs] @param {...(Node | string)} kids
 * @returns {HTMLElement}
 */
function el(tag, attrs = {}, ...kids) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const kid of kids) node.append(kid);
  return node;
}

/** @template T @param {T | null | undefined} x @param {(v: T) => string} f */
const num = (x, f) => (x === null || x === undefined ? "-" : f(x));
/** @param {RowLike[]} rows @param {keyof Row} key */
const some = (rows, key) => rows.some((r) => !r.error && r[key] !== null && r[key] !== undefined);

/**
 * Recipe dict -> new dict with one field changed. A list field (checkpoint) takes
 * comma-separated text; a select's "none" stands for null. Exported for tests.
 * @template {{}} R the recipe dict (`recipe_state`)
 * @param {R} recipe @param {string} name @param {unknown} value @param {string} [kind]
 * @returns {R & Record<string, unknown>}
 */
export function withField(recipe, name, value, kind) {
  /** @type {Record<string, unknown>} */
  const next = Object.fromEntries(Object.entries(recipe));
  if (kind === "kwargs") {
    next[name] = parseKwargs(String(value));
  } else if (kind === "list" || name === "checkpoint") {
    next[name] = String(value)
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
  } else {
    next[name] = value === "none" ? null : value;
  }
  return /** @type {R & Record<string, unknown>} */ (next);
}

/** @type {Record<string, boolean | null>} Python's literals (and JSON's) */
const LITERALS = { True: true, true: true, False: false, false: false, None: null, null: null };

/**
 * "use_cache=False, n=2" -> {use_cache: false, n: 2}: Python-style literals (True/False/
 * None, numbers), anything else a string. Exported for tests.
 * @param {string} text
 * @returns {Record<string, unknown>}
 */
export function parseKwargs(text) {
  /** @type {Record<string, unknown>} */
  const out = {};
  for (const part of String(text)
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [k, ...rest] = part.split("=");
    const v = rest.join("=").trim();
    out[k.trim()] = v in LITERALS ? LITERALS[v] : v !== "" && !Number.isNaN(Number(v)) ? Number(v) : v.replace(/^['"]|['"]$/g, "");
  }
  return out;
}

/** {use_cache: false} -> "use_cache=False" (as Python writes it). @param {unknown} obj */
export function kwargsText(obj) {
  /** @param {unknown} v */
  const py = (v) => (v === true ? "True" : v === false ? "False" : v === null ? "None" : String(v));
  return Object.entries(obj || {})
    .map(([k, v]) => `${k}=${py(v)}`)
    .join(", ");
}

/** The select value that shows a recipe field (null -> "none"). @param {unknown} value */
export const shown = (value) => (value === null || value === undefined ? "none" : String(value));

/** "1, 8,32" -> [1, 8, 32]; null when some entry is not an integer >= 1. @param {string} text */
export function parseSizes(text) {
  const parts = String(text)
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const sizes = parts.map(Number);
  return sizes.every((n) => Number.isInteger(n) && n >= 1) ? sizes : null;
}

/**
 * Whether a recipe value is the field's default (null and "none" alike; lists by content).
 * @param {Omit<FieldLike, "name">} field @param {unknown} value
 */
export function isDefault(field, value) {
  if (field.kind === "kwargs") return Object.keys(value || {}).length === 0;
  if (field.kind === "list") return JSON.stringify(value || []) === JSON.stringify(field.default || []);
  if (field.kind === "check") return !!value === !!field.default;
  return shown(value) === shown(field.default);
}

/**
 * A control's state: the reason it does nothing now (Python's `locks`) and the hint for
 * this mode. It is disabled while it holds its default; a value set before stays
 * editable, so that it can be cleared.
 * @param {FieldLike} field @param {string} mode @param {Locks | null | undefined} locks @param {unknown} [value]
 */
export function controlState(field, mode, locks, value) {
  const why = locks?.[field.name];
  const disabled = !!why && (value === undefined || isDefault(field, value));
  return { disabled, title: why || "", hint: field.hints?.[mode] || "" };
}

/**
 * The lines under the controls: why each disabled control is off, else its hint for
 * the mode; controls with the same text share one line.
 * @param {FieldLike[]} fields @param {string} mode @param {Locks | null | undefined} locks
 */
export function hintLines(fields, mode, locks) {
  /** @type {Map<string, string[]>} */
  const byText = new Map();
  for (const f of fields) {
    const st = controlState(f, mode, locks);
    const text = st.title || st.hint;
    if (text) byText.set(text, [...(byText.get(text) || []), f.label ?? f.name]);
  }
  return [...byText].map(([text, labels]) => `${labels.join(", ")}: ${text}`);
}

/**
 * A speedup with its interval: "1.12× (1.05–1.19)", "1.01× within noise (0.97–1.06)"
 * when the interval spans 1.00×, the bare ratio for the baseline.
 * @param {Partial<Pick<Row, "speedup" | "speedup_low" | "speedup_high" | "within_noise">>} r
 */
export function speedupText(r) {
  if (r.speedup == null) return "-";
  if (r.speedup_low == null || r.speedup_high == null) return fmtRatio(r.speedup);
  const interval = `(${fmtRatio(r.speedup_low)}–${fmtRatio(r.speedup_high)})`;
  if (r.within_noise) return `${fmtRatio(r.speedup)} within noise ${interval}`;
  return `${fmtRatio(r.speedup)} ${interval}`;
}

/** The columns the table shows in every row; the others open under a row (its ▸). */
export const MAIN_COLUMNS = ["step (median)", "latency (median)", "speed-up (95%)", "peak mem", "cosine"];

/**
 * Split `resultTable`'s columns: indexes (into a row's cells) of the main columns, and
 * of the detail columns. The loss column (`lossHead`) is a main one.
 * @param {string[]} head @param {string} [lossHead]
 */
export function splitColumns(head, lossHead) {
  /** @type {number[]} */
  const main = [];
  /** @type {number[]} */
  const detail = [];
  head.slice(1).forEach((h, i) => {
    if (MAIN_COLUMNS.includes(h) || (lossHead && h === lossHead)) main.push(i);
    else detail.push(i);
  });
  return { main, detail };
}

/** @type {Record<string, "step_time" | "peak_memory" | "throughput">} a figure's raw field, for ratios */
const RAW = { "step (median)": "step_time", "latency (median)": "step_time", "peak mem": "peak_memory", "samples/s": "throughput" };

/**
 * Two rows side by side: [figure, a, b, b against a] for each column they both have.
 * @param {RowLike} a @param {RowLike} b @param {string} mode @param {string} [lossHead]
 * @returns {string[][]}
 */
export function sideBySide(a, b, mode, lossHead) {
  const { head, body } = resultTable([a, b], mode, lossHead);
  const [ra, rb] = body;
  if (!ra.cells || !rb.cells) return [];
  const [ca, cb] = [ra.cells, rb.cells];
  /** @param {number | null | undefined} x @param {number | null | undefined} y */
  const ratio = (x, y) => (x && y ? `${(y / x).toFixed(2)}×` : "");
  return head.slice(1).map((h, i) => {
    const key = RAW[h];
    const diff = key ? ratio(a[key], b[key]) : ca[i] === cb[i] ? "same" : "";
    return [h, ca[i], cb[i], diff];
  });
}

/** @typedef {[string, (r: RowLike) => string]} Column a results column: header, cell of a row */
/** @typedef {{label: string, cells?: string[], error?: string}} BodyRow a row of the table: cells, or its error */

/**
 * The columns that appear only when a row carries their figure (export, compile).
 * @param {RowLike[]} rows
 * @returns {Column[]}
 */
function optionalColumns(rows) {
  /** @type {Column[]} */
  const cols = [];
  if (some(rows, "export_time")) cols.push(["export", (r) => num(r.export_time, fmtTime)]);
  if (some(rows, "graph_breaks")) cols.push(["graph breaks", (r) => num(r.graph_breaks, String)]);
  if (some(rows, "compile_time")) {
    cols.push(["compile", (r) => num(r.compile_time, fmtTime)]);
    cols.push(["break-even", (r) => (r.compile_time == null ? "-" : r.break_even == null ? "never" : `${Math.round(r.break_even)} steps`)]);
  }
  if (some(rows, "peak_memory")) cols.push(["peak mem", (r) => num(r.peak_memory, fmtBytes)]);
  return cols;
}

/**
 * One column per batch size any row was timed at (inference, `batch_sizes`).
 * @param {RowLike[]} rows
 * @returns {Column[]}
 */
function batchColumns(rows) {
  const sizes = [...new Set(rows.flatMap((r) => (r.per_batch || []).map((b) => b.batch_size)))].sort((a, b) => a - b);
  return sizes.map((n) => [
    `batch ${n}`,
    (r) => {
      const b = (r.per_batch || []).find((x) => x.batch_size === n);
      if (!b) return "-";
      if (b.error) return `error: ${b.error}`;
      return `${fmtTime(b.step_time)} · ${fmtCount(b.throughput)}/s · ${fmtRatio(b.speedup)}`;
    },
  ]);
}

/**
 * The results table as text: {head, body}; a body entry is {label, cells} or
 * {label, error}. Columns follow the mode measured and what the rows carry.
 * @param {RowLike[]} rows @param {string} mode @param {string} [lossHead]
 * @returns {{head: string[], body: BodyRow[]}}
 */
export function resultTable(rows, mode, lossHead) {
  const inf = mode === "inference";
  /** @param {RowLike} r */
  const spread = (r) => (r.step_q1 == null ? "-" : `${fmtTime(r.step_q1)} – ${fmtTime(r.step_q3)}`);
  /** @type {Column[]} */
  const cols = [
    [inf ? "latency (median)" : "step (median)", (r) => num(r.step_median ?? r.step_time, fmtTime)],
    ["IQR", spread],
    ["steps", (r) => String(r.step_n ?? "-")],
    ...(inf ? [/** @type {Column} */ (["samples/s", (r) => num(r.throughput, fmtCount)])] : []),
    ["speed-up (95%)", speedupText],
    ...optionalColumns(rows),
  ];
  cols.push(["max abs", (r) => num(r.max_abs, (x) => x.toExponential(1))]);
  cols.push(["rel", (r) => num(r.rel, (x) => x.toExponential(1))]);
  cols.push(["cosine", (r) => num(r.cosine, (x) => x.toFixed(5))]);
  if (lossHead) cols.push([lossHead, (r) => num(r.loss, (x) => x.toPrecision(4))]);
  cols.push([
    "first drift",
    (r) => (r.drift_path == null ? "-" : r.drift_rel == null ? r.drift_path : `${r.drift_path} (rel ${r.drift_rel.toExponential(1)})`),
  ]);
  cols.push(...batchColumns(rows));
  const body = rows.map((r) => (r.error ? { label: r.label, error: r.error } : { label: r.label, cells: cols.map(([, f]) => f(r)) }));
  return { head: ["recipe", ...cols.map(([h]) => h)], body };
}

/**
 * What the user sees of the results besides the rows themselves.
 * @typedef {object} OptimizeState
 * @property {Set<string>} opened the rows whose other figures are open (by label)
 * @property {string[]} picked the rows picked to compare side by side: at most two, the last picked last
 */

/** A row opened or closed. @param {OptimizeState} state @param {string} label @returns {OptimizeState} */
export function toggleOpened(state, label) {
  const opened = new Set(state.opened);
  if (opened.has(label)) opened.delete(label);
  else opened.add(label);
  return { ...state, opened };
}

/**
 * "details": every row opened, or all closed when every one was open already.
 * @param {OptimizeState} state @param {BodyRow[]} body @returns {OptimizeState}
 */
export function toggleAllOpened(state, body) {
  const everyOpen = body.every((r) => r.error || state.opened.has(r.label));
  return { ...state, opened: new Set(everyOpen ? [] : body.map((r) => r.label)) };
}

/** A row's name clicked: picked (the oldest of three dropped) or unpicked. @param {OptimizeState} state @param {string} label @returns {OptimizeState} */
export function togglePicked(state, label) {
  const picked = state.picked.includes(label) ? state.picked.filter((l) => l !== label) : [...state.picked, label].slice(-2);
  return { ...state, picked };
}

/**
 * Everything the results area shows, as data: the drawing below only makes elements of it.
 * @typedef {object} ResultsView
 * @property {string[]} heads the main columns' headers, after "recipe"
 * @property {{label: string, picked: boolean, open: boolean, error?: string, cells: {text: string, speed: boolean}[], facts: {name: string, value: string, long: boolean}[]}[]} rows
 * @property {{a: string, b: string, lines: string[][]} | null} pair the two picked rows side by side
 * @property {{text: string, button: boolean}} next the suggestion, and whether it can be measured
 * @property {{label: string, width: number, slow: boolean, noise: boolean, text: string}[]} bars the speed-up chart
 * @property {string[]} notes
 */

/**
 * The results area of a state. Pure.
 * @param {RowLike[]} rows @param {OptimizeState} state
 * @param {{mode: string, lossHead: string, suggestion: string}} opts the mode measured, the loss column's header
 * @returns {ResultsView}
 */
export function resultsView(rows, state, { mode, lossHead, suggestion }) {
  const { head, body } = resultTable(rows, mode, lossHead);
  const { main, detail } = splitColumns(head, lossHead);
  const speedCol = head.indexOf("speed-up (95%)") - 1;
  const table = body.map((r) => {
    const cells = r.cells || [];
    const open = state.opened.has(r.label);
    return {
      label: r.label,
      picked: state.picked.includes(r.label),
      open,
      ...(r.error ? { error: r.error } : {}),
      cells: main.map((i) => ({ text: cells[i], speed: i === speedCol })),
      facts: open && !r.error ? detail.map((i) => ({ name: head[i + 1], value: cells[i], long: cells[i].length > 40 })) : [],
    };
  });
  const [a, b] = state.picked.length === 2 ? state.picked.map((l) => rows.find((r) => r.label === l)) : [];
  const pair = a && b ? { a: a.label, b: b.label, lines: sideBySide(a, b, mode, lossHead) } : null;
  const max = Math.max(1, ...rows.map((r) => r.speedup || 0));
  const bars = rows.flatMap((r) =>
    r.speedup == null
      ? []
      : [
          {
            label: r.label,
            width: Math.round((200 * r.speedup) / max),
            slow: r.speedup < 1,
            noise: !!r.within_noise,
            text: speedupText(r),
          },
        ],
  );
  const notes = rows.flatMap((r) => (r.notes || []).map((n) => `${r.label}: ${n}`));
  const next = { text: suggestion ? `next: ${suggestion} ` : "", button: !!suggestion && !suggestion.startsWith("(") };
  return { heads: main.map((i) => head[i + 1]), rows: table, pair, next, bars, notes };
}

/**
 * What each control shows for the recipe and mode: value, disabled and why, its options'
 * states (Python's `option_locks` refuse some). Pure.
 * @param {Field[]} fields @param {object} recipe `recipe_state` @param {string} mode @param {Locks} locks
 * @param {Record<string, Record<string, string>> | null | undefined} optionLocks
 */
export function controlsView(fields, recipe, mode, locks, optionLocks) {
  return fields.map((f) => {
    /** @type {unknown} */
    const v = Reflect.get(recipe, f.name);
    const value =
      f.kind === "check"
        ? !!v
        : f.kind === "list"
          ? /** @type {string[]} */ (v || []).join(", ")
          : f.kind === "kwargs"
            ? kwargsText(v)
            : shown(v);
    const refused = optionLocks?.[f.name] || {};
    const options = (f.options || []).map((o) => {
      const val = String(o.value);
      return { value: val, disabled: !!o.disabled || val in refused, title: refused[val] || o.title || "" };
    });
    return { name: f.name, kind: f.kind, value, options, ...controlState(f, mode, locks, v) };
  });
}

/** What the panel's elements do (the wiring's handlers). @typedef {object} PanelEvents
 * @property {(msg: {type: string}) => void} send a message to the kernel (measure, apply, clear, measure_suggestion)
 * @property {(name: string, value: unknown, kind: string) => void} setField a control changed
 * @property {(mode: string) => void} setMode
 * @property {(text: string) => void} setSizes the batch sizes typed in
 * @property {(label: string) => void} toggleOpened @property {() => void} toggleAll @property {(label: string) => void} togglePicked
 */

/**
 * The controls' elements, one per field as Python describes them, then the batch sizes.
 * @param {import("./_contract_types").RecipeChoices} choices @param {PanelEvents} on
 */
function buildControls(choices, on) {
  const row = el("div", { class: "lk-row" });
  const modeSel = /** @type {HTMLSelectElement} */ (el("select", { "data-testid": "opt-mode" }));
  for (const m of choices.modes || []) modeSel.append(el("option", { value: m, text: m }));
  modeSel.addEventListener("change", () => on.setMode(modeSel.value));
  row.append(el("label", {}, "mode", modeSel));
  /** @type {Record<string, HTMLInputElement | HTMLSelectElement>} */
  const inputs = {};
  /** @type {Record<string, HTMLElement>} */
  const labels = {};
  for (const f of choices.fields || []) {
    const input = controlOf(f, on);
    input.setAttribute("data-testid", `opt-${f.name}`);
    inputs[f.name] = input;
    labels[f.name] = f.kind === "check" ? el("label", {}, input, f.label) : el("label", {}, f.label, input);
    row.append(labels[f.name]);
  }
  const sizes = /** @type {HTMLInputElement} */ (
    el("input", { type: "text", size: "10", placeholder: "e.g. 1, 32", "data-testid": "opt-batch_sizes" })
  );
  sizes.addEventListener("change", () => on.setSizes(sizes.value));
  const sizesLabel = el("label", { title: "inference: also time each recipe at these batch sizes" }, "batch sizes", sizes);
  row.append(sizesLabel);
  return { row, modeSel, inputs, labels, sizes, sizesLabel };
}

/** The input of one field: a select, a checkbox or a text box. @param {Field} f @param {PanelEvents} on */
function controlOf(f, on) {
  if (f.kind === "select") {
    const input = /** @type {HTMLSelectElement} */ (el("select", {}));
    for (const o of f.options || []) {
      const opt = /** @type {HTMLOptionElement} */ (el("option", { value: o.value, text: o.label }));
      if (o.disabled) opt.disabled = true;
      if (o.title) opt.title = o.title;
      input.append(opt);
    }
    input.addEventListener("change", () => on.setField(f.name, input.value, f.kind));
    return input;
  }
  const input = /** @type {HTMLInputElement} */ (
    el("input", f.kind === "check" ? { type: "checkbox" } : { type: "text", placeholder: f.placeholder || "", size: "28" })
  );
  input.addEventListener("change", () => on.setField(f.name, f.kind === "check" ? input.checked : input.value, f.kind));
  return input;
}

/**
 * Shows controlsView on the controls; a text box being typed in keeps its text.
 * @param {ReturnType<typeof buildControls>} c @param {ReturnType<typeof controlsView>} view
 */
function syncControls(c, view) {
  for (const v of view) {
    const input = c.inputs[v.name];
    if (typeof v.value === "boolean") /** @type {HTMLInputElement} */ (input).checked = v.value;
    else if ((v.kind !== "list" && v.kind !== "kwargs") || document.activeElement !== input) input.value = v.value;
    if (input instanceof HTMLSelectElement) {
      for (const opt of input.options) {
        const o = v.options.find((x) => x.value === opt.value);
        opt.disabled = !!o?.disabled;
        opt.title = o?.title || "";
      }
    }
    input.disabled = v.disabled;
    c.labels[v.name].title = v.title;
    c.labels[v.name].classList.toggle("lk-off", v.disabled);
  }
}

/** The results table: main columns, a ▸ per row opening its other figures. @param {ResultsView} view @param {PanelEvents} on */
function resultsTable(view, on) {
  const all = el("button", {
    class: "lk-more",
    "data-testid": "opt-details-all",
    text: "details",
    title: "open every row's other figures",
  });
  all.addEventListener("click", () => on.toggleAll());
  const table = el(
    "table",
    { "data-testid": "opt-table" },
    el("tr", {}, el("th", {}, all, "recipe"), ...view.heads.map((t) => el("th", { text: t }))),
  );
  for (const r of view.rows) {
    const label = el("span", { text: r.label, title: "click two rows to compare them side by side", "data-testid": "opt-row-label" });
    label.style.cursor = "pointer";
    label.addEventListener("click", () => on.togglePicked(r.label));
    const more = el("button", {
      class: "lk-more",
      "data-testid": "opt-row-more",
      "aria-expanded": String(r.open),
      title: "the row's other figures",
      text: r.open ? "▾" : "▸",
    });
    more.addEventListener("click", () => on.toggleOpened(r.label));
    const name = el("td", {}, ...(r.error ? [] : [more]), label);
    const tr = el("tr", { class: r.picked ? "lk-picked" : "", "data-row": r.label }, name);
    table.append(tr);
    if (r.error) {
      tr.append(
        el("td", { class: "lk-failed", colspan: String(view.heads.length), "data-testid": "opt-failed", text: `failed: ${r.error}` }),
      );
      continue;
    }
    for (const c of r.cells) tr.append(el("td", { text: c.text, class: c.speed ? "lk-speedup" : "" }));
    if (!r.open) continue;
    const facts = el("div", { class: "lk-facts" });
    for (const f of r.facts)
      facts.append(
        el(
          "span",
          { class: `lk-fact${f.long ? " lk-long" : ""}`, "data-fact": f.name },
          el("span", { class: "lk-fact-name", text: f.name }),
          el("span", { class: "lk-fact-value", text: f.value }),
        ),
      );
    table.append(
      el("tr", { class: "lk-detail", "data-testid": "opt-detail" }, el("td", { colspan: String(view.heads.length + 1) }, facts)),
    );
  }
  return table;
}

/**
 * The results area's elements: table, side-by-side pair, suggestion, speed-up bars, notes.
 * @param {ResultsView} view @param {PanelEvents} on @param {boolean} running
 */
function resultsElements(view, on, running) {
  const pair = el("div", { "data-testid": "opt-pair" });
  if (view.pair) {
    const { a, b, lines } = view.pair;
    const t2 = el("table", {}, el("tr", {}, ...["", a, b, `${b} vs ${a}`].map((t) => el("th", { text: t }))));
    for (const line of lines) t2.append(el("tr", {}, ...line.map((c) => el("td", { text: c }))));
    pair.append(
      el("div", { class: "lk-notice", text: "side by side (click a row name to change the pair):" }),
      el("div", { class: "lk-scroll" }, t2),
    );
  }
  const next = el("div", { class: "lk-notice", "data-testid": "opt-suggestion", text: view.next.text });
  if (view.next.button) {
    const go = /** @type {HTMLButtonElement} */ (el("button", { "data-testid": "opt-measure-suggestion", text: "Measure it" }));
    go.disabled = running;
    go.addEventListener("click", () => on.send({ type: "measure_suggestion" }));
    next.append(go);
  }
  const chart = el("div", { "data-testid": "opt-chart" });
  for (const bar of view.bars) {
    const fill = el("div", { class: bar.slow ? "lk-slow" : "" });
    fill.style.width = `${bar.width}px`;
    chart.append(
      el("div", { class: `lk-bar${bar.noise ? " lk-noise" : ""}` }, el("span", { text: bar.label }), fill, el("span", { text: bar.text })),
    );
  }
  const notes = el("ul", { class: "lk-notes" });
  for (const n of view.notes) notes.append(el("li", { text: n }));
  return [el("div", { class: "lk-scroll", "data-testid": "opt-scroll" }, resultsTable(view, on)), pair, next, chart, notes];
}

/** @typedef {import("./_contract_types").OptimizePanelTraits} Traits the synced traits (labkit/views/_contract.py) */
/** @typedef {import("./_contract_types").Model<Traits>} Model */

/** The Measure / Apply / Clear buttons, the progress bar and the status line. @param {PanelEvents} on */
function buildActions(on) {
  /** @type {Record<string, HTMLButtonElement>} */
  const buttons = {};
  for (const [type, text, title] of [
    ["measure", "Measure", ""],
    ["apply", "Apply", ""],
    ["clear", "Clear rows", "drop the measured rows (the baseline stays measured)"],
  ]) {
    buttons[type] = /** @type {HTMLButtonElement} */ (el("button", { "data-testid": `opt-${type}`, text, ...(title ? { title } : {}) }));
    buttons[type].addEventListener("click", () => on.send({ type }));
  }
  const fill = el("div");
  const status = el("span", { "data-testid": "opt-status" });
  const row = el(
    "div",
    { class: "lk-row" },
    buttons.measure,
    buttons.apply,
    buttons.clear,
    el("div", { class: "lk-progress" }, fill),
    status,
  );
  return { row, measure: buttons.measure, fill, status };
}

/**
 * The panel's elements, in order: controls, hints, notice, actions, error, results.
 * @param {Model} model @param {PanelEvents} on
 */
function buildPanel(model, on) {
  return {
    controls: buildControls(model.get("choices"), on),
    hints: el("ul", { class: "lk-hint", "data-testid": "opt-hints" }),
    notice: el("div", { class: "lk-notice", "data-testid": "opt-notice" }),
    actions: buildActions(on),
    error: el("div", { class: "lk-error", "data-testid": "opt-error" }),
    results: el("div", { "data-testid": "opt-results" }),
  };
}

/** The controls, hints and notice showing the recipe and mode. @param {Model} model @param {ReturnType<typeof buildPanel>} p */
function syncRecipe(model, p) {
  const { controls } = p;
  const mode = model.get("mode");
  const fields = model.get("choices").fields || [];
  controls.modeSel.value = mode;
  syncControls(controls, controlsView(fields, model.get("recipe_state"), mode, model.get("locks"), model.get("option_locks")));
  p.hints.replaceChildren(...hintLines(fields, mode, model.get("locks")).map((line) => el("li", { text: line })));
  controls.sizes.disabled = mode !== "inference";
  controls.sizesLabel.classList.toggle("lk-off", controls.sizes.disabled);
  if (document.activeElement !== controls.sizes) controls.sizes.value = (model.get("batch_sizes") || []).join(", ");
  p.notice.textContent = model.get("notice");
}

/** The actions and error showing a measurement under way or ended. @param {Model} model @param {ReturnType<typeof buildPanel>} p */
function syncRun(model, p) {
  p.actions.measure.disabled = model.get("running");
  p.actions.fill.style.width = `${Math.round(100 * model.get("progress"))}%`;
  const applied = model.get("applied_label");
  p.actions.status.textContent = model.get("status") + (applied ? `  (applied: ${applied})` : "");
  p.error.textContent = model.get("error");
}

/** @param {import("./_contract_types").RenderContext<Traits>} ctx anywidget's model and element */
function render({ model, el: root }) {
  /** @type {OptimizeState} */
  let state = { opened: new Set(), picked: [] };
  const measuredMode = () => model.get("measured_mode") || model.get("mode");
  /** @param {OptimizeState} next */
  const setState = (next) => {
    state = next;
    syncResults();
  };
  /** @type {PanelEvents} */
  const on = {
    send: (msg) => model.send(msg),
    setField(name, value, kind) {
      model.set("recipe_state", withField(model.get("recipe_state"), name, value, kind));
      model.save_changes();
    },
    setMode(mode) {
      model.set("mode", mode);
      model.save_changes();
    },
    setSizes(text) {
      const got = parseSizes(text);
      if (got === null) {
        p.error.textContent = `batch sizes must be integers >= 1, separated by commas; got "${text}"`;
        return;
      }
      model.set("batch_sizes", got);
      model.save_changes();
    },
    toggleOpened: (label) => setState(toggleOpened(state, label)),
    toggleAll: () =>
      setState(toggleAllOpened(state, resultTable(model.get("results") || [], measuredMode(), model.get("loss_label")).body)),
    togglePicked: (label) => setState(togglePicked(state, label)),
  };
  const p = buildPanel(model, on);
  const box = el(
    "div",
    { class: "lk-opt", "data-testid": "optimize-panel" },
    p.controls.row,
    p.hints,
    p.notice,
    p.actions.row,
    p.error,
    p.results,
  );
  root.append(el("style", { text: THEME + CSS }), box);
  const syncResults = () => {
    const rows = model.get("results") || [];
    if (!rows.length) return p.results.replaceChildren();
    state = { ...state, picked: state.picked.filter((l) => rows.some((r) => r.label === l)) };
    const view = resultsView(rows, state, { mode: measuredMode(), lossHead: model.get("loss_label"), suggestion: model.get("suggestion") });
    p.results.replaceChildren(...resultsElements(view, on, model.get("running")));
  };
  const recipe = () => syncRecipe(model, p);
  const run = () => syncRun(model, p);
  recipe();
  run();
  syncResults();
  /** @type {(keyof Traits)[]} */
  const recipeTraits = ["recipe_state", "mode", "locks", "option_locks", "batch_sizes", "notice"];
  /** @type {(keyof Traits)[]} */
  const runTraits = ["running", "progress", "status", "error", "applied_label"];
  for (const k of recipeTraits) model.on(`change:${k}`, recipe);
  for (const k of runTraits) model.on(`change:${k}`, run);
  model.on("change:results", syncResults);
  model.on("change:suggestion", syncResults);
}

export default { render };
