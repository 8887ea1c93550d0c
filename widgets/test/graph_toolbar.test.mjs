import assert from "node:assert/strict";
import { test } from "node:test";
import { colorScale } from "../src/_graphcore.js";
import { legendHtml, metricDefs } from "../src/_graph_toolbar.js";
import { fmtBytes } from "../src/_shared.js";
import { graph } from "./_graph_fixture.mjs";

test("the metric list, labels and units come from the payload, in its order", () => {
  const defs = metricDefs(graph.metrics);
  assert.deepEqual(
    defs.map((d) => [d.key, d.label, d.unit]),
    [
      ["fwd_time", "forward time", "time"],
      ["params", "parameters", "count"],
      ["activations", "activation memory", "bytes"],
    ],
  );
  assert.equal(defs[0].fmt(0.0125), "12.5 ms");
  assert.equal(defs[1].fmt(1234567), "1.23M");
  assert.equal(defs[2].fmt(1536), "1.5 KiB");
  assert.throws(() => metricDefs({ x: ["x", "furlongs"] }), /furlongs/);
  assert.deepEqual(metricDefs(undefined), []);
});

test("legend: min and max in the metric's unit, or what was not recorded", () => {
  const [, , bytes] = metricDefs(graph.metrics);
  const html = legendHtml(colorScale([1024, 0, 1024 ** 3]), bytes);
  assert.ok(html.startsWith(`<span>${fmtBytes(1024)}</span>`));
  assert.match(html, /<span>1 GiB<\/span><span>\(log\)<\/span>$/);
  assert.equal(legendHtml(colorScale([0, 0]), bytes), "<span>no activation memory recorded</span>");
});
