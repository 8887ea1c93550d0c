// ProfileView front end: sortable per-module table and a top-N bar chart.
import { fmtBytes, fmtCount, fmtTime } from "./_shared.js";
import { ensureStyles, esc, h } from "./_ui.js";

const METRICS = {
  fwd_time: ["forward time", "fwd_self_time"],
  bwd_time: ["backward time", "bwd_self_time"],
  flops: ["FLOPs (fwd + bwd)", "flops_self"],
  params: ["parameters", "params_self"],
  activations: ["activation memory", "saved_bytes_self"],
};
// column -> [header, formatter]; absent columns are not shown
const COLUMNS = {
  path: ["Module", (v) => v],
  type: ["Type", (v) => v],
  calls: ["Calls", (v) => String(v)],
  runs: ["Runs", (v) => String(v)],
  params: ["Params", fmtCount],
  fwd_time: ["Fwd", fmtTime],
  fwd_iqr: ["Fwd IQR", fmtTime],
  fwd_self_time: ["Fwd self", fmtTime],
  bwd_time: ["Bwd", fmtTime],
  bwd_iqr: ["Bwd IQR", fmtTime],
  bwd_self_time: ["Bwd self", fmtTime],
  flops: ["FLOPs", fmtCount],
  activation_bytes: ["Out bytes", fmtBytes],
  saved_bytes: ["Saved", fmtBytes],
};
const FORMAT_OF = { fwd_self_time: fmtTime, bwd_self_time: fmtTime, flops_self: fmtCount, params_self: fmtCount, saved_bytes_self: fmtBytes };

/** Rows sorted by a column (stable; strings compared as text). Exported for tests. */
export function sortRows(rows, k, descending) {
  const idx = rows.map((r, i) => i);
  idx.sort((a, b) => {
    const x = rows[a][k];
    const y = rows[b][k];
    const c = typeof x === "string" ? x.localeCompare(y) : x - y;
    return (descending ? -c : c) || a - b;
  });
  return idx.map((i) => rows[i]);
}

/** The top n rows by a column, positive values only. */
export function topRows(rows, k, n) {
  return sortRows(rows.filter((r) => r[k] > 0), k, true).slice(0, n);
}

function render({ model, el }) {
  ensureStyles();
  const root = h("div", { class: "lk-view lk-profile" });
  root.style.height = `${model.get("height")}px`;
  const metricSel = h("select", { class: "lk-metric" });
  for (const [k, [label]] of Object.entries(METRICS)) metricSel.append(h("option", { value: k }, label));
  const topIn = h("input", { type: "number", min: "1", max: "100", class: "lk-top", style: "width:4em" });
  const toolbar = h("div", { class: "lk-toolbar" }, h("span", {}, "top"), topIn, h("span", {}, "by self"), metricSel);
  const chart = h("div", { class: "lk-chart", style: "padding:4px 8px;border-bottom:1px solid var(--lk-border2);max-height:40%;overflow:auto" });
  const wrap = h("div", { class: "lk-table-wrap" });
  root.append(toolbar, chart, wrap);
  el.appendChild(root);

  const colIndex = () => new Map(model.get("table").columns.map((c, i) => [c, i]));

  function drawChart() {
    const t = model.get("table");
    if (!t.rows) return;
    const ci = colIndex();
    const metric = model.get("metric");
    const col = METRICS[metric][1];
    const k = ci.get(col);
    const rows = topRows(t.rows, k, model.get("top"));
    metricSel.value = metric;
    topIn.value = model.get("top");
    if (!rows.length) {
      chart.innerHTML = `<div class="lk-empty">no module has a ${esc(METRICS[metric][0])} figure</div>`;
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
          `<span style="width:70px;font-size:11px;text-align:right">${esc(FORMAT_OF[col](r[k]))}</span></div>`
        );
      })
      .join("");
  }

  function drawTable() {
    const t = model.get("table");
    if (!t.rows) return;
    const ci = colIndex();
    const sortKey = model.get("sort");
    const desc = model.get("descending");
    const shown = Object.keys(COLUMNS).filter((c) => ci.has(c));
    const rows = sortRows(t.rows, ci.get(sortKey), desc);
    const sel = model.get("selected");
    const depthI = ci.get("depth");
    let html = "<table class='lk-table'><thead><tr>";
    for (const c of shown) {
      const cls = c === sortKey ? `lk-sorted${desc ? "" : " lk-asc"}` : "";
      html += `<th data-col="${c}" class="${cls}">${COLUMNS[c][0]}</th>`;
    }
    html += "</tr></thead><tbody>";
    for (const r of rows) {
      const path = r[0];
      html += `<tr data-path="${esc(path)}"${path === sel ? " class='lk-selected'" : ""}>`;
      for (const c of shown) {
        let v = COLUMNS[c][1](r[ci.get(c)]);
        if (c === "path") v = `<span style="padding-left:${r[depthI] * 10}px">${esc(path || t.model || "(root)")}</span>`;
        else v = esc(v);
        html += `<td>${v}</td>`;
      }
      html += "</tr>";
    }
    wrap.innerHTML = `${html}</tbody></table>`;
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
