// GraphView front end: nested layered graph of a labkit Trace (anywidget ES module).
// Render glue: state, model events and selection. The drawing (_graph_draw.js), tooltip
// (_graph_tip.js), toolbar (_graph_toolbar.js), pan/zoom (_panzoom.js), search and
// selection lookup (_graph_find.js), graph-break marks (_graph_marks.js) and the SVG
// file export (_graph_export.js) are modules of their own. The layout runs in a web
// worker (_graph_runner.js, _graph_layout.js, _layout.js) and comes back as typed arrays;
// thousands of boxes are drawn on a canvas (_graph_canvas.js).
import { colorScale, detailAt, expandedIndices, hottestInside, NEUTRAL, selectionOf, textColor, unpacked } from "./_graphcore.js";
import { edgesSvg, groupsSvg, nodesSvg, SVG_STYLE, viewState } from "./_graph_draw.js";
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
/** @param {import("./_contract_types").RenderContext<Traits>} ctx anywidget's model and element */
function render({ model, el }) {
  const t0 = performance.now();
  ensureStyles();
  const arrowId = uid("lk-arrow"); // ids are page-wide: this view's own marker
  const root = h("div", { class: "lk-view lk-graph" });
  root.style.height = `${model.get("height")}px`;
  const bar = buildToolbar({
    zoomOut: () => zoomBy(1 / 1.25),
    zoomIn: () => zoomBy(1.25),
    fit: () => fit(),
    svg: () => exportSvg(),
    png: () => exportPng(),
    roll: () => {
      const all = model.get("rolled") && !(model.get("unrolled") || []).length;
      model.set("unrolled", []);
      model.set("rolled", !all);
      model.save_changes();
    },
  });
  const { metricSel, search, depthIn, legend } = bar;
  // the selection: which frames it is in, which call of a rolled block, its own figures
  const crumb = h("div", {
    class: "lk-crumb",
    style:
      "display:none;align-items:center;flex-wrap:wrap;gap:6px;padding:3px 8px;border-bottom:1px solid var(--lk-border2);font-size:12px",
  });
  const canvas = h("div", { class: "lk-canvas" });
  const svg = svgEl("svg");
  const style = svgEl("style");
  style.textContent = SVG_STYLE;
  const viewport = svgEl("g", { class: "lk-viewport" });
  const gEdges = svgEl("g", { class: "lk-edges" });
  const gGroups = svgEl("g", { class: "lk-groups" });
  const gNodes = svgEl("g", { class: "lk-nodes" });
  viewport.append(gGroups, gEdges, gNodes);
  svg.append(style, viewport);
  canvas.append(svg);
  const crumbStyle = h(
    "style",
    {},
    ".lk-crumb .lk-crumb-up, .lk-crumb .lk-crumb-fig { color: var(--lk-fg2); } .lk-crumb .lk-unroll { height: 20px; }",
  );
  root.append(crumbStyle, bar.el, crumb, canvas);
  el.appendChild(root);
  const tip = tooltip(canvas);
  const cview = makeCanvasView(canvas, {
    get x() {
      return view.x;
    },
    get y() {
      return view.y;
    },
    get k() {
      return view.k;
    },
  });

  /**
   * A synced value; the graph and its metrics come as one buffer of JSON (graph.py's
   * packed_json: a DataView here), unpacked once into the value the contract names.
   * @template {"graph" | "metrics"} K
   * @param {K} name
   * @returns {Traits[K]}
   */
  const trait = (name) => /** @type {Traits[K]} */ (unpacked(model.get(name)));
  let S = null; // current drawing state
  // the layout runs in a web worker (on this thread where there is none); it keeps the
  // prepared payload and each level's layout per graph: opening a frame lays out little
  const runner = makeRunner();
  let asked = 0; // the latest layout asked for: an older answer is dropped
  let pendingCenter = null; // a search jump's box, centred once its layout is here
  let jumpStart = 0;
  let metrics = []; // [{key, label, unit, fmt}] from the payload
  const view = { x: 0, y: 0, k: 1 };
  let userMoved = false;
  let matchCursor = -1;
  let anchor = null; // {id, sx, sy}: a toggled box to keep in place across a relayout
  const minimap = makeMinimap(
    canvas,
    () => S,
    view,
    (x, y) => {
      view.x = x;
      view.y = y;
      userMoved = true;
      applyView();
    },
  );

  const applyView = () => {
    viewport.setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.k})`);
    root.dataset.scale = view.k.toFixed(4);
    if (S?.canvas) cview.draw();
    const lod = detailAt(view.k); // zoomed out: type lines, then box text, left out
    if (svg.dataset.lod !== String(lod)) {
      svg.dataset.lod = String(lod);
      svg.classList.toggle("lk-lod1", lod === 1);
      svg.classList.toggle("lk-lod2", lod === 2);
    }
    minimap.draw();
  };
  let fitted = false; // the view was last placed by Fit: a resize or relayout fits again
  const setView = (v, moved) => {
    Object.assign(view, v);
    userMoved = moved;
    fitted = false;
    applyView();
  };

  /** The Fit button: the whole graph, at whatever scale it takes (less detail). */
  function fit() {
    if (S) setView(fitView(canvas.clientWidth || 800, canvas.clientHeight || 500, S.layout.width, S.layout.height), false);
    fitted = Boolean(S);
  }

  /** A view the user has not moved follows the canvas: placed again as it last was. */
  const placeAgain = () => (fitted ? fit() : home());

  /** How the graph opens: labels >= 11 px, the top of a big graph in sight. */
  function home() {
    if (S) setView(openView(canvas.clientWidth || 800, canvas.clientHeight || 500, S.layout.width, S.layout.height), false);
  }

  function zoomBy(f, cx, cy) {
    setView(zoomView(view, f, cx ?? canvas.clientWidth / 2, cy ?? canvas.clientHeight / 2), true);
  }

  function centerOn(k) {
    tip.hide(); // the box under the pointer moves away
    const p = S?.layout.pos.get(k);
    if (!p) return;
    setView(centerView(view, p, canvas.clientWidth, canvas.clientHeight), true);
    // where it is on screen now (tests and benchmarks click its toggle there)
    root.dataset.centered = [view.x + p.x * view.k, view.y + p.y * view.k, p.w * view.k, p.h * view.k].map((v) => v.toFixed(1)).join(",");
    if (jumpStart) {
      const t = jumpStart;
      jumpStart = 0;
      requestAnimationFrame(() => (root.dataset.jumpMs = (performance.now() - t).toFixed(1)));
    }
  }

  function relayout(refit) {
    const graph = trait("graph");
    if (!graph?.ids) return;
    const start = performance.now();
    const seq = ++asked;
    runner.layout(graph, model.get("expanded"), (L) => {
      if (seq === asked && graph === trait("graph")) laidOut(graph, L, refit, start);
    });
  }

  /** A layout came back: draw it, keep a toggled box in place, say how long it took. */
  function laidOut(graph, L, refit, start) {
    metrics = metricDefs(graph.metrics);
    bar.setMetrics(metrics);
    S = { graph, ...viewState(graph, L.hasKids, L, null), els: new Map(), marks: new Map() };
    const { vis } = S;
    redraw();
    const kept = anchor && !refit ? S.graph.ids.indexOf(anchor.id) : -1;
    const at = kept >= 0 ? S.layout.pos.get(S.vis.boxOf[kept]) : null;
    if (at) {
      setView({ x: anchor.sx - at.x * view.k, y: anchor.sy - at.y * view.k }, userMoved);
      // the toggled box on screen now (tests and benchmarks click its toggle there)
      root.dataset.anchored = [anchor.sx, anchor.sy, at.w * view.k, at.h * view.k].map((v) => v.toFixed(1)).join(",");
    } else if (refit) home();
    else if (!userMoved) placeAgain();
    anchor = null;
    if (refit && model.get("selected") != null) highlight(true); // opened with a selection
    if (pendingCenter !== null) {
      const k = pendingCenter;
      pendingCenter = null;
      centerOn(k);
    }
    const ms = performance.now() - start;
    root.dataset.size = `${Math.round(S.layout.width)},${Math.round(S.layout.height)}`; // drawing units
    root.dataset.boxes = String(vis.boxes.length);
    root.dataset.groups = String(vis.groups.length);
    root.dataset.layoutMs = ms.toFixed(1);
    root.dataset.workerMs = L.ms.toFixed(1);
    root.dataset.inWorker = String(runner.inWorker());
    requestAnimationFrame(() => {
      root.dataset.laidOut = String(Date.now());
      root.dataset.sinceRenderMs = (performance.now() - t0).toFixed(1);
      root.dataset.paintMs = (performance.now() - start).toFixed(1);
    });
  }

  /** Draw the current layout again (new marks: same boxes, same places). */
  function redraw() {
    if (!S) return;
    draw();
    recolor();
    highlight();
    markMatches();
  }

  function draw() {
    const { graph, vis, layout, rolled } = S;
    S.marks = liftMarks(graph, vis.boxOf, model.get("marks"));
    // thousands of boxes: one canvas, drawn where in sight (SVG's DOM is too slow there)
    S.canvas = vis.boxes.length + vis.groups.length > CANVAS_MIN;
    root.dataset.renderer = S.canvas ? "canvas" : "svg";
    svg.style.display = S.canvas ? "none" : "";
    cview.show(S.canvas);
    if (S.canvas) {
      gGroups.innerHTML = gNodes.innerHTML = gEdges.innerHTML = "";
      S.els.clear();
      cview.setState(S);
      cview.draw();
      root.dataset.marked = String(S.marks.size);
      return;
    }
    cview.setState(null);
    gGroups.innerHTML = groupsSvg(graph, vis, layout, rolled, S.marks);
    gNodes.innerHTML = nodesSvg(graph, vis, layout, rolled, S.marks);
    gEdges.innerHTML = edgesSvg(layout, arrowId);
    S.els.clear();
    // children of SVG groups, written as SVG text
    for (const node of /** @type {HTMLCollectionOf<SVGElement>} */ (gNodes.children)) S.els.set(Number(node.dataset.k), node);
    for (const node of /** @type {HTMLCollectionOf<SVGElement>} */ (gGroups.children)) S.els.set(Number(node.dataset.k), node);
    root.dataset.marked = String(S.marks.size);
  }

  let shownLegend = null; // the legend's HTML now
  let colors = null; // {key, values, scale, fills}: the canvas boxes' colours, as painted
  const inks = new Map(); // fill -> the ink with more contrast on it

  function recolor() {
    if (!S) return;
    const metric = model.get("metric");
    metricSel.value = metric;
    const values = trait("metrics")?.[metric] || [];
    const scale = colorScale(S.vis.boxes.map((k) => values[k] || 0));
    if (S.canvas) {
      // a box's colour depends on its value and the scale: worked out when the box is
      // first painted and kept while both stay (a toggle, a pan: no recolouring)
      const key = `${metric}|${scale.min}|${scale.max}|${scale.log}`;
      if (!colors || colors.key !== key || colors.values !== values)
        colors = { key, values, scale, fills: new Map(), hot: new Float64Array(0), hotFor: null };
      const c = colors;
      cview.look.fillOf = (k) => {
        let fill = c.fills.get(k);
        if (fill === undefined) {
          fill = c.scale.color(c.values[k] || 0);
          fill = fill === NEUTRAL ? null : fill;
          c.fills.set(k, fill);
        }
        return fill;
      };
      const inkOn = (/** @type {string | null} */ fill) => {
        if (!fill) return null;
        let ink = inks.get(fill);
        if (ink === undefined) {
          ink = textColor(fill);
          inks.set(fill, ink);
        }
        return ink;
      };
      cview.look.inkOf = (k) => inkOn(cview.look.fillOf(k));
      // zoomed out, a frame drawn as one block takes its hottest drawn box's colour
      cview.look.frameFillOf = (g) => {
        if (c.hotFor !== S.vis) {
          c.hot = hottestInside(S.graph.parent, S.vis.boxes, (k) => c.values[k] || 0);
          c.hotFor = S.vis;
        }
        return c.hot[g] > 0 ? c.scale.color(c.hot[g]) : null;
      };
      cview.look.frameInkOf = (g) => inkOn(cview.look.frameFillOf(g));
      // further out, a column of calls drawn as one box: its hottest item's colour
      cview.look.spanFillOf = (items) => {
        cview.look.frameFillOf(-1); // the frames' hottest boxes, for this drawing
        let v = 0;
        for (const k of items) v = Math.max(v, c.hot[k] > 0 ? c.hot[k] : c.values[k] || 0);
        return v > 0 ? c.scale.color(v) : null;
      };
      cview.draw();
    }
    for (const k of S.canvas ? [] : S.vis.boxes) {
      const node = S.els.get(k);
      if (!node) continue;
      const fill = scale.color(values[k] || 0);
      // nothing recorded: the theme's own box colours; a heat colour: black or white ink
      const neutral = fill === NEUTRAL;
      node.querySelector("rect.lk-box").style.fill = neutral ? "var(--lk-bg2, #eee)" : fill;
      const ink = neutral ? "var(--lk-fg, #222)" : textColor(fill);
      for (const t of node.querySelectorAll("text.lk-label, text.lk-sub")) t.style.fill = ink;
    }
    const html = legendHtml(
      scale,
      metrics.find((d) => d.key === metric),
    );
    if (html !== shownLegend) legend.innerHTML = shownLegend = html;
  }

  function highlight(pan = false) {
    if (!S) return;
    for (const node of root.querySelectorAll(".lk-selected")) node.classList.remove("lk-selected");
    const sel = model.get("selected");
    const hits = sel === null || sel === undefined ? [] : selectedIndices(S.graph, sel, model.get("selected_node"));
    showCrumb(sel, hits.length ? hits[0] : -1);
    cview.look.selected = new Set(hits.map((k) => S.vis.boxOf[k]));
    if (S.canvas) cview.draw();
    for (const k of hits) {
      const node = S.els.get(S.vis.boxOf[k]);
      if (node) node.classList.add("lk-selected");
    }
    if (hits.length && pan) reveal(S.vis.boxOf[hits[0]]);
  }

  let shownCrumb = null; // what the breadcrumb shows now (its HTML and block)
  function showCrumb(sel, k) {
    const c = crumbOf(S.graph, S.rolled, sel, k, trait("metrics") || {}, model.get("instance_metrics") || {}, metrics);
    const rolledNow = model.get("rolled");
    const unrolled = rolledNow ? (model.get("unrolled") || []).length : 0;
    bar.setRolled(rolledNow, unrolled, S.graph.rolled.length > 0 || !rolledNow || unrolled > 0);
    // the page's DOM is touched only when the breadcrumb says something new (a relayout
    // of a big graph otherwise restyles the notebook for an identical line)
    const html = c ? `${crumbHtml(c)}|${c.block}` : "";
    if (html === shownCrumb) return;
    shownCrumb = html;
    crumb.innerHTML = "";
    crumb.dataset.text = c ? c.text : "";
    crumb.style.display = c ? "flex" : "none";
    // wraps between its parts in a narrow view (never cut inside a figure)
    const text = h("span", { style: "flex:1 1 20em;min-width:0" });
    text.innerHTML = crumbHtml(c);
    crumb.append(text);
    if (c?.block) {
      const b = h("button", { class: "lk-unroll", title: `draw each call of ${c.block}` }, `Unroll ${c.block}`);
      b.onclick = () => {
        model.set("unrolled", [...(model.get("unrolled") || []), c.block]);
        model.save_changes();
      };
      crumb.append(b);
    }
  }

  /** Pan (and zoom in to a legible size) so box k is in sight; no move when it is. */
  let pendingReveal = null; // a node to show once a hidden view (a tab) gets a size
  function reveal(k) {
    const p = S?.layout.pos.get(k);
    if (!p) return;
    const cw = canvas.clientWidth;
    const ch = canvas.clientHeight;
    if (!cw || !ch) {
      pendingReveal = k;
      return;
    }
    pendingReveal = null;
    if (!inSight(view, p, cw, ch)) centerOn(k);
  }

  const matches = (q) => (S ? matchesOf(S.graph, q) : []);
  const found = (q) => (S ? findAll(S.graph, q) : []);

  function markMatches() {
    if (!S) return;
    for (const node of root.querySelectorAll(".lk-match")) node.classList.remove("lk-match");
    const q = search.value.trim();
    let n = 0;
    cview.look.matches = new Set();
    for (const k of matches(q)) {
      if (S.vis.boxOf[k] !== k) continue;
      const node = S.els.get(k);
      if (node) node.classList.add("lk-match");
      if (node || S.canvas) n++;
      if (S.canvas) cview.look.matches.add(k);
    }
    if (S.canvas) cview.draw();
    search.title = q ? `${n} drawn matches; Enter jumps (expanding as needed)` : "";
  }

  /** Enter in the search: the next match (a call inside a rolled block too) is opened
   * to, centred and selected; the tooltip of the box under the pointer closes. */
  function jumpToMatch() {
    jumpStart = performance.now();
    const list = found(search.value.trim());
    if (!list.length) return;
    tip.hide();
    matchCursor = (matchCursor + 1) % list.length;
    const { k, name } = list[matchCursor];
    const need = hiddenAncestors(S.graph, expandedIndices(S.graph, model.get("expanded") || []), k);
    if (need.length) {
      pendingCenter = k; // centred once laid out (a worker answers later)
      model.set("expanded", [...(model.get("expanded") || []), ...need]);
      model.save_changes();
    }
    clicked = true; // centred below, once laid out
    model.set("selected", name);
    model.set("selected_node", name === S.graph.name[k] ? S.graph.ids[k] : -1);
    model.save_changes();
    clicked = false;
    if (pendingCenter === null) centerOn(k);
  }

  function toggle(k, act) {
    tip.hide(); // the drawing changes under the pointer
    const id = S.graph.ids[k];
    const p = S.layout.pos.get(k);
    // the box stays where it is on screen when it opens or closes (no re-fit)
    if (p) anchor = { id, sx: view.x + p.x * view.k, sy: view.y + p.y * view.k };
    const cur = model.get("expanded") || [];
    const next = act === "expand" ? [...cur, id] : cur.filter((x) => x !== id);
    model.set("expanded", next);
    model.save_changes();
  }

  function select(k) {
    clicked = true; // the change events fire inside set(): no pan for a click here
    model.set("selected", selectionOf(S.graph, k));
    model.set("selected_node", S.graph.ids[k]);
    model.save_changes();
    clicked = false;
  }

  // ------------------------------------------------------------ interaction
  const hitAt = (e) => {
    const r = canvas.getBoundingClientRect();
    return cview.hit(e.clientX - r.left, e.clientY - r.top);
  };
  /** The element under the pointer (the canvas's events come from its elements). @param {Event} e */
  const targetOf = (e) => /** @type {Element} */ (e.target);
  /** The drawn box or frame (an SVG group) holding an element. @param {Element} target */
  const nodeOf = (target) => /** @type {SVGGElement | null | undefined} */ (target.closest?.(".lk-node, .lk-group"));
  const showTip = (k, e) => tip.show(tipHtml(S.graph, S.rolled, k, trait("metrics") || {}, metrics, S.marks.get(k)), e.clientX, e.clientY);
  attachPanZoom(canvas, view, {
    panned: () => {
      userMoved = true;
      applyView();
      tip.hide();
    },
    zoom: zoomBy,
    hover: (e) => {
      if (S?.canvas) {
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
    click: (e) => {
      if (S?.canvas) {
        const at = hitAt(e);
        if (at && (at.part === "expand" || at.part === "collapse")) toggle(at.k, at.part);
        else if (at) select(at.k);
        return;
      }
      const tg = /** @type {SVGGElement | null | undefined} */ (targetOf(e).closest?.(".lk-toggle"));
      if (tg) {
        toggle(Number(tg.dataset.k), tg.dataset.act);
        return;
      }
      const node = nodeOf(targetOf(e));
      if (node) select(Number(node.dataset.k));
    },
    leave: () => tip.hide(),
  });
  metricSel.addEventListener("change", () => {
    model.set("metric", metricSel.value);
    model.save_changes();
  });
  search.addEventListener("input", () => {
    matchCursor = -1;
    markMatches();
  });
  search.addEventListener("keydown", (e) => {
    if (e.key === "Enter") jumpToMatch();
  });
  depthIn.value = String(model.get("depth"));
  depthIn.addEventListener("change", () => {
    model.set("depth", Number(depthIn.value));
    model.save_changes();
  });

  /** The drawing as an SVG file; a canvas view writes its SVG for the export only. */
  function svgText() {
    if (!S.canvas) return svgFile(svg, S.layout);
    const { graph, vis, layout, rolled } = S;
    gGroups.innerHTML = groupsSvg(graph, vis, layout, rolled, S.marks);
    gNodes.innerHTML = nodesSvg(graph, vis, layout, rolled, S.marks);
    gEdges.innerHTML = edgesSvg(layout, arrowId);
    const out = svgFile(svg, S.layout);
    gGroups.innerHTML = gNodes.innerHTML = gEdges.innerHTML = "";
    return out;
  }
  function exportSvg() {
    if (S) download(`${S.graph.model || "graph"}.svg`, svgText().text, "image/svg+xml");
  }
  async function exportPng() {
    if (!S) return;
    const { text, W, H } = svgText();
    download(`${S.graph.model || "graph"}.png`, await svgToPng(text, W, H));
  }

  const onGraph = () => relayout(true);
  // a selection made elsewhere (the profile, Python) pans here; a click here does not
  let clicked = false;
  const onSelected = () => highlight(!clicked);
  const onExpanded = () => relayout(false);
  const onDepth = () => (depthIn.value = String(model.get("depth")));
  const onHeight = () => {
    root.style.height = `${model.get("height")}px`;
    if (S?.canvas) cview.draw();
  };
  /** @type {[import("./_contract_types").ChangeEvent<Traits>, () => void][]} */
  const listeners = [
    ["change:graph", onGraph],
    ["change:expanded", onExpanded],
    ["change:metrics", recolor],
    ["change:metric", recolor],
    ["change:marks", redraw],
    ["change:selected", onSelected],
    ["change:selected_node", onSelected],
    ["change:depth", onDepth],
    ["change:height", onHeight],
    ["change:instance_metrics", () => highlight()],
    ["change:rolled", () => highlight()],
    ["change:unrolled", () => highlight()],
  ];
  for (const [event, fn] of listeners) model.on(event, fn);
  let lastW = 0;
  const ro = new ResizeObserver(() => {
    const w = canvas.clientWidth;
    if (w === lastW) return;
    lastW = w; // 0 while hidden (a tab): showing it again counts as a resize
    if (!w) return;
    if (!userMoved) placeAgain();
    if (S?.canvas) cview.draw();
    if (pendingReveal !== null) reveal(pendingReveal);
  });
  ro.observe(canvas);
  // the canvas drawing and the minimap read the theme's colours when they paint
  const stopThemeWatch = onThemeSwitch(() => {
    if (S?.canvas) cview.draw();
    minimap.draw();
  });
  relayout(true);
  return () => {
    runner.close();
    ro.disconnect();
    stopThemeWatch();
    for (const [event, fn] of listeners) model.off(event, fn);
  };
}

export default { render };
