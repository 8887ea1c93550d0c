// Dashboard front end: live loss/metric curves (uPlot: one hover cursor shared by the
// charts, zoom, log scale, EMA smoothing, step or wall-time axis), throughput, step-time split,
// memory, progress with ETA, and a Stop button. All state comes from traits the Python
// side sends a few times per second. Stop posts the `stop_token` to labkit's server
// extension (a kernel busy with the fit's cell reads no widget messages; the server
// creates the stop file the trainer polls) and also sets `stop_requested`.
import { fmtBytes, fmtTime } from "./_shared.js";
import { timeChart } from "./_charts.js";
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

/** POST /labkit/api/stop with the fit's token; resolves to a message ("" when it worked). */
export async function postStop(token, doc = document, fetchFn = globalThis.fetch) {
  const cfg = serverSettings(doc);
  if (!token) return "this dashboard has no stop token (its fit did not register one)";
  if (!cfg) return "not inside a Jupyter server page: Stop waits for the kernel";
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
/** @param {import("./_contract_types").RenderContext<Traits>} ctx anywidget's model and element */
function render({ model, el }) {
  ensureStyles();
  const status = h("span", { class: "lk-dash-status" });
  const stop = h("button", { class: "lk-dash-stop", title: "finish this step, keep a checkpoint, stop" }, "Stop");
  const bar = h(
    "div",
    { style: "flex:1;height:8px;background:var(--lk-bg2);border-radius:4px;overflow:hidden" },
    h("div", { class: "lk-dash-bar", style: "height:100%;width:0;background:var(--lk-accent)" }),
  );
  const progress = h("span", { class: "lk-dash-progress" });
  const top = h("div", { style: "display:flex;gap:10px;align-items:center;padding:4px 0" }, status, bar, progress, stop);
  const stats = h("div", { class: "lk-dash-stats", style: "display:flex;gap:16px;flex-wrap:wrap;font-size:12px;padding:2px 0" });
  const smooth = h("input", {
    type: "range",
    min: "0",
    max: "0.99",
    step: "0.01",
    value: "0.6",
    class: "lk-dash-smooth",
    title: "EMA smoothing, as TensorBoard's (0: raw)",
  });
  const smoothOut = h("span", { class: "lk-dash-smooth-value" }, "0.60");
  const logBox = h("input", { type: "checkbox", class: "lk-dash-log" });
  const xSel = h(
    "select",
    { class: "lk-dash-x", title: "x axis of the charts" },
    h("option", { value: "step" }, "step"),
    h("option", { value: "time" }, "wall time"),
  );
  const chartBar = h(
    "div",
    { class: "lk-dash-chartbar", style: "display:flex;gap:12px;align-items:center;font-size:11px;padding:2px 0" },
    h("label", { style: "display:flex;gap:4px;align-items:center" }, "smoothing", smooth, smoothOut),
    h("label", { style: "display:flex;gap:4px;align-items:center" }, logBox, "log scale"),
    h("label", { style: "display:flex;gap:4px;align-items:center" }, "x", xSel),
    h("span", {}, "drag across a chart to zoom, double-click to reset"),
  );
  const charts = h("div", {
    class: "lk-dash-charts",
    style: "display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:8px",
  });
  const grads = h("div", { class: "lk-dash-grads", style: "font-size:11px;color:var(--lk-fg2)" });
  const ranks = h("div", {
    class: "lk-dash-ranks",
    style: "font-size:11px;display:grid;grid-template-columns:auto 1fr auto;gap:2px 8px;align-items:center;padding:2px 0",
  });
  const error = h("pre", { class: "lk-dash-error", style: "color:var(--lk-error);white-space:pre-wrap;margin:4px 0" });
  const root = h("div", { class: "lk-view lk-dashboard", style: "padding:6px" }, top, stats, ranks, chartBar, charts, grads, error);
  el.appendChild(root);

  const stopNote = h("div", { class: "lk-dash-stopnote lk-error-text", style: "font-size:11px" });
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

  // one chart for the losses, one for the other metrics; rebuilt only when the keys change.
  // Both share one hover cursor (hovering the loss chart shows val_acc at that step too).
  const sync = `lk-dash-${Math.random().toString(36).slice(2)}`;
  let lossChart = null;
  let metricChart = null;
  const chartOf = (current, keys, title, colors) => {
    if (!keys.length) {
      current?.destroy();
      return null;
    }
    if (current && current.keys === keys.join()) return current;
    current?.destroy();
    const c = timeChart(charts, { keys, title, sync, colors });
    c.keys = keys.join();
    return c;
  };
  function drawCharts() {
    const times = model.get("series_t") || {};
    const series = Object.fromEntries(Object.entries(model.get("series") || {}).map(([k, c]) => [k, { ...c, t: times[k] }]));
    // earlier runs from the same logdir root: "<curve> · <run>", drawn faintly
    const earlier = model.get("earlier") || {};
    const faint = {};
    Object.entries(earlier).forEach(([run, curves], i) => {
      for (const [k, c] of Object.entries(curves)) {
        const key = `${k} · ${run}`;
        series[key] = c;
        faint[key] = ["#9a9a9a", "#bcbd22", "#17becf", "#e377c2", "#8c564b"][i % 5];
      }
    });
    const base = (k) => k.split(" · ")[0];
    const order = (keys) => keys.sort((a, b) => Number(a in faint) - Number(b in faint) || a.localeCompare(b));
    const lossKeys = order(Object.keys(series).filter((k) => base(k).endsWith("_loss")));
    const metricKeys = order(Object.keys(series).filter((k) => !base(k).endsWith("_loss")));
    lossChart = chartOf(lossChart, lossKeys, "loss", faint);
    metricChart = chartOf(metricChart, metricKeys, "metrics", faint);
    const opts = { smoothing: Number(smooth.value), log: logBox.checked, x: xSel.value };
    lossChart?.update(series, opts);
    metricChart?.update(series, opts);
  }
  smooth.addEventListener("input", () => {
    smoothOut.textContent = Number(smooth.value).toFixed(2);
    drawCharts();
  });
  logBox.addEventListener("change", drawCharts);
  xSel.addEventListener("change", drawCharts);

  // per-rank bars (several processes): data wait | compute | all-reduce wait, per step
  const PARTS = [
    ["data_time", "data wait", "var(--lk-accent2)"],
    ["compute_time", "compute", "var(--lk-accent)"],
    ["comm_wait", "all-reduce wait", "var(--lk-fg2)"],
  ];
  function drawRanks(s) {
    const rows = s.ranks || [];
    if (!rows.length) {
      ranks.replaceChildren();
      return;
    }
    const max = Math.max(...rows.map((r) => PARTS.reduce((a, [k]) => a + (r[k] || 0), 0)), 1e-9);
    const slow = new Set((s.stragglers || []).map((t) => Number((t.match(/^rank (\d+)/) || [])[1])));
    const cells = [];
    for (const r of rows) {
      const segs = PARTS.map(([k, name, color]) =>
        h("div", {
          "data-part": k,
          title: `${name}: ${fmtTime(r[k] || 0)} per step`,
          style: `height:100%;width:${((100 * (r[k] || 0)) / max).toFixed(2)}%;background:${color}`,
        }),
      );
      cells.push(
        h("span", { "data-rank": String(r.rank) }, `rank ${r.rank}${slow.has(r.rank) ? " (straggler)" : ""}`),
        h("div", { style: "display:flex;height:8px;background:var(--lk-bg2);border-radius:2px;overflow:hidden" }, ...segs),
        h("span", {}, `${fmtTime(r.step_time)}/step`),
      );
    }
    const legend = h(
      "span",
      { style: "grid-column:1/-1;color:var(--lk-fg)" },
      ...PARTS.map(([, name, color]) =>
        h(
          "span",
          { style: "margin-right:10px" },
          h("span", { style: `display:inline-block;width:8px;height:8px;margin-right:3px;background:${color}` }),
          name,
        ),
      ),
      s.stragglers?.length ? ` · ${s.stragglers.join("; ")}` : "per step, means over the last epoch",
    );
    ranks.replaceChildren(...cells, legend);
  }

  function draw() {
    const s = model.get("stats") || {};
    drawRanks(s);
    const st = model.get("status");
    status.textContent = st;
    status.dataset.status = st;
    const total = s.total_steps;
    const frac = total ? Math.min(1, (s.step || 0) / total) : 0;
    root.querySelector(".lk-dash-bar").style.width = `${(frac * 100).toFixed(1)}%`;
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
  model.on("change:updates", draw);
  model.on("change:status", draw);
  return () => {
    model.off("change:updates", draw);
    model.off("change:status", draw);
    lossChart?.destroy();
    metricChart?.destroy();
  };
}

export default { render };
