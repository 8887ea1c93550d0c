// Pure helpers of the runs view (no DOM): the table's columns, sorting and filtering, and
// each metric's curves of the chosen runs as the charts take them.

/** Columns of the runs table: fixed ones, the last/best of the charted metrics, then hparams. */
export function columns(rows, metrics) {
  const fixed = [
    { key: "name", label: "run", get: (r) => r.name },
    { key: "status", label: "status", get: (r) => r.status },
    { key: "steps", label: "steps", get: (r) => r.steps, num: true },
    { key: "wall_time", label: "wall (s)", get: (r) => r.wall_time, num: true },
  ];
  const figs = metrics.flatMap((m) => [
    { key: `last:${m}`, label: `last ${m}`, get: (r) => r.last?.[m], num: true },
    { key: `best:${m}`, label: `best ${m}`, get: (r) => r.best?.[m], num: true },
  ]);
  const names = [...new Set(rows.flatMap((r) => Object.keys(r.hparams || {})))];
  const varying = names.filter((k) => new Set(rows.map((r) => JSON.stringify(r.hparams?.[k]))).size > 1);
  const same = names.filter((k) => !varying.includes(k));
  const hp = [...varying, ...same].map((k) => ({
    key: `hp:${k}`,
    label: k,
    get: (r) => r.hparams?.[k],
    num: rows.every((r) => {
      const v = r.hparams?.[k];
      return v == null || typeof v === "number";
    }),
  }));
  return [...fixed, ...figs, ...hp];
}

/** Rows sorted by column `key` (missing values last, whatever the direction). */
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
 * `column>value`, `column=value` (a column by its label or key) or plain text found in
 * the run's name, status or hparams.
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
  const tests = words.map((w) => {
    const m = w.match(/^([^<>=]+)(<=|>=|<|>|=)(.+)$/);
    const col = m && byName.get(m[1].toLowerCase());
    if (col) {
      const [, , op, raw] = m;
      const num = Number(raw);
      return (r) => {
        const v = col.get(r);
        if (v == null) return false;
        if (op === "=") return String(v).toLowerCase() === raw.toLowerCase() || (Number.isFinite(num) && v === num);
        if (!Number.isFinite(num) || typeof v !== "number") return false;
        return op === "<" ? v < num : op === ">" ? v > num : op === "<=" ? v <= num : v >= num;
      };
    }
    const text = w.toLowerCase();
    return (r) => `${r.name} ${r.status} ${JSON.stringify(r.hparams || {})}`.toLowerCase().includes(text);
  });
  return rows.filter((r) => tests.every((t) => t(r)));
}

/** One metric's curves of the chosen runs, keyed by run name: {run: {x, t, y}}. */
export function metricSeries(curves, metric, runs) {
  const out = {};
  for (const name of runs) {
    const c = curves[name]?.[metric];
    if (c?.x?.length) out[name] = c;
  }
  return out;
}

/** A number for the table: 4 significant digits, exponent for very large or small. */
export function fmtCell(v) {
  if (v == null) return "-";
  if (typeof v !== "number") return String(v);
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v) && Math.abs(v) < 1e7) return String(v);
  return Math.abs(v) >= 1e5 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(2) : String(+v.toPrecision(4));
}
