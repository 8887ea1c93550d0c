// MemoryTimeline front end: stacked area of bytes by category, phases and peak marked;
// hover for the bytes at a moment, drag across to zoom into a time range (the byte axis
// follows what is shown), double-click to see the whole step again. The selected module
// (linked with the graph and profile in trace.show()) is shaded where it ran; a click
// selects the module running at that moment.
//
// Three parts: the view's state (MemoryState: zoom, selection, size), pure drawing of it
// (scene -> SVG and HTML text, no DOM: widgets/test/memory.test.mjs), and render's wiring
// (model and pointer events -> state -> draw).
import { fmtBytes, fmtTime, uid } from "./_shared.js";
import { ensureStyles, esc, h, tooltip } from "./_ui.js";

/** @typedef {import("./_contract_types").MemoryPayload} Samples the recording (`samples` trait) */
/** @typedef {import("./_contract_types").LargestStorage} Storage */

/**
 * What the user sees besides the samples.
 * @typedef {object} MemoryState
 * @property {[number, number] | null} zoom the time range dragged across; null: the whole step
 * @property {string | null} selected the module selected (linked with the graph and profile)
 * @property {number} width the chart's width in pixels
 * @property {number} height the view's height trait in pixels (the chart takes 40 less)
 */

/**
 * The chart's geometry for a state: what every drawing function reads.
 * @typedef {object} Scene
 * @property {number} n samples
 * @property {number} W chart width
 * @property {number} H chart height
 * @property {{l: number, r: number, t: number, b: number}} m margins
 * @property {number} t0 first time shown
 * @property {number} t1 last time shown
 * @property {number[][]} stacks cumulative bytes per category (stack())
 * @property {{index: number, total: number}} peak
 * @property {number} ymax the byte axis' top
 * @property {(t: number) => number} X time -> x
 * @property {(b: number) => number} Y bytes -> y
 * @property {number[][]} runs the spans where the selected module ran
 * @property {string} mod the module or call at the peak
 */

// each category's colour comes with the samples (s.colors, labkit/views/_payload.py)
// translucent bands over the theme's background, so the phases read in Light and Dark
/** @type {Record<string, string>} */
const PHASE_COLORS = { forward: "var(--lk-accent)", backward: "var(--lk-accent2)", optimizer: "var(--lk-fg2)" };

/** Cumulative stacks: out[c][i] = sum of categories 0..c at sample i. @param {number[][]} bytes */
export function stack(bytes) {
  /** @type {number[][]} */
  const out = [];
  /** @type {number[] | null} */
  let prev = null;
  for (const col of bytes) {
    /** @type {number[] | null} */
    const below = prev;
    /** @type {number[]} */
    const cur = col.map((v, i) => v + (below ? below[i] : 0));
    out.push(cur);
    prev = cur;
  }
  return out;
}

/** Index and total of the peak sample (-1 when empty). @param {number[][]} bytes @param {number} n */
export function peakOf(bytes, n) {
  let best = -1;
  let max = -1;
  for (let i = 0; i < n; i++) {
    let s = 0;
    for (const col of bytes) s += col[i];
    if (s > max) {
      max = s;
      best = i;
    }
  }
  return { index: best, total: Math.max(0, max) };
}

/**
 * Runs of equal phase: [[phase, first index, last index], ...].
 * @param {string[]} phases
 * @returns {[string, number, number][]}
 */
export function phaseRuns(phases) {
  /** @type {[string, number, number][]} */
  const runs = [];
  phases.forEach((p, i) => {
    const last = runs[runs.length - 1];
    if (last && last[0] === p) last[2] = i;
    else runs.push([p, i, i]);
  });
  return runs;
}

/**
 * Runs of samples taken while module `sel` (or a module inside it) ran:
 * [[first index, last index], ...]; none for an empty selection.
 * @param {string[]} modules @param {string | null | undefined} sel
 * @returns {number[][]}
 */
export function moduleSpans(modules, sel) {
  /** @type {number[][]} */
  const runs = [];
  if (sel === null || sel === undefined || sel === "") return runs;
  const inside = `${sel}.`;
  modules.forEach((m, i) => {
    if (m !== sel && !m.startsWith(inside)) return;
    const last = runs[runs.length - 1];
    if (last && last[1] === i - 1) last[1] = i;
    else runs.push([i, i]);
  });
  return runs;
}

/**
 * What memory did while the selected module ran: spans, time, bytes when it first
 * started and last stopped, and the most at any of its samples (totals per sample).
 * @param {number[]} times @param {number[]} totals @param {number[][]} runs
 */
export function whileRunning(times, totals, runs) {
  if (!runs.length) return null;
  const n = times.length;
  let time = 0;
  let most = 0;
  for (const [a, b] of runs) {
    time += times[Math.min(b + 1, n - 1)] - times[a];
    for (let i = a; i <= b; i++) most = Math.max(most, totals[i]);
  }
  const first = runs[0][0];
  const last = runs[runs.length - 1][1];
  return { spans: runs.length, time, start: totals[Math.max(0, first - 1)], end: totals[last], most };
}

/**
 * The largest storages alive at some moment of [t0, t1], biggest first (at most top).
 * @param {Storage[] | null | undefined} largest @param {number} t0 @param {number} t1
 */
export function liveIn(largest, t0, t1, top = 8) {
  return (largest || []).filter((r) => r.start <= t1 && (r.end === null || r.end === undefined || r.end >= t0)).slice(0, top);
}

/**
 * The chart of a state: time range, byte axis (the largest total inside the range shown),
 * scales, the peak and the selected module's spans. Pure.
 * @param {Samples} s samples with at least one
 * @param {MemoryState} state
 * @returns {Scene}
 */
export function scene(s, state) {
  const n = s.time.length;
  const W = state.width || 760;
  const H = (state.height || 360) - 40;
  const m = { l: 64, r: 16, t: 16, b: 26 };
  const full0 = s.time[0];
  const full1 = s.time[n - 1] > full0 ? s.time[n - 1] : full0 + 1;
  const [t0, t1] = state.zoom || [full0, full1];
  const stacks = stack(s.bytes);
  const peak = peakOf(s.bytes, n);
  let shownMax = 0;
  for (let i = 0; i < n; i++) {
    const inside = s.time[i] >= t0 && s.time[i] <= t1;
    const next = i + 1 < n && s.time[i + 1] >= t0 && s.time[i] < t0; // the step into view
    if (inside || next) shownMax = Math.max(shownMax, stacks[stacks.length - 1][i]);
  }
  const ymax = shownMax || peak.total || 1;
  /** @param {number} t */
  const X = (t) => m.l + ((t - t0) / (t1 - t0)) * (W - m.l - m.r);
  /** @param {number} b */
  const Y = (b) => H - m.b - (b / ymax) * (H - m.t - m.b) * 0.92;
  // the module or call at the peak as the summary names it (a backward sample has none)
  const mod = s.peak_where || s.module[peak.index] || "-";
  return { n, W, H, m, t0, t1, stacks, peak, ymax, X, Y, runs: moduleSpans(s.module, state.selected), mod };
}

/** The phase bands, labelled where a band can hold its name. @param {Scene} c @param {Samples} s */
function phaseBands(c, s) {
  let g = "";
  for (const [phase, a, b] of phaseRuns(s.phase)) {
    const xa = c.X(s.time[a]);
    const xb = c.X(s.time[Math.min(b + 1, c.n - 1)]);
    g += `<rect class="lk-phase" data-phase="${esc(phase)}" x="${xa}" y="${c.m.t}" width="${Math.max(1, xb - xa)}" height="${c.H - c.m.t - c.m.b}" style="fill:${PHASE_COLORS[phase] || "var(--lk-fg2)"};fill-opacity:.08"/>`;
    // a label only where the band can hold it (never a cut-off "forwar")
    if (xb - xa >= phase.length * 6 + 4)
      g += `<text x="${(xa + xb) / 2}" y="${c.m.t + 11}" font-size="10" text-anchor="middle" style="fill:var(--lk-fg)">${esc(phase)}</text>`;
  }
  return g;
}

/** Where the selected module ran: outlined bands under the areas. @param {Scene} c @param {Samples} s */
function selectionBands(c, s) {
  let g = "";
  for (const [a, b] of c.runs) {
    const xa = c.X(s.time[a]);
    const xb = c.X(s.time[Math.min(b + 1, c.n - 1)]);
    g += `<rect class="lk-sel-span" x="${xa}" y="${c.m.t}" width="${Math.max(1.5, xb - xa)}" height="${c.H - c.m.t - c.m.b}" style="fill:var(--lk-accent);fill-opacity:.18;stroke:var(--lk-accent);stroke-opacity:.6"/>`;
  }
  return g;
}

/** One stacked area per category. @param {Scene} c @param {Samples} s */
function areas(c, s) {
  let g = "";
  c.stacks.forEach((top, k) => {
    const below = k ? c.stacks[k - 1] : null;
    let d = "";
    for (let i = 0; i < c.n; i++) d += `${i ? "L" : "M"}${c.X(s.time[i]).toFixed(1)},${c.Y(top[i]).toFixed(1)}`;
    for (let i = c.n - 1; i >= 0; i--) d += `L${c.X(s.time[i]).toFixed(1)},${c.Y(below ? below[i] : 0).toFixed(1)}`;
    g += `<path class="lk-area" data-cat="${esc(s.categories[k])}" d="${d}Z" fill="${esc(s.colors[k])}" fill-opacity=".85"/>`;
  });
  return g;
}

/** Byte grid and labels, the time range's ends. @param {Scene} c */
function axes(c) {
  let g = "";
  for (let j = 0; j <= 4; j++) {
    const b = (c.ymax * j) / 4;
    g += `<line x1="${c.m.l}" x2="${c.W - c.m.r}" y1="${c.Y(b)}" y2="${c.Y(b)}" style="stroke:var(--lk-fg)" stroke-opacity=".1"/>`;
    g += `<text x="${c.m.l - 4}" y="${c.Y(b) + 3}" font-size="10" text-anchor="end" style="fill:var(--lk-fg)">${esc(fmtBytes(b))}</text>`;
  }
  g += `<text x="${c.m.l}" y="${c.H - 6}" font-size="10" style="fill:var(--lk-fg)">${esc(fmtTime(c.t0))}</text>`;
  g += `<text x="${c.W - c.m.r}" y="${c.H - 6}" font-size="10" text-anchor="end" style="fill:var(--lk-fg)">${esc(fmtTime(c.t1))}</text>`;
  return g;
}

/** The peak's line and label, when the peak is in the range shown. @param {Scene} c @param {Samples} s */
function peakMark(c, s) {
  const t = s.time[c.peak.index];
  if (!(t >= c.t0 && t <= c.t1)) return "";
  const px = c.X(t);
  const text = `peak ${fmtBytes(c.peak.total)} · ${c.mod}`;
  const flip = px + 4 + text.length * 6 > c.W - c.m.r; // near the right edge: label on the left
  // (and never higher than under the phase labels, which sit at the top)
  return (
    `<line class="lk-peak" x1="${px}" x2="${px}" y1="${c.m.t}" y2="${c.H - c.m.b}" style="stroke:var(--lk-error)" stroke-dasharray="4 3"/>` +
    `<text class="lk-peak-label" x="${flip ? px - 4 : px + 4}" y="${Math.max(c.Y(c.peak.total) - 4, c.m.t + 24)}" font-size="10.5" text-anchor="${flip ? "end" : "start"}" style="fill:var(--lk-error)">${esc(text)}</text>`
  );
}

/**
 * The chart as SVG text: phases, selection, areas (clipped to the plot), axes, peak, and
 * the hidden cursor and brush the pointer moves.
 * @param {Scene} c @param {Samples} s @param {string} clipId the view's own clip path id
 */
export function chartSvg(c, s, clipId) {
  const { m, W, H } = c;
  let g = `<defs><clipPath id="${clipId}"><rect x="${m.l}" y="0" width="${W - m.l - m.r}" height="${H}"/></clipPath></defs><g clip-path="url(#${clipId})">`;
  g += phaseBands(c, s) + selectionBands(c, s) + areas(c, s);
  g += `</g>${axes(c)}${peakMark(c, s)}`;
  g += `<line class="lk-cursor" x1="0" x2="0" y1="${m.t}" y2="${H - m.b}" style="stroke:var(--lk-fg)" stroke-opacity=".5" visibility="hidden"/>`;
  g += `<rect class="lk-brush" x="0" y="${m.t}" width="0" height="${H - m.t - m.b}" style="fill:var(--lk-accent);fill-opacity:.15" visibility="hidden"/>`;
  return `<svg width="100%" height="${H}" viewBox="0 0 ${W} ${H}"><title>drag across to zoom, double-click to see the whole step, click to select the module running then</title>${g}</svg>`;
}

/** The legend: a swatch per category, then the peak. @param {Scene} c @param {Samples} s */
export function legendHtml(c, s) {
  const items = s.categories.map(
    (cat, j) =>
      `<span style="display:inline-flex;align-items:center;gap:3px"><span class="lk-swatch" style="background:${esc(s.colors[j])}"></span>${esc(cat)}</span>`,
  );
  return `${items.join(" ")}<span class="lk-spacer"></span><span>peak ${esc(fmtBytes(c.peak.total))} at ${esc(c.mod)} (${esc(s.phase[c.peak.index])})</span>`;
}

/** The line under the chart about the selected module. @param {Scene} c @param {Samples} s @param {string | null} sel */
export function selectionHtml(c, s, sel) {
  if (!sel) return "";
  const ran = whileRunning(s.time, c.stacks[c.stacks.length - 1], c.runs);
  if (!ran) return `<b>${esc(sel)}</b>: no memory sample was taken while it ran`;
  return `<b>${esc(sel)}</b> ran in ${ran.spans} span${ran.spans === 1 ? "" : "s"}, ${esc(fmtTime(ran.time))} in all; live bytes ${esc(fmtBytes(ran.start))} before it, ${esc(fmtBytes(ran.end))} at its last sample, most ${esc(fmtBytes(ran.most))}`;
}

/** What was live in the range shown (at the peak when not zoomed): the recording's biggest
 * storages with their lifetimes. @param {Scene} c @param {Samples} s @param {boolean} zoomed */
export function liveHtml(c, s, zoomed) {
  const at = s.time[c.peak.index];
  const rows = zoomed ? liveIn(s.largest, c.t0, c.t1) : liveIn(s.largest, at, at);
  if (!rows.length) return "";
  const where = zoomed ? `in ${esc(fmtTime(c.t0))} – ${esc(fmtTime(c.t1))}` : "at the peak";
  const lines = rows.map(
    (r) =>
      `<div>${esc(fmtBytes(r.bytes).padStart(11))}  ${esc(r.category.padEnd(12))} ${esc(r.module || "(outside modules)")} ${esc(r.op || "")} ${esc(r.site || "")}</div>`,
  );
  return `<div style="opacity:.8">largest storages live ${where}:</div>${lines.join("")}`;
}

/** The tooltip of sample i: time, phase, module, bytes per category and total. @param {Samples} s @param {number} i */
export function tipHtml(s, i) {
  let html = `<div><b>${esc(fmtTime(s.time[i]))}</b> · ${esc(s.phase[i])} · ${esc(s.module[i] || "-")}</div>`;
  let total = 0;
  s.categories.forEach((c, j) => {
    total += s.bytes[j][i];
    html += `<div><span class="lk-tip-k">${esc(c)}:</span> ${esc(fmtBytes(s.bytes[j][i]))}</div>`;
  });
  return `${html}<div><b>total: ${esc(fmtBytes(total))}</b></div>`;
}

/** The sample drawn at chart x (the last one at or left of it). @param {Scene} c @param {Samples} s @param {number} x */
export function sampleAt(c, s, x) {
  let i = 0;
  while (i < c.n - 1 && c.X(s.time[i + 1]) <= x) i++;
  return i;
}

/** The time at chart x. @param {Scene} c @param {number} x */
export function timeAt(c, x) {
  return c.t0 + ((x - c.m.l) / (c.W - c.m.l - c.m.r)) * (c.t1 - c.t0);
}

/**
 * What the chart's pointer does: pick the module running at a moment, zoom to a range.
 * @typedef {object} ChartEvents
 * @property {(module: string) => void} pick a click at a sample with a module
 * @property {(range: [number, number] | null) => void} zoom a drag across (null: the whole step)
 */

/**
 * Pointer wiring of a drawn chart: hover shows the sample's bytes, a drag brushes a time
 * range, a click picks, a double-click zooms out.
 * @param {SVGSVGElement} svgEl @param {Scene} c @param {Samples} s
 * @param {ReturnType<typeof tooltip>} tip @param {ChartEvents} on
 */
function wireChart(svgEl, c, s, tip, on) {
  const cursor = /** @type {SVGElement} */ (svgEl.querySelector(".lk-cursor"));
  const brush = /** @type {SVGElement} */ (svgEl.querySelector(".lk-brush"));
  /** @param {number} clientX chart x of a client x, inside the plot */
  const chartX = (clientX) => {
    const r = svgEl.getBoundingClientRect();
    return ((clientX - r.left) / r.width) * c.W;
  };
  /** @param {PointerEvent} e */
  const toX = (e) => Math.min(c.W - c.m.r, Math.max(c.m.l, chartX(e.clientX)));
  /** @type {number | null} */
  let from = null;
  svgEl.addEventListener("pointerdown", (e) => {
    if (e.button !== 0) return;
    from = toX(e);
    svgEl.setPointerCapture(e.pointerId);
  });
  svgEl.addEventListener("pointerup", (e) => {
    if (from === null) return;
    const to = toX(e);
    const [a, b] = [Math.min(from, to), Math.max(from, to)];
    from = null;
    brush.setAttribute("visibility", "hidden");
    const i = sampleAt(c, s, to);
    // a click: select the module running at that moment (the graph and profile follow)
    if (b - a < 4) {
      if (s.module[i]) on.pick(s.module[i]);
    } else on.zoom([timeAt(c, a), timeAt(c, b)]);
  });
  svgEl.addEventListener("dblclick", () => on.zoom(null));
  svgEl.addEventListener("pointermove", (e) => {
    if (from !== null && e.buttons & 1) {
      const to = toX(e);
      brush.setAttribute("x", String(Math.min(from, to)));
      brush.setAttribute("width", String(Math.abs(to - from)));
      brush.setAttribute("visibility", "visible");
      tip.hide();
      return;
    }
    const i = sampleAt(c, s, chartX(e.clientX));
    cursor.setAttribute("x1", String(c.X(s.time[i])));
    cursor.setAttribute("x2", String(c.X(s.time[i])));
    cursor.setAttribute("visibility", "visible");
    tip.show(tipHtml(s, i), e.clientX, e.clientY);
  });
  svgEl.addEventListener("pointerleave", () => {
    tip.hide();
    cursor.setAttribute("visibility", "hidden");
  });
}

/** @typedef {import("./_contract_types").MemoryTimelineTraits} Traits the synced traits (labkit/views/_contract.py) */
/** @param {import("./_contract_types").RenderContext<Traits>} ctx anywidget's model and element */
function render({ model, el }) {
  ensureStyles();
  const clipId = uid("lk-mem-clip"); // ids are page-wide: this view's own
  const root = h("div", { class: "lk-view lk-memory" });
  const body = h("div", { class: "lk-canvas lk-mem-canvas" });
  const legend = h("div", { class: "lk-toolbar lk-mem-legend" });
  const selLine = h("div", { class: "lk-mem-sel" });
  const live = h("div", { class: "lk-mem-live" });
  root.append(legend, body, selLine, live);
  el.appendChild(root);
  const tip = tooltip(body);
  /** @type {MemoryState} */
  const state = { zoom: null, selected: null, width: 0, height: 360 };
  /** @type {ChartEvents} */
  const on = {
    pick(module) {
      if (module === model.get("selected")) return;
      model.set("selected", module);
      model.save_changes();
    },
    zoom(range) {
      state.zoom = range;
      draw();
    },
  };

  function draw() {
    state.selected = model.get("selected");
    state.height = model.get("height") || 360;
    state.width = body.clientWidth;
    // the chart keeps its own height; the selection line and the live storages go below
    // it (a fixed view height would squeeze the chart, and the SVG would shrink its text)
    root.style.height = "auto";
    body.style.flex = "none";
    body.style.height = `${state.height - 40}px`;
    const s = model.get("samples");
    if (!s?.time?.length) {
      legend.innerHTML = "";
      body.innerHTML = `<div class="lk-empty">${esc(model.get("empty_message"))}</div>`;
      return;
    }
    const c = scene(s, state);
    root.dataset.ymax = String(c.ymax);
    if (state.zoom) root.dataset.zoom = `${c.t0},${c.t1}`;
    else delete root.dataset.zoom;
    body.innerHTML = chartSvg(c, s, clipId);
    selLine.innerHTML = selectionHtml(c, s, state.selected);
    legend.innerHTML = legendHtml(c, s);
    live.innerHTML = liveHtml(c, s, state.zoom !== null);
    wireChart(/** @type {SVGSVGElement} */ (body.querySelector("svg")), c, s, tip, on);
    body.appendChild(tip.el);
  }
  // a draw while hidden (a tab) could not measure and used 760 px: the pointer maps to the
  // drawing by the real width, so showing the chart again counts as a resize
  const ro = new ResizeObserver(() => {
    const w = body.clientWidth;
    if (w && w !== state.width) draw();
  });
  ro.observe(body);
  /** @type {import("./_contract_types").ChangeEvent<Traits>[]} */
  const events = ["change:samples", "change:height", "change:selected"];
  for (const ev of events) model.on(ev, draw);
  draw();
  return () => {
    ro.disconnect();
    for (const ev of events) model.off(ev, draw);
  };
}

export default { render };
