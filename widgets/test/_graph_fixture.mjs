// A small graph payload shared by the graph view's node tests:
// x -> Net[ stem[conv], blocks[ b0[conv, relu, add], (b1, b2 rolled away) ], head ] -> out
// payload indices: 0 x, 1 Net, 2 stem, 3 conv, 4 blocks, 5 b0, 6 conv, 7 relu, 8 add, 9 head, 10 out
/** @type {import("../src/_contract_types").GraphPayload} */
export const graph = {
  key: "fixture",
  model: "Net",
  ids: [0, 1, 2, 3, 4, 5, 6, 7, 20, 30, 31],
  kind: "immpmmpppmo",
  parent: [-1, -1, 1, 2, 1, 4, 5, 5, 5, 1, -1],
  name: ["x", "", "stem", "conv2d", "blocks", "blocks.0", "conv2d", "relu", "add", "head", "output"],
  type: ["Tensor", "Net", "Conv2d", "conv2d", "Sequential", "Block", "conv2d", "relu", "add", "Linear", "Tensor"],
  ins: [[], [0], [0], [0], [1], [1], [1], [1], [1], [1], [2]],
  outs: [[0], [2], [1], [1], [1], [1], [1], [1], [1], [2], []],
  rolled: [[5, 3, "blocks.0-2"]],
  // the three calls of the rolled block, all shown by box 5 (b1, b2 are not in the payload)
  instances: {
    name: ["blocks.0", "blocks.1", "blocks.2"],
    node: [5, 5, 5],
    where: [
      [0, 0],
      [0, 1],
      [0, 2],
    ],
  },
  edges: [0, 3, 3, 6, 6, 7, 7, 8, 3, 8, 8, 9, 9, 10],
  edge_tensor: [0, 1, 1, 1, 1, 1, 2],
  tensors: ["2x3 float32", "2x8 float32", "2x10 float32"],
  runs: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
  total_runs: 1,
  metrics: { fwd_time: ["forward time", "time"], params: ["parameters", "count"], activations: ["activation memory", "bytes"] },
};
