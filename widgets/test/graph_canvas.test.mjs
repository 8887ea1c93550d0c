// The canvas drawing's hit testing: what is under a point, through a grid of cells.
import { test } from "node:test";
import assert from "node:assert/strict";
import { gridOf, hitIn } from "../src/_graph_canvas.js";

const layout = {
  pos: new Map([
    [1, { x: 0, y: 0, w: 600, h: 400 }], // a frame
    [2, { x: 20, y: 30, w: 100, h: 36 }], // a box with hidden insides, in the frame
    [3, { x: 300, y: 300, w: 80, h: 36 }], // a box crossing grid cells (256 units)
    [4, { x: 250, y: 100, w: 300, h: 200 }], // a frame inside the frame
  ]),
};
const groups = new Set([1, 4]);
const hasKids = { 2: 1, 3: 0 };
const grid = gridOf(layout, [1, 2, 3, 4]);
const at = (x, y) => hitIn(grid, layout, (k) => groups.has(k), hasKids, x, y);

test("boxes, their toggle, frames' headers and toggles; nothing elsewhere", () => {
  assert.deepEqual(at(50, 50), { k: 2, part: "box" });
  assert.deepEqual(at(112, 35), { k: 2, part: "expand" }); // top-right corner of a box
  assert.deepEqual(at(340, 320), { k: 3, part: "box" }); // across cells
  assert.deepEqual(at(8, 8), { k: 1, part: "collapse" });
  assert.deepEqual(at(200, 10), { k: 1, part: "frame" });
  assert.deepEqual(at(400, 110), { k: 4, part: "frame" }); // the inner frame wins
  assert.equal(at(200, 200), null); // inside a frame, on no box
  assert.equal(at(900, 900), null);
});
