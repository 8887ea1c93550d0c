// Runs view: chosen metrics of chosen runs overlaid (one uPlot chart per metric, one curve
// per run, one hover cursor shared by every chart), by step or wall time, with the
// dashboard's smoothing and log scale; and a sortable, filterable table of the runs and
// their hparams whose checkboxes choose the runs drawn. At first the best runs by one
// metric are drawn (Python's rank_by; the view says which in rank_note), the table sorted
// by it; each run is one legend entry (smoothed solid, raw faint), in 20 colours, then
// dashed. Each run's state (running, crashed, finished, stopped, failed) is a badge in the
// table. Traits: rows, curves, all_metrics, rank_by, rank_note (in); metrics, selected,
// x_axis, smoothing, log (both ways). The chart controls are the dashboard's
// (_controls.js); styles are the views' stylesheet (_ui.js), no inline style strings.
import { runStyle, timeChart } from "./_charts.js";
import { chartControls, chartGrid, control, controlBar } from "./_controls.js";
import { columns, FilterError, filterRows, fmtCell, metricSeries, sortRows } from "./_runs_table.js";
import { ensureStyles, h } from "./_ui.js";

/**
 * A run's state as a badge (its colour from the stylesheet's .lk-state-<state>).
 * @param {string} state
 * @param {string} [note] the state in a sentence (lock holder; last step, epoch, time)
 */
export function stateBadge(state, note = "") {
  return h("span", { class: `lk-state lk-state-${state}`, "data-state": state, title: note || state }, state);
}

/**
 * The table's header: a sortable cell per column, the sorted one marked.
 * @param {{key: string, label: string}[]} cols
 * @param {string} sortKey
 * @param {boolean} desc
 * @param {(key: string) => void} onSort
 */
function tableHead(cols, sortKey, desc, onSort) {
  return h(
    "tr",
    {},
    h("th", {}, ""),
    ...cols.map((c) => {
      const th = h("th", { "data-key": c.key, title: "sort" }, c.label + (c.key === sortKey ? (desc ? " ▼" : " ▲") : ""));
      th.addEventListener("click", () => onSort(c.key));
      return th;
    }),
  );
}

/**
 * One run's row: its checkbox (drawn or not), its colour and dash, its state as a badge,
 * its figures.
 * @param {import("./_contract_types").RunRow} r
 * @param {{key: string, num?: boolean, get: (r: any) => any}[]} cols
 * @param {{picked: Set<string>, color: string, dashed: boolean, pick: (name: string, on: boolean) => void}} how
 */
function tableRow(r, cols, { picked, color, dashed, pick }) {
  const box = /** @type {HTMLInputElement} */ (h("input", { type: "checkbox", "data-run": r.name }));
  box.checked = picked.has(r.name);
  box.addEventListener("change", () => pick(r.name, box.checked));
  // the run's colour, and its dash where colours came round again
  const swatch = h("span", { class: `lk-runs-swatch${dashed ? " lk-dashed" : ""}` });
  swatch.style.setProperty("--lk-swatch", color);
  /** @param {{key: string, num?: boolean, get: (r: any) => any}} c @param {number} i */
  const cell = (c, i) =>
    h(
      "td",
      c.num ? { class: "lk-num" } : {},
      ...(i === 0 ? [swatch] : []),
      c.key === "status" ? stateBadge(r.state ?? r.status, r.state_note) : fmtCell(c.get(r)),
    );
  return h("tr", { "data-run": r.name, title: r.error || "" }, h("td", {}, box), ...cols.map(cell));
}

/** @typedef {import("./_contract_types").RunsViewTraits} Traits the synced traits (labkit/views/_contract.py) */
/** @param {import("./_contract_types").RenderContext<Traits>} ctx anywidget's model and element */
function render({ model, el }) {
  ensureStyles();
  const sync = `lk-runs-${Math.random().toString(36).slice(2)}`;
  const metricBox = h("span", { class: "lk-runs-metrics" });
  const controls = chartControls({
    prefix: "lk-runs",
    smoothing: Number(model.get("smoothing")),
    log: model.get("log"),
    x: model.get("x_axis"),
    onChange: (s, what) => {
      if (what === "x") model.set("x_axis", s.x);
      else if (what === "smoothing") model.set("smoothing", s.smoothing);
      else model.set("log", s.log);
      model.save_changes();
    },
  });
  const filter = h("input", {
    type: "search",
    class: "lk-runs-filter",
    placeholder: "filter: text, or lr<0.05 status=finished val_acc>0.8",
  });
  const bar = controlBar("lk-runs-bar", h("span", {}, "metrics"), metricBox, ...controls.controls);
  const charts = chartGrid("lk-runs-charts");
  const table = h("table", { class: "lk-runs-table" });
  const count = h("span", { class: "lk-runs-count" });
  const filterError = h("div", { class: "lk-runs-filter-error", role: "alert" });
  const note = h("div", { class: "lk-runs-note" });
  const root = h(
    "div",
    { class: "lk-view lk-runs" },
    bar,
    note,
    charts,
    h("div", { class: "lk-runs-find" }, filter, count),
    filterError,
    h("div", { class: "lk-runs-scroll" }, table),
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
        return control(box, m);
      }),
    );
    controls.set({ smoothing: Number(model.get("smoothing")), log: model.get("log"), x: model.get("x_axis") });
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
        const c = /** @type {ReturnType<typeof timeChart> & {keys?: string}} */ (
          timeChart(charts, { keys: runs, title: m, sync, colors, dashes: dashOf(), oneEntry: true })
        );
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
    const head = tableHead(cols, sortKey, desc, (key) => {
      desc = key === sortKey ? !desc : false;
      sortKey = key;
      drawTable();
    });
    const pick = (/** @type {string} */ name, /** @type {boolean} */ on) => {
      const now = rows.map((x) => x.name).filter((n) => (n === name ? on : picked.has(n)));
      model.set("selected", now);
      model.save_changes();
    };
    const body = visible.map((/** @type {import("./_contract_types").RunRow} */ r) =>
      tableRow(r, cols, { picked, color: colors[r.name], dashed: Boolean(dashes[r.name]), pick }),
    );
    table.replaceChildren(h("thead", {}, head), h("tbody", {}, ...body));
    count.textContent = `${visible.length} of ${rows.length} runs · ${picked.size} drawn`;
  }

  function drawAll() {
    drawBar();
    drawCharts();
    drawTable();
  }
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
