// AttentionView front end: a node's k-hop neighbourhood, edges sized and coloured by
// attention weight (one head or the mean). Click a node to pick it; Python sends the
// new neighbourhood (labkit/views/attention.py).
import { inkOn } from "./_shared.js";
import { ensureStyles, h } from "./_ui.js";

const SVG = "http://www.w3.org/2000/svg";
const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#bab0ac"];

function s(tag, attrs = {}) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

/** Weight drawn for an edge: one head's coefficient, or the mean (head = -1). */
export function edgeWeight(edge, head) {
  if (head < 0 || head >= edge.weights.length) return edge.mean;
  return edge.weights[head];
}

/** White-to-red scale for a weight in [0, 1]. */
export function weightColor(w) {
  const t = Math.max(0, Math.min(1, w));
  const r = Math.round(255 - 35 * t);
  const g = Math.round(235 - 200 * t);
  const b = Math.round(220 - 190 * t);
  return `rgb(${r},${g},${b})`;
}

/** Hop of every drawn node (0 for the picked one) from the edge list, in draw order. */
export function nodeHops(view) {
  const hop = new Map([[view.node, 0]]);
  for (const e of view.edges) if (!hop.has(e.src)) hop.set(e.src, e.hop);
  return hop;
}

/** Ring layout: the picked node in the centre, hop k on ring k, children near their parent. */
export function layout(view, radius) {
  const hop = nodeHops(view);
  const pos = new Map([[view.node, { x: 0, y: 0, a: 0 }]]);
  const maxHop = Math.max(0, ...hop.values());
  for (let k = 1; k <= maxHop; k += 1) {
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
 * edge colour scale from the lightest to the darkest drawn weight. */
export function legendItems(view, maxW) {
  const swatch = (color, round) =>
    h("span", { style: `display:inline-block;width:11px;height:11px;background:${color};border-radius:${round ? "50%" : "2px"}` });
  const classes = view.labels ? [...new Set(view.labels.filter((c) => c != null))].sort((a, b) => a - b) : [];
  const items = classes.length
    ? [
        h("span", {}, "node class:"),
        ...classes.map((c) =>
          h(
            "span",
            { class: "lk-att-class", style: "display:inline-flex;gap:3px;align-items:center" },
            swatch(PALETTE[c % PALETTE.length], true),
            String(c),
          ),
        ),
      ]
    : [h("span", {}, "nodes: no class labels (y) given"), swatch("#999999", true)];
  const scale = h("span", {
    style: `display:inline-block;width:80px;height:8px;background:linear-gradient(to right, ${weightColor(0)}, ${weightColor(1)})`,
  });
  items.push(
    h(
      "span",
      { class: "lk-att-scale", style: "display:inline-flex;gap:4px;align-items:center;margin-left:8px" },
      "edge weight 0",
      scale,
      maxW.toFixed(3),
    ),
  );
  return items;
}

/** @typedef {import("./_contract_types").AttentionViewTraits} Traits the synced traits (labkit/views/_contract.py) */
/** @param {import("./_contract_types").RenderContext<Traits>} ctx anywidget's model and element */
function render({ model, el }) {
  ensureStyles();
  const root = h("div", { class: "lk-view lk-attention" });
  const nodeIn = h("input", { type: "number", min: "0", class: "lk-att-pick", style: "width:5em" });
  const hopSel = h("select", { class: "lk-att-hops" });
  const headSel = h("select", { class: "lk-att-head" });
  const info = h("span", { class: "lk-att-info" });
  const toolbar = h(
    "div",
    { class: "lk-toolbar" },
    h("span", {}, "node"),
    nodeIn,
    h("span", {}, "hops"),
    hopSel,
    h("span", {}, "head"),
    headSel,
    h("span", { class: "lk-spacer" }),
    info,
  );
  const canvas = h("div", { class: "lk-canvas" });
  // what the colours mean: node fill = class (y), edge = weight relative to the darkest
  const legend = h("div", {
    class: "lk-att-legend",
    style: "display:flex;flex-wrap:wrap;gap:4px 12px;align-items:center;font-size:12px;padding:2px 6px",
  });
  root.append(toolbar, legend, canvas);
  el.appendChild(root);

  function toolbarState() {
    const view = model.get("view");
    root.style.height = `${model.get("height")}px`;
    nodeIn.max = String(model.get("num_nodes") - 1);
    nodeIn.value = String(model.get("node"));
    hopSel.replaceChildren();
    for (let k = 1; k <= model.get("max_hops"); k += 1) hopSel.append(h("option", { value: String(k) }, String(k)));
    hopSel.value = String(model.get("hops"));
    headSel.replaceChildren(h("option", { value: "-1" }, "mean"));
    const nHeads = Math.min(...(view.heads?.length ? view.heads : [0]));
    for (let i = 0; i < nHeads; i += 1) headSel.append(h("option", { value: String(i) }, String(i)));
    headSel.value = String(model.get("head"));
  }

  function draw() {
    const view = model.get("view");
    const head = model.get("head");
    toolbarState();
    canvas.replaceChildren();
    if (!view?.edges) {
      canvas.append(h("div", { class: "lk-empty" }, "no attention to show"));
      return;
    }
    const radius = 110;
    const pos = layout(view, radius);
    const extent = radius * (Math.max(0, ...[...nodeHops(view).values()]) + 0.6);
    // node size and ids in screen pixels (12 px text), whatever the drawing's scale
    const px = Math.max(120, model.get("height") - 70) / (2 * extent);
    const unit = (pixels) => +(pixels / px).toFixed(2);
    const svg = s("svg", { viewBox: `${-extent} ${-extent} ${2 * extent} ${2 * extent}` });
    const edges = s("g", { class: "lk-att-edges" });
    const nodes = s("g", { class: "lk-att-nodes" });
    // far hops first, so the picked node's own edges lie on top
    const ordered = [...view.edges].sort((a, b) => b.hop - a.hop);
    // colour and width relative to the largest drawn weight, so small graphs and big
    // neighbourhoods (many weights near 1/degree) both show contrast
    const maxW = Math.max(1e-12, ...ordered.map((e) => edgeWeight(e, head)));
    for (const e of ordered) {
      const w = edgeWeight(e, head);
      const rel = w / maxW;
      const a = pos.get(e.src);
      const b = pos.get(e.dst);
      if (!a || !b) continue;
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
      const line =
        e.src === e.dst
          ? s("circle", { ...attrs, cx: a.x + 14 * Math.cos(a.a || -Math.PI / 2), cy: a.y + 14 * Math.sin(a.a || -Math.PI / 2), r: 9 })
          : s("line", { ...attrs, x1: a.x, y1: a.y, x2: b.x, y2: b.y });
      const title = s("title");
      const ws = e.weights.map((x) => x.toFixed(3)).join(", ");
      title.textContent = `${e.src} \u2192 ${e.dst} (hop ${e.hop}, layer ${e.layer}): heads ${ws}; mean ${e.mean.toFixed(3)}`;
      line.append(title);
      edges.append(line);
    }
    view.nodes.forEach((id, i) => {
      const p = pos.get(id);
      if (!p) return;
      const label = view.labels ? view.labels[i] : null;
      const g = s("g", { class: "lk-att-node", "data-node": id, transform: `translate(${p.x},${p.y})`, style: "cursor:pointer" });
      const fill = label == null ? "#999999" : PALETTE[label % PALETTE.length];
      g.append(
        s("circle", {
          r: unit(id === view.node ? 15 : 11),
          fill,
          style: `stroke:${id === view.node ? "var(--lk-fg)" : "var(--lk-bg)"}`,
          "stroke-width": 2,
        }),
      );
      // black or white, whichever reads on the class colour (WCAG AA)
      const text = s("text", {
        class: "lk-att-id",
        "text-anchor": "middle",
        dy: "0.35em",
        "font-size": unit(id >= 100 ? 10 : 12),
        fill: inkOn(fill),
        "pointer-events": "none",
      });
      text.textContent = String(id);
      g.append(text);
      const title = s("title");
      title.textContent = `node ${id}${label == null ? "" : `, class ${label}`}: click to pick`;
      g.append(title);
      g.addEventListener("click", () => {
        if (id === model.get("node")) return;
        model.set("node", id);
        model.save_changes();
      });
      nodes.append(g);
    });
    svg.append(edges, nodes);
    canvas.append(svg);
    legend.replaceChildren(...legendItems(view, maxW));
    const sums = [];
    for (const e of view.edges) {
      if (e.hop !== 1) continue;
      e.weights.forEach((w, k) => {
        sums[k] = (sums[k] || 0) + w;
      });
    }
    const incoming = view.edges.filter((e) => e.hop === 1).length;
    info.textContent = `node ${view.node}: ${incoming} incoming edges, ${view.nodes.length} nodes in ${view.hops} hops; head sums ${sums.map((x) => x.toFixed(3)).join(" / ")}; darkest edge ${maxW.toFixed(3)}`;
  }

  nodeIn.addEventListener("change", () => {
    const v = Number.parseInt(nodeIn.value, 10);
    if (Number.isInteger(v) && v >= 0 && v < model.get("num_nodes")) {
      model.set("node", v);
      model.save_changes();
    } else {
      nodeIn.value = String(model.get("node"));
    }
  });
  hopSel.addEventListener("change", () => {
    model.set("hops", Number(hopSel.value));
    model.save_changes();
  });
  headSel.addEventListener("change", () => {
    model.set("head", Number(headSel.value));
    model.save_changes();
    draw();
  });
  model.on("change:view", draw);
  model.on("change:head", draw);
  model.on("change:height", draw);
  draw();
}

export default { render };
