// WCAG contrast of every visible text under `root` (see _contrast.py).
(root) => {
  const parse = (c) => {
    const m = /rgba?\(([^)]+)\)/.exec(c || "");
    if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (top, bottom) => [0, 1, 2].map((i) => top[i] * top[3] + bottom[i] * (1 - top[3])).concat(1);
  const lin = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  const lum = (c) => 0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2]);
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const opacity = (el) => { let o = 1; for (let e = el; e && e.nodeType === 1; e = e.parentElement) o *= +getComputedStyle(e).opacity; return o; };
  const SHAPES = new Set(["rect", "circle", "ellipse", "path", "polygon"]);
  const layerColor = (e) => {
    const cs = getComputedStyle(e);
    let c = null;
    if (e instanceof SVGElement) {
      if (!SHAPES.has(e.tagName) || cs.visibility === "hidden") return null;
      c = parse(cs.fill);
      if (c) c[3] *= +cs.fillOpacity;
    } else c = parse(cs.backgroundColor);
    if (c) c[3] *= opacity(e);
    return c && c[3] > 0 ? c : null;
  };
  const pageBg = parse(getComputedStyle(document.body).backgroundColor) || [255, 255, 255, 1];
  // What a text is painted on, by paint order rather than hit testing (pointer-events and
  // the notebook's windowing make hit tests unreliable): the backgrounds of the view's
  // ancestors, then every element before the text in document order (SVG paints in that
  // order; HTML ancestors precede their children) whose box holds the point.
  const order = [...root.querySelectorAll("*")];
  const index = new Map(order.map((e, i) => [e, i]));
  const outside = [];
  for (let e = root; e; e = e.parentElement) outside.unshift(e);
  const backdrop = (el, x, y) => {
    const names = [];
    let bg = [...pageBg.slice(0, 3), 1];
    // an HTML element's own background lies under its text; an SVG text's fill is the text
    const upto = index.get(el) + (el instanceof SVGElement ? 0 : 1);
    const under = [...outside, ...order.slice(0, upto)];
    for (const e of under) {
      const r = e.getBoundingClientRect();
      if (x < r.left || x > r.right || y < r.top || y > r.bottom) continue;
      const c = layerColor(e);
      if (!c) continue;
      if (c[3] >= 0.999) names.length = 0;
      names.push(`${e.tagName}.${String(e.className.baseVal ?? e.className).split(" ")[0]}`);
      bg = over(c, bg);
    }
    backdrop.names = names.join(" < ");
    return bg;
  };
  const clipped = (el, x, y) => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      if (a instanceof SVGElement || getComputedStyle(a).overflow === "visible") continue;
      const r = a.getBoundingClientRect();
      if (x < r.left || x > r.right || y < r.top || y > r.bottom) return true;
    }
    return false;
  };
  const out = [];
  const hasText = (e) => [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
  for (const e of root.querySelectorAll("*")) {
    const tag = e.tagName.toLowerCase();
    const control = ["input", "select", "button"].includes(tag);
    if (!(control || hasText(e)) || ["style", "script", "option", "title"].includes(tag)) continue;
    if (e.disabled) continue;
    const cs = getComputedStyle(e);
    if (cs.visibility === "hidden" || cs.display === "none") continue;
    const r = e.getBoundingClientRect();
    if (r.width < 1 || r.height < 1) continue;
    const x = r.left + r.width / 2, y = r.top + r.height / 2;
    if (x < 0 || y < 0 || x >= innerWidth || y >= innerHeight) continue;  // scroll views into sight first
    if (clipped(e, x, y)) continue;  // cut off by a scrolling or clipping box: not shown
    const fg = parse(e instanceof SVGElement ? cs.fill : cs.color);
    if (!fg) continue;
    fg[3] *= opacity(e) * (e instanceof SVGElement ? +cs.fillOpacity : 1);
    const bg = backdrop(e, x, y);
    const ink = over(fg, bg).slice(0, 3).map(Math.round);
    const paper = bg.slice(0, 3).map(Math.round);
    const text = control ? (e.value || e.textContent || tag) : e.textContent;
    out.push({ tag, text: text.trim().slice(0, 40), ratio: +ratio(ink, paper).toFixed(2),
               fg: ink, bg: paper, cls: String(e.className.baseVal ?? e.className).slice(0, 40), on: backdrop.names });
  }
  return out;
}
