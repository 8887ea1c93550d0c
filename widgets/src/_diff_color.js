// The diff view's pure parts: the diverging colour of a change, the scale of what is
// drawn, the legend's words, which frames to open to show a module, and which table rows
// a page shows. No DOM; tested by widgets/test/diff.test.mjs. The Python static picture
// (labkit/views/diff.py: diverging, RED, BLUE, WHITE) uses the same three colours.
import { inkOn } from "./_shared.js";

/** @typedef {import("./_contract_types").DiffMetric} DiffMetric */
/** @typedef {import("./_contract_types").DiffRow} DiffRow */

export const RED = [178, 24, 43];
export const BLUE = [33, 102, 172];
export const WHITE = [247, 247, 247];
/** A change of exactly 0 (or a box of no module) takes the theme's own box colour. */
export const UNCHANGED = { fill: "var(--lk-bg2, #eee)", ink: "var(--lk-fg, #222)" };

/**
 * White at 0, red for a rise, blue for a fall, full at `scale` and beyond: "rgb(r,g,b)".
 * @param {number} value @param {number} scale
 */
export function diverging(value, scale) {
  if (!(scale > 0) || value === 0 || !Number.isFinite(value)) return `rgb(${WHITE.join(",")})`;
  const t = Math.max(-1, Math.min(1, value / scale));
  const end = t > 0 ? RED : BLUE;
  const a = Math.abs(t);
  const c = WHITE.map((w, i) => Math.round(w + (end[i] - w) * a));
  return `rgb(${c.join(",")})`;
}

/**
 * Full colour: the largest change of a drawn box (a frame's change is its boxes' sum).
 * @param {ArrayLike<number>} delta per payload node @param {Iterable<number>} boxes drawn boxes
 */
export function scaleOf(delta, boxes) {
  let top = 0;
  for (const k of boxes) {
    const v = Math.abs(delta[k] || 0);
    if (v > top) top = v;
  }
  return top;
}

/**
 * How box k looks for one metric: its fill, the ink on it (the one with more WCAG
 * contrast), and whether it is hatched (its change is within noise).
 * @param {Pick<DiffMetric, "delta" | "noise">} change @param {number} k @param {number} scale
 * @returns {{fill: string, ink: string, hatched: boolean, value: number}}
 */
export function boxLook(change, k, scale) {
  const value = change.delta[k] || 0;
  const hatched = Boolean(change.noise[k]);
  if (value === 0) return { ...UNCHANGED, hatched, value };
  const fill = diverging(value, scale);
  return { fill, ink: inkOn(fill), hatched, value };
}

/**
 * The legend's three labels: the full fall, 0, the full rise, in the metric's words.
 * @param {number} scale @param {(v: number) => string} fmt @param {string} worse @param {string} better
 */
export function legendText(scale, fmt, worse, better) {
  if (!(scale > 0)) return { low: "0", mid: "no change drawn", high: "0" };
  return { low: `−${fmt(scale)} ${better}`, mid: "0", high: `+${fmt(scale)} ${worse}` };
}

/**
 * Trace ids of the calls to open so that payload node k is drawn: its enclosing calls.
 * @param {{parent: ArrayLike<number>, ids: ArrayLike<number>}} graph @param {number} k
 * @returns {number[]} outermost first
 */
export function revealIds(graph, k) {
  const out = [];
  for (let p = graph.parent[k]; p >= 0; p = graph.parent[p]) out.unshift(graph.ids[p]);
  return out;
}

/**
 * The drawn box or frame that shows payload node k now: k itself, or the enclosing call
 * drawn collapsed (a box) that hides it; -1 when nothing draws it.
 * @param {{parent: ArrayLike<number>}} graph @param {number} k
 * @param {Set<number>} boxes drawn boxes @param {Set<number>} frames drawn frames (open calls)
 */
export function shownAs(graph, k, boxes, frames) {
  if (boxes.has(k) || frames.has(k)) return k;
  for (let p = graph.parent[k]; p >= 0; p = graph.parent[p]) if (boxes.has(p)) return p;
  return -1;
}

/**
 * One page of the ranked rows (rows that did not change last, as ranked in Python).
 * @param {DiffRow[]} rows @param {number} page 0-based @param {number} size
 * @returns {{rows: DiffRow[], start: number, pages: number}}
 */
export function pageOf(rows, page, size) {
  const pages = Math.max(1, Math.ceil(rows.length / size));
  const p = Math.max(0, Math.min(pages - 1, page));
  return { rows: rows.slice(p * size, (p + 1) * size), start: p * size, pages };
}

/**
 * The row of `path` in the ranked rows, or -1.
 * @param {DiffRow[]} rows @param {string | null} path
 */
export function rowOf(rows, path) {
  if (path === null || path === undefined) return -1;
  return rows.findIndex((r) => r.module === path && r.status !== "added");
}
