// The GraphView's toolbar: colour-by metric, legend, search, depth, zoom, fit, export.
// buildToolbar makes the elements (DOM); metricDefs and legendHtml are pure and
// unit-tested by widgets/test/graph_toolbar.test.mjs.
import { formatterOf } from "./_units.js";
import { esc, h, setOptions } from "./_ui.js";

/**
 * @typedef {object} MetricDef a colour-by metric of the payload
 * @property {string} key the metric's key in GraphView.metrics
 * @property {string} label
 * @property {string} unit
 * @property {(v: number) => string} fmt its values in its unit
 */
/**
 * @typedef {object} GraphToolbar the toolbar's elements and setters (buildToolbar)
 * @property {HTMLElement} el
 * @property {HTMLSelectElement} metricSel
 * @property {HTMLInputElement} search
 * @property {HTMLInputElement} depthIn
 * @property {HTMLElement} legend
 * @property {(defs: MetricDef[]) => void} setMetrics offer these metrics in the colour-by list
 * @property {(rolled: boolean, unrolled?: number, shown?: boolean) => void} setRolled the roll button's text
 */

/**
 * The payload's {key: [label, unit]} as [{key, label, unit, fmt}], in payload order.
 * @param {Record<string, string[]> | null | undefined} table
 * @returns {MetricDef[]}
 */
export function metricDefs(table) {
  return Object.entries(table || {}).map(([key, [label, unit]]) => ({ key, label, unit, fmt: formatterOf(unit) }));
}

/**
 * The colour legend: min and max of the scale in the metric's unit, or "no ... recorded".
 * @param {{min: number, max: number, log: boolean, at: (t: number) => string}} scale colorScale's
 * @param {MetricDef | undefined} def
 */
export function legendHtml(scale, def) {
  if (!def) return "";
  if (!scale.max) return `<span>no ${esc(def.label)} recorded</span>`;
  const stops = [0, 0.25, 0.5, 0.75, 1].map((t) => scale.at(t)).join(",");
  return (
    `<span>${esc(def.fmt(scale.min))}</span><span class="lk-bar" style="background:linear-gradient(90deg,${stops})"></span>` +
    `<span>${esc(def.fmt(scale.max))}</span>${scale.log ? "<span>(log)</span>" : ""}`
  );
}

/**
 * @param {{zoomIn: () => void, zoomOut: () => void, fit: () => void, svg: () => void, png: () => void, roll?: () => void}} act
 *   what the buttons do
 * @returns {GraphToolbar}
 */
export function buildToolbar(act) {
  const metricSel = h("select", { title: "colour by", class: "lk-metric" });
  const search = h("input", { type: "search", placeholder: "search modules / ops", class: "lk-search", size: "18" });
  const depthIn = h("input", { type: "number", min: "0", max: "64", class: "lk-depth", title: "expand to depth" });
  const legend = h("div", { class: "lk-legend" });
  const btn = (/** @type {string} */ text, /** @type {string} */ title, /** @type {() => void} */ fn, cls = "") =>
    h("button", { title, onclick: fn, class: cls }, text);
  const rollBtn = btn("Unroll all", "draw every call of each repeated block", act.roll || (() => {}), "lk-roll");
  const el = h(
    "div",
    { class: "lk-toolbar" },
    h("span", {}, "colour"),
    metricSel,
    legend,
    h("span", { class: "lk-spacer" }),
    search,
    h("span", {}, "depth"),
    depthIn,
    btn("−", "zoom out", act.zoomOut),
    btn("+", "zoom in", act.zoomIn),
    btn("Fit", "fit to view", act.fit, "lk-fit"),
    rollBtn,
    btn("SVG", "export SVG", act.svg),
    btn("PNG", "export PNG", act.png),
  );
  /** Offer these metrics in the colour-by list. */
  const setMetrics = (/** @type {MetricDef[]} */ defs) =>
    setOptions(
      metricSel,
      defs.map((d) => [d.key, d.label]),
    );
  /** The roll button's text: Unroll all while every block is rolled, else Roll. */
  const setRolled = (/** @type {boolean} */ rolled, unrolled = 0, shown = true) => {
    const all = rolled && !unrolled;
    const state = `${shown}|${all}`;
    if (rollBtn.dataset.state === state) return; // no DOM write for the same state
    rollBtn.dataset.state = state;
    rollBtn.style.display = shown ? "" : "none";
    rollBtn.textContent = all ? "Unroll all" : "Roll";
    rollBtn.title = all ? "draw every call of each repeated block" : "roll repeated blocks into one ×N box again";
  };
  return { el, metricSel, search, depthIn, legend, setMetrics, setRolled };
}
