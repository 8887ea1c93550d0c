// Pure parts of the memory timeline: the spans where a selected module ran, and what
// memory did meanwhile.
import assert from "node:assert/strict";
import { test } from "node:test";

import { moduleSpans, whileRunning } from "../src/memory.js";

// samples as labkit records them: the module running at each (nested paths, "" between)
const modules = ["", "stem", "blocks.0", "blocks.0.conv1", "blocks.0", "blocks.1", "blocks.10", "head", "blocks.0.bn1", ""];
const times = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
const totals = [10, 20, 30, 45, 40, 50, 60, 55, 70, 65];

test("a module's spans include the modules inside it, not its namesakes", () => {
  assert.deepEqual(moduleSpans(modules, "blocks.0"), [
    [2, 4],
    [8, 8],
  ]);
  assert.deepEqual(moduleSpans(modules, "blocks.1"), [[5, 5]]); // not blocks.10
  assert.deepEqual(moduleSpans(modules, "head"), [[7, 7]]);
  assert.deepEqual(moduleSpans(modules, "nowhere"), []);
  assert.deepEqual(moduleSpans(modules, null), []);
  assert.deepEqual(moduleSpans(modules, ""), []); // the root is not a selection
});

test("while it ran: time up to the next sample, bytes before, at its last sample, most", () => {
  const ran = whileRunning(times, totals, moduleSpans(modules, "blocks.0"));
  // spans [2,4] -> times 2..5 (3 s) and [8,8] -> 8..9 (1 s)
  assert.deepEqual(ran, { spans: 2, time: 4, start: 20, end: 70, most: 70 });
  assert.equal(whileRunning(times, totals, []), null);
  // a span at the very end lasts until the last sample
  assert.deepEqual(whileRunning(times, totals, [[9, 9]]), { spans: 1, time: 0, start: 70, end: 65, most: 65 });
});
