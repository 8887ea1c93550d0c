// Pan and zoom of the GraphView: the view transform {x, y, k} (screen = x + k * drawing).
// fitView, zoomView, centerView and inSight are pure and unit-tested by
// widgets/test/panzoom.test.mjs; attachPanZoom wires the pointer and the wheel.
import { fitScale, MIN_SCALE, openScale } from "./_graphcore.js";

/** @typedef {{x: number, y: number, k: number}} View the view transform: screen = (x, y) + k * drawing */
/** @typedef {{x: number, y: number, w: number, h: number}} Box a box's place in drawing units */
/**
 * @typedef {object} PanZoomHandlers what attachPanZoom calls
 * @property {() => void} panned the view moved by a drag
 * @property {(f: number, cx: number, cy: number) => void} zoom zoom by f about (cx, cy) on the canvas
 * @property {(e: PointerEvent) => void} hover the pointer moved without dragging
 * @property {(e: MouseEvent) => void} click a click that did not drag
 * @property {() => void} leave the pointer left the canvas
 */

const PAD = 20; // drawing units of margin around the graph when fitted
const K_MIN = 0.02;
const K_MAX = 8;

/**
 * The whole w x h drawing in a cw x ch canvas, centred (the Fit button).
 * @param {number} cw @param {number} ch @param {number} w @param {number} h
 * @returns {View}
 */
export function fitView(cw, ch, w, h) {
  const k = fitScale(cw, ch, w + 2 * PAD, h + 2 * PAD);
  return { x: (cw - w * k) / 2, y: (ch - h * k) / 2, k };
}

/**
 * How a graph opens: fitted when it fits with labels >= 11 px, else at that scale, top
 * centred, and explored by scrolling; a graph wider than the canvas (a long chain wrapped
 * into columns) opens at its top left, where it starts.
 * @param {number} cw @param {number} ch @param {number} w @param {number} h
 * @returns {View}
 */
export function openView(cw, ch, w, h) {
  const k = openScale(cw, ch, w + 2 * PAD, h + 2 * PAD);
  const x = w * k + 2 * PAD > cw ? PAD : (cw - w * k) / 2;
  let y = Math.max(PAD * k, (ch - h * k) / 2);
  if (h * k + 2 * PAD > ch) y = PAD;
  return { x, y, k };
}

/**
 * Zoom by factor f about the screen point (cx, cy), which stays put.
 * @param {View} view @param {number} f @param {number} cx @param {number} cy
 * @returns {View}
 */
export function zoomView(view, f, cx, cy) {
  const k = Math.min(K_MAX, Math.max(K_MIN, view.k * f));
  return { x: cx - ((cx - view.x) * k) / view.k, y: cy - ((cy - view.y) * k) / view.k, k };
}

/**
 * Centre box p ({x, y, w, h} in drawing units) in the canvas, at scale >= 1; a frame
 * taller (wider) than the canvas shows its top (left) edge, where its header is.
 * @param {View} view @param {Box} p @param {number} cw @param {number} ch
 * @returns {View}
 */
export function centerView(view, p, cw, ch) {
  const k = Math.max(view.k, 1);
  const x = p.w * k > cw - 2 * PAD ? PAD - p.x * k : cw / 2 - (p.x + p.w / 2) * k;
  const y = p.h * k > ch - 2 * PAD ? PAD - p.y * k : ch / 2 - (p.y + p.h / 2) * k;
  return { x, y, k };
}

/**
 * Whether box p is wholly in sight and legible (no need to move to show it).
 * @param {View} view @param {Box} p @param {number} cw @param {number} ch
 */
export function inSight(view, p, cw, ch) {
  const x0 = view.x + p.x * view.k;
  const y0 = view.y + p.y * view.k;
  const inside = x0 >= 0 && y0 >= 0 && x0 + p.w * view.k <= cw && y0 + p.h * view.k <= ch;
  return inside && view.k >= MIN_SCALE;
}

/**
 * Drag to pan, wheel to zoom about the pointer; a click that did not drag is a click.
 * @param {HTMLElement} canvas the element receiving the pointer
 * @param {View} view changed in place by a drag
 * @param {PanZoomHandlers} on
 */
export function attachPanZoom(canvas, view, on) {
  /** @type {{x: number, y: number, vx: number, vy: number, moved: boolean} | null} the drag under way */
  let drag = null;
  canvas.addEventListener("pointerdown", (e) => {
    if (e.button !== 0) return;
    drag = { x: e.clientX, y: e.clientY, vx: view.x, vy: view.y, moved: false };
  });
  canvas.addEventListener("pointermove", (e) => {
    if (drag && (e.buttons & 1) === 1) {
      const dx = e.clientX - drag.x;
      const dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      if (drag.moved) {
        canvas.classList.add("lk-panning");
        view.x = drag.vx + dx;
        view.y = drag.vy + dy;
        on.panned();
        return;
      }
    }
    on.hover(e);
  });
  canvas.addEventListener("pointerup", () => canvas.classList.remove("lk-panning"));
  canvas.addEventListener("pointerleave", () => on.leave());
  canvas.addEventListener("click", (e) => {
    const dragged = drag?.moved;
    drag = null;
    if (!dragged) on.click(e);
  });
  canvas.addEventListener(
    "wheel",
    (e) => {
      e.preventDefault();
      const r = canvas.getBoundingClientRect();
      on.zoom(Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
    },
    { passive: false },
  );
}
