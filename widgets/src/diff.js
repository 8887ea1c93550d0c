// DiffView front end (anywidget ES module): the base trace's graph, drawn once, each
// module's box coloured by its change in the chosen metric (diverging scale, legend,
// within-noise boxes hatched); the ranked table under it, linked both ways (select a row:
// the frames around that module open, the graph pans to it and highlights it; click a
// box: its row is selected); a toggle between metrics. The graph is laid out and drawn by
// the GraphView's modules (_graph_draw.js, _graph_layout.js, _layout.js, _panzoom.js),
// called, not copied. As the other views: a typed state (DiffState: the drawing, the page,
// the colour scale, the view's transform), pure drawing of it (_diff_draw.js: table,
// legend, titles; _diff_color.js: colours and paging; node-tested), the parts acting on it
// (placing the view, painting, user actions) and a thin wiring layer (model and DOM events
// -> state -> paint).
import { unpacked } from "./_graphcore.js";
import { edgesSvg, groupsSvg, nodesSvg, SVG_STYLE, drawState } from "./_graph_draw.js";
import { svgEl } from "./_graph_export.js";
import { attachPanZoom, centerView, fitView, openView, zoomView } from "./_panzoom.js";
import { uid } from "./_shared.js";
import { ensureStyles, h } from "./_ui.js";
import { formatterOf } from "./_units.js";
import { BLUE, boxLook, legendText, RED, revealIds, rowOf, scaleOf, shownAs, WHITE } from "./_diff_color.js";
import { boxTitle, headline, legendHtml, METRICS, metricButtons, PAGE, tableHtml } from "./_diff_draw.js";

/** @typedef {import("./_contract_types").DiffViewTraits} Traits the synced traits (labkit/views/_contract.py) */
/** @typedef {import("./_contract_types").DiffMetric} DiffMetric */
/** @typedef {import("./_contract_types").RenderContext<Traits>["model"]} Model */

const DIFF_CSS = `
.lk-diff .lk-diff-head { padding: 4px 8px; font-weight: 600; border-bottom: 1px solid var(--lk-border2); }
.lk-diff .lk-diff-metric[aria-pressed="true"] { background: var(--lk-bg3); font-weight: 600; }
.lk-diff .lk-diff-legend { display: flex; align-items: center; gap: 6px; font-size: 11px; }
.lk-diff .lk-diff-bar { width: 140px; height: 10px; border: 1px solid var(--lk-border);
  background: linear-gradient(to right, rgb(${BLUE}), rgb(${WHITE}), rgb(${RED})); }
.lk-diff .lk-diff-swatch { border: 1px solid var(--lk-border); }
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
 * @param {Model} model
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

/**
 * @typedef {object} DiffState what the user sees
 * @property {ReturnType<typeof drawState> | null} S the drawing (null until the first layout)
 * @property {number} page the table's page
 * @property {number} scale the colour scale of the metric shown (its largest drawn change)
 * @property {import("./_panzoom.js").View} view the transform: translation and scale
 */

/** @returns {DiffState} the state of a view before its first drawing */
export function initialState() {
  return { S: null, page: 0, scale: 0, view: { x: 0, y: 0, k: 1 } };
}

/** @typedef {ReturnType<typeof skeleton>} Dom */
/**
 * @typedef {object} App one view: its model, DOM, state and the parts acting on them
 * @property {Model} model
 * @property {Dom} dom
 * @property {DiffState} st
 * @property {import("./_contract_types").GraphPayload} graph the base trace's graph
 * @property {Map<any, any>} cache the layout's, kept per graph
 * @property {string} hatchId
 * @property {string} arrowId
 * @property {() => DiffMetric} current the metric shown
 * @property {ReturnType<typeof placement>} place
 * @property {ReturnType<typeof painter>} paint
 * @property {ReturnType<typeof actions>} act
 */

/** @param {Model} model @returns {Record<string, DiffMetric>} every metric's changes */
const changesOf = (model) => /** @type {Record<string, DiffMetric>} */ (unpacked(model.get("changes")));

/**
 * Placing the view: set it, fit the graph, centre a box.
 * @param {App} app
 */
function placement(app) {
  const { dom, st } = app;
  const view = st.view;
  const applyView = () => dom.viewport.setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.k})`);
  /** @param {import("./_panzoom.js").View} v */
  const setView = (v) => {
    Object.assign(view, v);
    applyView();
  };
  /** @returns {[number, number]} the canvas's width and height */
  const size = () => [dom.canvas.clientWidth || 800, dom.canvas.clientHeight || 480];
  const fit = () => {
    if (st.S) setView(fitView(...size(), st.S.layout.width, st.S.layout.height));
  };
  const home = () => {
    if (st.S) setView(openView(...size(), st.S.layout.width, st.S.layout.height));
  };
  /** @param {{x: number, y: number, w: number, h: number}} p a box's place */
  const center = (p) => setView(centerView(view, p, ...size()));
  return { applyView, setView, fit, home, center };
}

/**
 * Painting the state: the graph for the open calls, its colours for the metric shown,
 * the table's page, the selection.
 * @param {App} app
 */
function painter(app) {
  const { model, dom, st, graph } = app;
  /** Lay out and draw the graph for the open calls (once, and when a frame opens or closes). */
  const draw = () => {
    const S = drawState(graph, model.get("expanded") || [], app.cache);
    st.S = S;
    dom.gGroups.innerHTML = groupsSvg(graph, S.vis, S.layout, S.rolled);
    dom.gEdges.innerHTML = edgesSvg(S.layout, app.arrowId);
    dom.gNodes.innerHTML = nodesSvg(graph, S.vis, S.layout, S.rolled);
    for (const node of dom.gNodes.querySelectorAll("g.lk-node")) {
      const box = node.querySelector("rect.lk-box");
      const hatch = svgEl("rect", {
        class: "lk-hatch",
        width: box?.getAttribute("width") || "0",
        height: box?.getAttribute("height") || "0",
        rx: "4",
      });
      hatch.setAttribute("fill", `url(#${app.hatchId})`);
      box?.after(hatch);
    }
    colour();
  };
  /** Colour the drawn boxes for the metric shown, and say what the colours mean. */
  const colour = () => {
    if (!st.S) return;
    const c = app.current();
    const fmt = formatterOf(c.unit);
    st.scale = c.error ? 0 : scaleOf(c.delta, st.S.vis.boxes);
    for (const node of dom.gNodes.querySelectorAll("g.lk-node")) {
      const g = /** @type {SVGGElement} */ (node);
      const k = Number(g.dataset.k);
      const look = c.error ? boxLook({ delta: [], noise: [] }, k, 0) : boxLook(c, k, st.scale);
      const box = /** @type {SVGRectElement | null} */ (node.querySelector("rect.lk-box"));
      if (box) box.style.fill = look.fill;
      const hatch = /** @type {SVGRectElement | null} */ (node.querySelector("rect.lk-hatch"));
      if (hatch) hatch.style.display = look.hatched ? "" : "none";
      for (const t of node.querySelectorAll("text.lk-label, text.lk-sub")) /** @type {SVGTextElement} */ (t).style.fill = look.ink;
      g.dataset.fill = look.fill;
      g.dataset.change = String(look.value);
      g.classList.toggle("lk-diff-noise", look.hatched);
      const title = node.querySelector("title") || node.appendChild(svgEl("title"));
      title.textContent = boxTitle(graph.name[k], look, fmt);
    }
    dom.legend.innerHTML = legendHtml(legendText(st.scale, fmt, c.worse, c.better));
    dom.head.textContent = headline(c, model.get("metric"));
    const states = metricButtons(changesOf(model), model.get("metric"));
    for (const m of METRICS) {
      const b = dom.buttons[m];
      b.disabled = states[m].disabled;
      b.title = states[m].title;
      b.setAttribute("aria-pressed", String(states[m].pressed));
    }
    dom.notes.textContent = (c.notes || []).join(" · ");
    table();
    highlight();
  };
  /** The ranked rows of the metric shown, one page, and the buttons to turn it. */
  const table = () => {
    const c = app.current();
    const t = tableHtml(c, model.get("labels"), st.page, st.scale);
    dom.tableWrap.innerHTML = t.html;
    dom.pages.innerHTML = "";
    if (t.pages < 2) return;
    const prev = /** @type {HTMLButtonElement} */ (h("button", {}, "‹ prev"));
    const next = /** @type {HTMLButtonElement} */ (h("button", {}, "next ›"));
    prev.disabled = st.page === 0;
    next.disabled = st.page >= t.pages - 1;
    prev.addEventListener("click", () => app.act.turn(st.page - 1));
    next.addEventListener("click", () => app.act.turn(st.page + 1));
    dom.pages.append(prev, h("span", {}, `page ${st.page + 1} of ${t.pages} (${c.rows.length} rows)`), next);
  };
  /** The selected row and the box that draws its module, marked. */
  const highlight = () => {
    const path = model.get("selected");
    for (const tr of dom.tableWrap.querySelectorAll("tr.lk-selected")) tr.classList.remove("lk-selected");
    for (const n of dom.viewport.querySelectorAll(".lk-selected")) n.classList.remove("lk-selected");
    if (path === null || path === undefined) return;
    dom.tableWrap.querySelector(`tr[data-module="${CSS.escape(path)}"]`)?.classList.add("lk-selected");
    const rows = app.current().rows;
    const i = rowOf(rows, path);
    const k = i >= 0 ? rows[i].node : -1;
    if (k < 0 || !st.S) return;
    const at = shownAs(graph, k, new Set(st.S.vis.boxes), new Set(st.S.vis.groups));
    dom.viewport.querySelector(`[data-k="${at}"]`)?.classList.add("lk-selected");
  };
  return { draw, colour, table, highlight };
}

/**
 * What the user does: select a module (a row or a box), turn the table's page, open or
 * close a call.
 * @param {App} app
 */
function actions(app) {
  const { model, dom, st, graph } = app;
  /** Show the module at `path`: its page, the frames around it opened, the view on it, marked. @param {string} path */
  const select = (path) => {
    const rows = app.current().rows;
    const i = rowOf(rows, path);
    if (i >= 0 && Math.floor(i / PAGE) !== st.page) st.page = Math.floor(i / PAGE);
    const k = i >= 0 ? rows[i].node : -1;
    if (k >= 0 && st.S && !new Set(st.S.vis.boxes).has(k) && !new Set(st.S.vis.groups).has(k)) {
      const open = new Set(model.get("expanded") || []);
      const more = revealIds(graph, k).filter((id) => !open.has(id));
      if (more.length) {
        model.set("expanded", [...open, ...more]);
        model.save_changes();
        app.paint.draw();
      }
    }
    app.paint.table();
    app.paint.highlight();
    const p = k >= 0 ? st.S?.layout.pos.get(k) : null;
    if (p) {
      app.place.center(p);
      dom.root.dataset.centered = String(k);
    }
  };
  /** A row or a box chosen here: the kernel is told, then it is shown. @param {string} path */
  const choose = (path) => {
    model.set("selected", path);
    model.save_changes();
    select(path);
  };
  /** @param {number} p */
  const turn = (p) => {
    st.page = p;
    app.paint.table();
    app.paint.highlight();
  };
  /** Open or close the call drawn at payload index k. @param {number} k @param {string | undefined} act */
  const toggle = (k, act) => {
    const id = graph.ids[k];
    const cur = model.get("expanded") || [];
    model.set("expanded", act === "expand" ? [...cur, id] : cur.filter((x) => x !== id));
    model.save_changes();
    app.paint.draw();
  };
  return { select, choose, turn, toggle };
}

/**
 * DOM and model events -> state -> paint.
 * @param {App} app
 */
function wire(app) {
  const { model, dom, graph } = app;
  dom.fitBtn.addEventListener("click", () => app.place.fit());
  dom.tableWrap.addEventListener("click", (e) => {
    const tr = /** @type {HTMLElement | null} */ (/** @type {HTMLElement} */ (e.target).closest("tr[data-module]"));
    if (tr && tr.dataset.node !== "-1") app.act.choose(tr.dataset.module || "");
  });
  attachPanZoom(dom.canvas, app.st.view, {
    panned: app.place.applyView,
    zoom: (f, cx, cy) => app.place.setView(zoomView(app.st.view, f, cx, cy)),
    hover: () => {},
    leave: () => {},
    click: (e) => {
      const target = /** @type {Element} */ (e.target);
      const toggle = /** @type {SVGGElement | null} */ (target.closest?.(".lk-toggle"));
      if (toggle) {
        app.act.toggle(Number(toggle.dataset.k), toggle.dataset.act);
        return;
      }
      const node = /** @type {SVGGElement | null} */ (target.closest?.(".lk-node, .lk-group"));
      if (node) app.act.choose(graph.name[Number(node.dataset.k)]);
    },
  });
  model.on("change:metric", () => app.paint.colour());
  model.on("change:changes", () => app.paint.colour());
  model.on("change:selected", () => {
    const path = model.get("selected");
    if (path !== null && path !== undefined) app.act.select(path);
    else app.paint.highlight();
  });
}

/** @param {import("./_contract_types").RenderContext<Traits>} ctx anywidget's model and element */
function render({ model, el }) {
  ensureStyles();
  const hatchId = uid("lk-hatch");
  const graph = /** @type {import("./_contract_types").GraphPayload} */ (unpacked(model.get("graph")));
  /** @type {App} */
  const app = /** @type {any} */ ({ model, graph, hatchId, arrowId: uid("lk-arrow"), cache: new Map(), st: initialState() });
  app.dom = skeleton(model, hatchId);
  app.current = () => changesOf(model)[model.get("metric")];
  app.place = placement(app);
  app.paint = painter(app);
  app.act = actions(app);
  wire(app);
  el.appendChild(app.dom.root);
  app.paint.draw();
  app.place.home();
  app.dom.root.dataset.ready = "1";
  const sel = model.get("selected");
  if (sel !== null && sel !== undefined) app.act.select(sel);
}

export default { render };
