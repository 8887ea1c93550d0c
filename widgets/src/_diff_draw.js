// The diff view's drawing as text, a function of its state: the ranked table's page, the
// legend, a box's title, the metric buttons' states and the headline. Pure (no DOM, no
// model), so node tests read what is drawn (widgets/test/diff.test.mjs); diff.js puts the
// strings in place and wires the events. The colours and paging are _diff_color.js's.
import { boxLook, pageOf } from "./_diff_color.js";
import { esc } from "./_ui.js";

/** @typedef {import("./_contract_types").DiffMetric} DiffMetric */

/** The metrics a diff can show, in the toolbar's order. */
export const METRICS = ["time", "memory", "flops", "params"];
/** Table rows per page (a diff of thousands of modules pages). */
export const PAGE = 100;

/**
 * One page of the ranked rows of a metric as a table's HTML; each row's swatch is the
 * colour its module's box is drawn in.
 * @param {DiffMetric} c the metric shown
 * @param {[string, string] | string[]} labels the two traces' names
 * @param {number} page
 * @param {number} scale the colour scale the boxes are drawn with
 * @returns {{html: string, start: number, pages: number}}
 */
export function tableHtml(c, labels, page, scale) {
  const [a, b] = labels;
  const { rows, start, pages } = pageOf(c.rows, page, PAGE);
  const head = ["#", "module", "type", a || "base", b || "other", "change", "95% interval", "share", "match"];
  let body = "";
  rows.forEach((r, i) => {
    const look = r.node >= 0 && !c.error ? boxLook(c, r.node, scale) : null;
    const swatch = look ? `<span class="lk-swatch lk-diff-swatch" style="background:${look.fill}"></span>` : "";
    const noise = r.noise ? " lk-diff-noise" : "";
    body +=
      `<tr data-row="${start + i}" data-node="${r.node}" data-module="${esc(r.module)}">` +
      `<td>${start + i + 1}</td><td>${swatch}${esc(r.module || "(root)")}</td><td>${esc(r.type)}</td>` +
      `<td>${esc(r.a)}</td><td>${esc(r.b)}</td><td class="${noise}">${esc(r.delta)}${r.noise ? " (noise)" : ""}</td>` +
      `<td>${esc(r.interval)}</td><td>${esc(r.share)}</td><td>${esc(r.status === "same" ? r.match : `${r.match}, ${r.status}`)}</td></tr>`;
  });
  const th = head.map((x) => `<th>${esc(x)}</th>`).join("");
  return { html: `<table class="lk-table"><thead><tr>${th}</tr></thead><tbody>${body}</tbody></table>`, start, pages };
}

/**
 * The legend: what the two ends of the colour bar mean, and the hatching.
 * @param {{low: string, high: string}} words legendText's
 */
export function legendHtml(words) {
  return (
    `<span class="lk-diff-low">${esc(words.low)}</span><span class="lk-diff-bar"></span>` +
    `<span class="lk-diff-high">${esc(words.high)}</span>` +
    `<span class="lk-diff-hatch"></span><span>within noise (95% interval spans 0)</span>`
  );
}

/**
 * A box's title: its module and change, "(within noise)" when hatched.
 * @param {string} name the module's path ("" for the root)
 * @param {{value: number, hatched: boolean}} look boxLook's
 * @param {(v: number) => string} fmt the metric's unit
 */
export function boxTitle(name, look, fmt) {
  return `${name || "(root)"}: ${look.value > 0 ? "+" : ""}${fmt(look.value)}${look.hatched ? " (within noise)" : ""}`;
}

/**
 * Each metric button's state: off when its diff failed, its headline (or error) as title,
 * pressed when shown.
 * @param {Record<string, DiffMetric | undefined>} changes
 * @param {string} metric the one shown
 * @returns {Record<string, {disabled: boolean, title: string, pressed: boolean}>}
 */
export function metricButtons(changes, metric) {
  /** @type {Record<string, {disabled: boolean, title: string, pressed: boolean}>} */
  const out = {};
  for (const m of METRICS) {
    const info = changes[m];
    out[m] = { disabled: Boolean(info?.error), title: info?.error || info?.headline || "", pressed: m === metric };
  }
  return out;
}

/**
 * The line above the graph: the metric's headline, or why it has none.
 * @param {DiffMetric} c @param {string} metric
 */
export function headline(c, metric) {
  return c.error ? `${metric}: ${c.error}` : c.headline;
}
