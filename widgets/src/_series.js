// Pure helpers of the time-series charts (dashboard): TensorBoard's smoothing, aligning
// curves sampled at different steps, and axis ranges taken from the data. No DOM.

/**
 * TensorBoard's scalar smoothing: an exponential moving average, debiased so the first
 * points are not pulled towards zero. weight in [0, 1): 0 = raw. Non-finite values pass
 * through and do not enter the average.
 * @param {(number | null)[]} ys
 * @param {number} weight
 */
export function ema(ys, weight) {
  if (!(weight > 0)) return ys.slice();
  let last = 0;
  let n = 0;
  return ys.map((y) => {
    if (y === null || !Number.isFinite(y)) return y;
    last = last * weight + (1 - weight) * y;
    n += 1;
    return last / (1 - weight ** n);
  });
}

/**
 * Curves {key: {x, y}} on one sorted x axis, as uPlot wants them: [xs, ys_key1, ...] with
 * null where a curve has no point at that x.
 * @param {Record<string, {x: number[], y: number[]}>} series
 * @param {string[]} keys
 * @returns {(number | null)[][]}
 */
export function aligned(series, keys) {
  const xs = [...new Set(keys.flatMap((k) => (series[k] ? series[k].x : [])))].sort((a, b) => a - b);
  const at = new Map(xs.map((x, i) => [x, i]));
  const cols = keys.map((k) => {
    const col = new Array(xs.length).fill(null);
    const c = series[k];
    if (c)
      c.x.forEach((x, i) => {
        col[/** @type {number} every x is in xs */ (at.get(x))] = Number.isFinite(c.y[i]) ? c.y[i] : null;
      });
    return col;
  });
  return [xs, ...cols];
}

/**
 * Axis range from the finite values: padded by 5% of the span (a loss that never goes
 * below 0.3 gets an axis that does not either), never below zero for values >= 0. Log scale: positive values only, padded
 * by a factor. [0, 1] when there is nothing to show.
 * @param {(number | null)[][]} columns
 * @param {boolean} [log]
 * @returns {[number, number]} the y range (uPlot's scale range)
 */
export function dataRange(columns, log = false) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const col of columns) {
    for (const y of col) {
      if (y === null || !Number.isFinite(y) || (log && y <= 0)) continue;
      if (y < lo) lo = y;
      if (y > hi) hi = y;
    }
  }
  if (!Number.isFinite(lo)) return log ? [0.1, 1] : [0, 1];
  if (log) return [lo / 1.15, hi * 1.15];
  if (lo === hi) return [lo - (Math.abs(lo) || 1) * 0.05, hi + (Math.abs(hi) || 1) * 0.05];
  const pad = (hi - lo) * 0.05;
  // padding never takes a non-negative quantity (a loss, a rate) below zero
  return [lo >= 0 ? Math.max(0, lo - pad) : lo - pad, hi + pad];
}

/** Whether every finite value is positive (a log axis can show them). @param {(number | null)[][]} columns */
export function allPositive(columns) {
  return columns.every((col) => col.every((y) => y === null || !Number.isFinite(y) || y > 0));
}

/** Colours of runs overlaid in one chart: tab10, then ten more hues (labkit/views/runs.py's
 * RUN_COLORS); past 20 runs the colours come again with a dash pattern (RUN_DASHES). */
export const RUN_COLORS = [
  "#1f77b4",
  "#ff7f0e",
  "#2ca02c",
  "#d62728",
  "#9467bd",
  "#8c564b",
  "#e377c2",
  "#7f7f7f",
  "#bcbd22",
  "#17becf",
  "#393b79",
  "#637939",
  "#8c6d31",
  "#843c39",
  "#7b4173",
  "#5254a3",
  "#8ca252",
  "#bd9e39",
  "#ad494a",
  "#a55194",
];
/** Dash patterns of the 1st, 2nd, 3rd ... round of colours (null: solid). */
export const RUN_DASHES = [null, [6, 3], [2, 2], [8, 3, 2, 3]];

/** The i-th run's colour and dash pattern. @param {number} i @returns {{color: string, dash: number[] | null}} */
export function runStyle(i) {
  return { color: RUN_COLORS[i % RUN_COLORS.length], dash: RUN_DASHES[Math.floor(i / RUN_COLORS.length) % RUN_DASHES.length] };
}

/**
 * A CSS colour (`#rgb`, `#rrggbb`, `rgb()`, `rgba()`) with its opacity scaled by `alpha`,
 * as `rgba(...)`: how the dashboard dims earlier runs with the theme's own ink, so they
 * sit below the current run in Light and Dark alike. Other forms come back unchanged.
 * @param {string} color
 * @param {number} alpha in [0, 1]
 */
export function withAlpha(color, alpha) {
  const c = String(color).trim();
  let rgba = null;
  const hex = c.match(/^#([0-9a-f]{3}|[0-9a-f]{6})$/i);
  if (hex) {
    const d = hex[1].length === 3 ? [...hex[1]].map((x) => x + x) : hex[1].match(/../g) || [];
    rgba = [...d.map((x) => Number.parseInt(x, 16)), 1];
  }
  const fn = c.match(/^rgba?\(\s*([\d.]+)[\s,]+([\d.]+)[\s,]+([\d.]+)(?:\s*[,/]\s*([\d.]+%?))?\s*\)$/i);
  if (fn) {
    const a = fn[4] == null ? 1 : fn[4].endsWith("%") ? Number.parseFloat(fn[4]) / 100 : Number(fn[4]);
    rgba = [Number(fn[1]), Number(fn[2]), Number(fn[3]), a];
  }
  if (!rgba) return c;
  const [r, g, b, a] = rgba;
  return `rgba(${Math.round(r)}, ${Math.round(g)}, ${Math.round(b)}, ${+(a * alpha).toFixed(3)})`;
}

/**
 * Earlier runs' curves as chart series "<curve> · <run>" (each run its own dash), when
 * asked; with the keys to draw dimmed.
 * @param {import("./_contract_types").RunCurves} earlier
 * @param {boolean} compare
 */
export function overlaySeries(earlier, compare) {
  /** @type {Record<string, {x: number[], y: number[], t?: (number | null)[]}>} */
  const series = {};
  /** @type {Record<string, number[] | null>} */
  const dashes = {};
  if (!compare) return { series, dashes, dim: [] };
  Object.entries(earlier || {}).forEach(([run, curves], i) => {
    for (const [k, c] of Object.entries(curves)) {
      const key = `${k} · ${run}`;
      series[key] = c;
      dashes[key] = RUN_DASHES[i % RUN_DASHES.length];
    }
  });
  return { series, dashes, dim: Object.keys(series) };
}
