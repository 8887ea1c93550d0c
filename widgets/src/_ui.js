// DOM helpers shared by the widgets: styles, tooltip, downloads, element creation.

// Colours come from JupyterLab's theme variables (--jp-*), read through labkit tokens
// (--lk-*), so every view follows a theme switch live; the fallbacks are the Light
// theme's values (outside JupyterLab). Token pairs meet WCAG AA (>= 4.5:1) in
// JupyterLab Light and Dark: --lk-fg2 only on --lk-bg / --lk-bg1, --lk-fg on any --lk-*
// background. Data colours (heat scales, series) carry text only through inkOn().
export const THEME = `
.lk-view, .lk-opt {
  --lk-fg: var(--jp-ui-font-color1, rgba(0,0,0,.87));
  --lk-fg2: var(--jp-ui-font-color2, rgba(0,0,0,.54));
  --lk-bg: var(--jp-layout-color0, #fff);
  --lk-bg1: var(--jp-layout-color1, #fff);
  --lk-bg2: var(--jp-layout-color2, #eee);
  --lk-bg3: var(--jp-layout-color3, #bdbdbd);
  --lk-border: var(--jp-border-color1, #bdbdbd);
  --lk-border2: var(--jp-border-color2, #e0e0e0);
  --lk-input-bg: var(--jp-input-background, #f5f5f5);
  --lk-accent: var(--jp-brand-color1, #1976d2);
  --lk-accent2: var(--jp-warn-color1, #f57c00);
  --lk-error: var(--jp-error-color0, #b71c1c);
  --lk-edge: var(--jp-ui-font-color3, rgba(0,0,0,.38));
  --lk-font: var(--jp-ui-font-family, system-ui, -apple-system, "Segoe UI", Roboto, sans-serif);
  --lk-mono: var(--jp-code-font-family, ui-monospace, "DejaVu Sans Mono", monospace);
  color: var(--lk-fg);
}
body[data-jp-theme-light="false"] .lk-view, body[data-jp-theme-light="false"] .lk-opt {
  --lk-error: var(--jp-error-color2, #e57373);
}
`;

export const CSS = `${THEME}
.lk-view { font: 12px/1.35 var(--lk-font); color: var(--lk-fg);
  border: 1px solid var(--lk-border2); border-radius: 4px; background: var(--lk-bg); position: relative;
  display: flex; flex-direction: column; overflow: hidden; }
.lk-toolbar { display: flex; gap: 6px; align-items: center; padding: 4px 6px;
  border-bottom: 1px solid var(--lk-border2); background: var(--lk-bg1); flex-wrap: wrap; }
.lk-view button, .lk-view select, .lk-view input { font: inherit; padding: 1px 6px;
  border: 1px solid var(--lk-border); border-radius: 3px; background: var(--lk-input-bg);
  color: var(--lk-fg); height: 22px; }
.lk-view option { background: var(--lk-bg); color: var(--lk-fg); }
.lk-view button:hover:not(:disabled) { background: var(--lk-bg2); }
.lk-view button:disabled { opacity: .6; }
.lk-toolbar .lk-spacer { flex: 1; }
.lk-canvas { flex: 1; position: relative; overflow: hidden; cursor: grab; }
.lk-canvas.lk-panning { cursor: grabbing; }
.lk-canvas svg { display: block; width: 100%; height: 100%; user-select: none; }
.lk-tip { position: absolute; pointer-events: none; background: var(--lk-bg); color: var(--lk-fg);
  border: 1px solid var(--lk-border); border-radius: 3px; padding: 5px 7px; box-shadow: 0 2px 6px rgba(0,0,0,.25);
  max-width: 420px; z-index: 10; white-space: nowrap; font-size: 11px; display: none; }
.lk-tip b { font-weight: 600; }
.lk-tip .lk-tip-k { color: var(--lk-fg2); }
.lk-legend { display: flex; align-items: center; gap: 4px; font-size: 11px; color: var(--lk-fg); }
.lk-legend .lk-bar { width: 90px; height: 10px; border: 1px solid var(--lk-border); }
.lk-empty { padding: 24px; color: var(--lk-fg2); text-align: center; }
.lk-table-wrap { overflow: auto; flex: 1; }
.lk-table { border-collapse: collapse; width: 100%; font-size: 11.5px; }
.lk-table th { position: sticky; top: 0; background: var(--lk-bg2); color: var(--lk-fg); cursor: pointer; text-align: right;
  padding: 3px 6px; border-bottom: 1px solid var(--lk-border); white-space: nowrap; user-select: none; }
.lk-table th:first-child, .lk-table td:first-child { text-align: left; }
.lk-table td { padding: 2px 6px; text-align: right; border-bottom: 1px solid var(--lk-border2);
  white-space: nowrap; font-variant-numeric: tabular-nums; }
.lk-table tr:hover td { background: var(--lk-bg2); }
.lk-table tr.lk-selected td { background: var(--lk-bg3); }
.lk-table th.lk-sorted::after { content: " \\25BE"; }
.lk-table th.lk-sorted.lk-asc::after { content: " \\25B4"; }
.lk-crumb { display: none; align-items: center; flex-wrap: wrap; gap: 6px; padding: 3px 8px;
  border-bottom: 1px solid var(--lk-border2); font-size: 12px; }
.lk-crumb .lk-crumb-text { flex: 1 1 20em; min-width: 0; }
.lk-crumb .lk-crumb-part { white-space: nowrap; }
.lk-crumb .lk-crumb-up, .lk-crumb .lk-crumb-fig { color: var(--lk-fg2); }
.lk-view .lk-crumb .lk-unroll { height: 20px; }
.lk-view input.lk-depth { width: 3.5em; }
.lk-view input.lk-top { width: 4em; }
.lk-profile .lk-chart { padding: 4px 8px; border-bottom: 1px solid var(--lk-border2); max-height: 40%; overflow: auto; }
.lk-canvas.lk-mem-canvas { cursor: crosshair; }
.lk-att-legend { display: flex; flex-wrap: wrap; gap: 4px 12px; align-items: center; font-size: 12px; padding: 2px 6px; }
.lk-att-class { display: inline-flex; gap: 3px; align-items: center; }
.lk-att-scale { display: inline-flex; gap: 4px; align-items: center; margin-left: 8px; }
.lk-att-swatch { display: inline-block; width: 11px; height: 11px; border-radius: 2px; }
.lk-att-swatch.lk-att-round { border-radius: 50%; }
.lk-att-bar { display: inline-block; width: 80px; height: 8px; }
.lk-view input.lk-att-pick { width: 5em; }
.lk-att-node { cursor: pointer; }
.lk-memory .lk-mem-sel, .lk-memory .lk-mem-live { font-family: var(--lk-mono); font-size: 11px; padding: 2px 8px;
  color: var(--lk-fg); }
.lk-swatch { display: inline-block; width: 10px; height: 10px; margin-right: 3px; vertical-align: -1px; }
.lk-error-text { color: var(--lk-error); }
.lk-control-bar { display: flex; gap: 12px; align-items: center; flex-wrap: wrap; font-size: 11px; padding: 2px 0; }
.lk-control { display: flex; gap: 4px; align-items: center; }
.lk-control[hidden] { display: none; }
.lk-control-hint { color: var(--lk-fg2); }
.lk-charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); gap: 8px; }
.lk-dashboard, .lk-runs { padding: 6px; }
.lk-dash-top { display: flex; gap: 10px; align-items: center; padding: 4px 0; }
.lk-dash-track { flex: 1; height: 8px; background: var(--lk-bg2); border-radius: 4px; overflow: hidden; }
.lk-dash-bar { height: 100%; width: 0; background: var(--lk-accent); }
.lk-dash-stats { display: flex; gap: 16px; flex-wrap: wrap; font-size: 12px; padding: 2px 0; }
.lk-dash-stopnote { font-size: 11px; }
.lk-dash-ranks { font-size: 11px; display: grid; grid-template-columns: auto 1fr auto; gap: 2px 8px;
  align-items: center; padding: 2px 0; }
.lk-dash-rankbar { display: flex; height: 8px; background: var(--lk-bg2); border-radius: 2px; overflow: hidden; }
.lk-dash-rankbar > div { height: 100%; }
.lk-dash-ranklegend { grid-column: 1 / -1; color: var(--lk-fg); }
.lk-dash-ranklegend > span { margin-right: 10px; }
.lk-dash-key { display: inline-block; width: 8px; height: 8px; margin-right: 3px; }
.lk-dash-part-data_time { background: var(--lk-accent2); }
.lk-dash-part-compute_time { background: var(--lk-accent); }
.lk-dash-part-comm_wait { background: var(--lk-fg2); }
.lk-dash-grads { font-size: 11px; color: var(--lk-fg2); }
.lk-dash-error { color: var(--lk-error); white-space: pre-wrap; margin: 4px 0; }
.lk-runs-metrics { display: flex; gap: 8px; flex-wrap: wrap; }
.lk-runs-note { font-size: 11px; color: var(--lk-fg2); padding: 2px 0; }
.lk-runs-find { display: flex; gap: 8px; align-items: center; padding: 4px 0; }
.lk-view .lk-runs-filter { flex: 1; min-width: 160px; font-size: 11px; }
.lk-runs-count { font-size: 11px; color: var(--lk-fg2); }
.lk-runs-filter-error { font-size: 11px; color: var(--lk-error); }
.lk-runs-scroll { max-height: 320px; overflow: auto; }
.lk-runs-table { border-collapse: collapse; font-size: 11px; width: 100%; }
.lk-runs-table th { cursor: pointer; text-align: left; padding: 2px 6px; border-bottom: 1px solid var(--lk-border2);
  white-space: nowrap; }
.lk-runs-table td { padding: 1px 6px; white-space: nowrap; }
.lk-runs-table td.lk-num { text-align: right; }
.lk-runs-swatch { display: inline-block; width: 14px; height: 0; margin: 0 4px 3px 0;
  border-top: 3px solid var(--lk-swatch, var(--lk-fg)); }
.lk-runs-swatch.lk-dashed { border-top-style: dashed; }
.lk-state { display: inline-block; padding: 0 5px; border: 1px solid currentColor; border-radius: 8px;
  font-size: 10.5px; line-height: 14px; color: var(--lk-fg); }
.lk-state-running { color: var(--lk-accent); font-weight: 600; }
.lk-state-crashed, .lk-state-failed { color: var(--lk-error); font-weight: 600; }
.lk-state-stopped { color: var(--lk-fg2); }
`;

/**
 * Calls `repaint` when JupyterLab switches theme, for drawings on a canvas (which read no
 * CSS). JupyterLab names the new theme before its stylesheet has applied, when the variables
 * still read the old theme's values, so it repaints again once the sheet has settled.
 * @param {() => void} repaint
 * @returns {() => void} stops watching
 */
export function onThemeSwitch(repaint) {
  /** @type {Set<ReturnType<typeof setTimeout>>} */
  const timers = new Set();
  const later = (/** @type {number} */ ms) => {
    const t = setTimeout(() => {
      timers.delete(t);
      repaint();
    }, ms);
    timers.add(t);
  };
  const watch = new MutationObserver(() => {
    repaint();
    later(250);
    later(1000);
  });
  watch.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light", "data-jp-theme-name"] });
  return () => {
    watch.disconnect();
    for (const t of timers) clearTimeout(t);
  };
}

/** Inject the shared stylesheet into the document once (replacing an older bundle's). */
export function ensureStyles() {
  const old = document.getElementById("labkit-widget-css");
  if (old && old.textContent === CSS) return;
  const style = document.createElement("style");
  style.id = "labkit-widget-css";
  style.textContent = CSS;
  if (old) old.replaceWith(style);
  else document.head.appendChild(style);
}

/**
 * Create an element with attributes and children.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, any>} [attrs] attributes; `class`, `style`, and `on<event>` listeners
 * @param {...(Node | string)} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") el.className = v;
    else if (k === "style") el.style.cssText = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const c of children) el.append(c);
  return el;
}

/** Fill a <select> with [value, label] options, rebuilt only when the list changes (the
 * user's choice and focus survive a payload update with the same options).
 * @param {HTMLSelectElement} select
 * @param {[string, string][]} pairs
 */
export function setOptions(select, pairs) {
  const sig = pairs.map(([v, l]) => `${v}:${l}`).join("|");
  if (select.dataset.options === sig) return;
  select.dataset.options = sig;
  select.replaceChildren(...pairs.map(([v, l]) => h("option", { value: v }, l)));
}

/** Escape text for innerHTML. @param {unknown} s */
export function esc(s) {
  return String(s).replace(
    /[&<>"]/g,
    (c) => /** @type {Record<string, string>} */ ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c],
  );
}

/** A tooltip positioned inside `host` (which must be position: relative). @param {HTMLElement} host */
export function tooltip(host) {
  const tip = h("div", { class: "lk-tip" });
  host.appendChild(tip);
  return {
    /** @param {string} html @param {number} clientX @param {number} clientY */
    show(html, clientX, clientY) {
      tip.innerHTML = html;
      tip.style.display = "block";
      const r = host.getBoundingClientRect();
      let x = clientX - r.left + 14;
      let y = clientY - r.top + 14;
      const tw = tip.offsetWidth;
      const th = tip.offsetHeight;
      if (x + tw > r.width) x = Math.max(0, clientX - r.left - tw - 10);
      if (y + th > r.height) y = Math.max(0, clientY - r.top - th - 10);
      tip.style.left = `${x}px`;
      tip.style.top = `${y}px`;
    },
    hide() {
      tip.style.display = "none";
    },
    el: tip,
  };
}

/**
 * Offer a blob or data URL as a file download.
 * @param {string} name
 * @param {BlobPart} data a data URL, or the file's contents
 * @param {string} [type]
 */
export function download(name, data, type = "application/octet-stream") {
  const url = typeof data === "string" && data.startsWith("data:") ? data : URL.createObjectURL(new Blob([data], { type }));
  const a = h("a", { href: url, download: name });
  document.body.appendChild(a);
  a.click();
  a.remove();
  if (!url.startsWith("data:")) setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/**
 * Render an SVG element to PNG (data URL) at a scale.
 * @param {string} svgText
 * @param {number} width
 * @param {number} height
 * @param {number} [scale]
 * @param {string} [background]
 * @returns {Promise<string>}
 */
export function svgToPng(svgText, width, height, scale = 2, background = "#fff") {
  return new Promise((resolve, reject) => {
    const img = new Image();
    img.onload = () => {
      const c = document.createElement("canvas");
      c.width = Math.ceil(width * scale);
      c.height = Math.ceil(height * scale);
      const ctx = c.getContext("2d");
      if (!ctx) {
        reject(new Error("svgToPng: this browser gives no 2d canvas context"));
        return;
      }
      ctx.fillStyle = background;
      ctx.fillRect(0, 0, c.width, c.height);
      ctx.scale(scale, scale);
      ctx.drawImage(img, 0, 0);
      resolve(c.toDataURL("image/png"));
    };
    img.onerror = reject;
    img.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svgText)}`;
  });
}
