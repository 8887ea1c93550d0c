// The GraphView's tooltip: path, type, shapes, figures and graph breaks of one box, as
// HTML. Pure (no DOM); unit-tested by widgets/test/graph_draw.test.mjs.
import { rolledPath } from "./_graph_crumb.js";
import { esc } from "./_ui.js";

/** @type {Record<string, string>} */
const KIND_NAMES = { i: "input", o: "output", m: "module", p: "op" };

/**
 * @param {import("./_graphcore.js").GraphPayload} graph the graph payload
 * @param {import("./_graphcore.js").Rolled} rolled rolledInfo(graph)
 * @param {number} k payload index of the box
 * @param {Record<string, number[]>} values metric key -> value per payload node
 * @param {import("./_graph_toolbar.js").MetricDef[]} metrics metricDefs of the payload
 * @param {import("./_graph_marks.js").Mark | undefined} mark this box's graph breaks (liftMarks), or undefined
 */
export function tipHtml(graph, rolled, k, values, metrics, mark) {
  const kind = graph.kind[k];
  // a box in a rolled block stands for every call of it: its path names the range
  const { path: rpath, times } = rolledPath(graph, rolled, k);
  const path = kind === "m" ? rpath || `(root) ${graph.model || ""}` : rpath;
  const tens = (/** @type {number[]} */ list) => list.map((/** @type {number} */ t) => esc(graph.tensors[t])).join(", ") || "-";
  const badge = times > 1 ? ` <b>×${times}</b>` : "";
  let html = `<div><b>${esc(path)}</b>${badge} <span class="lk-tip-k">${esc(graph.type[k])} · ${KIND_NAMES[kind]}</span></div>`;
  if (times > 1) html += `<div>${times} identical calls; figures per call (mean), then the ×${times} total</div>`;
  if (graph.total_runs > 1 && graph.runs)
    html += `<div>ran in ${graph.runs[k]} of ${graph.total_runs} merged runs; figures are per-run means</div>`;
  html += `<div><span class="lk-tip-k">in:</span> ${tens(graph.ins[k])}</div>`;
  html += `<div><span class="lk-tip-k">out:</span> ${tens(graph.outs[k])}</div>`;
  for (const { key, label, fmt } of metrics) {
    const v = (values[key] || [])[k];
    if (!v) continue;
    const shown = times > 1 ? `${esc(fmt(v / times))} <span class="lk-tip-k">(×${times} total ${esc(fmt(v))})</span>` : esc(fmt(v));
    html += `<div><span class="lk-tip-k">${esc(label)}:</span> ${shown}</div>`;
  }
  if (mark) html += breaksHtml(mark);
  return html;
}

/** @param {import("./_graph_marks.js").Mark} mark */
function breaksHtml(mark) {
  /** @param {string} text */
  const line = (text) => `<div style="white-space:normal">${esc(text)}</div>`;
  let html = "";
  if (mark.own.length) {
    const n = mark.own.length;
    html += `<div class="lk-error-text"><b>graph break${n > 1 ? `s (${n})` : ""} here:</b></div>`;
    html += mark.own.map(line).join("");
  }
  if (mark.inside.length) {
    const n = mark.inside.length;
    html += `<div class="lk-error-text"><b>${n} graph break${n > 1 ? "s" : ""} inside</b> (expand to see where):</div>`;
    html += mark.inside.map(line).join("");
  }
  return html;
}
