// Unit -> formatter: the payloads name each figure's unit (labkit/views/_contract.py
// UNITS: "text", "int", "count", "time", "bytes"), and the views format it from here, so
// labels and units are written once, in Python. Pure; tested by widgets/test/profile.test.mjs.
import { fmtBytes, fmtCount, fmtTime } from "./_shared.js";

/** @param {unknown} v */
const asText = (v) => (v === null || v === undefined ? "" : String(v));
/** @param {unknown} v */
const asInt = (v) => (typeof v === "number" && Number.isFinite(v) ? String(v) : "-");

/** The formatter of each unit the payloads use. @type {Record<import("./_contract_types").Unit, (v: any) => string>} */
export const FORMATTERS = { text: asText, int: asInt, count: fmtCount, time: fmtTime, bytes: fmtBytes };

/** The formatter of a unit; an unknown unit is an error naming the known ones. @param {string} unit */
export function formatterOf(unit) {
  const f = FORMATTERS[/** @type {import("./_contract_types").Unit} */ (unit)];
  if (!f) throw new Error(`labkit: unknown unit ${JSON.stringify(unit)} in a payload (known: ${Object.keys(FORMATTERS).join(", ")})`);
  return f;
}
