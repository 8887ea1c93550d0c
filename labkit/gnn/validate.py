"""Check a node-classification graph before training, with errors that name what to fix."""

from __future__ import annotations

from typing import NoReturn

import torch
from torch import Tensor

MASKS = ("train_mask", "val_mask", "test_mask")


class GraphDataError(ValueError):
    """A graph that cannot be trained on; the message names the tensor and the bad value."""


def _fail(where: str, msg: str) -> NoReturn:
    raise GraphDataError(f"{where}: {msg}")


def validate_graph(  # noqa: C901 - one flat check per field, each naming what to fix
    data: object, *, name: str = "data", require_train_mask: bool = True
) -> None:
    """Check the tensors of a node-classification graph; raise before training if one is bad.

    Checks: ``x`` is a 2-D floating tensor; ``edge_index`` is an int64 tensor of shape
    ``[2, num_edges]`` whose values lie in ``[0, num_nodes)``; ``y`` has one label per
    node, integer, non-negative; each mask present (``train_mask``, ``val_mask``,
    ``test_mask``) is boolean with one entry per node and selects at least one node, and
    ``train_mask`` is present when ``require_train_mask``.

    Args:
        data: A PyG ``Data`` (anything with those attributes).
        name: How the graph is called in error messages.
        require_train_mask: Fail when ``train_mask`` is missing.

    Returns:
        ``None``; raises :class:`GraphDataError` naming the tensor and the bad value.

    Example:
        >>> from labkit.gnn import karate
        >>> data = karate()
        >>> data.edge_index[0, 3] = 99
        >>> validate_graph(data)
        Traceback (most recent call last):
        ...
        labkit.gnn.validate.GraphDataError: data.edge_index: value 99 at [0, 3] is out of range; ...
    """
    x = getattr(data, "x", None)
    if not isinstance(x, Tensor):
        _fail(f"{name}.x", f"node features must be a tensor, got {type(x).__name__}")
    if x.dim() != 2:
        _fail(f"{name}.x", f"must be 2-D [num_nodes, num_features], got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        _fail(f"{name}.x", f"must be a floating tensor, got dtype {x.dtype}")
    num_nodes = x.size(0)
    if num_nodes == 0:
        _fail(f"{name}.x", "the graph has no nodes (x has 0 rows)")

    _check_edge_index(getattr(data, "edge_index", None), num_nodes, f"{name}.edge_index")

    y = getattr(data, "y", None)
    if not isinstance(y, Tensor):
        _fail(f"{name}.y", f"labels must be a tensor, got {type(y).__name__}")
    if y.dim() != 1:
        _fail(f"{name}.y", f"must be 1-D [num_nodes] class indices, got shape {tuple(y.shape)}")
    if y.size(0) != num_nodes:
        _fail(
            f"{name}.y",
            f"has {y.size(0)} labels but {name}.x has {num_nodes} nodes "
            f"(features and labels must have the same length)",
        )
    if y.is_floating_point() or y.dtype == torch.bool:
        _fail(f"{name}.y", f"class indices must be an integer tensor, got dtype {y.dtype}")
    if y.numel() and int(y.min()) < 0:
        i = int(torch.argmin(y))
        _fail(f"{name}.y", f"label {int(y[i])} at node {i} is negative")

    for mask_name in MASKS:
        mask = getattr(data, mask_name, None)
        where = f"{name}.{mask_name}"
        if mask is None:
            if mask_name == "train_mask" and require_train_mask:
                _fail(where, "missing: set a boolean mask of the nodes to train on")
            continue
        if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
            got = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
            _fail(where, f"must be a boolean tensor, got {got}")
        if mask.shape != (num_nodes,):
            _fail(
                where,
                f"has shape {tuple(mask.shape)}, expected ({num_nodes},) (one entry per node)",
            )
        if not bool(mask.any()):
            _fail(where, f"selects no nodes (all {num_nodes} entries are False)")


def _check_edge_index(ei: object, num_nodes: int, where: str) -> None:
    if not isinstance(ei, Tensor):
        _fail(where, f"must be a tensor, got {type(ei).__name__}")
    if ei.dtype != torch.long:
        _fail(
            where,
            f"must have dtype torch.int64 (long), got {ei.dtype}; convert with edge_index.long()",
        )
    if ei.dim() != 2 or ei.size(0) != 2:
        hint = " (transposed? use edge_index.t())" if ei.dim() == 2 and ei.size(1) == 2 else ""
        _fail(where, f"must have shape [2, num_edges], got {tuple(ei.shape)}{hint}")
    if ei.numel() == 0:
        return
    bad = (ei < 0) | (ei >= num_nodes)
    if bool(bad.any()):
        r, c = (int(v) for v in bad.nonzero()[0])
        _fail(
            where,
            f"value {int(ei[r, c])} at [{r}, {c}] is out of range; node indices must "
            f"lie in [0, {num_nodes}) for {num_nodes} nodes "
            f"({int(bad.sum())} bad entries in all)",
        )
