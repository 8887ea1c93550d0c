// Time-series charts on uPlot (hover values in the legend under the plot, drag to zoom,
// double-click to reset, log scale, TensorBoard-style EMA smoothing). Colours come from
// the theme tokens (--lk-*), read again when JupyterLab's theme changes. Charts given the
// same `sync` key share one hover cursor (by x value): hovering the loss chart shows every
// other chart's values at that step (or second); a curve without a point there shows its
// last value before it. The x axis is the step, or wall-clock seconds (`x: "time"`, from
// each curve's `t`).
import uPlot from "uplot";
import UPLOT_CSS from "uplot/dist/uPlot.min.css";
import { aligned, allPositive, dataRange, ema, RUN_COLORS, RUN_DASHES, runStyle, withAlpha } from "./_series.js";

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

/** @param {HTMLElement} el */
function tokens(el) {
  const cs = getComputedStyle(el);
  /** @param {string} name @param {string} dflt */
  const v = (name, dflt) => cs.getPropertyValue(name).trim() || dflt;
  // dimmed curves (earlier runs): the theme's secondary ink at half its opacity, below
  // the current run's colours in Light and Dark
  const dim = withAlpha(v("--lk-fg2", "rgba(0,0,0,.54)"), 0.5);
  return { fg: v("--lk-fg", "#222"), grid: v("--lk-border2", "#e0e0e0"), font: "11px sans-serif", dim };
}

/**
 * uPlot's columns and series of the curves `present` (aligned in `base`): a smoothed curve
 * with its faint raw one (one legend entry with `oneEntry`), validation curves as points,
 * the curves in `dim` thin in the dimmed `ink` (smoothed only). No DOM.
 * @param {string[]} present the curves with points, in drawing order
 * @param {(number | null)[][]} base [xs, ys of each curve in `present`]
 * @param {{keys: string[], title: string, colors?: Record<string, string> | null,
 *   dashes?: Record<string, number[] | null> | null, dim?: string[] | null, ink: string,
 *   smoothing: number, oneEntry: boolean}} how
 */
export function chartSeries(present, base, { keys, title, colors = null, dashes = null, dim = null, ink, smoothing, oneEntry }) {
  /** @type {{key: string, hidden?: boolean, partner?: number | null, opts: any}[]} */
  const names = [];
  const data = [base[0]];
  const line = { spanGaps: true, points: { show: false } };
  present.forEach((k, i) => {
    const faint = Boolean(dim?.includes(k));
    const color = faint ? ink : colors?.[k] || COLORS[keys.indexOf(k) % COLORS.length];
    const dash = dashes?.[k] ? { dash: dashes[k] } : {};
    const ys = base[i + 1];
    const val = k.startsWith("val_") || title.startsWith("val_");
    if (faint) {
      data.push(smoothing > 0 && !val ? ema(ys, smoothing) : ys);
      names.push({
        key: k,
        opts: { label: k, stroke: color, width: 1, spanGaps: true, points: { show: val, size: 4, fill: color }, ...dash },
      });
    } else if (!val && smoothing > 0) {
      const raw = names.length;
      const rawStroke = `${color}${oneEntry ? "40" : "55"}`;
      data.push(ys, ema(ys, smoothing));
      names.push(
        {
          key: `${k} (raw)`,
          hidden: oneEntry,
          partner: oneEntry ? raw + 1 : null,
          opts: { label: `${k} (raw)`, stroke: rawStroke, width: 1, ...line, ...dash },
        },
        { key: k, partner: oneEntry ? raw : null, opts: { label: k, stroke: color, width: 1.6, ...line, ...dash } },
      );
    } else {
      data.push(ys);
      names.push({
        key: k,
        opts: { label: k, stroke: color, width: val ? 1.2 : 1.6, spanGaps: true, points: { show: val, size: 6, fill: color }, ...dash },
      });
    }
  });
  return { names, data };
}

// the legend's value: the point under the cursor, or the curve's last one before it
// (a validation curve has points only at epoch ends)
/**
 * @param {uPlot} self
 * @param {number | null | undefined} v
 * @param {number} si
 * @param {number | null | undefined} di
 */
function legendValue(self, v, si, di) {
  const y = v ?? (di == null ? null : lastBefore(self.data[si], di));
  if (y == null || !Number.isFinite(y)) return "--";
  return Math.abs(y) >= 1e4 || (Math.abs(y) < 1e-3 && y !== 0) ? y.toExponential(3) : +y.toPrecision(4);
}

/**
 * Hides the legend rows of raw curves that share an entry with their smoothed curve.
 * @param {uPlot} u
 * @param {{hidden?: boolean}[]} names
 */
function hideRawRows(u, names) {
  const rows = u.root.querySelectorAll(".u-legend tr.u-series");
  names.forEach((n, i) => {
    const row = /** @type {HTMLElement | undefined} */ (rows[i + 1]);
    if (row && n.hidden) {
      row.style.display = "none";
      row.classList.add("lk-raw");
    }
  });
}

/**
 * What the chart draws, as data attributes (tests read them; the canvas holds no text).
 * @param {HTMLElement} wrap
 * @param {{names: Names, data: (number | null)[][], present: string[], series: Curves, dim: string[] | null,
 *   useLog: boolean, canLog: boolean, xKind: string}} drawn
 */
function describe(wrap, { names, data, present, series, dim, useLog, canLog, xKind }) {
  // each curve's stroke and the dimmed ones (tests measure their contrast per theme)
  wrap.dataset.strokes = JSON.stringify(Object.fromEntries(names.map((n) => [n.key, n.opts.stroke])));
  wrap.dataset.dim = JSON.stringify(present.filter((k) => dim?.includes(k)));
  wrap.dataset.series = JSON.stringify(Object.fromEntries(present.map((k) => [k, series[k].x.length])));
  wrap.dataset.log = String(useLog);
  wrap.dataset.canLog = String(canLog);
  wrap.dataset.yRange = JSON.stringify(dataRange(data.slice(1), useLog).map((v) => +v.toPrecision(4)));
  const xs = data[0];
  wrap.dataset.lastX = String(xs.length ? xs[xs.length - 1] : "");
  wrap.dataset.x = xKind;
}

/** @typedef {ReturnType<typeof chartSeries>["names"]} Names the chart's series: key, legend row, uPlot options */
/** @typedef {Record<string, {x: number[], y: number[], t?: (number | null)[]}>} Curves curves by key */

/**
 * A chart of the curves `keys` (validation curves as points, the rest as lines).
 * `update(series, {smoothing, log})` redraws from the dashboard's `series` trait;
 * a zoom the user made is kept across updates until a double-click resets it.
 * With `oneEntry`, a smoothed curve and its faint raw curve are one legend entry (the raw
 * row is hidden; toggling the entry toggles both). Curves in `dim` (earlier runs) are drawn
 * thin in the theme's dimmed ink (smoothed only), under the others.
 * @param {HTMLElement} host where the chart goes
 * @param {{keys: string[], title: string, sync?: string | null, colors?: Record<string, string> | null,
 *   dashes?: Record<string, number[] | null> | null, oneEntry?: boolean, dim?: string[] | null}} opts
 *   the curves drawn, the title, a cursor-sync key shared by charts, a colour and a dash per
 *   curve, one legend entry per curve, the curves drawn dimmed
 */
export function timeChart(host, { keys, title, sync = null, colors = null, dashes = null, oneEntry = false, dim = null }) {
  ensureCss();
  const wrap = h("div", { class: "lk-chart lk-dash-chart", "data-title": title });
  host.appendChild(wrap);
  /** @type {uPlot | null} */
  let u = null;
  let shape = "";
  /** @type {[number, number] | null} */
  let zoom = null; // [x0, x1] chosen by the user
  /** @type {[Curves, {smoothing: number, log: boolean, x: string}] | null} */
  let last = null;
  /** @type {(number | null)[][]} */
  let cols = []; // the y columns shown now: the y range is taken from them on every update
  let xKind = "step";

  /** @param {(number | null)[][]} data @param {Names} names @param {boolean} log */
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
          ...names.map((s) => ({
            ...s.opts,
            value: (/** @type {uPlot} */ self, /** @type {number | null} */ v, /** @type {number} */ si, /** @type {number | null} */ di) =>
              legendValue(self, v, si, di),
          })),
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
      /** @type {uPlot.AlignedData} */ (data),
      wrap,
    );
    hideRawRows(u, names);
    u.over.addEventListener("dblclick", () => {
      zoom = null;
      delete wrap.dataset.zoom;
      if (last) update(last[0], last[1], true);
    });
  }

  /**
   * @param {Curves} input
   * @param {{smoothing?: number, log?: boolean, x?: string}} [settings]
   * @param {boolean} [force]
   */
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
    const { names, data } = chartSeries(present, base, { keys, title, colors, dashes, dim, ink: tokens(wrap).dim, smoothing, oneEntry });
    const next = `${names.map((n) => n.key).join("|")}:${useLog}:${xKind}`;
    if (force || next !== shape || !u) {
      shape = next;
      cols = data.slice(1);
      build(data, names, useLog);
    } else {
      cols = data.slice(1);
      u.setData(/** @type {uPlot.AlignedData} */ (data), true);
    }
    describe(wrap, { names, data, present, series, dim, useLog, canLog, xKind });
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
    legend: () =>
      u
        ? u.series.slice(1).map((s, i) => {
            const p = /** @type {uPlot} */ (u); // not null: the map runs synchronously
            return [s.label, legendValue(p, p.data[i + 1][p.cursor.idx ?? -1], i + 1, p.cursor.idx)];
          })
        : [],
    plot: () => u,
    destroy() {
      ro.disconnect();
      stopThemeWatch();
      if (u) u.destroy();
      wrap.remove();
    },
  };
}
