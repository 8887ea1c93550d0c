// GraphView front end: nested layered graph of a labkit Trace (anywidget ES module).
import { fmtBytes, fmtCount, fmtTime } from "./_shared.js";
import {
  boxSize,
  childrenOf,
  colorScale,
  expandedIndices,
  fitScale,
  MIN_SCALE,
  labelOf,
  layoutInput,
  liftEdges,
  NEUTRAL,
  rolledInfo,
  selectionOf,
  textColor,
  visibleNodes,
} from "./_graphcore.js";
import { edgePoints, layoutNested, pathOf } from "./_layout.js";
import { makeMinimap } from "./_minimap.js";
import { download, ensureStyles, esc, h, svgToPng, tooltip } from "./_ui.js";

export const METRICS = {
  fwd_time: ["forward time", fmtTime],
  bwd_time: ["backward time", fmtTime],
  flops: ["FLOPs (fwd + bwd)", fmtCount],
  params: ["parameters", fmtCount],
  activations: ["activation memory", fmtBytes],
};
const SVG_NS = "http://www.w3.org/2000/svg";
// theme tokens (see _ui.js) with the Light values as fallbacks for exported SVG files
const SVG_STYLE = `
.lk-edge { fill: none; stroke: var(--lk-edge, #9aa3ad); stroke-width: 1.2; }
.lk-arrow { fill: var(--lk-edge, #9aa3ad); }
.lk-edge.lk-hot { stroke: var(--lk-accent2, #d9480f); stroke-width: 2; }
.lk-node rect.lk-box { stroke: var(--lk-fg2, #6b7280); stroke-width: 1; }
.lk-node.lk-kind-p rect.lk-box { rx: 12; }
.lk-node.lk-kind-i rect.lk-box, .lk-node.lk-kind-o rect.lk-box { stroke-dasharray: 3 2; }
.lk-node rect.lk-stack { fill: var(--lk-bg, #fff); stroke: var(--lk-fg2, #6b7280); }
.lk-node text, .lk-group text { font: 11px sans-serif; text-anchor: middle; pointer-events: none; }
.lk-node text.lk-sub { font-size: 9.5px; }
.lk-node.lk-selected rect.lk-box { stroke: var(--lk-accent, #1c7ed6); stroke-width: 3; }
.lk-node.lk-match rect.lk-box { stroke: #ae3ec9; stroke-width: 3; }
.lk-group rect.lk-frame { fill: rgba(120,130,150,.06); stroke: var(--lk-border, #aab); stroke-width: 1; }
.lk-group.lk-selected rect.lk-frame { stroke: var(--lk-accent, #1c7ed6); stroke-width: 2.5; }
.lk-group text.lk-glabel { text-anchor: start; fill: var(--lk-fg, #222); font-weight: 600; }
.lk-toggle rect { fill: var(--lk-bg, #fff); stroke: var(--lk-fg2, #888); }
.lk-toggle text { font: bold 11px monospace !important; fill: var(--lk-fg, #222); }
.lk-toggle { cursor: pointer; }
.lk-node, .lk-group { cursor: pointer; }
`;

function svgEl(tag, attrs = {}) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

function render({ model, el }) {
  const t0 = performance.now();
  ensureStyles();
  const root = h("div", { class: "lk-view lk-graph" });
  root.style.height = `${model.get("height")}px`;
  const metricSel = h("select", { title: "colour by", class: "lk-metric" });
  for (const [k, [label]] of Object.entries(METRICS)) metricSel.append(h("option", { value: k }, label));
  const search = h("input", { type: "search", placeholder: "search modules / ops", class: "lk-search", size: "18" });
  const depthIn = h("input", { type: "number", min: "0", max: "64", class: "lk-depth", title: "expand to depth", style: "width:3.5em" });
  const legend = h("div", { class: "lk-legend" });
  const btn = (text, title, fn, cls = "") => h("button", { title, onclick: fn, class: cls }, text);
  const toolbar = h(
    "div",
    { class: "lk-toolbar" },
    h("span", {}, "colour"),
    metricSel,
    legend,
    h("span", { class: "lk-spacer" }),
    search,
    h("span", {}, "depth"),
    depthIn,
    btn("−", "zoom out", () => zoomBy(1 / 1.25)),
    btn("+", "zoom in", () => zoomBy(1.25)),
    btn("Fit", "fit to view", () => fit(), "lk-fit"),
    btn("SVG", "export SVG", () => exportSvg()),
    btn("PNG", "export PNG", () => exportPng()),
  );
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
  root.append(toolbar, canvas);
  el.appendChild(root);
  const tip = tooltip(canvas);

  let S = null; // current drawing state
  const view = { x: 0, y: 0, k: 1 };
  let userMoved = false;
  let matchCursor = -1;
  let anchor = null; // {id, sx, sy}: a toggled box to keep in place across a relayout
  const minimap = makeMinimap(canvas, () => S, view, (x, y) => {
    view.x = x;
    view.y = y;
    userMoved = true;
    applyView();
  });

  const applyView = () => {
    viewport.setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.k})`);
    root.dataset.scale = view.k.toFixed(4);
    minimap.draw();
  };

  // Fit the graph, but never below a legible text size: a bigger graph opens at
  // MIN_SCALE, top centred, and is explored by panning (the minimap shows where).
  function fit() {
    if (!S) return;
    const cw = canvas.clientWidth || 800;
    const ch = canvas.clientHeight || 500;
    const W = S.layout.width + 40;
    const H = S.layout.height + 40;
    view.k = fitScale(cw, ch, W, H);
    view.x = (cw - S.layout.width * view.k) / 2;
    view.y = Math.max(20 * view.k, (ch - S.layout.height * view.k) / 2);
    if (S.layout.height * view.k + 40 > ch) view.y = 20;
    userMoved = false;
    applyView();
  }

  function zoomBy(f, cx, cy) {
    const cw = canvas.clientWidth;
    const ch = canvas.clientHeight;
    cx = cx ?? cw / 2;
    cy = cy ?? ch / 2;
    const k = Math.min(8, Math.max(0.02, view.k * f));
    view.x = cx - ((cx - view.x) * k) / view.k;
    view.y = cy - ((cy - view.y) * k) / view.k;
    view.k = k;
    userMoved = true;
    applyView();
  }

  function centerOn(k) {
    const p = S && S.layout.pos.get(k);
    if (!p) return;
    const z = Math.max(view.k, 1);
    view.k = z;
    view.x = canvas.clientWidth / 2 - (p.x + p.w / 2) * z;
    view.y = canvas.clientHeight / 2 - (p.y + p.h / 2) * z;
    userMoved = true;
    applyView();
  }

  function relayout(refit) {
    const graph = model.get("graph");
    if (!graph || !graph.ids) return;
    const start = performance.now();
    const { kids } = childrenOf(graph);
    const rolled = rolledInfo(graph);
    const expanded = expandedIndices(graph, model.get("expanded") || []);
    const vis = visibleNodes(graph, expanded);
    const edges = liftEdges(graph, vis.boxOf);
    const input = layoutInput(graph, vis, edges);
    const sizes = new Map();
    const size = (k) => {
      if (!sizes.has(k)) sizes.set(k, boxSize(labelOf(graph, k, rolled), subOf(graph, k)));
      return sizes.get(k);
    };
    const layout = layoutNested(input, size);
    S = { graph, kids, rolled, expanded, vis, edges, input, layout, els: new Map() };
    draw();
    recolor();
    highlight();
    markMatches();
    const kept = anchor && !refit ? S.graph.ids.indexOf(anchor.id) : -1;
    const at = kept >= 0 ? S.layout.pos.get(S.vis.boxOf[kept]) : null;
    if (at) {
      view.x = anchor.sx - at.x * view.k;
      view.y = anchor.sy - at.y * view.k;
      applyView();
    } else if (refit || !userMoved) fit();
    anchor = null;
    if (refit && model.get("selected") != null) highlight(true); // opened with a selection
    const ms = performance.now() - start;
    root.dataset.boxes = String(vis.boxes.length);
    root.dataset.groups = String(vis.groups.length);
    root.dataset.layoutMs = ms.toFixed(1);
    requestAnimationFrame(() => {
      root.dataset.laidOut = String(Date.now());
      root.dataset.sinceRenderMs = (performance.now() - t0).toFixed(1);
    });
  }

  function subOf(graph, k) {
    const kind = graph.kind[k];
    if (kind === "m") return graph.type[k];
    const outs = graph.outs[k];
    if (kind === "p" || kind === "i") return outs.length ? graph.tensors[outs[0]].split(" ")[0] : kind === "p" ? "op" : "";
    const ins = graph.ins[k];
    return ins.length ? graph.tensors[ins[0]].split(" ")[0] : "";
  }

  function draw() {
    const { graph, vis, layout, rolled, edges, input } = S;
    let gh = "";
    for (const g of vis.groups) {
      const p = layout.pos.get(g);
      const label = `${labelOf(graph, g, rolled)} · ${graph.type[g]}`;
      gh +=
        `<g class="lk-group" data-k="${g}" transform="translate(${p.x.toFixed(1)},${p.y.toFixed(1)})">` +
        `<rect class="lk-frame" width="${p.w.toFixed(1)}" height="${p.h.toFixed(1)}" rx="6"/>` +
        `<text class="lk-glabel" x="20" y="15">${esc(label)}</text>` +
        `<g class="lk-toggle" data-k="${g}" data-act="collapse"><rect x="4" y="5" width="12" height="12" rx="2"/>` +
        `<text x="10" y="15">−</text></g></g>`;
    }
    gGroups.innerHTML = gh;
    let nh = "";
    for (const k of vis.boxes) {
      const p = layout.pos.get(k);
      const label = labelOf(graph, k, rolled);
      const stacked = rolled.count.has(k);
      nh +=
        `<g class="lk-node lk-kind-${graph.kind[k]}" data-k="${k}" transform="translate(${p.x.toFixed(1)},${p.y.toFixed(1)})">` +
        (stacked ? `<rect class="lk-stack" x="4" y="-4" width="${p.w}" height="${p.h}" rx="4"/>` : "") +
        `<rect class="lk-box" width="${p.w}" height="${p.h}" rx="4"/>` +
        `<text class="lk-label" x="${p.w / 2}" y="15">${esc(label)}</text>` +
        `<text class="lk-sub" x="${p.w / 2}" y="28">${esc(subOf(graph, k))}</text>` +
        (vis.hasKids[k]
          ? `<g class="lk-toggle" data-k="${k}" data-act="expand"><rect x="${p.w - 15}" y="3" width="12" height="12" rx="2"/>` +
            `<text x="${p.w - 9}" y="13">+</text></g>`
          : "") +
        `</g>`;
    }
    gNodes.innerHTML = nh;
    let eh = "";
    edges.forEach(([s, d, t], i) => {
      const pts = edgePoints(layout, input.route[i], s, d);
      eh += `<path class="lk-edge" data-e="${i}" d="${pathOf(pts)}" marker-end="url(#lk-arrow)"/>`;
    });
    gEdges.innerHTML =
      `<defs><marker id="lk-arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" orient="auto">` +
      `<path class="lk-arrow" d="M0,0L8,4L0,8z"/></marker></defs>` +
      eh;
    for (const node of gNodes.children) S.els.set(Number(node.dataset.k), node);
    for (const node of gGroups.children) S.els.set(Number(node.dataset.k), node);
  }

  function recolor() {
    if (!S) return;
    const metric = model.get("metric");
    metricSel.value = metric;
    const values = (model.get("metrics") || {})[metric] || [];
    const scale = colorScale(S.vis.boxes.map((k) => values[k] || 0));
    for (const k of S.vis.boxes) {
      const node = S.els.get(k);
      if (!node) continue;
      const fill = scale.color(values[k] || 0);
      // nothing recorded: the theme's own box colours; a heat colour: black or white ink
      const neutral = fill === NEUTRAL;
      node.querySelector("rect.lk-box").style.fill = neutral ? "var(--lk-bg2, #eee)" : fill;
      const ink = neutral ? "var(--lk-fg, #222)" : textColor(fill);
      for (const t of node.querySelectorAll("text.lk-label, text.lk-sub")) t.style.fill = ink;
    }
    const fmt = METRICS[metric][1];
    const stops = [0, 0.25, 0.5, 0.75, 1].map((t) => scale.at(t)).join(",");
    legend.innerHTML = scale.max
      ? `<span>${esc(fmt(scale.min))}</span><span class="lk-bar" style="background:linear-gradient(90deg,${stops})"></span><span>${esc(fmt(scale.max))}</span>${scale.log ? "<span>(log)</span>" : ""}`
      : `<span>no ${esc(METRICS[metric][0])} recorded</span>`;
  }

  function highlight(pan = false) {
    if (!S) return;
    for (const node of root.querySelectorAll(".lk-selected")) node.classList.remove("lk-selected");
    const sel = model.get("selected");
    if (sel === null || sel === undefined) return;
    const { graph, vis } = S;
    const selId = model.get("selected_node");
    const hits = [];
    for (let k = 0; k < graph.ids.length; k++) {
      if (graph.ids[k] === selId && graph.name[k] === sel) hits.length = 0, hits.push(k);
    }
    if (!hits.length) for (let k = 0; k < graph.ids.length; k++) if (graph.kind[k] === "m" && graph.name[k] === sel) hits.push(k);
    for (const k of hits) {
      const node = S.els.get(vis.boxOf[k]);
      if (node) node.classList.add("lk-selected");
    }
    if (hits.length && pan) reveal(vis.boxOf[hits[0]]);
  }

  /** Pan (and zoom in to a legible size) so box k is in sight; no move when it is. */
  let pendingReveal = null; // a node to show once a hidden view (a tab) gets a size
  function reveal(k) {
    const p = S && S.layout.pos.get(k);
    if (!p) return;
    const cw = canvas.clientWidth;
    const ch = canvas.clientHeight;
    if (!cw || !ch) {
      pendingReveal = k;
      return;
    }
    pendingReveal = null;
    const x0 = view.x + p.x * view.k;
    const y0 = view.y + p.y * view.k;
    const inside = x0 >= 0 && y0 >= 0 && x0 + p.w * view.k <= cw && y0 + p.h * view.k <= ch;
    if (inside && view.k >= MIN_SCALE) return;
    centerOn(k);
  }

  function matches(q) {
    if (!S || !q) return [];
    const { graph } = S;
    q = q.toLowerCase();
    const out = [];
    for (let k = 0; k < graph.ids.length; k++) {
      if (graph.name[k].toLowerCase().includes(q) || graph.type[k].toLowerCase().includes(q)) out.push(k);
    }
    return out;
  }

  function markMatches() {
    if (!S) return;
    for (const node of root.querySelectorAll(".lk-match")) node.classList.remove("lk-match");
    const q = search.value.trim();
    let n = 0;
    for (const k of matches(q)) {
      const node = S.els.get(S.vis.boxOf[k]);
      if (node && S.vis.boxOf[k] === k) {
        node.classList.add("lk-match");
        n++;
      }
    }
    search.title = q ? `${n} drawn matches; Enter jumps (expanding as needed)` : "";
  }

  function jumpToMatch() {
    const list = matches(search.value.trim());
    if (!list.length) return;
    matchCursor = (matchCursor + 1) % list.length;
    const k = list[matchCursor];
    const { graph } = S;
    const need = [];
    for (let p = graph.parent[k]; p >= 0; p = graph.parent[p]) if (!S.expanded.has(p)) need.push(graph.ids[p]);
    if (need.length) {
      model.set("expanded", [...(model.get("expanded") || []), ...need]);
      model.save_changes();
    }
    centerOn(k);
  }

  function toggle(k, act) {
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

  function tipHtml(k) {
    const { graph, rolled } = S;
    const metrics = model.get("metrics") || {};
    const kindName = { i: "input", o: "output", m: "module", p: "op" }[graph.kind[k]];
    const path = graph.kind[k] === "m" ? graph.name[k] || `(root) ${graph.model || ""}` : graph.name[k];
    const tens = (list) => list.map((t) => esc(graph.tensors[t])).join(", ") || "-";
    let html = `<div><b>${esc(path)}</b> <span class="lk-tip-k">${esc(graph.type[k])} · ${kindName}</span></div>`;
    if (rolled.count.has(k)) html += `<div>${esc(rolled.name.get(k))}: ${rolled.count.get(k)} identical calls, figures summed</div>`;
    if (graph.total_runs > 1 && graph.runs) html += `<div>ran in ${graph.runs[k]} of ${graph.total_runs} merged runs; figures are per-run means</div>`;
    html += `<div><span class="lk-tip-k">in:</span> ${tens(graph.ins[k])}</div>`;
    html += `<div><span class="lk-tip-k">out:</span> ${tens(graph.outs[k])}</div>`;
    for (const [m, [label, fmt]] of Object.entries(METRICS)) {
      const v = (metrics[m] || [])[k];
      if (v) html += `<div><span class="lk-tip-k">${esc(label)}:</span> ${esc(fmt(v))}</div>`;
    }
    return html;
  }

  // ------------------------------------------------------------ interaction
  const nodeOf = (target) => target.closest && target.closest(".lk-node, .lk-group");
  let drag = null;
  const onDown = (e) => {
    if (e.button !== 0) return;
    drag = { x: e.clientX, y: e.clientY, vx: view.x, vy: view.y, moved: false };
  };
  const onMove = (e) => {
    if (drag && (e.buttons & 1) === 1) {
      const dx = e.clientX - drag.x;
      const dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      if (drag.moved) {
        canvas.classList.add("lk-panning");
        view.x = drag.vx + dx;
        view.y = drag.vy + dy;
        userMoved = true;
        applyView();
        tip.hide();
        return;
      }
    }
    const node = nodeOf(e.target);
    if (node && node.classList.contains("lk-node")) tip.show(tipHtml(Number(node.dataset.k)), e.clientX, e.clientY);
    else if (node && e.target.closest(".lk-glabel, .lk-frame") && e.offsetY !== undefined) tip.show(tipHtml(Number(node.dataset.k)), e.clientX, e.clientY);
    else tip.hide();
  };
  const onUp = () => {
    canvas.classList.remove("lk-panning");
  };
  const onClick = (e) => {
    if (drag && drag.moved) {
      drag = null;
      return;
    }
    drag = null;
    const tg = e.target.closest && e.target.closest(".lk-toggle");
    if (tg) {
      toggle(Number(tg.dataset.k), tg.dataset.act);
      return;
    }
    const node = nodeOf(e.target);
    if (node) select(Number(node.dataset.k));
  };
  const onWheel = (e) => {
    e.preventDefault();
    const r = canvas.getBoundingClientRect();
    zoomBy(Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
  };
  canvas.addEventListener("pointerdown", onDown);
  canvas.addEventListener("pointermove", onMove);
  canvas.addEventListener("pointerup", onUp);
  canvas.addEventListener("pointerleave", () => tip.hide());
  canvas.addEventListener("click", onClick);
  canvas.addEventListener("wheel", onWheel, { passive: false });
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
  depthIn.value = model.get("depth");
  depthIn.addEventListener("change", () => {
    model.set("depth", Number(depthIn.value));
    model.save_changes();
  });

  function svgText() {
    const clone = svg.cloneNode(true);
    const W = S.layout.width + 40;
    const H = S.layout.height + 40;
    clone.setAttribute("xmlns", SVG_NS);
    clone.setAttribute("width", W);
    clone.setAttribute("height", H);
    clone.setAttribute("viewBox", `0 0 ${W} ${H}`);
    clone.querySelector(".lk-viewport").setAttribute("transform", "translate(20,20)");
    return { text: new XMLSerializer().serializeToString(clone), W, H };
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
  const onDepth = () => (depthIn.value = model.get("depth"));
  const onHeight = () => (root.style.height = `${model.get("height")}px`);
  const listeners = [
    ["change:graph", onGraph],
    ["change:expanded", onExpanded],
    ["change:metrics", recolor],
    ["change:metric", recolor],
    ["change:selected", onSelected],
    ["change:selected_node", onSelected],
    ["change:depth", onDepth],
    ["change:height", onHeight],
  ];
  for (const [event, fn] of listeners) model.on(event, fn);
  let lastW = 0;
  const ro = new ResizeObserver(() => {
    const w = canvas.clientWidth;
    if (w === lastW) return;
    lastW = w; // 0 while hidden (a tab): showing it again counts as a resize
    if (!w) return;
    if (!userMoved) fit();
    if (pendingReveal !== null) reveal(pendingReveal);
  });
  ro.observe(canvas);
  relayout(true);
  return () => {
    ro.disconnect();
    for (const [event, fn] of listeners) model.off(event, fn);
  };
}

export default { render };
