// The function-length rule of `npm run check` (scripts/fn_length.mjs): which nodes are
// functions, what they are called, how long they are, and what is a finding.
import assert from "node:assert/strict";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { ALLOWED, findings, functionsOf, MAX_LINES, scan } from "../scripts/fn_length.mjs";

const SOURCE = `function top(a) {
  const inner = (x) => {
    return x + 1;
  };
  return inner(a);
}
const obj = {
  method() {
    return 1;
  },
  prop: function () {},
};
export default { render };
[1, 2].map((v) => v * 2);
`;

test("every function-like node, named by itself or what it is assigned to, with its lines", () => {
  const got = functionsOf("x.js", SOURCE).map((f) => [f.name, f.line, f.lines]);
  assert.deepEqual(got, [
    ["top", 1, 6], // its nested arrow counts inside it
    ["inner", 2, 3],
    ["method", 8, 3],
    ["prop", 11, 1],
    ["<anonymous>", 14, 1],
  ]);
});

test("findings: over the limit and not allowed, allowed but grown, allowed and no longer needed", () => {
  const fns = [
    { file: "a.js", name: "render", line: 3, lines: 12 },
    { file: "b.js", name: "draw", line: 1, lines: 11 },
    { file: "c.js", name: "ok", line: 1, lines: 10 },
  ];
  const allowed = new Map([
    ["a.js:render", 12],
    ["gone.js:old", 300],
  ]);
  const out = findings(fns, allowed, 10);
  assert.equal(out.length, 2);
  assert.match(out[0], /^b\.js:1: function draw is 11 lines \(at most 10\)/);
  assert.match(out[1], /^gone\.js:old: no longer over 10 lines: remove it from ALLOWED/);
  assert.match(findings(fns, new Map([["a.js:render", 11]]), 10)[0], /^a\.js:3: function render grew to 12 lines \(allowed 11/);
  assert.deepEqual(findings([{ file: "c.js", name: "ok", line: 1, lines: 10 }], new Map(), 10), []);
});

test("widgets/src: no function over the limit, none allowed to be", () => {
  assert.equal(ALLOWED.size, 0);
  const fns = scan(fileURLToPath(new URL("../src", import.meta.url)));
  assert.ok(fns.some((f) => f.file === "diff.js" && f.name === "render"));
  assert.deepEqual(findings(fns, ALLOWED), []);
  const longest = Math.max(...fns.map((f) => f.lines));
  assert.ok(longest <= MAX_LINES, `${longest} lines`);
});
