// Pure helpers of the charts' x axis and hover legend (no DOM, no uPlot): node-testable.

/**
 * The last finite value of `col` at or before index `i` (null when there is none).
 * @param {ArrayLike<number | null | undefined>} col
 * @param {number} i
 */
export function lastBefore(col, i) {
  for (let j = Math.min(i, col.length - 1); j >= 0; j--) {
    const y = col[j];
    if (y !== null && y !== undefined && Number.isFinite(y)) return y;
  }
  return null;
}

/**
 * Curves on the wall-time axis: each curve's `t` (seconds) as its x; points without one dropped.
 * @param {Record<string, {x: number[], y: number[], t?: (number | null)[]}>} series
 */
export function byTime(series) {
  /** @type {Record<string, {x: number[], y: number[]}>} */
  const out = {};
  for (const [k, c] of Object.entries(series)) {
    if (!c || !Array.isArray(c.t)) continue;
    /** @type {number[]} */
    const x = [];
    /** @type {number[]} */
    const y = [];
    c.t.forEach((t, i) => {
      if (t != null && Number.isFinite(t)) {
        x.push(t);
        y.push(c.y[i]);
      }
    });
    out[k] = { x, y };
  }
  return out;
}
