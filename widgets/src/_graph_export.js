// SVG elements for the GraphView and its drawing as a standalone SVG file (DOM).
export const SVG_NS = "http://www.w3.org/2000/svg";

/**
 * An SVG element with attributes.
 * @param {string} tag @param {Record<string, string>} attrs
 * @returns {SVGElement}
 */
export function svgEl(tag, attrs = {}) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

/**
 * The whole drawing as SVG file text, 20 units of margin, whatever the view's pan/zoom.
 * @param {SVGElement} svg the view's <svg> (its .lk-viewport group holds the drawing)
 * @param {{width: number, height: number}} layout the nested layout
 * @returns {{text: string, W: number, H: number}}
 */
export function svgFile(svg, layout) {
  const clone = /** @type {SVGElement} */ (svg.cloneNode(true));
  const W = layout.width + 40;
  const H = layout.height + 40;
  clone.setAttribute("xmlns", SVG_NS);
  clone.setAttribute("width", String(W));
  clone.setAttribute("height", String(H));
  clone.setAttribute("viewBox", `0 0 ${W} ${H}`);
  clone.querySelector(".lk-viewport")?.setAttribute("transform", "translate(20,20)");
  return { text: new XMLSerializer().serializeToString(clone), W, H };
}
