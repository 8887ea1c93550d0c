// AttentionView front end: a node's k-hop neighbourhood, edges sized and coloured by
// attention weight (one head or the mean). Click a node to pick it; Python sends the
// new neighbourhood (labkit/views/attention.py).
// The view's state is its traits (AttentionState: the picked node, hops, head, height);
// scene() draws it as plain data (widgets/test/attention.test.mjs), drawSvg makes the SVG of
// that, and render wires the toolbar and the clicks.
import { inkOn } from "./_shared.js";
import { ensureStyles, h } from "./_ui.js";

/** @typedef {import("./_contract_types").AttentionPayload} View a node's neighbourhood (`view` trait) */
/** @typedef {import("./_contract_types").AttentionEdge} Edge */
/** @typedef {import("./_contract_types").AttentionViewTraits} Traits the synced traits (labkit/views/_contract.py) */
/** @typedef {Pick<Traits, "node" | "hops" | "head" | "height" | "num_nodes" | "max_hops">} AttentionState what the user sees */
/** @typedef {{x: number, y: number, a: number}} Place a node's place: drawing units, and its angle */

const SVG = "http://www.w3.org/2000/svg";
const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#bab0ac"];

/** An SVG element with attributes. @param {string} tag @param {Record<string, string | number>} [attrs] */
function s(tag, attrs = {}) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

/** Weight drawn for an edge: one head's coefficient, or the mean (head = -1). @param {Pick<Edge, "weights" | "mean">} edge @param {number} head */
export function edgeWeight(edge, head) {
  if (head < 0 || head >= edge.weights.length) return edge.mean;
  return edge.weights[head];
}

/** White-to-red scale for a weight in [0, 1]. @param {number} w */
export function weightColor(w) {
  const t = Math.max(0, Math.min(1, w));
  const r = Math.round(255 - 35 * t);
  const g = Math.round(235 - 200 * t);
  const b = Math.round(220 - 190 * t);
  return `rgb(${r},${g},${b})`;
}

/** Hop of every drawn node (0 for the picked one) from the edge list, in draw order. @param {Pick<View, "node" | "edges">} view */
export function nodeHops(view) {
  /** @type {Map<number, number>} */
  const hop = new Map([[view.node, 0]]);
  for (const e of view.edges) if (!hop.has(e.src)) hop.set(e.src, e.hop);
  return hop;
}

/** Ring layout: the picked node in the centre, hop k on ring k, children near their parent.
 * @param {Pick<View, "node" | "edges">} view @param {number} radius */
export function layout(view, radius) {
  const hop = nodeHops(view);
  /** @type {Map<number, Place>} */
  const pos = new Map([[view.node, { x: 0, y: 0, a: 0 }]]);
  const maxHop = Math.max(0, ...hop.values());
  for (let k = 1; k <= maxHop; k += 1) {
    /** @type {{id: number, parent: number}[]} */
    const ring = [];
    for (const e of view.edges) {
      if (e.hop === k && hop.get(e.src) === k && !ring.some((r) => r.id === e.src)) {
        ring.push({ id: e.src, parent: pos.get(e.dst)?.a ?? 0 });
      }
    }
    ring.sort((p, q) => p.parent - q.parent);
    ring.forEach((r, i) => {
      const a = (2 * Math.PI * i) / Math.max(ring.length, 1) + (k > 1 ? ring[0].parent : -Math.PI / 2);
      pos.set(r.id, { x: radius * k * Math.cos(a), y: radius * k * Math.sin(a), a });
    });
  }
  return pos;
}

/** The legend's entries: one swatch per node class drawn (or "no classes"), and the
 * edge colour scale from the lightest to the darkest drawn weight.
 * @param {Pick<View, "labels">} view @param {number} maxW */
export function legendItems(view, maxW) {
  /** @param {string} color @param {boolean} round */
  const swatch = (color, round) => h("span", { class: `lk-att-swatch${round ? " lk-att-round" : ""}`, style: `background:${color}` });
  const classes = view.labels ? [...new Set(view.labels.filter((c) => c != null))].sort((a, b) => a - b) : [];
  const items = classes.length
    ? [
        h("span", {}, "node class:"),
        ...classes.map((c) => h("span", { class: "lk-att-class" }, swatch(PALETTE[c % PALETTE.length], true), String(c))),
      ]
    : [h("span", {}, "nodes: no class labels (y) given"), swatch("#999999", true)];
  const scale = h("span", { class: "lk-att-bar", style: `background:linear-gradient(to right, ${weightColor(0)}, ${weightColor(1)})` });
  items.push(h("span", { class: "lk-att-scale" }, "edge weight 0", scale, maxW.toFixed(3)));
  return items;
}

/**
 * The drawing of a neighbourhood as plain data: the viewBox's half extent, the edges (far
 * hops first, so the picked node's own lie on top; colour and width relative to the largest
 * drawn weight, so small graphs and big neighbourhoods alike show contrast), the nodes, and
 * the info line. Node size and ids are in screen pixels (12 px text), whatever the scale.
 * @param {View} view @param {number} head @param {number} height the view's height in pixels
 */
export function scene(view, head, height) {
  const radius = 110;
  const pos = layout(view, radius);
  const extent = radius * (Math.max(0, ...[...nodeHops(view).values()]) + 0.6);
  const px = Math.max(120, height - 70) / (2 * extent);
  /** @param {number} pixels */
  const unit = (pixels) => +(pixels / px).toFixed(2);
  const ordered = [...view.edges].sort((a, b) => b.hop - a.hop);
  const maxW = Math.max(1e-12, ...ordered.map((e) => edgeWeight(e, head)));
  const edges = ordered.flatMap((e) => {
    const a = pos.get(e.src);
    const b = pos.get(e.dst);
    if (!a || !b) return [];
    const w = edgeWeight(e, head);
    const rel = w / maxW;
    const ws = e.weights.map((x) => x.toFixed(3)).join(", ");
    /** @type {Record<string, string | number>} */
    const attrs = {
      class: "lk-att-edge",
      "data-src": e.src,
      "data-dst": e.dst,
      "data-hop": e.hop,
      "data-weight": w.toFixed(6),
      stroke: weightColor(rel),
      "stroke-width": (0.6 + 5 * rel).toFixed(2),
      fill: "none",
      opacity: e.hop === 1 ? 1 : 0.55,
    };
    const ang = a.a || -Math.PI / 2;
    /** @type {Record<string, number>} */
    const shape =
      e.src === e.dst ? { cx: a.x + 14 * Math.cos(ang), cy: a.y + 14 * Math.sin(ang), r: 9 } : { x1: a.x, y1: a.y, x2: b.x, y2: b.y };
    const title = `${e.src} \u2192 ${e.dst} (hop ${e.hop}, layer ${e.layer}): heads ${ws}; mean ${e.mean.toFixed(3)}`;
    return [{ tag: e.src === e.dst ? "circle" : "line", attrs: { ...attrs, ...shape }, title }];
  });
  const nodes = view.nodes.flatMap((id, i) => {
    const p = pos.get(id);
    if (!p) return [];
    const label = view.labels ? view.labels[i] : null;
    const fill = label == null ? "#999999" : PALETTE[label % PALETTE.length];
    const picked = id === view.node;
    return [
      {
        id,
        p,
        fill,
        r: unit(picked ? 15 : 11),
        picked,
        fontSize: unit(id >= 100 ? 10 : 12),
        title: `node ${id}${label == null ? "" : `, class ${label}`}: click to pick`,
      },
    ];
  });
  return { extent, edges, nodes, maxW, info: infoText(view, maxW) };
}

/** The toolbar's line: incoming edges, nodes, the heads' sums into the picked node. @param {View} view @param {number} maxW */
export function infoText(view, maxW) {
  /** @type {number[]} */
  const sums = [];
  for (const e of view.edges) {
    if (e.hop !== 1) continue;
    e.weights.forEach((w, k) => {
      sums[k] = (sums[k] || 0) + w;
    });
  }
  const incoming = view.edges.filter((e) => e.hop === 1).length;
  return `node ${view.node}: ${incoming} incoming edges, ${view.nodes.length} nodes in ${view.hops} hops; head sums ${sums.map((x) => x.toFixed(3)).join(" / ")}; darkest edge ${maxW.toFixed(3)}`;
}

/**
 * The SVG of a scene; a click on a node calls pick with its id.
 * @param {ReturnType<typeof scene>} sc @param {(id: number) => void} pick
 */
function drawSvg(sc, pick) {
  const { extent } = sc;
  const svg = s("svg", { viewBox: `${-extent} ${-extent} ${2 * extent} ${2 * extent}` });
  const edges = s("g", { class: "lk-att-edges" });
  const nodes = s("g", { class: "lk-att-nodes" });
  for (const e of sc.edges) {
    const line = s(e.tag, e.attrs);
    const title = s("title");
    title.textContent = e.title;
    line.append(title);
    edges.append(line);
  }
  for (const n of sc.nodes) {
    const g = s("g", { class: "lk-att-node", "data-node": n.id, transform: `translate(${n.p.x},${n.p.y})` });
    const stroke = `stroke:${n.picked ? "var(--lk-fg)" : "var(--lk-bg)"}`;
    g.append(s("circle", { r: n.r, fill: n.fill, style: stroke, "stroke-width": 2 }));
    // black or white, whichever reads on the class colour (WCAG AA)
    const attrs = {
      class: "lk-att-id",
      "text-anchor": "middle",
      dy: "0.35em",
      "font-size": n.fontSize,
      fill: inkOn(n.fill),
      "pointer-events": "none",
    };
    const text = s("text", attrs);
    text.textContent = String(n.id);
    const title = s("title");
    title.textContent = n.title;
    g.append(text, title);
    g.addEventListener("click", () => pick(n.id));
    nodes.append(g);
  }
  svg.append(edges, nodes);
  return svg;
}

/** The toolbar's controls. */
function toolbarOf() {
  const nodeIn = /** @type {HTMLInputElement} */ (h("input", { type: "number", min: "0", class: "lk-att-pick" }));
  const hopSel = /** @type {HTMLSelectElement} */ (h("select", { class: "lk-att-hops" }));
  const headSel = /** @type {HTMLSelectElement} */ (h("select", { class: "lk-att-head" }));
  const info = h("span", { class: "lk-att-info" });
  const bar = h(
    "div",
    { class: "lk-toolbar" },
    h("span", {}, "node"),
    nodeIn,
    h("span", {}, "hops"),
    hopSel,
    h("span", {}, "head"),
    headSel,
  );
  bar.append(h("span", { class: "lk-spacer" }), info);
  return { bar, nodeIn, hopSel, headSel, info };
}

/** The toolbar showing a state. @param {ReturnType<typeof toolbarOf>} t @param {AttentionState} st @param {View} view */
function syncToolbar(t, st, view) {
  t.nodeIn.max = String(st.num_nodes - 1);
  t.nodeIn.value = String(st.node);
  t.hopSel.replaceChildren();
  for (let k = 1; k <= st.max_hops; k += 1) t.hopSel.append(h("option", { value: String(k) }, String(k)));
  t.hopSel.value = String(st.hops);
  t.headSel.replaceChildren(h("option", { value: "-1" }, "mean"));
  const nHeads = Math.min(...(view?.heads?.length ? view.heads : [0]));
  for (let i = 0; i < nHeads; i += 1) t.headSel.append(h("option", { value: String(i) }, String(i)));
  t.headSel.value = String(st.head);
}

/** @param {import("./_contract_types").RenderContext<Traits>} ctx anywidget's model and element */
function render({ model, el }) {
  ensureStyles();
  const root = h("div", { class: "lk-view lk-attention" });
  const tb = toolbarOf();
  const canvas = h("div", { class: "lk-canvas" });
  // what the colours mean: node fill = class (y), edge = weight relative to the darkest
  const legend = h("div", { class: "lk-att-legend" });
  root.append(tb.bar, legend, canvas);
  el.appendChild(root);
  /** @returns {AttentionState} */
  const state = () => ({
    node: model.get("node"),
    hops: model.get("hops"),
    head: model.get("head"),
    height: model.get("height"),
    num_nodes: model.get("num_nodes"),
    max_hops: model.get("max_hops"),
  });
  /** @param {number} id */
  const pick = (id) => {
    if (id === model.get("node")) return;
    model.set("node", id);
    model.save_changes();
  };

  function draw() {
    const view = model.get("view");
    const st = state();
    root.style.height = `${st.height}px`;
    syncToolbar(tb, st, view);
    canvas.replaceChildren();
    if (!view?.edges) {
      canvas.append(h("div", { class: "lk-empty" }, "no attention to show"));
      return;
    }
    const sc = scene(view, st.head, st.height);
    canvas.append(drawSvg(sc, pick));
    legend.replaceChildren(...legendItems(view, sc.maxW));
    tb.info.textContent = sc.info;
  }

  tb.nodeIn.addEventListener("change", () => {
    const v = Number.parseInt(tb.nodeIn.value, 10);
    if (Number.isInteger(v) && v >= 0 && v < model.get("num_nodes")) {
      model.set("node", v);
      model.save_changes();
    } else {
      tb.nodeIn.value = String(model.get("node"));
    }
  });
  tb.hopSel.addEventListener("change", () => {
    model.set("hops", Number(tb.hopSel.value));
    model.save_changes();
  });
  tb.headSel.addEventListener("change", () => {
    model.set("head", Number(tb.headSel.value));
    model.save_changes();
    draw();
  });
  model.on("change:view", draw);
  model.on("change:head", draw);
  model.on("change:height", draw);
  draw();
}

export default { render };
