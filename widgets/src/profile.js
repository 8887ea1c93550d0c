// ProfileView front end: sortable per-module table and a top-N bar chart.
// Labels and units come from the payload (labkit/views/_payload.py PROFILE_HEADERS,
// METRICS, METRIC_UNITS; the contract is labkit/views/_contract.py ProfilePayload).
import { formatterOf } from "./_units.js";
import { ensureStyles, esc, h, setOptions } from "./_ui.js";

/**
 * The shown columns of a profile payload, in display order: [{ col, index, header, fmt }].
 * A column the rows do not carry (runs of a single recording) is not shown. Exported for tests.
 */
export function shownColumns(table) {
  const index = new Map(table.columns.map((c, i) => [c, i]));
  return Object.entries(table.headers || {})
    .filter(([c]) => index.has(c))
    .map(([col, [header, unit]]) => ({ col, index: index.get(col), header, fmt: formatterOf(unit) }));
}

/** A metric of the bar chart: its label, self column index and formatter. Exported for tests. */
export function chartMetric(table, metric) {
  const [label, unit] = table.metrics[metric];
  const col = table.metric_columns[metric][1];
  return { label, col, index: table.columns.indexOf(col), fmt: formatterOf(unit) };
}

/** Rows sorted by a column (stable; strings compared as text). Exported for tests. */
export function sortRows(rows, k, descending) {
  const idx = rows.map((_r, i) => i);
  idx.sort((a, b) => {
    const x = rows[a][k];
    const y = rows[b][k];
    const c = typeof x === "string" ? x.localeCompare(y) : x - y;
    return (descending ? -c : c) || a - b;
  });
  return idx.map((i) => rows[i]);
}

/**
 * Whether a row's time is flagged as noise (its IQR over the timing passes exceeds half its
 * median: payload "noisy", path -> ["fwd_time", "bwd_time"]). The self column of a flagged
 * time is flagged with it. Exported for tests.
 */
export function isNoisy(table, path, col) {
  const flagged = table.noisy?.[path];
  if (!flagged) return false;
  return flagged.some((m) => col === m || col === m.replace("_time", "_self_time"));
}

export const NOISY_NOTE = "~ spread (IQR) over the timing passes exceeds half the median: within noise";

/** The top n rows by a column, positive values only. */
export function topRows(rows, k, n) {
  return sortRows(
    rows.filter((r) => r[k] > 0),
    k,
    true,
  ).slice(0, n);
}

/** @typedef {import("./_contract_types").ProfileViewTraits} Traits the synced traits (labkit/views/_contract.py) */
/** @param {import("./_contract_types").RenderContext<Traits>} ctx anywidget's model and element */
function render({ model, el }) {
  ensureStyles();
  const root = h("div", { class: "lk-view lk-profile" });
  root.style.height = `${model.get("height")}px`;
  const metricSel = h("select", { class: "lk-metric" });
  const fillMetrics = () =>
    setOptions(
      metricSel,
      Object.entries(model.get("table").metrics || {}).map(([k, [label]]) => [k, label]),
    );
  const topIn = h("input", { type: "number", min: "1", max: "100", class: "lk-top", style: "width:4em" });
  const toolbar = h("div", { class: "lk-toolbar" }, h("span", {}, "top"), topIn, h("span", {}, "by self"), metricSel);
  const chart = h("div", {
    class: "lk-chart",
    style: "padding:4px 8px;border-bottom:1px solid var(--lk-border2);max-height:40%;overflow:auto",
  });
  const wrap = h("div", { class: "lk-table-wrap" });
  root.append(toolbar, chart, wrap);
  el.appendChild(root);

  function drawChart() {
    const t = model.get("table");
    if (!t.rows) return;
    fillMetrics();
    const metric = model.get("metric");
    const m = chartMetric(t, metric);
    const k = m.index;
    const rows = topRows(t.rows, k, model.get("top"));
    metricSel.value = metric;
    topIn.value = model.get("top");
    if (!rows.length) {
      chart.innerHTML = `<div class="lk-empty">no module has a ${esc(m.label)} figure</div>`;
      return;
    }
    const max = rows[0][k];
    const sel = model.get("selected");
    chart.innerHTML = rows
      .map((r) => {
        const pct = ((100 * r[k]) / max).toFixed(1);
        const name = r[0] || t.model || "(root)";
        const on = r[0] === sel ? "outline:2px solid var(--lk-accent);" : "";
        return (
          `<div class="lk-barrow" data-path="${esc(r[0])}" style="display:flex;align-items:center;gap:6px;cursor:pointer;margin:1px 0">` +
          `<span style="width:32%;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;font-size:11px" title="${esc(name)}">${esc(name)}</span>` +
          `<span style="flex:1"><span style="display:block;height:11px;width:${pct}%;background:#4e79a7;${on}"></span></span>` +
          `<span style="width:70px;font-size:11px;text-align:right">${esc(m.fmt(r[k]))}</span></div>`
        );
      })
      .join("");
  }

  function drawTable() {
    const t = model.get("table");
    if (!t.rows) return;
    const sortKey = model.get("sort");
    const desc = model.get("descending");
    const shown = shownColumns(t);
    const rows = sortRows(t.rows, t.columns.indexOf(sortKey), desc);
    const sel = model.get("selected");
    const depthI = t.columns.indexOf("depth");
    let html = "<table class='lk-table'><thead><tr>";
    for (const { col, header } of shown) {
      const cls = col === sortKey ? `lk-sorted${desc ? "" : " lk-asc"}` : "";
      html += `<th data-col="${esc(col)}" class="${cls}">${esc(header)}</th>`;
    }
    html += "</tr></thead><tbody>";
    for (const r of rows) {
      const path = r[0];
      html += `<tr data-path="${esc(path)}"${path === sel ? " class='lk-selected'" : ""}>`;
      for (const { col, index, fmt } of shown) {
        const v =
          col === "path" ? `<span style="padding-left:${r[depthI] * 10}px">${esc(path || t.model || "(root)")}</span>` : esc(fmt(r[index]));
        const noisy = col !== "path" && isNoisy(t, path, col);
        html += noisy ? `<td class="lk-noisy" title="${esc(NOISY_NOTE)}">~${v}</td>` : `<td>${v}</td>`;
      }
      html += "</tr>";
    }
    const anyNoisy = Object.keys(t.noisy || {}).length > 0;
    const note = anyNoisy ? `<div class="lk-note lk-noisy-note" style="padding:4px 8px;font-size:11px">${esc(NOISY_NOTE)}</div>` : "";
    wrap.innerHTML = `${html}</tbody></table>${note}`;
  }

  const select = (path) => {
    model.set("selected", path);
    model.save_changes();
  };
  wrap.addEventListener("click", (e) => {
    const th = e.target.closest("th");
    if (th) {
      const col = th.dataset.col;
      if (col === model.get("sort")) model.set("descending", !model.get("descending"));
      else {
        model.set("sort", col);
        model.set("descending", col !== "path" && col !== "type");
      }
      model.save_changes();
      return;
    }
    const tr = e.target.closest("tr[data-path]");
    if (tr) select(tr.dataset.path);
  });
  chart.addEventListener("click", (e) => {
    const row = e.target.closest(".lk-barrow");
    if (row) select(row.dataset.path);
  });
  metricSel.addEventListener("change", () => {
    model.set("metric", metricSel.value);
    model.save_changes();
  });
  topIn.addEventListener("change", () => {
    model.set("top", Math.max(1, Number(topIn.value) || 10));
    model.save_changes();
  });
  const all = () => {
    drawChart();
    drawTable();
  };
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
