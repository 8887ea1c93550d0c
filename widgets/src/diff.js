// DiffView front end (anywidget ES module): the base trace's graph, drawn once, each
// module's box coloured by its change in the chosen metric (diverging scale, legend,
// within-noise boxes hatched); the ranked table under it, linked both ways (select a row:
// the frames around that module open, the graph pans to it and highlights it; click a
// box: its row is selected); a toggle between metrics. The graph is laid out and drawn by
// the GraphView's modules (_graph_draw.js, _graph_layout.js, _layout.js, _panzoom.js),
// called, not copied; the colouring and paging are pure (_diff_color.js).
import { unpacked } from "./_graphcore.js";
import { edgesSvg, groupsSvg, nodesSvg, SVG_STYLE, drawState } from "./_graph_draw.js";
import { svgEl } from "./_graph_export.js";
import { attachPanZoom, centerView, fitView, openView, zoomView } from "./_panzoom.js";
import { uid } from "./_shared.js";
import { ensureStyles, esc, h } from "./_ui.js";
import { formatterOf } from "./_units.js";
import { boxLook, legendText, pageOf, revealIds, rowOf, scaleOf, shownAs } from "./_diff_color.js";

/** @typedef {import("./_contract_types").DiffViewTraits} Traits the synced traits (labkit/views/_contract.py) */
/** @typedef {import("./_contract_types").DiffMetric} DiffMetric */

const METRICS = ["time", "memory", "flops", "params"];
const PAGE = 100; // table rows per page (a diff of thousands of modules pages)

const DIFF_CSS = `
.lk-diff .lk-diff-head { padding: 4px 8px; font-weight: 600; border-bottom: 1px solid var(--lk-border2); }
.lk-diff .lk-diff-metric[aria-pressed="true"] { background: var(--lk-bg3); font-weight: 600; }
.lk-diff .lk-diff-legend { display: flex; align-items: center; gap: 6px; font-size: 11px; }
.lk-diff .lk-diff-bar { width: 140px; height: 10px; border: 1px solid var(--lk-border); }
.lk-diff .lk-diff-hatch { display: inline-block; width: 22px; height: 10px; border: 1px solid var(--lk-border);
  background: repeating-linear-gradient(135deg, transparent 0 3px, rgba(107,114,128,.9) 3px 4px), var(--lk-bg); }
.lk-diff .lk-canvas { flex: none; border-bottom: 1px solid var(--lk-border2); }
.lk-diff .lk-table-wrap { max-height: 260px; flex: none; }
.lk-diff .lk-table tr { cursor: pointer; }
.lk-diff .lk-table td.lk-diff-noise { font-style: italic; }
.lk-diff .lk-diff-pages { display: flex; gap: 6px; align-items: center; padding: 3px 8px; font-size: 11px; }
.lk-diff .lk-diff-notes { padding: 3px 8px; font-size: 11px; color: var(--lk-fg2); background: var(--lk-bg); }
`;
const SVG_DIFF = `
.lk-node rect.lk-hatch { pointer-events: none; }
.lk-hatch-line { stroke: rgba(107,114,128,.9); stroke-width: 1.5; }
`;

/**
 * The view's elements (toolbar with a button per metric, canvas, table, pages, notes), not yet wired.
 * @param {any} model
 * @param {string} hatchId
 */
function skeleton(model, hatchId) {
  const root = h("div", { class: "lk-view lk-diff" });
  const css = h("style", {}, DIFF_CSS);
  const head = h("div", { class: "lk-diff-head" });
  const bar = h("div", { class: "lk-toolbar" });
  /** @type {Record<string, HTMLButtonElement>} */
  const buttons = {};
  for (const m of METRICS) {
    const b = /** @type {HTMLButtonElement} */ (h("button", { class: "lk-diff-metric", "data-metric": m }, m));
    b.addEventListener("click", () => {
      model.set("metric", m);
      model.save_changes();
    });
    buttons[m] = b;
    bar.append(b);
  }
  const fitBtn = h("button", { title: "the whole graph" }, "Fit");
  const legend = h("div", { class: "lk-diff-legend" });
  bar.append(fitBtn, h("span", { class: "lk-spacer" }), legend);
  const canvas = h("div", { class: "lk-canvas" });
  canvas.style.height = `${model.get("height")}px`;
  const svg = svgEl("svg");
  const style = svgEl("style");
  style.textContent = SVG_STYLE + SVG_DIFF;
  const defs = svgEl("defs");
  defs.innerHTML =
    `<pattern id="${hatchId}" patternUnits="userSpaceOnUse" width="7" height="7" patternTransform="rotate(45)">` +
    `<line class="lk-hatch-line" x1="0" y1="0" x2="0" y2="7"/></pattern>`;
  const viewport = svgEl("g", { class: "lk-viewport" });
  const gEdges = svgEl("g", { class: "lk-edges" });
  const gGroups = svgEl("g", { class: "lk-groups" });
  const gNodes = svgEl("g", { class: "lk-nodes" });
  viewport.append(gGroups, gEdges, gNodes);
  svg.append(style, defs, viewport);
  canvas.append(svg);
  const tableWrap = h("div", { class: "lk-table-wrap" });
  const pages = h("div", { class: "lk-diff-pages" });
  const notes = h("div", { class: "lk-diff-notes" });
  root.append(css, head, bar, canvas, tableWrap, pages, notes);
  return { root, head, buttons, fitBtn, legend, canvas, viewport, gEdges, gGroups, gNodes, tableWrap, pages, notes };
}

/** @param {import("./_contract_types").RenderContext<Traits>} ctx anywidget's model and element */
function render({ model, el }) {
  ensureStyles();
  const hatchId = uid("lk-hatch");
  const arrowId = uid("lk-arrow");
  const { root, head, buttons, fitBtn, legend, canvas, viewport, gEdges, gGroups, gNodes, tableWrap, pages, notes } = skeleton(
    model,
    hatchId,
  );
  fitBtn.addEventListener("click", () => fit());
  el.appendChild(root);

  const graph = /** @type {import("./_contract_types").GraphPayload} */ (unpacked(model.get("graph")));
  const cache = new Map();
  /** @type {ReturnType<typeof drawState> | null} */
  let S = null;
  let page = 0;
  let scaleNow = 0; // the colour scale of the metric shown (its largest drawn change)
  const view = { x: 0, y: 0, k: 1 };

  const changes = () => /** @type {Record<string, DiffMetric>} */ (unpacked(model.get("changes")));
  const current = () => changes()[model.get("metric")];

  const applyView = () => viewport.setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.k})`);
  const setView = (/** @type {{x: number, y: number, k: number}} */ v) => {
    Object.assign(view, v);
    applyView();
  };
  /** @returns {[number, number]} the canvas's width and height */
  const size = () => [canvas.clientWidth || 800, canvas.clientHeight || 480];
  function fit() {
    if (S) setView(fitView(...size(), S.layout.width, S.layout.height));
  }

  /** Lay out and draw the graph for the open calls (once, and when a frame opens or closes). */
  function draw() {
    S = drawState(graph, model.get("expanded") || [], cache);
    gGroups.innerHTML = groupsSvg(graph, S.vis, S.layout, S.rolled);
    gEdges.innerHTML = edgesSvg(S.layout, arrowId);
    gNodes.innerHTML = nodesSvg(graph, S.vis, S.layout, S.rolled);
    for (const node of gNodes.querySelectorAll("g.lk-node")) {
      const box = node.querySelector("rect.lk-box");
      const hatch = svgEl("rect", {
        class: "lk-hatch",
        width: box?.getAttribute("width") || "0",
        height: box?.getAttribute("height") || "0",
        rx: "4",
      });
      hatch.setAttribute("fill", `url(#${hatchId})`);
      box?.after(hatch);
    }
    paint();
  }

  /** Colour the drawn boxes for the metric shown, and say what the colours mean. */
  function paint() {
    if (!S) return;
    const c = current();
    const fmt = formatterOf(c.unit);
    const scale = c.error ? 0 : scaleOf(c.delta, S.vis.boxes);
    scaleNow = scale;
    for (const node of gNodes.querySelectorAll("g.lk-node")) {
      const k = Number(/** @type {SVGGElement} */ (node).dataset.k);
      const look = c.error ? boxLook({ delta: [], noise: [] }, k, 0) : boxLook(c, k, scale);
      const box = /** @type {SVGRectElement | null} */ (node.querySelector("rect.lk-box"));
      if (box) box.style.fill = look.fill;
      const hatch = /** @type {SVGRectElement | null} */ (node.querySelector("rect.lk-hatch"));
      if (hatch) hatch.style.display = look.hatched ? "" : "none";
      for (const t of node.querySelectorAll("text.lk-label, text.lk-sub")) /** @type {SVGTextElement} */ (t).style.fill = look.ink;
      const g = /** @type {SVGGElement} */ (node);
      g.dataset.fill = look.fill;
      g.dataset.change = String(look.value);
      g.classList.toggle("lk-diff-noise", look.hatched);
      const title = node.querySelector("title") || node.appendChild(svgEl("title"));
      title.textContent = `${graph.name[k] || "(root)"}: ${look.value > 0 ? "+" : ""}${fmt(look.value)}${look.hatched ? " (within noise)" : ""}`;
    }
    const words = legendText(scale, fmt, c.worse, c.better);
    legend.innerHTML =
      `<span class="lk-diff-low">${esc(words.low)}</span>` +
      `<span class="lk-diff-bar" style="background:linear-gradient(to right, rgb(33,102,172), rgb(247,247,247), rgb(178,24,43))"></span>` +
      `<span class="lk-diff-high">${esc(words.high)}</span>` +
      `<span class="lk-diff-hatch"></span><span>within noise (95% interval spans 0)</span>`;
    head.textContent = c.error ? `${model.get("metric")}: ${c.error}` : c.headline;
    for (const m of METRICS) {
      const info = changes()[m];
      buttons[m].disabled = Boolean(info?.error);
      buttons[m].title = info?.error || info?.headline || "";
      buttons[m].setAttribute("aria-pressed", String(m === model.get("metric")));
    }
    notes.textContent = (c.notes || []).join(" · ");
    table();
    highlight();
  }

  /** The ranked rows of the metric shown, one page. */
  function table() {
    const c = current();
    const [a, b] = model.get("labels");
    const { rows, start, pages: n } = pageOf(c.rows, page, PAGE);
    const head = ["#", "module", "type", a || "base", b || "other", "change", "95% interval", "share", "match"];
    let body = "";
    rows.forEach((r, i) => {
      const look = r.node >= 0 && !c.error ? boxLook(c, r.node, scaleNow) : null;
      const swatch = look ? `<span class="lk-swatch" style="background:${look.fill};border:1px solid var(--lk-border)"></span>` : "";
      const noise = r.noise ? " lk-diff-noise" : "";
      body +=
        `<tr data-row="${start + i}" data-node="${r.node}" data-module="${esc(r.module)}">` +
        `<td>${start + i + 1}</td><td>${swatch}${esc(r.module || "(root)")}</td><td>${esc(r.type)}</td>` +
        `<td>${esc(r.a)}</td><td>${esc(r.b)}</td><td class="${noise}">${esc(r.delta)}${r.noise ? " (noise)" : ""}</td>` +
        `<td>${esc(r.interval)}</td><td>${esc(r.share)}</td><td>${esc(r.status === "same" ? r.match : `${r.match}, ${r.status}`)}</td></tr>`;
    });
    tableWrap.innerHTML = `<table class="lk-table"><thead><tr>${head.map((x) => `<th>${esc(x)}</th>`).join("")}</tr></thead><tbody>${body}</tbody></table>`;
    pages.innerHTML = "";
    if (n > 1) {
      const prev = h("button", {}, "‹ prev");
      const next = h("button", {}, "next ›");
      prev.disabled = page === 0;
      next.disabled = page >= n - 1;
      prev.addEventListener("click", () => turn(page - 1));
      next.addEventListener("click", () => turn(page + 1));
      pages.append(prev, h("span", {}, `page ${page + 1} of ${n} (${c.rows.length} rows)`), next);
    }
  }

  const turn = (/** @type {number} */ p) => {
    page = p;
    table();
    highlight();
  };

  /** The selected row and the box that draws its module, marked. */
  function highlight() {
    const path = model.get("selected");
    for (const tr of tableWrap.querySelectorAll("tr.lk-selected")) tr.classList.remove("lk-selected");
    for (const n of viewport.querySelectorAll(".lk-selected")) n.classList.remove("lk-selected");
    if (path === null || path === undefined) return;
    const tr = tableWrap.querySelector(`tr[data-module="${CSS.escape(path)}"]`);
    tr?.classList.add("lk-selected");
    const i = rowOf(current().rows, path);
    const k = i >= 0 ? current().rows[i].node : -1;
    if (k < 0 || !S) return;
    const at = shownAs(graph, k, new Set(S.vis.boxes), new Set(S.vis.groups));
    viewport.querySelector(`[data-k="${at}"]`)?.classList.add("lk-selected");
  }

  /** Select the module at `path` (payload node k): open its frames, pan to it, mark it. */
  function select(/** @type {string} */ path) {
    const c = current();
    const i = rowOf(c.rows, path);
    if (i >= 0 && Math.floor(i / PAGE) !== page) page = Math.floor(i / PAGE);
    const k = i >= 0 ? c.rows[i].node : -1;
    if (k >= 0 && S && !new Set(S.vis.boxes).has(k) && !new Set(S.vis.groups).has(k)) {
      const open = new Set(model.get("expanded") || []);
      const more = revealIds(graph, k).filter((id) => !open.has(id));
      if (more.length) {
        model.set("expanded", [...open, ...more]);
        model.save_changes();
        draw();
      }
    }
    table();
    highlight();
    const p = k >= 0 ? S?.layout.pos.get(k) : null;
    if (p) {
      const [cw, ch] = size();
      setView(centerView(view, p, cw, ch));
      root.dataset.centered = String(k);
    }
  }

  const choose = (/** @type {string} */ path) => {
    model.set("selected", path);
    model.save_changes();
    select(path);
  };

  tableWrap.addEventListener("click", (e) => {
    const tr = /** @type {HTMLElement | null} */ (/** @type {HTMLElement} */ (e.target).closest("tr[data-module]"));
    if (tr && tr.dataset.node !== "-1") choose(tr.dataset.module || "");
  });

  attachPanZoom(canvas, view, {
    panned: applyView,
    zoom: (f, cx, cy) => setView(zoomView(view, f, cx, cy)),
    hover: () => {},
    leave: () => {},
    click: (e) => {
      const target = /** @type {Element} */ (e.target);
      const toggle = /** @type {SVGGElement | null} */ (target.closest?.(".lk-toggle"));
      if (toggle) {
        const id = graph.ids[Number(toggle.dataset.k)];
        const cur = model.get("expanded") || [];
        model.set("expanded", toggle.dataset.act === "expand" ? [...cur, id] : cur.filter((x) => x !== id));
        model.save_changes();
        draw();
        return;
      }
      const node = /** @type {SVGGElement | null} */ (target.closest?.(".lk-node, .lk-group"));
      if (node) choose(graph.name[Number(node.dataset.k)]);
    },
  });

  model.on("change:metric", () => paint());
  model.on("change:changes", () => paint());
  model.on("change:selected", () => {
    const path = model.get("selected");
    if (path !== null && path !== undefined) select(path);
    else highlight();
  });

  draw();
  const drawn = /** @type {ReturnType<typeof drawState> | null} */ (S); // draw() set it
  if (drawn) setView(openView(...size(), drawn.layout.width, drawn.layout.height));
  root.dataset.ready = "1";
  const sel = model.get("selected");
  if (sel !== null && sel !== undefined) select(sel);
}

export default { render };
