// Pure helpers of the runs view (no DOM): the table's columns, sorting and filtering, and
// each metric's curves of the chosen runs as the charts take them.

/** @typedef {import("./_contract_types").RunRow} RunRow */
/** @typedef {import("./_contract_types").RunCurve} RunCurve */
/** @typedef {{key: string, label: string, get: (r: RunRow) => any, num?: boolean}} Column a table column: its value in a row */

/**
 * Columns of the runs table: fixed ones, the last/best of the charted metrics, then hparams.
 * @param {RunRow[]} rows
 * @param {string[]} metrics
 * @returns {Column[]}
 */
export function columns(rows, metrics) {
  /** @type {Column[]} */
  const fixed = [
    { key: "name", label: "run", get: (r) => r.name },
    // what the run is now (running, crashed, or how it ended): `state` where the payload has
    // it, else the older `status`; `status=...` and `state=...` both filter on it
    { key: "status", label: "state", get: (r) => r.state ?? r.status },
    { key: "steps", label: "steps", get: (r) => r.steps, num: true },
    { key: "wall_time", label: "wall (s)", get: (r) => r.wall_time, num: true },
  ];
  const figs = metrics.flatMap(
    (m) =>
      /** @type {Column[]} */ ([
        { key: `last:${m}`, label: `last ${m}`, get: (r) => r.last?.[m], num: true },
        { key: `best:${m}`, label: `best ${m}`, get: (r) => r.best?.[m], num: true },
      ]),
  );
  const names = [...new Set(rows.flatMap((r) => Object.keys(r.hparams || {})))];
  const varying = names.filter((k) => new Set(rows.map((r) => JSON.stringify(r.hparams?.[k]))).size > 1);
  const same = names.filter((k) => !varying.includes(k));
  const hp = [...varying, ...same].map(
    (k) =>
      /** @type {Column} */ ({
        key: `hp:${k}`,
        label: k,
        get: (r) => r.hparams?.[k],
        num: rows.every((r) => {
          const v = r.hparams?.[k];
          return v == null || typeof v === "number";
        }),
      }),
  );
  return [...fixed, ...figs, ...hp];
}

/**
 * Rows sorted by column `key` (missing values last, whatever the direction).
 * @param {RunRow[]} rows
 * @param {Column[]} cols
 * @param {string} key
 * @param {boolean} [desc]
 */
export function sortRows(rows, cols, key, desc = false) {
  const col = cols.find((c) => c.key === key);
  if (!col) return rows.slice();
  const sign = desc ? -1 : 1;
  return rows.slice().sort((a, b) => {
    const x = col.get(a);
    const y = col.get(b);
    if (x == null && y == null) return 0;
    if (x == null) return 1;
    if (y == null) return -1;
    if (col.num) return sign * (x - y);
    return sign * String(x).localeCompare(String(y), undefined, { numeric: true });
  });
}

/**
 * Rows matching `query`: words that must all match. A word is `column<value`,
 * `column>value`, `column=value` (`<=`, `>=` too; a column by its label or key:
 * `lr`, `steps`, `last:val_acc`, `best:loss`; a bare metric name means its last value,
 * `val_acc>0.8` = `last:val_acc>0.8`) or plain text found in the run's name, status or
 * hparams. A comparison that names no column, or compares with a non-number, throws a
 * FilterError that says what to write instead (never a filter that silently matches
 * nothing).
 * @param {RunRow[]} rows
 * @param {Column[]} cols
 * @param {string} query
 */
export function filterRows(rows, cols, query) {
  const words = String(query || "")
    .trim()
    .split(/\s+/)
    .filter(Boolean);
  if (!words.length) return rows.slice();
  const byName = new Map(
    cols.flatMap((c) => [
      [c.label.toLowerCase(), c],
      [c.key.toLowerCase(), c],
    ]),
  );
  const metrics = [...new Set(rows.flatMap((r) => [...Object.keys(r.last || {}), ...Object.keys(r.best || {})]))];
  const tests = words.map((w) => {
    const m = w.match(/^([^<>=]+)(<=|>=|<|>|=)(.*)$/);
    if (!m) {
      if (/[<>=]/.test(w)) throw new FilterError(`"${w}": write a column, an operator and a value, as lr<0.05`);
      const text = w.toLowerCase();
      return (/** @type {RunRow} */ r) =>
        `${r.name} ${r.state ?? r.status} ${JSON.stringify(r.hparams || {})}`.toLowerCase().includes(text);
    }
    const [, name, op, raw] = m;
    const col = byName.get(name.toLowerCase()) || metricColumn(name, metrics);
    if (!col) {
      const near = [...byName.keys()].filter((k) => k.includes(name.toLowerCase()) || name.toLowerCase().includes(k.split(":").pop() || k));
      const hint = near.length
        ? `: did you mean ${near
            .slice(0, 3)
            .map((k) => `${k}${op}${raw}`)
            .join(" or ")}?`
        : "";
      throw new FilterError(`no column "${name}" in "${w}"${hint} (columns: ${cols.map((c) => c.key).join(", ")})`);
    }
    const num = Number(raw);
    if (raw === "") throw new FilterError(`"${w}": no value after ${op}`);
    if (op !== "=" && !Number.isFinite(num)) throw new FilterError(`"${w}": ${op} compares with a number, as ${name}${op}0.5`);
    return (/** @type {RunRow} */ r) => {
      const v = col.get(r);
      if (v == null) return false;
      if (op === "=") return String(v).toLowerCase() === raw.toLowerCase() || (Number.isFinite(num) && v === num);
      if (typeof v !== "number") return false;
      return op === "<" ? v < num : op === ">" ? v > num : op === "<=" ? v <= num : v >= num;
    };
  });
  return rows.filter((r) => tests.every((t) => t(r)));
}

/** A filter the runs table cannot read; its message says what to write. */
export class FilterError extends Error {}

/**
 * `val_acc` (a metric some run has, not a column shown) as the column of its last value.
 * @param {string} name
 * @param {string[]} metrics
 * @returns {Column | null}
 */
function metricColumn(name, metrics) {
  const m = metrics.find((k) => k.toLowerCase() === name.toLowerCase());
  return m ? { key: `last:${m}`, label: `last ${m}`, get: (/** @type {RunRow} */ r) => r.last?.[m], num: true } : null;
}

/**
 * One metric's curves of the chosen runs, keyed by run name: {run: {x, t, y}}.
 * @param {import("./_contract_types").RunCurves} curves
 * @param {string} metric
 * @param {string[]} runs
 */
export function metricSeries(curves, metric, runs) {
  /** @type {Record<string, RunCurve>} */
  const out = {};
  for (const name of runs) {
    const c = curves[name]?.[metric];
    if (c?.x?.length) out[name] = c;
  }
  return out;
}

/** A number for the table: 4 significant digits, exponent for very large or small. @param {unknown} v */
export function fmtCell(v) {
  if (v == null) return "-";
  if (typeof v !== "number") return String(v);
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v) && Math.abs(v) < 1e7) return String(v);
  return Math.abs(v) >= 1e5 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(2) : String(+v.toPrecision(4));
}
