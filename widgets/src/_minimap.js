// The GraphView's minimap: the whole drawing in a corner, boxes as dots, the visible
// part as a frame. Shown only while the graph does not fit the canvas; a click or a drag
// on it moves the view there. Drawn on a canvas (2,000 boxes cost well under 1 ms).
import { h } from "./_ui.js";

const W = 160;
const H = 110;
/** Above this many drawn boxes and frames, the boxes are painted when the page is idle. */
const IDLE_MIN = 5000;

/**
 * @param {HTMLElement} host the graph's canvas element (position: relative)
 * @param {() => (import("./_graph_draw.js").DrawState & {graph: {parent: number[]}}) | null} state the GraphView's drawing state, or null
 * @param {import("./_panzoom.js").View} view the current transform (read only)
 * @param {(x: number, y: number) => void} moveTo set the view's translation
 * @param {() => boolean} [waiting] whether a newer layout is on its way (the boxes of this
 *   one are then not painted: the page's thread is kept free for the new one)
 */
export function makeMinimap(host, state, view, moveTo, waiting = () => false) {
  const cv = /** @type {HTMLCanvasElement} */ (
    h("canvas", {
      class: "lk-minimap",
      width: String(W),
      height: String(H),
      title: "the whole graph: click or drag to move there",
    })
  );
  cv.style.cssText =
    "position:absolute;right:8px;bottom:8px;border:1px solid var(--lk-border);" +
    "background:var(--lk-bg1);border-radius:3px;cursor:pointer;display:none;z-index:5";
  host.appendChild(cv);
  let fitK = 1;
  let ox = 0;
  let oy = 0;
  // the boxes are drawn once per layout on a canvas of their own; a view change only
  // copies it and draws the view's frame (10,000 boxes: one copy, not 10,000 rectangles)
  const boxes = document.createElement("canvas");
  boxes.width = W;
  boxes.height = H;
  /** @type {unknown} the layout the boxes canvas shows */
  let drawnFor = null;
  let drawnInk = "";

  let pending = false; // a repaint of the boxes waits for the page to be idle

  /**
   * Paint the boxes of S's layout on the boxes canvas, and place them (fitK, ox, oy).
   * @param {NonNullable<ReturnType<typeof state>>} S @param {string} ink
   */
  function paintBoxes(S, ink) {
    const gw = S.layout.width;
    const gh = S.layout.height;
    fitK = Math.min((W - 8) / gw, (H - 8) / gh);
    ox = (W - gw * fitK) / 2;
    oy = (H - gh * fitK) / 2;
    const bx = boxes.getContext("2d");
    if (!bx) return; // no 2d context (a page out of canvas memory): nothing to draw on
    bx.clearRect(0, 0, W, H);
    // at least 3 px wide: a long thin graph is a visible band, not a 1-px line; what is
    // inside a frame under 3 px here is that frame's rectangle (100,000 boxes: a few
    // thousand rectangles). Painted as coverage: each pixel's ink is how much of it the
    // rectangles cover, at most DENSE opaque, so a dense graph reads as shades of its
    // ink, never as a solid (black) block
    const P = S.layout.P;
    const parent = S.graph.parent;
    const tiny = new Uint8Array(parent.length);
    const cover = new Float32Array(W * H);
    /** @param {number} k */
    const rect = (k) =>
      coverRect(cover, ox + P[4 * k] * fitK, oy + P[4 * k + 1] * fitK, Math.max(3, P[4 * k + 2] * fitK), Math.max(1, P[4 * k + 3] * fitK));
    for (const g of S.vis.groups) {
      const p = parent[g];
      if (p >= 0 && tiny[p]) tiny[g] = 1;
      else if (Math.min(P[4 * g + 2], P[4 * g + 3]) * fitK < 3) {
        tiny[g] = 1;
        rect(g);
      }
    }
    for (const k of S.vis.boxes) if (!(parent[k] >= 0 && tiny[parent[k]])) rect(k);
    bx.fillStyle = ink;
    bx.putImageData(coverImage(bx, cover, rgbOf(bx.fillStyle)), 0, 0);
    drawnFor = S.layout;
    drawnInk = ink;
    cv.dataset.boxes = String(S.vis.boxes.length);
  }

  /**
   * Paint the boxes of the layout shown when the page is idle; while a newer layout is on
   * its way (a toggle), wait for it: painting this one's 100,000 boxes then (40-120 ms on
   * the page's thread) only delayed the new one.
   * @param {string} ink
   */
  function paintWhenIdle(ink) {
    const idle = globalThis.requestIdleCallback || ((/** @type {() => void} */ f) => setTimeout(f, 50));
    idle(
      () => {
        if (waiting()) return paintWhenIdle(ink);
        pending = false;
        const now = state();
        if (now && (drawnFor !== now.layout || drawnInk !== ink)) paintBoxes(now, ink);
        draw();
      },
      { timeout: 500 },
    );
  }

  function draw() {
    const S = state();
    if (!S) return;
    const cw = host.clientWidth;
    const ch = host.clientHeight;
    const gw = S.layout.width;
    const gh = S.layout.height;
    const fits =
      gw * view.k <= cw &&
      gh * view.k <= ch &&
      view.x >= -1 &&
      view.y >= -1 &&
      view.x + gw * view.k <= cw + 1 &&
      view.y + gh * view.k <= ch + 1;
    cv.style.display = fits ? "none" : "block";
    if (fits) return;
    const css = getComputedStyle(cv);
    const ink = css.getPropertyValue("--lk-fg2").trim() || "#888";
    const accent = css.getPropertyValue("--lk-accent").trim() || "#1976d2";
    if (drawnFor !== S.layout || drawnInk !== ink) {
      // a big drawing's boxes (100,000: ~10 ms) are painted once the page is idle, after
      // the new layout is on screen; until then the last picture of them stays
      if (S.vis.boxes.length + S.vis.groups.length <= IDLE_MIN) paintBoxes(S, ink);
      else if (!pending) {
        pending = true;
        paintWhenIdle(ink);
      }
    }
    if (!drawnFor) return; // nothing painted yet
    const ctx = cv.getContext("2d");
    if (!ctx) return;
    ctx.clearRect(0, 0, W, H);
    ctx.drawImage(boxes, 0, 0);
    ctx.strokeStyle = accent;
    ctx.lineWidth = 1.5;
    ctx.strokeRect(ox + (-view.x / view.k) * fitK, oy + (-view.y / view.k) * fitK, (cw / view.k) * fitK, (ch / view.k) * fitK);
  }

  /** Centre the view on the drawing point under the pointer. @param {PointerEvent} e */
  function jump(e) {
    const r = cv.getBoundingClientRect();
    const gx = (e.clientX - r.left - ox) / fitK;
    const gy = (e.clientY - r.top - oy) / fitK;
    moveTo(host.clientWidth / 2 - gx * view.k, host.clientHeight / 2 - gy * view.k);
  }
  cv.addEventListener("pointerdown", (e) => {
    e.stopPropagation();
    cv.setPointerCapture(e.pointerId);
    jump(e);
  });
  cv.addEventListener("pointermove", (e) => {
    e.stopPropagation();
    if (e.buttons & 1) jump(e);
  });
  cv.addEventListener("click", (e) => e.stopPropagation());
  cv.addEventListener("wheel", (e) => e.stopPropagation());
  return { draw, el: cv };
}

/** The most a minimap pixel is inked, however many rectangles cover it. */
export const DENSE = 0.55;

/**
 * Add a rectangle's coverage (0..1 per pixel: the part of the pixel it covers) to a
 * W x H grid.
 * @param {Float32Array} cover
 * @param {number} x @param {number} y @param {number} w @param {number} h
 */
export function coverRect(cover, x, y, w, h) {
  const x0 = Math.max(0, x);
  const y0 = Math.max(0, y);
  const x1 = Math.min(W, x + w);
  const y1 = Math.min(H, y + h);
  for (let py = Math.floor(y0); py < y1; py++) {
    const fy = Math.min(py + 1, y1) - Math.max(py, y0);
    for (let px = Math.floor(x0); px < x1; px++) cover[py * W + px] += fy * (Math.min(px + 1, x1) - Math.max(px, x0));
  }
}

/**
 * The coverage grid as pixels of one ink: alpha DENSE x coverage, capped at DENSE.
 * @template {{data: Uint8ClampedArray}} I
 * @param {{createImageData(w: number, h: number): I}} ctx a canvas context (ImageData)
 * @param {Float32Array} cover
 * @param {[number, number, number]} rgb
 * @returns {I}
 */
export function coverImage(ctx, cover, rgb) {
  const img = ctx.createImageData(W, H);
  const d = img.data;
  for (let i = 0; i < cover.length; i++) {
    if (!cover[i]) continue;
    d[4 * i] = rgb[0];
    d[4 * i + 1] = rgb[1];
    d[4 * i + 2] = rgb[2];
    d[4 * i + 3] = Math.round(255 * DENSE * Math.min(1, cover[i]));
  }
  return img;
}

/**
 * A canvas-normalised colour ("#rrggbb" or "rgba(r, g, b, a)") as [r, g, b]; grey when unreadable.
 * @param {string | CanvasGradient | CanvasPattern} color
 * @returns {[number, number, number]}
 */
export function rgbOf(color) {
  const s = String(color);
  const hex = (/** @type {number} */ i) => Number.parseInt(s.slice(i, i + 2), 16);
  if (/^#[0-9a-f]{6}$/i.test(s)) return [hex(1), hex(3), hex(5)];
  const m = s.match(/\d+(\.\d+)?/g);
  return m && m.length >= 3 ? [Number(m[0]), Number(m[1]), Number(m[2])] : [136, 136, 136];
}
