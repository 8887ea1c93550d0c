// MemoryTimeline front end: stacked area of bytes by category, phases and peak marked;
// hover for the bytes at a moment, drag across to zoom into a time range (the byte axis
// follows what is shown), double-click to see the whole step again. The selected module
// (linked with the graph and profile in trace.show()) is shaded where it ran; a click
// selects the module running at that moment.
import { fmtBytes, fmtTime, uid } from "./_shared.js";
import { ensureStyles, esc, h, tooltip } from "./_ui.js";

// each category's colour comes with the samples (s.colors, labkit/views/_payload.py)
// translucent bands over the theme's background, so the phases read in Light and Dark
const PHASE_COLORS = { forward: "var(--lk-accent)", backward: "var(--lk-accent2)", optimizer: "var(--lk-fg2)" };

/** Cumulative stacks: out[c][i] = sum of categories 0..c at sample i. */
export function stack(bytes) {
  const out = [];
  let prev = null;
  for (const col of bytes) {
    const cur = col.map((v, i) => v + (prev ? prev[i] : 0));
    out.push(cur);
    prev = cur;
  }
  return out;
}

/** Index and total of the peak sample (-1 when empty). */
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

/** Runs of equal phase: [[phase, first index, last index], ...]. */
export function phaseRuns(phases) {
  const runs = [];
  phases.forEach((p, i) => {
    const last = runs[runs.length - 1];
    if (last && last[0] === p) last[2] = i;
    else runs.push([p, i, i]);
  });
  return runs;
}

/** Runs of samples taken while module `sel` (or a module inside it) ran:
 * [[first index, last index], ...]; none for an empty selection. */
export function moduleSpans(modules, sel) {
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

/** What memory did while the selected module ran: spans, time, bytes when it first
 * started and last stopped, and the most at any of its samples (totals per sample). */
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

/** The largest storages alive at some moment of [t0, t1], biggest first (at most top). */
export function liveIn(largest, t0, t1, top = 8) {
  return (largest || []).filter((r) => r.start <= t1 && (r.end === null || r.end === undefined || r.end >= t0)).slice(0, top);
}

/** @typedef {import("./_contract_types").MemoryTimelineTraits} Traits the synced traits (labkit/views/_contract.py) */
/** @param {import("./_contract_types").RenderContext<Traits>} ctx anywidget's model and element */
function render({ model, el }) {
  ensureStyles();
  const clipId = uid("lk-mem-clip"); // ids are page-wide: this view's own
  const root = h("div", { class: "lk-view lk-memory" });
  const body = h("div", { class: "lk-canvas", style: "cursor:crosshair" });
  const legend = h("div", { class: "lk-toolbar lk-mem-legend" });
  const mono = "font-family:var(--jp-code-font-family,monospace);font-size:11px;padding:2px 8px;color:var(--lk-fg)";
  const selLine = h("div", { class: "lk-mem-sel", style: mono });
  const live = h("div", { class: "lk-mem-live", style: mono });
  root.append(legend, body, selLine, live);
  el.appendChild(root);
  const tip = tooltip(body);
  let zoom = null; // [t0, t1] the user dragged across

  function draw() {
    // the chart keeps its own height; the selection line and the live storages go below
    // it (a fixed view height would squeeze the chart, and the SVG would shrink its text)
    root.style.height = "auto";
    body.style.flex = "none";
    body.style.height = `${(model.get("height") || 360) - 40}px`;
    const s = model.get("samples") || {};
    const n = (s.time || []).length;
    if (!n) {
      legend.innerHTML = "";
      body.innerHTML = `<div class="lk-empty">${esc(model.get("empty_message"))}</div>`;
      return;
    }
    const W = body.clientWidth || 760;
    const H = (model.get("height") || 360) - 40;
    const m = { l: 64, r: 16, t: 16, b: 26 };
    const full0 = s.time[0];
    const full1 = s.time[n - 1] > full0 ? s.time[n - 1] : full0 + 1;
    const [t0, t1] = zoom || [full0, full1];
    const stacks = stack(s.bytes);
    const peak = peakOf(s.bytes, n);
    // the byte axis from what is shown: the largest total inside the time range
    let shownMax = 0;
    for (let i = 0; i < n; i++) {
      const inside = s.time[i] >= t0 && s.time[i] <= t1;
      const next = i + 1 < n && s.time[i + 1] >= t0 && s.time[i] < t0; // the step into view
      if (inside || next) shownMax = Math.max(shownMax, stacks[stacks.length - 1][i]);
    }
    const ymax = shownMax || peak.total || 1;
    root.dataset.ymax = String(ymax);
    if (zoom) root.dataset.zoom = `${t0},${t1}`;
    else delete root.dataset.zoom;
    const X = (t) => m.l + ((t - t0) / (t1 - t0)) * (W - m.l - m.r);
    const Y = (b) => H - m.b - (b / ymax) * (H - m.t - m.b) * 0.92;
    let g = `<defs><clipPath id="${clipId}"><rect x="${m.l}" y="0" width="${W - m.l - m.r}" height="${H}"/></clipPath></defs><g clip-path="url(#${clipId})">`;
    for (const [phase, a, b] of phaseRuns(s.phase)) {
      const xa = X(s.time[a]);
      const xb = X(s.time[Math.min(b + 1, n - 1)]);
      g += `<rect class="lk-phase" data-phase="${esc(phase)}" x="${xa}" y="${m.t}" width="${Math.max(1, xb - xa)}" height="${H - m.t - m.b}" style="fill:${PHASE_COLORS[phase] || "var(--lk-fg2)"};fill-opacity:.08"/>`;
      // a label only where the band can hold it (never a cut-off "forwar")
      if (xb - xa >= phase.length * 6 + 4)
        g += `<text x="${(xa + xb) / 2}" y="${m.t + 11}" font-size="10" text-anchor="middle" style="fill:var(--lk-fg)">${esc(phase)}</text>`;
    }
    // where the selected module ran: an outlined band under the areas
    const sel = model.get("selected");
    const runs = moduleSpans(s.module, sel);
    for (const [a, b] of runs) {
      const xa = X(s.time[a]);
      const xb = X(s.time[Math.min(b + 1, n - 1)]);
      g += `<rect class="lk-sel-span" x="${xa}" y="${m.t}" width="${Math.max(1.5, xb - xa)}" height="${H - m.t - m.b}" style="fill:var(--lk-accent);fill-opacity:.18;stroke:var(--lk-accent);stroke-opacity:.6"/>`;
    }
    const ran = whileRunning(s.time, stacks[stacks.length - 1], runs);
    selLine.innerHTML = !sel
      ? ""
      : ran
        ? `<b>${esc(sel)}</b> ran in ${ran.spans} span${ran.spans === 1 ? "" : "s"}, ${esc(fmtTime(ran.time))} in all; live bytes ${esc(fmtBytes(ran.start))} before it, ${esc(fmtBytes(ran.end))} at its last sample, most ${esc(fmtBytes(ran.most))}`
        : `<b>${esc(sel)}</b>: no memory sample was taken while it ran`;
    stacks.forEach((top, c) => {
      const below = c ? stacks[c - 1] : null;
      let d = "";
      for (let i = 0; i < n; i++) d += `${i ? "L" : "M"}${X(s.time[i]).toFixed(1)},${Y(top[i]).toFixed(1)}`;
      for (let i = n - 1; i >= 0; i--) d += `L${X(s.time[i]).toFixed(1)},${Y(below ? below[i] : 0).toFixed(1)}`;
      const cat = s.categories[c];
      g += `<path class="lk-area" data-cat="${esc(cat)}" d="${d}Z" fill="${esc(s.colors[c])}" fill-opacity=".85"/>`;
    });
    g += "</g>";
    for (let j = 0; j <= 4; j++) {
      const b = (ymax * j) / 4;
      g += `<line x1="${m.l}" x2="${W - m.r}" y1="${Y(b)}" y2="${Y(b)}" style="stroke:var(--lk-fg)" stroke-opacity=".1"/>`;
      g += `<text x="${m.l - 4}" y="${Y(b) + 3}" font-size="10" text-anchor="end" style="fill:var(--lk-fg)">${esc(fmtBytes(b))}</text>`;
    }
    g += `<text x="${m.l}" y="${H - 6}" font-size="10" style="fill:var(--lk-fg)">${esc(fmtTime(t0))}</text>`;
    g += `<text x="${W - m.r}" y="${H - 6}" font-size="10" text-anchor="end" style="fill:var(--lk-fg)">${esc(fmtTime(t1))}</text>`;
    const px = X(s.time[peak.index]);
    const peakShown = s.time[peak.index] >= t0 && s.time[peak.index] <= t1;
    // the module or call at the peak as the summary names it (a backward sample has none)
    const mod = s.peak_where || s.module[peak.index] || "-";
    if (peakShown)
      g += `<line class="lk-peak" x1="${px}" x2="${px}" y1="${m.t}" y2="${H - m.b}" style="stroke:var(--lk-error)" stroke-dasharray="4 3"/>`;
    const peakText = `peak ${fmtBytes(peak.total)} · ${mod}`;
    const flip = px + 4 + peakText.length * 6 > W - m.r; // near the right edge: label on the left
    // (and never higher than under the phase labels, which sit at the top)
    if (peakShown)
      g += `<text class="lk-peak-label" x="${flip ? px - 4 : px + 4}" y="${Math.max(Y(peak.total) - 4, m.t + 24)}" font-size="10.5" text-anchor="${flip ? "end" : "start"}" style="fill:var(--lk-error)">${esc(peakText)}</text>`;
    g += `<line class="lk-cursor" x1="0" x2="0" y1="${m.t}" y2="${H - m.b}" style="stroke:var(--lk-fg)" stroke-opacity=".5" visibility="hidden"/>`;
    g += `<rect class="lk-brush" x="0" y="${m.t}" width="0" height="${H - m.t - m.b}" style="fill:var(--lk-accent);fill-opacity:.15" visibility="hidden"/>`;
    body.innerHTML = `<svg width="100%" height="${H}" viewBox="0 0 ${W} ${H}"><title>drag across to zoom, double-click to see the whole step, click to select the module running then</title>${g}</svg>`;
    legend.innerHTML = `${s.categories
      .map(
        (c, j) =>
          `<span style="display:inline-flex;align-items:center;gap:3px"><span class="lk-swatch" style="background:${esc(s.colors[j])}"></span>${esc(c)}</span>`,
      )
      .join(
        " ",
      )}<span class="lk-spacer"></span><span>peak ${esc(fmtBytes(peak.total))} at ${esc(mod)} (${esc(s.phase[peak.index])})</span>`;
    // what was live in the range shown: the recording's biggest storages with their lifetimes
    const rows = zoom ? liveIn(s.largest, t0, t1) : liveIn(s.largest, s.time[peak.index], s.time[peak.index]);
    live.innerHTML = rows.length
      ? `<div style="opacity:.8">largest storages live ${zoom ? `in ${esc(fmtTime(t0))} – ${esc(fmtTime(t1))}` : "at the peak"}:</div>` +
        rows
          .map(
            (r) =>
              `<div>${esc(fmtBytes(r.bytes).padStart(11))}  ${esc(r.category.padEnd(12))} ${esc(r.module || "(outside modules)")} ${esc(r.op || "")} ${esc(r.site || "")}</div>`,
          )
          .join("")
      : "";
    const svgEl = body.querySelector("svg");
    const cursor = svgEl.querySelector(".lk-cursor");
    const brush = svgEl.querySelector(".lk-brush");
    const toX = (e) => {
      const r = svgEl.getBoundingClientRect();
      return Math.min(W - m.r, Math.max(m.l, ((e.clientX - r.left) / r.width) * W));
    };
    const toT = (x) => t0 + ((x - m.l) / (W - m.l - m.r)) * (t1 - t0);
    const sampleAt = (x) => {
      let i = 0;
      while (i < n - 1 && X(s.time[i + 1]) <= x) i++;
      return i;
    };
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
      if (b - a < 4) {
        // a click: select the module running at that moment (the graph and profile follow)
        const i = sampleAt(to);
        if (s.module[i] && s.module[i] !== model.get("selected")) {
          model.set("selected", s.module[i]);
          model.save_changes();
        }
        return;
      }
      zoom = [toT(a), toT(b)];
      draw();
    });
    svgEl.addEventListener("dblclick", () => {
      zoom = null;
      draw();
    });
    svgEl.addEventListener("pointermove", (e) => {
      if (from !== null && e.buttons & 1) {
        const to = toX(e);
        brush.setAttribute("x", Math.min(from, to));
        brush.setAttribute("width", Math.abs(to - from));
        brush.setAttribute("visibility", "visible");
        tip.hide();
        return;
      }
      const r = svgEl.getBoundingClientRect();
      const i = sampleAt(((e.clientX - r.left) / r.width) * W);
      cursor.setAttribute("x1", X(s.time[i]));
      cursor.setAttribute("x2", X(s.time[i]));
      cursor.setAttribute("visibility", "visible");
      let html = `<div><b>${esc(fmtTime(s.time[i]))}</b> · ${esc(s.phase[i])} · ${esc(s.module[i] || "-")}</div>`;
      let total = 0;
      s.categories.forEach((c, j) => {
        total += s.bytes[j][i];
        html += `<div><span class="lk-tip-k">${esc(c)}:</span> ${esc(fmtBytes(s.bytes[j][i]))}</div>`;
      });
      html += `<div><b>total: ${esc(fmtBytes(total))}</b></div>`;
      tip.show(html, e.clientX, e.clientY);
    });
    svgEl.addEventListener("pointerleave", () => {
      tip.hide();
      cursor.setAttribute("visibility", "hidden");
    });
    body.appendChild(tip.el);
  }
  let lastW = 0;
  const ro = new ResizeObserver(() => {
    const w = body.clientWidth;
    if (w && w !== lastW) {
      lastW = w;
      draw();
    }
  });
  ro.observe(body);
  model.on("change:samples", draw);
  model.on("change:height", draw);
  model.on("change:selected", draw);
  draw();
  return () => {
    ro.disconnect();
    model.off("change:samples", draw);
    model.off("change:height", draw);
    model.off("change:selected", draw);
  };
}

export default { render };
