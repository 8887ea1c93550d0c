// Dashboard front end: live loss/metric curves (SVG), throughput, step-time split,
// memory, progress with ETA, and a Stop button. All state comes from traits the Python
// side sends a few times per second. Stop posts the `stop_token` to labkit's server
// extension (a kernel busy with the fit's cell reads no widget messages; the server
// creates the stop file the trainer polls) and also sets `stop_requested`.
import { fmtBytes, fmtTime } from "./_shared.js";
import { ensureStyles, h } from "./_ui.js";

const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"];

/** Finite y-range of several curves, padded; [0, 1] when empty. Exported for tests. */
export function yRange(curves) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const c of curves) for (const y of c.y) if (Number.isFinite(y)) { lo = Math.min(lo, y); hi = Math.max(hi, y); }
  if (!Number.isFinite(lo)) return [0, 1];
  if (lo === hi) return [lo - 0.5, hi + 0.5];
  const pad = (hi - lo) * 0.05;
  return [lo - pad, hi + pad];
}

/** SVG path of one curve in a w x h box; NaN breaks the line. Exported for tests. */
export function pathOf(xs, ys, [x0, x1], [y0, y1], w, hgt) {
  const sx = (x) => (x1 === x0 ? w / 2 : ((x - x0) / (x1 - x0)) * w);
  const sy = (y) => hgt - ((y - y0) / (y1 - y0)) * hgt;
  let d = "";
  let pen = false;
  for (let i = 0; i < xs.length; i++) {
    if (!Number.isFinite(ys[i])) { pen = false; continue; }
    d += `${pen ? "L" : "M"}${sx(xs[i]).toFixed(1)},${sy(ys[i]).toFixed(1)}`;
    pen = true;
  }
  return d;
}

function chart(series, keys, width, height) {
  const curves = keys.filter((k) => series[k]).map((k) => ({ k, ...series[k] }));
  const xsAll = curves.flatMap((c) => c.x);
  const xr = xsAll.length ? [Math.min(...xsAll), Math.max(...xsAll)] : [0, 1];
  const yr = yRange(curves);
  const w = width - 50;
  const hh = height - 24;
  let svg = `<svg width="${width}" height="${height}" class="lk-dash-chart"><g transform="translate(44,6)">`;
  svg += `<rect width="${w}" height="${hh}" style="fill:var(--lk-bg1);stroke:var(--lk-border2)"/>`;
  for (const t of [0, 0.5, 1]) {
    const y = yr[0] + t * (yr[1] - yr[0]);
    svg += `<text x="-4" y="${(hh - t * hh + 4).toFixed(1)}" font-size="10" text-anchor="end" style="fill:var(--lk-fg)">${y.toPrecision(3)}</text>`;
  }
  svg += `<text x="${w}" y="${hh + 14}" font-size="10" text-anchor="end" style="fill:var(--lk-fg)">step ${xr[1]}</text>`;
  curves.forEach((c, i) => {
    const color = COLORS[keys.indexOf(c.k) % COLORS.length];
    const marker = c.k.startsWith("val_");
    svg += `<path d="${pathOf(c.x, c.y, xr, yr, w, hh)}" fill="none" stroke="${color}" stroke-width="1.5" data-key="${c.k}"/>`;
    if (marker) {
      c.x.forEach((x, j) => {
        if (!Number.isFinite(c.y[j])) return;
        const px = xr[1] === xr[0] ? w / 2 : ((x - xr[0]) / (xr[1] - xr[0])) * w;
        const py = hh - ((c.y[j] - yr[0]) / (yr[1] - yr[0])) * hh;
        svg += `<circle cx="${px.toFixed(1)}" cy="${py.toFixed(1)}" r="2.5" fill="${color}"/>`;
      });
    }
    // legend text in the theme's ink (series colours are not text colours), swatch in colour
    svg += `<rect x="${6 + i * 110}" y="6" width="10" height="10" fill="${color}"/>`;
    svg += `<text x="${20 + i * 110}" y="15" font-size="11" style="fill:var(--lk-fg)">${c.k}</text>`;
  });
  return svg + "</g></svg>";
}

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
      method: "POST", headers, credentials: "same-origin", body: JSON.stringify({ token }),
    });
    if (r.ok) return "";
    let msg = `HTTP ${r.status}`;
    try { msg = (await r.json()).message || msg; } catch { /* not JSON */ }
    return `the server did not stop the fit (${msg}); Stop waits for the kernel`;
  } catch (e) {
    return `labkit's server extension did not answer (${e}); Stop waits for the kernel`;
  }
}

function render({ model, el }) {
  ensureStyles();
  const status = h("span", { class: "lk-dash-status" });
  const stop = h("button", { class: "lk-dash-stop", title: "finish this step, keep a checkpoint, stop" }, "Stop");
  const bar = h("div", { style: "flex:1;height:8px;background:var(--lk-bg2);border-radius:4px;overflow:hidden" },
    h("div", { class: "lk-dash-bar", style: "height:100%;width:0;background:var(--lk-accent)" }));
  const progress = h("span", { class: "lk-dash-progress" });
  const top = h("div", { style: "display:flex;gap:10px;align-items:center;padding:4px 0" }, status, bar, progress, stop);
  const stats = h("div", { class: "lk-dash-stats", style: "display:flex;gap:16px;flex-wrap:wrap;font-size:12px;padding:2px 0" });
  const charts = h("div", { class: "lk-dash-charts", style: "display:flex;gap:8px;flex-wrap:wrap" });
  const grads = h("div", { class: "lk-dash-grads", style: "font-size:11px;color:var(--lk-fg2)" });
  const error = h("pre", { class: "lk-dash-error", style: "color:var(--lk-error);white-space:pre-wrap;margin:4px 0" });
  const root = h("div", { class: "lk-view lk-dashboard", style: "padding:6px" }, top, stats, charts, grads, error);
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

  function draw() {
    const s = model.get("stats") || {};
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
    const series = model.get("series") || {};
    const lossKeys = Object.keys(series).filter((k) => k.endsWith("_loss")).sort();
    const metricKeys = Object.keys(series).filter((k) => !k.endsWith("_loss")).sort();
    charts.innerHTML = chart(series, lossKeys, 420, 200) + (metricKeys.length ? chart(series, metricKeys, 420, 200) : "");
    const g = model.get("grad_norms") || {};
    const gk = Object.keys(g);
    grads.textContent = gk.length ? `grad norms: ${gk.map((k) => `${k || "<root>"} ${g[k].toPrecision(3)}`).join(" · ")}` : "";
    error.textContent = model.get("error") || "";
    const done = ["finished", "stopped", "failed"].includes(st);
    if (done) { stop.disabled = true; stop.textContent = st === "stopped" ? "Stopped" : "Stop"; }
  }
  draw();
  model.on("change:updates", draw);
  model.on("change:status", draw);
  return () => {
    model.off("change:updates", draw);
    model.off("change:status", draw);
  };
}

export default { render };
