// Runs view: chosen metrics of chosen runs overlaid (one uPlot chart per metric, one curve
// per run, one hover cursor shared by every chart), by step or wall time, with the
// dashboard's smoothing and log scale; and a sortable, filterable table of the runs and
// their hparams whose checkboxes choose the runs drawn. At first the best runs by one
// metric are drawn (Python's rank_by; the view says which in rank_note), the table sorted
// by it; each run is one legend entry (smoothed solid, raw faint), in 20 colours, then
// dashed. Traits: rows, curves, all_metrics, rank_by, rank_note (in); metrics, selected,
// x_axis, smoothing, log (both ways).
import { runStyle, timeChart } from "./_charts.js";
import { columns, FilterError, filterRows, fmtCell, metricSeries, sortRows } from "./_runs_table.js";
import { ensureStyles, h } from "./_ui.js";

/** @typedef {import("./_contract_types").RunsViewTraits} Traits the synced traits (labkit/views/_contract.py) */
/** @param {import("./_contract_types").RenderContext<Traits>} ctx anywidget's model and element */
function render({ model, el }) {
  ensureStyles();
  const sync = `lk-runs-${Math.random().toString(36).slice(2)}`;
  const metricBox = h("span", { class: "lk-runs-metrics", style: "display:flex;gap:8px;flex-wrap:wrap" });
  const xSel = h("select", { class: "lk-runs-x" }, h("option", { value: "step" }, "step"), h("option", { value: "time" }, "wall time"));
  const smooth = h("input", {
    type: "range",
    min: "0",
    max: "0.99",
    step: "0.01",
    class: "lk-runs-smooth",
    title: "EMA smoothing, as TensorBoard's (0: raw)",
  });
  const smoothOut = h("span", {});
  const logBox = h("input", { type: "checkbox", class: "lk-runs-log" });
  const filter = h("input", {
    type: "search",
    class: "lk-runs-filter",
    placeholder: "filter: text, or lr<0.05 status=finished val_acc>0.8",
    style: "flex:1;min-width:160px;font-size:11px",
  });
  const bar = h(
    "div",
    { class: "lk-runs-bar", style: "display:flex;gap:12px;align-items:center;flex-wrap:wrap;font-size:11px;padding:2px 0" },
    h("span", {}, "metrics"),
    metricBox,
    h("label", { style: "display:flex;gap:4px;align-items:center" }, "x", xSel),
    h("label", { style: "display:flex;gap:4px;align-items:center" }, "smoothing", smooth, smoothOut),
    h("label", { style: "display:flex;gap:4px;align-items:center" }, logBox, "log scale"),
  );
  const charts = h("div", {
    class: "lk-runs-charts",
    style: "display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:8px",
  });
  const table = h("table", { class: "lk-runs-table", style: "border-collapse:collapse;font-size:11px;width:100%" });
  const count = h("span", { class: "lk-runs-count", style: "font-size:11px;color:var(--lk-fg2)" });
  const filterError = h("div", { class: "lk-runs-filter-error", role: "alert", style: "font-size:11px;color:var(--lk-error)" });
  const note = h("div", { class: "lk-runs-note", style: "font-size:11px;color:var(--lk-fg2);padding:2px 0" });
  const root = h(
    "div",
    { class: "lk-view lk-runs", style: "padding:6px" },
    bar,
    note,
    charts,
    h("div", { style: "display:flex;gap:8px;align-items:center;padding:4px 0" }, filter, count),
    filterError,
    h("div", { style: "max-height:320px;overflow:auto" }, table),
  );
  el.appendChild(root);

  // the table lists the runs as they were ranked: best first
  const rank = model.get("rank_by");
  let sortKey = rank ? `best:${rank}` : "name";
  let desc = false;
  let shown = new Map(); // metric -> chart

  // a run keeps its colour (by its place among all runs) whichever runs are drawn
  const styleOf = () => Object.fromEntries((model.get("rows") || []).map((r, i) => [r.name, runStyle(i)]));
  const colorOf = () => Object.fromEntries(Object.entries(styleOf()).map(([n, s]) => [n, s.color]));
  const dashOf = () => Object.fromEntries(Object.entries(styleOf()).map(([n, s]) => [n, s.dash]));

  function drawBar() {
    const chosen = new Set(model.get("metrics"));
    metricBox.replaceChildren(
      ...(model.get("all_metrics") || []).map((m) => {
        const box = h("input", { type: "checkbox", "data-metric": m });
        box.checked = chosen.has(m);
        box.addEventListener("change", () => {
          const now = (model.get("all_metrics") || []).filter((k) => (k === m ? box.checked : chosen.has(k)));
          model.set("metrics", now);
          model.save_changes();
        });
        return h("label", { style: "display:flex;gap:3px;align-items:center" }, box, m);
      }),
    );
    xSel.value = model.get("x_axis");
    smooth.value = String(model.get("smoothing"));
    smoothOut.textContent = Number(model.get("smoothing")).toFixed(2);
    logBox.checked = model.get("log");
    note.textContent = model.get("rank_note") || "";
  }

  function drawCharts() {
    const metrics = model.get("metrics") || [];
    const runs = model.get("selected") || [];
    const curves = model.get("curves") || {};
    const colors = colorOf();
    for (const [m, c] of shown) {
      if (!metrics.includes(m) || c.keys !== runs.join()) {
        c.destroy();
        shown.delete(m);
      }
    }
    for (const m of metrics) {
      if (!shown.has(m)) {
        const c = timeChart(charts, { keys: runs, title: m, sync, colors, dashes: dashOf(), oneEntry: true });
        c.keys = runs.join();
        c.el.dataset.metric = m;
        shown.set(m, c);
      }
      // keep chart order = metric order
      charts.appendChild(shown.get(m).el);
      shown.get(m).update(metricSeries(curves, m, runs), {
        smoothing: m.startsWith("val_") ? 0 : Number(model.get("smoothing")),
        log: model.get("log"),
        x: model.get("x_axis"),
      });
    }
  }

  function drawTable() {
    const rows = model.get("rows") || [];
    const metrics = model.get("metrics") || [];
    const cols = columns(rows, metrics);
    const picked = new Set(model.get("selected") || []);
    const colors = colorOf();
    const dashes = dashOf();
    let matched = rows;
    try {
      matched = filterRows(rows, cols, filter.value);
      filterError.textContent = "";
      filter.removeAttribute("aria-invalid");
    } catch (err) {
      if (!(err instanceof FilterError)) throw err;
      filterError.textContent = `filter: ${err.message}`;
      filter.setAttribute("aria-invalid", "true");
    }
    if (!cols.some((c) => c.key === sortKey)) sortKey = "name";
    const visible = sortRows(matched, cols, sortKey, desc);
    const head = h(
      "tr",
      {},
      h("th", {}, ""),
      ...cols.map((c) => {
        const th = h(
          "th",
          {
            "data-key": c.key,
            title: "sort",
            style: "cursor:pointer;text-align:left;padding:2px 6px;border-bottom:1px solid var(--lk-border2);white-space:nowrap",
          },
          c.label + (c.key === sortKey ? (desc ? " ▼" : " ▲") : ""),
        );
        th.addEventListener("click", () => {
          desc = c.key === sortKey ? !desc : false;
          sortKey = c.key;
          drawTable();
        });
        return th;
      }),
    );
    const body = visible.map((r) => {
      const box = h("input", { type: "checkbox", "data-run": r.name });
      box.checked = picked.has(r.name);
      box.addEventListener("change", () => {
        const order = rows.map((x) => x.name);
        const now = order.filter((n) => (n === r.name ? box.checked : picked.has(n)));
        model.set("selected", now);
        model.save_changes();
      });
      // the run's colour, and its dash where colours came round again
      const swatch = h("span", {
        class: "lk-runs-swatch",
        style: `display:inline-block;width:14px;height:0;margin:0 4px 3px 0;border-top:3px ${dashes[r.name] ? "dashed" : "solid"} ${colors[r.name]}`,
      });
      return h(
        "tr",
        { "data-run": r.name, title: r.error || "" },
        h("td", {}, box),
        ...cols.map((c, i) =>
          h(
            "td",
            { style: `padding:1px 6px;white-space:nowrap${c.num ? ";text-align:right" : ""}` },
            ...(i === 0 ? [swatch] : []),
            fmtCell(c.get(r)),
          ),
        ),
      );
    });
    table.replaceChildren(h("thead", {}, head), h("tbody", {}, ...body));
    count.textContent = `${visible.length} of ${rows.length} runs · ${picked.size} drawn`;
  }

  function drawAll() {
    drawBar();
    drawCharts();
    drawTable();
  }
  xSel.addEventListener("change", () => {
    model.set("x_axis", xSel.value);
    model.save_changes();
  });
  smooth.addEventListener("input", () => {
    model.set("smoothing", Number(smooth.value));
    model.save_changes();
  });
  logBox.addEventListener("change", () => {
    model.set("log", logBox.checked);
    model.save_changes();
  });
  filter.addEventListener("input", drawTable);
  /** @type {import("./_contract_types").ChangeEvent<Traits>[]} */
  const events = ["change:metrics", "change:selected", "change:x_axis", "change:smoothing", "change:log", "change:rows", "change:curves"];
  for (const e of events) model.on(e, drawAll);
  drawAll();
  return () => {
    for (const e of events) model.off(e, drawAll);
    for (const c of shown.values()) c.destroy();
    shown = new Map();
  };
}

export default { render };
