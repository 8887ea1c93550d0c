// DOM helpers shared by the widgets: styles, tooltip, downloads, element creation.

export const CSS = `
.lk-view { font: 12px/1.35 -apple-system, "Segoe UI", Roboto, sans-serif; color: #222;
  border: 1px solid #ddd; border-radius: 4px; background: #fff; position: relative;
  display: flex; flex-direction: column; overflow: hidden; }
.lk-toolbar { display: flex; gap: 6px; align-items: center; padding: 4px 6px;
  border-bottom: 1px solid #e5e5e5; background: #fafafa; flex-wrap: wrap; }
.lk-toolbar button, .lk-toolbar select, .lk-toolbar input { font: inherit; padding: 1px 6px;
  border: 1px solid #ccc; border-radius: 3px; background: #fff; height: 22px; }
.lk-toolbar button:hover { background: #f0f0f0; }
.lk-toolbar .lk-spacer { flex: 1; }
.lk-canvas { flex: 1; position: relative; overflow: hidden; cursor: grab; }
.lk-canvas.lk-panning { cursor: grabbing; }
.lk-canvas svg { display: block; width: 100%; height: 100%; user-select: none; }
.lk-tip { position: absolute; pointer-events: none; background: rgba(255,255,255,.97);
  border: 1px solid #bbb; border-radius: 3px; padding: 5px 7px; box-shadow: 0 2px 6px rgba(0,0,0,.15);
  max-width: 420px; z-index: 10; white-space: nowrap; font-size: 11px; display: none; }
.lk-tip b { font-weight: 600; }
.lk-tip .lk-tip-k { color: #666; }
.lk-legend { display: flex; align-items: center; gap: 4px; font-size: 11px; color: #444; }
.lk-legend .lk-bar { width: 90px; height: 10px; border: 1px solid #ccc; }
.lk-empty { padding: 24px; color: #666; text-align: center; }
.lk-table-wrap { overflow: auto; flex: 1; }
.lk-table { border-collapse: collapse; width: 100%; font-size: 11.5px; }
.lk-table th { position: sticky; top: 0; background: #f4f4f4; cursor: pointer; text-align: right;
  padding: 3px 6px; border-bottom: 1px solid #ddd; white-space: nowrap; user-select: none; }
.lk-table th:first-child, .lk-table td:first-child { text-align: left; }
.lk-table td { padding: 2px 6px; text-align: right; border-bottom: 1px solid #f0f0f0;
  white-space: nowrap; font-variant-numeric: tabular-nums; }
.lk-table tr:hover td { background: #f7f9fc; }
.lk-table tr.lk-selected td { background: #ffe9b3; }
.lk-table th.lk-sorted::after { content: " \\25BE"; }
.lk-table th.lk-sorted.lk-asc::after { content: " \\25B4"; }
`;

/** Inject the shared stylesheet into the document once. */
export function ensureStyles() {
  if (document.getElementById("labkit-widget-css")) return;
  const style = document.createElement("style");
  style.id = "labkit-widget-css";
  style.textContent = CSS;
  document.head.appendChild(style);
}

/** Create an element with attributes and children. */
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

/** Escape text for innerHTML. */
export function esc(s) {
  return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

/** A tooltip positioned inside `host` (which must be position: relative). */
export function tooltip(host) {
  const tip = h("div", { class: "lk-tip" });
  host.appendChild(tip);
  return {
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

/** Offer a blob or data URL as a file download. */
export function download(name, data, type = "application/octet-stream") {
  const url = typeof data === "string" && data.startsWith("data:") ? data : URL.createObjectURL(new Blob([data], { type }));
  const a = h("a", { href: url, download: name });
  document.body.appendChild(a);
  a.click();
  a.remove();
  if (!url.startsWith("data:")) setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** Render an SVG element to PNG (data URL) at a scale. */
export function svgToPng(svgText, width, height, scale = 2) {
  return new Promise((resolve, reject) => {
    const img = new Image();
    img.onload = () => {
      const c = document.createElement("canvas");
      c.width = Math.ceil(width * scale);
      c.height = Math.ceil(height * scale);
      const ctx = c.getContext("2d");
      ctx.fillStyle = "#fff";
      ctx.fillRect(0, 0, c.width, c.height);
      ctx.scale(scale, scale);
      ctx.drawImage(img, 0, 0);
      resolve(c.toDataURL("image/png"));
    };
    img.onerror = reject;
    img.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svgText)}`;
  });
}
