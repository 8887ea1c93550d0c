// The GraphView drawn on a canvas, for big graphs (thousands of boxes), where SVG's DOM
// makes every pan and zoom re-render tens of thousands of elements. Same layout, labels,
// colours, frames, rolled stacks, toggles, selection, matches and break marks as the SVG
// drawing (_graph_draw.js); only what is in sight is drawn, with level of detail when
// zoomed out (detailAt), and hit testing goes through a grid of cells.
// gridOf and hitIn are pure and unit-tested by widgets/test/graph_canvas.test.mjs.
import { detailAt, labelOf } from "./_graphcore.js";
import { groupLabel, subOf } from "./_graph_draw.js";
import { markCount } from "./_graph_marks.js";
import { edgePoints } from "./_layout.js";

/** Above this many drawn boxes and frames, the view draws on a canvas. */
export const CANVAS_MIN = 1500;
const CELL = 256; // hit-test grid cell, drawing units

/** A grid of cells over the layout: cell key -> drawn keys whose rectangle touches it. */
export function gridOf(layout, keys) {
  const grid = new Map();
  for (const k of keys) {
    const p = layout.pos.get(k);
    if (!p) continue;
    for (let cx = Math.floor(p.x / CELL); cx <= Math.floor((p.x + p.w) / CELL); cx++) {
      for (let cy = Math.floor(p.y / CELL); cy <= Math.floor((p.y + p.h) / CELL); cy++) {
        const key = cx * 65536 + cy;
        if (!grid.has(key)) grid.set(key, []);
        grid.get(key).push(k);
      }
    }
  }
  return grid;
}

/**
 * What is at drawing point (x, y): a box's toggle, a box, a frame's toggle or header, or
 * null. Boxes win over frames; of nested frames the innermost (the smallest) wins.
 * @returns {k, part: "expand" | "collapse" | "box" | "frame"} or null
 */
export function hitIn(grid, layout, isGroup, hasKids, x, y) {
  const cell = grid.get(Math.floor(x / CELL) * 65536 + Math.floor(y / CELL)) || [];
  let frame = null;
  for (const k of cell) {
    const p = layout.pos.get(k);
    if (x < p.x || x > p.x + p.w || y < p.y || y > p.y + p.h) continue;
    if (!isGroup(k)) {
      if (hasKids[k] && x >= p.x + p.w - 15 && y <= p.y + 15) return { k, part: "expand" };
      return { k, part: "box" };
    }
    if (!frame || p.w * p.h < frame.area) {
      const part = x <= p.x + 16 && y <= p.y + 17 ? "collapse" : y <= p.y + 22 ? "frame" : "inside";
      frame = { k, part, area: p.w * p.h };
    }
  }
  if (!frame || frame.part === "inside") return null;
  return { k: frame.k, part: frame.part };
}

/**
 * @param host the .lk-canvas element; the canvas is put in it
 * @param view {x, y, k}
 * @returns {el, setState(S), draw(), hit(sx, sy), fills: Map k -> colour}
 */
export function makeCanvasView(host, view) {
  const cv = document.createElement("canvas");
  cv.className = "lk-canvas2d";
  cv.style.cssText = "position:absolute;left:0;top:0;width:100%;height:100%;display:none";
  host.appendChild(cv);
  let S = null;
  let grid = null;
  let paths = null; // per edge: Float64Array of x, y
  let queued = false;
  const look = { fills: new Map(), inks: new Map(), selected: new Set(), matches: new Set() };

  function setState(state) {
    S = state;
    if (!S) return;
    grid = gridOf(S.layout, [...S.vis.boxes, ...S.vis.groups]);
    paths = S.edges.map(([s, d], i) => {
      const pts = edgePoints(S.layout, S.input.route[i], s, d);
      const a = new Float64Array(pts.length * 2);
      const box = [Infinity, Infinity, -Infinity, -Infinity];
      pts.forEach((p, j) => {
        a[2 * j] = p.x;
        a[2 * j + 1] = p.y;
        box[0] = Math.min(box[0], p.x);
        box[1] = Math.min(box[1], p.y);
        box[2] = Math.max(box[2], p.x);
        box[3] = Math.max(box[3], p.y);
      });
      return { pts: a, box };
    });
  }

  const colors = () => {
    const css = getComputedStyle(host);
    const v = (name, dflt) => css.getPropertyValue(name).trim() || dflt;
    return {
      edge: v("--lk-edge", "#9aa3ad"), fg: v("--lk-fg", "#222"), fg2: v("--lk-fg2", "#6b7280"),
      bg: v("--lk-bg", "#fff"), bg2: v("--lk-bg2", "#eee"), border: v("--lk-border", "#aab"),
      accent: v("--lk-accent", "#1c7ed6"), error: v("--lk-error", "#b71c1c"),
      font: v("--lk-font", "sans-serif"),
    };
  };

  function paint() {
    queued = false;
    if (!S || cv.style.display === "none") return;
    const dpr = window.devicePixelRatio || 1;
    const cw = host.clientWidth;
    const ch = host.clientHeight;
    if (cv.width !== Math.round(cw * dpr) || cv.height !== Math.round(ch * dpr)) {
      cv.width = Math.round(cw * dpr);
      cv.height = Math.round(ch * dpr);
    }
    const ctx = cv.getContext("2d");
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, cv.width, cv.height);
    ctx.setTransform(dpr * view.k, 0, 0, dpr * view.k, dpr * view.x, dpr * view.y);
    const c = colors();
    const lod = detailAt(view.k);
    // the drawing rectangle in sight
    const x0 = -view.x / view.k;
    const y0 = -view.y / view.k;
    const x1 = x0 + cw / view.k;
    const y1 = y0 + ch / view.k;
    const seen = (p) => p.x <= x1 && p.x + p.w >= x0 && p.y <= y1 && p.y + p.h >= y0;
    const { graph, vis, layout, rolled } = S;
    const px = 1 / view.k; // one screen pixel in drawing units
    // frames
    for (const g of vis.groups) {
      const p = layout.pos.get(g);
      if (!seen(p)) continue;
      ctx.fillStyle = "rgba(120,130,150,.06)";
      ctx.strokeStyle = look.selected.has(g) ? c.accent : marked(g) ? c.error : c.border;
      ctx.lineWidth = (look.selected.has(g) ? 2.5 : marked(g) ? 2.5 : 1) * Math.max(1, px * 0.8);
      roundRect(ctx, p.x, p.y, p.w, p.h, 6);
      ctx.fill();
      ctx.stroke();
      if (11 * view.k >= 4) {
        ctx.fillStyle = c.fg;
        ctx.font = `600 11px ${c.font}`;
        ctx.textAlign = "left";
        ctx.textBaseline = "alphabetic";
        ctx.fillText(groupLabel(graph, g, rolled), p.x + 20, p.y + 15);
        toggle(ctx, p.x + 4, p.y + 5, "−", c);
      }
    }
    // edges
    ctx.strokeStyle = c.edge;
    ctx.lineWidth = Math.max(1.2, px);
    ctx.beginPath();
    for (const { pts, box } of paths) {
      if (box[2] < x0 || box[0] > x1 || box[3] < y0 || box[1] > y1) continue; // out of sight
      ctx.moveTo(pts[0], pts[1]);
      for (let j = 2; j < pts.length; j += 2) {
        const mx = (pts[j - 1] + pts[j + 1]) / 2;
        ctx.bezierCurveTo(pts[j - 2], mx, pts[j], mx, pts[j], pts[j + 1]);
      }
    }
    ctx.stroke();
    // boxes
    ctx.textAlign = "center";
    ctx.textBaseline = "alphabetic";
    for (const k of vis.boxes) {
      const p = layout.pos.get(k);
      if (!seen(p)) continue;
      if (rolled.count.has(k)) {
        ctx.fillStyle = c.bg;
        ctx.strokeStyle = c.fg2;
        ctx.lineWidth = Math.max(1, px * 0.8);
        roundRect(ctx, p.x + 4, p.y - 4, p.w, p.h, 4);
        ctx.fill();
        ctx.stroke();
      }
      ctx.fillStyle = look.fills.get(k) || c.bg2;
      const sel = look.selected.has(k);
      const match = look.matches.has(k);
      const m = marked(k);
      ctx.strokeStyle = sel ? c.accent : match ? "#ae3ec9" : m ? c.error : c.fg2;
      ctx.lineWidth = (sel || match ? 3 : m ? 2.5 : 1) * (lod === 2 ? Math.max(1, px * 0.8) : 1);
      roundRect(ctx, p.x, p.y, p.w, p.h, graph.kind[k] === "p" ? 12 : 4);
      ctx.fill();
      ctx.stroke();
      if (lod === 2) continue;
      ctx.fillStyle = look.inks.get(k) || c.fg;
      ctx.font = `11px ${c.font}`;
      ctx.fillText(labelOf(graph, k, rolled), p.x + p.w / 2, p.y + 15, p.w - 4);
      if (lod === 0) {
        ctx.font = `9.5px ${c.font}`;
        ctx.fillText(subOf(graph, k), p.x + p.w / 2, p.y + 28, p.w - 4);
        if (vis.hasKids[k]) toggle(ctx, p.x + p.w - 15, p.y + 3, "+", c);
        if (m) badge(ctx, p.x, p.y, markCount(S.marks.get(k)), c);
      }
    }
  }

  const marked = (k) => S.marks && S.marks.has(k);

  /** Draw on the next animation frame (many view changes in one frame: one paint). */
  function draw() {
    if (queued) return;
    queued = true;
    requestAnimationFrame(paint);
  }

  function hit(sx, sy) {
    if (!S || !grid) return null;
    const x = (sx - view.x) / view.k;
    const y = (sy - view.y) / view.k;
    const groups = new Set(S.vis.groups);
    return hitIn(grid, S.layout, (k) => groups.has(k), S.vis.hasKids, x, y);
  }

  function show(on) {
    cv.style.display = on ? "block" : "none";
    if (on) draw();
  }

  return { el: cv, setState, draw, paint, hit, show, look };
}

function roundRect(ctx, x, y, w, h, r) {
  ctx.beginPath();
  ctx.roundRect(x, y, w, h, Math.min(r, h / 2, w / 2));
}

function toggle(ctx, x, y, sign, c) {
  ctx.save();
  ctx.fillStyle = c.bg;
  ctx.strokeStyle = c.fg2;
  ctx.lineWidth = 1;
  roundRect(ctx, x, y, 12, 12, 2);
  ctx.fill();
  ctx.stroke();
  ctx.fillStyle = c.fg;
  ctx.font = "bold 11px monospace";
  ctx.textAlign = "center";
  ctx.fillText(sign, x + 6, y + 10);
  ctx.restore();
}

function badge(ctx, x, y, n, c) {
  ctx.save();
  ctx.fillStyle = c.error;
  ctx.strokeStyle = c.bg;
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  ctx.arc(x, y, 8, 0, 2 * Math.PI);
  ctx.fill();
  ctx.stroke();
  ctx.fillStyle = c.bg;
  ctx.font = "bold 10px sans-serif";
  ctx.textAlign = "center";
  ctx.fillText(String(n), x, y + 3.5);
  ctx.restore();
}
