// Dashboard front end: live loss/metric curves (uPlot: one hover cursor shared by the
// charts, zoom, log scale, EMA smoothing, step or wall-time axis: the controls the runs
// view shares, _controls.js), throughput, step-time split, memory, progress with ETA, and
// a Stop button. Earlier runs of the same logdir family are overlaid, dimmed, only when
// asked (`compare`: fit's compare_with=, or the "earlier runs" toggle). All state comes
// from traits the Python side sends a few times per second. Stop posts the `stop_token` to
// labkit's server extension (a kernel busy with the fit's cell reads no widget messages;
// the server creates the stop file the trainer polls) and also sets `stop_requested`.
// Styles: the views' stylesheet (_ui.js), no inline style strings.
import { timeChart } from "./_charts.js";
import { chartControls, chartGrid, control, controlBar } from "./_controls.js";
import { overlaySeries } from "./_series.js";
import { fmtBytes, fmtTime } from "./_shared.js";
import { ensureStyles, h } from "./_ui.js";

/** The page's Jupyter server settings: base URL and, when the page has one, its token. */
function serverSettings(doc = document) {
  const node = doc.getElementById("jupyter-config-data");
  if (!node) return null;
  try {
    const cfg = JSON.parse(node.textContent);
    return { baseUrl: String(cfg.baseUrl || "/").replace(/\/?$/, "/"), token: cfg.token || "" };
  } catch {
    return null;
  }
}

/**
 * POST /labkit/api/stop with the fit's token; resolves to a message ("" when it worked).
 * @param {string} token
 */
export async function postStop(token, doc = document, fetchFn = globalThis.fetch) {
  const cfg = serverSettings(doc);
  if (!token) return "this dashboard has no stop token (its fit did not register one)";
  if (!cfg) return "not inside a Jupyter server page: Stop waits for the kernel";
  /** @type {Record<string, string>} */
  const headers = { "Content-Type": "application/json" };
  const xsrf = (doc.cookie.match(/(?:^|;\s*)_xsrf=([^;]*)/) || [])[1];
  if (xsrf) headers["X-XSRFToken"] = decodeURIComponent(xsrf);
  if (cfg.token) headers.Authorization = `token ${cfg.token}`;
  try {
    const r = await fetchFn(`${cfg.baseUrl}labkit/api/stop`, {
      method: "POST",
      headers,
      credentials: "same-origin",
      body: JSON.stringify({ token }),
    });
    if (r.ok) return "";
    let msg = `HTTP ${r.status}`;
    try {
      msg = (await r.json()).message || msg;
    } catch {
      /* not JSON */
    }
    return `the server did not stop the fit (${msg}); Stop waits for the kernel`;
  } catch (e) {
    return `labkit's server extension did not answer (${e}); Stop waits for the kernel`;
  }
}

/** @typedef {import("./_contract_types").DashboardTraits} Traits the synced traits (labkit/views/_contract.py) */

// per-rank bars (several processes): data wait | compute | all-reduce wait, per step;
// their colours are the stylesheet's .lk-dash-part-<key>
/** @type {["data_time" | "compute_time" | "comm_wait", string][]} */
const PARTS = [
  ["data_time", "data wait"],
  ["compute_time", "compute"],
  ["comm_wait", "all-reduce wait"],
];

/**
 * The per-rank bars (several processes) into `ranks`: data wait | compute | all-reduce
 * wait per step, stragglers named; empty with one process.
 * @param {HTMLElement} ranks
 * @param {import("./_contract_types").DashboardStats} s
 */
function drawRanks(ranks, s) {
  const rows = s.ranks || [];
  if (!rows.length) {
    ranks.replaceChildren();
    return;
  }
  const max = Math.max(...rows.map((r) => PARTS.reduce((a, [k]) => a + (r[k] || 0), 0)), 1e-9);
  const slow = new Set((s.stragglers || []).map((t) => Number((t.match(/^rank (\d+)/) || [])[1])));
  const cells = [];
  for (const r of rows) {
    const segs = PARTS.map(([k, name]) => {
      const seg = h("div", { "data-part": k, class: `lk-dash-part-${k}`, title: `${name}: ${fmtTime(r[k] || 0)} per step` });
      seg.style.width = `${((100 * (r[k] || 0)) / max).toFixed(2)}%`;
      return seg;
    });
    cells.push(
      h("span", { "data-rank": String(r.rank) }, `rank ${r.rank}${slow.has(r.rank) ? " (straggler)" : ""}`),
      h("div", { class: "lk-dash-rankbar" }, ...segs),
      h("span", {}, `${fmtTime(r.step_time)}/step`),
    );
  }
  const legend = h(
    "span",
    { class: "lk-dash-ranklegend" },
    ...PARTS.map(([k, name]) => h("span", {}, h("span", { class: `lk-dash-key lk-dash-part-${k}` }), name)),
    s.stragglers?.length ? ` · ${s.stragglers.join("; ")}` : "per step, means over the last epoch",
  );
  ranks.replaceChildren(...cells, legend);
}

/** @param {import("./_contract_types").RenderContext<Traits>} ctx anywidget's model and element */
function render({ model, el }) {
  ensureStyles();
  const status = h("span", { class: "lk-dash-status" });
  const stop = h("button", { class: "lk-dash-stop", title: "finish this step, keep a checkpoint, stop" }, "Stop");
  const fill = h("div", { class: "lk-dash-bar" });
  const progress = h("span", { class: "lk-dash-progress" });
  const top = h("div", { class: "lk-dash-top" }, status, h("div", { class: "lk-dash-track" }, fill), progress, stop);
  const stats = h("div", { class: "lk-dash-stats" });
  const controls = chartControls({ prefix: "lk-dash", onChange: () => drawCharts() });
  const compareBox = /** @type {HTMLInputElement} */ (
    h("input", { type: "checkbox", class: "lk-dash-compare", title: "overlay earlier runs of this logdir family, dimmed" })
  );
  const compareText = h("span", {}, "earlier runs");
  const compare = control(compareBox, compareText);
  compare.classList.add("lk-dash-compare-label");
  const chartBar = controlBar(
    "lk-dash-chartbar",
    ...controls.controls,
    compare,
    h("span", { class: "lk-control-hint" }, "drag across a chart to zoom, double-click to reset"),
  );
  const charts = chartGrid("lk-dash-charts");
  const grads = h("div", { class: "lk-dash-grads" });
  const ranks = h("div", { class: "lk-dash-ranks" });
  const error = h("pre", { class: "lk-dash-error" });
  const root = h("div", { class: "lk-view lk-dashboard" }, top, stats, ranks, chartBar, charts, grads, error);
  el.appendChild(root);

  const stopNote = h("div", { class: "lk-dash-stopnote lk-error-text" });
  root.insertBefore(stopNote, stats);
  stop.addEventListener("click", async () => {
    stop.disabled = true;
    stop.textContent = "Stopping…";
    model.set("stop_requested", true); // read by the kernel once it is free (background fits)
    model.save_changes();
    const problem = await postStop(model.get("stop_token"));
    stop.dataset.via = problem ? "kernel" : "server";
    stopNote.textContent = problem;
  });
  compareBox.addEventListener("change", () => {
    model.set("compare", compareBox.checked); // drawn at once; the kernel reads it when free
    model.save_changes();
    drawCharts();
  });

  // one chart for the losses, one for the other metrics; rebuilt only when the keys change.
  // Both share one hover cursor (hovering the loss chart shows val_acc at that step too).
  const sync = `lk-dash-${Math.random().toString(36).slice(2)}`;
  /** @typedef {ReturnType<typeof timeChart> & {keys?: string}} Chart a chart, with the keys it was built for */
  /** @type {Chart | null} */
  let lossChart = null;
  /** @type {Chart | null} */
  let metricChart = null;
  /**
   * @param {Chart | null} current
   * @param {string[]} keys
   * @param {string} title
   * @param {ReturnType<typeof overlaySeries>} overlay
   * @returns {Chart | null}
   */
  const chartOf = (current, keys, title, overlay) => {
    if (!keys.length) {
      current?.destroy();
      return null;
    }
    if (current && current.keys === keys.join()) return current;
    current?.destroy();
    /** @type {Chart} */
    const c = timeChart(charts, { keys, title, sync, dashes: overlay.dashes, dim: overlay.dim });
    c.keys = keys.join();
    return c;
  };
  function drawCharts() {
    const times = model.get("series_t") || {};
    const series = Object.fromEntries(Object.entries(model.get("series") || {}).map(([k, c]) => [k, { ...c, t: times[k] }]));
    const earlier = model.get("earlier") || {};
    const runs = Object.keys(earlier).length;
    compare.hidden = runs === 0;
    compareText.textContent = `earlier runs (${runs})`;
    compareBox.checked = Boolean(model.get("compare"));
    const overlay = overlaySeries(earlier, compareBox.checked);
    Object.assign(series, overlay.series);
    const dim = new Set(overlay.dim);
    const base = (/** @type {string} */ k) => k.split(" · ")[0];
    // this fit's curves first (drawn last, so on top), then the dimmed earlier runs
    const order = (/** @type {string[]} */ keys) => keys.sort((a, b) => Number(dim.has(b)) - Number(dim.has(a)) || a.localeCompare(b));
    const lossKeys = order(Object.keys(series).filter((k) => base(k).endsWith("_loss")));
    const metricKeys = order(Object.keys(series).filter((k) => !base(k).endsWith("_loss")));
    lossChart = chartOf(lossChart, lossKeys, "loss", overlay);
    metricChart = chartOf(metricChart, metricKeys, "metrics", overlay);
    const opts = controls.settings();
    lossChart?.update(series, opts);
    metricChart?.update(series, opts);
  }

  function draw() {
    const s = model.get("stats") || {};
    drawRanks(ranks, s);
    const st = model.get("status");
    status.textContent = st;
    status.dataset.status = st;
    const total = s.total_steps;
    const frac = total ? Math.min(1, (s.step || 0) / total) : 0;
    fill.style.width = `${(frac * 100).toFixed(1)}%`;
    const eta = s.eta_s != null && st === "running" ? `, ETA ${fmtTime(s.eta_s)}` : "";
    progress.textContent = `step ${s.step ?? 0}${total ? `/${total}` : ""} · epoch ${s.epoch ?? 0}${s.max_epochs ? `/${s.max_epochs}` : ""}${eta}`;
    const items = [
      ["loss", s.loss != null ? s.loss.toPrecision(4) : "-"],
      ["samples/s", s.samples_per_s != null ? s.samples_per_s.toFixed(1) : "-"],
      ["step", fmtTime(s.step_time)],
      ["compute", fmtTime(s.compute_time)],
      ["data wait", fmtTime(s.data_time)],
      ["memory", fmtBytes(s.memory)],
      ["processes", String(s.world_size ?? 1)],
      ["elapsed", fmtTime(s.elapsed_s)],
    ];
    stats.replaceChildren(...items.map(([k, v]) => h("span", { "data-stat": k }, h("b", {}, `${k}: `), v)));
    drawCharts();
    const g = model.get("grad_norms") || {};
    const gk = Object.keys(g);
    grads.textContent = gk.length ? `grad norms: ${gk.map((k) => `${k || "<root>"} ${g[k].toPrecision(3)}`).join(" · ")}` : "";
    error.textContent = model.get("error") || "";
    const done = ["finished", "stopped", "failed"].includes(st);
    if (done) {
      stop.disabled = true;
      stop.textContent = st === "stopped" ? "Stopped" : "Stop";
    }
  }
  draw();
  /** @type {import("./_contract_types").ChangeEvent<Traits>[]} */
  const events = ["change:updates", "change:status", "change:compare", "change:earlier"];
  for (const e of events) model.on(e, draw);
  return () => {
    for (const e of events) model.off(e, draw);
    lossChart?.destroy();
    metricChart?.destroy();
  };
}

export default { render };
