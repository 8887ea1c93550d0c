// Chart controls the dashboard and the runs view share: EMA smoothing (a slider and its
// value), log scale and the x axis (step or wall time), each a labelled control of one bar,
// and the grid the charts go in. Their look is in the views' stylesheet (_ui.js: the
// .lk-control* rules, theme variables), not in the elements.
import { h } from "./_ui.js";

/** @typedef {{smoothing: number, log: boolean, x: string}} ChartSettings what the charts are drawn with */

/**
 * A labelled control: text and inputs side by side, one click target.
 * @param {...(Node | string)} children
 * @returns {HTMLLabelElement}
 */
export function control(...children) {
  return /** @type {HTMLLabelElement} */ (h("label", { class: "lk-control" }, ...children));
}

/**
 * A bar of controls (wraps on a narrow output).
 * @param {string} cls the view's class for the bar (tests and styles find it by it)
 * @param {...(Node | string)} children
 * @returns {HTMLDivElement}
 */
export function controlBar(cls, ...children) {
  return /** @type {HTMLDivElement} */ (h("div", { class: `lk-control-bar ${cls}` }, ...children));
}

/**
 * The grid the charts go in (as many columns of >= 320 px as fit).
 * @param {string} cls the view's class for the grid
 * @returns {HTMLDivElement}
 */
export function chartGrid(cls) {
  return /** @type {HTMLDivElement} */ (h("div", { class: `lk-charts ${cls}` }));
}

/**
 * Smoothing, log scale and x axis controls, named `<prefix>-smooth`, `<prefix>-log` and
 * `<prefix>-x`. `onChange(settings, what)` is called when the user changes one; `set` shows
 * settings that came from elsewhere (the model) without calling it.
 * @param {{prefix: string, smoothing?: number, log?: boolean, x?: string,
 *   onChange: (settings: ChartSettings, what: "smoothing" | "log" | "x") => void}} opts
 */
export function chartControls({ prefix, smoothing = 0.6, log = false, x = "step", onChange }) {
  const smooth = /** @type {HTMLInputElement} */ (
    h("input", {
      type: "range",
      min: "0",
      max: "0.99",
      step: "0.01",
      value: String(smoothing),
      class: `${prefix}-smooth`,
      title: "EMA smoothing, as TensorBoard's (0: raw)",
    })
  );
  const smoothOut = h("span", { class: `${prefix}-smooth-value lk-control-value` });
  const logBox = /** @type {HTMLInputElement} */ (h("input", { type: "checkbox", class: `${prefix}-log` }));
  const xSel = /** @type {HTMLSelectElement} */ (
    h(
      "select",
      { class: `${prefix}-x`, title: "x axis of the charts" },
      h("option", { value: "step" }, "step"),
      h("option", { value: "time" }, "wall time"),
    )
  );
  /** @returns {ChartSettings} */
  const settings = () => ({ smoothing: Number(smooth.value), log: logBox.checked, x: xSel.value });
  /** @param {Partial<ChartSettings>} s */
  const set = (s) => {
    if (s.smoothing != null) smooth.value = String(s.smoothing);
    if (s.log != null) logBox.checked = s.log;
    if (s.x != null) xSel.value = s.x;
    smoothOut.textContent = Number(smooth.value).toFixed(2);
  };
  set({ smoothing, log, x });
  smooth.addEventListener("input", () => {
    smoothOut.textContent = Number(smooth.value).toFixed(2);
    onChange(settings(), "smoothing");
  });
  logBox.addEventListener("change", () => onChange(settings(), "log"));
  xSel.addEventListener("change", () => onChange(settings(), "x"));
  return {
    /** the three labelled controls, for a bar */
    controls: [control("smoothing", smooth, smoothOut), control(logBox, "log scale"), control("x", xSel)],
    settings,
    set,
  };
}
