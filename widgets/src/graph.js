// GraphView front end: nested layered graph of a labkit Trace (anywidget ES module).
// A typed state (GraphState: the drawing, the view's transform, what is pending), the
// parts that act on it (placing the view, laying out, painting, user actions) and a thin
// wiring layer (model and DOM events -> state -> paint). The drawing (_graph_draw.js,
// _graph_canvas.js), tooltip (_graph_tip.js), toolbar (_graph_toolbar.js), pan/zoom
// (_panzoom.js), search and selection lookup (_graph_find.js), graph-break marks
// (_graph_marks.js) and the SVG file export (_graph_export.js) are modules of their own and
// pure where they can be (node-tested). The layout runs in a web worker (_graph_runner.js,
// _graph_layout.js, _layout.js) and comes back as typed arrays; thousands of boxes are
// drawn on a canvas (_graph_canvas.js).
import { colorScale, detailAt, expandedIndices, NEUTRAL, selectionOf, textColor, unpacked } from "./_graphcore.js";
import { edgesSvg, groupsSvg, heatLook, nodesSvg, SVG_STYLE, viewState } from "./_graph_draw.js";
import { makeRunner } from "./_graph_runner.js";
import { findAll, hiddenAncestors, matchesOf, selectedIndices } from "./_graph_find.js";
import { crumbHtml, crumbOf } from "./_graph_crumb.js";
import { liftMarks } from "./_graph_marks.js";
import { tipHtml } from "./_graph_tip.js";
import { buildToolbar, legendHtml, metricDefs } from "./_graph_toolbar.js";
import { makeMinimap } from "./_minimap.js";
import { CANVAS_MIN, makeCanvasView } from "./_graph_canvas.js";
import { svgEl, svgFile } from "./_graph_export.js";
import { attachPanZoom, centerView, fitView, inSight, openView, zoomView } from "./_panzoom.js";
import { uid } from "./_shared.js";
import { download, ensureStyles, h, onThemeSwitch, svgToPng, tooltip } from "./_ui.js";

/** @typedef {import("./_contract_types").GraphViewTraits} Traits the synced traits (labkit/views/_contract.py) */
/** @typedef {import("./_contract_types").GraphPayload} GraphPayload */
/** @typedef {import("./_graph_layout.js").GraphLayout} GraphLayout */
/** @typedef {import("./_graph_draw.js").DrawState & {graph: GraphPayload, els: Map<number, SVGElement>, marks: Map<number, import("./_graph_marks.js").Mark>, canvas?: boolean}} Shown the drawing now */
/** @typedef {ReturnType<typeof metricDefs>} MetricDefs */
/**
 * @typedef {object} GraphState what the user sees and what is pending
 * @property {Shown | null} S the drawing (null until the first layout)
 * @property {import("./_panzoom.js").View} view the transform: translation and scale
 * @property {boolean} userMoved the user panned or zoomed (a relayout keeps the view)
 * @property {boolean} fitted the view was last placed by Fit (a resize fits again)
 * @property {number} matchCursor the search match jumped to last
 * @property {{id: number, sx: number, sy: number} | null} anchor a toggled box kept in place across a relayout
 * @property {number | null} pendingCenter a search jump's box, centred once its layout is here
 * @property {number | null} pendingReveal a box to show once a hidden view (a tab) gets a size
 * @property {number} jumpStart when the last search jump started (0: none pending)
 * @property {number} asked the latest layout asked for: an older answer is dropped
 * @property {number} drawn the latest layout drawn (asked > drawn: one is on its way)
 * @property {boolean} clicked a selection made here (no pan to it)
 * @property {MetricDefs} metrics the payload's metrics
 * @property {unknown} metricsOf the payload's metrics table they were made from
 * @property {{key: unknown[], hits: number[]} | null} selHits the selection's payload indices, and what they were found for
 * @property {{key: unknown[], c: ReturnType<typeof crumbOf>} | null} crumbFor the breadcrumb, and what it was made of
 * @property {string | null} shownLegend the legend's HTML now
 * @property {string | null} shownCrumb what the breadcrumb shows now
 * @property {import("./_graph_draw.js").HeatLook | null} heat the canvas's colours now
 */

/** @returns {GraphState} the state of a view before its first layout */
export function initialState() {
  return {
    S: null,
    view: { x: 0, y: 0, k: 1 },
    userMoved: false,
    fitted: false,
    matchCursor: -1,
    anchor: null,
    pendingCenter: null,
    pendingReveal: null,
    jumpStart: 0,
    asked: 0,
    drawn: 0,
    clicked: false,
    metrics: [],
    metricsOf: null,
    selHits: null,
    crumbFor: null,
    shownLegend: null,
    shownCrumb: null,
    heat: null,
  };
}

/** Run f when the page is idle (at the latest after `ms`). @param {() => void} f @param {number} ms */
function whenIdle(f, ms) {
  if (typeof requestIdleCallback === "function") requestIdleCallback(f, { timeout: ms });
  else setTimeout(f, Math.min(ms, 50));
}

/**
 * The view's DOM: toolbar, breadcrumb, the SVG layers and the canvas, in el.
 * @param {import("./_contract_types").RenderContext<Traits>["model"]} model
 * @param {HTMLElement} el
 * @param {Parameters<typeof buildToolbar>[0]} acts the toolbar's buttons
 */
function buildDom(model, el, acts) {
  ensureStyles();
  const root = h("div", { class: "lk-view lk-graph" });
  root.style.height = `${model.get("height")}px`;
  const bar = buildToolbar(acts);
  // the selection: which frames it is in, which call of a rolled block, its own figures
  const crumb = h("div", { class: "lk-crumb" }); // shown (display: flex) while there is a selection
  const canvas = h("div", { class: "lk-canvas" });
  const svg = /** @type {SVGSVGElement} */ (svgEl("svg"));
  const style = svgEl("style");
  style.textContent = SVG_STYLE;
  const viewport = svgEl("g", { class: "lk-viewport" });
  const gEdges = svgEl("g", { class: "lk-edges" });
  const gGroups = svgEl("g", { class: "lk-groups" });
  const gNodes = svgEl("g", { class: "lk-nodes" });
  viewport.append(gGroups, gEdges, gNodes);
  svg.append(style, viewport);
  canvas.append(svg);
  root.append(bar.el, crumb, canvas);
  el.appendChild(root);
  return { root, bar, crumb, canvas, svg, viewport, gEdges, gGroups, gNodes, arrowId: uid("lk-arrow") };
}

/** @typedef {ReturnType<typeof buildDom>} Dom */
/**
 * @typedef {object} App one view: its model, DOM, state and the parts acting on them
 * @property {import("./_contract_types").RenderContext<Traits>["model"]} model
 * @property {Dom} dom
 * @property {GraphState} st
 * @property {number} t0 when render started
 * @property {<K extends "graph" | "metrics">(name: K) => Traits[K]} trait a synced value, unpacked
 * @property {ReturnType<typeof tooltip>} tip
 * @property {ReturnType<typeof makeCanvasView>} cview
 * @property {ReturnType<typeof makeMinimap>} minimap
 * @property {ReturnType<typeof makeRunner>} runner
 * @property {ReturnType<typeof placement>} place
 * @property {ReturnType<typeof painter>} paint
 * @property {ReturnType<typeof actions>} act
 */

/**
 * Placing the view: fit, home, zoom, centre on a box, reveal a box; each paints the new view.
 * @param {App} app
 */
function placement(app) {
  const { dom, st, cview } = app;
  const { root, canvas, svg, viewport } = dom;
  const view = st.view;
  const applyView = () => {
    viewport.setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.k})`);
    root.dataset.scale = view.k.toFixed(4);
    if (st.S?.canvas) cview.draw();
    const lod = detailAt(view.k); // zoomed out: type lines, then box text, left out
    if (svg.dataset.lod !== String(lod)) {
      svg.dataset.lod = String(lod);
      svg.classList.toggle("lk-lod1", lod === 1);
      svg.classList.toggle("lk-lod2", lod === 2);
    }
    app.minimap.draw();
  };
  /** @param {Partial<import("./_panzoom.js").View>} v @param {boolean} moved */
  const setView = (v, moved) => {
    Object.assign(view, v);
    st.userMoved = moved;
    st.fitted = false;
    applyView();
  };
  const size = () => /** @type {[number, number]} */ ([canvas.clientWidth || 800, canvas.clientHeight || 500]);
  /** The Fit button: the whole graph, at whatever scale it takes (less detail). */
  const fit = () => {
    if (st.S) setView(fitView(...size(), st.S.layout.width, st.S.layout.height), false);
    st.fitted = Boolean(st.S);
  };
  /** How the graph opens: labels >= 11 px, the top of a big graph in sight. */
  const home = () => {
    if (st.S) setView(openView(...size(), st.S.layout.width, st.S.layout.height), false);
  };
  /** @param {number} f @param {number} [cx] @param {number} [cy] */
  const zoomBy = (f, cx, cy) => setView(zoomView(view, f, cx ?? canvas.clientWidth / 2, cy ?? canvas.clientHeight / 2), true);
  /** @param {number} k */
  const centerOn = (k) => {
    app.tip.hide(); // the box under the pointer moves away
    const p = st.S?.layout.pos.get(k);
    if (!p) return;
    setView(centerView(view, p, canvas.clientWidth, canvas.clientHeight), true);
    // where it is on screen now (tests and benchmarks click its toggle there)
    root.dataset.centered = [view.x + p.x * view.k, view.y + p.y * view.k, p.w * view.k, p.h * view.k].map((v) => v.toFixed(1)).join(",");
    if (st.jumpStart) {
      const t = st.jumpStart;
      st.jumpStart = 0;
      requestAnimationFrame(() => (root.dataset.jumpMs = (performance.now() - t).toFixed(1)));
    }
  };
  /** Pan (and zoom in to a legible size) so box k is in sight; no move when it is. @param {number} k */
  const reveal = (k) => {
    const p = st.S?.layout.pos.get(k);
    if (!p) return;
    const cw = canvas.clientWidth;
    const ch = canvas.clientHeight;
    if (!cw || !ch) {
      st.pendingReveal = k;
      return;
    }
    st.pendingReveal = null;
    if (!inSight(view, p, cw, ch)) centerOn(k);
  };
  /** A view the user has not moved follows the canvas: placed again as it last was. */
  const placeAgain = () => (st.fitted ? fit() : home());
  return { applyView, setView, fit, home, zoomBy, centerOn, reveal, placeAgain };
}

/**
 * The open calls' trace node ids from the `expanded` trait: one buffer of int32 (graph.py's
 * `_packed_ids`, a DataView here), or a list (a widget state saved before that form).
 * @param {unknown} raw @returns {Int32Array | number[]}
 */
export function openIds(raw) {
  if (Array.isArray(raw)) return raw;
  const view = ArrayBuffer.isView(raw) ? raw : raw instanceof ArrayBuffer ? new DataView(raw) : null;
  if (!view) return [];
  const { buffer, byteOffset, byteLength } = view;
  const n = byteLength >> 2;
  return byteOffset % 4 ? new Int32Array(buffer.slice(byteOffset, byteOffset + 4 * n)) : new Int32Array(buffer, byteOffset, n);
}

/**
 * The `expanded` trait's value for these ids (and those added): a DataView over a buffer of
 * their own (ipywidgets sends a view's whole buffer), as the kernel's echo comes back.
 * @param {ArrayLike<number>} ids @param {ArrayLike<number>} [add]
 * @returns {any} the contract names the ids' list; the wire form is this buffer
 */
export function packedIds(ids, add = []) {
  const out = new Int32Array(ids.length + add.length);
  out.set(ids);
  out.set(add, ids.length);
  return new DataView(out.buffer);
}
/**
 * The ids but one, in order (a loop: Int32Array.from(ids).filter(...) called a closure per id).
 * @param {ArrayLike<number>} ids @param {number} id @returns {Int32Array}
 */
export function without(ids, id) {
  const out = new Int32Array(ids.length);
  let m = 0;
  for (let i = 0; i < ids.length; i++) if (ids[i] !== id) out[m++] = ids[i];
  return out.subarray(0, m);
}

/**
 * Laying out and what a new layout does: ask the runner, then draw, keep a toggled box in
 * place, centre a pending search match, say how long it took (the dataset: tests, benchmarks).
 * @param {App} app
 */
function layoutFlow(app) {
  const { model, dom, st, runner } = app;
  const { root } = dom;
  /** @param {boolean} refit */
  const relayout = (refit) => {
    const graph = app.trait("graph");
    if (!graph?.ids) return;
    const start = performance.now();
    const seq = ++st.asked;
    runner.layout(graph, openIds(model.get("expanded")), (L) => {
      if (seq !== st.asked || graph !== app.trait("graph")) return;
      st.drawn = seq;
      laidOut(graph, L, refit, start);
    });
  };
  /** @param {GraphPayload} graph @param {GraphLayout & {hasKids: Uint8Array, ms: number}} L @param {boolean} refit @param {number} start */
  const laidOut = (graph, L, refit, start) => {
    if (st.metricsOf !== graph.metrics) {
      // the same list for every layout of a graph: what is worked out from it is kept
      st.metricsOf = graph.metrics;
      st.metrics = metricDefs(graph.metrics);
      dom.bar.setMetrics(st.metrics);
    }
    st.S = { graph, ...viewState(graph, L.hasKids, L, null, true), els: new Map(), marks: new Map() };
    const S = st.S;
    app.paint.redraw();
    const view = st.view;
    const anchor = st.anchor;
    const kept = anchor && !refit ? S.graph.ids.indexOf(anchor.id) : -1;
    const at = kept >= 0 ? S.layout.pos.get(S.vis.boxOf[kept]) : null;
    if (anchor && at) {
      app.place.setView({ x: anchor.sx - at.x * view.k, y: anchor.sy - at.y * view.k }, st.userMoved);
      // the toggled box on screen now (tests and benchmarks click its toggle there)
      root.dataset.anchored = [anchor.sx, anchor.sy, at.w * view.k, at.h * view.k].map((v) => v.toFixed(1)).join(",");
    } else if (refit) app.place.home();
    else if (!st.userMoved) app.place.placeAgain();
    st.anchor = null;
    if (refit && model.get("selected") != null) app.paint.highlight(true); // opened with a selection
    if (st.pendingCenter !== null) {
      const k = st.pendingCenter;
      st.pendingCenter = null;
      app.place.centerOn(k);
    }
    const ms = performance.now() - start;
    root.dataset.size = `${Math.round(S.layout.width)},${Math.round(S.layout.height)}`; // drawing units
    root.dataset.boxes = String(S.vis.boxes.length);
    root.dataset.groups = String(S.vis.groups.length);
    root.dataset.layoutMs = ms.toFixed(1);
    root.dataset.workerMs = L.ms.toFixed(1);
    root.dataset.inWorker = String(runner.inWorker());
    // the canvas painted now, not on the next animation frame: the coming frame shows it
    if (S.canvas) app.cview.flush();
    const stamp = String(Date.now());
    root.dataset.laidOut = stamp; // drawn: the next frame shows it
    requestAnimationFrame(() => {
      root.dataset.sinceRenderMs = (performance.now() - app.t0).toFixed(1);
      root.dataset.paintMs = (performance.now() - start).toFixed(1);
      root.dataset.painted = stamp; // the frame showing this layout has started
    });
    if (refit && S.canvas) rehearse(app, S, 2);
  };
  return { relayout, laidOut };
}

/**
 * The first drawing of a big graph painted again, `passes` times, each when the page is
 * idle (the same picture: nothing on screen changes), and a point hit-tested. The drawing's
 * code, run once per layout over every drawn box, is then optimised before the user's first
 * click: the first toggle of a fresh 100,000-node view otherwise ran it unoptimised (its
 * drawing 120 ms on the page's thread in JupyterLab, 14 ms from the third toggle on).
 * @param {App} app @param {Shown} S the drawing painted first @param {number} passes
 */
function rehearse(app, S, passes) {
  whenIdle(() => {
    if (app.st.S !== S || !passes) return; // a newer layout is shown: its own code ran
    // a layout on its way (a toggle): not now, its answer would wait for this paint
    if (app.st.asked > app.st.drawn) return rehearse(app, S, passes);
    app.paint.redraw();
    app.cview.flush();
    const p = S.layout.pos.get(S.vis.boxes[0]);
    if (p) app.cview.hit(app.st.view.x + (p.x + 1) * app.st.view.k, app.st.view.y + (p.y + 1) * app.st.view.k);
    const root = app.dom.root;
    root.dataset.rehearsed = String(Number(root.dataset.rehearsed || 0) + 1); // tests wait for it
    rehearse(app, S, passes - 1);
  }, 1000);
}

/**
 * Painting the state: boxes (SVG or canvas), colours and legend, selection and breadcrumb,
 * search matches.
 * @param {App} app
 */
function painter(app) {
  const { model, dom, st, cview } = app;
  const { root, bar, svg, gEdges, gGroups, gNodes, arrowId } = dom;
  const draw = () => {
    const S = /** @type {Shown} */ (st.S);
    const { graph, vis, layout, rolled } = S;
    S.marks = liftMarks(graph, vis.boxOf, model.get("marks"));
    // thousands of boxes: one canvas, drawn where in sight (SVG's DOM is too slow there)
    S.canvas = vis.boxes.length + vis.groups.length > CANVAS_MIN;
    const renderer = S.canvas ? "canvas" : "svg";
    if (root.dataset.renderer !== renderer) {
      root.dataset.renderer = renderer;
      svg.style.display = S.canvas ? "none" : "";
    }
    cview.show(S.canvas);
    S.els.clear();
    if (S.canvas) {
      // the SVG layers emptied once (a relayout drawn on the canvas writes nothing there)
      if (gGroups.firstChild || gNodes.firstChild || gEdges.firstChild) gGroups.innerHTML = gNodes.innerHTML = gEdges.innerHTML = "";
      cview.setState(S);
      cview.draw();
    } else {
      cview.setState(null);
      gGroups.innerHTML = groupsSvg(graph, vis, layout, rolled, S.marks);
      gNodes.innerHTML = nodesSvg(graph, vis, layout, rolled, S.marks);
      gEdges.innerHTML = edgesSvg(layout, arrowId);
      // children of SVG groups, written as SVG text
      for (const node of /** @type {HTMLCollectionOf<SVGElement>} */ (gNodes.children)) S.els.set(Number(node.dataset.k), node);
      for (const node of /** @type {HTMLCollectionOf<SVGElement>} */ (gGroups.children)) S.els.set(Number(node.dataset.k), node);
    }
    root.dataset.marked = String(S.marks.size);
  };
  const recolor = () => {
    const S = st.S;
    if (!S) return;
    const metric = model.get("metric");
    if (bar.metricSel.value !== metric) bar.metricSel.value = metric;
    const values = app.trait("metrics")?.[metric] || [];
    const boxes = S.vis.boxes;
    const shown = new Float64Array(boxes.length); // the drawn boxes' values (no closure per box)
    for (let i = 0; i < boxes.length; i++) shown[i] = values[boxes[i]] || 0;
    const scale = colorScale(shown);
    if (S.canvas) {
      const key = `${metric}|${scale.min}|${scale.max}|${scale.log}`;
      if (!st.heat || st.heat.key !== key || st.heat.values !== values)
        st.heat = heatLook(
          key,
          values,
          scale,
          () => ({ parent: S.graph.parent, boxes: /** @type {Shown} */ (st.S).vis.boxes }),
          textColor,
          NEUTRAL,
        );
      Object.assign(cview.look, st.heat);
      cview.draw();
    } else {
      for (const k of S.vis.boxes) {
        const node = S.els.get(k);
        if (!node) continue;
        const fill = scale.color(values[k] || 0);
        // nothing recorded: the theme's own box colours; a heat colour: black or white ink
        const neutral = fill === NEUTRAL;
        /** @type {SVGElement} */ (node.querySelector("rect.lk-box")).style.fill = neutral ? "var(--lk-bg2, #eee)" : fill;
        const ink = neutral ? "var(--lk-fg, #222)" : textColor(fill);
        for (const t of node.querySelectorAll("text.lk-label, text.lk-sub")) /** @type {SVGElement} */ (t).style.fill = ink;
      }
    }
    const html = legendHtml(
      scale,
      st.metrics.find((d) => d.key === metric),
    );
    if (html !== st.shownLegend) bar.legend.innerHTML = st.shownLegend = html;
  };
  const highlight = (pan = false) => {
    const S = st.S;
    if (!S) return;
    for (const node of root.querySelectorAll(".lk-selected")) node.classList.remove("lk-selected");
    const sel = model.get("selected");
    // found once per graph and selection (a scan of every node's id and name), not per layout
    const key = [S.graph, sel, model.get("selected_node")];
    if (!st.selHits || st.selHits.key.some((v, i) => v !== key[i]))
      st.selHits = { key, hits: sel === null || sel === undefined ? [] : selectedIndices(S.graph, sel, model.get("selected_node")) };
    const hits = st.selHits.hits;
    showCrumb(sel, hits.length ? hits[0] : -1);
    cview.look.selected = new Set(hits.map((k) => S.vis.boxOf[k]));
    if (S.canvas) cview.draw();
    for (const k of hits) S.els.get(S.vis.boxOf[k])?.classList.add("lk-selected");
    if (hits.length && pan) app.place.reveal(S.vis.boxOf[hits[0]]);
  };
  /** @param {string | null | undefined} sel @param {number} k */
  const showCrumb = (sel, k) => crumbShown(app, sel, k);
  const markMatches = () => {
    const S = st.S;
    if (!S) return;
    for (const node of root.querySelectorAll(".lk-match")) node.classList.remove("lk-match");
    const q = bar.search.value.trim();
    let n = 0;
    cview.look.matches = new Set();
    for (const k of matchesOf(S.graph, q)) {
      if (S.vis.boxOf[k] !== k) continue;
      const node = S.els.get(k);
      if (node) node.classList.add("lk-match");
      if (node || S.canvas) n++;
      if (S.canvas) cview.look.matches.add(k);
    }
    if (S.canvas) cview.draw();
    bar.search.title = q ? `${n} drawn matches; Enter jumps (expanding as needed)` : "";
  };
  /** Draw the current layout again (new marks: same boxes, same places). */
  const redraw = () => {
    if (!st.S) return;
    draw();
    recolor();
    highlight();
    markMatches();
  };
  return { redraw, recolor, highlight, markMatches };
}

/**
 * The breadcrumb of the selection: its frames, which call of a rolled block, its figures;
 * the page's DOM is touched only when it says something new (a relayout of a big graph
 * otherwise restyles the notebook for an identical line).
 * @param {App} app @param {string | null | undefined} sel @param {number} k
 */
function crumbShown(app, sel, k) {
  const { model, dom, st } = app;
  const S = /** @type {Shown} */ (st.S);
  const key = [S.graph, S.rolled, sel, k, app.trait("metrics"), model.get("instance_metrics"), st.metrics];
  // worked out once for what it depends on (each relayout of a big graph asks again)
  if (!st.crumbFor || st.crumbFor.key.some((v, i) => v !== key[i]))
    st.crumbFor = {
      key,
      c: crumbOf(S.graph, S.rolled, sel, k, app.trait("metrics") || {}, model.get("instance_metrics") || {}, st.metrics),
    };
  const c = st.crumbFor.c;
  const rolledNow = model.get("rolled");
  const unrolled = rolledNow ? (model.get("unrolled") || []).length : 0;
  dom.bar.setRolled(rolledNow, unrolled, S.graph.rolled.length > 0 || !rolledNow || unrolled > 0);
  const html = c ? `${crumbHtml(c)}|${c.block}` : "";
  if (html === st.shownCrumb) return;
  st.shownCrumb = html;
  const crumb = dom.crumb;
  crumb.innerHTML = "";
  crumb.dataset.text = c ? c.text : "";
  crumb.style.display = c ? "flex" : "none";
  // wraps between its parts in a narrow view (never cut inside a figure)
  const text = h("span", { class: "lk-crumb-text" });
  text.innerHTML = crumbHtml(c);
  crumb.append(text);
  if (c?.block) {
    const block = c.block;
    const b = h("button", { class: "lk-unroll", title: `draw each call of ${block}` }, `Unroll ${block}`);
    b.onclick = () => {
      model.set("unrolled", [...(model.get("unrolled") || []), block]);
      model.save_changes();
    };
    crumb.append(b);
  }
}

/**
 * What the user does: jump to a search match, open or close a call, select a box, export.
 * @param {App} app
 */
function actions(app) {
  const { model, dom, st } = app;
  /** Enter in the search: the next match (a call inside a rolled block too) is opened
   * to, centred and selected; the tooltip of the box under the pointer closes. */
  const jumpToMatch = () => {
    st.jumpStart = performance.now();
    const S = st.S;
    const list = S ? findAll(S.graph, dom.bar.search.value.trim()) : [];
    if (!S || !list.length) return;
    app.tip.hide();
    st.matchCursor = (st.matchCursor + 1) % list.length;
    const { k, name } = list[st.matchCursor];
    const cur = openIds(model.get("expanded"));
    const need = hiddenAncestors(S.graph, expandedIndices(S.graph, cur), k);
    if (need.length) {
      st.pendingCenter = k; // centred once laid out (a worker answers later)
      model.set("expanded", packedIds(cur, need));
      model.save_changes();
    }
    st.clicked = true; // centred below, once laid out
    model.set("selected", name);
    model.set("selected_node", name === S.graph.name[k] ? S.graph.ids[k] : -1);
    model.save_changes();
    st.clicked = false;
    if (st.pendingCenter === null) app.place.centerOn(k);
  };
  /** @param {number} k @param {string | undefined} act "expand" or "collapse" */
  const toggle = (k, act) => {
    const S = /** @type {Shown} */ (st.S);
    app.tip.hide(); // the drawing changes under the pointer
    const id = S.graph.ids[k];
    const p = S.layout.pos.get(k);
    const view = st.view;
    // the box stays where it is on screen when it opens or closes (no re-fit)
    if (p) st.anchor = { id, sx: view.x + p.x * view.k, sy: view.y + p.y * view.k };
    const cur = openIds(model.get("expanded"));
    model.set("expanded", act === "expand" ? packedIds(cur, [id]) : packedIds(without(cur, id)));
    // set() fires the change: the layout is asked for before the comm message is made
    // (one buffer of int32: 40,000 open ids as a list took the page 25-80 ms). Not
    // deferred: ipywidgets applies the kernel's echo of a sent value, which would undo a
    // newer unsent one
    model.save_changes();
  };
  /** @param {number} k */
  const select = (k) => {
    const S = /** @type {Shown} */ (st.S);
    st.clicked = true; // the change events fire inside set(): no pan for a click here
    model.set("selected", selectionOf(S.graph, k));
    model.set("selected_node", S.graph.ids[k]);
    model.save_changes();
    st.clicked = false;
  };
  /** The drawing as an SVG file; a canvas view writes its SVG for the export only. */
  const svgText = () => {
    const S = /** @type {Shown} */ (st.S);
    const { svg, gGroups, gNodes, gEdges, arrowId } = dom;
    if (!S.canvas) return svgFile(svg, S.layout);
    gGroups.innerHTML = groupsSvg(S.graph, S.vis, S.layout, S.rolled, S.marks);
    gNodes.innerHTML = nodesSvg(S.graph, S.vis, S.layout, S.rolled, S.marks);
    gEdges.innerHTML = edgesSvg(S.layout, arrowId);
    const out = svgFile(svg, S.layout);
    gGroups.innerHTML = gNodes.innerHTML = gEdges.innerHTML = "";
    return out;
  };
  const exportSvg = () => {
    if (st.S) download(`${st.S.graph.model || "graph"}.svg`, svgText().text, "image/svg+xml");
  };
  const exportPng = async () => {
    if (!st.S) return;
    const { text, W, H } = svgText();
    download(`${st.S.graph.model || "graph"}.png`, await svgToPng(text, W, H));
  };
  const roll = () => {
    const all = model.get("rolled") && !(model.get("unrolled") || []).length;
    model.set("unrolled", []);
    model.set("rolled", !all);
    model.save_changes();
  };
  return { jumpToMatch, toggle, select, exportSvg, exportPng, roll };
}

/**
 * Pointer events on the drawing: hover shows the tooltip, a click toggles or selects.
 * @param {App} app
 */
function wirePointer(app) {
  const { dom, st, cview, tip } = app;
  const canvas = dom.canvas;
  /** @param {MouseEvent} e */
  const hitAt = (e) => {
    const r = canvas.getBoundingClientRect();
    return cview.hit(e.clientX - r.left, e.clientY - r.top);
  };
  /** The element under the pointer (the canvas's events come from its elements). @param {Event} e */
  const targetOf = (e) => /** @type {Element} */ (e.target);
  /** The drawn box or frame (an SVG group) holding an element. @param {Element} target */
  const nodeOf = (target) => /** @type {SVGGElement | null | undefined} */ (target.closest?.(".lk-node, .lk-group"));
  /** @param {number} k @param {MouseEvent} e */
  const showTip = (k, e) => {
    const S = /** @type {Shown} */ (st.S);
    tip.show(tipHtml(S.graph, S.rolled, k, app.trait("metrics") || {}, st.metrics, S.marks.get(k)), e.clientX, e.clientY);
  };
  attachPanZoom(canvas, st.view, {
    panned: () => {
      st.userMoved = true;
      app.place.applyView();
      tip.hide();
    },
    zoom: app.place.zoomBy,
    hover: (/** @type {MouseEvent} */ e) => {
      if (st.S?.canvas) {
        const at = hitAt(e);
        if (at && at.part !== "expand" && at.part !== "collapse") showTip(at.k, e);
        else tip.hide();
        canvas.style.cursor = at ? "pointer" : "";
        return;
      }
      const node = nodeOf(targetOf(e));
      if (node?.classList.contains("lk-node")) showTip(Number(node.dataset.k), e);
      else if (node && targetOf(e).closest(".lk-glabel, .lk-frame, .lk-mark") && e.offsetY !== undefined)
        showTip(Number(node.dataset.k), e);
      else tip.hide();
    },
    click: (/** @type {MouseEvent} */ e) => {
      if (st.S?.canvas) {
        const at = hitAt(e);
        if (at && (at.part === "expand" || at.part === "collapse")) app.act.toggle(at.k, at.part);
        else if (at) app.act.select(at.k);
        return;
      }
      const tg = /** @type {SVGGElement | null | undefined} */ (targetOf(e).closest?.(".lk-toggle"));
      if (tg) {
        app.act.toggle(Number(tg.dataset.k), tg.dataset.act);
        return;
      }
      const node = nodeOf(targetOf(e));
      if (node) app.act.select(Number(node.dataset.k));
    },
    leave: () => tip.hide(),
  });
}

/**
 * Model and toolbar events, resizes and theme switches -> state -> paint.
 * @param {App} app
 * @param {ReturnType<typeof layoutFlow>} flow
 * @returns {() => void} undoes the wiring
 */
function wireModel(app, flow) {
  const { model, dom, st, cview } = app;
  const { bar, root, canvas } = dom;
  bar.metricSel.addEventListener("change", () => {
    model.set("metric", bar.metricSel.value);
    model.save_changes();
  });
  bar.search.addEventListener("input", () => {
    st.matchCursor = -1;
    app.paint.markMatches();
  });
  bar.search.addEventListener("keydown", (e) => {
    if (e.key === "Enter") app.act.jumpToMatch();
  });
  bar.depthIn.value = String(model.get("depth"));
  bar.depthIn.addEventListener("change", () => {
    model.set("depth", Number(bar.depthIn.value));
    model.save_changes();
  });
  // a selection made elsewhere (the profile, Python) pans here; a click here does not
  const onSelected = () => app.paint.highlight(!st.clicked);
  const onHeight = () => {
    root.style.height = `${model.get("height")}px`;
    if (st.S?.canvas) cview.draw();
  };
  const highlight = () => app.paint.highlight();
  /** @type {[import("./_contract_types").ChangeEvent<Traits>, () => void][]} */
  const listeners = [
    ["change:graph", () => flow.relayout(true)],
    ["change:expanded", () => flow.relayout(false)],
    ["change:metrics", app.paint.recolor],
    ["change:metric", app.paint.recolor],
    ["change:marks", app.paint.redraw],
    ["change:selected", onSelected],
    ["change:selected_node", onSelected],
    ["change:depth", () => (bar.depthIn.value = String(model.get("depth")))],
    ["change:height", onHeight],
    ["change:instance_metrics", highlight],
    ["change:rolled", highlight],
    ["change:unrolled", highlight],
  ];
  for (const [event, fn] of listeners) model.on(event, fn);
  let lastW = 0;
  const ro = new ResizeObserver(() => {
    const w = canvas.clientWidth;
    if (w === lastW) return;
    lastW = w; // 0 while hidden (a tab): showing it again counts as a resize
    if (!w) return;
    if (!st.userMoved) app.place.placeAgain();
    if (st.S?.canvas) cview.draw();
    if (st.pendingReveal !== null) app.place.reveal(st.pendingReveal);
  });
  ro.observe(canvas);
  // the canvas drawing and the minimap read the theme's colours when they paint
  const stopThemeWatch = onThemeSwitch(() => {
    if (st.S?.canvas) cview.draw();
    app.minimap.draw();
  });
  return () => {
    ro.disconnect();
    stopThemeWatch();
    for (const [event, fn] of listeners) model.off(event, fn);
  };
}

/** @param {import("./_contract_types").RenderContext<Traits>} ctx anywidget's model and element */
function render({ model, el }) {
  const t0 = performance.now();
  const st = initialState();
  /** @type {App} */
  const app = /** @type {any} */ ({ model, st, t0 });
  app.dom = buildDom(model, el, {
    zoomOut: () => app.place.zoomBy(1 / 1.25),
    zoomIn: () => app.place.zoomBy(1.25),
    fit: () => app.place.fit(),
    svg: () => app.act.exportSvg(),
    png: () => app.act.exportPng(),
    roll: () => app.act.roll(),
  });
  // the graph and its metrics come as one buffer of JSON (graph.py's packed_json: a
  // DataView here), unpacked once into the value the contract names
  app.trait = (name) => /** @type {any} */ (unpacked(model.get(name)));
  app.tip = tooltip(app.dom.canvas);
  app.cview = makeCanvasView(app.dom.canvas, st.view);
  // the layout runs in a web worker (on this thread where there is none); it keeps the
  // prepared payload and each level's layout per graph: opening a frame lays out little
  app.runner = makeRunner();
  app.minimap = makeMinimap(
    app.dom.canvas,
    () => st.S,
    st.view,
    (x, y) => {
      st.view.x = x;
      st.view.y = y;
      st.userMoved = true;
      app.place.applyView();
    },
    () => st.asked > st.drawn,
  );
  app.place = placement(app);
  app.paint = painter(app);
  app.act = actions(app);
  const flow = layoutFlow(app);
  wirePointer(app);
  const unwire = wireModel(app, flow);
  flow.relayout(true);
  return () => {
    app.runner.close();
    unwire();
  };
}

export default { render };
