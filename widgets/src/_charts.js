// Time-series charts on uPlot (hover values in the legend under the plot, drag to zoom,
// double-click to reset, log scale, TensorBoard-style EMA smoothing). Colours come from
// the theme tokens (--lk-*), read again when JupyterLab's theme changes. Charts given the
// same `sync` key share one hover cursor (by x value): hovering the loss chart shows every
// other chart's values at that step (or second); a curve without a point there shows its
// last value before it. The x axis is the step, or wall-clock seconds (`x: "time"`, from
// each curve's `t`).
import uPlot from "uplot";
import UPLOT_CSS from "uplot/dist/uPlot.min.css";
import { aligned, allPositive, dataRange, ema, RUN_COLORS, RUN_DASHES, runStyle } from "./_series.js";

export { RUN_COLORS, RUN_DASHES, runStyle };
import { byTime, lastBefore } from "./_chart_x.js";

export { byTime, lastBefore };
import { h, onThemeSwitch } from "./_ui.js";

export const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"];
const HEIGHT = 210;
const STEP_INCRS = [1, 2, 5].flatMap((m) => [1, 10, 100, 1e3, 1e4, 1e5, 1e6].map((p) => m * p)).sort((a, b) => a - b);

function ensureCss() {
  if (document.getElementById("labkit-uplot-css")) return;
  const style = document.createElement("style");
  style.id = "labkit-uplot-css";
  style.textContent = `${UPLOT_CSS}
.lk-chart .u-legend { font-size: 11px; color: var(--lk-fg); text-align: left; }
.lk-chart .u-legend th { font-weight: 600; }
.lk-chart .u-select { background: var(--lk-bg3); opacity: .4; }
.lk-chart .u-title { font-size: 12px; font-weight: 600; color: var(--lk-fg); }`;
  document.head.appendChild(style);
}

function tokens(el) {
  const cs = getComputedStyle(el);
  const v = (name, dflt) => cs.getPropertyValue(name).trim() || dflt;
  return { fg: v("--lk-fg", "#222"), grid: v("--lk-border2", "#e0e0e0"), font: "11px sans-serif" };
}

/**
 * A chart of the curves `keys` (validation curves as points, the rest as lines).
 * `update(series, {smoothing, log})` redraws from the dashboard's `series` trait;
 * a zoom the user made is kept across updates until a double-click resets it.
 * With `oneEntry`, a smoothed curve and its faint raw curve are one legend entry (the raw
 * row is hidden; toggling the entry toggles both).
 * @param {HTMLElement} host where the chart goes
 * @param {{keys: string[], title: string, sync?: string | null, colors?: Record<string, string> | null,
 *   dashes?: Record<string, number[] | null> | null, oneEntry?: boolean}} opts
 *   the curves drawn, the title, a cursor-sync key shared by charts, a colour and a dash per
 *   curve, one legend entry per curve
 */
export function timeChart(host, { keys, title, sync = null, colors = null, dashes = null, oneEntry = false }) {
  ensureCss();
  const wrap = h("div", { class: "lk-chart lk-dash-chart", "data-title": title });
  host.appendChild(wrap);
  let u = null;
  let shape = "";
  let zoom = null; // [x0, x1] chosen by the user
  let last = null;
  let cols = []; // the y columns shown now: the y range is taken from them on every update
  let xKind = "step";

  function build(data, names, log) {
    if (u) u.destroy();
    const t = tokens(wrap);
    wrap.dataset.ink = t.fg; // the axis colour drawn on the canvas (tests read it per theme)
    const axis = { stroke: t.fg, font: t.font, grid: { stroke: t.grid, width: 1 }, ticks: { stroke: t.grid } };
    const width = Math.max(280, wrap.clientWidth || host.clientWidth || 420);
    u = new uPlot(
      {
        title,
        width,
        height: HEIGHT,
        scales: {
          x: { time: false, range: (_self, lo, hi) => (zoom ? zoom : lo === hi ? [lo - 1, hi + 1] : [lo, hi]) },
          y: { distr: log ? 3 : 1, range: () => dataRange(cols, log) },
        },
        // steps are whole numbers: no 2.5 ticks
        axes: [
          xKind === "time"
            ? { ...axis, label: "wall time (s)", labelFont: t.font }
            : { ...axis, label: "step", labelFont: t.font, incrs: STEP_INCRS },
          { ...axis, size: 56 },
        ],
        series: [
          { label: xKind === "time" ? "seconds" : "step" },
          ...names.map((s) => ({ ...s.opts, value: (self, v, si, di) => shown(self, v, si, di) })),
        ],
        cursor: { drag: { x: true, y: false }, ...(sync ? { sync: { key: sync, setSeries: false } } : {}) },
        legend: { live: true },
        hooks: {
          // one legend entry for a smoothed curve and its raw one: toggling it toggles both
          setSeries: [
            (self, si, opts) => {
              if (si == null) return;
              const partner = names[si - 1]?.partner;
              if (partner != null && opts?.show != null && self.series[partner + 1].show !== opts.show)
                self.setSeries(partner + 1, { show: opts.show });
            },
          ],
          // the y scale uPlot draws with (tests compare it with the range of the data)
          setScale: [
            (self, key) => {
              if (key === "y")
                wrap.dataset.yScale = JSON.stringify([self.scales.y.min, self.scales.y.max].map((v) => Number(v?.toPrecision(4))));
            },
          ],
          setSelect: [
            (self) => {
              if (self.select.width < 2) return;
              zoom = [self.posToVal(self.select.left, "x"), self.posToVal(self.select.left + self.select.width, "x")];
              self.setSelect({ left: 0, width: 0, top: 0, height: 0 }, false);
              self.setScale("x", { min: zoom[0], max: zoom[1] });
              wrap.dataset.zoom = zoom.map((z) => z.toFixed(2)).join(",");
            },
          ],
        },
      },
      data,
      wrap,
    );
    const rows = u.root.querySelectorAll(".u-legend tr.u-series");
    names.forEach((n, i) => {
      const row = /** @type {HTMLElement | undefined} */ (rows[i + 1]);
      if (row && n.hidden) {
        row.style.display = "none";
        row.classList.add("lk-raw");
      }
    });
    u.over.addEventListener("dblclick", () => {
      zoom = null;
      delete wrap.dataset.zoom;
      if (last) update(last[0], last[1], true);
    });
  }

  // the legend's value: the point under the cursor, or the curve's last one before it
  // (a validation curve has points only at epoch ends)
  function shown(self, v, si, di) {
    const y = v ?? (di == null ? null : lastBefore(self.data[si], di));
    if (y == null || !Number.isFinite(y)) return "--";
    return Math.abs(y) >= 1e4 || (Math.abs(y) < 1e-3 && y !== 0) ? y.toExponential(3) : +y.toPrecision(4);
  }

  function update(input, { smoothing = 0, log = false, x = "step" } = {}, force = false) {
    last = [input, { smoothing, log, x }];
    if (x !== xKind) {
      xKind = x;
      zoom = null;
      force = true;
    }
    const series = x === "time" ? byTime(input) : input;
    const present = keys.filter((k) => series[k]?.x.length);
    const base = aligned(series, present);
    const canLog = allPositive(base.slice(1));
    const useLog = log && canLog;
    const names = [];
    const data = [base[0]];
    present.forEach((k, i) => {
      const color = colors?.[k] || COLORS[keys.indexOf(k) % COLORS.length];
      const dash = dashes?.[k] ? { dash: dashes[k] } : {};
      const ys = base[i + 1];
      const val = k.startsWith("val_") || title.startsWith("val_");
      if (!val && smoothing > 0) {
        data.push(ys);
        const raw = names.length;
        names.push({
          key: `${k} (raw)`,
          hidden: oneEntry,
          partner: oneEntry ? raw + 1 : null,
          opts: {
            label: `${k} (raw)`,
            stroke: `${color}${oneEntry ? "40" : "55"}`,
            width: 1,
            spanGaps: true,
            points: { show: false },
            ...dash,
          },
        });
        data.push(ema(ys, smoothing));
        names.push({
          key: k,
          partner: oneEntry ? raw : null,
          opts: { label: k, stroke: color, width: 1.6, spanGaps: true, points: { show: false }, ...dash },
        });
      } else {
        data.push(ys);
        names.push({
          key: k,
          opts: { label: k, stroke: color, width: val ? 1.2 : 1.6, spanGaps: true, points: { show: val, size: 6, fill: color }, ...dash },
        });
      }
    });
    const next = `${names.map((n) => n.key).join("|")}:${useLog}:${xKind}`;
    if (force || next !== shape || !u) {
      shape = next;
      cols = data.slice(1);
      build(data, names, useLog);
    } else {
      cols = data.slice(1);
      u.setData(data, true);
    }
    wrap.dataset.series = JSON.stringify(Object.fromEntries(present.map((k) => [k, series[k].x.length])));
    wrap.dataset.log = String(useLog);
    wrap.dataset.canLog = String(canLog);
    wrap.dataset.yRange = JSON.stringify(dataRange(data.slice(1), useLog).map((v) => +v.toPrecision(4)));
    wrap.dataset.lastX = String(base[0].length ? base[0][base[0].length - 1] : "");
    wrap.dataset.x = xKind;
  }

  const ro = new ResizeObserver(() => {
    if (u && wrap.clientWidth && Math.abs(wrap.clientWidth - u.width) > 2) u.setSize({ width: wrap.clientWidth, height: HEIGHT });
  });
  ro.observe(wrap);
  // the canvas does not read CSS variables: redraw with the new theme's colours
  const stopThemeWatch = onThemeSwitch(() => last && update(last[0], last[1], true));

  return {
    update,
    el: wrap,
    /** The legend values now (tests: the shared cursor fills every chart's legend). */
    legend: () => (u ? u.series.slice(1).map((s, i) => [s.label, shown(u, u.data[i + 1][u.cursor.idx ?? -1], i + 1, u.cursor.idx)]) : []),
    plot: () => u,
    destroy() {
      ro.disconnect();
      stopThemeWatch();
      if (u) u.destroy();
      wrap.remove();
    },
  };
}
