// Formatters shared by every labkit widget: bytes, durations, counts, percents; and
// the WCAG colour arithmetic that picks text colours on data fills; uid() for SVG ids.
// No DOM; unit-tested by widgets/test/_shared.test.mjs.

const BYTE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
const COUNT_UNITS = ["", "K", "M", "G", "T", "P"];

/** @param {unknown} x @returns {x is null | undefined} not a finite number (shown as "-") */
function bad(x) {
  return typeof x !== "number" || !Number.isFinite(x);
}

/** Three significant digits, without trailing zeros past the point. @param {number} x */
function sig3(x) {
  const a = Math.abs(x);
  const digits = a >= 100 ? 0 : a >= 10 ? 1 : 2;
  const s = x.toFixed(digits);
  return s.includes(".") ? s.replace(/\.?0+$/, "") : s;
}

/** 1536 -> "1.5 KiB"; binary units as torch.cuda.memory_summary prints them. @param {number | null | undefined} n */
export function fmtBytes(n) {
  if (bad(n)) return "-";
  const sign = n < 0 ? "-" : "";
  let v = Math.abs(n);
  let i = 0;
  while (v >= 1024 && i < BYTE_UNITS.length - 1) {
    v /= 1024;
    i += 1;
  }
  return i === 0 ? `${sign}${v} B` : `${sign}${sig3(v)} ${BYTE_UNITS[i]}`;
}

/** Seconds -> "12.3 ms", "1.5 s", "2 min 5 s". @param {number | null | undefined} seconds */
export function fmtTime(seconds) {
  if (bad(seconds)) return "-";
  const sign = seconds < 0 ? "-" : "";
  const s = Math.abs(seconds);
  if (s === 0) return "0 s";
  if (s < 1e-6) return `${sign}${sig3(s * 1e9)} ns`;
  if (s < 1e-3) return `${sign}${sig3(s * 1e6)} us`;
  if (s < 1) return `${sign}${sig3(s * 1e3)} ms`;
  if (s < 60) return `${sign}${sig3(s)} s`;
  const min = Math.floor(s / 60);
  if (min < 60) return `${sign}${min} min ${Math.round(s - min * 60)} s`;
  const h = Math.floor(min / 60);
  return `${sign}${h} h ${min - h * 60} min`;
}

/** 1234567 -> "1.23M" (FLOPs, parameters, elements); integers under 1000 as is. @param {number | null | undefined} n */
export function fmtCount(n) {
  if (bad(n)) return "-";
  const sign = n < 0 ? "-" : "";
  let v = Math.abs(n);
  let i = 0;
  while (v >= 1000 && i < COUNT_UNITS.length - 1) {
    v /= 1000;
    i += 1;
  }
  return i === 0 ? `${sign}${sig3(v)}` : `${sign}${sig3(v)}${COUNT_UNITS[i]}`;
}

/** 0.1234 -> "12.3%". @param {number | null | undefined} fraction */
export function fmtPercent(fraction) {
  if (bad(fraction)) return "-";
  return `${sig3(fraction * 100)}%`;
}

/** 1.5 -> "1.50x" (speed-ups and ratios, as the benchmarks print them). @param {number | null | undefined} r */
export function fmtRatio(r) {
  if (bad(r)) return "-";
  return `${r.toFixed(2)}x`;
}

/** WCAG relative luminance of an sRGB colour [r, g, b] (0-255). @param {number[]} rgb */
export function luminance([r, g, b]) {
  /** @param {number} v */
  const f = (v) => {
    const c = v / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
}

/** WCAG contrast ratio of two sRGB colours (1 to 21). @param {number[]} a @param {number[]} b */
export function contrast(a, b) {
  const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p);
  return (x + 0.05) / (y + 0.05);
}

/** [r, g, b] of "rgb(r,g,b)" or "#rrggbb". @param {string} color */
export function rgbOf(color) {
  const m = /rgba?\(\s*(\d+)[,\s]+(\d+)[,\s]+(\d+)/.exec(color);
  if (m) return [m[1], m[2], m[3]].map(Number);
  return [1, 3, 5].map((i) => parseInt(color.slice(i, i + 2), 16));
}

/** Black or white, whichever contrasts more with the fill (always >= 4.58:1). @param {string} fill */
export function inkOn(fill) {
  const c = rgbOf(fill);
  return contrast(c, [0, 0, 0]) >= contrast(c, [255, 255, 255]) ? "#000" : "#fff";
}

// Page-unique ids for SVG defs (markers, clip paths): ids are page-wide, and anywidget
// may load one bundle once per view, so a random prefix per load and a counter.
const UID_BASE = Math.random().toString(36).slice(2, 8);
let uidCount = 0;

/** "lk-arrow" -> "lk-arrow-k3x9q1": a new page-unique id each call. @param {string} prefix */
export function uid(prefix) {
  uidCount += 1;
  return `${prefix}-${UID_BASE}${uidCount}`;
}
