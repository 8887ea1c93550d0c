// ProfileView front end: sortable per-module table and a top-N bar chart.
// Labels and units come from the payload (labkit/views/_payload.py PROFILE_HEADERS,
// METRICS, METRIC_UNITS; the contract is labkit/views/_contract.py ProfilePayload).
// The view's state is its traits (ProfileState: sort, metric, top, selection); the chart and
// the table are pure HTML of it (widgets/test/profile.test.mjs); render wires the events.
import { formatterOf } from "./_units.js";
import { ensureStyles, esc, h, setOptions } from "./_ui.js";

/** @typedef {import("./_contract_types").ProfilePayload} Table the payload (`table` trait) */
/** @typedef {(string | number)[]} Row one module's figures, in `columns` order (the path first) */
/** @typedef {import("./_contract_types").ProfileViewTraits} Traits the synced traits (labkit/views/_contract.py) */
/** @typedef {Pick<Traits, "metric" | "top" | "sort" | "descending" | "selected">} ProfileState what the user sees of the table */

/**
 * The shown columns of a profile payload, in display order: [{ col, index, header, fmt }].
 * A column the rows do not carry (runs of a single recording) is not shown. Exported for tests.
 * @param {Pick<Table, "columns" | "headers">} table
 */
export function shownColumns(table) {
  const index = new Map(table.columns.map((c, i) => [c, i]));
  return Object.entries(table.headers || {}).flatMap(([col, [header, unit]]) => {
    const i = index.get(col);
    return i === undefined ? [] : [{ col, index: i, header, fmt: formatterOf(unit) }];
  });
}

/** A metric of the bar chart: its label, self column index and formatter. Exported for tests.
 * @param {Pick<Table, "columns" | "metrics" | "metric_columns">} table @param {string} metric */
export function chartMetric(table, metric) {
  const [label, unit] = table.metrics[metric];
  const col = table.metric_columns[metric][1];
  return { label, col, index: table.columns.indexOf(col), fmt: formatterOf(unit) };
}

/** Rows sorted by a column (stable; strings compared as text). Exported for tests.
 * @param {Row[]} rows @param {number} k @param {boolean} descending */
export function sortRows(rows, k, descending) {
  const idx = rows.map((_r, i) => i);
  idx.sort((a, b) => {
    const x = rows[a][k];
    const y = rows[b][k];
    const c = typeof x === "string" ? x.localeCompare(String(y)) : Number(x) - Number(y);
    return (descending ? -c : c) || a - b;
  });
  return idx.map((i) => rows[i]);
}

/**
 * Whether a row's time is flagged as noise (its IQR over the timing passes exceeds half its
 * median: payload "noisy", path -> ["fwd_time", "bwd_time"]). The self column of a flagged
 * time is flagged with it. Exported for tests.
 * @param {Partial<Pick<Table, "noisy">>} table @param {string} path @param {string} col
 */
export function isNoisy(table, path, col) {
  const flagged = table.noisy?.[path];
  if (!flagged) return false;
  return flagged.some((m) => col === m || col === m.replace("_time", "_self_time"));
}

export const NOISY_NOTE = "~ spread (IQR) over the timing passes exceeds half the median: within noise";

/** The top n rows by a column, positive values only. @param {Row[]} rows @param {number} k @param {number} n */
export function topRows(rows, k, n) {
  return sortRows(
    rows.filter((r) => Number(r[k]) > 0),
    k,
    true,
  ).slice(0, n);
}

/** The name a row shows: its path, the model's name for the root. @param {Table} t @param {Row} r */
const nameOf = (t, r) => String(r[0] || t.model || "(root)");

/**
 * The top-N bar chart as HTML: the rows largest by the metric's self column, the selected
 * one outlined. Pure.
 * @param {Table} t @param {ProfileState} state
 */
export function chartHtml(t, state) {
  const m = chartMetric(t, state.metric);
  const k = m.index;
  const rows = topRows(t.rows, k, state.top);
  if (!rows.length) return `<div class="lk-empty">no module has a ${esc(m.label)} figure</div>`;
  const max = Number(rows[0][k]);
  return rows
    .map((r) => {
      const pct = ((100 * Number(r[k])) / max).toFixed(1);
      const name = nameOf(t, r);
      const on = r[0] === state.selected ? "outline:2px solid var(--lk-accent);" : "";
      return (
        `<div class="lk-barrow" data-path="${esc(r[0])}" style="display:flex;align-items:center;gap:6px;cursor:pointer;margin:1px 0">` +
        `<span style="width:32%;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;font-size:11px" title="${esc(name)}">${esc(name)}</span>` +
        `<span style="flex:1"><span style="display:block;height:11px;width:${pct}%;background:#4e79a7;${on}"></span></span>` +
        `<span style="width:70px;font-size:11px;text-align:right">${esc(m.fmt(r[k]))}</span></div>`
      );
    })
    .join("");
}

/**
 * The table as HTML: the payload's shown columns, sorted by the state's column, the path
 * indented by depth, noisy times marked "~", the selected row marked. Pure.
 * @param {Table} t @param {ProfileState} state
 */
export function tableHtml(t, state) {
  const shown = shownColumns(t);
  const rows = sortRows(t.rows, t.columns.indexOf(state.sort), state.descending);
  const depthI = t.columns.indexOf("depth");
  let html = "<table class='lk-table'><thead><tr>";
  for (const { col, header } of shown) {
    const cls = col === state.sort ? `lk-sorted${state.descending ? "" : " lk-asc"}` : "";
    html += `<th data-col="${esc(col)}" class="${cls}">${esc(header)}</th>`;
  }
  html += "</tr></thead><tbody>";
  for (const r of rows) {
    const path = String(r[0]);
    html += `<tr data-path="${esc(path)}"${path === state.selected ? " class='lk-selected'" : ""}>`;
    for (const { col, index, fmt } of shown) {
      const v = col === "path" ? `<span style="padding-left:${Number(r[depthI]) * 10}px">${esc(nameOf(t, r))}</span>` : esc(fmt(r[index]));
      const noisy = col !== "path" && isNoisy(t, path, col);
      html += noisy ? `<td class="lk-noisy" title="${esc(NOISY_NOTE)}">~${v}</td>` : `<td>${v}</td>`;
    }
    html += "</tr>";
  }
  const anyNoisy = Object.keys(t.noisy || {}).length > 0;
  const note = anyNoisy ? `<div class="lk-note lk-noisy-note" style="padding:4px 8px;font-size:11px">${esc(NOISY_NOTE)}</div>` : "";
  return `${html}</tbody></table>${note}`;
}

/**
 * A header clicked: the same column flips its order; another sorts by it, descending but
 * for the text columns (path, type).
 * @param {Pick<ProfileState, "sort" | "descending">} state @param {string} col
 * @returns {Pick<ProfileState, "sort" | "descending">}
 */
export function sortBy(state, col) {
  if (col === state.sort) return { sort: col, descending: !state.descending };
  return { sort: col, descending: col !== "path" && col !== "type" };
}

/**
 * Clicks on the table (a header sorts, a row selects) and on the chart (a bar selects).
 * @param {HTMLElement} wrap @param {HTMLElement} chart
 * @param {{sort: (col: string) => void, select: (path: string) => void}} on
 */
function wireClicks(wrap, chart, on) {
  wrap.addEventListener("click", (e) => {
    const target = /** @type {Element} */ (e.target);
    const th = /** @type {HTMLElement | null} */ (target.closest("th"));
    if (th) return on.sort(th.dataset.col || "");
    const tr = /** @type {HTMLElement | null} */ (target.closest("tr[data-path]"));
    if (tr) on.select(tr.dataset.path || "");
  });
  chart.addEventListener("click", (e) => {
    const row = /** @type {HTMLElement | null} */ (/** @type {Element} */ (e.target).closest(".lk-barrow"));
    if (row) on.select(row.dataset.path || "");
  });
}

/** @param {import("./_contract_types").RenderContext<Traits>} ctx anywidget's model and element */
function render({ model, el }) {
  ensureStyles();
  const root = h("div", { class: "lk-view lk-profile" });
  root.style.height = `${model.get("height")}px`;
  const metricSel = /** @type {HTMLSelectElement} */ (h("select", { class: "lk-metric" }));
  const topIn = /** @type {HTMLInputElement} */ (h("input", { type: "number", min: "1", max: "100", class: "lk-top" }));
  const toolbar = h("div", { class: "lk-toolbar" }, h("span", {}, "top"), topIn, h("span", {}, "by self"), metricSel);
  const chart = h("div", { class: "lk-chart" });
  const wrap = h("div", { class: "lk-table-wrap" });
  root.append(toolbar, chart, wrap);
  el.appendChild(root);

  /** @returns {ProfileState} */
  const state = () => ({
    metric: model.get("metric"),
    top: model.get("top"),
    sort: model.get("sort"),
    descending: model.get("descending"),
    selected: model.get("selected"),
  });
  const all = () => {
    const t = model.get("table");
    if (!t.rows) return;
    const s = state();
    setOptions(
      metricSel,
      Object.entries(t.metrics || {}).map(([k, [label]]) => [k, label]),
    );
    metricSel.value = s.metric;
    topIn.value = String(s.top);
    chart.innerHTML = chartHtml(t, s);
    wrap.innerHTML = tableHtml(t, s);
  };
  wireClicks(wrap, chart, {
    sort(col) {
      const next = sortBy(state(), col);
      if (next.sort !== model.get("sort")) model.set("sort", next.sort);
      model.set("descending", next.descending);
      model.save_changes();
    },
    select(path) {
      model.set("selected", path);
      model.save_changes();
    },
  });
  metricSel.addEventListener("change", () => {
    model.set("metric", metricSel.value);
    model.save_changes();
  });
  topIn.addEventListener("change", () => {
    model.set("top", Math.max(1, Number(topIn.value) || 10));
    model.save_changes();
  });
  const onSel = () => {
    all();
    const row = wrap.querySelector("tr.lk-selected");
    if (row) row.scrollIntoView({ block: "nearest" });
  };
  /** @type {import("./_contract_types").ChangeEvent<Traits>[]} */
  const events = ["change:table", "change:sort", "change:descending", "change:metric", "change:top"];
  for (const ev of events) model.on(ev, all);
  model.on("change:selected", onSel);
  all();
  return () => {
    for (const ev of events) model.off(ev, all);
    model.off("change:selected", onSel);
  };
}

export default { render };
